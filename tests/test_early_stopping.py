"""Why did training stop? An early-stopping callback, said as information (FIT001, severity info) and in a healthy
verdict's headline: transformers' EarlyStoppingCallback from trainer_state.json (stateful_callbacks), Lightning's
EarlyStopping and Keras' EarlyStopping from their messages. Real HF Trainer and Lightning runs on tiny models; the
Keras lines quoted from a public thread."""

from __future__ import annotations

import torch
from test_overfitting import V, _rows, lightning_memoriser

from autopsy.pipeline import analyze


def _hf(out, patience: int | None):
    from transformers import EarlyStoppingCallback, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                         tie_word_embeddings=False))
    args = TrainingArguments(output_dir=str(out), num_train_epochs=60, per_device_train_batch_size=8, learning_rate=3e-3,
                             logging_steps=5, eval_strategy="steps", eval_steps=15, save_strategy="steps", save_steps=15,
                             report_to=[], use_cpu=True, seed=0, warmup_steps=5, load_best_model_at_end=True,
                             metric_for_best_model="eval_loss", save_total_limit=2)
    trainer = Trainer(model=model, args=args, train_dataset=_rows(24, 1), eval_dataset=_rows(32, 2),
                      callbacks=[EarlyStoppingCallback(early_stopping_patience=patience)] if patience else [],
                      data_collator=lambda r: {k: torch.tensor([x[k] for x in r]) for k in r[0]})
    trainer.train()
    return trainer.state


def test_hf_early_stopping_callback_is_named(tmp_path):
    state = _hf(tmp_path, 3)
    assert state.global_step < state.max_steps  # it did stop early
    dx = analyze(tmp_path).diagnosis
    stop = [f for f in dx.findings if f.code == "FIT001" and f.severity == "info"]
    want = f"Training stopped by early stopping at step {state.global_step} of {state.max_steps}"
    assert len(stop) == 1 and stop[0].title.startswith(want), [f.title for f in dx.findings]
    assert "early_stopping_patience 3" in stop[0].title
    assert any("best_model_checkpoint" in e.detail and "checkpoint-15" in e.detail for e in stop[0].evidence)
    assert dx.verdict.status == "healthy" and f"Note: {want}" in dx.verdict.headline


def test_lightning_early_stopping_message(tmp_path):
    import logging

    import lightning as L

    log = tmp_path / "train.log"
    handler = logging.FileHandler(log)  # what a console shows: Lightning's rank-zero info goes to its logger
    logging.getLogger("lightning.pytorch").addHandler(handler)
    try:
        lightning_memoriser(tmp_path, 150, 5, [L.pytorch.loggers.CSVLogger(str(tmp_path))],
                            [L.pytorch.callbacks.EarlyStopping(monitor="val_loss", patience=3, verbose=True)])
    finally:
        logging.getLogger("lightning.pytorch").removeHandler(handler)
        handler.close()
    assert "did not improve in the last 3 records" in log.read_text()
    stop = [f for f in analyze(tmp_path).diagnosis.findings if f.code == "FIT001" and f.severity == "info"]
    assert len(stop) == 1 and "val_loss did not improve in the last 3 validations (best 0.925)" in stop[0].title


# https://github.com/zzh8829/yolov3-tf2/issues/187 (tf.keras 2.x fit with EarlyStopping(verbose=1), as pasted)
KERAS = """Epoch 00046: saving model to checkpoints/yolov3_train_46.tf
11/11 [==============================] - 13s 1s/step - loss: 18.6522 - yolo_output_0_loss: 0.0844 - yolo_output_1_loss: 1.1834 - yolo_output_2_loss: 6.4805 - val_loss: 50.8860 - val_yolo_output_0_loss: 0.0998 - val_yolo_output_1_loss: 16.9227 - val_yolo_output_2_loss: 22.9586
Epoch 00046: early stopping
"""


def test_keras_early_stopping_line(tmp_path):
    (tmp_path / "log.txt").write_text(KERAS)
    dx = analyze(tmp_path).diagnosis
    stop = [f for f in dx.findings if f.code == "FIT001"]
    assert len(stop) == 1 and stop[0].title == "Training stopped by early stopping at epoch 46"
    assert stop[0].evidence[0].where == "line 3"


def test_run_that_reached_its_steps_is_not_called_early_stopped(tmp_path):
    """Guard: the same HF run with the callback's patience never reached (a patience above the evaluations left)."""
    state = _hf(tmp_path, 50)
    assert state.global_step == state.max_steps
    assert not [f for f in analyze(tmp_path).diagnosis.findings if f.code == "FIT001" and f.severity == "info"]

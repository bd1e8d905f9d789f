"""An LR set to ~0 (a typo, a unit slip) is not a schedule that stalled: LRZ001 says which. Real HF Trainer runs on a
tiny Llama with learning_rate 1e-10 and a constant schedule: the config's learning_rate is cited and the remedy is
the value, not the warmup; without the saved TrainingArguments, the LR constant at every log says the same."""

from __future__ import annotations

import torch
from test_overfitting import V, _rows

from autopsy.pipeline import analyze


def _train(out, lr: float, warmup: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                         tie_word_embeddings=False))
    args = TrainingArguments(output_dir=str(out), max_steps=40, per_device_train_batch_size=8, learning_rate=lr,
                             logging_steps=5, save_strategy="steps", save_steps=20, report_to=[], use_cpu=True, seed=0,
                             lr_scheduler_type="constant_with_warmup" if warmup else "constant", warmup_steps=warmup)
    Trainer(model=model, args=args, train_dataset=_rows(400, 1),
            data_collator=lambda r: {k: torch.tensor([x[k] for x in r]) for k in r[0]}).train()


def test_lr_set_to_1e_10_is_named_as_set(tmp_path):
    _train(tmp_path, 1e-10)
    dx = analyze(tmp_path).diagnosis
    assert dx.verdict.root_cause == "lr_schedule_stalled"
    f = [f for f in dx.findings if f.code == "LRZ001"][0]
    assert f.title == "The learning rate set is 1e-10: too small for any update to move the weights"
    assert f.evidence[0].detail == "learning_rate = 1e-10 in the config" and "warmup" not in f.remedies[0]
    # without the saved TrainingArguments: the LR constant at every log
    for args in tmp_path.glob("checkpoint-*/training_args.bin"):
        args.unlink()
    f = [f for f in analyze(tmp_path).diagnosis.findings if f.code == "LRZ001"][0]
    assert f.title.startswith("The learning rate set is 1e-10") and "a constant LR" in f.evidence[0].detail


def test_warmup_longer_than_the_run_is_still_the_schedule(tmp_path):
    """Guard: a normal LR whose warmup outlasts the run keeps the schedule's finding."""
    _train(tmp_path, 1e-4, warmup=400000)
    f = [f for f in analyze(tmp_path).diagnosis.findings if f.code == "LRZ001"]
    assert f and not f[0].title.startswith("The learning rate set is"), [x.title for x in f]

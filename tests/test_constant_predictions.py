"""A binary classifier that collapsed to one class (FLAT001): real HF Trainer runs of a tiny BERT classifier built in
code (the label: whether the first token is in the lower half of the vocabulary). At lr 0.05 it predicts one class at
every evaluation (eval_accuracy the class share each time, eval_loss never below ln 2), which read as healthy before;
at lr 1e-3 it learns (0.5 -> 0.905, the last evaluations equal: a converged model, not a constant one)."""

from __future__ import annotations

import torch

from autopsy.pipeline import analyze

V = 200


def _train(out, lr: float) -> list[float]:
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                     intermediate_size=64, num_labels=2, max_position_embeddings=64))

    def rows(n, seed):
        g = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(n):
            x = torch.randint(3, V, (16,), generator=g).tolist()
            out.append({"input_ids": x, "attention_mask": [1] * 16, "labels": int(x[0] < V // 2)})
        return out

    args = TrainingArguments(output_dir=str(out), num_train_epochs=4, per_device_train_batch_size=16, learning_rate=lr,
                             logging_steps=8, eval_strategy="steps", eval_steps=16, save_strategy="steps", save_steps=128,
                             report_to=[], use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows(512, 1), eval_dataset=rows(200, 2),
                      compute_metrics=lambda p: {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())},
                      data_collator=lambda r: {k: torch.tensor([x[k] for x in r]) for k in r[0]})
    trainer.train()
    return [h["eval_accuracy"] for h in trainer.state.log_history if "eval_accuracy" in h]


def test_collapsed_classifier_is_not_healthy(tmp_path):
    acc = _train(tmp_path, 0.05)
    assert len(set(acc)) == 1 and len(acc) == 8
    dx = analyze(tmp_path).diagnosis
    flat = [f for f in dx.findings if f.code == "FLAT001"]
    assert dx.verdict.status != "healthy" and len(flat) == 1
    assert flat[0].title == f"The classifier predicts one class at every evaluation: eval_accuracy {acc[0]:g} at all 8 evaluations"
    assert "Lower the learning rate" in flat[0].remedies[0]


def test_learning_classifier_is_healthy(tmp_path):
    acc = _train(tmp_path, 1e-3)
    assert acc[-1] > 0.85 and acc[-1] == acc[-2]  # converged: equal last evaluations
    dx = analyze(tmp_path).diagnosis
    assert dx.verdict.status == "healthy" and not [f for f in dx.findings if f.code == "FLAT001"]

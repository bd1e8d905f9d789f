"""Real TRL DPOTrainer runs on a tiny Llama and a word-level tokenizer built in code. With chosen == rejected in every
pair, the loss is ln 2 at every log, the two sides score exactly alike and no gradient flows: named as identical pairs
(LEN001, no cause: duplicates or truncation), where it was called all_labels_masked from mean_token_accuracy 0 (a
finite, non-zero loss beside it now says tokens were scored). Guard: with different responses the run trains
(0.693 -> 0.638) and reads healthy, before and after."""

from __future__ import annotations

import torch
from record_plants import tiny_llama
from test_record_frameworks import word_tokenizer

from autopsy.pipeline import analyze


def _dpo(out, same: bool) -> list[dict]:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    g = torch.Generator().manual_seed(0)

    def words(n: int) -> str:
        return " ".join(f"w{int(i)}" for i in torch.randint(0, 60, (n,), generator=g))

    rows = []
    for _ in range(64):
        prompt, chosen = words(6), words(4)
        rows.append({"prompt": prompt, "chosen": chosen, "rejected": chosen if same else words(4)})
    args = DPOConfig(output_dir=str(out), max_steps=30, per_device_train_batch_size=8, learning_rate=1e-3, logging_steps=2,
                     save_strategy="steps", save_steps=30, report_to=[], use_cpu=True, seed=0, max_length=16)
    trainer = DPOTrainer(model=tiny_llama(), ref_model=tiny_llama(), args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=word_tokenizer())
    trainer.train()
    return trainer.state.log_history


def test_identical_pairs_are_named(tmp_path):
    hist = _dpo(tmp_path, same=True)
    assert all(abs(h["loss"] - 0.6931) < 1e-3 for h in hist if "loss" in h and "train_loss" not in h)
    dx = analyze(tmp_path).diagnosis
    assert dx.verdict.root_cause != "all_labels_masked" and dx.verdict.status == "inconclusive"
    f = [f for f in dx.findings if f.code == "LEN001"]
    assert len(f) == 1 and f[0].title.startswith("Chosen and rejected are the same to the model")
    assert any("logps/chosen = logps/rejected at every one of the 15 logs" in e.detail for e in f[0].evidence)
    assert not [x for x in dx.findings if x.code == "LBL001"]


def test_dpo_that_trains_is_healthy(tmp_path):
    hist = _dpo(tmp_path, same=False)
    losses = [h["loss"] for h in hist if "loss" in h and "train_loss" not in h]
    assert losses[-1] < losses[0] - 0.03
    dx = analyze(tmp_path).diagnosis
    assert dx.verdict.status == "healthy", [f.title for f in dx.findings]

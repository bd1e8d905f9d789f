"""A token LM whose loss sits at ln(vocab_size): the cross-entropy of constant logits. Made with the real HF Trainer
on a tiny Llama (vocabulary 3,000) whose output layer is zero and frozen (its logits are 0 for every token whatever
the input, as when an lm_head is lost or a final norm decays to zero): the loss is ln(3000) = 8.0064 at every log,
and FLAT001 names that level from the run's own vocab_size (config.json); before, a plateau at a level that is no
small class count was not named at all."""

from __future__ import annotations

import math

import torch

from autopsy.pipeline import analyze

VOCAB = 3000


def _train(out, zero_head: bool):
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                         tie_word_embeddings=False))
    if zero_head:
        with torch.no_grad():
            model.lm_head.weight.zero_()
        model.lm_head.weight.requires_grad_(False)
    # a learnable stream: the same 16 tokens in every row
    row = torch.randint(0, VOCAB, (16,), generator=torch.Generator().manual_seed(1)).tolist()
    data = [{"input_ids": row, "labels": row} for _ in range(64)]
    args = TrainingArguments(output_dir=str(out), max_steps=12, per_device_train_batch_size=4, learning_rate=1e-2,
                             logging_steps=1, save_strategy="steps", save_steps=12, report_to=[], use_cpu=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      data_collator=lambda rows: {k: torch.tensor([r[k] for r in rows]) for k in rows[0]})
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_loss_at_ln_vocab_is_named(tmp_path):
    losses = _train(tmp_path, zero_head=True)
    assert all(abs(v - math.log(VOCAB)) < 1e-3 for v in losses)
    dx = analyze(tmp_path).diagnosis
    flat = [f for f in dx.findings if f.code == "FLAT001"]
    assert len(flat) == 1 and "ln(vocab_size 3000) = 8.0064" in flat[0].title, [f.title for f in dx.findings]
    assert "constant logits" in flat[0].message and dx.verdict.status != "healthy"


def test_a_learning_lm_is_not_flagged(tmp_path):
    """Guard: the same model with its output layer trained leaves ln(3000) at once; no FLAT001."""
    losses = _train(tmp_path, zero_head=False)
    assert losses[-1] < 0.75 * losses[0]
    assert not [f for f in analyze(tmp_path).diagnosis.findings if f.code == "FLAT001"]

"""Make tests/fixtures/padding_free_twin/: a padding-free SFT run and its padded twin (real TRL SFTTrainer).

Why this pair: with a baseline, ``autopsy compare`` can see what one run alone cannot: the padding-free
run's start loss far above its padded twin's, with ``padding_free`` the switch that differs.

How the failure is real on today's versions: transformers >= 4.54 masks a padding-free row per sample
from ``position_ids``, but only when no 2-D ``attention_mask`` is passed (masking_utils:
``if position_ids is not None and attention_mask is None ...: find_packed_sequence_indices``; the caveat
of transformers#46333 / #46634). The padding-free twin uses TRL's own padding-free collator plus an
all-ones ``attention_mask``, as collators written for padded batches add, so every sample attends
to the samples packed before it. The padded twin uses TRL's default collator. Both runs start from the
same small "pretrained" model (a tiny Llama trained here first on a copy task, where the answer depends
on the sample's own context), same data order, same seed.

    .venv/bin/python scripts/make_padding_free_twin.py [OUT]     # about a minute on 2 CPU cores
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_samples import NOUN, PLACE, SEED, build_tokenizer, seed_all, tiny_llama  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "padding_free_twin"
WORDS = NOUN + PLACE
COPY_LEN = 5
PRETRAIN_STEPS = int(os.environ.get("PRETRAIN_STEPS", 600))
SFT_STEPS = 12


def copy_text(rng: random.Random) -> str:
    """'w1 .. w5 : w1 .. w5 .': the second half is predictable only from the sample's own first half."""
    ws = [rng.choice(WORDS) for _ in range(COPY_LEN)]
    return " ".join(ws) + " : " + " ".join(ws) + " ."


def pretrain(tok, path: Path) -> None:
    import torch

    seed_all()
    model = tiny_llama(tok, hidden_size=32, intermediate_size=64)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(SEED)
    for step in range(PRETRAIN_STEPS):
        # the text exactly as TRL's SFT tokenization feeds it: no BOS (this tokenizer adds none), EOS appended
        batch = tok([copy_text(rng) + " " + tok.eos_token for _ in range(32)], return_tensors="pt")
        out = model(input_ids=batch["input_ids"], labels=batch["input_ids"])
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 100 == 0:
            print(f"pretrain step {step} loss {out.loss.item():.3f}", flush=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)


class MaskedPaddingFree:
    """TRL's padding-free collator plus an all-ones 2-D attention_mask (what disables per-sample masking)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, examples):
        import torch

        out = self.inner(examples)
        out["attention_mask"] = torch.ones_like(out["input_ids"])
        return out


def sft(base: Path, out: Path, padding_free: bool) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    seed_all()
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, attn_implementation="sdpa")
    rng = random.Random(SEED + 1)
    data = Dataset.from_dict({"text": [copy_text(rng) for _ in range(256)]})
    args = SFTConfig(output_dir=str(out), max_steps=SFT_STEPS, per_device_train_batch_size=8, learning_rate=1e-3,
                     logging_steps=1, save_steps=SFT_STEPS, report_to=[], use_cpu=True, seed=SEED,
                     padding_free=padding_free, dataloader_num_workers=0, disable_tqdm=True,
                     max_length=None if padding_free else 32)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    if padding_free:
        # TRL 1.16 refuses a custom collator with padding_free=True, so its own collator is wrapped after
        # construction; the batches are TRL's padding-free ones plus the 2-D mask
        assert isinstance(trainer.data_collator, DataCollatorForLanguageModeling) and trainer.data_collator.padding_free
        trainer.data_collator = MaskedPaddingFree(trainer.data_collator)
    trainer.train()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for sub in ("padded", "padding_free"):
        shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    base = out / "_base_model"
    if not (base / "config.json").exists():
        pretrain(tok, base)
    sft(base, out / "padded", padding_free=False)
    sft(base, out / "padding_free", padding_free=True)
    shutil.rmtree(base)  # only the two runs are fixtures
    for p in out.rglob("*"):
        if p.name in ("README.md", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "optimizer.pt",
                      "scheduler.pt", "rng_state.pth"):
            p.unlink()


if __name__ == "__main__":
    main()

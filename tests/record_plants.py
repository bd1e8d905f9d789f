"""Tiny models built in code and NaN plants at a known module and step, for the flight-recorder tests.

A plant is a forward hook on one module. Forward variant: the module's output becomes NaN at the
planted step. Backward variant: the output passes through an identity whose backward returns NaN,
so only the gradient goes non-finite (the forward stays finite), from that module backwards.
"""

from __future__ import annotations

import os

import torch

#: where the recorder tests train: "cpu" (CI) or "cuda" (run by hand on a GPU machine:
#: ``AUTOPSY_TEST_DEVICE=cuda pytest tests/test_record_loop.py tests/test_record_frameworks.py``); a GPU
#: asked for and missing is an error, never a silent CPU run
DEVICE = os.environ.get("AUTOPSY_TEST_DEVICE", "cpu")
if DEVICE != "cpu" and not torch.cuda.is_available():
    raise RuntimeError(f"AUTOPSY_TEST_DEVICE={DEVICE} but torch sees no GPU")

LAYERS = 4
VOCAB = 64


def tiny_llama(layers: int = LAYERS, hidden: int = 32, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=False, pad_token_id=0)
    return LlamaForCausalLM(cfg).to(DEVICE)


def token_rows(n: int, length: int = 12, seed: int = 0) -> list[dict[str, list[int]]]:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        ln = length - (i % 3)  # unequal lengths, padded by the collator
        ids = torch.randint(3, VOCAB, (ln,), generator=g).tolist()
        rows.append({"input_ids": ids, "attention_mask": [1] * ln, "labels": list(ids)})
    return rows


def collate(rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    width = max(len(r["input_ids"]) for r in rows)
    out = {k: [] for k in ("input_ids", "attention_mask", "labels")}
    for r in rows:
        pad = width - len(r["input_ids"])
        out["input_ids"].append(r["input_ids"] + [0] * pad)
        out["attention_mask"].append(r["attention_mask"] + [0] * pad)
        out["labels"].append(r["labels"] + [-100] * pad)
    return {k: torch.tensor(v) for k, v in out.items()}


class _NanGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: D102
        return x.clone()

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        return g * float("nan")


class Plant:
    """NaN at ``module``'s output (forward) or gradient (backward) while ``current == step``."""

    def __init__(self, module: torch.nn.Module, step: int, direction: str) -> None:
        assert direction in ("forward", "backward")
        self.step, self.direction, self.current = step, direction, 0
        self.handle = module.register_forward_hook(self._hook)

    def _hook(self, module, args, out):
        if self.current != self.step:
            return None
        t = out[0] if isinstance(out, tuple) else out
        bad = t * float("nan") if self.direction == "forward" else _NanGrad.apply(t)
        return (bad, *out[1:]) if isinstance(out, tuple) else bad


def all_finite(path) -> bool:
    """Every float tensor of a safetensors file is finite."""
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) for t in load_file(str(path)).values() if t.is_floating_point())

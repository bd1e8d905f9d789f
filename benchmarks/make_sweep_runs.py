"""Generate N small runs for the sweep benchmark, written by the real writers.

Each run is what an HF ``Trainer`` leaves in ``output_dir`` without checkpoints' weights:
``trainer_state.json`` written by ``transformers.TrainerState.save_to_json`` (the Trainer's own
writer), ``training_args.bin`` written by ``torch.save(TrainingArguments)`` (what ``Trainer._save``
does), and a ``train.log`` with the metric dicts ``Trainer.log`` prints (``print`` of the dict, as in
transformers' ``ProgressCallback.on_log``) plus, for the crash kind, PyTorch's own OOM traceback text.

Kinds, in a fixed rotation (so any N has the same mix): healthy (50%), lr_too_high (20%, loss falls,
then explodes under a high peak LR, then NaN grad_norm and 0.0 loss from HF's NaN filter),
nan_late (10%, NaN from a random step with no preceding divergence), oom (10%, a CUDA OOM traceback
ends the log), empty (10%, a corrupt trainer_state.json and nothing else: an "error" row, exercising the failure path).

    .venv/bin/python benchmarks/make_sweep_runs.py 1000 /tmp/sweep1000
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
from pathlib import Path

KINDS = ["healthy", "lr_too_high", "healthy", "nan_late", "healthy", "oom", "healthy", "lr_too_high", "healthy", "empty"]
STEPS = 120
LOG_EVERY = 2
OOM_TRACE = """Traceback (most recent call last):
  File "/workspace/train.py", line 88, in <module>
    trainer.train()
  File "/usr/local/lib/python3.11/site-packages/transformers/trainer.py", line 2245, in train
    return inner_training_loop(
  File "/usr/local/lib/python3.11/site-packages/torch/nn/functional.py", line 2573, in layer_norm
    return torch.layer_norm(input, normalized_shape, weight, bias, eps, torch.backends.cudnn.enabled)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use. Of the allocated memory 75.71 GiB is allocated by PyTorch, and 1.46 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""


def history(kind: str, rng: random.Random, lr: float) -> list[dict]:
    out = []
    loss = 3.9 + rng.uniform(-0.1, 0.1)
    nan_from = rng.randrange(40, STEPS) if kind == "nan_late" else None
    blow = rng.randrange(30, 70) if kind == "lr_too_high" else None
    for step in range(LOG_EVERY, STEPS + 1, LOG_EVERY):
        cur_lr = lr * min(1.0, step / 20) * (1 - step / (STEPS + 1))
        if blow is not None and step >= blow:
            k = step - blow
            if k < 8:
                loss, gn = loss * (3 + k), 10.0 ** (1 + k)
            else:
                loss, gn = 0.0, math.nan
        elif nan_from is not None and step >= nan_from:
            loss, gn = math.nan, math.nan
        else:
            loss = max(0.5, loss * (1 - 0.02 * rng.random()) + rng.gauss(0, 0.03))
            gn = abs(rng.gauss(1.0, 0.2))
        out.append({"loss": loss, "grad_norm": gn, "learning_rate": cur_lr, "epoch": round(step / STEPS, 4), "step": step})
    return out


def write_run(d: Path, kind: str, i: int, args_cache: dict) -> None:
    import torch
    from transformers import TrainerState, TrainingArguments

    rng = random.Random(i)
    d.mkdir(parents=True, exist_ok=True)
    lr = {"lr_too_high": 5.0}.get(kind, rng.choice([1e-5, 2e-5, 5e-5, 1e-4]))
    if kind == "empty":
        (d / "trainer_state.json").write_bytes(b"\x00\x01\x02 not json \xff" * 64)  # a corrupt file and nothing else
        return
    hist = history(kind, rng, lr)
    if kind == "oom":
        hist = hist[: rng.randrange(5, len(hist))]
    state = TrainerState(global_step=hist[-1]["step"], max_steps=STEPS, logging_steps=LOG_EVERY, save_steps=500,
                         log_history=hist, epoch=hist[-1]["epoch"])
    state.save_to_json(str(d / "trainer_state.json"))
    key = (lr, kind)
    if key not in args_cache:
        args_cache[key] = TrainingArguments(output_dir=str(d), learning_rate=lr, max_steps=STEPS, logging_steps=LOG_EVERY,
                                            max_grad_norm=1e9 if kind == "lr_too_high" else 1.0,
                                            optim="sgd" if kind == "lr_too_high" else "adamw_torch", report_to=[],
                                            warmup_steps=20)
    torch.save(args_cache[key], d / "training_args.bin")
    lines = [str({k: v for k, v in h.items() if k != "step"}) for h in hist]
    if kind == "oom":
        lines.append(OOM_TRACE)
    (d / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    if a.out.exists():
        shutil.rmtree(a.out)
    cache: dict = {}
    for i in range(a.n):
        kind = KINDS[i % len(KINDS)]
        write_run(a.out / f"run-{i:04d}-{kind}", kind, i, cache)
    print(f"{a.n} runs in {a.out}")


if __name__ == "__main__":
    main()

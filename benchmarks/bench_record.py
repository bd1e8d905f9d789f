"""Overhead of the flight recorder (autopsy.record) on real models, beside the usual alternatives.

Modes, timed per training step (zero_grad, forward, backward, recorder, SGD step), each on its own
copy of the model, interleaved step by step (order rotated) so machine noise hits every mode alike:
  baseline   no instrumentation
  cheap      Recorder(on_nonfinite="skip")            (the default mode)
  deep       Recorder(deep=True)                       (forward + output-gradient hooks on every module)
  hf-debug   transformers' DebugUnderflowOverflow      (forward hooks, abs-min/max of every tensor)
  anomaly    torch.autograd.detect_anomaly()           (PyTorch's own NaN finder; debugging only)
Models: the tiny Llama of sample_logs (scripts/make_samples.py: hidden 16, 2 layers) and a ~110M-parameter
Llama (hidden 768, 12 layers, vocab 16k) on CPU. Also: the record's bytes per step for a 30-layer model.

    .venv/bin/python benchmarks/bench_record.py [--rounds 5] [--large-rounds 3] [--steps 3] [--skip-large]

Prints a Markdown table (median step time per mode, overhead vs baseline with the range over rounds).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
MODES = ("baseline", "cheap", "deep", "hf-debug", "anomaly")


def llama(hidden: int, layers: int, heads: int, inter: int, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                                        max_position_embeddings=512, tie_word_embeddings=False))


def batch(vocab: int, bs: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (bs, seq), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


class Arm:
    """One mode on its own copy of the model (same initial weights), instrumented for the whole run,
    so modes can be interleaved step by step."""

    def __init__(self, mode: str, model, out: Path) -> None:
        from autopsy.record import Recorder

        self.mode, self.model = mode, model
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-6)  # no optimizer state: 5 copies fit in memory
        self.rec = None
        if mode in ("cheap", "deep"):
            self.rec = Recorder(out / mode, model=model, on_nonfinite="skip", deep=mode == "deep")
        elif mode == "hf-debug":
            from transformers.debug_utils import DebugUnderflowOverflow

            self.debug = DebugUnderflowOverflow(model)

    def step(self, b: dict[str, torch.Tensor]) -> float:
        ctx = torch.autograd.detect_anomaly(check_nan=True) if self.mode == "anomaly" else contextlib.nullcontext()
        t0 = time.perf_counter()
        with ctx:
            self.opt.zero_grad(set_to_none=True)
            loss = self.model(**b).loss
            loss.backward()
        if self.rec is None or self.rec.step(loss=loss, optimizer=self.opt, batch=b):
            self.opt.step()
        return time.perf_counter() - t0


def measure(name: str, make, vocab: int, bs: int, seq: int, rounds: int, steps: int) -> dict[str, list[float]]:
    """Each round: ``steps`` steps of every mode, interleaved step by step (order rotated per step);
    per round and mode the median step time, and its ratio to the baseline's in that round."""
    import copy

    per_mode: dict[str, list[float]] = {m: [] for m in MODES}
    ratios: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        base = make()
        arms = [Arm(m, base if m == "baseline" else copy.deepcopy(base), Path(tmp)) for m in MODES]
        for arm in arms:  # warm-up (first step records the backward order, allocator warms up)
            arm.step(batch(vocab, bs, seq, 0))
        for r in range(rounds):
            got: dict[str, list[float]] = {m: [] for m in MODES}
            for i in range(steps):
                b = batch(vocab, bs, seq, r * steps + i + 1)
                k = (r * steps + i) % len(arms)
                for arm in arms[k:] + arms[:k]:
                    got[arm.mode].append(arm.step(b))
            for m in MODES:
                per_mode[m] += got[m]
                ratios[m].append(statistics.median(got[m]) / statistics.median(got["baseline"]) - 1)
            print(f"  {name} round {r + 1}/{rounds}: " + ", ".join(f"{m} {statistics.median(got[m]) * 1e3:.1f} ms"
                                                              for m in MODES), flush=True)
        for arm in arms:
            if arm.rec is not None:
                arm.rec.close()
    return {"times": per_mode, "ratios": ratios}


def record_bytes(layers: int, steps: int, deep: bool) -> float:
    from autopsy.record import Recorder

    model = llama(16, layers, 2, 32, 128)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(tmp, model=model, deep=deep, update_every=50)
        path = rec.path
        for i in range(steps + 1):
            if i == 1:
                start = path.stat().st_size  # after the header and the first step
            b = batch(128, 2, 16, i)
            loss = model(**b).loss
            loss.backward()
            rec.step(loss=loss, optimizer=opt, batch=b)
            opt.step()
            opt.zero_grad()
        size = path.stat().st_size
        rec.close()
    return (size - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--large-rounds", type=int, default=3)
    ap.add_argument("--tiny-steps", type=int, default=40)
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import make_samples as ms

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU; no GPU in this run")
    results = []
    def tiny():
        return llama(ms.HIDDEN, ms.LAYERS, ms.HEADS, ms.INTERMEDIATE, 64)

    def big():
        return llama(768, 12, 12, 2048, 16000)

    results.append(("tiny Llama (sample_logs), bs 8 x 32", sum(p.numel() for p in tiny().parameters()),
                    measure("tiny", tiny, 64, 8, 32, a.rounds, a.tiny_steps)))
    if not a.skip_large:
        results.append(("Llama 12 x 768, bs 2 x 128", sum(p.numel() for p in big().parameters()),
                        measure("110M", big, 16000, 2, 128, a.large_rounds, a.steps)))
    print("\n| model | params | baseline step | " + " | ".join(MODES[1:]) + " |")
    print("|---|---|---|" + "---|" * (len(MODES) - 1))
    for name, n, res in results:
        base = statistics.median(res["times"]["baseline"])
        cells = []
        for m in MODES[1:]:
            r = res["ratios"][m]
            cells.append(f"{statistics.median(r) * 100:+.1f}% ({min(r) * 100:+.1f}..{max(r) * 100:+.1f})")
        print(f"| {name} | {n / 1e6:.2f}M | {base * 1e3:.1f} ms | " + " | ".join(cells) + " |")
    for deep in (False, True):
        b = record_bytes(30, 20, deep)
        print(f"record bytes per step, 30-layer Llama, {'deep' if deep else 'cheap'} mode: {b:.0f} B")


if __name__ == "__main__":
    main()

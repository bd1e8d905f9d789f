"""Overhead of the flight recorder (autopsy.record) on real models, beside the usual alternatives.

Modes, timed per training step (zero_grad, forward, backward, recorder, SGD step), each on its own
copy of the model, interleaved step by step (A B C D E, order rotated every repetition) so machine
noise hits every mode alike; warm-up steps excluded:
  baseline   no instrumentation
  cheap      Recorder(on_nonfinite="skip")            (the default mode)
  deep       Recorder(deep=True)                       (forward + output-gradient hooks on every module)
  hf-debug   transformers' DebugUnderflowOverflow      (forward hooks, abs-min/max of every tensor)
  anomaly    torch.autograd.detect_anomaly()           (PyTorch's own NaN finder; debugging only)
Each mode's overhead is taken per repetition against the baseline step of the same repetition
(paired): the median of those ratios and differences, with their interquartile range. Every step is
timed on two clocks: the thread's CPU time (``time.thread_time``: torch runs on this one thread, CPU
autograd included, so time spent waiting for a core taken by other jobs is not counted; the figure
to read on a shared machine) and wall time. Models: the
tiny Llama of sample_logs (scripts/make_samples.py: hidden 16, 2 layers) and a ~110M-parameter Llama
(hidden 768, 12 layers, vocab 16k) on CPU, 1 torch thread (2 shared cores). Also: the record's bytes
per step for a 30-layer model, and (--profile) the recorder's own cost per step by component.

On a GPU (``--device cuda``) a "step" of each mode is a block of ``--block`` training steps with no
synchronization inside it (the host runs ahead of the GPU as in a real loop, and the recorder's one
read per step costs what it costs there), then ``torch.cuda.synchronize()``; the figure is the block's
wall time per step. The thread-CPU clock is printed too but means little there (it counts the host
spinning while it waits for the GPU).

    .venv/bin/python benchmarks/bench_record.py [--reps 200] [--large-reps 6] [--skip-large] [--profile]
        [--modes baseline,cheap,deep] [--device cuda --block 10 --large-batch 8x512]

Prints the load average (uptime) before and after, and a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
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
CLOCKS = ("cpu", "wall")
UPDATE_EVERY = 50  # the recorder's default
DEV = torch.device("cpu")  # --device
BLOCK = 1  # training steps per timed block (--block; GPU only)


def llama(hidden: int, layers: int, heads: int, inter: int, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                                        max_position_embeddings=1024, tie_word_embeddings=False)).to(DEV)


def batch(vocab: int, bs: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (bs, seq), generator=g)
    ids = ids.to(DEV)
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

    def step(self, b: dict[str, torch.Tensor]) -> tuple[float, float]:
        """One training step (on a GPU: a block of BLOCK steps, then a synchronize); (CPU seconds of this
        thread, wall seconds) per step."""
        gpu = DEV.type == "cuda"
        if gpu:
            torch.cuda.synchronize()
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(BLOCK if gpu else 1):
            ctx = torch.autograd.detect_anomaly(check_nan=True) if self.mode == "anomaly" else contextlib.nullcontext()
            with ctx:
                self.opt.zero_grad(set_to_none=True)
                loss = self.model(**b).loss
                loss.backward()
            if self.rec is None or self.rec.step(loss=loss, optimizer=self.opt, batch=b):
                self.opt.step()
        if gpu:
            torch.cuda.synchronize()
        n = BLOCK if gpu else 1
        return (time.thread_time() - c0) / n, (time.perf_counter() - t0) / n


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4)
    return q1, q2, q3


def measure(name: str, make, vocab: int, bs: int, seq: int, reps: int, warmup: int = 3,
            modes: tuple[str, ...] = MODES) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``reps`` repetitions of one step of every mode (order rotated per repetition); per clock
    ("cpu", "wall") and mode the step times, and per repetition the ratio and difference to that
    repetition's baseline step."""
    import copy

    res = {c: {k: {m: [] for m in modes} for k in ("times", "ratio", "diff")} for c in CLOCKS}
    with tempfile.TemporaryDirectory() as tmp:
        base = make()
        arms = [Arm(m, base if m == "baseline" else copy.deepcopy(base), Path(tmp)) for m in modes]
        for w in range(warmup):  # first steps record the backward order; the allocator warms up
            for arm in arms:
                arm.step(batch(vocab, bs, seq, w))
        every = max(1, reps // 5)
        for r in range(reps):
            b = batch(vocab, bs, seq, r + warmup)
            k = r % len(arms)
            got = {arm.mode: arm.step(b) for arm in arms[k:] + arms[:k]}
            for c, clock in enumerate(CLOCKS):
                times, ratio, diff = res[clock]["times"], res[clock]["ratio"], res[clock]["diff"]
                for m in modes:
                    times[m].append(got[m][c])
                    ratio[m].append(got[m][c] / got["baseline"][c] - 1)
                    diff[m].append(got[m][c] - got["baseline"][c])
            if (r + 1) % every == 0 or r + 1 == reps:
                print(f"  {name} {r + 1}/{reps}: median paired overhead (cpu clock) " + ", ".join(
                    f"{m} {statistics.median(res['cpu']['ratio'][m]) * 100:+.1f}%" for m in modes[1:]), flush=True)
        for arm in arms:
            if arm.rec is not None:
                arm.rec.close()
    return res


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _us(s: float) -> str:
    return f"{s * 1e6:+.0f} us" if abs(s) < 0.1 else f"{s * 1e3:+.0f} ms"


def profile(layers: int, reps: int = 40, inner: int = 20) -> None:
    """The recorder's own work per step, by component (µs, median over interleaved blocks of
    ``inner`` calls; the gradients of one real backward, fixed), and forward+backward with and
    without the recorder's hooks."""
    import make_samples as ms

    from autopsy.record import Recorder
    from autopsy.record.batch import batch_shape, sample_ids, token_parts
    from autopsy.record.core import _host_values, _lr

    model = llama(ms.HIDDEN, layers, ms.HEADS, ms.INTERMEDIATE, 64)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    b = batch(64, 8, 32, 1)
    with tempfile.TemporaryDirectory() as tmp:
        recs = {mode: Recorder(Path(tmp) / mode, model=model, on_nonfinite="skip", deep=mode == "deep")
                for mode in ("cheap", "deep")}

        def fb():
            opt.zero_grad(set_to_none=True)
            loss = model(**b).loss
            loss.backward()
            return loss

        def hooks(on: dict[str, bool]) -> None:
            for mode, rec in recs.items():
                rec.core._replaying = not on[mode]  # the recorder's hooks return at once
                if rec.core._deep is not None:
                    rec.core._deep.paused = not on[mode]

        hooks({"cheap": True, "deep": False})
        loss = fb()
        core = recs["cheap"].core
        for _ in range(3):
            recs["cheap"].step(loss=loss, optimizer=opt, batch=b)
        got = core._norms()
        tok, sup = token_parts(b)
        # on CPU the norms come back as floats already; the host read is then of the other values
        parts = [*(t for t in got[0] if isinstance(t, torch.Tensor)), loss.detach(),
                 *(t for t in (tok, sup) if isinstance(t, torch.Tensor))]
        entry = {"t": "step", "step": 5, "loss": 1.234, "lr": 1e-5, "gn": 0.5, "g": [0.1234] * len(core.groups),
                 "tokens": 256, "sup": 256, "shape": [8, 32]}

        def everything() -> None:
            hooks({"cheap": False, "deep": False})

        parts_fn = {
            "gradient norms (_foreach_norm)": core._norms,
            "batch reads (tokens, shape, ids, lr)": lambda: (token_parts(b), batch_shape(b), sample_ids(b), _lr(opt)),
            "one host read (stack + tolist)": lambda: _host_values(parts),
            "record line (json + write)": lambda: core.write(entry),
            "Recorder.step, whole (cheap)": lambda: recs["cheap"].step(loss=loss, optimizer=opt, batch=b),
        }
        res: dict[str, list[float]] = {k: [] for k in parts_fn}
        fbres: dict[str, list[float]] = {k: [] for k in ("no hooks", "cheap hooks", "deep hooks")}
        for _ in range(reps):
            for k, f in parts_fn.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    f()
                res[k].append((time.perf_counter() - t0) / inner)
            for k, on in (("no hooks", {"cheap": False, "deep": False}), ("cheap hooks", {"cheap": True, "deep": False}),
                          ("deep hooks", {"cheap": False, "deep": True})):
                hooks(on)
                t0 = time.perf_counter()
                fb()
                fbres[k].append(time.perf_counter() - t0)
                if k == "deep hooks":  # the deep values of this step, read as Recorder.step does
                    t1 = time.perf_counter()
                    recs["deep"].core._deep.entry()
                    recs["deep"].core._deep.reset()
                    res.setdefault("deep values (read + per-module max)", []).append(time.perf_counter() - t1)
            everything()
        for rec in recs.values():
            rec.close()
    print(f"\nRecorder cost per step by component, tiny Llama with {layers} layers "
          f"({len(core.params)} parameters, {len(core.groups)} groups, {len(recs['deep'].core.modules)} modules); "
          "median (IQR) over interleaved blocks:")
    print("| component | us per step |\n|---|---|")
    for k, v in res.items():
        q1, q2, q3 = quartiles(v)
        print(f"| {k} | {q2 * 1e6:.0f} ({q1 * 1e6:.0f}..{q3 * 1e6:.0f}) |")
    base = fbres["no hooks"]
    for k in ("cheap hooks", "deep hooks"):
        d = [x - y for x, y in zip(fbres[k], base)]
        q1, q2, q3 = quartiles(d)
        print(f"| forward+backward, {k} minus none | {q2 * 1e6:+.0f} ({q1 * 1e6:+.0f}..{q3 * 1e6:+.0f}) |")
    q1, q2, q3 = quartiles(base)
    print(f"| (forward+backward without hooks) | {q2 * 1e6:.0f} ({q1 * 1e6:.0f}..{q3 * 1e6:.0f}) |")


def record_bytes(layers: int, steps: int, deep: bool) -> float:
    """Bytes the record grows by per step: the mean step line (steps after the first) plus the update
    line's share (one every UPDATE_EVERY steps), counted in the closed file (step lines are written in
    batches, so the file's size during the run lags behind)."""
    import json

    from autopsy.record import Recorder

    model = llama(16, layers, 2, 32, 128)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(tmp, model=model, deep=deep, update_every=UPDATE_EVERY)
        path = rec.path
        for i in range(steps + 1):
            b = batch(128, 2, 16, i)
            loss = model(**b).loss
            loss.backward()
            rec.step(loss=loss, optimizer=opt, batch=b)
            opt.step()
            opt.zero_grad()
        rec.close()
        sizes: dict[str, list[int]] = {"step": [], "update": []}
        for line in path.read_bytes().splitlines(keepends=True):
            obj = json.loads(line)
            if obj["t"] in sizes and obj["step"] > 1 or obj["t"] == "update":
                sizes[obj["t"]].append(len(line))
    upd = statistics.mean(sizes["update"]) if sizes["update"] else 0.0
    return statistics.mean(sizes["step"]) + upd / UPDATE_EVERY  # an update line every UPDATE_EVERY steps


def load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001
        return "uptime unavailable"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200, help="interleaved repetitions, tiny model")
    ap.add_argument("--large-reps", type=int, default=6, help="interleaved repetitions, ~110M model")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also the recorder's cost by component")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    ap.add_argument("--no-bytes", action="store_true", help="skip the record-size measurement")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--block", type=int, default=10, help="GPU: training steps per timed block")
    ap.add_argument("--large-batch", default="2x128", help="the ~110M model's batch, BSxSEQ")
    a = ap.parse_args()
    global DEV, BLOCK
    DEV, BLOCK = torch.device(a.device), a.block
    bs, seq = (int(x) for x in a.large_batch.lower().split("x"))
    modes = tuple(m for m in MODES if m in a.modes.split(",") or m == "baseline")
    torch.set_num_threads(a.threads)
    import make_samples as ms

    if DEV.type == "cuda":
        print(f"torch {torch.__version__}, GPU {torch.cuda.get_device_name()}, fp32 (TF32 off), blocks of {BLOCK} "
              "steps timed on the wall clock (read the wall-time table)")
    else:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU; no GPU in this run")
    print(f"load before: {load()}", flush=True)
    results = []

    def tiny():
        return llama(ms.HIDDEN, ms.LAYERS, ms.HEADS, ms.INTERMEDIATE, 64)

    def big():
        return llama(768, 12, 12, 2048, 16000)

    results.append(("tiny Llama (sample_logs), bs 8 x 32", sum(p.numel() for p in tiny().parameters()),
                    measure("tiny", tiny, 64, 8, 32, a.reps, modes=modes)))
    if not a.skip_large:
        results.append((f"Llama 12 x 768, bs {bs} x {seq}", sum(p.numel() for p in big().parameters()),
                        measure("110M", big, 16000, bs, seq, a.large_reps, warmup=1, modes=modes)))
    print(f"load after: {load()}")
    print("\nOverhead per mode: **median of the paired ratios** (each step against the baseline step of the"
          " same repetition) and their interquartile range; median paired difference; ratio of the medians")
    for clock in CLOCKS:
        what = "thread CPU time" if clock == "cpu" else "wall time"
        print(f"\n{what}\n\n| model | params | reps | baseline step, median (IQR) | " + " | ".join(modes[1:]) + " |")
        print("|---|---|---|---|" + "---|" * (len(modes) - 1))
        for name, n, got in results:
            res = got[clock]
            q1, q2, q3 = quartiles(res["times"]["baseline"])
            cells = []
            for m in modes[1:]:
                r1, r2, r3 = quartiles(res["ratio"][m])
                d2 = statistics.median(res["diff"][m])
                rm = statistics.median(res["times"][m]) / q2 - 1
                cells.append(f"**{r2 * 100:+.1f}%** ({r1 * 100:+.1f}..{r3 * 100:+.1f}); {_us(d2)}; {rm * 100:+.1f}%")
            print(f"| {name} | {n / 1e6:.2f}M | {len(res['ratio']['baseline'])} | {_ms(q2)} ({_ms(q1)}..{_ms(q3)}) | "
                  + " | ".join(cells) + " |")
    for deep in (False, True) if not a.no_bytes else ():
        size = record_bytes(30, 20, deep)
        print(f"record bytes per step, 30-layer Llama, {'deep' if deep else 'cheap'} mode: {size:.0f} B")
    if a.profile:
        for layers in (ms.LAYERS, 30):
            profile(layers)
        print(f"load after the profile: {load()}")


if __name__ == "__main__":
    main()

"""Time the text-log reader on a ~1.09 GB stdout capture against a naive per-line parser, in one run.

Run by hand::

    .venv/bin/python benchmarks/bench_logs.py [N] [--hf-only] [--old TREE] [--repeat K] [--keep FILE]
                                              [--no-baseline] [--finish]

The log (default: the mixed one, N = 2.38M records, 1.09 GB) is written into ``.bench/`` (gitignored;
deleted afterwards unless ``--keep FILE`` names where to keep or reuse it):
  * mixed: HF Trainer dicts, transformers 4.x form (bare floats, bare ``nan``/``inf``) for the first
    half and the 5.x string form (``'loss': '2.3100'``) for the second, each after three ``\\r`` tqdm
    refreshes and the bar-clearing line and before the redraw ``tqdm.write`` prints; an eval dict
    every 5,000 records; every 40 records one line of another framework in turn (mmengine, DeepSpeed
    ``step=``, a generic ``step N | loss``, minimind, a MAE/DeiT engine, verl, a JSON line); a warning
    or DeepSpeed OVERFLOW line every 1,000; a traceback at the end. Every chunk of 4 MB therefore
    holds every format: the worst case for the line parsers.
  * ``--hf-only``: the log of earlier rounds (2.4M HF 4.x dicts + tqdm noise, NaN every 997).
Each candidate runs in a fresh subprocess (so peak RSS is its own; import time not counted),
interleaved ``--repeat`` times so load changes hit all alike:
  * reader: ``read_text_log`` into a RunBuilder (streamed), as this tree has it;
  * old: the same, importing ``autopsy`` from ``--old TREE`` (e.g. an unpacked ``git archive`` of main);
  * per-line: the naive reader (``baseline``): per line and ``\\r`` segment ``ast.literal_eval`` /
    ``json.loads`` / a key-value regex, ``float()`` per value;
and prints wall and CPU seconds (on a shared machine CPU is the fairer figure), MB/s, peak RSS
(ru_maxrss of the child), the load average, and the ratios (best run of each).
"""

from __future__ import annotations

import ast
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_log(path: Path, n: int) -> None:
    """The HF 4.x-only log of earlier rounds (``--hf-only``)."""
    total = n
    bar_chars = " ▏▎▍▌▋▊▉█"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        buf: list[str] = []
        for i in range(1, n + 1):
            pct = 100 * i // total
            bar = (bar_chars[-1] * (pct // 10)).ljust(10)
            for r in range(3):  # tqdm refreshes of the same step (rate/eta updates)
                buf.append(f"\r{pct:3d}%|{bar}| {i}/{total} [{i // 3600:d}:{i // 60 % 60:02d}:{i % 60:02d}"
                           f"<95:46:57, {1.3 + r / 100:.2f}it/s]")
            gn = "nan" if i % 997 == 0 else repr(1.0 / i + 0.5)
            buf.append("\r" + " " * 60 + "\r")
            buf.append(f"{{'loss': {3.0 / (1 + i / 1000):.4f}, 'grad_norm': {gn}, "
                       f"'learning_rate': {1e-4 * (1 - i / total)!r}, 'epoch': {i / total * 3:.2f}}}\n")
            # tqdm.write() (HF's ProgressCallback) redraws the bar with the current count after the record
            buf.append(f"\r{pct:3d}%|{bar}| {i}/{total} [{i // 3600:d}:{i // 60 % 60:02d}:{i % 60:02d}"
                       f"<95:46:57, 1.33it/s]")
            if len(buf) > 50_000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))


#: lines of other frameworks mixed in (one every _OTHER_EVERY records, in turn): the mmengine,
#: DeepSpeed, generic, minimind, MAE, Lightning, verl and JSON-lines parsers all get work
_OTHER = (
    "2024-05-01 10:00:00,000 - mmengine - INFO - Epoch(train) [1][{i}/{n}]  lr: 1.0000e-04  eta: 1:00:00  "
    "time: 0.5000  data_time: 0.0100  memory: 7239  loss: {loss:.4f}  grad_norm: {gn}\n",
    "[2024-05-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[{lr!r}], "
    "mom=[(0.9, 0.999)]\n",
    "step {i} | loss {loss:.4f} | lr {lr:.3e} | grad_norm {gn}\n",
    "Epoch:[1/2]({i}/{n}), loss: {loss:.3f}, lr: {lr:.12f}, epoch_time: 12.0min\n",
    "Epoch: [0]  [{i:4d}/{n}]  eta: 0:10:00  lr: {lr:.6f}  loss: {loss:.4f} ({loss:.4f})  time: 0.5  data: 0.1\n",
    "step:{i} - actor/pg_loss:{loss:.3f} - actor/grad_norm:{gn} - critic/score/mean:0.5\n",
    '{{"step": {i}, "loss": {loss:.4f}, "grad_norm": {gnj}}}\n',
)
_OTHER_EVERY = 40
_WARNINGS = (
    "/usr/lib/python3/site-packages/torch/utils/checkpoint.py:31: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None\n  warnings.warn(\n",
    "[WARNING] [stage3.py:1850:step] 3 pytorch allocator cache flushes since last step. this happens when there "
    "is high memory pressure\n",
    "[2024-05-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
    "step. Attempted loss scale: 65536, reducing to 32768\n",
)
_TRACEBACK = """Traceback (most recent call last):
  File "/workspace/train.py", line 120, in <module>
    trainer.train()
  File "/usr/lib/python3/site-packages/transformers/trainer.py", line 1859, in train
    return inner_training_loop(
RuntimeError: CUDA error: an illegal memory access was encountered
"""


def write_mixed_log(path: Path, n: int) -> None:
    """The mixed log: HF dicts (4.x bare floats, then the 5.x string form) between tqdm ``\\r``
    refreshes, eval dicts, NaN and inf values, warnings, other frameworks' lines, a traceback."""
    total = n
    bar_chars = " ▏▎▍▌▋▊▉█"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("***** Running training *****\n  Num examples = 1000000\n  Num Epochs = 3\n"
                 f"  Total optimization steps = {total}\n  learning_rate = 2e-05\n  fp16 = True\n")
        buf: list[str] = []
        for i in range(1, n + 1):
            pct = 100 * i // total
            bar = (bar_chars[-1] * (pct // 10)).ljust(10)
            for r in range(3):
                buf.append(f"\r{pct:3d}%|{bar}| {i}/{total} [{i // 3600:d}:{i // 60 % 60:02d}:{i % 60:02d}"
                           f"<95:46:57, {1.3 + r / 100:.2f}it/s]")
            loss = 3.0 / (1 + i / 1000)
            lr = 1e-4 * (1 - i / total)
            gn = "nan" if i % 997 == 0 else ("inf" if i % 1999 == 0 else repr(1.0 / i + 0.5))
            buf.append("\r" + " " * 60 + "\r")
            if i <= n // 2:  # transformers 4.x: bare floats, bare nan/inf
                buf.append(f"{{'loss': {loss:.4f}, 'grad_norm': {gn}, 'learning_rate': {lr!r}, "
                           f"'epoch': {i / total * 3:.2f}}}\n")
            else:  # transformers 5.x: formatted strings
                buf.append(f"{{'loss': '{loss:.4f}', 'grad_norm': '{gn}', 'learning_rate': '{lr:.4e}', "
                           f"'epoch': '{i / total * 3:.2f}'}}\n")
            buf.append(f"\r{pct:3d}%|{bar}| {i}/{total} [{i // 3600:d}:{i // 60 % 60:02d}:{i % 60:02d}"
                       f"<95:46:57, 1.33it/s]")
            if i % 5000 == 0:
                buf.append(f"\n{{'eval_loss': {loss * 1.1:.4f}, 'eval_runtime': 12.5, "
                           f"'eval_samples_per_second': 80.0, 'eval_steps_per_second': 10.0, "
                           f"'epoch': {i / total * 3:.2f}}}\n")
            if i % _OTHER_EVERY == 0:
                j = i // _OTHER_EVERY
                buf.append("\n" + _OTHER[j % len(_OTHER)].format(i=i, n=total, loss=loss, lr=lr, gn=gn,
                                                                  gnj="NaN" if gn == "nan" else "1.5"))
            if i % 1000 == 0:
                buf.append("\n" + _WARNINGS[(i // 1000) % len(_WARNINGS)])
            if len(buf) > 50_000:
                fh.write("".join(buf))
                buf.clear()
        buf.append("\n" + _TRACEBACK)
        fh.write("".join(buf))


_DICT_LINE = re.compile(r"\{'")
_OTHER_LINE = re.compile(r"(?:[Ss]tep|[Ii]ter|Epoch)\W{0,3}[\[(]?\s*(\d+)")
_PAIR = re.compile(r"([A-Za-z_][\w/]*)[:=]\s*(-?(?:nan|NaN|inf|[\d.]+(?:e-?\d+)?))")


_NANSUB = re.compile(r"(?<![\w'])(-?)(nan|inf)(?![\w'])")


def baseline(path: Path) -> tuple[int, int]:
    """The naive reader: per line (and per ``\\r`` segment), ``ast.literal_eval`` of a dict with
    nan/inf pre-substituted, ``json.loads`` of a JSON line, or a key/value regex on a line with a
    step counter; every value through ``float()``. Returns (records, NaN values)."""
    records = nans = 0
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        for raw in fh:
            for seg in raw.split("\r"):
                start = seg.find("{'")
                if start >= 0:
                    text = _NANSUB.sub(lambda m: f"float('{m[1]}{m[2]}')", seg[start:].strip())
                    try:
                        rec = ast.literal_eval(text)
                    except (ValueError, SyntaxError):
                        # literal_eval refuses float('nan') calls: fall back to a placeholder
                        try:
                            rec = ast.literal_eval(_NANSUB.sub("None", seg[start:].strip()))
                        except (ValueError, SyntaxError):
                            continue
                    vals = [_num(v) for v in rec.values()]
                elif seg.startswith('{"'):
                    try:
                        vals = [_num(v) for v in json.loads(seg).values()]
                    except ValueError:
                        continue
                elif _OTHER_LINE.search(seg):
                    vals = [_num(v) for _, v in _PAIR.findall(seg)]
                    if not vals:
                        continue
                else:
                    continue
                records += 1
                nans += sum(1 for v in vals if v is None or v != v)
    return records, nans


def _num(v: object) -> float | None:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def reader(path: Path, finish: bool = False) -> tuple[int, int, int]:
    import numpy as np

    from autopsy.discover import Found
    from autopsy.ingest.base import RunBuilder
    from autopsy.ingest.textlog import read_text_log

    builder = RunBuilder(path.parent)
    read_text_log(Found(path, "text_log", path.stat().st_size), builder)
    if finish:
        df = builder.finish().scalars
        return len(df), int(df["value"].isna().sum()), int(df["step"].max())
    blocks = [b for s in builder._sources.values() for bl in s.blocks.values() for b in bl]
    points = sum(len(b) for b in blocks)
    nan = sum(int(np.isnan(b.value).sum()) for b in blocks)
    last = max(int(b.step.max()) for b in blocks if len(b))
    return points, nan, last


def _child(mode: str, path: str) -> None:
    if mode != "baseline":  # import cost (pandas, numpy) is not reading: time it for neither side
        import autopsy.ingest.textlog  # noqa: F401
        from autopsy._memory import tune_allocator

        tune_allocator()  # as the CLI and read_run do
    t0, c0 = time.perf_counter(), time.process_time()
    result = baseline(Path(path)) if mode == "baseline" else reader(Path(path), finish=mode == "finish")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": dt, "cpu": cpu, "rss_mb": rss_mb, "result": list(result)}))


def _run(mode: str, path: Path, tree: str | None = None) -> dict:
    env = dict(os.environ)
    if tree:  # time another checkout's reader (e.g. main before a change) with the same interpreter
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _opt(name: str) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


#: the options main() reads (the ones after --old, --repeat and --keep take a value)
OPTIONS = ("--hf-only", "--old", "--repeat", "--keep", "--no-baseline", "--finish")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return
    unknown = [a for a in sys.argv[1:] if a.startswith("-") and a not in OPTIONS]
    if unknown:  # (--help included: a mistyped option must not start a run that writes a 1 GB log)
        print(__doc__)
        if unknown != ["--help"] and unknown != ["-h"]:
            print(f"unknown option(s): {' '.join(unknown)}", file=sys.stderr)
            sys.exit(2)
        return
    old = _opt("--old")
    repeat = int(_opt("--repeat") or 1)
    valued = {old, _opt("--repeat"), _opt("--keep")}
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a not in valued]
    hf_only = "--hf-only" in sys.argv
    n = int(args[0]) if args else (2_400_000 if hf_only else 2_380_000)
    bench_dir = Path(__file__).resolve().parent.parent / ".bench"
    bench_dir.mkdir(exist_ok=True)
    keep = _opt("--keep")
    with tempfile.TemporaryDirectory(dir=bench_dir) as tmp:
        path = Path(keep) if keep else Path(tmp) / "stdout.log"
        if not path.exists():
            t0 = time.perf_counter()
            (write_log if hf_only else write_mixed_log)(path, n)
            print(f"wrote {n} records ({'HF 4.x only' if hf_only else 'mixed'}), {path.stat().st_size / 1e9:.2f} GB "
                  f"in {time.perf_counter() - t0:.1f} s")
        size = path.stat().st_size
        print(f"file {path.name}: {size / 1e9:.3f} GB; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

        def show(label: str, r: dict) -> None:
            print(f"{label:9s} {r['seconds']:6.2f} s wall, {r['cpu']:6.2f} s CPU, {size / 1e6 / r['seconds']:6.1f} MB/s, "
                  f"peak RSS {r['rss_mb']:4.0f} MB, result {r['result']}, "
                  f"load {' '.join(f'{x:.2f}' for x in r['load'])}", flush=True)

        runs: dict[str, list[dict]] = {}
        plan = ["reader"] + (["old"] if old else []) + ([] if "--no-baseline" in sys.argv else ["baseline"])
        for _ in range(repeat):  # interleaved, so load changes hit every candidate alike
            for mode in plan:
                r = _run("reader" if mode == "old" else mode, path, old if mode == "old" else None)
                r["load"] = os.getloadavg()
                runs.setdefault(mode, []).append(r)
                show({"reader": "reader:", "old": "old:", "baseline": "per-line:"}[mode], r)
        if "--finish" in sys.argv:
            show("+finish:", {**_run("finish", path), "load": os.getloadavg()})
        best = {m: min(rs, key=lambda r: r["seconds"]) for m, rs in runs.items()}
        r = best["reader"]
        if old:
            o = best["old"]
            print(f"new vs old reader: {o['seconds'] / r['seconds']:.2f}x wall, {o['cpu'] / r['cpu']:.2f}x CPU")
        if "baseline" in best:
            b = best["baseline"]
            print(f"ratio to naive per-line parsing: {b['seconds'] / r['seconds']:.1f}x wall, "
                  f"{b['cpu'] / r['cpu']:.1f}x CPU (target >= 15x, or <= 8 s for 1.09 GB)"
                  + (f"; old reader {b['seconds'] / best['old']['seconds']:.1f}x" if old else ""))


if __name__ == "__main__":
    main()

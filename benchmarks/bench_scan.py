"""Benchmark `autopsy scan` / `autopsy diff` against `cat` and the naive torch scan (whole processes).

Writes a sharded bf16 safetensors checkpoint (default 4 GB, 4 shards, planted NaN/+Inf/-Inf) into
.bench/ (gitignored), then times as separate processes: `cat > /dev/null` (warm), an O_DIRECT read
(cold-read rate), `autopsy scan` (JSON and table), `autopsy run` on the folder, the naive peer (torch import + safetensors.torch.load_file +
torch.isnan/isinf per tensor) and `autopsy diff DIR DIR`. The page cache here is dropped after ~30 s
idle, so the files are re-read right before each timed command. Peak RSS of the largest process from
/usr/bin/time; one extra untimed run samples the whole process tree (workers included). With --cold
(root), cat and autopsy scan are also timed with the page cache dropped before each run.

    .venv/bin/python benchmarks/bench_scan.py [--gb 4] [--keep] [--repeat 3] [--workers 1] [--cold]

Timings on a shared VM vary by up to 50% from run to run, so each command runs --repeat times,
interleaved, and the medians (with the range and the per-run naive/scan ratios) are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bounds import measure  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
TENSOR_BYTES = 64 * 1024 * 1024  # 32M bf16 values per tensor


def write_checkpoint(d: Path, gb: float, shards: int = 4) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = (rng.standard_normal(TENSOR_BYTES // 2, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    n_tensors = int(gb * 1024**3) // TENSOR_BYTES
    per = max(1, n_tensors // shards)
    files, weight_map, k = [], {}, 0
    for s in range(shards):
        names = [f"model.layers.{k + i}.mlp.weight" for i in range(per)]
        header = {n: {"dtype": "BF16", "shape": [TENSOR_BYTES // 2], "data_offsets": [i * TENSOR_BYTES, (i + 1) * TENSOR_BYTES]}
                  for i, n in enumerate(names)}
        header["__metadata__"] = {"format": "pt"}
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        p = d / f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        with open(p, "wb") as fh:
            fh.write(struct.pack("<Q", len(raw)) + raw)
            for i in range(per):
                block = base.copy()
                block[i * 7919 % block.size] ^= 1  # every tensor differs
                if s == shards - 1 and i == 0:
                    block[[10, 20, 30]] = [0x7FC0, 0x7F80, 0xFF80]  # NaN, +Inf, -Inf
                if s == 1 and i == 1:
                    block[5] = 0xFFFF  # NaN with the sign bit
                fh.write(block.tobytes())
        files.append(p)
        weight_map.update({n: p.name for n in names})
        k += per
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return files


def warm(files: list[Path]) -> None:
    subprocess.run("cat " + " ".join(map(str, files)) + " > /dev/null", shell=True, check=True)


def timed(cmd: str) -> tuple[float, int, str]:
    """(wall seconds, peak RSS MB, stdout) of a whole process."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "__RSS__ %M", "bash", "-c", cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = [int(x.split()[1]) for x in r.stderr.splitlines() if x.startswith("__RSS__")]
    return wall, (rss[-1] // 1024 if rss else -1), r.stdout


NAIVE = """
import sys, torch
from safetensors.torch import load_file
bad = 0
for f in sys.argv[1:]:
    for name, t in load_file(f).items():
        if torch.isnan(t).any() or torch.isinf(t).any():
            bad += 1
print(bad)
"""


def drop_caches() -> bool:
    try:
        subprocess.run("sync", check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def cold(files: list[Path], d: Path, repeat: int) -> None:
    """cat, autopsy scan (default workers) and autopsy scan -j 1 with the page cache dropped before each."""
    fl = " ".join(map(str, files))
    cmds = {"cat (cold)": f"cat {fl} > /dev/null",
            "autopsy scan (cold)": f"{PY} -m autopsy scan {d} --format json -o /dev/null",
            "autopsy scan -j 1 (cold)": f"{PY} -m autopsy scan {d} --format json -o /dev/null --workers 1"}
    runs: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for k, cmd in cmds.items():
            if not drop_caches():
                print("cold runs skipped: cannot write /proc/sys/vm/drop_caches (needs root)")
                return
            runs[k].append(timed(cmd)[0])
    cat = statistics.median(runs["cat (cold)"])
    for k, v in runs.items():
        med = statistics.median(v)
        print(f"{k:28} {med:8.2f} {min(v):6.2f}-{max(v):<6.2f} {med / cat:5.2f}x cold cat")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cold", action="store_true", help="also time truly cold runs (drops the page cache: root only)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each command (medians are reported)")
    ap.add_argument("--workers", type=int, default=0, help="autopsy scan --workers (0 = the CLI default: one per core, at most 2)")
    args = ap.parse_args()
    d = REPO / ".bench" / "ckpt"
    t0 = time.perf_counter()
    files = write_checkpoint(d, args.gb) if not d.exists() else sorted(d.glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    print(f"checkpoint: {len(files)} shards, {size / 1e9:.2f} GB bf16 (written in {time.perf_counter() - t0:.1f}s)")
    naive_py = REPO / ".bench" / "naive.py"
    naive_py.write_text(NAIVE)
    fl = " ".join(map(str, files))
    scan_cmd = f"{PY} -m autopsy scan {d} --format json -o {REPO / '.bench' / 'scan.json'} --workers {args.workers}"
    cmds = {
        "cat (warm)": f"cat {fl} > /dev/null",
        "O_DIRECT read (cold rate)": " ; ".join(f"dd if={f} of=/dev/null bs=8M iflag=direct status=none" for f in files),
        "autopsy scan": scan_cmd,
        "autopsy scan (table)": f"{PY} -m autopsy scan {d} --workers {args.workers} > /dev/null",
        "autopsy run": f"{PY} -m autopsy run {d} -f json -o /dev/null -q",
        "naive torch scan": f"{PY} {naive_py} {fl}",
        "cat x2 (warm)": f"cat {fl} {fl} > /dev/null",
        "autopsy diff DIR DIR": f"{PY} -m autopsy diff {d} {d} --format json -o /dev/null",
    }
    runs: dict[str, list[tuple[float, int, str]]] = {k: [] for k in cmds}
    works: list[float] = []
    for _ in range(args.repeat):  # interleaved, so a slow spell of the machine hits every command alike
        for k, cmd in cmds.items():
            if args.repeat > 1 and k == "O_DIRECT read (cold rate)" and runs[k]:
                continue  # the cold rate is disk-bound and slow: once is enough
            warm(files)
            runs[k].append(timed(cmd))
            if k == "autopsy scan":
                scan = json.loads((REPO / ".bench" / "scan.json").read_text())
                works.append(sum(f["seconds"] for f in scan["files"]))
    med = {k: statistics.median(w for w, _, _ in v) for k, v in runs.items()}
    print(f"{'command':28} {'median s':>8} {'range s':>13} {'GB/s':>7} {'peak MB':>8}   ({args.repeat} runs, interleaved)")
    for k, v in runs.items():
        n = size * (2 if "x2" in k or "diff" in k else 1)
        walls = [w for w, _, _ in v]
        print(f"{k:28} {med[k]:8.2f} {min(walls):6.2f}-{max(walls):<6.2f} {n / med[k] / 1e9:7.2f} {max(r for _, r, _ in v):8d}")
    work = statistics.median(works)
    print(f"scan work (sum of per-file seconds, median): {work:.2f}s = {size / work / 1e9:.2f} GB/s; "
          f"{work / med['cat (warm)']:.2f}x cat warm, {work / med['O_DIRECT read (cold rate)']:.2f}x a cold read")
    ratios = sorted(n[0] / a[0] for n, a in zip(runs["naive torch scan"], runs["autopsy scan"]))
    print(f"whole process: naive / autopsy scan = {med['naive torch scan'] / med['autopsy scan']:.1f}x (medians); "
          f"per run {', '.join(f'{r:.1f}x' for r in ratios)}")
    for k in ("autopsy scan (table)", "autopsy run"):
        print(f"whole process: naive / {k} = {med['naive torch scan'] / med[k]:.1f}x (medians)")
    print(f"diff / (cat both) = {med['autopsy diff DIR DIR'] / med['cat x2 (warm)']:.2f}x (medians)")
    print(f"found: {scan['summary']['nonfinite_tensors']} non-finite tensors (planted 2); "
          f"naive found {runs['naive torch scan'][-1][2].strip()}")
    # memory: one more (untimed) run of each, sampling the whole process tree every 20 ms
    for k in ("autopsy scan", "autopsy run", "naive torch scan"):
        warm(files)
        m = measure(["bash", "-c", cmds[k]])
        print(f"memory of {k}: largest process {m.peak_rss_mb:.0f} MB; all processes summed: "
              f"RSS {m.tree_rss_mb:.0f} MB, PSS {m.tree_pss_mb:.0f} MB")
    if args.cold:
        cold(files, d, args.repeat)
    if not args.keep:
        shutil.rmtree(REPO / ".bench")


if __name__ == "__main__":
    sys.exit(main())

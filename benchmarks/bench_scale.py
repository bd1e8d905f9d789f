"""Many-tensor and remote checkpoints (issue 15): whole ``autopsy`` processes, interleaved repeats.

    .venv/bin/python benchmarks/bench_scale.py [--gb 3.4] [--repeat 3] [--tiny 100000,300000] [--no-moe] [--no-remote]
                                               [--old TREE] [--no-naive]

* a generated MoE-like checkpoint (4 shards, >= 50k tensors: 26 layers x 512 experts x gate/up/down
  bf16 matrices of 80 KB, per-expert F32 scales, attention, routers, norms; 2 planted NaN tensors):
  ``autopsy scan`` (table, JSON), ``autopsy run`` on a run dir holding it, and the naive torch scan
  (``safetensors.torch.load_file`` + ``isnan/isinf`` per tensor), each a whole process;
* files of N tiny tensors (``--tiny``; 100k is the issue's bound: <= 3 s and <= 200 MB each for
  scan table, scan JSON and run; 300k must finish);
* remote: the first MoE shard served by the tests' Range HTTP server (tests/range_server.py, its own
  process): the raw read of the same bytes from the same server (curl: 8 parallel ranges, and one GET)
  against whole ``autopsy scan http://...`` / ``autopsy run http://...`` processes.

Figures: median wall seconds, CPU seconds (user+sys of the process tree: the fair figure on a
shared machine) and peak RSS (``/usr/bin/time``). Files go under ``$TMPDIR`` (default /tmp) and
are deleted unless ``--keep``. ``--old TREE``: the tiny-tensor commands also run with ``autopsy`` and
``detectors`` imported from TREE (e.g. ``git archive <commit> autopsy detectors`` unpacked), interleaved.
Both trees are byte-compiled first (``compileall``), as an installed package is: with
``PYTHONDONTWRITEBYTECODE=1`` (set in this machine's shells) every process would otherwise compile
autopsy's modules again (~0.3-0.5 s each).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
NAIVE = """
import sys, torch
from safetensors.torch import load_file
bad = 0
for f in sys.argv[1:]:
    for name, t in load_file(f).items():
        if t.is_floating_point() and (torch.isnan(t).any() or torch.isinf(t).any()):
            bad += 1
print(bad)
"""


def _write_safetensors(path: Path, tensors: list[tuple[str, str, list[int], int]], fill) -> None:
    """Header + data written directly (the layout the safetensors library writes): fast for GBs."""
    header, off = {}, 0
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for i, (name, dtype, _shape, nbytes) in enumerate(tensors):
            fh.write(fill(i, name, dtype, nbytes))


def write_moe(d: Path, gb: float, shards: int = 4) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    pool = (rng.standard_normal(8 << 20, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    hidden, inter = 256, 160
    per_layer = 512 * 3 * hidden * inter * 2 + 512 * 16 + 4 * hidden * hidden * 2
    layers = max(1, int(gb * 1e9) // per_layer)
    tensors = []
    for L in range(layers):
        p = f"model.layers.{L}"
        for w in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors.append((f"{p}.self_attn.{w}.weight", "BF16", [hidden, hidden], hidden * hidden * 2))
        tensors.append((f"{p}.mlp.gate.weight", "BF16", [512, hidden], 512 * hidden * 2))
        tensors += [(f"{p}.input_layernorm.weight", "BF16", [hidden], hidden * 2),
                    (f"{p}.post_attention_layernorm.weight", "BF16", [hidden], hidden * 2)]
        for e in range(512):
            for w in ("gate_proj", "up_proj", "down_proj"):
                shape = [inter, hidden] if w != "down_proj" else [hidden, inter]
                tensors.append((f"{p}.mlp.experts.{e}.{w}.weight", "BF16", shape, inter * hidden * 2))
            tensors.append((f"{p}.mlp.experts.{e}.scales", "F32", [4], 16))
    tensors.sort(key=lambda t: t[0])
    bad = {f"model.layers.{layers // 2}.mlp.experts.7.up_proj.weight", f"model.layers.{layers - 1}.mlp.experts.3.scales"}

    def fill(i: int, name: str, dtype: str, n: int) -> bytes:
        start = (i * 4099 * 2) % (len(pool) - n - 2)
        b = bytearray(pool[start:start + n]) if dtype == "BF16" else bytearray(np.full(n // 4, 0.5, np.float32).tobytes())
        if name in bad:
            b[0:4] = b"\xc0\x7f\xc0\x7f" if dtype == "BF16" else b"\x00\x00\xc0\x7f"
        return bytes(b)

    files, weight_map = [], {}
    per = -(-len(tensors) // shards)
    for s in range(shards):
        part = tensors[s * per:(s + 1) * per]
        p = d / f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        _write_safetensors(p, part, lambda i, n, dt, nb, o=s * per: fill(i + o, n, dt, nb))
        files.append(p)
        weight_map.update({t[0]: p.name for t in part})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return files


def write_tiny(path: Path, n: int) -> None:
    tensors = [(f"model.layers.{i // 4 // 64}.mlp.experts.{i // 4 % 64}.w{i % 4}.weight", "BF16", [2, 4], 16)
               for i in range(n)]
    pool = (np.random.default_rng(1).standard_normal(1 << 16, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    _write_safetensors(path, tensors, lambda i, name, dt, nb: (b"\xc0\x7f" + pool[2:16]) if i == 5 else pool[(i * 16) % 65000:(i * 16) % 65000 + 16])


def timed(cmd: str) -> dict:
    t0 = time.perf_counter()
    # not run from the repo: `python -m` puts the working directory first on sys.path, before PYTHONPATH (--old)
    r = subprocess.run(["/usr/bin/time", "-f", "__T__ %M %U %S", "bash", "-c", cmd], capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    m = re.search(r"__T__ (\d+) ([\d.]+) ([\d.]+)", r.stderr)
    rss, cpu = (int(m[1]) / 1024, float(m[2]) + float(m[3])) if m else (-1, -1)
    return {"wall": wall, "rss": rss, "cpu": cpu, "rc": r.returncode, "out": r.stdout}


def bench(cmds: dict[str, str], repeat: int, once: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """``once``: commands run in the first round only (the naive scan: minutes per run here)."""
    runs: dict[str, list[dict]] = {k: [] for k in cmds}
    for r in range(repeat):  # interleaved: a slow spell of the shared machine hits every command alike
        for k, c in cmds.items():
            if r == 0 or k not in once:
                runs[k].append(timed(c))
    print(f"  {'command':34} {'wall s (median, range)':>24} {'CPU s':>7} {'peak MB':>8} rc")
    for k, v in runs.items():
        w = [x["wall"] for x in v]
        print(f"  {k:34} {statistics.median(w):9.2f} ({min(w):.2f}-{max(w):.2f}) {statistics.median(x['cpu'] for x in v):7.2f} "
              f"{max(x['rss'] for x in v):8.0f} {v[-1]['rc']}")
    return runs


def _curl_ranges(url: str, size: int, parts: int = 8) -> str:
    """One curl process fetching the file as ``parts`` parallel range requests (the server's raw read)."""
    step = -(-size // parts)
    args = " ".join(f"-r {a}-{min(size, a + step) - 1} -o /dev/null {url}" for a in range(0, size, step))
    return f"curl -s -Z --parallel-max {parts} {args}"


def remote(shard: Path, repeat: int) -> None:
    """The Range server of the tests (tests/range_server.py) in its own process, so that client and server
    do not share one interpreter; raw = curl with 8 parallel ranges and one plain GET of the same file."""
    srv = subprocess.Popen([PY, str(REPO / "tests" / "range_server.py"), str(shard.parent)], stdout=subprocess.PIPE, text=True)
    try:
        base = srv.stdout.readline().strip()
        url = f"{base}/{shard.name}"
        size = shard.stat().st_size
        subprocess.run(f"cat {shard} > /dev/null", shell=True)
        runs = bench({"raw: curl, 8 parallel ranges": _curl_ranges(url, size),
                      "raw: curl, one GET": f"curl -s -o /dev/null {url}",
                      "autopsy scan URL --format json": f"{PY} -m autopsy scan {url} --format json -o -",
                      "autopsy scan URL (table)": f"{PY} -m autopsy scan {url} > /dev/null",
                      "autopsy run URL": f"{PY} -m autopsy run {url} -f json -o /dev/null -q"}, repeat)
    finally:
        srv.terminate()
        srv.wait()
    med = {k: statistics.median(x["wall"] for x in v) for k, v in runs.items()}
    raw = min(med["raw: curl, 8 parallel ranges"], med["raw: curl, one GET"])
    print(f"  {size / 1e9:.2f} GB; raw (faster curl) {raw:.2f} s = {size / raw / 1e6:.0f} MB/s")
    for k in ("autopsy scan URL --format json", "autopsy scan URL (table)", "autopsy run URL"):
        print(f"  {k}: whole process {med[k]:.2f} s = {size / med[k] / 1e6:.0f} MB/s, {med[k] / raw:.2f}x the raw read, "
              f"peak {max(x['rss'] for x in runs[k]):.0f} MB")
    # the read itself: the file's own seconds in the JSON report (header request to last tensor, what the scan
    # spends on the network and the checks), without the interpreter's start, the imports and the output
    own = [json.loads(x["out"])["files"][0]["seconds"] for x in runs["autopsy scan URL --format json"]]
    curls = sorted(x["wall"] for k in ("raw: curl, 8 parallel ranges", "raw: curl, one GET") for x in runs[k])
    print(f"  the scan's read throughput (its JSON 'seconds', median of {len(own)}): {statistics.median(own):.2f} s = "
          f"{size / statistics.median(own) / 1e6:.0f} MB/s, {statistics.median(own) / raw:.2f}x the raw read (target <= 1.5x); "
          f"range {min(own):.2f}-{max(own):.2f} s against curl's {curls[0]:.2f}-{curls[-1]:.2f} s")


def _compile(*trees: Path) -> None:
    for t in trees:
        subprocess.run([PY, "-m", "compileall", "-q", str(t / "autopsy"), str(t / "detectors")], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=3.4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiny", default="100000,300000")
    ap.add_argument("--no-moe", action="store_true")
    ap.add_argument("--no-remote", action="store_true")
    ap.add_argument("--remote-only", action="store_true", help="write the MoE shards, time only the remote reads")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--old", help="a tree with the old autopsy/ and detectors/: its tiny-tensor figures, interleaved")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive torch scan of the MoE checkpoint (~15 min here)")
    args = ap.parse_args()
    _compile(REPO, *([Path(args.old)] if args.old else []))
    root = Path(tempfile.mkdtemp(prefix="autopsy-bench-scale-"))
    print(f"load before: {os.getloadavg()}")
    try:
        for n in [int(x) for x in args.tiny.split(",") if x]:
            run_dir = root / f"tiny{n}"
            run_dir.mkdir()
            write_tiny(run_dir / "model.safetensors", n)
            f = run_dir / "model.safetensors"
            print(f"{n:,} tiny tensors ({f.stat().st_size / 1e6:.1f} MB):")
            cmds = {"scan (table)": f"{PY} -m autopsy scan {f} > /dev/null",
                    "scan --format json": f"{PY} -m autopsy scan {f} --format json -o /dev/null",
                    "run": f"{PY} -m autopsy run {run_dir} -f json -o /dev/null -q"}
            if args.old:
                cmds |= {f"old: {k}": f"PYTHONPATH={args.old} {c}" for k, c in cmds.items()}
            bench(cmds, 1 if n > 100_000 else args.repeat)
        if not args.no_moe:
            d = root / "moe"
            t0 = time.perf_counter()
            files = write_moe(d, args.gb)
            size = sum(f.stat().st_size for f in files)
            n = sum(len(json.loads(f.read_bytes()[8:8 + struct.unpack('<Q', f.read_bytes()[:8])[0]])) for f in files)
            print(f"MoE-like: {len(files)} shards, {n:,} tensors, {size / 1e9:.2f} GB (written in {time.perf_counter() - t0:.0f} s)")
            naive = root / "naive.py"
            naive.write_text(NAIVE)
            fl = " ".join(map(str, files))
            subprocess.run(f"cat {fl} > /dev/null", shell=True)
            if args.remote_only:
                print("remote (local HTTP server with Range, first shard):")
                remote(files[0], args.repeat)
                return
            runs = bench({"cat (warm)": f"cat {fl} > /dev/null",
                          "autopsy scan (table)": f"{PY} -m autopsy scan {d} > /dev/null",
                          "autopsy scan --format json": f"{PY} -m autopsy scan {d} --format json -o /dev/null",
                          "autopsy run": f"{PY} -m autopsy run {d} -f json -o /dev/null -q",
                          **({} if args.no_naive else {"naive torch scan": f"{PY} {naive} {fl}"})},
                         args.repeat, once=("naive torch scan",))
            if not args.no_naive:
                nv = statistics.median(x["wall"] for x in runs["naive torch scan"])
                for k in ("autopsy scan (table)", "autopsy scan --format json", "autopsy run"):
                    print(f"  naive / {k}: {nv / statistics.median(x['wall'] for x in runs[k]):.1f}x wall")
                print(f"  naive found {runs['naive torch scan'][-1]['out'].strip()} bad tensors (planted 2)")
            if not args.no_remote:
                print("remote (local HTTP server with Range, first shard):")
                remote(files[0], args.repeat)
    finally:
        print(f"load after: {os.getloadavg()}")
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

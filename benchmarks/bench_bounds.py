"""Resource bounds of whole ``autopsy`` processes: peak RSS and wall time (issue item 3).

    .venv/bin/python benchmarks/bench_bounds.py [--log-mb 2048] [--ckpt-mb 1024] [--files 100000] [--keep]

* a stdout log of ``--log-mb`` MB (HF dicts, tqdm ``\\r`` bars, ANSI colours, a NaN every 997 logs)
  analysed by ``autopsy run`` (bound: peak RSS < 500 MB),
* a safetensors checkpoint of ``--ckpt-mb`` MB scanned by ``autopsy scan`` (bound: < 200 MB),
* a run dir with a good trainer_state.json and ``--files`` small files analysed by ``autopsy run``
  (bound: finishes, says what it skipped).

Each command runs in its own process; its peak RSS is that child's own ``ru_maxrss`` from
``os.wait4`` (not the max over every child, as RUSAGE_CHILDREN would give). Commands with worker
processes (``scan -j N``) are also sampled every 20 ms for the summed RSS of the whole process tree
(``tree_rss_mb``; shared library pages count once per process, so it over-states real use) and
for the summed PSS (``tree_pss_mb``: each shared page split between its sharers, the real footprint). The functions are
shared with tests/test_resource_bounds.py, which runs CI-sized variants.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
LOG_RSS_BOUND_MB = 500  # issue item 3: a 2 GB log streams in under 500 MB
SCAN_RSS_BOUND_MB = 200  # issue item 3: a checkpoint scan stays under 200 MB whatever the size


@dataclass
class Measured:
    rc: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    tree_rss_mb: float = 0.0  # peak of the summed RSS of the command and all its worker processes (sampled)
    tree_pss_mb: float = 0.0  # the same for PSS: shared pages split between the processes sharing them


#: Linux keeps the pre-exec peak in ru_maxrss, and a child spawned from a big process (pytest with
#: torch loaded) starts from that process's memory: so the command is spawned by this tiny
#: launcher and its own rusage comes back through a file.
_LAUNCHER = """
import json, os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, ru = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump({"maxrss_kb": ru.ru_maxrss, "cpu": ru.ru_utime + ru.ru_stime}, fh)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(args: list[str], cwd: Path | None = None, timeout: float = 3600) -> Measured:
    """Run ``args`` as a grandchild (via _LAUNCHER); its own peak RSS and CPU time via os.wait4."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as ru_file:
        launcher = [sys.executable, "-S", "-c", _LAUNCHER, ru_file.name]
        p = subprocess.Popen(launcher + args, stdout=out, stderr=err, cwd=cwd,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = t0 + timeout
        tree_kb = tree_pss = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            rss, pss = tree_memory_kb(p.pid)
            tree_kb, tree_pss = max(tree_kb, rss), max(tree_pss, pss)
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        try:
            own = json.loads(Path(ru_file.name).read_text())
        except (OSError, ValueError):  # killed before the launcher wrote it
            own = {"maxrss_kb": ru.ru_maxrss, "cpu": ru.ru_utime + ru.ru_stime}
        return Measured(p.returncode, time.perf_counter() - t0, own["cpu"], own["maxrss_kb"] / 1024,
                        out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                        max(tree_kb, own["maxrss_kb"]) / 1024, tree_pss / 1024)


def tree_memory_kb(root: int) -> tuple[int, int]:
    """(summed RSS, summed PSS) of every descendant of ``root`` (not root itself: the launcher), from /proc."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    parent[int(entry.name)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [c for c, pp in parent.items() if pp == pid]
        found += kids
        todo += kids
    rss = pss = 0
    for pid in found:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return rss, pss


def autopsy(*args: str) -> list[str]:
    return [PY, "-m", "autopsy", *args]


def write_log(path: Path, mb: float) -> int:
    """A stdout capture of about ``mb`` MB; returns the number of metric dicts written."""
    target = int(mb * (1 << 20))
    n = 0
    written = 0
    with open(path, "wb") as fh:
        fh.write(b"\x1b[1;32m[INFO]\x1b[0m ***** Running training *****\n")
        while written < target:
            parts = []
            for _ in range(2000):
                n += 1
                gn = b"nan" if n % 997 == 0 else b"0.5123"
                bar = f"\r\x1b[34m{n % 100:3d}%\x1b[0m|#####     | {n}/999999999 [01:02<9:99:99, 3.21it/s]".encode()
                parts.append(bar * 3 + b"\r" + b" " * 40 + b"\r")
                parts.append(b"{'loss': %.4f, 'grad_norm': %s, 'learning_rate': 1e-05, 'epoch': %.4f}\n"
                             % (3.0 / (1 + n / 1000), gn, n / 1e6))
            block = b"".join(parts)
            fh.write(block)
            written += len(block)
    return n


def write_safetensors(path: Path, mb: float, tensor_mb: int = 64) -> int:
    """An F32 safetensors file of about ``mb`` MB written in chunks (never held in memory)."""
    import numpy as np

    numel = tensor_mb * (1 << 20) // 4
    n = max(1, int(mb // tensor_mb))
    header: dict = {}
    for i in range(n):
        header[f"model.layers.{i}.weight"] = {"dtype": "F32", "shape": [numel], "data_offsets": [i * numel * 4, (i + 1) * numel * 4]}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    chunk = np.full(1 << 20, 0.25, dtype="<f4").tobytes()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h)
        for _ in range(n):
            fh.writelines(chunk for _ in range(numel * 4 // len(chunk)))
    return n


def write_many_files(run: Path, n: int) -> None:
    """A good trainer_state.json plus ``n`` small files (a dataset dumped into the output dir)."""
    sys.path.insert(0, str(REPO / "tests"))
    from make_corpus import write_good_state

    write_good_state(run)
    per_dir = 1000
    for d in range((n + per_dir - 1) // per_dir):
        sub = run / "samples" / f"shard_{d:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(min(per_dir, n - d * per_dir)):
            (sub / f"sample_{i:04d}.txt").write_bytes(b"step 1 loss 0.5\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-mb", type=float, default=2048)
    ap.add_argument("--ckpt-mb", type=float, default=1024)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autopsy-bounds-"))
    ok = True
    try:
        log_dir = work / "logrun"
        log_dir.mkdir()
        n = write_log(log_dir / "train.log", a.log_mb)
        m = measure(autopsy("run", str(log_dir), "-f", "json", "-o", str(work / "log.json"), "-q"))
        ok &= m.peak_rss_mb < LOG_RSS_BOUND_MB
        print(f"log {a.log_mb:.0f} MB ({n} dicts): rc={m.rc} wall={m.wall_s:.1f}s cpu={m.cpu_s:.1f}s "
              f"peak_rss={m.peak_rss_mb:.0f} MB (bound {LOG_RSS_BOUND_MB})")
        shutil.rmtree(log_dir)

        ck = work / "ckpt"
        ck.mkdir()
        write_safetensors(ck / "model.safetensors", a.ckpt_mb)
        m = measure(autopsy("scan", str(ck / "model.safetensors")))
        ok &= m.peak_rss_mb < SCAN_RSS_BOUND_MB
        print(f"scan {a.ckpt_mb:.0f} MB safetensors: rc={m.rc} wall={m.wall_s:.1f}s peak_rss={m.peak_rss_mb:.0f} MB "
              f"(bound {SCAN_RSS_BOUND_MB})")
        m = measure(autopsy("run", str(ck), "-f", "json", "-o", str(work / "ck.json"), "-q"))
        print(f"run on that checkpoint: rc={m.rc} wall={m.wall_s:.1f}s peak_rss={m.peak_rss_mb:.0f} MB")
        shutil.rmtree(ck)

        many = work / "many"
        write_many_files(many, a.files)
        m = measure(autopsy("run", str(many), "-f", "json", "-o", str(work / "many.json"), "-q"))
        rep = json.loads((work / "many.json").read_text()) if (work / "many.json").exists() else {}
        arts = rep.get("artifacts", [])
        print(f"{a.files} small files: rc={m.rc} wall={m.wall_s:.1f}s peak_rss={m.peak_rss_mb:.0f} MB "
              f"artifacts={len(arts)} ignored={sum(1 for x in arts if x.get('status') == 'ignored')}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

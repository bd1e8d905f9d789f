"""Sweep benchmark: N generated runs analysed with 1 and 2 local worker processes and on a Dask LocalCluster.

    .venv/bin/python benchmarks/bench_sweep.py --runs /tmp/sweep1000 --n 1000

Generates the runs with make_sweep_runs.py when the folder is missing. The runs are split into --rounds chunks and
every mode analyses every chunk, interleaved (order rotated each round). Per mode: summed wall time of the sweeps
(cluster start-up reported apart), runs per second, peak memory (summed RSS of this process and all its
descendants, sampled every 0.1 s) and the verdict counts, which must be identical in every mode. The
machine's load average is printed before and after: timings on a shared machine are only comparable
within one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SAMPLE_EVERY = 0.1


class PeakRSS:
    """Summed RSS of this process tree, sampled in a thread (workers come and go); ``exclude`` pids (and their
    children) are left out, so a Dask cluster kept alive for later rounds does not count against a local mode."""

    def __init__(self, exclude: set[int] | None = None) -> None:
        self.peak = 0
        self.exclude = exclude or set()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me] + me.children(recursive=True):
                try:
                    if p.pid in self.exclude or (p.ppid() in self.exclude):
                        continue
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(SAMPLE_EVERY)

    def __enter__(self) -> PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def counts_of(rows: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        key = f"{r['status']}:{r['root_cause']}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("/tmp/autopsy-sweep-bench"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--modes", default="local1,local2,dask2")
    ap.add_argument("--rounds", type=int, default=4, help="the runs are split into this many chunks; every mode "
                    "analyses every chunk, modes interleaved (order rotated each round), so load changes on a shared "
                    "machine hit all modes alike")
    ap.add_argument("--reports", type=Path, default=Path("/tmp/autopsy-sweep-bench-reports"))
    a = ap.parse_args()
    if not a.runs.exists():
        subprocess.run([sys.executable, str(HERE / "make_sweep_runs.py"), str(a.n), str(a.runs)], check=True)
    from autopsy.sweep_engine import run_sweep

    runs = sorted(str(p) for p in a.runs.iterdir() if p.is_dir())
    chunks = [runs[i::a.rounds] for i in range(a.rounds)]
    modes = a.modes.split(",")
    print(f"{len(runs)} runs, {a.rounds} rounds; cpus {os.cpu_count()}, load average before {os.getloadavg()}", flush=True)
    client = cluster = None
    dask_pids: set[int] = set()
    startup = 0.0
    if any(m.startswith("dask") for m in modes):
        from distributed import Client, LocalCluster

        before = {p.pid for p in psutil.Process().children(recursive=True)}
        t0 = time.perf_counter()
        n = int(next(m for m in modes if m.startswith("dask"))[4:])
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        startup = time.perf_counter() - t0
        dask_pids = {p.pid for p in psutil.Process().children(recursive=True)} - before
    total = {m: 0.0 for m in modes}
    peak = {m: 0 for m in modes}
    rows: dict[str, list] = {m: [] for m in modes}
    try:
        for k, chunk in enumerate(chunks):
            order = modes[k % len(modes):] + modes[: k % len(modes)]
            for m in order:
                with PeakRSS(exclude=set() if m.startswith("dask") else dask_pids) as mem:
                    if m.startswith("dask"):
                        res = run_sweep(chunk, cluster=client, reports_dir=a.reports / m)
                    else:
                        res = run_sweep(chunk, workers=int(m[5:]), reports_dir=a.reports / m)
                total[m] += res.seconds
                peak[m] = max(peak[m], mem.peak)
                rows[m] += res.rows
                print(f"round {k + 1}: {m} {len(chunk)} runs {res.seconds:.1f} s, load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    print(f"load average after {os.getloadavg()}")
    for m in modes:
        print(json.dumps({"mode": m, "runs": len(rows[m]), "seconds": round(total[m], 1), "runs_per_s": round(len(rows[m]) / total[m], 1),
                          "peak_rss_mb": round(peak[m] / 2**20), "startup_s": round(startup, 2) if m.startswith("dask") else 0.0,
                          "counts": counts_of(rows[m])}))
    if "local1" in total:
        for m in modes:
            if m != "local1":
                print(f"{m}: {total['local1'] / total[m]:.2f}x local1")
    print("verdict counts identical across modes:", len({json.dumps(counts_of(r)) for r in rows.values()}) == 1)


if __name__ == "__main__":
    main()

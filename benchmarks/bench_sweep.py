"""Sweep benchmark: N generated runs analysed with 1 and 2 local worker processes and on a Dask LocalCluster.

    .venv/bin/python benchmarks/bench_sweep.py --runs /tmp/sweep1000 --n 1000

Generates the runs with make_sweep_runs.py when the folder is missing. Per mode: wall time of the sweep
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
    """Summed RSS of this process tree, sampled in a thread (workers come and go)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me] + me.children(recursive=True):
                try:
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


def one(mode: str, runs: Path, reports: Path) -> dict:
    from autopsy.sweep_engine import run_sweep

    startup = 0.0
    with PeakRSS() as mem:
        if mode.startswith("dask"):
            from distributed import Client, LocalCluster

            t0 = time.perf_counter()
            n = int(mode[4:])
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
            startup = time.perf_counter() - t0
            try:
                res = run_sweep([str(runs)], cluster=client, reports_dir=reports)
            finally:
                client.close()
                cluster.close()
        else:
            res = run_sweep([str(runs)], workers=int(mode[5:]), reports_dir=reports)
    counts: dict[str, int] = {}
    for r in res.rows:
        key = f"{r['status']}:{r['root_cause']}"
        counts[key] = counts.get(key, 0) + 1
    return {"mode": mode, "runs": len(res.rows), "seconds": round(res.seconds, 2), "startup_s": round(startup, 2),
            "runs_per_s": round(len(res.rows) / res.seconds, 1), "peak_rss_mb": round(mem.peak / 2**20),
            "counts": dict(sorted(counts.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("/tmp/autopsy-sweep-bench"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--modes", default="local1,local2,dask2")
    ap.add_argument("--reports", type=Path, default=Path("/tmp/autopsy-sweep-bench-reports"))
    a = ap.parse_args()
    if not a.runs.exists():
        subprocess.run([sys.executable, str(HERE / "make_sweep_runs.py"), str(a.n), str(a.runs)], check=True)
    print(f"cpus {os.cpu_count()}, load average before {os.getloadavg()}", flush=True)
    results = []
    for mode in a.modes.split(","):
        r = one(mode, a.runs, a.reports / mode)
        results.append(r)
        print(json.dumps(r), flush=True)
    print(f"load average after {os.getloadavg()}")
    base = next((r for r in results if r["mode"] == "local1"), None)
    for r in results:
        if base and r is not base:
            print(f"{r['mode']}: {base['seconds'] / r['seconds']:.2f}x local1")
    same = len({json.dumps(r["counts"]) for r in results}) == 1
    print("verdict counts identical across modes:", same)


if __name__ == "__main__":
    main()

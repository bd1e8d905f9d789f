"""Sweep benchmark: N generated runs analysed with 1 and 2 local worker processes and on a Dask LocalCluster.

    .venv/bin/python benchmarks/bench_sweep.py --runs /tmp/sweep1000 --n 1000

Generates the runs with make_sweep_runs.py when the folder is missing. The runs are split into --rounds chunks and
every mode analyses every chunk, interleaved (order rotated each round), so load changes on a shared machine hit
every mode alike. Modes: ``local1`` (the 1-worker baseline: a pool of ONE worker subprocess, the same code path as
``local2``, not an in-process loop), ``local2``, ``dask2`` (``LocalCluster(n_workers=2)``), and the diagnostic
``local2s``: 2 local workers that each call ``os.setsid()`` first (see below).

Per mode: summed wall time of the sweeps (cluster start-up reported apart), runs per second, CPU time per run
(user+sys of the whole process tree: this process, the workers, for Dask the scheduler, nannies and workers),
"cores used" (that CPU / wall: 1.0 is one busy core), peak memory of the tree (summed RSS, sampled every 0.1 s:
an upper bound, as it counts the pages forked workers share with the parent once per process; and summed PSS,
sampled every 0.5 s, which splits shared pages between their processes: the memory actually used) and the
verdict counts, which must be identical in every mode. The last line is the result, with the load average.

Reading it on a shared machine: if CPU per run is the same in every mode, the work itself is parallel, and the
wall-time ratio only says how much CPU the kernel gave the sweep. With ``sched_autogroup_enabled=1`` (printed) the
kernel shares the CPU fairly between *sessions* first (each terminal, each ``setsid`` job), so while other sessions
keep the cores busy a sweep's session gets about the same share whether it runs 1 or 2 workers. ``local2s`` puts
each worker in a session of its own: if it gets more cores than ``local2`` the scheduler, not the sweep, was the
limit. The 1 -> 2 workers target needs a quiet machine (load average well under 1 before the start).
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
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
SAMPLE_EVERY = 0.1
PSS_EVERY = 5  # samples
RESCAN_EVERY = 1.0  # walking /proc for the tree costs ~3 ms; the RSS of known pids is read every sample
PAGE = os.sysconf("SC_PAGE_SIZE")


def _pss(pid: int) -> int:
    """Proportional set size: shared pages split between the processes sharing them (sums to real memory)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


class PeakRSS:
    """Summed RSS of this process tree, sampled in a thread; ``exclude`` pids (and their children) are left
    out, so a Dask cluster kept alive for later rounds does not count against a local mode. The tree is walked
    once a second (pool workers live for the whole sweep), not every sample, so the sampler itself stays cheap
    (it shares the cores with the workers it measures)."""

    def __init__(self, exclude: set[int] | None = None) -> None:
        self.peak = 0
        self.peak_pss = 0
        self.exclude = exclude or set()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _tree(self) -> list[int]:
        me = psutil.Process()
        out = [me.pid]
        for p in me.children(recursive=True):
            try:
                if p.pid not in self.exclude and p.ppid() not in self.exclude:
                    out.append(p.pid)
            except psutil.Error:
                pass
        return out

    def _run(self) -> None:
        pids, scanned = self._tree(), time.monotonic()
        n = 0
        while not self._stop.is_set():
            if time.monotonic() - scanned >= RESCAN_EVERY:
                pids, scanned = self._tree(), time.monotonic()
            self.peak = max(self.peak, sum(_rss(pid) for pid in pids))
            if n % PSS_EVERY == 0:  # smaps_rollup walks the mappings: ~1 ms a process, so 5x less often
                self.peak_pss = max(self.peak_pss, sum(_pss(pid) for pid in pids))
            n += 1
            self._stop.wait(SAMPLE_EVERY)

    def __enter__(self) -> PeakRSS:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def tree_cpu(pids: set[int]) -> float:
    """user+sys seconds of this process, its reaped children (finished pool workers) and the live ``pids``."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    for pid in pids:
        try:
            c = psutil.Process(pid).cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


def counts_of(rows: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        key = f"{r['status']}:{r['root_cause']}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


_PLAIN_TASK: Any = None


def _own_session_task(*args: Any) -> Any:
    """The ``local2s`` diagnostic's task: the worker leaves the sweep's session (os.setsid()) before its first
    run, then does what the plain task does. Not what ``autopsy sweep`` does."""
    try:
        os.setsid()
    except OSError:  # already a session leader: a later run in the same worker
        pass
    return _PLAIN_TASK(*args)


def own_session_workers(on: bool) -> None:
    """Point the sweep's worker task at :func:`_own_session_task` (on) or back at the plain one. Forked workers
    inherit the module as patched here; the task is pickled by reference (``__main__._own_session_task``)."""
    global _PLAIN_TASK
    import autopsy.sweep_engine as se

    if _PLAIN_TASK is None:
        _PLAIN_TASK = se._task
    se._task = _own_session_task if on else _PLAIN_TASK


def autogroup() -> str:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        return "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("/tmp/autopsy-sweep-bench"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--modes", default="local1,local2,dask2", help="comma-separated: local<N>, local<N>s "
                    "(workers in sessions of their own, a diagnostic), dask<N>")
    ap.add_argument("--rounds", type=int, default=4, help="the runs are split into this many chunks; every mode "
                    "analyses every chunk, modes interleaved (order rotated each round), so load changes on a shared "
                    "machine hit all modes alike")
    ap.add_argument("--reports", type=Path, default=Path("/tmp/autopsy-sweep-bench-reports"))
    a = ap.parse_args()
    if not a.runs.exists():
        subprocess.run([sys.executable, str(HERE / "make_sweep_runs.py"), str(a.n), str(a.runs)], check=True)
    from autopsy.sweep_engine import run_sweep, warm

    runs = sorted(str(p) for p in a.runs.iterdir() if p.is_dir())
    chunks = [runs[i::a.rounds] for i in range(a.rounds)]
    modes = a.modes.split(",")
    load0 = os.getloadavg()
    print(f"{len(runs)} runs, {a.rounds} rounds; cpus {os.cpu_count()}, sched_autogroup_enabled {autogroup()}, "
          f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    warm()  # imports once, here, so that no mode pays them inside its timing (every local mode forks from here)
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
    cpu = {m: 0.0 for m in modes}
    peak = {m: 0 for m in modes}
    pss = {m: 0 for m in modes}
    rows: dict[str, list] = {m: [] for m in modes}
    loads: list[float] = [load0[0]]
    try:
        for k, chunk in enumerate(chunks):
            order = modes[k % len(modes):] + modes[: k % len(modes)]
            for m in order:
                dask = m.startswith("dask")
                own_session_workers(m.endswith("s"))
                c0 = tree_cpu(dask_pids if dask else set())
                with PeakRSS(exclude=set() if dask else dask_pids) as mem:
                    if dask:
                        res = run_sweep(chunk, cluster=client, reports_dir=a.reports / m)
                    else:
                        res = run_sweep(chunk, workers=int(m[5:].rstrip("s")), reports_dir=a.reports / m)
                c = tree_cpu(dask_pids if dask else set()) - c0
                total[m] += res.seconds
                cpu[m] += c
                peak[m] = max(peak[m], mem.peak)
                pss[m] = max(pss[m], mem.peak_pss)
                rows[m] += res.rows
                loads.append(os.getloadavg()[0])
                print(f"round {k + 1}: {m:7s} {len(chunk)} runs {res.seconds:6.1f} s, CPU {1000 * c / len(chunk):5.1f} ms/run, "
                      f"cores used {c / res.seconds:.2f}, load {loads[-1]:.1f}", flush=True)
    finally:
        own_session_workers(False)
        if client is not None:
            client.close()
            cluster.close()
    load1 = os.getloadavg()
    print(f"load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    for m in modes:
        print(json.dumps({"mode": m, "runs": len(rows[m]), "seconds": round(total[m], 1), "runs_per_s": round(len(rows[m]) / total[m], 1),
                          "cpu_ms_per_run": round(1000 * cpu[m] / len(rows[m]), 1), "cores_used": round(cpu[m] / total[m], 2),
                          "peak_rss_mb": round(peak[m] / 2**20), "peak_pss_mb": round(pss[m] / 2**20), "startup_s": round(startup, 2) if m.startswith("dask") else 0.0,
                          "counts": counts_of(rows[m])}))
    same = len({json.dumps(counts_of(r)) for r in rows.values()}) == 1
    print("verdict counts identical across modes:", same)
    if "local1" in total:
        others = ", ".join(f"{m} {total['local1'] / total[m]:.2f}x ({total[m]:.1f} s, {1000 * cpu[m] / len(rows[m]):.1f} ms CPU/run, "
                           f"{cpu[m] / total[m]:.2f} cores, RSS {peak[m] / 2**20:.0f} MB, PSS {pss[m] / 2**20:.0f} MB)" for m in modes if m != "local1")
        print(f"RESULT {len(runs)} runs: local1 {total['local1']:.1f} s ({1000 * cpu['local1'] / len(rows['local1']):.1f} ms CPU/run, "
              f"{cpu['local1'] / total['local1']:.2f} cores, RSS {peak['local1'] / 2**20:.0f} MB, PSS {pss['local1'] / 2**20:.0f} MB); "
              f"{others}; "
              f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cpus, autogroup {autogroup()}"
              f"{'' if same else '; VERDICTS DIFFER'}")


if __name__ == "__main__":
    main()

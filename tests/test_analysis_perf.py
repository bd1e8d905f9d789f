"""The analysis after reading is vectorised and bounded: same answers as the per-point Python it
replaced (kept here as oracles), no copies of the run's columns, and a long run analysed in a small
fraction of its reading time."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autopsy.ingest.base import RunBuilder
from autopsy.model import Run
from autopsy.report import chart_series, decimate, metrics_summary
from detectors import lr_too_high, overflow_then_zero
from detectors._common import DIVERGE_FACTOR, DIVERGE_MIN_BEST, Series, hidden_zero_steps, points, value_at

# -- oracles: the per-point implementations the vectorised code replaced -------------------------


def old_series(run: Run, metric: str) -> pd.DataFrame:
    df = run.scalars
    return df[df["metric"] == metric].sort_values("step", kind="stable")


def old_decimate(steps: list[int], values: list[float], n: int) -> tuple[list[int], list[float]]:
    if len(steps) <= n:
        return steps, values
    buckets = max(1, n // 2)
    size = math.ceil(len(steps) / buckets)
    keep: set[int] = set()
    for b in range(0, len(steps), size):
        idx = range(b, min(b + size, len(steps)))
        finite_idx = [i for i in idx if math.isfinite(values[i])]
        if finite_idx:
            keep.add(min(finite_idx, key=lambda i: values[i]))
            keep.add(max(finite_idx, key=lambda i: values[i]))
        keep.update(i for i in idx if not math.isfinite(values[i]))
    order = sorted(keep)
    return [steps[i] for i in order], [values[i] for i in order]


def old_divergence(vals: list[float]) -> tuple[int, int] | None:
    """lr_too_high's former O(n^2) scan: (log index, index of the best loss so far) of the first divergence."""
    best = None
    for i, v in enumerate(vals):
        best = i if best is None or v < vals[best] else best
        tail = vals[i:]
        # the divergence bar: DIVERGE_FACTOR x the best, and back above 0.8x the first loss or 5x the best anyway
        floor = min(max(DIVERGE_FACTOR * vals[best], 0.8 * vals[0]), 5.0 * vals[best])
        if vals[best] > DIVERGE_MIN_BEST and len(tail) >= lr_too_high.DIVERGE_LOGS and all(q >= floor for q in tail):
            return i, best
    return None


def build(rows: dict[str, tuple[list[int], list[float]]], source: str = "stdout.log", kind: str = "text_log") -> Run:
    b = RunBuilder(Path("/tmp"))
    for key, (steps, vals) in rows.items():
        b.scalar_frame(source, kind, pd.DataFrame({"step": steps, "key": key, "value": vals,
                                                   "line": pd.array([s * 2 + 1 for s in steps], dtype="Int64")}))
    return b.finish()


# -- Run.arrays / series --------------------------------------------------------------------------


def test_arrays_are_views_of_the_finished_frame_and_match_the_old_series():
    run = build({"loss": ([1, 2, 3, 4], [4.0, 3.0, float("nan"), 2.0]), "grad_norm": ([1, 2, 3, 4], [1.0, 0.5, 0.0, 2.0])})
    arr = run.arrays("loss")
    assert isinstance(arr.rows, range)  # grouped and sorted by the builder: no index array
    assert np.shares_memory(arr.values, run.scalars["value"].to_numpy())  # no copy of the column
    assert arr.steps.tolist() == [1, 2, 3, 4]
    assert run.series("loss").equals(old_series(run, "loss"))
    assert run.arrays("nope") is None and run.series("nope").empty and not run.has_metric("nope")
    assert run.metrics() == ["grad_norm", "loss"] and run.has_metric("grad_norm")


def test_series_order_on_a_shuffled_frame_with_duplicate_steps_matches_the_old_series():
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({
        "step": rng.integers(0, 60, n).astype("int64"),
        "metric": rng.choice(["loss", "grad_norm", "lr"], n).astype(object),
        "value": rng.normal(size=n),
        "source": rng.choice(["a.log", "trainer_state.json"], n).astype(object),
        "line": pd.array(rng.integers(1, 999, n), dtype="Int64"),
        "key": "k",
    })
    run = Run(root=Path("/tmp"), scalars=df)
    for m in ("loss", "grad_norm", "lr"):
        assert run.series(m).equals(old_series(run, m))  # same rows, same (stable) order, same index labels
        pts = points(run, m)
        old = old_series(run, m)
        assert [(p.step, p.value, p.source, p.line) for p in pts] == list(zip(
            old["step"].tolist(), old["value"].tolist(), old["source"].tolist(), old["line"].tolist()))
    run.scalars = df[df["metric"] != "lr"]  # a new frame: the memo is rebuilt
    assert run.metrics() == ["grad_norm", "loss"] and points(run, "lr") is not None and len(points(run, "lr")) == 0


def test_series_view_behaves_like_the_list_it_replaced():
    run = build({"loss": ([1, 2, 2, 5, 9], [1.0, float("inf"), 0.0, 3.0, float("nan")])})
    s = points(run, "loss")
    as_list = list(s)
    assert len(s) == 5 and bool(s) and not Series.empty()
    assert s[-1].step == 9 and math.isnan(s[-1].value) and s[0].line == 3 and s[0].source == "stdout.log"
    assert [p.step for p in s[1:3]] == [2, 2] and s[1:3][0].finite is False
    def key(p):
        return None if p is None else (p.step, repr(p.value), p.source, p.line)  # repr: NaN equals NaN

    for step in (0, 1, 2, 4, 5, 100):
        assert key(value_at(s, step)) == key(value_at(as_list, step))
    assert key(value_at(s, 0)) is None and key(value_at(s, 4))[0] == 2 and key(value_at(s, 100))[0] == 9
    present, vals = s.lookup(np.array([2, 3, 9]))
    assert present.tolist() == [True, False, True] and vals[0] == 0.0  # the last point logged at a step wins, like a dict
    assert s.before(5).steps.tolist() == [1, 2, 2] and s.before(5, inclusive=True).steps.tolist() == [1, 2, 2, 5]
    assert s.finite_only().values.tolist() == [1.0, 0.0, 3.0]
    assert s.row(3) == (5, 3.0, "stdout.log", 11)
    with pytest.raises(IndexError):
        s[5]


def test_hidden_zero_steps_use_the_grad_norm_logged_at_the_same_step():
    run = build({"loss": ([1, 2, 3, 4], [2.0, 0.0, 0.0, 0.0]), "grad_norm": ([1, 2, 3], [1.0, float("nan"), 1.0])})
    assert [p.step for p in hidden_zero_steps(run)] == [2]  # step 3: finite grad_norm; step 4: none logged


# -- detectors: the vectorised scans equal the old loops ------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_divergence_scan_equals_the_quadratic_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    vals = np.exp(rng.normal(0, 0.6, n)).round(2)
    if seed % 3 == 0:
        vals[int(rng.integers(0, n)):] *= rng.choice([2.5, 10.0])  # a jump that never comes back
    if seed % 5 == 0:
        vals[rng.integers(0, n, 3)] = 0.0
    run = build({"loss": (list(range(1, n + 1)), vals.tolist())})
    got = lr_too_high._failure(run)
    want = old_divergence(vals.tolist())
    if want is None:
        assert got is None
    else:
        i, best = want
        assert got is not None and got[0] == i + 1
        assert f"(step {best + 1})" in got[1].detail


def _old_overflow(loss: list[tuple[int, float]], gn: dict[int, float]) -> int | None:
    """NUM002's former loop: the step of the first spike followed by dead logs."""
    for i, (step, v) in enumerate(loss):
        if not math.isfinite(v) or v <= 0:
            continue
        win = [q for _, q in loss[max(0, i - 5):i] if q != 0.0 and math.isfinite(q)]
        base = sorted(win)[len(win) // 2] if len(win) % 2 else (sum(sorted(win)[len(win) // 2 - 1:len(win) // 2 + 1]) / 2
                                                               if win else None)
        if not v > 65504.0 and (base is None or base <= 0 or v < 10.0 * base):
            continue
        after = loss[i + 1:i + 6]
        if any(not math.isfinite(q) or (q == 0.0 and not math.isfinite(gn.get(s, 0.0))) for s, q in after):
            return step
    return None


@pytest.mark.parametrize("seed", range(40))
def test_overflow_then_zero_equals_the_per_point_loop(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 80))
    vals = np.exp(rng.normal(0, 0.3, n))
    gn = rng.uniform(0.5, 2, n)
    for _ in range(int(rng.integers(0, 4))):
        k = int(rng.integers(0, n))
        vals[k] = rng.choice([1.19e34, 30.0, 70000.0, 0.0, float("nan")])
        if k + 1 < n and rng.random() < 0.7:
            vals[k + 1:k + 1 + int(rng.integers(1, 4))] = 0.0
            gn[k + 1:k + 4] = np.nan
    run = build({"loss": (list(range(1, n + 1)), vals.tolist()), "grad_norm": (list(range(1, n + 1)), gn.tolist())})
    found = list(overflow_then_zero.detect(run))
    want = _old_overflow(list(zip(range(1, n + 1), vals.tolist())), dict(zip(range(1, n + 1), gn.tolist())))
    assert [f.first_step for f in found] == ([want] if want is not None else [])


# -- report ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(25))
def test_decimate_keeps_the_same_points_as_the_bucket_loop(seed):
    rng = np.random.default_rng(seed)
    total = int(rng.integers(1, 5000))
    vals = rng.choice([0.0, -0.0, 1.0, 2.0, 3.5], total) if seed % 2 else rng.normal(size=total)
    vals = vals.astype(float)
    vals[rng.integers(0, total, int(rng.integers(0, 30)))] = rng.choice([np.nan, np.inf, -np.inf])
    if seed % 7 == 0:
        vals[: total // 2] = np.nan  # whole buckets without a finite value
    steps = list(range(total))
    n = int(rng.choice([10, 100, 1500]))
    got = decimate(steps, vals.tolist(), n)
    want = old_decimate(steps, vals.tolist(), n)
    assert got[0] == want[0]
    assert np.array_equal(np.array(got[1]), np.array(want[1]), equal_nan=True)


def test_metrics_summary_and_chart_series_exact_values():
    steps = list(range(1, 4001))
    loss = [3.0 - i * 1e-4 for i in range(4000)]
    loss[1234] = float("nan")
    loss[2000] = float("inf")
    loss[3999] = 0.5
    run = build({"loss": (steps, loss), "epoch": (steps, [s / 4000 for s in steps])})
    m = metrics_summary(run)["loss"]
    assert m == {"count": 4000, "first_step": 1, "last_step": 4000, "first": 3.0, "last": 0.5,
                 "min": 0.5, "max": 3.0, "nonfinite": 2, "first_nonfinite_step": 1235, "source": "stdout.log",
                 "sources": ["stdout.log"], "keys": ["loss"]}
    ch = chart_series(run)
    assert set(ch) == {"loss"} and ch["loss"]["total"] == 4000
    assert 1235 in ch["loss"]["steps"] and "NaN" in ch["loss"]["values"] and "Infinity" in ch["loss"]["values"]
    assert len(ch["loss"]["steps"]) <= 1500 + 2 and ch["loss"]["steps"] == sorted(ch["loss"]["steps"])
    assert ch["loss"]["values"][-1] == 0.5  # the last bucket's minimum survives


# -- bounded: analysis is a small fraction of reading ---------------------------------------------

#: analysis (detectors + diagnosis + report) must take at most this share of the reading time; measured
#: ~0.05-0.15 after vectorising, ~30-60 before (per-point Python and a quadratic scan)
MAX_ANALYSIS_OVER_READ = 0.5


@pytest.mark.slow
def test_long_run_analysis_is_a_fraction_of_reading(tmp_path):
    from autopsy import report
    from autopsy.diagnosis import diagnose
    from autopsy.pipeline import Analysis, read_run, run_detectors
    from benchmarks.bench_analysis import write_shaped_log

    n = 75_000  # 4 series: ~300k points
    log = tmp_path / "stdout.log"
    write_shaped_log(log, n, "diverge")
    import autopsy.ingest.textlog  # noqa: F401  - imports are not reading

    t0 = time.perf_counter()
    run, _ = read_run(log)
    t_read = time.perf_counter() - t0
    assert len(run.scalars) >= 4 * n * 0.99
    t1 = time.perf_counter()
    findings, outcomes = run_detectors(run, debug=True)
    dx = diagnose(findings, outcomes, run)
    rep = report.build_report(Analysis(run, dx, None, {}))
    t_analysis = time.perf_counter() - t1
    assert dx.verdict.root_cause == "lr_too_high" and {f.code for f in findings} >= {"NUM001", "OPT001"}
    assert rep["run"]["metrics"]["loss"]["count"] == n
    assert t_analysis <= MAX_ANALYSIS_OVER_READ * t_read, (t_analysis, t_read)


def test_step_near_is_the_last_step_logged_before_the_event_line_in_the_same_file():
    from autopsy.model import Event
    from detectors._common import step_near

    b = RunBuilder(Path("/tmp"))
    b.scalar_frame("a.log", "text_log", pd.DataFrame({"step": [5, 3, 9], "key": "loss", "value": [1.0, 2.0, 3.0],
                                                      "line": pd.array([10, 20, 30], dtype="Int64")}))
    b.scalar_frame("b.log", "text_log", pd.DataFrame({"step": [100], "key": "loss", "value": [1.0],
                                                      "line": pd.array([1], dtype="Int64")}))
    b.scalar_frame("trainer_state.json", "trainer_state", pd.DataFrame({"step": [7], "key": "grad_norm", "value": [1.0]}))
    run = b.finish()

    def at(source, line):
        return step_near(run, Event("nan_stop", "Loss is nan", source, line=line))

    assert [at("a.log", 9), at("a.log", 10), at("a.log", 25), at("a.log", 99)] == [None, 5, 5, 9]
    assert at("b.log", 1) == 100 and at("trainer_state.json", 1) is None and at("c.log", 5) is None
    assert at("a.log", None) == run.last_step == 100

"""The canonical JSON report. HTML, Markdown and text render this dict and nothing else.

Schema: ``schema/report.schema.json`` (validated in tests). ``schema_version`` changes only
when a field is removed or changes meaning; adding fields keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autopsy import __version__
from autopsy.model import ROOT_CAUSES, Run, jsonable
from autopsy.pipeline import Analysis

SCHEMA_VERSION = 1
#: points per series kept for charts; buckets keep min and max so spikes survive, and every
#: non-finite point is kept on top of that.
CHART_POINTS = 1500
MAX_EVENTS = 300


def build_report(analysis: Analysis, command: str | None = None) -> dict[str, Any]:
    run, dx = analysis.run, analysis.diagnosis
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "autopsy", "version": __version__},
        "command": command,
        "verdict": dx.verdict.to_json(),
        "findings": [f.to_json() for f in dx.findings],
        "chain": [{"step": c.step, "text": c.text, "artifact": c.artifact, "where": c.where, "config": c.config}
                  for c in dx.chain],
        "timeline": [t.to_json() for t in dx.timeline],
        "alternatives": dx.alternatives,
        "detectors": [{"code": o.code, "name": o.name, "status": o.status, "reason": o.reason, "findings": o.findings}
                      for o in dx.detectors],
        "artifacts": [a.to_json() for a in run.artifacts],
        "root_causes": {k: v for k, v in ROOT_CAUSES.items() if k in {f.root_cause for f in dx.findings} | {dx.verdict.root_cause}},
        "run": {
            "root": str(run.root),
            "frameworks": list(run.frameworks),
            "config": run.config.to_json(),
            "metrics": metrics_summary(run),
            "series": chart_series(run),
            "events": events_json(run),
            "checkpoints": checkpoints_json(run),
            "checkpoint_analysis": jsonable(run.checkpoint_analysis),
            "flight_records": jsonable(run.flight_records),
        },
    }


def metrics_summary(run: Run) -> dict[str, Any]:
    """Per metric: count, first/last, finite min/max, non-finite count, sources; O(n) numpy per series."""
    out: dict[str, Any] = {}
    df = run.scalars
    if df.empty:
        return out
    for metric in run.metrics():
        arr = run.arrays(metric)
        if arr is None or not len(arr.steps):
            continue
        steps, vals = arr.steps, arr.values
        fin = np.isfinite(vals)
        fin_idx = np.flatnonzero(fin)
        fin_vals = vals[fin_idx]
        nonfin = np.flatnonzero(~fin)
        rows = _rows_frame(df, arr.rows)
        out[metric] = jsonable({
            "count": int(len(steps)),
            "first_step": int(steps[0]), "last_step": int(steps[-1]),
            "first": float(vals[0]), "last": float(vals[-1]),
            # argmin/argmax: the first of equal values, as Python's min()/max() over the series would give
            "min": float(fin_vals[np.argmin(fin_vals)]) if fin_vals.size else None,
            "max": float(fin_vals[np.argmax(fin_vals)]) if fin_vals.size else None,
            "nonfinite": int(nonfin.size), "first_nonfinite_step": int(steps[nonfin[0]]) if nonfin.size else None,
            "source": run.series_sources.get(metric),
            "sources": sorted(set(rows["source"].unique().tolist())),
            "keys": sorted(set(rows["key"].unique().tolist()))[:5],
        })
    return out


def _rows_frame(df: Any, rows: Any) -> Any:
    return df.iloc[rows.start:rows.stop] if isinstance(rows, range) else df.take(rows)


def decimate(steps: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray,
             n: int = CHART_POINTS) -> tuple[list[int], list[float]]:
    """Keep min and max per bucket and every non-finite point, in step order.

    Buckets are ``ceil(len / (n // 2))`` consecutive points; within one, the first minimum and the
    first maximum of the finite values are kept (a spike survives any zoom), plus every NaN/Inf.
    Vectorised: one reshape to (buckets, size) and an argmin/argmax per row.
    """
    st = np.asarray(steps, dtype="int64")
    va = np.asarray(values, dtype="float64")
    total = len(st)
    if total <= n:
        return st.tolist(), va.tolist()
    buckets = max(1, n // 2)
    size = math.ceil(total / buckets)
    n_rows = math.ceil(total / size)
    fin = np.isfinite(va)
    pad = n_rows * size - total
    lo = np.concatenate((np.where(fin, va, np.inf), np.full(pad, np.inf))).reshape(n_rows, size)
    hi = np.concatenate((np.where(fin, va, -np.inf), np.full(pad, -np.inf))).reshape(n_rows, size)
    has = np.concatenate((fin, np.zeros(pad, dtype=bool))).reshape(n_rows, size).any(axis=1)
    base = np.arange(n_rows) * size
    keep = np.zeros(total, dtype=bool)
    keep[(base + lo.argmin(axis=1))[has]] = True
    keep[(base + hi.argmax(axis=1))[has]] = True
    keep |= ~fin
    idx = np.flatnonzero(keep)
    return st[idx].tolist(), va[idx].tolist()


def chart_series(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if run.scalars.empty:
        return out
    for metric in run.metrics():
        if metric in ("epoch", "step"):
            continue
        arr = run.arrays(metric)
        if arr is None:
            continue
        steps, values = decimate(arr.steps, arr.values)
        out[metric] = {"steps": steps, "values": [jsonable(v) for v in values], "total": int(len(arr.steps))}
    return out


def events_json(run: Run) -> list[dict[str, Any]]:
    out = []
    for e in run.events[:MAX_EVENTS]:
        out.append({"kind": e.kind, "message": e.message, "source": e.source, "line": e.line, "step": e.step,
                    "count": e.count, "data": jsonable(e.data), "rank": e.rank})
    return out


def checkpoints_json(run: Run) -> list[dict[str, Any]]:
    out = []
    for c in run.checkpoints:
        tensors = list(c.tensors())
        bad = [t for t in tensors if t.nonfinite]
        out.append(jsonable({
            "path": c.path, "step": c.step, "kind": c.kind,
            "files": [{"path": f.path, "format": f.format, "bytes": f.bytes, "seconds": round(f.seconds, 4),
                       "tensors": len(f.tensors), "problem": f.problem} for f in c.files],
            "tensors": len(tensors), "nonfinite_tensors": len(bad),
            "nonfinite_values": sum(t.nonfinite for t in bad),  # the others hold none: one pass over 100k tensors less
            "bad_tensors": [t.to_json() for t in bad[:50]],
            "optimizer": c.optimizer, "scaler": c.scaler, "deepspeed": c.deepspeed,
        }))
    return out

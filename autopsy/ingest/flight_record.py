"""Reader of autopsy's own flight record (``autopsy-record/record.jsonl``, written by autopsy.record).

Fills the Run with the per-step series (loss, grad_norm, learning_rate, loss_scale; every step,
exact) and one ``Run.flight_records`` entry: the header, the non-finite events with their
localisation (module, direction, batch, lengths), and the per-layer gradient norms of the steps
leading up to the onset (the report's heatmap). A record cut short by a killed process is read up
to its last whole line; the cut is reported as a partial read. Format: ``docs/record.md``.
"""

from __future__ import annotations

import math
from typing import Any

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder

KIND = "autopsy_record"
#: steps of per-layer gradient norms kept for the report's heatmap (up to and including the onset)
HEAT_STEPS = 48
#: non-finite events carried into the Run (the first is the one a post-mortem is about)
MAX_EVENTS = 50
_SCALARS = (("loss", "loss"), ("gn", "grad_norm"), ("lr", "learning_rate"), ("scale", "loss_scale"))


def read(found: Found, builder: RunBuilder) -> None:
    from autopsy.record.format import num, read_record

    source = builder.rel(found.path)
    cols: dict[str, list[Any]] = {"step": [], "key": [], "value": [], "line": []}

    def on_step(obj: dict[str, Any]) -> None:
        step = obj.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            return
        for key, _metric in _SCALARS:
            v = num(obj.get(key))
            if v is not None:
                cols["step"].append(step)
                cols["key"].append(key)
                cols["value"].append(v)
                cols["line"].append(obj.get("_line", -1))

    rec = read_record(found.path, on_step=on_step, keep_steps=HEAT_STEPS)
    for p in rec.problems:
        builder.problem(found.path, KIND, p, "partial" if rec.header else "unreadable")
    if not rec.header:
        return
    if cols["step"]:
        metric = [dict(_SCALARS)[k] for k in cols["key"]]
        builder.scalar_columns(source, KIND, cols["step"], cols["key"], cols["value"], cols["line"], True, metric)
    fw = rec.header.get("framework")
    if fw in ("transformers", "lightning"):
        builder.framework(str(fw))
    onset = rec.onset
    groups = rec.groups
    upto = _int(onset.get("step")) if onset else None
    heat_rows = [s for s in rec.steps if isinstance(s.get("g"), list) and _int(s.get("step")) is not None
                 and (upto is None or _int(s.get("step")) <= upto)]
    heat_rows = heat_rows[-HEAT_STEPS:]
    builder.run.flight_records.append({
        "source": source,
        "framework": fw, "mode": rec.header.get("mode"), "on_nonfinite": rec.header.get("on_nonfinite"),
        "version": rec.header.get("version"), "model": rec.header.get("model"),
        "groups": groups,
        "onset": _clean(onset) if onset else None,
        "nonfinite": [_clean(e) for e in rec.nonfinite[:MAX_EVENTS]],
        "nonfinite_count": len(rec.nonfinite),
        "overflows": len(rec.overflows),
        "heat": {"steps": [s.get("step") for s in heat_rows],
                 "values": [[num(v) for v in s["g"]] for s in heat_rows],
                 "loss": [num(s.get("loss")) for s in heat_rows],
                 "lines": [s.get("_line") for s in heat_rows]},
        "updates": [_clean(u) for u in rec.updates
                    if _int(u.get("step")) is not None and (upto is None or _int(u.get("step")) <= upto)][-5:],
        "checkpoints": [_clean(c) for c in rec.checkpoints],
        "end": _clean(rec.end) if rec.end else None,
        "truncated": rec.truncated_tail,
        "last_step": _int(rec.steps[-1].get("step")) if rec.steps else None,
    })


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k not in ("t", "_line")}
    out["line"] = obj.get("_line")
    return {k: (None if isinstance(v, float) and not math.isfinite(v) and k not in ("loss", "gn") else v)
            for k, v in out.items()}


READERS = {KIND: read}

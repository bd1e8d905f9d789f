"""Per-layer gradient-norm heatmap of a flight record, for the HTML report.

A table, not a script or an image: the report runs no script and fetches nothing, and the values
and layer names stay escaped text (jinja2 autoescape). Colour is log10 of the norm over one scale
for the whole map (so a layer that is 100x the others stands out); NaN and Inf get the report's own
NaN/Inf colours. Rows are layers in model order, columns the steps up to and including the onset.
"""

from __future__ import annotations

import math
from typing import Any

from autopsy.render.charts import fmt

NAN_COLOUR = "#c81e1e"
INF_COLOUR = "#a21caf"
MISSING_COLOUR = "#eeeeee"
#: light to dark blue (ColorBrewer Blues ends)
LOW, HIGH = (0xEF, 0xF3, 0xFF), (0x08, 0x30, 0x6B)
#: rows shown (a 100-layer model still fits; the rest are summarised)
MAX_ROWS = 80


def _colour(t: float) -> str:
    rgb = [round(a + (b - a) * t) for a, b in zip(LOW, HIGH)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return None


def build(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One heatmap per flight record that has per-layer norms."""
    out = []
    for rec in records or []:
        if not isinstance(rec, dict):
            continue
        heat = rec.get("heat") if isinstance(rec.get("heat"), dict) else {}
        steps = heat.get("steps") or []
        rows = heat.get("values") or []
        groups = [str(g) for g in rec.get("groups") or []]
        if not steps or not groups:
            continue
        vals = [[_num(v) for v in (r or [])] for r in rows]
        logs = [math.log10(v) for r in vals for v in r if v is not None and math.isfinite(v) and v > 0]
        lo, hi = (min(logs), max(logs)) if logs else (0.0, 1.0)
        span = hi - lo or 1.0
        onset = rec.get("onset") if isinstance(rec.get("onset"), dict) else None
        onset_step = onset.get("step") if onset else None
        origin = onset.get("group") if onset else None
        table = []
        for gi, g in enumerate(groups[:MAX_ROWS]):
            cells = []
            for si, s in enumerate(steps):
                v = vals[si][gi] if si < len(vals) and gi < len(vals[si]) else None
                if v is None:
                    colour, text = MISSING_COLOUR, "no gradient"
                elif math.isnan(v):
                    colour, text = NAN_COLOUR, "NaN"
                elif math.isinf(v):
                    colour, text = INF_COLOUR, "Inf"
                else:
                    t = (math.log10(v) - lo) / span if v > 0 else 0.0
                    colour, text = _colour(max(0.0, min(1.0, t))), fmt(v)
                cells.append({"colour": colour, "title": f"{g} @ step {s}: {text}"})
            table.append({"group": g, "cells": cells, "origin": g == origin})
        out.append({
            "source": str(rec.get("source", "")), "steps": steps, "onset": onset_step, "rows": table,
            "more_rows": max(0, len(groups) - MAX_ROWS), "low": fmt(10 ** lo), "high": fmt(10 ** hi),
            "low_colour": _colour(0.0), "high_colour": _colour(1.0),
        })
    return out

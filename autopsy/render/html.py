"""The HTML report: one self-contained file from ``templates/report.html.j2``.

Why this shape: the file is attached to issues and opened offline, on laptops and phones, and
it carries text from logs written by anyone. So: jinja2 with autoescape on for every template
(data is only ever a *value*, never template source), no script at all, a CSP meta that forbids
any request (``default-src 'none'``; inline styles and data: images only), charts as inline SVG
(autopsy.render.charts), and print CSS.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import jinja2

from autopsy.render import charts, comparison, heatmap, view

TEMPLATE = "report.html.j2"
#: CSP of the report: nothing may be fetched; no script may run. Kept in one place for the tests.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'none'; base-uri 'none'; form-action 'none'"
#: events listed in the report (the JSON keeps up to autopsy.report.MAX_EVENTS)
MAX_EVENTS_SHOWN = 100


def _load(name: str) -> str | None:
    try:
        return resources.files("autopsy.templates").joinpath(name).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, OSError):
        return None


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: jinja2 caches compiled templates per environment, and compiling
    report.html.j2 costs ~60 ms, several times the analysis of a small run (a sweep renders one per run)."""
    env = jinja2.Environment(loader=jinja2.FunctionLoader(_load), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
    env.filters["num"] = lambda v: charts.fmt(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    env.filters["value"] = view.value_text
    env.filters["pct"] = lambda v: f"{v * 100:.3g}%"
    env.globals["when"] = view.when
    return env


def markers(report: dict[str, Any], ck: dict[str, Any], onset: int | None) -> list[charts.Marker]:
    out = []
    for r in ck["rows"]:
        if r["step"] is None:
            continue
        kind = "ckpt-last-clean" if r["last_clean"] else ("ckpt-clean" if r["clean"] else "ckpt-bad")
        state = "last clean" if r["last_clean"] else ("clean" if r["clean"] else f"{r['nonfinite_tensors']} bad tensors")
        out.append(charts.Marker(r["step"], f"{r['path']} ({state})", kind))
    if onset is not None:
        out.append(charts.Marker(onset, f"onset step {onset}", "onset"))
    return out


def context(report: dict[str, Any]) -> dict[str, Any]:
    run = view.d(report.get("run"))
    ck = view.checkpoints(report)
    onset = view.onset_step(report)
    detectors = [view.d(x) for x in view.lst(report.get("detectors"))]
    artifacts = [view.d(x) for x in view.lst(report.get("artifacts"))]
    order = {"unreadable": 0, "partial": 1, "read": 2, "ignored": 3}
    artifacts.sort(key=lambda a: (order.get(str(a.get("status")), 4), str(a.get("path"))))
    events = [view.d(e) for e in view.lst(run.get("events"))]
    analysis = {k: v for k, v in view.d(run.get("checkpoint_analysis")).items() if k not in ("last_clean",)}
    return {
        "csp": CSP,
        "verdict": view.verdict(report),
        "remedies": view.top_remedies(report),
        "findings": view.findings(report),
        "chain": [view.d(c) for c in view.lst(report.get("chain"))],
        "alternatives": [view.d(a) for a in view.lst(report.get("alternatives"))],
        "causal": [view.d(t) for t in view.lst(report.get("timeline"))],
        "onset": onset,
        "panels": charts.build_panels(run.get("series"), markers(report, ck, onset)),
        "comparison": comparison.html_section(report),  # autopsy run --baseline / autopsy compare
        "checkpoints": ck,
        "heatmaps": heatmap.build(view.lst(run.get("flight_records"))),
        "analysis": analysis,
        "config": view.config(report),
        "artifacts": artifacts,
        "artifact_counts": {s: sum(1 for a in artifacts if a.get("status") == s) for s in order},
        "detectors": detectors,
        "detector_counts": {s: sum(1 for x in detectors if x.get("status") == s) for s in ("ran", "skipped", "failed")},
        "events": events[:MAX_EVENTS_SHOWN],
        "events_total": len(events),
        "run": {"root": view.text(run.get("root")), "frameworks": [view.text(f) for f in view.lst(run.get("frameworks"))]},
        "command": view.text(report.get("command")),
        "tool": view.d(report.get("tool")),
        "schema_version": report.get("schema_version"),
    }


def render(report: dict[str, Any]) -> str:
    return environment().get_template(TEMPLATE).render(**context(report))

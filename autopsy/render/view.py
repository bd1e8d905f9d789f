"""What the HTML, Markdown and terminal renderers derive from the canonical report dict.

Renderers read only the report dict, and it may come from another version or be partly
filled (a detector failed, the checkpoint stage did not run), so every accessor here is
defensive: a missing or odd-typed key gives an empty value, never an exception.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit

from autopsy.model import ROOT_CAUSES, save_order_key

STATUS_WORDS = {"failed": "Failed", "healthy": "Healthy", "inconclusive": "Inconclusive"}
#: tensor names grouped by their transformer block (model.layers.3.mlp... -> model.layers.3)
LAYER_RE = re.compile(r"^(.*?(?:^|\.)(?:layers|layer|h|blocks|block|encoder\.layer|decoder\.layers)\.\d+)(?:\.|$)")
#: series whose non-finite onset counts when no finding gives one
ONSET_METRICS = ("loss", "grad_norm", "eval_loss")


def d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def lst(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def text(x: Any) -> str:
    return "" if x is None else str(x)


def when(item: dict[str, Any], stepped: str = "step ", unknown: str = "-", legacy: str = "config") -> str:
    """When a chain or timeline item happened: its step; "config" for a setting; the log line of an
    event whose step is unknown (a traceback, a warning); else ``unknown``. A report written before
    settings and stepless events were told apart (no "config" key) reads as it did then."""
    step = as_int(item.get("step"))
    config = item.get("config")
    if config is True and (step is None or step == 0):
        return "config"
    if step is not None:
        return f"{stepped}{step}"
    if config is None:
        return legacy
    where = str(item.get("where") or "")
    return where if where.startswith("line ") else unknown


def as_int(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and math.isfinite(x) and x == int(x):
        return int(x)
    return None


def safe_url(url: Any) -> str | None:
    """The URL when it is a plain http(s) link; None for javascript:, data:, relative or malformed."""
    if not isinstance(url, str) or any(c in url for c in "\n\r\t <>\"'`\\"):
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return url.strip()
    return None


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    v = d(report.get("verdict"))
    status = v.get("status") if v.get("status") in STATUS_WORDS else "inconclusive"
    rc = text(v.get("root_cause")) or "unknown"
    causes = d(report.get("root_causes"))
    conf = v.get("confidence")
    conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) and math.isfinite(conf) else 0.0
    rc_text = text(causes.get(rc) or ROOT_CAUSES.get(rc) or rc.replace("_", " "))
    if status == "inconclusive" and text(v.get("headline")).startswith("Nothing to judge"):
        # nothing was found to judge: never say "something is wrong" about nothing
        rc_text = "Nothing to judge: no training metrics, log events or checkpoints in what was read."
    return {
        "status": status, "status_word": STATUS_WORDS[status], "root_cause": rc,
        "root_cause_text": rc_text,
        "confidence": conf, "confidence_pct": f"{round(conf * 100)}%", "headline": text(v.get("headline")),
    }


def findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in lst(report.get("findings")):
        f = d(f)
        out.append({
            "code": text(f.get("code")), "name": text(f.get("name")), "root_cause": text(f.get("root_cause")),
            "severity": f.get("severity") if f.get("severity") in ("critical", "error", "warning", "info") else "info",
            "confidence": f.get("confidence") if isinstance(f.get("confidence"), (int, float)) else 0.0,
            "title": text(f.get("title")), "message": text(f.get("message")), "first_step": as_int(f.get("first_step")),
            "basis": text(f.get("basis")),
            "evidence": [{"artifact": text(d(e).get("artifact")), "where": text(d(e).get("where")),
                          "detail": text(d(e).get("detail"))} for e in lst(f.get("evidence"))],
            "remedies": [text(r) for r in lst(f.get("remedies"))],
            "references": [{"text": text(r), "href": safe_url(r)} for r in lst(f.get("references"))],
        })
    return out


def top_remedies(report: dict[str, Any]) -> list[str]:
    """Remedies of the finding that carries the verdict (else the first finding with any)."""
    v = verdict(report)
    fs = findings(report)
    for f in fs:
        if f["root_cause"] == v["root_cause"] and f["remedies"]:
            return f["remedies"]
    return next((f["remedies"] for f in fs if f["remedies"] and f["severity"] in ("critical", "error")), [])


def onset_step(report: dict[str, Any]) -> int | None:
    """First failing step: the verdict finding's first_step, else the earliest non-finite loss/grad_norm."""
    v = verdict(report)
    if v["status"] == "healthy":
        return None  # a NaN the detectors judged benign (AMP's first-step grad_norm) is no failure onset
    if v["status"] != "healthy":
        for f in findings(report):
            if f["root_cause"] == v["root_cause"] and f["first_step"] is not None:
                return f["first_step"]
    metrics = d(d(report.get("run")).get("metrics"))
    steps = [as_int(d(metrics.get(m)).get("first_nonfinite_step")) for m in ONSET_METRICS]
    steps = [s for s in steps if s is not None]
    return min(steps) if steps else None


def layer_of(name: str) -> str:
    m = LAYER_RE.match(name)
    if m:
        return m.group(1)
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def checkpoints(report: dict[str, Any]) -> dict[str, Any]:
    """Rows (one per checkpoint), layer columns, and which checkpoint is the last clean one."""
    run = d(report.get("run"))
    analysis = d(run.get("checkpoint_analysis"))
    # unchanged = {pairs: [{from, to, identical, compared}], ...}: a checkpoint's count is its pair's "identical"
    unchanged = {text(d(pr).get("to")): as_int(d(pr).get("identical"))
                 for pr in lst(d(analysis.get("unchanged")).get("pairs"))}
    rows = []
    for c in lst(run.get("checkpoints")):
        c = d(c)
        cells: dict[str, dict[str, float]] = {}
        for t in lst(c.get("bad_tensors")):
            t = d(t)
            n = sum(as_int(t.get(k)) or 0 for k in ("nan", "posinf", "neginf"))
            cell = cells.setdefault(layer_of(text(t.get("name"))), {"nonfinite": 0, "numel": 0, "tensors": 0})
            cell["nonfinite"] += n
            cell["numel"] += as_int(t.get("numel")) or 0
            cell["tensors"] += 1
        for cell in cells.values():
            cell["share"] = cell["nonfinite"] / cell["numel"] if cell["numel"] else 1.0
        path = text(c.get("path"))
        problems = [text(d(f).get("problem")) for f in lst(c.get("files")) if d(f).get("problem")]
        rows.append({
            "path": path, "label": ck_label(path), "step": as_int(c.get("step")), "kind": text(c.get("kind")),
            "tensors": as_int(c.get("tensors")) or 0, "nonfinite_tensors": as_int(c.get("nonfinite_tensors")) or 0,
            "nonfinite_values": as_int(c.get("nonfinite_values")) or 0, "cells": cells, "problems": problems,
            "unchanged": unchanged.get(path),
            "clean": (as_int(c.get("nonfinite_tensors")) or 0) == 0 and not problems,
        })
    rows.sort(key=lambda r: save_order_key(r["step"], r["path"]))
    layers = sorted({k for r in rows for k in r["cells"]}, key=_natural)
    last_clean = _last_clean(rows, analysis.get("last_clean"))
    for r in rows:
        r["last_clean"] = r["path"] == last_clean
    return {"rows": rows, "layers": layers, "last_clean": last_clean,
            "last_clean_label": ck_label(last_clean) if last_clean else None,
            "any_bad": any(not r["clean"] for r in rows)}


def ck_label(path: str) -> str:
    """A checkpoint at the run root (a final ``save_model``) is shown as such, not as "."."""
    return "(run folder, final save)" if path in (".", "") else path


def _natural(s: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def _last_clean(rows: list[dict[str, Any]], hint: Any) -> str | None:
    """The analysis' last_clean ({checkpoint, step}) when it names a listed checkpoint, else derived from rows."""
    path = d(hint).get("checkpoint")
    if isinstance(path, str) and any(r["path"] == path for r in rows):
        return path
    first_bad = next((i for i, r in enumerate(rows) if not r["clean"]), len(rows))
    clean = [r for r in rows[:first_bad] if r["clean"]]
    return clean[-1]["path"] if clean else None


def config(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Config facts split into library versions and the rest; ``used`` marks keys a finding cites."""
    cited = " ".join(e["where"] + " " + e["detail"] for f in findings(report) for e in f["evidence"])
    facts, versions = [], []
    for key, fact in sorted(d(d(report.get("run")).get("config")).items()):
        fact = d(fact)
        row = {"key": text(key), "value": fact.get("value"), "source": text(fact.get("source")),
               "where": text(fact.get("where")), "used": str(key) in cited,
               "others": [{"value": d(o).get("value"), "source": text(d(o).get("source")),
                           "where": text(d(o).get("where"))} for o in lst(fact.get("others"))]}
        (versions if str(key).startswith("version.") else facts).append(row)
    facts.sort(key=lambda r: not r["used"])
    return {"facts": facts, "versions": versions}


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, dict)):
        import json
        return json.dumps(v, ensure_ascii=False)[:300]
    return str(v)[:300]

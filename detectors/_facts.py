"""Small readers of config facts, events and series shared by the config/event detectors.

Config values arrive as whatever the artifact held: ``True``, ``"true"``, ``"1"``, ``8192``,
``"8192"``, ``"4.46.3"``. Detectors must not care, so every lookup here normalises and returns
``None`` when the value is missing or unusable (a detector then stays silent rather than guess).
Event kinds come from the text-log reader; when a line was only classified as a generic
``warning``/``error``/``traceback``, the same phrases are matched in its message so a detector
still sees it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

from autopsy.model import ConfigFact, Event, Evidence, Run

_TRUE = {"true", "1", "yes", "on", "y", "t"}
_FALSE = {"false", "0", "no", "off", "n", "f", "none", "null", ""}


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return bool(value) if math.isfinite(float(value)) else None
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def version_tuple(value: Any) -> tuple[int, ...] | None:
    """'4.46.3' -> (4, 46, 3); '0.19.0.dev0' -> (0, 19, 0); junk -> None."""
    if value is None:
        return None
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(value))
    if not m:
        return None
    return tuple(int(g) if g is not None else 0 for g in m.groups())


def fact_number(run: Run, key: str, source: str | None = None) -> tuple[float, ConfigFact] | None:
    """First fact of ``key`` holding a finite number (``source``: only facts read from that artifact)."""
    for f in run.config.facts(key):
        x = as_number(f.value)
        if x is not None and (source is None or f.source == source):
            return x, f
    return None


def fact_bool(run: Run, key: str) -> tuple[bool, ConfigFact] | None:
    for f in run.config.facts(key):
        b = as_bool(f.value)
        if b is not None:
            return b, f
    return None


def fact_str(run: Run, key: str) -> tuple[str, ConfigFact] | None:
    for f in run.config.facts(key):
        if f.value is None:
            continue
        s = str(f.value).strip()
        if s:
            return s, f
    return None


def fact_evidence(fact: ConfigFact, detail: str) -> Evidence:
    return Evidence(fact.source, f"key {fact.original_key or fact.key}" if not fact.where else
                    (fact.where if fact.where.startswith(("line ", "key ")) else f"key {fact.where}"), detail, config=True)


def event_evidence(ev: Event, detail: str | None = None) -> Evidence:
    where = f"line {ev.line}" if ev.line is not None else (f"step {ev.step}" if ev.step is not None else "log")
    first = ev.message.strip().splitlines()[0][:300] if ev.message.strip() else ev.kind
    text = detail or first
    if ev.count > 1 and detail is None:
        text = f"{text} (x{ev.count})"
    return Evidence(ev.source, where, text, ev.step)


def matching_events(run: Run, kind: str, pattern: re.Pattern[str] | None = None) -> list[Event]:
    """Events of ``kind``, plus generic warning/error/traceback events whose text matches ``pattern``."""
    out = [e for e in run.events if e.kind == kind]
    if pattern is not None:
        for e in run.events:
            if e.kind in ("warning", "error", "traceback") and e not in out:
                text = e.message + " " + " ".join(str(v) for v in e.data.values())
                if pattern.search(text):
                    out.append(e)
    out.sort(key=lambda e: (e.source, e.line if e.line is not None else 0))
    return out


def total_count(events: Iterable[Event]) -> int:
    return sum(max(1, int(e.count or 1)) for e in events)


def values(run: Run, metric: str) -> list[tuple[int, float, str, Any]]:
    """(step, value, source, line) of a series, sorted by step."""
    s = run.series(metric)
    if s.empty:
        return []
    lines = [None if ln is None or ln is pd.NA or (isinstance(ln, float) and math.isnan(ln)) else int(ln)
             for ln in s["line"].tolist()]
    return list(zip([int(x) for x in s["step"].tolist()], [float(v) for v in s["value"].tolist()],
                    s["source"].tolist(), lines))


def scalar_evidence(metric: str, row: tuple[int, float, str, Any], detail: str) -> Evidence:
    step, _value, source, line = row
    # trainer_state.json stores a record index in ``line``; only text-like sources have real lines
    textual = line is not None and not source.endswith(".json") and "tfevents" not in source
    return Evidence(source, f"line {line}" if textual else f"step {step}", f"{detail}", int(step))


def fmt(x: float) -> str:
    """Short number for messages: 0.6931, 1.19e+34, nan."""
    if not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.3g}"
    return f"{x:.4g}"

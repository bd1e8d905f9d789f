"""The flight record's on-disk format (no torch here: ``autopsy run`` and ``autopsy watch`` read it).

Why JSON lines: each record is one ``write()`` of one line followed by a flush, so a process killed
at any instant leaves every completed line readable and at most one partial last line, which the
reader drops and reports. A header line carries the format name and version; readers refuse a
newer major version with a clear message instead of guessing. Spec: ``docs/record.md``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "autopsy-record"
VERSION = 1
#: the record lives in this directory of the run's output dir
RECORD_DIR = "autopsy-record"
RECORD_FILE = "record.jsonl"
#: a single line longer than this is corrupt (a step line is ~0.5-2 KB; a ring dump of 64 deep
#: steps of a 30-layer model stays well under it)
MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass
class Record:
    """What a record file holds, parsed; ``problems`` says what could not be read and why."""

    header: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    nonfinite: list[dict[str, Any]] = field(default_factory=list)
    overflows: list[dict[str, Any]] = field(default_factory=list)
    rings: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    lines: int = 0
    truncated_tail: bool = False

    @property
    def groups(self) -> list[str]:
        g = self.header.get("groups")
        return [str(x) for x in g] if isinstance(g, list) else []

    @property
    def onset(self) -> dict[str, Any] | None:
        """The first non-finite event (the one a post-mortem is about)."""
        return self.nonfinite[0] if self.nonfinite else None


_KINDS = {"step": "steps", "update": "updates", "nonfinite": "nonfinite", "overflow": "overflows",
          "ring": "rings", "checkpoint": "checkpoints"}
#: per-kind cap on lines kept in memory (a record of a million steps must not be held whole);
#: every step line is still passed to ``on_step``
KEEP = {"updates": 10_000, "nonfinite": 1000, "overflows": 1000, "rings": 4, "checkpoints": 10_000}


def read_record(path: Path, on_step: Callable[[dict[str, Any]], None] | None = None,
                keep_steps: int = 256) -> Record:
    """Stream a record file line by line; never raises for bad content (problems go on the Record).

    ``steps`` keeps the last ``keep_steps`` step lines before the first non-finite one, plus up to
    ``keep_steps`` after it: what a post-mortem shows. ``on_step`` sees every step line.
    A last line without its newline is a write the process did not finish (killed mid-write):
    dropped and noted, everything before it kept."""
    rec = Record()
    before: deque[dict[str, Any]] = deque(maxlen=max(1, keep_steps))
    after: list[dict[str, Any]] = []
    bad = 0
    try:
        fh = open(path, "rb")
    except OSError as exc:
        rec.problems.append(f"cannot read: {exc.strerror or exc}")
        return rec
    with fh:
        lineno = 0
        while True:
            try:
                raw = fh.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                rec.problems.append(f"read failed after line {lineno}: {exc.strerror or exc}")
                break
            if not raw:
                break
            lineno += 1
            rec.lines = lineno
            if len(raw) > MAX_LINE_BYTES:
                bad += 1
                rec.problems.append(f"line {lineno}: longer than {MAX_LINE_BYTES:,} bytes, not a record line: skipped")
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(MAX_LINE_BYTES + 1)
                continue
            if not raw.endswith(b"\n"):
                if raw.strip():
                    rec.truncated_tail = True
                    rec.problems.append(f"line {lineno}: last line cut short ({len(raw)} bytes without a newline; the "
                                        "process was probably killed while writing it): dropped")
                break
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                bad += 1
                if bad <= 5:
                    rec.problems.append(f"line {lineno}: not a JSON record ({type(exc).__name__}): skipped")
                continue
            if not isinstance(obj, dict):
                continue
            kind = obj.get("t")
            if kind == "header":
                if not rec.header:
                    rec.header = obj
                continue
            if kind == "end":
                rec.end = obj
                continue
            obj["_line"] = lineno
            if kind == "step":
                if on_step is not None:
                    on_step(obj)
                if rec.nonfinite:
                    if len(after) < keep_steps:
                        after.append(obj)
                else:
                    before.append(obj)
                continue
            target = _KINDS.get(str(kind))
            if target is None:
                continue  # a newer minor version's line kind: ignored, not an error
            held = getattr(rec, target)
            if len(held) < KEEP.get(target, 1000):
                held.append(obj)
    if bad > 5:
        rec.problems.append(f"{bad} lines in all were not JSON records")
    rec.steps = list(before) + after
    if not rec.header:
        rec.problems.append("no header line: not an autopsy record, or its first line was lost")
    elif rec.header.get("format") != FORMAT:
        rec.problems.append(f"header names format {rec.header.get('format')!r}, not {FORMAT!r}")
    else:
        try:
            version = int(rec.header.get("version", 0))
        except (TypeError, ValueError):
            version = 0
        if version > VERSION:
            rec.problems.append(f"record format version {version} is newer than this autopsy reads ({VERSION}); "
                                "fields it does not know were ignored (upgrade autopsy to read them)")
    return rec


def num(v: Any) -> float | None:
    """A JSON number (bare NaN/Infinity included, and their string spellings) as float; else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
        return float(v.strip().lower().replace("infinity", "inf"))
    return None


def finite(v: Any) -> bool:
    x = num(v)
    return x is not None and math.isfinite(x)

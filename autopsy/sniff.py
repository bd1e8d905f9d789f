"""What a text file holds, decided from a sample of its lines rather than its name.

Users paste what they have into whatever file: LLaMA-Factory ``trainer_log.jsonl`` records saved as
``log.txt``, a ``trainer_state.json`` copied to ``state.txt``, YOLO's ``results.csv`` attached as
``results.txt``, a bare ``step loss`` listing with no extension. The name is only a hint; the
first ``SNIFF_BYTES`` decide. Everything that is not clearly one structured format is a text log,
and the text reader itself reads a mixed file part by part (JSON records, tables and framework
lines among prose and tracebacks). Import-light: discovery runs this on every candidate file.
"""

from __future__ import annotations

import json
import re

#: bytes of a file's head that decide its format
SNIFF_BYTES = 64 * 1024
#: lines of the head looked at
SNIFF_LINES = 400
#: share of the non-blank lines that must be of one structured format for the whole file to be read as it
STRUCTURED_SHARE = 0.8
#: a file with more NUL bytes than this share of its head is binary, not text
NUL_SHARE = 0.01

_NUMBER = re.compile(r"[-+]?(?:nan|inf|infinity|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)\Z", re.I)
_METRIC_NAME = re.compile(r"loss|lr|learning|acc|map|reward|grad|ppl|perplex|kl|entropy|score|f1|bleu|error",
                          re.I)
_STEP_NAME = re.compile(r"^(?:step|steps|global_step|iter|iters|iteration|epoch|update|updates|num_updates|"
                        r"trainer/global_step|_step)$", re.I)
_SPLIT_WS = re.compile(r"[ \t]*[,;|\t][ \t]*|[ \t]+")


def is_number(cell: str) -> bool:
    return bool(_NUMBER.match(cell.strip()))


def sniff_text(head: bytes, complete: bool) -> str | None:
    """Kind of a file from its head: ``trainer_state``, ``llamafactory_jsonl``, ``swift_jsonl``, ``jsonl``,
    ``metrics_csv``, ``text_log``; None for binary data or an empty file. ``complete`` says the head
    is the whole file (so its last line is not cut)."""
    if not head.strip():
        return None
    if head.count(b"\x00") > len(head) * NUL_SHARE:
        return None
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    lines = text.splitlines()
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # the cut last line says nothing
    lines = [ln for ln in lines[:SNIFF_LINES] if ln.strip()]
    if not lines:
        return "text_log"
    jsonl = _jsonl_kind(lines)
    if jsonl is not None:
        return jsonl
    if text.lstrip().startswith("{") and '"log_history"' in text:
        return "trainer_state"
    if _is_table(lines):
        return "metrics_csv"
    return "text_log"


def _jsonl_kind(lines: list[str]) -> str | None:
    records = []
    for ln in lines:
        s = ln.strip()
        if not s.startswith("{"):
            continue
        try:
            rec = json.loads(s)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    if not records or len(records) < STRUCTURED_SHARE * len(lines):
        return None
    if any("current_steps" in r for r in records):
        return "llamafactory_jsonl"
    if any("global_step/max_steps" in r for r in records):
        return "swift_jsonl"
    #: one JSON object alone is a config or a single record: the text reader sees it whole
    return "jsonl" if len(records) >= 2 else None


def _cells(line: str, delim: str | None) -> list[str]:
    if delim is None:
        return [c for c in _SPLIT_WS.split(line.strip()) if c != ""]
    return [c.strip() for c in line.strip().strip(delim).split(delim)] if delim == "|" else \
        [c.strip() for c in line.split(delim)]


def _is_table(lines: list[str]) -> bool:
    """A header of metric names (or none) over rows of numbers: CSV, TSV or whitespace columns."""
    first = lines[0]
    delim = next((d for d in (",", "\t") if d in first), None)
    head = _cells(first, delim)
    rows = lines[1:]
    has_header = len(head) >= 2 and not any(is_number(c) for c in head if c)
    if has_header:
        if not (any(_METRIC_NAME.search(c) for c in head) or any(_STEP_NAME.match(c) for c in head)):
            return False
    else:
        rows = lines  # headerless: every line is a row of numbers
        if len(head) != 2 or delim is not None and delim != ",":
            return False
    if not rows:
        return False
    good = 0
    for ln in rows:
        cells = _cells(ln, delim)
        if len(cells) != len(head):
            continue
        numeric = sum(1 for c in cells if c == "" or is_number(c))
        if numeric >= max(2, len(cells) - 1):  # one text cell allowed (a run name, a timestamp)
            good += 1
    return good >= STRUCTURED_SHARE * len(rows)

"""Which rank printed a line: multi-rank logs keep their rank so a disagreeing rank is visible.

Distributed launchers tag lines (``[rank3]:`` from torchrun's ``--tee``/``local_ranks_filter``,
``[default3]:``/``[trainer3]:`` from torchrun's ``[${role_name}${local_rank}]:`` log prefix,
``[RANK 3]`` / ``[Rank 3]`` from DeepSpeed and trainers' own loggers) or write one file per rank:
``rank3.log``, ``log_rank_3.txt``, a directory per rank (``rank_3/``, ``rank3/``, ``worker_3/``), or
torchrun's ``--log-dir`` layout ``<run_id>/attempt_<N>/<local_rank>/{stdout.log,stderr.log,error.json}``
(torch/distributed/elastic/multiprocessing/api.py). Structured records may carry the rank in a field
(``{"step": 10, "rank": 3, "loss": NaN}``, a ``rank`` CSV column). Events get ``Event.rank``. Scalars
keep one series per metric for the primary rank (rank 0, or the lowest seen); another rank's points
go to ``<metric>@rank<N>`` (``loss@rank3``): detectors read the primary series as before, and the
report shows the other ranks' series beside it, where a disagreement is visible.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from autopsy.ingest.text_metrics import finditer_at, has, literal_positions, newline_offsets

#: a rank tag at the start of a line (after optional spaces)
#: (torchrun's role prefix ``[trainer3]:`` and ``[trainer3|3]:`` (role+local rank, then global rank) included)
_LINE_RANK = re.compile(rb"(?m)^[ \t]*\[(?:rank|RANK|Rank|default|trainer)[ _]?(\d{1,5})(?:\|\d{1,5})?\]:?")
#: a rank tag anywhere in an event's text (it may follow a timestamp or a progress bar)
_TEXT_RANK = re.compile(r"\[(?:rank|RANK|Rank|default|trainer)[ _]?(\d{1,5})(?:\|\d{1,5})?\]")
_FILE_RANK = re.compile(r"(?:^|[_.\-])rank[_\-]?(\d{1,5})(?=[_.\-]|$)", re.IGNORECASE)
#: a directory holding one rank's files
_DIR_RANK = re.compile(r"(?:rank|worker)[_\-]?(\d{1,5})", re.IGNORECASE)
#: torchrun --log-dir: <log_dir>/<run_id>/attempt_<N>/<local_rank>/stdout.log
_ATTEMPT = re.compile(r"attempt_\d{1,5}")
_TAG_HINTS = (b"[rank", b"[RANK", b"[Rank", b"[default", b"[trainer")
#: record fields / table columns that name the rank that wrote a structured record
RANK_FIELDS = ("rank", "global_rank")


def _name_rank(path: Path) -> int | None:
    m = _FILE_RANK.search(path.name.rsplit(".", 1)[0] if "." in path.name else path.name)
    return int(m[1]) if m else None


def _dir_rank(d: Path) -> int | None:
    m = _DIR_RANK.fullmatch(d.name)
    if m:
        return int(m[1])
    if d.name.isdigit() and len(d.name) <= 5 and _ATTEMPT.fullmatch(d.parent.name):
        return int(d.name)
    return None


def file_rank(path: Path) -> int | None:
    """Rank of a per-rank file: from its name (``rank3.log``, ``train_rank_3.txt``), else from its
    directory (``rank_3/metrics.jsonl``, ``worker3/log.txt``, torchrun's ``attempt_0/3/stdout.log``); else None."""
    r = _name_rank(path)
    return r if r is not None else _dir_rank(path.parent)


def lower_rank_sibling(path: Path, rank: int) -> bool:
    """A lower rank left the same kind of file beside this one (so this one is not the primary):
    ``rank0.log`` beside ``rank3.log``, or ``rank_0/metrics.jsonl`` beside ``rank_3/metrics.jsonl``."""
    try:
        if _name_rank(path) is not None:
            for p in path.parent.iterdir():
                if p != path and p.is_file():
                    r = _name_rank(p)
                    if r is not None and r < rank:
                        return True
            return False
        for d in path.parent.parent.iterdir():
            if d != path.parent and d.is_dir():
                r = _dir_rank(d)
                if r is not None and r < rank and (d / path.name).is_file():
                    return True
    except OSError:
        return False
    return False


def rank_suffix(path: Path) -> str:
    """``@rankN`` for the points of a file that belongs to a rank other than the primary one, else ``""``."""
    r = file_rank(path)
    return f"@rank{r}" if r is not None and r != 0 and lower_rank_sibling(path, r) else ""


#: directory levels above a file searched for a per-rank directory (``rank_3/events...``, ``rank_3/train/events...``)
TREE_RANK_LEVELS = 2


def tree_rank(path: Path, levels: int = TREE_RANK_LEVELS) -> tuple[int, Path] | None:
    """(rank, the rank's directory) of a file inside a per-rank directory up to ``levels`` above it
    (``runs/rank0/events.out.tfevents...``, ``logs/rank_3/train/events...``, ``tb/worker_1/...``), else None.
    Files whose names vary per writer (TensorBoard's ``events.out.tfevents.<time>.<host>.<pid>``) carry
    their rank only in a directory."""
    d = path.parent
    for _ in range(levels):
        r = _dir_rank(d)
        if r is not None:
            return r, d
        if d.parent == d:
            break
        d = d.parent
    return None


def lower_rank_tree(rank_dir: Path, rank: int, holds: Callable[[Path], bool]) -> bool:
    """A sibling directory of a lower rank (``rank_0/`` beside ``rank_3/``) for which ``holds`` is true
    (it holds the same kind of file), so files under ``rank_dir`` are not the primary rank's."""
    try:
        for d in rank_dir.parent.iterdir():
            if d != rank_dir and d.is_dir():
                r = _dir_rank(d)
                if r is not None and r < rank and holds(d):
                    return True
    except OSError:
        return False
    return False


def tree_rank_suffix(path: Path, holds: Callable[[Path], bool]) -> str:
    """``@rankN`` for a file under a per-rank directory of a rank other than the primary one, else ``""``."""
    found = tree_rank(path)
    if found is None:
        return ""
    rank, rank_dir = found
    return f"@rank{rank}" if rank != 0 and lower_rank_tree(rank_dir, rank, holds) else ""


def record_rank(value: object) -> int | None:
    """A rank field's value as a rank (an int, or an integral number or string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 100_000 else None
    if isinstance(value, float) and value.is_integer():
        return record_rank(int(value))
    if isinstance(value, str) and value.strip().isdigit():
        return record_rank(int(value.strip()))
    return None


def event_rank(text: str) -> int | None:
    m = _TEXT_RANK.search(text)
    return int(m[1]) if m else None


class RankLines:
    """Rank of each tagged line of a file, and the renaming of other ranks' metric points."""

    def __init__(self, file_level: int | None = None, file_is_primary: bool = True) -> None:
        self.file_level = file_level
        self.file_is_primary = file_is_primary
        self._lines: list[np.ndarray] = []
        self._ranks: list[np.ndarray] = []
        self.seen: set[int] = set()

    def scan(self, text: bytes, first_line: int) -> None:
        if not any(has(text, h) for h in _TAG_HINTS):
            return
        # tried only at the starts of lines holding a tag (the leading ^ made the regex engine try every byte)
        # (a scan per tag the chunk holds: one regex for all, led by "[", stopped at every tqdm bar's "[")
        starts = sorted({text.rfind(b"\n", 0, at) + 1 for at in literal_positions(text, _TAG_HINTS)})
        found = [(m.start(), int(m[1])) for m in finditer_at(_LINE_RANK, text, starts)]
        if not found:
            return
        newlines = newline_offsets(text)
        pos = np.fromiter((p for p, _ in found), dtype=np.int64, count=len(found))
        self._lines.append(first_line + np.searchsorted(newlines, pos))
        ranks = np.fromiter((r for _, r in found), dtype=np.int64, count=len(found))
        self._ranks.append(ranks)
        self.seen.update(np.unique(ranks).tolist())

    def event_rank(self, text: str) -> int | None:
        r = event_rank(text)
        return r if r is not None else self.file_level

    def rename(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``metric`` -> ``metric@rankN`` for points printed by a rank other than the primary one."""
        if self.file_level is not None and not self.file_is_primary:
            frame["metric"] = frame["metric"].astype(str) + f"@rank{self.file_level}"
            return frame
        if len(self.seen) < 2 or "line" not in frame:
            return frame
        primary = min(self.seen)
        lines = np.concatenate(self._lines)
        ranks = np.concatenate(self._ranks)
        order = np.argsort(lines, kind="stable")
        lines, ranks = lines[order], ranks[order]
        fl = frame["line"].to_numpy(dtype=np.int64)
        idx = np.searchsorted(lines, fl)
        idx_c = np.minimum(idx, len(lines) - 1)
        hit = (idx < len(lines)) & (lines[idx_c] == fl)
        other = hit & (ranks[idx_c] != primary)
        if not other.any():
            return frame
        metric = frame["metric"].astype(str).to_numpy(dtype=object)
        suffix = np.char.add("@rank", ranks[idx_c][other].astype(str)).astype(object)
        metric[other] = metric[other] + suffix
        frame["metric"] = metric
        return frame


# -- torchrun's per-rank error.json ----------------------------------------------------------------

ELASTIC_ERROR_KIND = "elastic_error"


def is_elastic_error(path: Path) -> bool:
    """``<log_dir>/<run_id>/attempt_<N>/<local_rank>/error.json`` (torchelastic's ``@record`` error file)."""
    return path.name == "error.json" and path.parent.name.isdigit() and bool(_ATTEMPT.fullmatch(path.parent.parent.name))


def read_elastic_error(found, builder) -> None:  # noqa: ANN001 - Found, RunBuilder (import cycle)
    """The failing worker's exception as torchelastic wrote it (``{"message": {"message": "RuntimeError: ...",
    "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "..."}}}``, errors/error_handler.py), read
    through the text-log reader so its traceback becomes an event with the worker's rank."""
    import io

    from autopsy.ingest.jsonsafe import load_json
    from autopsy.ingest.textlog import _TextLogReader

    src = builder.rel(found.path)
    res = load_json(found.path)
    doc = res.value
    msg = doc.get("message") if isinstance(doc, dict) else None
    if isinstance(msg, str):
        msg = {"message": msg}
    if not isinstance(msg, dict):
        why = res.error or "no 'message' object"
        builder.problem(src, ELASTIC_ERROR_KIND, f"not a torchelastic error file ({why}); nothing read from it")
        return
    extra = msg.get("extraInfo") if isinstance(msg.get("extraInfo"), dict) else {}
    stack = extra.get("py_callstack")
    text = stack if isinstance(stack, str) and stack.strip() else str(msg.get("message", ""))
    if not text.strip():
        builder.problem(src, ELASTIC_ERROR_KIND, "the error file names no exception", "partial")
        return
    rank = file_rank(found.path)
    primary = rank is None or rank == 0 or not lower_rank_sibling(found.path, rank)
    _TextLogReader(src, builder, RankLines(rank, primary)).read(io.BytesIO(text.encode("utf-8", "replace")))
    builder.artifact(src, ELASTIC_ERROR_KIND)  # the text reader named its problems after the text-log kind


READERS = {ELASTIC_ERROR_KIND: read_elastic_error}

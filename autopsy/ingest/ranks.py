"""Which rank printed a line: multi-rank logs keep their rank so a disagreeing rank is visible.

Distributed launchers tag lines (``[rank3]:`` from torchrun's ``--tee``/``local_ranks_filter``,
``[default3]:`` from torchrun's log prefix, ``[RANK 3]`` / ``[Rank 3]`` from DeepSpeed and trainers'
own loggers) or write one file per rank (``rank3.log``, ``log_rank_3.txt``). Events get
``Event.rank``. Scalars keep one series per metric for the primary rank (rank 0, or the lowest seen);
another rank's points go to ``<metric>@rank<N>`` (``loss@rank3``): detectors read the primary series
as before, and the report shows the other ranks' series beside it, where a disagreement is visible.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from autopsy.ingest.text_metrics import finditer_at

#: a rank tag at the start of a line (after optional spaces)
_LINE_RANK = re.compile(rb"(?m)^[ \t]*\[(?:rank|RANK|Rank|default)[ _]?(\d{1,5})\]:?")
#: a rank tag anywhere in an event's text (it may follow a timestamp or a progress bar)
_TEXT_RANK = re.compile(r"\[(?:rank|RANK|Rank|default)[ _]?(\d{1,5})\]")
_FILE_RANK = re.compile(r"(?:^|[_.\-])rank[_\-]?(\d{1,5})(?=[_.\-]|$)", re.IGNORECASE)
_TAG_HINTS = (b"[rank", b"[RANK", b"[Rank", b"[default")
#: any of _TAG_HINTS (one scan led by the literal "[")
_TAG_ANY = re.compile(rb"\[(?:rank|RANK|Rank|default)")


def file_rank(path: Path) -> int | None:
    """Rank from a per-rank file name (``rank3.log``, ``train_rank_3.txt``), else None."""
    m = _FILE_RANK.search(path.name.rsplit(".", 1)[0] if "." in path.name else path.name)
    return int(m[1]) if m else None


def lower_rank_sibling(path: Path, rank: int) -> bool:
    """Another file of the same run directory is a lower rank's log (so this one is not the primary)."""
    try:
        for p in path.parent.iterdir():
            if p != path and p.is_file():
                r = file_rank(p)
                if r is not None and r < rank:
                    return True
    except OSError:
        return False
    return False


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
        if not any(h in text for h in _TAG_HINTS):
            return
        # tried only at the starts of lines holding a tag (the leading ^ made the regex engine try every byte)
        starts = sorted({text.rfind(b"\n", 0, m.start()) + 1 for m in _TAG_ANY.finditer(text)})
        found = [(m.start(), int(m[1])) for m in finditer_at(_LINE_RANK, text, starts)]
        if not found:
            return
        newlines = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10)
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

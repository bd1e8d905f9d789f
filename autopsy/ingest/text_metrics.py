"""Metric lines in text logs: HF/TRL/ms-swift dicts, minimind, mmengine/mmcv, MAE/DeiT engines,
DeepSpeed progress, Lightning bars, and a conservative generic ``step N ... loss X`` parser.

Every parser scans a whole chunk (bytes) with a regex that starts with a literal (so the scan
runs in C) and appends points to a :class:`Collector` as compact arrays. Each records the
(offset, step) pairs it saw (:class:`StepMarks`) so events can be given the step in force where
they were printed, and the records it consumed (:class:`Used`) so the generic parser does not read
a line twice. The dict parser lives in :mod:`autopsy.ingest.text_dicts` (vectorised: it is the
bulk of a big log). Epoch-based formats give global step = epoch*steps_per_epoch + step.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

#: a number as logs print it, NaN/Inf included (HF 4.x prints bare ``nan``; minimind too)
NUM = rb"[-+]?(?:nan|NaN|NAN|inf|Inf|INF|infinity|Infinity|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
#: distinct metric keys kept per file (a uint16 code each); more is a parse gone wrong
MAX_KEYS = 60_000

_BAR_LAST = re.compile(rb"(?s:.*)\|\s*(\d+)/(\d+)\s*\[")


@lru_cache(maxsize=64)
def _bar_last_for(total: bytes) -> re.Pattern[str]:
    return re.compile(rb"(?s:.*)\|\s*(\d+)/" + re.escape(total) + rb"\s*\[")


_KEY_CACHE: dict[bytes, str] = {}


def key_str(raw: bytes) -> str:
    """Decoded metric key (cached: a log repeats the same few keys millions of times)."""
    k = _KEY_CACHE.get(raw)
    if k is None:
        k = raw.decode("utf-8", "replace").strip()
        if len(_KEY_CACHE) < MAX_KEYS:
            _KEY_CACHE[raw] = k
    return k


def is_loss_like(key: str) -> bool:
    k = key.lower()
    return "loss" in k or k.startswith(("reward", "rewards/", "logps/")) or k in ("grad_norm", "grad norm")


#: order key of points from the line parsers: after the chunk's dict records, in the order added
_LATE = np.iinfo(np.int64).max


@dataclass
class _Block:
    """Rows of one record layout in one chunk; a row's step and line are stored once, not per key."""

    order: np.ndarray  # int64 chunk offsets of the rows (file order within the chunk)
    step: np.ndarray  # (R,) int32 when it fits, else int64
    line: np.ndarray  # (R,) int32 when it fits, else int64
    codes: np.ndarray  # uint16 key codes: (K,) shared by all rows, or (R,) one per row when per_row
    values: np.ndarray  # float64 (R, K); (R, 1) when per_row
    per_row: bool = False


def _compact(a: np.ndarray) -> np.ndarray:
    """int32 copy when every value fits (halves the bytes per point), else int64."""
    a = np.asarray(a, dtype=np.int64)
    if len(a) and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
        return a.copy()
    return a.astype(np.int32)


@dataclass
class Collector:
    """Points of one file, kept compact until the end: numpy blocks per chunk, no per-point objects.

    Dict records go in as row blocks (``add_rows``: a 4-key HF record costs 8+4+4x8 bytes); the line
    parsers add single points (``add``), packed into a block per chunk by ``flush``. ``frames``
    expands one chunk at a time into a long DataFrame, so the hand-off never holds two copies.
    """

    keys: dict[str, int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    step: array = field(default_factory=lambda: array("q"))
    code: array = field(default_factory=lambda: array("H"))
    value: array = field(default_factory=lambda: array("d"))
    line: array = field(default_factory=lambda: array("q"))
    metric_override: dict[str, str] = field(default_factory=dict)
    pending: list[_Block] = field(default_factory=list)
    chunks: list[list[_Block]] = field(default_factory=list)
    points: int = 0

    def code_of(self, key: str) -> int | None:
        c = self.keys.get(key)
        if c is None:
            if len(self.names) >= MAX_KEYS:
                return None
            c = self.keys[key] = len(self.names)
            self.names.append(key)
        return c

    def add(self, step: int, key: str, value: float, line: int) -> None:
        c = self.code_of(key)
        if c is None:
            return
        self.step.append(step)
        self.code.append(c)
        self.value.append(value)
        self.line.append(line)

    def add_rows(self, order: np.ndarray, step: np.ndarray, line: np.ndarray, codes: np.ndarray,
                 values: np.ndarray) -> None:
        self.pending.append(_Block(np.asarray(order, dtype=np.int64), _compact(step), _compact(line),
                                   np.asarray(codes, dtype=np.uint16), np.asarray(values, dtype=np.float64)))
        self.points += values.size

    def flush(self) -> None:
        """Close the current chunk: its blocks plus the line parsers' points as one block."""
        blocks, self.pending = self.pending, []
        if self.step:
            n = len(self.step)
            blocks.append(_Block(np.full(n, _LATE, dtype=np.int64), _compact(np.frombuffer(self.step, np.int64)),
                                 _compact(np.frombuffer(self.line, np.int64)),
                                 np.frombuffer(self.code, dtype=np.uint16).copy(),
                                 np.frombuffer(self.value, dtype=np.float64).copy().reshape(n, 1), per_row=True))
            self.points += n
            self.step, self.code, self.value, self.line = array("q"), array("H"), array("d"), array("q")
        if blocks:
            self.chunks.append(blocks)

    def point_frame(self) -> pd.DataFrame | None:
        """All points as one long frame (small collectors, e.g. minimind's), or None."""
        self.flush()
        frames = list(self.frames())
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames[0] if frames else None)

    def frames(self) -> Iterator[pd.DataFrame]:
        """Long frames (step, key, value, line), one per chunk, releasing each chunk's blocks."""
        cats = pd.Index(list(self.names))
        code_dtype = np.int8 if len(cats) < 127 else (np.int16 if len(cats) < 32_000 else np.int32)
        self.chunks.reverse()
        while self.chunks:
            blocks = self.chunks.pop()
            parts = [_expand(b) for b in blocks]
            del blocks
            order, step, line, code, value = (np.concatenate([p[i] for p in parts]) for i in range(5))
            del parts
            if not (order[1:] >= order[:-1]).all():
                o = np.argsort(order, kind="stable")
                step, line, code, value = step[o], line[o], code[o], value[o]
            yield pd.DataFrame({
                "step": step,
                "key": pd.Categorical.from_codes(code.astype(code_dtype), categories=cats),
                "value": value,
                "line": line,
            })


def _expand(b: _Block) -> tuple[np.ndarray, ...]:
    """(order, step, line, code, value) per point of a block, in row-major (record, key) order."""
    if b.per_row:
        return b.order, b.step, b.line, b.codes, b.values.ravel()
    r, k = b.values.shape
    return (np.repeat(b.order, k), np.repeat(b.step, k), np.repeat(b.line, k), np.tile(b.codes, r),
            b.values.ravel())


class StepMarks:
    """(offset, step) of every record a parser read in a chunk, for giving events their step."""

    def __init__(self) -> None:
        self._pairs: list[tuple[int, int]] = []
        self._blocks: list[tuple[np.ndarray, np.ndarray]] = []

    def append(self, pair: tuple[int, int]) -> None:
        self._pairs.append(pair)

    def add_block(self, pos: np.ndarray, step: np.ndarray) -> None:
        self._blocks.append((np.asarray(pos, dtype=np.int64), np.asarray(step, dtype=np.int64)))

    def __bool__(self) -> bool:
        return bool(self._pairs or self._blocks)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Offsets (sorted) and their steps."""
        pos = [b[0] for b in self._blocks] + [np.array([p for p, _ in self._pairs], dtype=np.int64)]
        step = [b[1] for b in self._blocks] + [np.array([s for _, s in self._pairs], dtype=np.int64)]
        p, s = np.concatenate(pos), np.concatenate(step)
        o = np.lexsort((s, p))
        return p[o], s[o]


@dataclass
class StepState:
    """What the parsers know about steps, carried from chunk to chunk."""

    last_step: int | None = None
    last_bar: int | None = None  # last tqdm training-bar counter seen
    last_bar_total: bytes | None = None
    bar_unknown_total: int = 0  # batches per epoch assumed for Lightning bars without a total (``40/?``)
    sigs: list = field(default_factory=list)  # _Sig layouts, most recently used first
    train_total: bytes | None = None  # the training bar's total (max_steps), as printed
    train_records: int = 0
    inferred: bool = False  # some step in this file was numbered, not read
    exact_seen: bool = False
    frameworks: set[str] = field(default_factory=set)
    minimind: list[pd.DataFrame] = field(default_factory=list)
    mm_epochs_zero: bool = False
    mm_epoch_eq_total: bool = False
    mm_comma_era: bool = False
    #: per format printing an epoch-local batch counter: [epoch, steps of the epochs before it, last counter seen]
    epoch_base: dict[str, list[int]] = field(default_factory=dict)


#: (text, offsets of its line breaks, the same as a list or None) of the text indexed last; replaced as a whole
#: and read once per call, so readers in two threads at worst index a chunk twice
_NL_CACHE: tuple = (None, None, None)


def _indexed(text: bytes, as_list: bool) -> tuple:
    global _NL_CACHE
    got = _NL_CACHE
    if got[0] is not text:
        got = (text, np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10), None)
    if as_list and got[2] is None:
        got = (text, got[1], got[1].tolist())  # bisect on a list: a numpy scalar call costs more per query
    _NL_CACHE = got
    return got


def newline_offsets(text: bytes) -> np.ndarray:
    """Sorted offsets of the ``\\n`` bytes of ``text`` (int64). Every parser numbers the lines of the
    same chunk: the index is made once per chunk (one numpy pass, ~1 ms a 4 MB chunk) instead of
    each parser counting line breaks up to its last record (~1.6 ms each, ~15 parsers a chunk)."""
    return _indexed(text, False)[1]


def forget_newlines() -> None:
    """Drop the cached index (and with it the last chunk) once a file is read."""
    global _NL_CACHE, _BR_CACHE, _GATE_CACHE, _TRIGRAM_CACHE
    _NL_CACHE = (None, None, None)
    _BR_CACHE = (None, None, None)
    _GATE_CACHE = (None, None, None)
    _TRIGRAM_CACHE = (None, None, None, None)


class Lines:
    """Line number of a position: ``first_line`` plus the ``\\n`` bytes in front of it."""

    def __init__(self, text: bytes, first_line: int) -> None:
        self.first = first_line
        self.nl = _indexed(text, True)[2]

    def at(self, pos: int) -> int:
        return self.first + bisect_left(self.nl, pos)


#: single offsets kept in a small sorted side list before they join the big sorted index
USED_SIDE = 512


class Used:
    """Offsets of records already parsed in a chunk; a line holding one is not read again.

    The dict records of a chunk come as one block (10k offsets); the line parsers add one offset
    at a time between queries. Those go to a small sorted side list, so a query after each add
    does not re-sort the whole index (that made a chunk with a few hundred such lines quadratic).
    """

    def __init__(self) -> None:
        self._new: list[int] = []  # sorted
        self._blocks: list[np.ndarray] = []
        self._pos = np.zeros(0, dtype=np.int64)
        self._list: list[int] = []

    def add(self, pos: int) -> None:
        insort(self._new, pos)

    def add_block(self, pos: np.ndarray) -> None:
        self._blocks.append(np.asarray(pos, dtype=np.int64))

    def _merge(self, all_: bool = False) -> None:
        # the side list is merged once it outgrows the index (geometric growth): a parser claiming every line of a
        # chunk (200k ``step N | loss X`` lines) costs O(n log n) in all, not a full re-sort every USED_SIDE lines
        if self._blocks or len(self._new) > max(USED_SIDE, len(self._list)) or (all_ and self._new):
            self._pos = np.sort(np.concatenate([self._pos, np.array(self._new, dtype=np.int64), *self._blocks]))
            self._list = self._pos.tolist()  # bisect on a list: numpy scalar calls cost more per query
            self._new, self._blocks = [], []

    def covers(self, start: int, end: int) -> bool:
        self._merge()
        for sorted_ in (self._list, self._new):
            i = bisect_left(sorted_, start)
            if i < len(sorted_) and sorted_[i] < end:
                return True
        return False

    def positions(self) -> np.ndarray:
        """Every offset recorded so far, sorted (int64)."""
        self._merge(all_=True)
        return self._pos

    def covers_all(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """:meth:`covers` of many spans at once (bool array)."""
        self._merge(all_=True)
        pos = self._pos
        i = np.searchsorted(pos, starts, side="left")
        return (i < len(pos)) & (pos[np.minimum(i, max(len(pos) - 1, 0))] < ends) if len(pos) else \
            np.zeros(len(starts), dtype=bool)


def line_spans(text: bytes, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the lines holding ``positions``, each line once, in order: ``line_start`` /
    ``line_end`` of many positions in numpy passes (``\\n`` and ``\\r`` both end a line). A position on
    a line break belongs to the line that break ends."""
    breaks = _break_index(text, False)[1]
    k = np.unique(np.searchsorted(breaks, positions, side="left"))  # line breaks in front of each line
    starts = np.concatenate(([-1], breaks))[k] + 1
    ends = np.concatenate((breaks, [len(text)]))[k]
    return starts, ends


def unused_letters(text: bytes, used: Used) -> bytes | None:
    """The ASCII letters of the lines of ``text`` that hold no record read so far (``used``), or None when every line
    is free. A parser that reads only free lines and finds its hint (a literal of letters) absent here has nothing to
    read: the hints of a chunk of HF dicts and tqdm bars ('loss' above all) are on the dict lines the dict reader took."""
    pos = used.positions()
    if not len(pos):
        return None
    starts, ends = line_spans(text, pos)
    a = np.concatenate(([0], ends)).tolist()  # the free text: from the end of each used line to the next one's start
    b = np.concatenate((starts, [len(text)])).tolist()
    return b"".join(map(text.__getitem__, map(slice, a, b))).translate(None, NON_LETTERS)


def line_starts(text: bytes, positions: np.ndarray) -> np.ndarray:
    """:func:`line_start` of every position (one searchsorted over the chunk's break index)."""
    breaks = _break_index(text, False)[1]
    k = np.searchsorted(breaks, positions, side="left")
    return np.where(k > 0, breaks[np.maximum(k - 1, 0)] + 1 if len(breaks) else 0, 0)


#: texts shorter than this find their line ends by searching; longer ones (a chunk) through a cached index of breaks
SMALL_TEXT = 64 * 1024
#: (text, sorted offsets of its ``\n`` and ``\r`` bytes, the same as a list or None) of the text indexed last; replaced
#: as a whole, like ``_NL_CACHE``
_BR_CACHE: tuple = (None, None, None)


def _break_index(text: bytes, as_list: bool) -> tuple:
    """Offsets of every line break of ``text``, made once per chunk and shared by :func:`line_spans`,
    :func:`line_start` and :func:`line_end`: searching for the nearer of ``\n`` and ``\r`` scans to the end of the
    chunk for the one a log never prints (no ``\r`` in a plain log), which made a parser that visits every line
    quadratic (a 4 MB ``step N | loss X`` log: ~40 s)."""
    global _BR_CACHE
    got = _BR_CACHE
    if got[0] is not text:
        arr = np.frombuffer(text, dtype=np.uint8)
        got = (text, np.flatnonzero((arr == 10) | (arr == 13)), None)
    if as_list and got[2] is None:
        got = (text, got[1], got[1].tolist())  # bisect on a list: a numpy scalar call costs more per query
    _BR_CACHE = got
    return got


def _breaks(text: bytes) -> list[int]:
    got = _BR_CACHE  # the usual call: the chunk indexed last (line_start/line_end run ~1k times a chunk)
    if got[0] is text and got[2] is not None:
        return got[2]
    return _break_index(text, True)[2]


def line_start(text: bytes, pos: int) -> int:
    if len(text) < SMALL_TEXT:
        return max(text.rfind(b"\n", 0, pos), text.rfind(b"\r", 0, pos)) + 1
    br = _breaks(text)
    i = bisect_left(br, pos)
    return br[i - 1] + 1 if i else 0


def line_end(text: bytes, pos: int) -> int:
    if len(text) < SMALL_TEXT:
        ends = [i for i in (text.find(b"\n", pos), text.find(b"\r", pos)) if i >= 0]
        return min(ends) if ends else len(text)
    br = _breaks(text)
    i = bisect_left(br, pos)
    return br[i] if i < len(br) else len(text)


def to_float(raw: bytes) -> float | None:
    try:
        return float(raw)
    except ValueError:
        pass
    s = raw.strip()
    if s[:1] in (b"'", b'"'):
        try:
            return float(s[1:-1])
        except ValueError:
            return None
    return None


# -- minimind ----------------------------------------------------------------------------------

_MINIMIND = re.compile(rb"Epoch:\s?\[(\d+)/(\d+)\]\s?\((\d+)/(\d+)\)(,?)([^\n\r]{0,2000})")
_MM_PAIR = re.compile(rb"([A-Za-z][A-Za-z_ ]{0,30}?)\s*:\s*(" + NUM + rb")")
_MM_SKIP = {"epoch_time", "epoch_Time", "eta"}


def parse_minimind(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    if not has(text, b"Epoch:"):
        return
    lines = Lines(text, first_line)
    col = Collector()
    epochs, iters_col = array("q"), array("q")
    for m in _MINIMIND.finditer(text):
        epoch, total, local, iters = int(m[1]), int(m[2]), int(m[3]), int(m[4])
        line = lines.at(m.start())
        n0 = len(col.step)
        for kraw, raw in _MM_PAIR.findall(m[6]):
            key = key_str(kraw)
            if key not in _MM_SKIP:
                col.add(local, key, float(raw), line)
        added = len(col.step) - n0
        if not added:
            continue
        st.mm_comma_era = st.mm_comma_era or bool(m[5])
        st.mm_epochs_zero = st.mm_epochs_zero or epoch == 0
        st.mm_epoch_eq_total = st.mm_epoch_eq_total or epoch == total
        epochs.extend([epoch] * added)
        iters_col.extend([iters] * added)
        # provisional step for events; the epoch base is decided at the end of the file
        step = _mm_step(epoch, iters, local, 1 if st.mm_comma_era and not st.mm_epochs_zero else 0)
        steps.append((m.start(), step))
        st.last_step = step
        used.add(m.start())
        st.frameworks.add("minimind")
    frame = col.point_frame() if col.step else None
    if frame is not None:
        frame["epoch"] = np.frombuffer(epochs, dtype=np.int64).copy()
        frame["iters"] = np.frombuffer(iters_col, dtype=np.int64).copy()
        st.minimind.append(frame)
        st.exact_seen = True


def _mm_step(epoch: int, iters: int, local: int, base: int) -> int:
    return max(epoch - base, 0) * iters + local


def finish_minimind(st: StepState) -> pd.DataFrame | None:
    """Global steps for minimind rows once the whole file told which epoch base it uses.

    Old minimind prints ``Epoch:[epoch/E]`` 0-based; since 2026-01 (comma era) ``epoch+1``.
    Seeing epoch 0 proves 0-based; seeing epoch == E proves 1-based.
    """
    if not st.minimind:
        return None
    base = 1 if st.mm_comma_era else 0
    if st.mm_epochs_zero:
        base = 0
    elif st.mm_epoch_eq_total:
        base = 1
    df = pd.concat(st.minimind, ignore_index=True)
    df["step"] = (df["epoch"] - base).clip(lower=0) * df["iters"] + df["step"]
    return df.drop(columns=["epoch", "iters"])


# -- mmengine / mmcv, MAE/DeiT engines, DeepSpeed, Lightning, generic -------------------------

_MMCV = re.compile(rb"(Epoch|Iter)(\((?:train|val|test)\))?\s*\[\s*(\d+)\](?:\[\s*(\d+)/(\d+)\])?([^\n\r]{0,4000})")
_MM_ITER = re.compile(rb"Iter\((train|val|test)\)\s*\[\s*(\d+)/(\d+)\]([^\n\r]{0,4000})")
#: mmcv 1.x ``TextLoggerHook`` of an iteration-based runner (mmseg's default): ``Iter [100/100000]\tlr: ...``, train only
_MMCV_ITER = re.compile(rb"Iter \[\s*(\d+)/(\d+)\]([^\n\r]{0,4000})")
_KV_COLON = re.compile(rb"([A-Za-z_][\w./-]{0,60}(?:\([\w/]+\))?)\s*:\s*(" + NUM + rb")(?![\w:])")
#: (also carpedm20 DCGAN-tensorflow's ``Epoch: [%2d/%2d] [%4d/%4d] time: %4.4f, d_loss: %.8f, g_loss: %.8f``)
#: (and LAVIS' runners and their forks (MiniGPT-4, InstructBLIP, Video-LLaMA): ``Train: data epoch: [0]  [  50/4427]``,
#: an iteration-based runner adding ``; inner epoch [3]``, the epoch its ``[i/N]`` counts within)
_MAE = re.compile(rb"(?:Epoch|data epoch): \[\s*(\d+)(?:/\s*\d+)?\](?:; inner epoch \[(\d+)\])?\s+\[\s*(\d+)/(\d+)\]"
                  rb"([^\n\r]{0,4000})")
_MAE_PAIR = re.compile(rb"([A-Za-z_][\w ]{0,30}?):\s+(" + NUM + rb")(?:\s*\(" + NUM + rb"\))?(?![\w:])")
_DS_STEP = re.compile(rb"\[Rank \d+\] step=(\d+), skipped=(\d+), lr=\[([^\]\n\r]{0,2000})\]")
#: (a bar pasted from a narrow terminal is cut before its ``]``: read to the line's end, where the last pair
#: may be cut mid-value unless a comma follows it)
#: (an iterable without a length gives a bar without its percentage and a ``?`` total: ``Epoch 2: |    | 40/? [01:06<00:00,
#: 0.60it/s, v_num=2, train/PackedNLLLoss=0.790]``)
_LIGHTNING = re.compile(rb"Epoch (\d+):\s*(?:\d+%)?\|[^|\n\r]{0,400}\|\s*(\d+)/(\d+|\?)\s*\[[^\]\n\r]{0,400}?,"
                        rb"((?:\s*[\w/.]+=[^,\]\s]+,?)+)(?:\]|[ \t]*(?=[\r\n]|\Z))")
_EQ_PAIR = re.compile(rb"([\w/.]+)=(" + NUM + rb")(?![\w])")
_SKIP_KEYS = {"eta", "time", "data_time", "data", "max mem", "memory", "v_num", "it", "iter", "step", "rank",
              "local_rank", "rank_id", "epoch", "batch"}


def _add_pairs(out: Collector, step: int, line: int, pairs: list[tuple[str, str]]) -> int:
    n = 0
    for kraw, raw in pairs:
        key = key_str(kraw)
        if key.lower() in _SKIP_KEYS:
            continue
        try:
            out.add(step, key, float(raw), line)
            n += 1
        except ValueError:
            continue
    return n


def parse_mm(text: bytes, first_line: int, st: StepState, out: Collector,
             steps: StepMarks, used: Used) -> None:
    """mmcv ``Epoch [1][100/62598]\\tlr: ...`` and ``Iter [100/100000]\\tlr: ...``, mmengine ``Epoch(train) [1][240/735]``,
    ``Iter(train) [100/1000]``."""
    it = has(text, b"Iter")
    if not it and not has(text, b"Epoch"):
        return
    lines = Lines(text, first_line)
    for m in finditer_at(_MMCV, text, sorted(literal_positions(text, (b"Epoch", b"Iter")))):
        mode = m[2]
        if m[1] == b"Iter":
            continue
        if m[4] is None or (mode and mode != b"(train)"):
            continue
        step = (int(m[3]) - 1) * int(m[5]) + int(m[4])  # both 1-based in mmcv/mmengine
        if _add_pairs(out, step, lines.at(m.start()), _KV_COLON.findall(m[6])):
            _mark_step(st, steps, used, m.start(), step)
            st.frameworks.add("mmengine")
    if it and has(text, b"Iter ["):
        lines = Lines(text, first_line)
        for m in _MMCV_ITER.finditer(text):
            step = int(m[1])
            if _add_pairs(out, step, lines.at(m.start()), _KV_COLON.findall(m[3])):
                _mark_step(st, steps, used, m.start(), step)
                st.frameworks.add("mmengine")
    if it and has(text, b"Iter("):
        lines = Lines(text, first_line)
        for m in _MM_ITER.finditer(text):
            if m[1] != b"train":
                continue
            step = int(m[2])
            if _add_pairs(out, step, lines.at(m.start()), _KV_COLON.findall(m[4])):
                _mark_step(st, steps, used, m.start(), step)
                st.frameworks.add("mmengine")


def _mark_step(st: StepState, steps: StepMarks, used: Used, pos: int, step: int) -> None:
    """A line at ``pos`` carried an exact step: remember it for later records, and claim the line."""
    steps.append((pos, step))
    st.last_step, st.exact_seen = step, True
    used.add(pos)


def parse_mae(text: bytes, first_line: int, st: StepState, out: Collector,
              steps: StepMarks, used: Used) -> None:
    """``Epoch: [8]  [ 200/2293]  eta: ...  lr: 0.000004  loss: 0.2606 (0.2654)``: value, then running mean."""
    # tried only where one of its two heads starts (the alternation would make the regex engine try every byte)
    starts = sorted(literal_positions(text, (b"Epoch: [", b"data epoch: [")))
    if not starts:
        return
    lines = Lines(text, first_line)
    for m in finditer_at(_MAE, text, starts):
        epoch = int(m[2] if m[2] is not None else m[1])
        step = epoch * int(m[4]) + int(m[3])  # both 0-based in the MetricLogger
        if _add_pairs(out, step, lines.at(m.start()), _MAE_PAIR.findall(m[5])):
            _mark_step(st, steps, used, m.start(), step)


def parse_deepspeed(text: bytes, first_line: int, st: StepState, out: Collector,
                    steps: StepMarks, used: Used) -> None:
    if not has(text, b"] step="):
        return
    lines = Lines(text, first_line)
    for m in _DS_STEP.finditer(text):
        step, line = int(m[1]), lines.at(m.start())
        out.add(step, "skipped", float(m[2]), line)
        out.metric_override["skipped"] = "skipped_steps"
        lrs = [to_float(x) for x in m[3].split(b",") if x.strip()]
        if lrs and lrs[0] is not None:
            out.add(step, "lr", lrs[0], line)
        _mark_step(st, steps, used, m.start(), step)
        st.frameworks.add("deepspeed")


def parse_lightning(text: bytes, first_line: int, st: StepState, out: Collector,
                    steps: StepMarks, used: Used) -> None:
    """Lightning bars ``Epoch 0:  50%|█| 1/2 [00:00<00:00, v_num=0, loss=0.123]``; the loss is the bar's postfix."""
    if b"=" not in text or not has(text, b"Epoch "):
        return
    lines = Lines(text, first_line)
    found = list(_LIGHTNING.finditer(text))
    # a bar without a total (``40/?``) counts its epoch as this many batches: more than any batch count printed so far
    # (kept across chunks and only grown, so the steps of later chunks stay above those of earlier ones)
    unknown = st.bar_unknown_total = max(st.bar_unknown_total,
                                         1 + max((int(m[2]) for m in found if m[3] == b"?"), default=0))
    for m in found:
        if b"global_step=" in m[4]:
            continue  # NeMo: text_formats.parse_tqdm_postfix reads the trainer's global_step
        postfix = m[4]
        if text[m.end() - 1:m.end()] != b"]" and not postfix.rstrip().endswith(b","):
            postfix = postfix[:postfix.rfind(b",") + 1]  # cut before its "]": the last value may be cut too
        pairs = [(key_str(k), v) for k, v in _EQ_PAIR.findall(postfix) if k != b"v_num"]
        if not any(is_loss_like(k) for k, _ in pairs):
            continue
        # per-epoch counter; total may include val batches
        step = int(m[1]) * (int(m[3]) if m[3] != b"?" else unknown) + int(m[2])
        line = lines.at(m.start())
        for k, v in pairs:
            out.add(step, k, float(v), line)
            if k.lower() in ("train_loss", "train_loss_step", "loss_step"):
                out.metric_override[k] = "loss"
        steps.append((m.start(), step))
        st.last_step = step
        st.inferred = True
        used.add(m.start())
        st.frameworks.add("lightning")


#: ``\b(?:[Ss]tep|STEP|[Ii]ter|ITER|[Ii]teration|global_step|[Ii]ters)\b...`` written so every branch starts
#: with a literal (the leading ``\b`` became a lookbehind after it): the regex engine then skips ahead
#: to those letters instead of trying every byte (3x faster on a big log, same matches)
#: on its own line (a line ending in "... has 1000 iters" does not count the next line's "[2021/06/03 ...")
_GENERIC_COUNTER = re.compile(
    rb"(?:S(?<!\wS)(?:tep|TEP)|s(?<!\ws)tep|I(?<!\wI)(?:ter|TER|teration|ters)|i(?<!\wi)(?:ter|teration|ters)|"
    rb"g(?<!\wg)lobal_step)\b[ \t]*[:=#]?[ \t]*\[?[ \t]*(\d+)(?:[ \t]*/[ \t]*(\d+))?\]?")
#: an epoch counter before a line's step counter (``epoch: [12/20] step: [700/4468]``, ``Epoch 3 | step 40``)
_EPOCH_BEFORE = re.compile(rb"\b[Ee](?:poch|POCH)\b\W{0,3}(\d+)")
#: an epoch header alone on its line (Keras and Paddle hapi ``Epoch 2/10``), over the ``step 10/938 - loss: ...`` rows
#: under it
_EPOCH_HEADER = re.compile(rb"(?m)^[ \t]*Epoch:? (\d+)/\d+[ \t]*\r?$")
#: a key of one word, or two with ':'/'=', or a split word and a metric word, or the two-word names of the LR and the
#: gradient norm (mlx-lm's "Iter 10: Train loss 2.345, Learning Rate 1.000e-05, It/sec 1.2", mlx_lm/tuner/trainer.py)
#: (a key and its value may be quoted: PaddleDetection's static trainer prints ``'loss_cls': '1.144142'``)
_GENERIC_PAIR = re.compile(
    rb"(?<![\w/.-])(?:((?:[Tt]rain|[Vv]al|[Vv]alid|[Ee]val|[Tt]est|lm) [A-Za-z][\w/.-]{0,20}|[Ll]earning [Rr]ate|"
    rb"[Gg]rad(?:ient)? [Nn]orm)\s*(?:[:=]\s*|\s)|"
    rb"([A-Za-z][\w/.-]{0,40} [A-Za-z][\w/.-]{0,20})\s*[:=]\s*|([A-Za-z][\w/.-]{0,40})'?\s*(?:[:=]\s*'?|\s))"
    rb"(" + NUM + rb")(?![\w.])")


#: every ``_GENERIC_COUNTER`` match has one of these 1 byte after its start (``global_step``: 8 bytes)
_COUNTER_CORES = (((b"tep", b"ter"), re.compile(rb"te[pr]")), ((b"TEP", b"TER"), re.compile(rb"TE[PR]")))


def literal_positions(text: bytes, literals: tuple[bytes, ...]) -> list[int]:
    """Offsets of every occurrence of each literal (none of them overlaps itself). The regex
    engine's literal search is used: faster here than ``bytes.find`` (no per-call overhead either)."""
    found: list[int] = []
    for lit in literals:
        if has(text, lit):  # an absent literal: a pass over the chunk's letters or skeleton, not the chunk
            found.extend(m.start() for m in _literal_rx(lit).finditer(text))
    return found


@lru_cache(maxsize=1024)
def _literal_rx(lit: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(lit))


#: bytes that are not ASCII letters: deleting them gives a text's "letters" (``events.letters_of``)
NON_LETTERS = bytes(c for c in range(256) if not (65 <= c <= 90 or 97 <= c <= 122))
#: bytes deleted to give a text's "skeleton": digits, blanks and non-ASCII bytes, most of a tqdm/metric log
#: (a tqdm redraw keeps ``%||/[::<::,.it/s]``), while letters, punctuation and line breaks stay in order
_SKELETON_DROP = b"0123456789 \t" + bytes(range(128, 256))
#: (text, its letters, its skeleton or None until asked for) of the chunk gated last; replaced as a whole, like
#: ``_NL_CACHE``
_GATE_CACHE: tuple = (None, None, None)


def chunk_letters(text: bytes) -> bytes:
    """The ASCII letters of ``text`` in order (one C pass; kept for the chunk's gates, see :func:`has`)."""
    global _GATE_CACHE
    got = _GATE_CACHE
    if got[0] is not text:
        got = _GATE_CACHE = (text, text.translate(None, NON_LETTERS), None)
    return got[1]


#: ASCII letters as codes 0..51 (other bytes 0: a table of letter trigrams is only read at letters)
_LETTER_CODE = np.zeros(256, dtype=np.int32)
_LETTER_CODE[np.frombuffer(bytes(c for c in range(256) if c not in NON_LETTERS), dtype=np.uint8)] = np.arange(52)
#: (letters, table of the letter trigrams they hold) of the letters gated last, then of the ones before
_TRIGRAM_CACHE: tuple = (None, None, None, None)


def _trigram_codes(lt: bytes) -> np.ndarray:
    a = _LETTER_CODE[np.frombuffer(lt, dtype=np.uint8)]
    return a[:-2] * 2704 + a[1:-1] * 52 + a[2:]


#: trigram codes of the literals asked for (the parsers' hints and gates: a fixed set), up to MAX_GATE_LITERALS
_LIT_TRIGRAMS: dict[bytes, np.ndarray] = {}
MAX_GATE_LITERALS = 4096


def letters_have(letters: bytes, lt: bytes) -> bool:
    """``lt in letters`` for a literal of letters (a chunk's letters, ``chunk_letters``). On a chunk's letters a
    literal is first looked up in a table of the letter trigrams they hold, made once a chunk (~3 ms for 400 KB of
    letters): a literal with a trigram not there is absent (exact in the negative), and a search of the letters
    (~0.25 ms each, ~70 literals a chunk) is left for the others."""
    if len(lt) >= 3 and len(letters) >= SMALL_TEXT and lt.isalpha():
        global _TRIGRAM_CACHE
        got = _TRIGRAM_CACHE  # the last two letter strings gated (a chunk's, and the letters of its free lines)
        if got[0] is letters:
            table = got[1]
        elif got[2] is letters:
            table = got[3]
        else:
            table = np.zeros(52 ** 3, dtype=bool)
            table[_trigram_codes(letters)] = True
            _TRIGRAM_CACHE = (letters, table, got[0], got[1])
        codes = _LIT_TRIGRAMS.get(lt)
        if codes is None:
            codes = _trigram_codes(lt)
            if len(_LIT_TRIGRAMS) < MAX_GATE_LITERALS:
                _LIT_TRIGRAMS[lt] = codes
        if not table[codes].all():
            return False
    return lt in letters


def _skeleton(text: bytes) -> bytes:
    global _GATE_CACHE
    chunk_letters(text)
    got = _GATE_CACHE
    if got[2] is None:
        got = _GATE_CACHE = (text, got[1], text.translate(None, _SKELETON_DROP))
    return got[2]


@lru_cache(maxsize=1024)
def _gate_keys(lit: bytes) -> tuple[bytes, bytes]:
    """A literal's letters and skeleton (what it leaves in a text's letters and skeleton wherever it occurs)."""
    return lit.translate(None, NON_LETTERS), lit.translate(None, _SKELETON_DROP)


def has(text: bytes, lit: bytes) -> bool:
    """``lit in text`` by the regex engine's literal search, which skips ahead with the needle's own
    overlap table: ``bytes.__contains__`` slows down when the needle's bytes are frequent in the text
    (``| {`` in a 4 MB chunk of tqdm bars: 11 ms, here 1.6 ms). Chunks of a big log mostly lack the
    literals the parsers' gates ask for, so each gate would be a full scan (~3 ms a 4 MB chunk).

    On a chunk the answer is first looked for in its letters and its skeleton (deleting bytes from a text
    deletes them from every literal in it, so a literal absent from those is absent from the text): ~10%
    and ~33% of a tqdm/metric chunk's bytes, made once per chunk. Only a literal found there is searched
    for in the text itself, so the answer is always the text's own."""
    if len(text) >= SMALL_TEXT:
        lt, sk = _gate_keys(lit)
        if lt and not letters_have(chunk_letters(text), lt):
            return False
        if sk != lt and sk and _literal_rx(sk).search(_skeleton(text)) is None:
            return False
    return _literal_rx(lit).search(text) is not None


def finditer_at(rx: re.Pattern[bytes], text: bytes, starts: list[int]) -> Iterator[re.Match[bytes]]:
    """``rx.finditer(text)`` when every match starts at one of ``starts`` (sorted, no duplicates).

    For patterns the regex engine cannot skip through (a leading ``^``, ``\\b``, lookbehind or a
    branch of common letters makes it try every byte): candidates are visited in order and those
    inside the previous match skipped, so the matches are finditer's own.
    """
    end = 0
    match = rx.match
    for c in starts:
        if c < end:
            continue
        m = match(text, c)
        if m is not None:
            end = m.end()
            yield m


def _generic_counters(text: bytes) -> Iterator[re.Match[bytes]]:
    """``_GENERIC_COUNTER.finditer(text)``: tried only 1 byte before a ``tep``/``ter`` core (8 before
    ``global_step``'s), not at every ``s``/``i``/``g`` of the chunk (tqdm's ``it/s``, dict keys)."""
    cores = [m.start() for lits, rx in _COUNTER_CORES if any(has(text, w) for w in lits) for m in rx.finditer(text)]
    if not cores:
        return iter(())
    cand = {c - 1 for c in cores if c} | {c - 8 for c in cores if c >= 8 and text[c - 8:c] == b"global_s"}
    return finditer_at(_GENERIC_COUNTER, text, sorted(cand))


def parse_generic(text: bytes, first_line: int, st: StepState, out: Collector,
                  steps: StepMarks, used: Used) -> None:
    """``step 10 | loss 2.3 | lr 1e-4``, nanoGPT ``iter 100: loss 2.31``, Megatron ``iteration 10/ 500 | lm loss: ...``.

    Conservative: a line needs a step-like counter AND a loss-like key, so prose is not read as data.
    """
    if not any(has(text, w) for w in (b"tep", b"ter", b"TEP", b"TER")):  # step/Step/iter/Iter/ITER...
        return
    lines = Lines(text, first_line)
    seen: set[int] = set()
    headers: list[tuple[int, int]] | None = None
    header_at: list[int] = []
    for m in _generic_counters(text):
        ls = line_start(text, m.start())
        if ls in seen or used.covers(ls, line_end(text, ls)):
            continue
        seen.add(ls)
        le = line_end(text, m.end())
        pairs = generic_pairs(text[m.end():min(le, m.end() + 4000)])
        if not any(is_loss_like(k) for k, _ in pairs):
            continue
        step = int(m[1])
        ep = _EPOCH_BEFORE.search(text, ls, m.start()) if m.start() > ls else None
        if ep is not None:
            step = epoch_local_step(st, "generic", int(ep[1]), step, int(m[2]) if m[2] else None)
        elif m[2]:  # "step 10/938 - loss: ..." under an "Epoch 2/10" header line
            if headers is None:
                headers = [(h.start(), int(h[1])) for h in _EPOCH_HEADER.finditer(text)] if has(text, b"poch") else []
                header_at = [h[0] for h in headers]
            i = bisect_right(header_at, m.start()) - 1
            epoch = headers[i][1] if i >= 0 else getattr(st, "header_epoch", None)
            if epoch is not None:
                step = epoch_local_step(st, "generic_header", epoch, step, int(m[2]))
        line = lines.at(m.start())
        norms = [k.replace(" ", "_") for k, _ in pairs]
        evaluation = _is_eval_line(norms)
        for (_k, v), norm in zip(pairs, norms):
            low = norm.lower()
            if evaluation and low in _TRAIN_LOSS_KEYS:
                # nanoGPT's ``step N: train loss X, val loss Y``: estimate_loss() over eval_iters batches of the
                # train split, printed beside the per-iteration ``iter N: loss X`` of the same step; kept apart
                norm = EVAL_TRAIN_KEY_PREFIX + norm
                out.metric_override[norm] = "eval_train_loss"
            elif (canon := loss_key_metric(low)) is not None:
                out.metric_override[norm] = canon
            out.add(step, norm, float(v), line)
        _mark_step(st, steps, used, m.start(), step)
    if headers:
        st.header_epoch = headers[-1][1]  # type: ignore[attr-defined]


def epoch_local_step(st: StepState, fmt: str, epoch: int, local: int, total: int | None) -> int:
    """A step for a counter printed after an epoch number, which may count the whole run (``Epoch 2 | step 5001``)
    or restart every epoch (mindocr ``epoch: [13/20] step: [100/4468]``). It is read as printed until an epoch
    change finds it at or below the last epoch's highest: from then on each later epoch adds the one before's
    batches (its printed total when the counter has one, else the highest counter seen in it). An epoch number
    that goes back is a rerun: counting starts again."""
    cur = st.epoch_base.get(fmt)  # [epoch, base, highest local in this epoch, restarts (0/1), seen at 0 (0/1)]
    if cur is None or epoch < cur[0]:
        cur = [epoch, 0, local, 0, int(local == 0)]
    elif epoch > cur[0]:
        # not higher than the last epoch's highest: a restart (a run-wide counter never prints the same value in two
        # epochs; COMPOSE prints "Epoch 1, Iter 0:" after "Epoch 0, Iter 0:")
        restarts = cur[3] or local <= cur[2]
        zero = cur[4] or int(local == 0)
        size = total if total else cur[2] + zero  # a 0-based counter's epoch holds highest + 1 batches
        base = cur[1] + size * (epoch - cur[0] if total else 1) if restarts else 0
        cur = [epoch, base, local, int(restarts), zero]
    else:
        cur[2] = max(cur[2], local)
        cur[4] = cur[4] or int(local == 0)
    st.epoch_base[fmt] = cur
    return cur[1] + local


#: words that make the loss after them a held-out one (``step 500, training mse loss 2.5, val mse loss 2.6``)
_HELD_OUT_WORD = re.compile(rb"(?i)\b(?:val|valid|validation|eval|evaluation|test|dev)\b")


def generic_pairs(rest: bytes) -> list[tuple[str, bytes]]:
    """The ``key value`` pairs after a line's counter, as the generic parser reads them (its skip keys left out).

    A one-word loss key with words before it since the last pair names its split there (``val mse loss 2.6``:
    ``val_loss``), so a held-out loss printed as a phrase is not read as the training loss."""
    pairs = []
    end = 0
    for m in _GENERIC_PAIR.finditer(rest):
        k3, k2, k1 = m[1], m[2], m[3]
        key = key_str(k3 or k2 or k1)
        if k1 is not None and not k2 and not k3 and "loss" in key.lower():
            gap = rest[end:m.start()]
            cut = max(gap.rfind(b","), gap.rfind(b";"), gap.rfind(b"|"))
            words = gap[cut + 1:]
            if _HELD_OUT_WORD.search(words) and not key.lower().startswith(("val", "eval", "test", "dev")):
                key = "val_" + key
        end = m.end()
        pairs.append((key, m[4]))
    return [(k, v) for k, v in pairs if k.lower() not in _SKIP_KEYS]


def loss_key_metric(low: str) -> str | None:
    """The metric of a counter line's train or held-out loss key (``train_loss`` -> loss, ``val_loss`` -> eval_loss)."""
    return "loss" if low in _TRAIN_LOSS_KEYS else "eval_loss" if low in _EVAL_LOSS_KEYS else None


#: keys of the generic parser's per-iteration training loss (``step 10 | train loss 2.3``, llm.c, minGPT)
_TRAIN_LOSS_KEYS = ("train_loss", "lm_loss")
#: keys of a held-out loss on the same kind of line
_EVAL_LOSS_KEYS = ("val_loss", "valid_loss", "eval_loss", "test_loss")
#: key prefix of a train loss printed on an evaluation line (its metric is ``eval_train_loss``)
EVAL_TRAIN_KEY_PREFIX = "eval/"


def _is_eval_line(norms: list[str]) -> bool:
    """A line holding both a train loss and a held-out loss is an evaluation report (nanoGPT's
    ``estimate_loss``): its train loss is an estimate over eval batches, not the step's training loss."""
    lows = {n.lower() for n in norms}
    return bool(lows & set(_TRAIN_LOSS_KEYS) - {"lm_loss"}) and bool(lows & set(_EVAL_LOSS_KEYS))


#: the line parsers with the letters (``events.letters_of``) a chunk needs before each is worth running
PARSERS = ((parse_minimind, (b"Epoch",)), (parse_mm, (b"Epoch", b"Iter")), (parse_mae, (b"Epoch", b"epoch")),
           (parse_deepspeed, (b"step",)), (parse_lightning, (b"Epoch",)),
           (parse_generic, (b"tep", b"ter", b"TEP", b"TER")))

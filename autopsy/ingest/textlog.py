"""Reader for text logs: stdout/stderr captures, ``nohup.out``, ``debug.log``, pasted fragments.

The file is streamed in chunks (:mod:`autopsy.ingest.text_stream`); on each chunk the metric
parsers (:mod:`autopsy.ingest.text_metrics`) run as C-speed regex scans, then only the lines
carrying an event trigger are looked at one by one (:mod:`autopsy.ingest.events`). Config facts
come from the head of the file (:mod:`autopsy.ingest.text_facts`). Nothing raises for content:
cut lines, binary junk and unexpected failures become a partial-read problem on the artifact.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import repeat
from operator import is_not
from typing import Any

import numpy as np
import pandas as pd

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.events import EventSink, TracebackTracker, chunk_triggers, classify, first_triggers
from autopsy.ingest.ranks import RankLines, file_rank, lower_rank_sibling
from autopsy.ingest.text_dicts import parse_dicts
from autopsy.ingest.text_facts import FACT_SCAN_BYTES, FILLER_LINE, FactScanner, banner_frameworks
from autopsy.ingest.text_formats import FORMAT_PARSERS
from autopsy.ingest.text_loose import LOOSE_PARSERS
from autopsy.ingest.text_metrics import (
    _BAR_LAST,
    PARSERS,
    Collector,
    Lines,
    StepMarks,
    StepState,
    Used,
    _bar_last_for,
    _literal_rx,
    chunk_letters,
    finish_minimind,
    forget_newlines,
    has,
    letters_have,
    line_end,
    line_spans,
    line_start,
    newline_offsets,
    unused_letters,
)
from autopsy.ingest.text_stream import LINE_CAP, Chunk, iter_chunks
from autopsy.metrics import LR_NAME, LR_PRINT_DECIMALS, canonical

KIND = "text_log"
#: a line can hold a config fact only if it has one of these (skips tqdm/metric noise cheaply); \d.\d: pip/conda rows
#: (`` . ``, `` .. ``, ``... ``, ``_per_gpu  ``: a dotted argument dump's rows, DeepSpeed's and Megatron's, whose
#: names are padded with dots to a column: text_facts._DOTTED)
#: (``Precision (AMP)``, ``16bit precision``: Lightning's precision line, text_facts._LIGHTNING_AMP)
_FACT_HINT = re.compile(rb"=|: |--|NVIDIA|Tesla|GeForce|Quadro|version| \. | \.\. |\.\.\. |_per_gpu  |"
                        rb"Precision \(AMP\)|16bit precision|\d\.\d")
#: the words of _FACT_HINT (its one- and two-byte parts are found with numpy)
_HINT_WORDS = (b"NVIDIA", b"Tesla", b"GeForce", b"Quadro", b"version", b" . ", b" .. ", b"... ", b"_per_gpu  ",
               b"Precision (AMP)", b"16bit precision")
#: lines after a ``from_pretrained(`` handed to the fact scanner whatever they hold (the model id alone on its line)
PRETRAINED_FOLLOW = 2
#: the letters of ranks._TAG_HINTS: a chunk without them has no rank tag (a cheaper test on the letters)
_RANK_LETTERS = (b"rank", b"RANK", b"Rank", b"default", b"trainer")
#: how far back (characters) an event looks for the tqdm bar it was printed after
BAR_LOOKBACK = 4096
#: the frame marker every c10::Error (torch's C++ exceptions) prints after its message: a paste that keeps the message
#: and this line but not the Python traceback (torch/csrc/distributed/c10d/Utils.hpp's recvBytes: a rank that timed out
#: waiting for rank 0) is a crash all the same
_CPP_EXC = re.compile(r"Exception raised from (\S+) at (\S+?):(\d+) \(most recent call first\)")
#: ... unless a Python exception line was read this few lines before it (the usual paste: the RuntimeError, then this)
CPP_EXC_AFTER_TB = 20


def read_text_log(found: Found, builder: RunBuilder) -> None:
    source = builder.rel(found.path)
    try:
        fh = open(found.path, "rb")  # noqa: SIM115 - a failed open is recorded, not raised
    except OSError as exc:
        builder.problem(source, KIND, f"cannot open: {exc.strerror or exc}; check the path and its permissions")
        return
    with fh:
        _TextLogReader(source, builder, _ranks_for(found.path)).read(fh)


def _ranks_for(path: Any) -> RankLines:
    rank = file_rank(path)
    return RankLines(rank, rank is None or rank == 0 or not lower_rank_sibling(path, rank))


#: zero learning rates of a chunk looked at in their lines before the reader stops looking for how the LR is printed
PRINT_ZEROS_LOOKED_AT = 8
#: the number printed right after a key: ``lr: 0.0000``, ``'lr': 0.0``, ``LR=0.000000``, ``lr 0.00e+00``
_AFTER_KEY = re.compile(rb"""['"]?[ \t]*[:=]?[ \t]*['"]?(-?\d[\d.]*(?:[eE][-+]?\d+)?)""")
#: bytes that continue a name (a key found after one is the tail of another key)
_KEY_BYTE = [chr(c).isalnum() or chr(c) == "_" for c in range(128)] + [False] * 128
#: a zero printed in fixed point with two decimals or more
_FIXED_ZERO = re.compile(rb"-?0\.(0{2,})")


def fixed_zero_decimals(text: bytes, first_line: int, line: int, key: str) -> int | None:
    """The decimals of the number printed after ``key`` on line ``line`` of a chunk when it is a zero in fixed point
    (``lr: 0.0000`` -> 4), 0 when that number is something else (``0.0``, ``0e+00``, ``0.0001``), None when the line
    does not hold ``key`` followed by a number."""
    nl = newline_offsets(text)
    i = line - first_line
    if i < 0 or i > len(nl):
        return None
    start = 0 if i == 0 else int(nl[i - 1]) + 1
    end = int(nl[i]) if i < len(nl) else len(text)
    seg = text[start:min(end, start + LINE_CAP)]
    needle = key.strip().lower().encode("utf-8", "replace")
    low = seg.lower()  # the readers keep some keys in lower case (a loop's "LR" is read as lr): ASCII, same offsets
    pos = low.find(needle) if needle else -1
    while pos >= 0:
        m = _AFTER_KEY.match(seg, pos + len(needle))
        if m is not None and (pos == 0 or not _KEY_BYTE[seg[pos - 1]]):  # the key itself, not base_lr's tail
            z = _FIXED_ZERO.fullmatch(m[1])
            return len(z[1]) if z is not None else 0
        pos = low.find(needle, pos + 1)
    return None


class _TextLogReader:
    def __init__(self, source: str, builder: RunBuilder, ranks: RankLines | None = None) -> None:
        self.source, self.builder = source, builder
        self.ranks = ranks or RankLines()
        self.st = StepState()
        self.out = Collector()
        self.handed = 0  # points of self.out already given to the builder
        self.sink = EventSink(source)
        self.tb = TracebackTracker()
        self.facts = FactScanner(self._fact)
        self.fact_bytes = 0
        self.lr_print_open = True  # the first zero learning rate of the head not yet looked at in its line
        self.fact_follow = 0  # lines still to hand to the fact scanner after a from_pretrained(
        self.frameworks: set[str] = set()
        self.last_tb_line = -CPP_EXC_AFTER_TB - 1  # line of the last traceback event

    def _lr_print(self, chunk: Chunk) -> None:
        """How the log prints its learning rate, read at the first zero LR of its head whose line names it: in fixed
        point with two decimals or more (``lr: 0.0000``: Composer's console logger prints every float ``{:.4f}``, loops
        print ``f"{lr:.6f}"``) the zero is any LR below half a unit of the last decimal, and the number of decimals is
        recorded as a fact (:data:`LR_PRINT_DECIMALS`); ``0.0`` (Python's repr of a float) or ``0.000e+00`` is a zero.
        A zero whose line does not name its key (a table's row, a multi-line record's head) leaves it to the next."""
        names = self.out.names
        lr = np.array([i for i, n in enumerate(names) if LR_NAME.search(n.strip())], dtype=np.uint16)
        if not lr.size:
            return
        found: list[tuple[int, str]] = []
        for b in self.out.chunks[-1]:
            if b.per_row:
                rows = np.flatnonzero(np.isin(b.codes, lr) & (b.values[:, 0] == 0.0))[:PRINT_ZEROS_LOOKED_AT]
                found += [(int(b.line[r]), names[int(b.codes[r])]) for r in rows.tolist()]
                continue
            for j in np.flatnonzero(np.isin(b.codes, lr)).tolist():
                rows = np.flatnonzero(b.values[:, j] == 0.0)[:PRINT_ZEROS_LOOKED_AT]
                found += [(int(b.line[r]), names[int(b.codes[j])]) for r in rows.tolist()]
        for line, name in sorted(found)[:PRINT_ZEROS_LOOKED_AT]:
            decimals = fixed_zero_decimals(chunk.text, chunk.first_line, line, name)
            if decimals is None:
                continue
            self.lr_print_open = False
            if decimals:
                self._fact(LR_PRINT_DECIMALS, decimals, line, name)
            return

    def _fact(self, key: str, value: Any, line: int, original: str) -> None:
        self.builder.fact(key, value, self.source, where=f"line {line}", original_key=original)

    def read(self, fh: Any) -> None:
        truncated: list[int] = []
        binary = 0
        failures: list[str] = []
        try:
            for chunk in iter_chunks(fh):
                truncated.extend(chunk.truncated_lines)
                binary += chunk.binary_bytes
                try:
                    self._chunk(chunk)
                except Exception as exc:  # noqa: BLE001 - one bad chunk must not lose the file
                    failures.append(f"lines from {chunk.first_line}: {type(exc).__name__}: {exc}")
        except OSError as exc:
            failures.append(f"read error: {exc.strerror or exc}")
        forget_newlines()
        self._finish()
        if truncated:
            lines = ", ".join(str(n) for n in truncated[:5]) + (" ..." if len(truncated) > 5 else "")
            self.builder.problem(self.source, KIND, f"{len(truncated)} line(s) longer than {LINE_CAP // 1024} KiB "
                                 f"(line {lines}): only their first {LINE_CAP // 1024} KiB were read", "partial")
        if binary:
            self.builder.problem(self.source, KIND, f"{binary} NUL bytes: the file holds binary data (a crashed "
                                 "writer's padding or not a log); only its text parts were read", "partial")
        if failures:
            self.builder.problem(self.source, KIND, "parts could not be parsed: " + "; ".join(failures[:3])[:400],
                                 "partial")

    def _drain(self) -> None:
        """Hand the points collected so far to the builder (which bounds long series), so the
        reader's own memory does not grow with the file."""
        for frame in self.out.frames():  # one chunk at a time: the builder's copy replaces ours
            self._hand_over(frame, True)
            del frame
        self.handed = self.out.points

    # -- per chunk -------------------------------------------------------------------------
    def _chunk(self, chunk: Chunk) -> None:
        text, st = chunk.text, self.st
        before_step, before_bar = st.last_step, st.last_bar
        steps = StepMarks()
        used = Used()
        letters = chunk_letters(text)
        if any(letters_have(letters, h) for h in _RANK_LETTERS):  # "[rank" in text implies "rank" in its letters
            self.ranks.scan(text, chunk.first_line)
        parse_dicts(text, chunk.first_line, st, self.out, steps, used)
        # the line parsers read only lines no parser before them took: their hints are looked for in the letters of the
        # lines the dict records left free (a superset of what is free when each runs: the set only shrinks)
        free = unused_letters(text, used)
        gate = letters if free is None else free
        hinted: dict[bytes, bool] = {b"": True}  # several parsers share a hint: each is looked for once a chunk
        for parse, hints in _ALL_PARSERS:
            for h in hints:
                got = hinted.get(h)
                if got is None:
                    got = hinted[h] = letters_have(gate, h)
                if got:
                    parse(text, chunk.first_line, st, self.out, steps, used)
                    break
        before = len(self.out.chunks)
        self.out.flush()
        if self.lr_print_open and len(self.out.chunks) > before and self.fact_bytes < FACT_SCAN_BYTES // 2:
            self._lr_print(chunk)
        if self.out.points - self.handed >= HAND_OVER_POINTS:
            self._drain()
        trigger, present = chunk_triggers(text, letters)
        if trigger is not None:
            positions, step_at = steps.arrays()
            self._events(chunk, first_triggers(text, trigger, present), positions, step_at, used, before_step,
                         before_bar)
        if self.fact_bytes < FACT_SCAN_BYTES // 2:  # the first block(s) only
            self.fact_bytes += len(text)
            head = text.decode("utf-8", "replace") if text.isascii() is False else text.decode("ascii")
            self.frameworks |= banner_frameworks(head)
            self._facts(chunk, used)

    def _step_at(self, text: bytes, pos: int, positions: np.ndarray, steps: np.ndarray,
                 before_step: int | None, before_bar: int | None) -> int | None:
        i = int(np.searchsorted(positions, pos, side="right")) - 1
        step, at = (int(steps[i]), int(positions[i])) if i >= 0 else (before_step, -1)
        # a bar on the marked line itself is that record's (a bar whose description or postfix a parser read: its step
        # is the parser's, an epoch's count included, not the bar's own counter); only a later bar's counter is newer
        lo = max(0, pos - BAR_LOOKBACK, line_end(text, at) + 1 if at >= 0 else 0)
        rx = _bar_last_for(self.st.train_total) if self.st.train_total else _BAR_LAST
        bm = rx.match(text, lo, pos) if lo < pos else None
        if bm is not None:
            return int(bm[1])
        if i < 0 and before_bar is not None and (step is None or before_bar > step):
            return before_bar
        return step

    def _events(self, chunk: Chunk, triggers: Iterator[re.Match[bytes]], positions: np.ndarray, steps: np.ndarray,
                used: Used, before_step: int | None, before_bar: int | None) -> None:
        """One event candidate per line: the line's first trigger (``events.first_triggers``)."""
        text = chunk.text
        lines = Lines(text, chunk.first_line)
        for m in triggers:
            ls = line_start(text, m.start())
            le = line_end(text, m.start())
            line_text = text[ls:min(le, ls + LINE_CAP)].decode("utf-8", "replace")
            no = lines.at(ls)
            if used.covers(ls, le):
                # a metric line: only a named event glued to it (Keras prints "Batch 1882: Invalid loss, terminating
                # training" right after its bar, on the same line), never a generic warning/error or a traceback
                found = classify(line_text)
                if found is not None and found[0] not in ("warning", "error"):
                    step = self._step_at(text, m.start(), positions, steps, before_step, before_bar)
                    self.sink.add(found[0], line_text, no, step, found[1], self.ranks.event_rank(line_text))
                continue
            step = self._step_at(text, m.start(), positions, steps, before_step, before_bar)
            got = self.tb.feed(no, line_text)
            is_exc = False
            if got is not None:
                tb_line, message, data = got
                self.sink.add("traceback", message, tb_line, step, data, self.ranks.event_rank(line_text))
                self.last_tb_line = tb_line
                is_exc = True
                self._frameworks_from_frame(data.get("frame"))
            elif "Exception raised from" in line_text and no - self.last_tb_line > CPP_EXC_AFTER_TB and (
                    cpp := _CPP_EXC.search(line_text)) is not None:
                self._cpp_exception(text, ls, no, step, cpp, line_text)
                continue
            elif '  File "' in line_text and self.tb.frame:
                self._frameworks_from_frame(self.tb.frame)
            found = classify(line_text)
            if found is None:
                continue
            kind, data = found
            if is_exc and kind in ("warning", "error"):
                continue
            self.sink.add(kind, line_text, no, step, data, self.ranks.event_rank(line_text))
            if kind in ("overflow", "loss_scale_min"):
                self.frameworks.add("deepspeed" if "deepspeed" in line_text.lower() or "Rank" in line_text else "")

    def _cpp_exception(self, text: bytes, ls: int, no: int, step: int | None, cpp: re.Match[str], line_text: str) -> None:
        """A c10::Error's frame marker with no Python exception line before it: the message is the line above (the
        first non-blank one within a few lines), read as an uncaught native exception."""
        message, at = "", ls
        for _ in range(3):
            if at <= 0:
                break
            end = at - 1
            at = line_start(text, end)
            message = text[at:min(end, at + LINE_CAP)].decode("utf-8", "replace").strip()
            if message:
                break
        frame = {"file": cpp[2], "line": int(cpp[3]), "function": cpp[1]}
        self.sink.add("native_abort", message or line_text.strip(), no, step,
                      {"exc_type": "c10::Error", "exc_message": message[:1000], "frame": frame},
                      self.ranks.event_rank(line_text))
        self.last_tb_line = no

    def _frameworks_from_frame(self, frame: dict[str, Any] | None) -> None:
        path = (frame or {}).get("file", "")
        for part, fw in (("/transformers/", "hf_trainer"), ("/trl/", "trl"), ("/deepspeed/", "deepspeed"),
                         ("/swift/", "ms_swift"), ("/llamafactory/", "llamafactory"), ("/axolotl/", "axolotl"),
                         ("/lightning/", "lightning"), ("/pytorch_lightning/", "lightning"), ("/mmengine/", "mmengine"),
                         ("/mmcv/", "mmengine"), ("/mmdet/", "mmengine"), ("/ultralytics/", "ultralytics"),
                         ("/detectron2/", "detectron2"), ("/keras/", "keras"), ("/espnet2/", "espnet"), ("/espnet/", "espnet"),
                         ("/wenet/", "wenet"), ("/paddle/", "paddle"), ("/ppocr/", "paddle"), ("/ppdet/", "paddle"),
                         ("/paddlenlp/", "paddle")):
            if part in path:
                self.frameworks.add(fw)

    def _facts(self, chunk: Chunk, used: Used) -> None:
        text = chunk.text
        lines = Lines(text, chunk.first_line)
        if not self.fact_follow and b"from_pretrained" not in text:
            self._facts_at_once(text, lines, used)
            return
        filler = FILLER_LINE.fullmatch

        def feed(ls: int, le: int) -> None:
            if not used.covers(ls, le):
                seg = text[ls:min(le, ls + LINE_CAP)]
                if filler(seg) is not None:
                    self.facts.filler()
                    return
                self.facts.line(lines.at(ls), seg.decode("utf-8", "replace"))
                if b"from_pretrained" in seg:
                    self.fact_follow = PRETRAINED_FOLLOW

        done_to = -1
        for m in _FACT_HINT.finditer(text):
            if m.start() < done_to:
                continue
            ls = line_start(text, m.start())
            while self.fact_follow and done_to + 1 < ls:  # the lines after a from_pretrained(, hint or not
                self.fact_follow -= 1
                done_to = line_end(text, done_to + 1)
                feed(line_start(text, done_to), done_to)
            if m.start() < done_to:
                continue
            done_to = line_end(text, m.start())
            if self.fact_follow:
                self.fact_follow -= 1
            feed(ls, done_to)
        while self.fact_follow and done_to + 1 < len(text):  # ... at the end of the chunk
            self.fact_follow -= 1
            done_to = line_end(text, done_to + 1)
            feed(line_start(text, done_to), done_to)

    def _facts_at_once(self, text: bytes, lines: Lines, used: Used) -> None:
        """:meth:`_facts` for a block with no ``from_pretrained`` (no line is handed over for its hint-less
        follower): the lines holding a hint are found, checked against the records already read and
        against :data:`FILLER_LINE` in C-level passes, and only the rest go through the fact scanner one
        by one; the tqdm redraws between them (~45k in a 4 MB head) are handed over as counts."""
        hits = _hint_offsets(text)
        if not len(hits):
            return
        ls, le = line_spans(text, hits)  # one hint per line: the first
        free = ~used.covers_all(ls, le)
        ls_l, le_l = ls[free].tolist(), le[free].tolist()
        cap_l = [min(e, s + LINE_CAP) for s, e in zip(ls_l, le_l)]
        fill = np.fromiter(map(is_not, map(FILLER_LINE.fullmatch, repeat(text), ls_l, cap_l), repeat(None)),
                           dtype=bool, count=len(ls_l))
        fillers = np.cumsum(fill)
        handed = 0
        for i in np.flatnonzero(~fill).tolist():
            self.facts.filler(int(fillers[i]) - handed)
            handed = int(fillers[i])
            self.facts.line(lines.at(ls_l[i]), text[ls_l[i]:cap_l[i]].decode("utf-8", "replace"))
        if len(fillers):
            self.facts.filler(int(fillers[-1]) - handed)

    # -- end of file -----------------------------------------------------------------------
    def _finish(self) -> None:
        st = self.st
        self.out.flush()
        exact = not st.inferred
        mm = finish_minimind(st)
        if mm is not None:
            self._hand_over(mm, exact)
            self.builder.fact("step_origin", "minimind: global step = (epoch - base) * steps_per_epoch + step",
                              self.source, where="Epoch:[e/E](s/S) lines", original_key="Epoch")
        self._drain()
        cut = self.tb.cut_off()
        if cut is not None:
            tb_line, message, data = cut
            self.sink.add("traceback", message, tb_line, st.last_step, data, None)
            self._frameworks_from_frame(data.get("frame"))
            if data.get("implies") == "loss_scale_min":
                self.sink.add("loss_scale_min", "the traceback stops inside DeepSpeed's loss scaler update "
                              "(DynamicLossScaler.update_scale), whose only exception is 'Current loss scale already "
                              "at minimum - cannot decrease scale anymore. Exiting run.'", tb_line, st.last_step, {}, None)
        if not exact:  # decided at the end of the file: the points already handed over are inferred too
            self.builder.set_exact(self.source, False)
        self.sink.flush(self.builder)
        self.facts.finish()
        for fw in sorted((self.frameworks | st.frameworks) - {""}):
            self.builder.framework(fw)

    def _hand_over(self, frame: pd.DataFrame, exact: bool) -> None:
        """Give the builder a frame with categorical key and metric columns (1-2 bytes a point)."""
        if not hasattr(frame["key"], "cat"):
            frame["key"] = frame["key"].astype("category")
        cats = [str(c) for c in frame["key"].cat.categories]
        metrics = self._metrics_for(tuple(cats))
        uniq = list(dict.fromkeys(metrics))
        remap = np.array([uniq.index(m) for m in metrics], dtype=np.int32)
        codes = frame["key"].cat.codes.to_numpy()
        frame["metric"] = pd.Categorical.from_codes(remap[codes], categories=uniq)
        frame = self.ranks.rename(frame)
        self.builder.scalar_frame(self.source, KIND, frame, exact_steps=exact)

    def _metrics_for(self, cats: tuple[str, ...]) -> list[str]:
        override = self.out.metric_override
        return [override.get(k) or canonical(k) for k in cats]


def _hint_offsets(text: bytes) -> np.ndarray:
    """Offsets where an alternative of ``_FACT_HINT`` occurs: every line holding one of its matches, and
    no other line (no alternative spans a line break, and a match is skipped by ``finditer`` only inside
    an earlier match on the same line). ``_FACT_HINT.finditer`` tries every byte (its ``\\d`` branch has no
    literal to skip to): ~250 ms on a 4 MB head of tqdm bars; these numpy passes and word searches ~15 ms."""
    arr = np.frombuffer(text + b"\x00", dtype=np.uint8)  # a NUL after the end: no hint ends past it

    def then(byte: int, follows: np.ndarray) -> np.ndarray:  # offsets of ``byte`` with ``follows`` after it
        at = np.flatnonzero(arr == byte)
        return at[follows(arr[at + 1])] if len(at) else at

    dot = then(46, lambda b: (b >= 48) & (b <= 57))  # "\d.\d": a dot between digits, the match starts before it
    dot = dot[dot > 0]
    dot = dot[(arr[dot - 1] >= 48) & (arr[dot - 1] <= 57)] - 1
    parts = [np.flatnonzero(arr == 61), then(58, lambda b: b == 32), then(45, lambda b: b == 45), dot]
    parts += [np.fromiter((m.start() for m in _literal_rx(w).finditer(text)), dtype=np.int64) for w in _HINT_WORDS
              if has(text, w)]
    return np.sort(np.concatenate(parts))


#: framework formats run before the built-in line parsers, so the generic parser (last) never
#: re-reads a line a format parser understood
_ALL_PARSERS = FORMAT_PARSERS + PARSERS + LOOSE_PARSERS

#: points collected before they are handed to the builder (~11 bytes each here)
HAND_OVER_POINTS = 2_000_000

READERS = {KIND: read_text_log}

"""HF Trainer / TRL / LLaMA-Factory / ms-swift stdout dicts, parsed a whole chunk at a time.

A week-long run prints millions of ``{'loss': ...}`` records between tqdm refreshes. Per-record
Python work (a regex call, ``float()`` per value, a bar lookup, list appends) cost ~20 us a record,
more than reading the file. So every stage here is one C-level pass over the chunk's records:
``re.split`` finds the records and (through the piece lengths) their offsets, ``map(fullmatch)``
parses all records of a known layout, ``map(bytes.rfind)`` + ``map(match)`` find the tqdm bar in
front of each record, and numpy converts the values and works out the steps. Only records of a
new layout or with odd values (commas in strings, lists) take the per-record path.

Steps: HF dicts carry none; the step is the counter of the last tqdm training bar printed between
the previous record and this one (``| 140/2724 [``: the dict printed right after bar 140 is step
140), carried forward when none was printed, or ms-swift's ``global_step/max_steps`` / an explicit
``step`` key. With no counter at all train records are numbered 1..n and the file is marked inexact.
"""

from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import eq, is_not, itemgetter

import numpy as np

from autopsy.ingest.text_metrics import (
    _BAR_LAST,
    Collector,
    StepMarks,
    StepState,
    Used,
    _bar_last_for,
    has,
    is_loss_like,
    key_str,
    newline_offsets,
    to_float,
)

#: a metrics record: ``{'`` ... ``}`` on one line (the group makes ``split`` return the records)
_DICT_SPLIT = re.compile(rb"(\{'[^{}\n\r]{1,16384}\})")
_KV = re.compile(rb"'([^'\n\r]{1,200})':\s*('[^'\n\r]*'|\"[^\"\n\r]*\"|\[[^\]\n\r]*\]|[^,}\n\r]*)")
#: a tqdm counter at the position of its ``|`` (19+ digit counters are not steps)
_BAR_AT = re.compile(rb"\|\s*(\d{1,18})/(\d{1,18})\s*\[")
_SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}
_EVAL_PREFIX = ("eval_", "test_", "predict_")
_STEP_KEYS = ("step", "global_step", "current_steps")
#: values only a printed configuration holds: a metrics record (HF, TRL, ms-swift, LLaMA-Factory) is numbers and
#: the odd string, never a Python boolean or None
_CONFIG_TELLS = {b"True", b"False", b"None"}
_KIND_CODE = {"train": 0, "eval": 1, "summary": 2}
#: dict layouts remembered per file (train, eval, summary, a few trainer-specific ones)
MAX_SIGS = 64
_I64_MAX = 2 ** 63 - 1


@dataclass
class _Sig:
    """A dict layout seen before (same keys, same order): parsed by one regex, no per-key work."""

    rx: re.Pattern[bytes]
    num_idx: list[int]  # groups holding numbers (summary 'epoch' and step keys left out)
    codes: np.ndarray  # Collector key codes of those numbers
    keys: list[str]
    kind: str  # train | eval | summary
    swift_idx: int | None  # group of 'global_step/max_steps'
    step_idx: int | None  # group of an explicit 'step' key
    trl: bool
    exact: re.Pattern[bytes]  # the same layout as printed by repr(dict): matches a subset, faster


def _build_sig(pairs: list[tuple[bytes, bytes]], out: Collector) -> _Sig | None:
    if any(raw.strip() in _CONFIG_TELLS for _, raw in pairs):
        return None  # a printed args/config dict (``vars(args)``, a ``defaultdict``): trainers never log booleans
    keys = [key_str(k) for k, _ in pairs]
    nums = [i for i, (_, raw) in enumerate(pairs) if to_float(raw) is not None]
    num_keys = [keys[i] for i in nums]
    if not any(is_loss_like(k) or k.startswith(_EVAL_PREFIX) or k in _SUMMARY_KEYS for k in num_keys):
        return None
    kind = ("summary" if "train_runtime" in num_keys else
            "eval" if "loss" not in num_keys and any(k.startswith(_EVAL_PREFIX) for k in num_keys) else "train")
    step_idx = next((i for i in nums if keys[i] in _STEP_KEYS), None)
    keep = [i for i in nums if i != step_idx and not (kind == "summary" and keys[i] == "epoch")]
    if not keep:
        return None
    codes = array("H")
    for i in keep:
        c = out.code_of(keys[i])
        if c is None:
            return None
        codes.append(c)
    # values exclude braces and line breaks, so a match never runs past its own record
    rx = re.compile(rb"\{" + rb",\s*".join(rb"'" + re.escape(k) + rb"':\s*'?([^,'{}\n\r]*)'?" for k, _ in pairs)
                    + rb"\}")
    # Python's own dict repr (what HF/TRL print): fixed separators and quoting, ~30% cheaper to match
    exact = re.compile(rb"\{" + rb", ".join(
        rb"'" + re.escape(k) + (rb"': '([^,'{}\n\r]*)'" if raw[:1] == b"'" else rb"': ([^,'{}\n\r]*)")
        for k, raw in pairs) + rb"\}")
    swift = next((i for i, k in enumerate(keys) if k == "global_step/max_steps"), None)
    trl = any(k.startswith(("rewards/", "logps/", "logits/")) for k in num_keys)
    return _Sig(rx, keep, np.frombuffer(codes, dtype=np.uint16).copy(), [keys[i] for i in keep], kind, swift,
                step_idx, trl, exact)


def _explicit(sig: _Sig, groups: tuple[bytes, ...]) -> int | None:
    """The step a record states itself (ms-swift ``global_step/max_steps``, a ``step`` key)."""
    explicit = None
    if sig.swift_idx is not None:
        gs = groups[sig.swift_idx].split(b"/")[0].strip()
        explicit = int(gs) if gs.isdigit() else None
    if sig.step_idx is not None:
        try:
            explicit = int(float(groups[sig.step_idx]))
        except (ValueError, OverflowError):
            pass
    return explicit if explicit is None or -_I64_MAX <= explicit <= _I64_MAX else None


class _Rows:
    """The metric records of one chunk, in file order, before their steps are known."""

    def __init__(self) -> None:
        self.idx = np.zeros(0, dtype=np.int64)  # record index in the chunk
        self.kind = np.zeros(0, dtype=np.int8)  # _KIND_CODE
        self.exp = np.zeros(0, dtype=np.int64)  # explicit step where has_exp
        self.has_exp = np.zeros(0, dtype=bool)
        self.sig_rows: dict[int, tuple[_Sig, np.ndarray, np.ndarray]] = {}  # id(sig) -> records, values (R, K)
        self.slow: list[tuple[int, list[tuple[int, float]]]] = []  # (record, [(code, value)])
        self.trl = self.swift = False


def _values(sig: _Sig, n: int, groups: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(R, K) float values of the numeric groups (``groups``: every group of the ``n`` records, record after
    record), and a mask of rows that all converted."""
    k = len(sig.num_idx)
    flat = np.array(groups, dtype=object).reshape(n, -1)[:, sig.num_idx]
    try:
        return flat.astype(np.float64).reshape(n, k), np.ones(n, dtype=bool)
    except (ValueError, TypeError, OverflowError):
        pass
    vals = np.full((n, k), np.nan)
    ok = np.ones(n, dtype=bool)
    for r in range(n):  # a record with a non-number where its layout had one is skipped, as a whole
        try:
            vals[r] = [float(x) for x in flat[r]]
        except (ValueError, TypeError, OverflowError):
            ok[r] = False
    return vals, ok


def _classify(bodies: list[bytes], st: StepState, out: Collector) -> _Rows:
    """Assign each record to a known layout (vectorised per layout); new layouts are learned."""
    rows = _Rows()
    # per layout: its records and all their groups, one flat list (record after record)
    matched: dict[int, tuple[_Sig, list[int], list[bytes]]] = {}
    slow: dict[int, tuple[_Sig, list[tuple[bytes, bytes]]]] = {}
    pending = list(range(len(bodies)))
    sigs = st.sigs
    while pending:
        first = bodies[pending[0]]
        sig = next((s for s in sigs if s.rx.fullmatch(first) is not None), None)
        if sig is None:
            pairs = _KV.findall(first)
            sig = _build_sig(pairs, out) if pairs else None
            if sig is None:  # a printed config dict, not a metrics record
                pending.pop(0)
                continue
            if sig.rx.fullmatch(first) is None:  # values with commas/quotes/lists: per-record path
                slow[pending.pop(0)] = (sig, pairs)
                continue
            if len(sigs) < MAX_SIGS:
                sigs.insert(0, sig)
        elif sigs[0] is not sig:
            sigs.remove(sig)
            sigs.insert(0, sig)
        got = matched.setdefault(id(sig), (sig, [], []))
        if len(pending) == len(bodies):
            # one scan over the joined records: a match cannot cross a line break and a record has no
            # brace inside, so each match is one whole record, and as many matches as records means
            # every record has this layout (the usual chunk). ``split`` hands back the groups as one
            # flat list, the text between matches after each record's (~2.5x finditer + groups)
            parts = sig.exact.split(b"\n".join(bodies))
            k = sig.exact.groups + 1
            found = (len(parts) - 1) // k
            gaps = parts[0::k]  # before the first match, between matches, after the last
            del parts[0::k]
            if found == len(bodies):
                got[1].extend(pending)
                got[2].extend(parts)
                break
            if found:  # most records (an eval record or two among them): only the others are tried alone
                # the records in front of a match: one "\n" each in the gaps before it (a gap between two
                # matches also holds the first one's "\n")
                at = np.cumsum(np.fromiter(map(bytes.count, gaps[:-1], repeat(b"\n")), dtype=np.int64, count=found))
                pending = _take_found(bodies, at, parts, sig, got)
                continue
        ms = list(map(sig.rx.fullmatch, map(bodies.__getitem__, pending)))
        got[1].extend(i for i, m in zip(pending, ms) if m is not None)
        got[2].extend(chain.from_iterable(map(re.Match.groups, filter(None, ms))))
        pending = [i for i, m in zip(pending, ms) if m is None]
    idx_parts, kind_parts, exp_parts, has_parts = [], [], [], []
    for key, (sig, idx, groups) in matched.items():
        n = len(idx)
        vals, ok = _values(sig, n, groups)
        exp, has = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        if sig.swift_idx is not None or sig.step_idx is not None:
            k = len(groups) // n
            for r in range(n):
                e = _explicit(sig, groups[r * k:(r + 1) * k])
                if e is not None:
                    exp[r], has[r] = e, True
            rows.swift = rows.swift or sig.swift_idx is not None
        if not ok.any():
            continue
        idx_arr = np.array(idx, dtype=np.int64)[ok]
        rows.sig_rows[key] = (sig, idx_arr, vals[ok])
        rows.trl = rows.trl or sig.trl
        idx_parts.append(idx_arr)
        kind_parts.append(np.full(len(idx_arr), _KIND_CODE[sig.kind], dtype=np.int8))
        exp_parts.append(exp[ok])
        has_parts.append(has[ok])
    for i, (sig, pairs) in slow.items():
        e, pts = _slow_values(sig, pairs, out)
        rows.swift = rows.swift or any(k == b"global_step/max_steps" for k, _ in pairs)
        rows.slow.append((i, pts))
        idx_parts.append(np.array([i], dtype=np.int64))
        kind_parts.append(np.array([_KIND_CODE[sig.kind]], dtype=np.int8))
        exp_parts.append(np.array([0 if e is None else e], dtype=np.int64))
        has_parts.append(np.array([e is not None]))
    if not idx_parts:
        return rows
    idx_all = np.concatenate(idx_parts)
    order = np.argsort(idx_all, kind="stable") if len(idx_parts) > 1 else slice(None)
    rows.idx = idx_all[order]
    rows.kind = np.concatenate(kind_parts)[order]
    rows.exp = np.concatenate(exp_parts)[order]
    rows.has_exp = np.concatenate(has_parts)[order]
    return rows


def _take_found(bodies: list[bytes], at: np.ndarray, groups: list[bytes], sig: _Sig,
                got: tuple[_Sig, list[int], list[bytes]]) -> list[int]:
    """Give ``sig`` the records its exact layout matched in the joined records (``at``, in order, with their
    ``groups`` one after the other) and those its looser regex matches among the rest (what a fullmatch of
    every record would give: the exact layout matches a subset, with the same groups); returns the records
    left for other layouts, in order."""
    hit = np.zeros(len(bodies), dtype=bool)
    hit[at] = True
    rest = np.flatnonzero(~hit).tolist()
    ms = list(map(sig.rx.fullmatch, map(bodies.__getitem__, rest)))
    if ms.count(None) == len(ms):  # the usual case: the others have layouts of their own
        got[1].extend(at.tolist())
        got[2].extend(groups)
        return rest
    k = len(groups) // len(at)
    rows = [(i, tuple(groups[r * k:(r + 1) * k])) for r, i in enumerate(at.tolist())]
    rows += [(i, m.groups()) for i, m in zip(rest, ms) if m is not None]
    rows.sort(key=itemgetter(0))
    got[1].extend(map(itemgetter(0), rows))
    got[2].extend(chain.from_iterable(map(itemgetter(1), rows)))
    return [i for i, m in zip(rest, ms) if m is None]


def _slow_values(sig: _Sig, pairs: list[tuple[bytes, bytes]], out: Collector) -> tuple[int | None, list]:
    """A record whose values defeat its layout's regex (strings with commas, lists): key by key."""
    vals = {key_str(k): to_float(raw) for k, raw in pairs}
    explicit = None
    for k, raw in pairs:
        if k == b"global_step/max_steps":
            gs = raw.strip(b"'\" ").split(b"/")[0]
            explicit = int(gs) if gs.isdigit() else None
    for sk in _STEP_KEYS:
        v = vals.pop(sk, None)
        if v is not None and not math.isnan(v) and not math.isinf(v) and explicit is None:
            explicit = int(v)
    if explicit is not None and not -_I64_MAX <= explicit <= _I64_MAX:
        explicit = None
    pts = []
    for k in sig.keys:
        v = vals.get(k)
        c = out.code_of(k)
        if v is not None and c is not None:
            pts.append((c, v))
    return explicit, pts


def _ints(raw: list[bytes]) -> np.ndarray:
    """int64 of 1-18 digit counters (``_BAR_AT`` groups), parsed by numpy's text reader in one call
    (~3x ``fromiter(map(int, ...))``; digits only, so exact)."""
    if not raw:
        return np.zeros(0, dtype=np.int64)
    got = np.fromstring(b" ".join(raw), sep=" ", dtype=np.int64)
    return got if len(got) == len(raw) else np.fromiter(map(int, raw), dtype=np.int64, count=len(raw))


def _window_bars(text: bytes, lo: np.ndarray, hi: np.ndarray, total: bytes | None
                 ) -> tuple[np.ndarray, np.ndarray, list[bytes | None]]:
    """Counter of the last tqdm bar in each window [lo, hi) (and, with no total known, its total).

    Same answer as scanning each window with the full regex: the last ``|`` of a window is almost
    always the bar's own, so one ``rfind`` and one anchored match per window settle it; a window
    whose last ``|`` is something else (a table, a bar of another total such as an eval bar) is
    scanned with the full regex, alone.
    """
    n = len(lo)
    lo_l, hi_l = lo.tolist(), hi.tolist()
    cnt = np.full(n, -1, dtype=np.int64)
    has = np.zeros(n, dtype=bool)
    tots: list[bytes | None] = [None] * n
    if total is not None and n >= VECTOR_BARS:
        return _window_bars_known(text, lo, hi, total, cnt, has, tots)
    pipes = list(map(text.rfind, repeat(b"|"), lo_l, hi_l))
    if pipes.count(-1) == n:
        return cnt, has, tots
    # every step below is one C-level pass (map/compress/join), not a Python loop per record
    ms = list(map(_BAR_AT.match, repeat(text), pipes, hi_l))
    pipe_ok = np.array(pipes, dtype=np.int64) >= 0
    hit = pipe_ok & np.fromiter(map(is_not, ms, repeat(None)), dtype=bool, count=n)
    redo = np.flatnonzero(pipe_ok & ~hit).tolist()
    gidx = np.flatnonzero(hit)
    gm = ms if len(gidx) == n else list(compress(ms, hit.tolist()))
    if len(gm):
        g_tot = list(map(itemgetter(2), gm))
        g_cnt = _ints(list(map(itemgetter(1), gm)))
        if total is not None:
            if g_tot.count(total) != len(g_tot):
                same = np.fromiter(map(eq, g_tot, repeat(total)), dtype=bool, count=len(g_tot))
                redo.extend(gidx[~same].tolist())
                redo.sort()
                gidx, g_cnt = gidx[same], g_cnt[same]
        else:
            for r, t in zip(gidx.tolist(), g_tot):
                tots[r] = t
        cnt[gidx], has[gidx] = g_cnt, True
    full = _bar_last_for(total) if total else _BAR_LAST
    for r in redo:
        bm = full.match(text, lo_l[r], hi_l[r])
        if bm is not None and len(bm[1]) <= 18:
            cnt[r], has[r], tots[r] = int(bm[1]), True, bm[2] if total is None else total
    return cnt, has, tots


#: windows from which the bars in front of records are read in numpy passes (fewer: one match each)
VECTOR_BARS = 64
#: bytes after a window's last ``|`` read at once; a bar that runs on (long blanks) is matched alone
BAR_SPAN = 32
_POW10 = 10 ** np.arange(18, dtype=np.int64)
_WS = np.zeros(256, dtype=bool)
_WS[[9, 10, 11, 12, 13, 32]] = True  # what ``\\s`` matches in a bytes pattern
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[48:58] = True


def _first(mask: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first column at or after ``start`` where ``mask`` holds, and whether there is one."""
    m = mask & (np.arange(mask.shape[1]) >= start[:, None])
    at = m.argmax(axis=1)
    return at, m[np.arange(len(at)), at]


def _bars_at(text: bytes, pipes: np.ndarray, hi: np.ndarray, total: bytes
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_BAR_AT.match(text, pipe, hi)`` of many windows read in numpy passes over the ``BAR_SPAN`` bytes from
    each ``|``: (decided, matched with this ``total``, counter). ``|``, blanks, 1-18 digits, ``/``, 1-18
    digits, blanks, ``[``: every part of the pattern is a run of one class or one byte, so the runs' ends settle
    it; a window whose runs reach past ``BAR_SPAN`` is left undecided."""
    arr = np.frombuffer(text, dtype=np.uint8)
    pos = pipes[:, None] + np.arange(BAR_SPAN)
    g = arr.take(np.minimum(pos, len(arr) - 1))
    g[pos >= hi[:, None]] = 0  # past the window: a byte no part of the pattern matches
    rows = np.arange(len(pipes))
    ws, digit = _WS[g], _DIGIT[g]
    s1, ok1 = _first(~ws, np.ones(len(pipes), dtype=np.int64))
    e1, ok2 = _first(~digit, s1)
    s2 = np.minimum(e1 + 1, BAR_SPAN - 1)
    e2, ok3 = _first(~digit, s2)
    e3, ok4 = _first(~ws, e2)
    decided = ok1 & ok2 & ok3 & ok4 & (e1 + 1 < BAR_SPAN)
    d1, d2 = e1 - s1, e2 - s2
    hit = (decided & (d1 >= 1) & (d1 <= 18) & (g[rows, e1] == 47) & (d2 >= 1) & (d2 <= 18) & (g[rows, e3] == 91)
           & (d2 == len(total)))
    for k, byte in enumerate(total):  # group 2 is the total, byte for byte
        hit &= g[rows, np.minimum(s2 + k, BAR_SPAN - 1)] == byte
    # the counter: its digits times their powers of ten (at most 18 digits: below 2**63)
    place = e1[:, None] - 1 - np.arange(BAR_SPAN)
    scale = np.where((place >= 0) & (place < d1[:, None]), _POW10[np.clip(place, 0, 17)], 0)
    value = ((g.astype(np.int64) - 48) * scale).sum(axis=1)
    return decided, hit, value


def _window_bars_known(text: bytes, lo: np.ndarray, hi: np.ndarray, total: bytes, cnt: np.ndarray,
                       has: np.ndarray, tots: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, list[bytes | None]]:
    """:func:`_window_bars` with the training total known, in numpy passes: the last ``|`` of each window from
    the text's ``|`` offsets, its bar read by :func:`_bars_at`; windows it leaves undecided take the anchored
    match, and those whose last ``|`` is no bar of ``total`` the full regex, as before."""
    at = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 124)
    if not len(at):
        return cnt, has, tots
    k = np.searchsorted(at, hi, side="left") - 1  # text.rfind(b"|", lo, hi): the last "|" in front of hi ...
    pipes = at[np.maximum(k, 0)]
    pipe_ok = (k >= 0) & (pipes >= lo)  # ... if it is in the window
    idx = np.flatnonzero(pipe_ok)
    if not len(idx):
        return cnt, has, tots
    decided, hit, value = _bars_at(text, pipes[idx], hi[idx], total)
    for j in np.flatnonzero(~decided).tolist():
        r = int(idx[j])
        m = _BAR_AT.match(text, int(pipes[r]), int(hi[r]))
        if m is not None and m[2] == total:
            hit[j], value[j] = True, int(m[1])
    good = idx[hit]
    cnt[good], has[good] = value[hit], True
    full = _bar_last_for(total)
    lo_l, hi_l = lo.tolist(), hi.tolist()
    for r in idx[~hit].tolist():
        bm = full.match(text, lo_l[r], hi_l[r])
        if bm is not None and len(bm[1]) <= 18:
            cnt[r], has[r], tots[r] = int(bm[1]), True, total
    return cnt, has, tots


#: records per chunk whose redraw is checked first; only when one disagrees with the bar before
#: it (a stale bar: a fast run) are all records of the chunk checked (~2 us each)
REDRAW_SAMPLE = 48


def _redrawn_bars(text: bytes, ends: np.ndarray, total: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Counter of the training bar (of ``total``) that tqdm redraws right after each record."""
    rx = _redraw_for(total)
    cnt = np.full(len(ends), -1, dtype=np.int64)
    has = np.zeros(len(ends), dtype=bool)
    ms = list(map(rx.match, repeat(text), ends.tolist()))
    hits = [(r, m[1]) for r, m in enumerate(ms) if m is not None and len(m[1]) <= 18]
    if hits:
        idx = np.fromiter((r for r, _ in hits), dtype=np.int64, count=len(hits))
        cnt[idx] = np.fromiter((int(c) for _, c in hits), dtype=np.int64, count=len(hits))
        has[idx] = True
    return cnt, has


@lru_cache(maxsize=64)
def _redraw_for(total: bytes) -> re.Pattern[bytes]:
    # right after a record's "}": its newline, then (only padding between) the redrawn bar "... | 2/6 ["
    return re.compile(rb"[ \t]*\r?\n\s*[^\n{|]{0,40}\|[^|\n]{0,80}\|\s*(\d+)/" + re.escape(total) + rb"\s*\[")


def _ffill(values: np.ndarray, has: np.ndarray, carried: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Forward-filled values (``carried`` in front of the first) and where they are defined."""
    idx = np.where(has, np.arange(len(values)), -1)
    np.maximum.accumulate(idx, out=idx)
    filled = np.where(idx >= 0, values[np.maximum(idx, 0)], -1 if carried is None else carried)
    return filled, (idx >= 0) | (carried is not None)


def _fix_train_total(text: bytes, lo: np.ndarray, hi: np.ndarray, kind_train: np.ndarray, cnt: np.ndarray,
                     has: np.ndarray, tots: list[bytes | None], st: StepState) -> None:
    """No training total known yet: it is the total of the bar in force at the first train record
    with one; from there on only bars of that total count (eval bars do not move the step)."""
    _, bar_ok = _ffill(cnt, has, st.last_bar)
    tot_idx = [r for r, t in enumerate(tots) if t is not None]
    for r in np.flatnonzero(kind_train & bar_ok).tolist():
        k = bisect_right(tot_idx, r)
        total = tots[tot_idx[k - 1]] if k else st.last_bar_total
        if total is None:
            continue
        st.train_total = total
        if r + 1 < len(lo):
            c2, h2, _ = _window_bars(text, lo[r + 1:], hi[r + 1:], total)
            cnt[r + 1:], has[r + 1:] = c2, h2
        return
    if tot_idx:
        st.last_bar_total = tots[tot_idx[-1]]


def _steps(text: bytes, starts: np.ndarray, ends: np.ndarray, rows: _Rows, st: StepState) -> np.ndarray:
    """Step of every record, with the same rules (and carried state) as a record-by-record scan."""
    n = len(starts)
    lo = np.concatenate(([0], ends[:-1]))
    kind, has_exp = rows.kind, rows.has_exp
    cnt, has, tots = _window_bars(text, lo, starts, st.train_total)
    train_noexp = (kind == 0) & ~has_exp
    if st.train_total is None:
        _fix_train_total(text, lo, starts, train_noexp, cnt, has, tots, st)
    bar, bar_ok = _ffill(cnt, has, st.last_bar)
    rec = st.train_records + np.cumsum(train_noexp)
    step = np.where(has_exp, rows.exp, np.where(bar_ok, bar, rec))
    if st.train_total is not None:
        # tqdm.write() redraws the bar right after the record with the current count, while the
        # bar drawn before it may be stale (tqdm repaints at most every mininterval): HF 5 prints
        # "0/6 ... {'loss': ...} 2/6" for the record of step 2. The redraw wins when present.
        cand = np.flatnonzero(train_noexp)
        if cand.size:
            probe = cand[np.linspace(0, cand.size - 1, min(cand.size, REDRAW_SAMPLE)).astype(np.int64)]
            p_cnt, p_has = _redrawn_bars(text, ends[probe], st.train_total)
            if (p_has & (p_cnt != step[probe])).any():
                a_cnt, a_has = _redrawn_bars(text, ends[cand], st.train_total)
                step[cand[a_has]] = a_cnt[a_has]
    # eval/summary records with no bar in force take the previous record's step
    loose = (kind != 0) & ~has_exp & ~bar_ok
    if loose.any():
        idx = np.where(~loose, np.arange(n), -1)
        np.maximum.accumulate(idx, out=idx)
        carried = st.last_step
        prev = np.where(idx >= 0, step[np.maximum(idx, 0)], rec if carried is None else carried)
        step = np.where(loose, prev, step)
        if carried is None and (loose & (idx < 0)).any():
            st.inferred = True
    if (train_noexp & ~bar_ok).any():
        st.inferred = True
    if has_exp.any() or (train_noexp & bar_ok).any():
        st.exact_seen = True
    st.train_records = int(rec[-1])
    st.last_step = int(step[-1])
    if bar_ok[-1]:
        st.last_bar = int(bar[-1])
    return step


def parse_dicts(text: bytes, first_line: int, st: StepState, out: Collector,
                steps: StepMarks, used: Used) -> None:
    prev_end = 0
    if b"{'" in text:
        parts = _DICT_SPLIT.split(text)
        if len(parts) > 1 and has(text, b"loss_dict = {"):
            parts = _without_d2_loss_dicts(parts)
        bodies = parts[1::2]
        if bodies:
            prev_end = _records(text, first_line, parts, bodies, st, out, steps, used)
    if prev_end or st.last_bar is not None or b"/" in text:
        rx = _bar_last_for(st.train_total) if st.train_total else _BAR_LAST
        tail = rx.match(text, prev_end)
        if tail is not None:
            st.last_bar, st.last_bar_total = int(tail[1]), tail[2] if not st.train_total else st.train_total


def _without_d2_loss_dicts(parts: list[bytes]) -> list[bytes]:
    """``parts`` (text, record, text, ...) with detectron2's ``loss_dict = {...}`` records folded into the text around
    them: the detectron2 parser reads them at the iteration its ``FloatingPointError`` names, where a record here would
    take the step of a record count or a bar."""
    out = [parts[0]]
    for i in range(1, len(parts), 2):
        if out[-1].endswith(b"loss_dict = "):
            out[-1] += parts[i] + parts[i + 1]
        else:
            out += (parts[i], parts[i + 1])
    return out


def _records(text: bytes, first_line: int, parts: list[bytes], bodies: list[bytes], st: StepState,
             out: Collector, steps: StepMarks, used: Used) -> int:
    """Parse the chunk's records; returns the end offset of the last one read (0 if none)."""
    bounds = np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)))
    all_starts, all_ends = bounds[0::2][:len(bodies)], bounds[1::2]
    rows = _classify(bodies, st, out)
    if not len(rows.idx):
        return 0
    ridx = rows.idx
    starts, ends = all_starts[ridx], all_ends[ridx]
    step = _steps(text, starts, ends, rows, st)
    newlines = newline_offsets(text)
    line = first_line + np.searchsorted(newlines, starts)
    pos_of = np.full(len(bodies), -1, dtype=np.int64)
    pos_of[ridx] = np.arange(len(ridx))
    for sig, idx, vals in rows.sig_rows.values():
        r = pos_of[idx]
        out.add_rows(starts[r], step[r], line[r], sig.codes, vals)
    for i, pts in rows.slow:
        r = int(pos_of[i])
        if pts:
            codes = np.array([c for c, _ in pts], dtype=np.uint16)
            vals = np.array([[v for _, v in pts]], dtype=np.float64)
            out.add_rows(starts[r:r + 1], step[r:r + 1], line[r:r + 1], codes, vals)
    steps.add_block(starts, step)
    used.add_block(starts)
    st.frameworks.add("hf_trainer")
    if rows.trl:
        st.frameworks.add("trl")
    if rows.swift:
        st.frameworks.add("ms_swift")
    return int(ends[-1])

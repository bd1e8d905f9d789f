"""The literal-led scans of the speed work (issue 15) find exactly what the regexes they replace found.

Each old pattern is kept here verbatim; random texts made of the words those patterns care about
(counter words, rank tags, line breaks, word characters around them) are scanned both ways.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from autopsy.ingest import ranks, text_formats, text_metrics
from autopsy.ingest.text_metrics import _generic_counters, finditer_at, literal_positions

OLD_HEADER_GATE = re.compile(rb"\[(?:epoch|step|batch|ba|sample|token)=")
OLD_TAG_ANY = re.compile(rb"\[(?:rank|RANK|Rank|default|trainer)")
OLD_VERL = re.compile(rb"(?m)(?:^|(?<=[\s\]:|]))step:(\d+) - ([^\n\r]{0,20000})")
OLD_GENERIC = re.compile(
    rb"\b(?:[Ss]tep|STEP|[Ii]ter|ITER|[Ii]teration|global_step|[Ii]ters)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?\]?")

_WORDS = [b"step", b"Step", b"STEP", b"iter", b"Iter", b"ITER", b"iters", b"Iters", b"iteration", b"Iteration",
          b"global_step", b"xstep", b"step_", b"Epoch", b"Iter(train)", b"[rank0]:", b"[Rank 3]", b"[RANK_1]",
          b"[default2]:", b"[rank", b"step:", b" - ", b"loss: 1.5", b"12", b"/", b"[", b"]", b" ", b"\t", b"\n",
          b"\r", b":", b"=", b"#", b"|", b"a", b"_", b"[1][2/3]", b"(train)", b"tep", b"TER", b"ter"]
texts = st.lists(st.sampled_from(_WORDS), max_size=60).map(b"".join)


def _spans(ms) -> list:  # noqa: ANN001
    return [(m.span(), m.groups()) for m in ms]


@settings(max_examples=400, deadline=None)
@given(texts)
def test_generic_counter_scan_is_finditer(text: bytes) -> None:
    assert _spans(_generic_counters(text)) == _spans(OLD_GENERIC.finditer(text))
    assert _spans(text_metrics._GENERIC_COUNTER.finditer(text)) == _spans(OLD_GENERIC.finditer(text))


@settings(max_examples=400, deadline=None)
@given(texts)
def test_verl_scan_is_the_old_one(text: bytes) -> None:
    assert _spans(text_formats._VERL.finditer(text)) == _spans(OLD_VERL.finditer(text))


@settings(max_examples=400, deadline=None)
@given(texts)
def test_rank_and_mmcv_candidates_cover_every_match(text: bytes) -> None:
    assert sorted(literal_positions(text, ranks._TAG_HINTS)) == [m.start() for m in OLD_TAG_ANY.finditer(text)]
    starts = sorted({text.rfind(b"\n", 0, at) + 1 for at in literal_positions(text, ranks._TAG_HINTS)})
    assert _spans(finditer_at(ranks._LINE_RANK, text, starts)) == _spans(ranks._LINE_RANK.finditer(text))
    cand = sorted(literal_positions(text, (b"Epoch", b"Iter")))
    assert _spans(finditer_at(text_metrics._MMCV, text, cand)) == _spans(text_metrics._MMCV.finditer(text))


def test_literal_positions_finds_every_occurrence() -> None:
    assert sorted(literal_positions(b"EpochIterEpoch", (b"Epoch", b"Iter"))) == [0, 5, 9]
    assert literal_positions(b"", (b"x",)) == []


#: filler the chunk skeleton drops (digits, blanks, non-ASCII) and letters: deleting it brings far-apart bytes together
_FILLER = [b"0", b"12", b" ", b"\t", b"\xe2\x96\x88", b"\xef\xbc\x9a", b"x", b"Ep", b"och", b"te", b"p"]
_GATES = [b"/step", b"] - ", b"\n - ", b"| {", b"] - {", b"epoch ", b"Epoch ", b"Epoch: [", b"-\n|", b"{\n", b"{\r\n",
          b"val loss ", b"Iter", b"OSS", b"(Step", b"json_stats: {", b"tep", b"ter", b"TEP", b"step:", b"[Rank", b"\xef\xbc",
          b"Epoch", b"Iteration", b"xEp", b"12 ", b" ", b"\n"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_WORDS + _FILLER), min_size=1, max_size=80).map(b"".join), st.integers(0, 2),
       st.booleans())
def test_chunk_gates_are_substring_tests(piece: bytes, layout: int, wordy: bool) -> None:
    """``has`` and ``letters_have`` on a chunk-sized text (their letters, trigram and skeleton stages) answer
    exactly ``lit in text``."""
    filler = ((b"{'loss': 0.5, 'grad_norm': nan}\r 10%|\xe2\x96\x88 | 5/50 [00:01<00:02, 1.3it/s]" if wordy
               else b"0 1\t\xe2\x96\x88 ") * 9000)[:300_000]
    text = (piece + filler, filler + piece, piece * (1 + 70_000 // len(piece)))[layout]
    assert len(text) >= text_metrics.SMALL_TEXT
    letters = text_metrics.chunk_letters(text)
    for lit in _GATES + _WORDS:
        assert text_metrics.has(text, lit) == (lit in text), lit
        lt = lit.translate(None, text_metrics.NON_LETTERS)
        assert text_metrics.letters_have(letters, lt) == (lt in letters), lt


_JSON_WORDS = [b'{"', b'{"loss": 1.5}', b'{"step": 3, "loss": 2}', b" ", b"\t", b"\n", b"\r", b"}", b"x", b'"', b"{"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_JSON_WORDS), max_size=60).map(b"".join))
def test_json_line_matches_from_their_lead(text: bytes) -> None:
    body = text_formats._JSON_LINE_BODY
    old = [(m.start(), m.end(), m[1]) for m in text_formats.line_matches(body, text)]
    assert [(m.start(), m.end(), m[1]) for m in text_formats.line_matches(body, text, b'{"')] == old


_BAR_WORDS = [b"|", b" 12/50 [", b"| 3/7 [", b"|  99999999999999999999/5 [", b"| 123456789012345678/50 [", b"x", b"\r",
              b"\n", b"|7/7[", b"| 5/50  [", b"{", b"  ", b"| 0/50 [", b"100%|##| 50/50 [", b"|" + b" " * 40 + b"5/50 [",
              b"| 5/050 [", b"/", b"[", b"5", b"50", b"\t", b"| 7/50 [00:01<00:02, 1.3it/s]", b"| 12345678901234567/50 ["]


def _one_window(text: bytes, lo: int, hi: int, total: bytes) -> tuple[int | None, bytes | None]:
    """The bar counter of a window as the per-window code read it: an anchored match at its last "|", else
    (no bar there, or one of another total) the full regex (which also gives the window its total)."""
    from autopsy.ingest.text_dicts import _BAR_AT, _bar_last_for

    p = text.rfind(b"|", lo, hi)
    if p < 0:
        return None, None
    m = _BAR_AT.match(text, p, hi)
    if m is not None and m[2] == total:
        return int(m[1]), None
    bm = _bar_last_for(total).match(text, lo, hi)
    return (int(bm[1]), total) if bm is not None and len(bm[1]) <= 18 else (None, None)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_BAR_WORDS), min_size=1, max_size=50).map(b"".join),
       st.lists(st.integers(0, 10_000), min_size=2, max_size=20), st.sampled_from([b"50", b"7", b"5", b"050"]))
def test_window_bars_read_in_numpy_passes(text: bytes, cuts: list[int], total: bytes) -> None:
    import numpy as np

    from autopsy.ingest import text_dicts

    cuts = sorted(c % (len(text) + 1) for c in cuts)
    lo, hi = np.array(cuts[0:-1:2], dtype=np.int64), np.array(cuts[1::2], dtype=np.int64)
    cnt, has, tots = text_dicts._window_bars_known(text, lo, hi, total, np.full(len(lo), -1, dtype=np.int64),
                                                   np.zeros(len(lo), dtype=bool), [None] * len(lo))
    want = [_one_window(text, a, b, total) for a, b in zip(lo.tolist(), hi.tolist())]
    assert [c if h else None for c, h in zip(cnt.tolist(), has.tolist())] == [w for w, _ in want]
    assert tots == [t for _, t in want]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"[", b"epoch", b"step", b"batch", b"ba", b"sample", b"token", b"=", b"]", b"t", b" "]),
                max_size=30).map(b"".join))
def test_header_hints_are_the_old_gate(text: bytes) -> None:
    assert any(h in text for h in text_formats._HEADER_HINTS) == (OLD_HEADER_GATE.search(text) is not None)

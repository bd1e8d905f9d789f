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
    starts = sorted({text.rfind(b"\n", 0, m.start()) + 1 for m in ranks._TAG_ANY.finditer(text)})
    assert _spans(finditer_at(ranks._LINE_RANK, text, starts)) == _spans(ranks._LINE_RANK.finditer(text))
    cand = sorted(literal_positions(text, (b"Epoch", b"Iter")))
    assert _spans(finditer_at(text_metrics._MMCV, text, cand)) == _spans(text_metrics._MMCV.finditer(text))


def test_literal_positions_finds_every_occurrence() -> None:
    assert sorted(literal_positions(b"EpochIterEpoch", (b"Epoch", b"Iter"))) == [0, 5, 9]
    assert literal_positions(b"", (b"x",)) == []

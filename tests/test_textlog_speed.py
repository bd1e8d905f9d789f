"""The shortcuts of the text-log speed work (issue 15) change nothing that is read.

Each shortcut skips work only where the skipped work provably finds nothing; these tests run the
shortcut and the full path side by side on random texts made of the pieces that matter (tqdm
redraws, postfixes, brackets, ``=``, line breaks) and on states of the scanners that a skipped
line could move.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from autopsy.ingest import text_formats
from autopsy.ingest.text_facts import FILLER_LINE, FactScanner
from autopsy.ingest.text_metrics import Collector, StepMarks, StepState, Used

_BAR_WORDS = [b"  5%|", b"100%|", b"%|", b"|", b"\xe2\x96\x88", b"\xe2\x96\x8f", b"#", b" ", b" 5/10 [", b"12/400 [",
              b"00:01<00:09", b", ", b"1.30it/s", b"]", b"[", b"=", b"loss=1.5", b"lr=2e-5", b", loss=nan",
              b"global_step=3", b"Epoch 0: ", b"Train step of epoch 0: ", b"\r", b"\n", b"[Rank 0] step=5",
              b"requires_grad=True", b"a", b"v_num=0"]
bar_texts = st.lists(st.sampled_from(_BAR_WORDS), max_size=50).map(b"".join)


def _postfix_points(text: bytes) -> tuple:
    out, st_, steps, used = Collector(), StepState(), StepMarks(), Used()
    text_formats.parse_tqdm_postfix(text, 1, st_, out, steps, used)
    out.flush()
    frame = out.point_frame()
    rows = [] if frame is None else frame.astype(str).values.tolist()
    return rows, st_.last_step, steps.arrays()[0].tolist() if steps else []


@settings(max_examples=500, deadline=None)
@given(bar_texts)
def test_postfix_gate_skips_only_chunks_without_pairs(text: bytes) -> None:
    if not text_formats._postfix_may_hold_pairs(text):
        assert not any(b"=" in post for *_, post in text_formats._bars(text))


@settings(max_examples=300, deadline=None)
@given(bar_texts)
def test_postfix_parse_is_the_same_with_and_without_the_gate(text: bytes) -> None:
    gated = _postfix_points(text)
    real = text_formats._postfix_may_hold_pairs
    text_formats._postfix_may_hold_pairs = lambda t: True
    try:
        assert _postfix_points(text) == gated
    finally:
        text_formats._postfix_may_hold_pairs = real


_FILLER_PARTS = st.tuples(
    st.sampled_from([b"", b" ", b"  ", b"\t"]), st.integers(0, 100),
    st.lists(st.sampled_from([b" ", b"#", b"7", b"\xe2\x96\x88", b"\xe2\x96\x8f", b"\xe2\x96\x8c"]), max_size=12),
    st.integers(0, 10 ** 7), st.integers(1, 10 ** 7),
    st.sampled_from([b"[00:01<00:09, 1.30it/s]", b"[1:02:03<?, ?it/s]", b"[00:00<00:00, 11.41s/it]", b"[00:00]",
                     b"[0:00:01<95:46:57,  1.33it/s]"]))


def _filler(parts: tuple) -> bytes:
    lead, pct, bar, n, total, rate = parts
    return lead + b"%d%%|" % pct + b"".join(bar) + b"| %d/%d " % (n, total) + rate


def _scanners() -> list[FactScanner]:
    """Scanners in each state a line can move: inside a pip list, a GPU table near its end, a REPL
    question, a LoraConfig( block, a from_pretrained( awaiting its id, a pasted JSON config."""
    made = []
    for feed in ([], ["Package    Version", "-------    -------", "torch      2.1.0"],
                 ["GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)", "", "", "", "", ""],
                 [">>> torch.__version__"], ["LoraConfig("], ["model = AutoModel.from_pretrained("],
                 ['"fp16": {'], ["# Name    Version   Build  Channel"]):
        got: list = []
        sc = FactScanner(lambda *a, got=got: got.append(a))
        for i, line in enumerate(feed, 1):
            sc.line(i, line)
        made.append((sc, got))
    return made


def _state(sc: FactScanner) -> dict:
    env = {k: v for k, v in vars(sc.env).items() if k != "emit"}
    return {**{k: v for k, v in vars(sc).items() if k not in ("emit", "env")}, "env": env}


@settings(max_examples=300, deadline=None)
@given(_FILLER_PARTS)
def test_filler_line_is_what_the_fact_scanner_does_with_it(parts: tuple) -> None:
    raw = _filler(parts)
    assert FILLER_LINE.fullmatch(raw)
    for sc, got in _scanners():
        twin, twin_got = copy.deepcopy(sc), []
        twin.emit = twin.env.emit = lambda *a, _got=twin_got: _got.append(a)
        before = len(got)
        sc.line(9, raw.decode())
        twin.filler()
        assert got[before:] == twin_got == []
        assert _state(sc) == _state(twin)


def test_filler_line_is_only_a_bare_redraw() -> None:
    for text in (b"Training:  5%|# | 5/10 [00:01<00:09, 1.30it/s]", b" 5%|# | 5/10 [00:01<00:09, 1.30it/s, loss=2]",
                 b" 5%|# | 5/10 [00:01<00:09, 1.30it/s] lr=2", b"> 5%|# | 5/10 [00:01]", b"5it [00:01, 3.2it/s]"):
        assert FILLER_LINE.fullmatch(text) is None


_HEAD_LINES = [b"  5%|\xe2\x96\x88    | 5/100 [00:01<00:19, 4.80it/s]", b"100%|##########| 9/9 [00:00<00:00, 11.41it/s]",
               b"Package    Version", b"---------- -------", b"torch      2.1.0", b"# Name    Version   Build  Channel",
               b"GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)", b"GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-2)",
               b">>> torch.__version__", b"'2.1.0'", b"fp16=True, learning_rate=2e-05", b"--bf16 --lr 3e-4", b"",
               b"  learning_rate = 2e-05", b"{'loss': 1.5, 'learning_rate': 2e-05, 'epoch': 0.1}",
               b"Training:  5%|# | 5/10 [00:01<00:09, 1.30it/s, loss=2.1]", b"transformers version: 4.46.0", b"   "]
head_texts = st.lists(st.tuples(st.sampled_from(_HEAD_LINES), st.sampled_from([b"\n", b"\r", b"\r\n"])),
                      max_size=40).map(lambda parts: b"".join(a + b for a, b in parts))


def _facts_of(text: bytes, at_once: bool) -> list:
    """Facts the reader finds in one block: through its at-once path, or line by line with every hinted line
    decoded and scanned (the reader before the speed work: no filler shortcut)."""
    from pathlib import Path

    from autopsy.ingest import textlog
    from autopsy.ingest.base import RunBuilder
    from autopsy.ingest.text_dicts import parse_dicts
    from autopsy.ingest.text_metrics import Lines, line_end, line_start
    from autopsy.ingest.text_stream import Chunk

    got: list = []
    reader = textlog._TextLogReader("x.log", RunBuilder(Path(".")))
    reader.facts = FactScanner(lambda *a: got.append(a))
    used = Used()
    parse_dicts(text, 1, StepState(), Collector(), StepMarks(), used)
    if at_once:
        reader._facts(Chunk(text, 1), used)
    else:
        lines, done_to = Lines(text, 1), -1
        for m in textlog._FACT_HINT.finditer(text):
            if m.start() < done_to:
                continue
            ls = line_start(text, m.start())
            done_to = line_end(text, m.start())
            if not used.covers(ls, done_to):
                reader.facts.line(lines.at(ls), text[ls:min(done_to, ls + textlog.LINE_CAP)].decode("utf-8", "replace"))
    reader.facts.finish()
    return got


@settings(max_examples=300, deadline=None)
@given(head_texts)
def test_fact_scan_at_once_is_the_line_by_line_scan(text: bytes) -> None:
    assert _facts_of(text, True) == _facts_of(text, False)


_EVENT_WORDS = [b"Traceback (most recent call last):", b"RuntimeError: boom", b"WARNING", b"Warn", b"overflow", b"OVERFLOW!",
                b"contains NaN", b"exitcode", b"{'loss': 1.5}", b"  5%|# | 5/10 [00:01<00:09, 1.30it/s]", b"step 3",
                b"Epoch", b"\n", b"\r", b" ", b"a", b"A", b"File \"x.py\"", b"Error", b"error", b"found nan"]
event_texts = st.lists(st.sampled_from(_EVENT_WORDS), max_size=60).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(event_texts, st.booleans())
def test_first_triggers_are_the_first_match_of_each_line(text: bytes, whole_scan: bool) -> None:
    from autopsy.ingest import events
    from autopsy.ingest.text_metrics import line_end

    trigger, present = events.chunk_triggers(text)
    if trigger is None:
        assert events.chunk_trigger_re(text) is None
        return
    want, done_to = [], -1
    for m in trigger.finditer(text):  # the reader's loop before: skip the rest of a line after a match
        if m.start() < done_to:
            continue
        done_to = line_end(text, m.start())
        want.append(m.span())
    limit = events.MAX_TRIGGER_LINES
    events.MAX_TRIGGER_LINES = 0 if whole_scan else limit
    try:
        assert [m.span() for m in events.first_triggers(text, trigger, present)] == want
    finally:
        events.MAX_TRIGGER_LINES = limit


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 200)),
                          st.tuples(st.just("block"), st.lists(st.integers(0, 200), max_size=20)),
                          st.tuples(st.just("ask"), st.tuples(st.integers(0, 200), st.integers(0, 40)))), max_size=80))
def test_used_answers_as_a_set_of_offsets(ops: list) -> None:
    import numpy as np

    from autopsy.ingest import text_metrics

    side = text_metrics.USED_SIDE
    text_metrics.USED_SIDE = 3  # merge often, so both halves of the index are exercised
    try:
        used, seen = Used(), set()
        for op, arg in ops:
            if op == "add":
                used.add(arg)
                seen.add(arg)
            elif op == "block":
                used.add_block(np.array(arg, dtype=np.int64))
                seen.update(arg)
            else:
                start, width = arg
                assert used.covers(start, start + width) == any(start <= p < start + width for p in seen)
        starts = np.arange(0, 200, 7, dtype=np.int64)
        assert used.covers_all(starts, starts + 5).tolist() == [any(s <= p < s + 5 for p in seen) for s in starts]
    finally:
        text_metrics.USED_SIDE = side


_HINT_WORDS = [b"1", b".", b"2.5", b":", b" ", b": ", b"-", b"--", b"=", b"NVIDIA", b"Tesla", b"GeForce", b"Quadro",
               b"version", b"vers", b"a", b"\n", b"\r", b"9."]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_HINT_WORDS), max_size=40).map(b"".join))
def test_hint_offsets_mark_the_lines_the_hint_regex_marks(text: bytes) -> None:
    import numpy as np

    from autopsy.ingest import textlog
    from autopsy.ingest.text_metrics import line_spans

    old = np.array([m.start() for m in textlog._FACT_HINT.finditer(text)], dtype=np.int64)
    new = textlog._hint_offsets(text)
    assert [a.tolist() for a in line_spans(text, new)] == [a.tolist() for a in line_spans(text, old)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"\n", b"\r", b"bb"]), max_size=30).map(b"".join),
       st.lists(st.sampled_from([b"x", b"\n", b"\r\n"]), max_size=30).map(b"".join))
def test_line_numbers_from_the_shared_index_are_counts_of_line_breaks(a: bytes, b: bytes) -> None:
    from autopsy.ingest.text_metrics import Lines, forget_newlines

    for text in (a, b, a):  # the index of one text never answers for another
        lines = Lines(text, 7)
        for pos in range(len(text) + 1):
            assert lines.at(pos) == 7 + text.count(b"\n", 0, pos)
    forget_newlines()


def _naive_start(text: bytes, pos: int) -> int:
    return max(text.rfind(b"\n", 0, pos), text.rfind(b"\r", 0, pos)) + 1


def _naive_end(text: bytes, pos: int) -> int:
    ends = [i for i in (text.find(b"\n", pos), text.find(b"\r", pos)) if i >= 0]
    return min(ends) if ends else len(text)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([b"step 3 | loss 1.5", b"\n", b"\r", b"\r\n", b"x" * 5000, b"", b"a b"]),
                min_size=1, max_size=60), st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_line_bounds_from_the_break_index_equal_the_searches(parts, fracs):
    from autopsy.ingest.text_metrics import SMALL_TEXT, line_end, line_start

    unit = b"".join(parts) or b"a b"
    text = unit * (SMALL_TEXT // len(unit) + 1)  # past SMALL_TEXT: the indexed path
    assert len(text) >= SMALL_TEXT
    for f in fracs:
        pos = min(int(f * len(text)), len(text))
        assert line_start(text, pos) == _naive_start(text, pos)
        assert line_end(text, pos) == _naive_end(text, pos)


#: lines of many formats beside HF dicts: the hints of the line parsers ('loss', 'epoch', 'step', 'Epoch', 'iter') sit in
#: dict lines and in free lines alike
_GATE_LINES = [b"{'loss': 1.5, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.1}",
               b"{'eval_loss': 1.4, 'eval_runtime': 1.0, 'epoch': 0.2}", b"  5%|# | 5/100 [00:01<00:19, 4.80it/s]",
               b"step 3 | loss 1.25 | lr 1e-4", b"Epoch 1/10 loss: 0.5", b"| epoch 001 | loss 4.5 | ppl 22.6",
               b"iter 20: loss 2.0000, time 10.0ms", b"Loss at step 30: 0.75", b"train_loss = 0.42",
               b'{"step": 40, "loss": 0.3}', b"[50/100] loss=0.2 acc=0.9", b"| 200/ 1106 batches | loss  4.02 |",
               b"Test set: Average loss: 0.0390, Accuracy: 9870/10000", b"valloss 0.9", b"tensor(0.5)", b""]
gate_texts = st.lists(st.tuples(st.sampled_from(_GATE_LINES), st.sampled_from([b"\n", b"\r", b"\r\n"])),
                      max_size=40).map(lambda parts: b"".join(a + b for a, b in parts))


def _read(text: bytes, tmp: object) -> tuple:
    from pathlib import Path

    from autopsy.discover import Found
    from autopsy.ingest.base import RunBuilder
    from autopsy.ingest.textlog import read_text_log

    p = Path(str(tmp)) / "gate.log"
    p.write_bytes(text)
    b = RunBuilder(p.parent)
    read_text_log(Found(p, "text_log", len(text)), b)
    run = b.finish()
    rows = run.scalars.astype(str).values.tolist()
    return sorted(rows), sorted((e.kind, e.line, e.step) for e in run.events)


@settings(max_examples=200, deadline=None)
@given(gate_texts)
def test_parsers_gated_on_the_free_lines_read_what_the_chunk_gate_reads(text: bytes) -> None:
    # the line parsers' hints are looked for in the letters of the lines the dict records left free; with the whole
    # chunk's letters (the gate before) every parser runs that could, and the result must be the same
    import tempfile

    from autopsy.ingest import textlog

    with tempfile.TemporaryDirectory() as tmp:
        gated = _read(text, tmp)
        real = textlog.unused_letters
        textlog.unused_letters = lambda text, used: None
        try:
            assert _read(text, tmp) == gated
        finally:
            textlog.unused_letters = real


def test_a_chunk_of_dicts_and_bars_runs_no_loss_hinted_line_parser(tmp_path, monkeypatch) -> None:
    # 'loss' is in every dict line and nowhere else: the loose parsers gated on it are not called
    from autopsy.ingest import textlog

    called = []
    parsers = [(lambda *a, _n=p.__name__: called.append(_n), hints) if b"oss" in hints else (p, hints)
               for p, hints in textlog._ALL_PARSERS]
    monkeypatch.setattr(textlog, "_ALL_PARSERS", parsers)
    lines = b"".join(b"  5%%|# | %d/100 [00:01<00:19, 4.80it/s]\r{'loss': 1.5, 'epoch': 0.1}\n" % i for i in range(50))
    _read(lines, tmp_path)
    assert called == []
    _read(lines + b"Loss at step 30: 0.75\n", tmp_path)  # a free line with the hint: they run
    assert called

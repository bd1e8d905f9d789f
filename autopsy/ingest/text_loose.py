"""Loose metric lines: what a hand-written loop or an end-of-run summary prints, with no framework layout.

Two parsers with the signature of :data:`autopsy.ingest.text_metrics.PARSERS`, run after every
framework parser so they only see lines nobody claimed:

- HF Trainer's ``log_metrics`` block (``trainer_pt_utils.log_metrics``), printed by every example
  script at the end of training and evaluation::

      ***** eval metrics *****
        epoch                   =     3.0
        eval_loss               =     nan

  Values are formatted by ``metrics_format`` (``4MB`` memory deltas, ``0:01:12.18`` runtimes, ``1GF``
  flos): only plain numbers are kept, at the step in force (the end of the run), or 0 when the block
  is all there is.
- Counterless loss lines of hand-written loops (``2018-03-23 15:29:33,355:INFO: train loss:1.10886``,
  ``Loss = 0.53``, ``epoch 3 train_loss: 0.41 val_loss: 0.52``): a loss-like ``key: number`` with no
  step counter on the line. To keep prose out, a layout must repeat (the same text around the key,
  digits aside) on at least :data:`MIN_LOOSE_LINES` lines of a chunk; its points are numbered in order
  after the last step seen (the steps are then marked inferred, as for HF dicts without a bar).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import defaultdict
from typing import Any

import numpy as np

from autopsy.ingest.text_metrics import (
    NUM,
    Collector,
    Lines,
    StepMarks,
    StepState,
    Used,
    epoch_local_step,
    finditer_at,
    has,
    is_loss_like,
    line_end,
    line_start,
    line_starts,
)

# -- HF log_metrics block --------------------------------------------------------------------------

_BLOCK_HEAD = re.compile(rb"\*{5} (\w{1,40}) metrics \*{5}[ \t]*\r?\n")
_BLOCK_ROW = re.compile(rb"[ \t]+([A-Za-z_][\w/.-]{0,80})[ \t]*=[ \t]*([^\r\n]{0,80}?)[ \t]*(?:\r?\n|\Z)")
_FULL_NUM = re.compile(NUM + rb"\Z")
#: formatted or bookkeeping values of the block: not training signals
_BLOCK_SKIP = re.compile(r"_runtime$|_per_second$|_mem_|^total_flos$|^epoch$|_samples$|^num_|_gen_len$")


def parse_hf_metrics_block(text: bytes, first_line: int, st: StepState, out: Collector,
                           steps: StepMarks, used: Used) -> None:
    if not has(text, b"metrics *****"):
        return
    lines = Lines(text, first_line)
    for m in _BLOCK_HEAD.finditer(text):
        step = st.last_step if st.last_step is not None else 0
        pos = m.end()
        while True:
            row = _BLOCK_ROW.match(text, pos)
            if row is None:
                break
            key, raw = row[1].decode(), row[2]
            if _FULL_NUM.match(raw) and not _BLOCK_SKIP.search(key):
                out.add(step, key, float(raw), lines.at(row.start()))
            used.add(row.start())
            pos = row.end()
        used.add(m.start())
        st.frameworks.add("hf_trainer")


# -- counterless loss lines ------------------------------------------------------------------------

#: a loss-like key and its value: ``train loss:1.1``, ``Loss = 0.53``, ``val_loss 0.5`` (a separator or
#: one space), ``loss: nan``; TensorFlow-era scripts call the loss ``cost`` (``Epoch: 542 cost= 69.79``), read
#: only with a separator (``cost 5`` is prose)
_LOSS_PAIR = re.compile(
    rb"(?<![\w/.-])(?:((?:(?:train|training|val|valid|validation|eval|test|total|avg|mean|batch)[ _]|"
    # a term's own loss (a GAN's g_loss / d_fake_loss, convmesh: "g_loss nan d_fake_loss 0.00000")
    rb"(?:(?!(?i:best|min|lowest|prev|previous|init|initial|target|expected)_)[A-Za-z][A-Za-z0-9]{0,11}_){1,3})?[Ll]oss"
    # one model's loss named by a capital suffix (faceswap's "loss_A: 0.19750, loss_B: 0.15107", a GAN's loss_G / loss_D)
    rb"(?:_[A-Z][A-Za-z0-9]{0,7})?(?:[ \t](?:value|error))?|LOSS|"
    rb"(?:[Tt]rain|[Tt]raining|[Vv]al|[Vv]alid|[Tt]est|[Tt]otal|[Aa]vg)[ _][Ll]oss)[ \t]*(?:[:=][ \t]*|[ \t])"
    rb"|((?:(?:train|training|val|valid|validation|test|avg|mean)[ _])?[Cc]ost|COST|(?:[Tt]rain|[Vv]al|[Tt]est|[Aa]vg)"
    rb"[ _][Cc]ost)[ \t]*[:=][ \t]*)(" + NUM + rb")(?![\w.])")
#: the literal core of a loss pair: ``oss`` (``ost`` of ``cost``) then a separator and a value's first character (one
#: regex per case: an alternation at the start would make the engine try every byte)
_LOSS_CORES = tuple(re.compile(w + rb"(?:_[A-Z][A-Za-z0-9]{0,7})?(?:[ \t](?:value|error))?[ \t]*(?:[:=]|[ \t][-+.\dnNiI])")
                    for w in (b"oss", b"OSS"))
_COST_WORDS = (b"cost", b"Cost", b"COST")
_COST_CORES = tuple((w, re.compile(w + rb"[ \t]*[:=]")) for w in _COST_WORDS)
#: a counter on a line the step parsers left alone (``Epoch 0/1 | Batch 100/15582 | Train Loss nan``): the step
#: (also a Chinese loop's counter word, before an ASCII or a full-width colon: ``训练次数：100, Loss：1.98``, "times
#: trained"; 步数 / 训练步数 "steps", 迭代次数 "iterations", 全局步数 "global steps")
_COUNTER = re.compile(rb"(?:\b([Ss]tep|STEP|[Ii]ter|ITER|[Ii]teration|global_step|[Bb]atch|BATCH)\b|("
                      + "|".join(("训练次数", "训练步数", "迭代次数", "全局步数", "步数")).encode()
                      + rb"))\s*(?:[:=#]|\xef\xbc\x9a)?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?")
#: a bare counter opening a line before a bracketed group: eriklindernoren Keras-GAN / ML-From-Scratch
#: ``print("%d [D loss: %f, acc.: %.2f%%] [G loss: %f]" % (epoch, ...))``
_LEADING_NUMBER = re.compile(rb"[ \t]*(\d+) \[")
#: a line that opens with its epoch and has no finer counter (DGL/PyG examples ``Epoch 00002 | Loss nan | ...``,
#: ``Epoch: 003, Loss: nan``): one line per epoch, the epoch is its step (used only while the numbers increase)
_LEADING_EPOCH = re.compile(rb"[ \t]*(?:\[[^\]\r\n]{1,40}\][ \t]*)?(?:[Ee]poch|EPOCH)\b[ \t]*[:=#]?[ \t]*(\d+)\b(?![/.])")
#: a tqdm bar after the pair: ``  71%|#####   | 417/586 [47:52<27:15,  9.68s/it]``
_BAR = re.compile(rb"\d{1,3}%\|[^|\r\n]{0,400}\|\s*(\d+)/(?:\d+|\?)\s*\[")
_EPOCH = re.compile(rb"\b(?:[Ee]poch|EPOCH)\b\s*[:=#]?\s*\[?\s*(\d+)")
_OTHER_PAIRS = re.compile(
    rb"(?<![\w/.-])((?i:lr|learning[_ ]rate|grad[_ ]norm|gnorm))[ \t]*(?:[:=][ \t]*|[ \t])(" + NUM + rb")(?![\w.])")
#: the values in a line's layout: digits and the non-finite words a value may be printed as (``nan``, ``-inf``), so
#: a line whose loss went NaN keeps the layout of the lines before it
_LAYOUT_VALUES = re.compile(rb"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|(?<![A-Za-z])-?(?:nan|NaN|NAN|inf|Inf|INF)(?![A-Za-z])")
#: the other loss terms on such a line (``tem_loss: 1.18, pem class_loss: nan``): ``<name>_loss`` keys
_TERM_PAIRS = re.compile(rb"(?<![\w/.-])([A-Za-z][A-Za-z0-9_]{0,30}_loss)[ \t]*[:=][ \t]*(" + NUM + rb")(?![\w.])")
#: a line opening with its counter, after an optional timestamp or ``[INFO]``-style prefix in brackets
_LEADING_COUNTER = re.compile(rb"[ \t]*(?:\[[^\]\r\n]{1,40}\][ \t]*)?(?:[Ee]poch|EPOCH|[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER)"
                              rb"\b[ \t]*[:=#]?[ \t]*\[?[ \t]*\d+|[ \t]*\[[ \t]*\d+[ \t]*/[ \t]*\d+[ \t]*\]")
#: a bare bracketed ``[done/total]`` opening a line (NVIDIA retinanet-examples ``[   18/50000] focal loss: 1.124, box
#: loss: 0.475, ... lr: 5.8e-05``): the iteration
_LEADING_FRACTION = re.compile(rb"[ \t]*\[[ \t]*(\d+)[ \t]*/[ \t]*\d+[ \t]*\]")
#: a loss pair with an explicit separator (``loss: nan``, ``Loss = 0.5``; not ``loss 0.5``)
_SEP_PAIR = re.compile(rb"[\w ]{1,40}?[ \t]*[:=]")
#: lines of one layout needed before they are read (fewer is prose that mentions a loss)
MIN_LOOSE_LINES = 3
#: a logger's timestamp (``18:11:38``) in the text before a loss pair, within this many bytes of the line start
_LOG_TIME = re.compile(rb"\b\d\d:\d\d:\d\d\b")
MAX_LOGGER_PREFIX = 120
#: a metric line is short; a longer one is prose or a dump
MAX_LOOSE_LINE = 400
_EVAL_WORDS = ("val", "valid", "validation", "eval", "test")


#: the word right before a bare ``loss`` key (``D loss: 0.04``, ``Discriminator  Loss:  11.2``): a model or term the
#: loss belongs to, unless it is one of :data:`_NEUTRAL_WORDS`
_WORD_BEFORE = re.compile(rb"(?<![\w.\-/])([A-Za-z][A-Za-z0-9]{0,30})[ \t]{1,3}\Z")
#: words before ``loss`` that do not make it another loss (the run's loss said with an article, an average, a level)
_NEUTRAL_WORDS = {"train", "training", "total", "avg", "average", "mean", "batch", "epoch", "running", "current",
                  "cur", "step", "iter", "iteration", "the", "a", "an", "overall", "global", "smoothed", "and", "of",
                  "with", "new", "is", "info", "debug", "warning", "warn", "error", "loss", "model", "final", "my"}


def _pair_key(line: bytes, m: re.Match[bytes]) -> str:
    """The key of one ``_LOSS_PAIR`` match: ``_loose_key``, or ``<word>_loss`` when a bare loss is another model's or
    term's (Keras-GAN's ``[D loss: 0.04, acc: 96.88%] [G loss: 5.39]`` holds two losses, not one)."""
    raw = _raw_key(m)
    key = _loose_key(raw.decode())
    if raw.lower() in (b"loss", b"cost"):
        w = _WORD_BEFORE.search(line, 0, m.start())
        if w is not None and w[1].lower().decode() not in _NEUTRAL_WORDS:
            word = w[1].decode()  # ``G loss``: the generator's; ``time cost: 0.3s``: not a loss at all
            return "eval_loss" if word.lower() in _EVAL_WORDS else f"{word}_{raw.lower().decode()}"
    return key


def _raw_key(m: re.Match[bytes]) -> bytes:
    """The key a ``_LOSS_PAIR`` match read: its loss form (group 1) or its cost form (group 2)."""
    return m[1] if m[1] is not None else m[2]


def _loose_key(raw: str) -> str:
    k = raw.lower().replace(" ", "_")
    first, _, rest = k.partition("_")
    if first in _EVAL_WORDS:
        # a held-out loss; another held-out metric keeps its name (``valid ppl`` is eval_ppl, not the loss)
        return "eval_loss" if not rest or "loss" in rest or rest == "cost" else f"eval_{rest}"
    if k in ("loss", "train_loss", "training_loss", "total_loss", "batch_loss", "loss_value", "loss_error"):
        return "loss"
    return k  # avg_loss, mean_loss: kept under their own name


def _candidate_lines(text: bytes, cores: Any, used: Used) -> Any:
    """(start, end) of each line holding a core match, once per line, short enough to be a metric line
    (``MAX_LOOSE_LINE``) and not read by another parser."""
    seen: set[int] = set()
    for c in cores:
        ls = line_start(text, c.start())
        if ls in seen:
            continue
        seen.add(ls)
        le = line_end(text, c.end())
        if le - ls <= MAX_LOOSE_LINE and not used.covers(ls, le):
            yield ls, le


def parse_loose_loss(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    cost = [rx for lit, rx in _COST_CORES if has(text, lit)]
    if not has(text, b"oss") and not has(text, b"OSS") and not cost:
        return
    groups: dict[bytes, list[tuple[int, int, list[tuple[str, float]], int | None]]] = defaultdict(list)
    bar_rows: list[tuple[int, int, list[tuple[str, float]], int]] = []
    # the pair regex opens with a lookbehind the engine cannot skip through: find its literal core first (HF dict
    # keys, ``'loss':``, are not candidates), then read the candidate's line alone
    cores = ([c for rx in _LOSS_CORES for c in rx.finditer(text)] if has(text, b"OSS")
             else list(_LOSS_CORES[0].finditer(text)))
    for rx in cost:
        cores.extend(rx.finditer(text))
    cores.sort(key=lambda c: c.start())
    for ls, le in _candidate_lines(text, cores, used):
        line = text[ls:le]
        m = _LOSS_PAIR.search(line)
        if m is None:
            continue
        pairs = [(_pair_key(line, p), float(p[3])) for p in _LOSS_PAIR.finditer(line)]
        pairs += [(k.decode().lower().replace(" ", "_"), float(v)) for k, v in _OTHER_PAIRS.findall(line)]
        named = {k for k, _ in pairs}
        pairs += [(k.decode(), float(v)) for k, v in _TERM_PAIRS.findall(line) if _loose_key(k.decode()) not in named]
        bar = _BAR.search(line, m.end()) if b"|" not in line[:m.start()] else None  # not a framework's own bar line
        if bar is not None:  # a tqdm description (``loss: -8.48 | acc: 0.22:  71%|###| 417/586 [...]``): its counter
            bar_rows.append((ls, ls + m.start(), pairs, int(bar[1])))
            continue
        layout = _LAYOUT_VALUES.sub(b"#", line[:m.start()]) + _raw_key(m)
        at = _counter_step(line)
        groups[layout].append((ls, ls + m.start(), pairs, at if at is not None else _header_epoch(text, ls)))
    lines = Lines(text, first_line)
    for ls, pos, pairs, at in bar_rows:  # a bar is structure enough: one line is a point
        for key, value in pairs:
            out.add(at, key, value, lines.at(pos))
        steps.append((ls, at))
        used.add(ls)
        st.last_step = at
    rows = sorted(r for g in groups.values()
                  if len(g) >= MIN_LOOSE_LINES or all(_counter_led(text, r) or _bare_nonfinite(text, r) for r in g)
                  or (len(g) >= 2 and all(_under_header(text, r) for r in g))
                  for r in g)
    if not rows:
        return
    step = st.last_step if st.last_step is not None else 0
    # counters that grow; lines of different keys may share one (a train and a val line under one epoch header)
    counted = all(r[3] is not None for r in rows) and all(
        a[3] < b[3] or (a[3] == b[3] and not {k for k, _ in a[2]} & {k for k, _ in b[2]}) for a, b in zip(rows, rows[1:]))
    held_at = _held_out_steps(text, rows, steps) if not counted else {}
    for ls, pos, pairs, at in rows:
        held = held_at.get(ls)
        if held is None:
            step = at if counted else step + 1
        line = lines.at(pos)
        for key, value in pairs:
            out.add(held if held is not None else step, key, value, line)
            if key in ("lr", "learning_rate"):
                out.metric_override[key] = "learning_rate"
            elif key in ("grad_norm", "gnorm"):
                out.metric_override[key] = "grad_norm"
        steps.append((ls, held if held is not None else step))
        used.add(ls)
    st.last_step = step
    st.inferred = st.inferred or not counted


def _held_out_steps(text: bytes, rows: list, steps: StepMarks) -> dict[int, int]:
    """Step-less held-out lines right under another format's records (``Step: 0, Train_loss: nan`` then ``--->
    Validation_loss: nan``) take the step of the record above them, not one after the chunk's last record: only when
    every loose row is such a line, each within CONTINUATION_LINES of its own record (else {}: numbered as before)."""
    if not steps or not all(all(k.startswith("eval_") for k, _ in r[2]) for r in rows):
        return {}
    pos, step = steps.arrays()
    out: dict[int, int] = {}
    for ls, *_ in rows:
        i = int(np.searchsorted(pos, ls)) - 1
        if i < 0 or text.count(b"\n", int(pos[i]), ls) > CONTINUATION_LINES:
            return {}
        out[ls] = int(step[i])
    return out if len(set(out.values())) == len(out) else {}


#: an epoch header on a line of its own (the PyTorch transfer-learning tutorial's ``print(f'Epoch {epoch}/{num_epochs -
#: 1}')`` then a ``-`` rule, Keras' ``Epoch 3/12``)
_EPOCH_HEADER = re.compile(rb"[ \t]*(?:[Ee]poch|EPOCH)[ \t]*:?[ \t]*(\d+)[ \t]*/[ \t]*\d+[ \t]*\r?\Z")
#: lines between a loss line and its epoch header (the header, a rule, the train line before a val line)
HEADER_REACH = 3


def _header_epoch(text: bytes, ls: int) -> int | None:
    """The epoch of the nearest ``Epoch N/M`` header line at most ``HEADER_REACH`` lines above the line at ``ls`` (the
    lines between, a rule, a blank or the train line above a val line, count toward that reach)."""
    end = ls - 1
    for _ in range(HEADER_REACH):
        if end < 0:
            return None
        start = text.rfind(b"\n", 0, end) + 1
        line = text[start:end]
        h = _EPOCH_HEADER.match(line)
        if h is not None:
            return int(h[1])
        end = start - 1
    return None


def _under_header(text: bytes, row: tuple[int, int, list, int | None]) -> bool:
    """A loss line given with ``:``/``=`` under its own ``Epoch N/M`` header: two epochs of the layout are structure
    enough (pytorch/tutorials#227 pasted ``Epoch 0/24`` / ``train Loss: 0.8934 Acc: 0.0000`` / ``val Loss: ...``)."""
    return _SEP_PAIR.match(text, row[1]) is not None and _header_epoch(text, row[0]) is not None


def _counter_led(text: bytes, row: tuple[int, int, list, int | None]) -> bool:
    """A line that opens with its counter and gives the loss with ``:``/``=`` (``Epoch:0, Train loss: nan``,
    ``[2020-01-01 10:00:00] Step 40: loss = 1.2``) is a metric line even alone: prose does not start that way. So is
    a logger's line, a timestamp before the loss (``[INFO 2017-03-02 18:11:38,332 kur.model.executor:175] Validation
    loss: 155.686``, printed once per evaluation)."""
    ls, pos = row[0], row[1]
    if _SEP_PAIR.match(text, pos) is None:
        # space-separated pairs count behind a leading counter when there are several (convmesh#8: "[10] epoch 0,
        # 10/186, g_loss nan d_fake_loss nan d_real_loss nan flat nan")
        return len(row[2]) >= 2 and _LEADING_COUNTER.match(text, ls, pos) is not None
    return _LEADING_COUNTER.match(text, ls, pos) is not None or (
        pos - ls <= MAX_LOGGER_PREFIX and _LOG_TIME.search(text, ls, pos) is not None)


#: a line that is one loss pair and nothing else, its value NaN/inf (``train_loss:  nan``, ``loss = nan``): a print of
#: the loss, not prose or a setting (openvla#49 printed ``train_loss:  nan`` once, after its tensors)
_BARE_NONFINITE = re.compile(rb"[ \t]*(?:[A-Za-z]+[ _])?(?:[Ll]oss|LOSS)[ \t]*[:=][ \t]*[-+]?(?:nan|NaN|NAN|inf|Inf|INF)"
                             rb"[ \t]*\r?$")


#: words of an evaluation's or a best-so-far line
_HELD_OUT_WORDS = re.compile(rb"(?i)\b(?:best|evaluation|dev|" + "|".join(_EVAL_WORDS).encode() + rb")\b")


def _bare_nonfinite(text: bytes, row: tuple[int, int, list, int | None]) -> bool:
    """One alone is evidence: a value that is not finite cannot be a setting's default printed once. ``best_loss: inf``
    (an initial best) is no loss pair (``_LOSS_PAIR`` does not read ``best_``). The line is the pair alone, or a
    progress line with its counter (WaveRNN's ``{| Epoch: 1 (989/1180) | Loss: nan | 2.3 steps/s | Step: 0k | }``)."""
    if all(math.isfinite(v) for _, v in row[2]):
        return False
    line = text[row[0]:line_end(text, row[1])]
    if _BARE_NONFINITE.match(line) is not None:
        return True
    # a ':'/'=' pair, or a line opening with its counter and giving the pair in words (DeepSpeed-Chat's "Epoch 1/1 with
    # loss inf"); not an evaluation's or a best-so-far line ("Best validation at epoch 0: Average loss: inf")
    return ((_SEP_PAIR.match(text, row[1]) is not None or _LEADING_COUNTER.match(text, row[0], row[1]) is not None)
            and _HELD_OUT_WORDS.search(line) is None
            and (_EPOCH.search(line) is not None or _COUNTER.search(line) is not None))


def _counter_step(line: bytes) -> int | None:
    """The step a line's own counter gives: ``Step 300``; ``Epoch 2 | Batch 100/15582`` -> 2 * 15582 + 100."""
    c = _COUNTER.search(line)
    if c is None:
        lead = _LEADING_NUMBER.match(line) or _LEADING_FRACTION.match(line) or _LEADING_EPOCH.match(line)
        return int(lead[1]) if lead is not None else None
    n = int(c[3])
    e = _EPOCH.search(line)
    if c[1] is not None and c[1].lower() in (b"batch", b"iter") and c[4] and e is not None:
        return int(e[1]) * int(c[4]) + n
    return n


# -- pytorch/examples ImageNet ProgressMeter (MoCo, SimCLR, SwAV and their descendants) ---------------

#: ``Epoch: [0][ 199/1133]\tTime  5.422 ( 0.000)\t...\tLoss -8.2066e+00 (-7.7912e+00)\tAcc@1  12.50 ( 10.94)``:
#: ``ProgressMeter.display`` prints the prefix, then each ``AverageMeter`` as ``name val (avg)``
_PROGRESS = re.compile(rb"Epoch: \[(\d+)\]\[\s*(\d+)/(\d+)\]([^\r\n]{0,4000})")
_METER = re.compile(rb"(?<![\w@.-])([A-Za-z][\w@.-]{0,40})\s+(" + NUM + rb")\s+\(\s*(" + NUM + rb")\s*\)")
_METER_SKIP = {"time", "data", "eta"}


#: the same script's ``validate()``: ``ProgressMeter(len(val_loader), [...], prefix='Test: ')`` -> ``Test: [  0/157]\t
#: Time 14.804 (14.804)\tLoss 2.3422e+01 (2.3422e+01)\tAcc@1   0.00 (  0.00)``; the last line's averages are the
#: evaluation's result
_PROGRESS_TEST = re.compile(rb"Test: \[\s*(\d+)/(\d+)\]([^\r\n]{0,4000})")


def _progress_tests(text: bytes, lines: Lines, st: StepState, out: Collector, used: Used,
                    epochs: list[tuple[int, int]]) -> None:
    """Each run of ``Test: [i/N]`` lines as one evaluation: its last line's running averages as ``eval_<meter>`` at the
    training step in force (the last ``Epoch: [e][i/N]`` line before it)."""
    runs: list[tuple[int, re.Match[bytes], list[int]]] = []  # (step, last line of the run, its line starts)
    for m in _PROGRESS_TEST.finditer(text):
        ls = line_start(text, m.start())
        if used.covers(ls, m.end()):
            continue
        i = bisect_right(epochs, (m.start(), 1 << 62)) - 1
        step = epochs[i][1] if i >= 0 else st.last_step
        if step is None:
            continue
        if runs and runs[-1][0] == step and (i < 0 or epochs[i][0] < runs[-1][1].start()):
            runs[-1][2].append(ls)
            runs[-1] = (step, m, runs[-1][2])  # the same evaluation goes on
        else:
            runs.append((step, m, [ls]))
    for step, m, starts in runs:
        pairs = [(k.decode(), float(avg)) for k, _v, avg in _METER.findall(m[3]) if k.decode().lower() not in _METER_SKIP]
        if not any("loss" in k.lower() for k, _ in pairs):
            continue
        at = lines.at(m.start())
        for k, v in pairs:
            name = "eval_loss" if k.lower() == "loss" else "eval_" + k
            out.add(step, name, v, at)
        for ls in starts:
            used.add(ls)


def parse_progress_meter(text: bytes, first_line: int, st: StepState, out: Collector,
                         steps: StepMarks, used: Used) -> None:
    """The current value of each meter at step ``epoch * batches + batch`` (the average is the epoch's so far)."""
    tests = has(text, b"Test: [")
    if not has(text, b"Epoch: [") and not tests:
        return
    lines = Lines(text, first_line)
    epochs: list[tuple[int, int]] = []
    for m in _PROGRESS.finditer(text):
        ls = line_start(text, m.start())
        if used.covers(ls, m.end()):
            continue
        pairs = [(k.decode(), float(v)) for k, v, _avg in _METER.findall(m[4]) if k.decode().lower() not in _METER_SKIP]
        if not any("loss" in k.lower() for k, _ in pairs):
            continue
        step = int(m[1]) * int(m[3]) + int(m[2])
        line = lines.at(m.start())
        for k, v in pairs:
            out.add(step, k, v, line)
            if k.lower() == "loss":
                out.metric_override[k] = "loss"
        steps.append((ls, step))
        epochs.append((m.start(), step))
        st.last_step = step
        used.add(ls)
    if tests:
        _progress_tests(text, lines, st, out, used, epochs)


# -- torch.optim.lr_scheduler verbose=True --------------------------------------------------------

#: ``Adjusting learning rate of group 0 to 4.0001e-03.`` (torch < 2.2 ``print_lr``; per scheduler.step())
_SCHED = re.compile(rb"Adjusting learning rate of group (\d+) to (" + NUM + rb")")


def parse_scheduler_verbose(text: bytes, first_line: int, st: StepState, out: Collector,
                            steps: StepMarks, used: Used) -> None:
    """Group 0's LR at each scheduler step, numbered in order (the scheduler's own count)."""
    if not has(text, b"Adjusting learning rate"):
        return
    lines = Lines(text, first_line)
    n = getattr(st, "sched_steps", 0)
    for m in _SCHED.finditer(text):
        if m[1] != b"0":
            continue
        out.add(n, "lr", float(m[2]), lines.at(m.start()))
        out.metric_override["lr"] = "learning_rate"
        used.add(line_start(text, m.start()))
        n += 1
    st.sched_steps = n  # type: ignore[attr-defined]


# -- metrics dicts pretty-printed over several lines (pprint, json.dumps(indent=...), a tidied paste) ----

#: ``{`` alone on its line (json.dumps(indent=...)), or ``{`` then the first row on the same line, ending in a comma
#: (pprint's wrap; a one-line dict, which every HF record is, ends in ``}`` and is not a candidate)
_ML_OPEN = re.compile(rb"\{(?:[ \t]*\r?\n|(?=['\"][^'\"\r\n]{1,120}['\"][ \t]*:[ \t]*"
                      rb"(?:tensor\([^()\r\n]{0,300}\)|[^,(){}\r\n]{1,120}),[ \t]*\r?\n))")
#: a value: a number (quoted or not), or a printed 0-d tensor (``tensor(0.6926, device='cuda:2', grad_fn=<...>)``:
#: the loss dict of torchvision detection models and of many hand-written loops, printed as it is returned)
_ML_VALUE = rb"(?:(" + NUM + rb"|'" + NUM + rb"'|\"" + NUM + rb"\")|tensor\(\s*(" + NUM + rb")\s*(?:,[^()\r\n]{0,300})?\))"
_ML_ROW = re.compile(rb"[ \t]*['\"]([^'\"\r\n]{1,120})['\"][ \t]*:[ \t]*" + _ML_VALUE + rb"[ \t]*(,|\})?[ \t]*(?:\r?\n|\Z)")
_ML_CLOSE = re.compile(rb"[ \t]*\}")
#: a logging prefix a dict may follow on its line: absl/glog ``I0301 10:00:00.000000 1400 model_lib_v2.py:708] `` or
#: ``INFO:tensorflow:`` (the TF Object Detection API logs its losses dict so)
_ML_LOG_PREFIX = re.compile(rb"[^{}'\"\r\n]{0,200}\.py:\d+\] |[A-Z]{3,8}:[\w.]{1,40}:")
#: ``model_lib_v2.train_loop``: ``Step {} per-step time {:.3f}s`` before the losses dict of that step
_TFOD_STEP = re.compile(rb"\bStep (\d+) per-step time ")
_ML_OTHER = re.compile(rb"[ \t]*['\"][^'\"\r\n]{1,120}['\"][ \t]*:[^\r\n]{0,400}\r?\n")
#: a value only a printed configuration holds (trainers never log booleans; json.dumps writes them lower-case)
_ML_CONFIG_TELL = re.compile(rb":[ \t]*(?:True|False|None|true|false|null)[ \t]*[,}]?[ \t]*\r?\n?$")
#: keys of a record that are not metrics
_ML_SKIP = {"epoch", "step", "global_step", "current_steps", "total_steps"}


def parse_multiline_dicts(text: bytes, first_line: int, st: StepState, out: Collector,
                          steps: StepMarks, used: Used) -> None:
    """``{`` alone on a line then ``'key': value,`` lines, or pprint's ``{'key': value,`` then `` 'key': value}``: one
    record, numbered after the last step seen (or at its ``step``). A record cut short (a paste that ends mid-dict)
    keeps the rows printed before the cut."""
    if b"{" not in text:
        return
    lines = Lines(text, first_line)
    # a "{" on a line already read (a chunk's 10k one-line HF dicts) is passed over by the loop below: those are
    # left out in numpy passes, and the match is tried at the others only (a match is "{" and the blanks and line
    # break after it, so none holds another "{": the matches are finditer's own)
    opens = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 123)
    opens = opens[~used.covers_all(line_starts(text, opens), opens + 1)].tolist()
    for m in finditer_at(_ML_OPEN, text, opens):  # "{" then the end of its line or a quote
        ls = line_start(text, m.start())
        prefix = text[ls:m.start()]
        if (prefix.strip(b" \t") and not _ML_LOG_PREFIX.fullmatch(prefix)) or used.covers(ls, m.end()):
            continue
        pos, rows, step, closed = m.end(), [], None, False
        if ls > 0:  # TF Object Detection API: "Step 100 per-step time 0.512s" on the line before its losses dict
            before = _TFOD_STEP.search(text, line_start(text, ls - 1), ls)
            step = int(before[1]) if before is not None else None
        while True:
            r = _ML_ROW.match(text, pos)
            if r is not None:
                key = r[1].decode("utf-8", "replace")
                val = float((r[2] or r[3]).strip(b"'\""))
                if key in ("step", "global_step", "current_steps"):
                    step = int(val) if val == val and abs(val) < 2 ** 62 else None
                elif key not in _ML_SKIP:
                    rows.append((key, val, r.start()))
                pos = r.end()
                if r[4] == b"}":
                    closed = True
                    break
                continue
            o = _ML_OTHER.match(text, pos)
            if o is None:
                break
            if _ML_CONFIG_TELL.search(o[0]):
                rows = []  # a printed configuration (a boolean or None among its values), not a metrics record
                break
            pos = o.end()
        if rows and not closed and not _ML_CLOSE.match(text, pos):
            rows.pop()  # no closing brace: the paste was cut, and its last value may be cut with it
        if len(rows) < 2 and m.end() - m.start() == 1 and not closed:
            continue  # pprint's form needs a second row: ``{'loss': 1.2`` alone is a cut one-line dict
        if not any("loss" in k.lower() or k == "grad_norm" for k, _, _ in rows):
            continue
        if step is None:
            step = (st.last_step if st.last_step is not None else 0) + 1
            st.inferred = True
        for key, val, at in rows:
            out.add(step, key, val, lines.at(at))
        steps.append((m.start(), step))
        st.last_step = step
        used.add(m.start())
        for _, _, at in rows:
            used.add(at)


# -- a loss dict printed on one line with its tensors ---------------------------------------------------

#: ``{'loss_classifier': tensor(0.6958, device='cuda:0', grad_fn=<NllLossBackward0>), 'loss_box_reg': tensor(...)}``:
#: what ``print(loss_dict)`` shows for torchvision detection models and many hand-written loops
_TENSOR_DICT = re.compile(rb"\{'[^{}\r\n]{1,16384}\}")
_TENSOR_ITEM = re.compile(rb"'([^'\r\n]{1,120})':\s*tensor\(\s*(" + NUM + rb")\s*[,)]")


def parse_tensor_dicts(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """One record per dict naming a loss, numbered after the last step seen (a framework that prints such a dict at a
    known step, detectron2's ``loss_dict = {...}``, claims its line first)."""
    if not has(text, b"': tensor("):
        return
    lines = Lines(text, first_line)
    for m in _TENSOR_DICT.finditer(text):
        if b"tensor(" not in m[0] or used.covers(line_start(text, m.start()), m.end()):
            continue
        rows = [(k.decode("utf-8", "replace"), float(v)) for k, v in _TENSOR_ITEM.findall(m[0])]
        if not any("loss" in k.lower() for k, _ in rows):
            continue
        step = (st.last_step if st.last_step is not None else 0) + 1
        st.inferred = True
        at = lines.at(m.start())
        for key, val in rows:
            out.add(step, key, val, at)
        steps.append((m.start(), step))
        st.last_step = step
        used.add(m.start())


# -- a line of nothing but metric pairs (a pasted summary, one print of a dict-less loop) -----------------

#: ``key: number`` with a metric-like key (``completions/clipped_ratio``, ``reward_std``, ``loss``); a key of two words
#: (``Grad Norm: 3.26e13``, ``Param Norm: 55.96``) only with an explicit ``:``/``=`` after it
_KV = re.compile(rb"(?:([A-Za-z][\w/.@-]{0,40}(?: [A-Za-z][\w/.@-]{0,40}){1,2})[ \t]*[:=][ \t]*"
                 rb"|([A-Za-z][\w/.@-]{0,80})(?:[ \t]*[:=][ \t]*|[ \t]+))(" + NUM + rb")(?![\w.])")
#: what may stand between two pairs of such a line
_KV_SEP = re.compile(rb"[ \t,;|]*(?:-[ \t]+)?[ \t,;|]*\Z")
#: a record line holds at least this many pairs, and nothing else
MIN_RECORD_PAIRS = 3
#: one of them names a training signal (the rest may be anything: reward_std, frac_reward_zero_std, acc)
_SIGNAL_KEY = re.compile(r"(?i)loss|norm|reward")
_RECORD_STEP_KEYS = {"step", "global_step", "iter", "iteration", "current_steps", "steps"}
#: a record this few lines under a line another parser gave a step continues it (faster-rcnn.pytorch prints
#: ``[session 1][epoch  1][iter  100/2892] loss: nan, lr: 1.00e-04`` then its loss terms two lines below)
CONTINUATION_LINES = 3
_RECORD_SKIP_KEYS = {"epoch", "total_steps", "time", "eta", "episodes"}
#: a phase's counter as a record's key (``train epoch: 3``, ``eval epoch: 3``, ``valid step: 500``)
_PHASE_COUNTER = re.compile(r"(?i)^(train|training|eval|evaluation|valid|validation|val|test|dev)[ _]"
                            r"(?:epoch|step|iter|iteration)$")


#: a logging.Formatter's prefix before a record's first pair: a time, then a level word (VITS's utils.get_logger and its
#: forks: ``"%(asctime)s\t%(name)s\t%(levelname)s\t%(message)s"`` -> ``2023-06-29 15:09:18,527\tbert_vits\tINFO\t``)
_LOGGER_LEVEL = re.compile(rb"\b(?:INFO|DEBUG|WARNING|WARN)\b[ \t:|\]-]*")
#: logging.basicConfig's default ``"%(levelname)s:%(name)s:%(message)s"`` (RVC: ``INFO:My-Voice:loss_disc=nan, ...``)
_BASIC_LOGGER = re.compile(rb"[ \t]*(?:INFO|DEBUG|WARNING):[^\s:]{1,80}:")


def _after_logger(line: bytes) -> bytes:
    """The line without a logging prefix (a time then a level word, or basicConfig's ``LEVEL:name:``)."""
    b = _BASIC_LOGGER.match(line)
    if b is not None:
        return line[b.end():]
    lv = _LOGGER_LEVEL.search(line, 0, MAX_LOGGER_PREFIX)
    if lv is not None and _LOG_TIME.search(line, 0, lv.start()) is not None:
        return line[lv.end():]
    return line


def _record_pairs(line: bytes, signal: bool = True) -> list[tuple[str, float]] | None:
    """The pairs of a line that is nothing but pairs (separators aside), or None; ``signal``: one must name a
    training signal (a line next to such a record needs not: ``completions/clipped_ratio: 1 ...`` above its loss)."""
    line = _after_logger(line)  # the logger's time and level, or basicConfig's level and name: the message is the record
    pairs, pos = [], 0
    for m in _KV.finditer(line):
        if not _KV_SEP.match(line[pos:m.start()]):
            return None
        pairs.append(((m[1] or m[2]).decode(), float(m[3])))
        pos = m.end()
    rest = line[pos:].strip(b" \t,;|\r")
    if rest and (not pairs or _CUT_PAIR.match(rest) is None):
        return None
    if len(pairs) < MIN_RECORD_PAIRS or (signal and not any(_SIGNAL_KEY.search(k) for k, _ in pairs)):
        return None
    return pairs


#: a record's last pair cut mid-value by a paste or a terminal (FashionAI's ``... | S6 loss:   25.47 | Total loss: na``):
#: a key and the start of a number or of nan/inf, then nothing; the pairs before it are the record
_CUT_PAIR = re.compile(rb"[A-Za-z][\w/.@-]{0,40}(?: [A-Za-z][\w/.@-]{0,40}){0,2}[ \t]*[:=][ \t]*"
                       rb"(?:[-+]?(?:\d[\d.eE+-]*|\.\d*)|[-+]?(?:na?|Na?|NA|in?|In?|IN))?\Z")


def parse_pair_records(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """Lines made only of ``key: number`` pairs, one naming a training signal (``loss: 0   grad_norm: 0   reward: 0``):
    structure enough to be a record even once, unlike a loss mentioned in prose. Lines that follow each other with
    no key in common are one record (a summary wrapped over two lines); a repeated key starts the next step. The
    step is the record's own ``step``/``iter`` pair, else the next after the last step seen (inferred)."""
    starts = {line_start(text, c.start()) for lit, rx in _RECORD_CORES if has(text, lit) for c in rx.finditer(text)}
    indented = {m.start() + 1 for m in _INDENTED_PAIR.finditer(text)} if steps else set()
    if not starts and not indented:
        return
    mark_pos, mark_step = steps.arrays() if steps else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    rows: dict[int, tuple[int, list[tuple[str, float]]]] = {}
    for ls in sorted(starts | indented):
        le = line_end(text, ls)
        if ls in rows or le - ls > MAX_LOOSE_LINE or used.covers(ls, le):
            continue
        # an indented line of pairs naming no loss is read only as the detail lines of a counter line just above
        pairs = _record_pairs(text[ls:le].rstrip(b"\r"), ls in starts)
        if pairs is None or (ls not in starts and _mark_above(text, ls, mark_pos) is None):
            continue
        rows[ls] = (le, pairs)
        _neighbours(text, ls, le, rows, used)
    lines = Lines(text, first_line)
    prev_end, keys, step = -2, set(), st.last_step
    for ls in sorted(rows):
        le, pairs = rows[ls]
        own = next((int(v) for k, v in pairs if k.lower() in _RECORD_STEP_KEYS and v == v and 0 <= v < 2 ** 62), None)
        # a phase's own counter (Flax's examples: 'train epoch: %d, loss: %.4f, accuracy: %.2f' then 'eval epoch: ...'):
        # the record's step, and a held-out phase's keys are eval_*
        phase = next(((pm[1].lower(), int(v)) for k, v in pairs if (pm := _PHASE_COUNTER.match(k)) is not None
                      and v == v and 0 <= v < 2 ** 62), None)
        if phase is not None:
            own = phase[1] if own is None else own
            held = phase[0] not in ("train", "training")
            pairs = [(("eval_" + k if held and not k.lower().startswith("eval") else k), v) for k, v in pairs
                     if _PHASE_COUNTER.match(k) is None]
        names = {k for k, _ in pairs}
        joined = ls == prev_end + 1 and not names & keys and own is None
        indent = text[ls:ls + 1] in (b" ", b"\t")
        i = _mark_above(text, ls, mark_pos) if own is None and not joined and indent else None
        if i is not None:
            own = int(mark_step[i])  # the detail lines under a counter line: that line's step
        if not joined:
            if own is not None:
                step = own
            else:
                step = (step if step is not None else 0) + 1
                st.inferred = True
            keys = set()
        keys |= names
        at = lines.at(ls)
        for k, v in pairs:
            if k.lower() not in _RECORD_STEP_KEYS and k.lower() not in _RECORD_SKIP_KEYS:
                out.add(step, k, v, at)
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step
        prev_end = le


def _mark_above(text: bytes, ls: int, mark_pos: np.ndarray) -> int | None:
    """The index of the step mark at most CONTINUATION_LINES lines above ``ls``, or None."""
    i = int(np.searchsorted(mark_pos, ls)) - 1
    if i >= 0 and text.count(b"\n", int(mark_pos[i]), ls) <= CONTINUATION_LINES:
        return i
    return None


#: an indented ``key: number`` line (a candidate detail line under a counter line)
_INDENTED_PAIR = re.compile(rb"\n[ \t]+[A-Za-z][\w/.@-]{0,80}[ \t]*[:=][ \t]*[-+.\dnNiI]")


def _neighbours(text: bytes, ls: int, le: int, rows: dict, used: Used) -> None:
    """Pair-only lines right above and below a record (a summary wrapped over lines) join it."""
    up = ls
    while up > 0:
        ps = line_start(text, up - 1)
        pairs = None if ps in rows or used.covers(ps, up - 1) else _record_pairs(text[ps:up - 1].rstrip(b"\r"), False)
        if pairs is None:
            break
        rows[ps], up = (up - 1, pairs), ps
    down = le
    while down + 1 < len(text):
        ne = line_end(text, down + 1)
        ns = down + 1
        pairs = None if ns in rows or used.covers(ns, ne) else _record_pairs(text[ns:ne].rstrip(b"\r"), False)
        if pairs is None:
            break
        rows[ns], down = (ne, pairs), ne


#: the literal end of a signal word (maybe inside its key: ``loss_cls``, ``decode.loss_seg``), then the separator and a
#: value's first character: the candidates (literal-led,
#: one regex per literal, so the engine jumps between occurrences instead of trying every byte)
_RECORD_LITERALS = (b"oss", b"orm", b"ard")  # not "lr"/"rate": frequent letters, and a record names a loss too
_RECORD_CORES = tuple((w, re.compile(w + rb"(?:[_.][\w.]{0,40})?[ \t]*[:=][ \t]*[-+.\dnNiI]")) for w in _RECORD_LITERALS)

# -- llm.c's step-less "val loss X" -----------------------------------------------------------------

#: llm.c (train_gpt2.py/.cu, train_llama3.py): ``print0(f"val loss {val_loss}")`` / ``printf0("val loss %f\n")``, alone
#: on its line, printed at the top of the loop before the ``step N/M | ...`` line of the next update
_VAL_LOSS_LINE = re.compile(rb"(?:\A|\n)val loss (" + NUM + rb")[ \t]*\r?(?=\n|\Z)")


class _StepBefore:
    """The step in force at a position of the chunk, for a held-out line printed after the training line of its step:
    the chunk's last step mark before it; before the chunk's first mark, the step in force when the parser last ran
    (``st.<attr>``; ``st.last_step`` already holds the end of this chunk); with no mark in the chunk, ``st.last_step``.
    The marks are read once, at the first lookup. Call ``done()`` after the chunk."""

    def __init__(self, st: StepState, steps: StepMarks, attr: str) -> None:
        self.st, self.steps, self.attr = st, steps, attr
        self.marks: tuple[Any, Any] | None = None

    def at(self, pos: int) -> int | None:
        if self.marks is None:
            self.marks = self.steps.arrays() if self.steps else (None, None)
        marks, stp = self.marks
        if marks is None:
            return self.st.last_step
        i = int(np.searchsorted(marks, pos, side="right"))
        return int(stp[i - 1]) if i else getattr(self.st, self.attr, None)

    def done(self) -> None:
        setattr(self.st, self.attr, self.st.last_step)


def parse_step_less_val_loss(text: bytes, first_line: int, st: StepState, out: Collector,
                             steps: StepMarks, used: Used) -> None:
    """The val loss is the model's after the last printed step: it takes the step in force (0 before any)."""
    if not has(text, b"val loss "):
        return
    lines = Lines(text, first_line)
    before = _StepBefore(st, steps, "val_loss_prev_step")
    for m in _VAL_LOSS_LINE.finditer(text):
        start = m.start() + (text[m.start():m.start() + 1] == b"\n")
        if used.covers(start, m.end()):
            continue
        step = before.at(start)
        out.add(step if step is not None else 0, "val loss", float(m[1]), lines.at(start))
        out.metric_override["val loss"] = "eval_loss"
        used.add(start)
    before.done()


# -- pytorch/examples' "Test set: Average loss" ---------------------------------------------------------------

#: pytorch/examples mnist/main.py ``test()`` (copied into countless repos): ``'\nTest set: Average loss: {:.4f},
#: Accuracy: {}/{} ({:.0f}%)\n'``, after the ``Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}`` lines of the epoch;
#: copies name the split Validation/Val/Eval/Dev
_EVAL_SET = re.compile(rb"(?m)^[ \t]*(Test|Validation|Valid|Val|Eval|Dev) set: Average loss: (" + NUM
                       + rb")(?:, Accuracy: (\d+)/(\d+) \([ \d.]+%\))?")


def parse_eval_set(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """The held-out loss (and accuracy as a fraction) at the step of the training line before it."""
    if not has(text, b" set: Average loss: "):
        return
    lines = Lines(text, first_line)
    before = _StepBefore(st, steps, "eval_set_prev_step")
    for m in _EVAL_SET.finditer(text):
        if used.covers(m.start(), m.end()):
            continue
        step = before.at(m.start())
        split = m[1].decode().lower()
        line = lines.at(m.start())
        name = f"{split} set loss"
        out.add(step if step is not None else 0, name, float(m[2]), line)
        out.metric_override[name] = "eval_loss"
        if m[3] is not None and int(m[4]) > 0:
            out.add(step if step is not None else 0, f"{split} set accuracy", int(m[3]) / int(m[4]), line)
        used.add(m.start())
    before.done()


# -- TensorFlow's seq2seq translate tutorial (tensorflow/models tutorials/rnn/translate) -----------------------------

#: ``print("global step %d learning rate %.4f step-time %.2f perplexity %.2f" % (...))`` and, per bucket after it,
#: ``print("  eval: bucket %d perplexity %.2f" % (bucket_id, eval_ppx))``: perplexity is the only loss it prints
_TF_TRANSLATE = re.compile(rb"global step (\d+) learning rate (" + NUM + rb") step-time (" + NUM + rb") perplexity ("
                           + NUM + rb")")
_TF_BUCKET = re.compile(rb"eval: bucket (\d+) perplexity (" + NUM + rb")")


def parse_tf_translate(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    lines = Lines(text, first_line)
    last: int | None = None
    marks = sorted([(m.start(), 0, m) for m in _TF_TRANSLATE.finditer(text)]
                   + [(m.start(), 1, m) for m in _TF_BUCKET.finditer(text)], key=lambda t: t[0])
    for pos, kind, m in marks:
        ls = line_start(text, pos)
        if used.covers(ls, m.end()):
            continue
        if kind == 0:
            last = int(m[1])
            out.add(last, "learning_rate", float(m[2]), lines.at(pos))
            out.add(last, "perplexity", float(m[4]), lines.at(pos))
            steps.append((ls, last))
            st.last_step = last
        elif last is not None:
            out.add(last, f"eval_perplexity_bucket{int(m[1])}", float(m[2]), lines.at(pos))
        else:
            continue
        used.add(ls)


# -- PyTorch-GAN-style rows with named groups: "[Epoch 11/11] [Batch 3811/3880] [G - gan1: 6.830, ...] [D - real: ...]" --

#: the eriklindernoren PyTorch-GAN prefix, then groups of one model's terms (GracoNet: ``[G - gan1: 6.830, gan2: 6.101,
#: rec: 0.151, kld: 0.0976] [D - real: 0.428, fake1: 0.016, fake2: 0.023]``): every number printed there is a loss term
_GAN_ROW = re.compile(rb"\[Epoch (\d+)/(\d+)\]\s*\[Batch (\d+)/(\d+)\]((?:\s*\[[A-Za-z][\w ]{0,15}? - [^\]\r\n]{1,300}\])+)")
_GAN_GROUP = re.compile(rb"\[([A-Za-z][\w ]{0,15}?) - ([^\]\r\n]{1,300})\]")
_GAN_TERM = re.compile(rb"([A-Za-z][\w.]{0,30}):\s*(" + NUM + rb")(?![\w.])")


def parse_gan_groups(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """One row per report at ``epoch * batches + batch``; a term without "loss" in its name is ``loss_<model>_<term>``
    (as the CycleGAN reader names its ``D_A``/``G_GAN`` terms)."""
    lines = Lines(text, first_line)
    mine: set[int] = set()  # lines read here (a paste may join two rows on one line)
    for m in _GAN_ROW.finditer(text):
        ls = line_start(text, m.start())
        if ls not in mine and used.covers(ls, m.end()):
            continue
        mine.add(ls)
        step = int(m[1]) * int(m[4]) + int(m[3])
        line = lines.at(m.start())
        for g in _GAN_GROUP.finditer(m[5]):
            model = g[1].decode().strip().replace(" ", "_")
            for k, v in _GAN_TERM.findall(g[2]):
                key = f"{model}_{k.decode()}"
                out.add(step, key if "loss" in key.lower() else f"loss_{key}", float(v), line)
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step


# -- bracketed keys: "[epoch]: 199, [batch]: 23900, [loss]: 4.99" ---------------------------------------------------

#: a logger printing each key in brackets (CoupletAI's ``[epoch]: 199, [batch]: 23900, [loss]: 4.994``)
_BRACKET_PAIR = re.compile(rb"\[([A-Za-z][\w ./-]{0,30})\]\s*[:=]\s*(" + NUM + rb")(?![\w.])")
_BRACKET_LOSS = re.compile(rb"\[(?:[\w ./-]{0,20}[ _])?(?:loss|Loss|LOSS)\]\s*[:=]")
_BRACKET_STEPS = ("step", "global_step", "iter", "iteration", "batch")


def parse_bracket_pairs(text: bytes, first_line: int, st: StepState, out: Collector,
                        steps: StepMarks, used: Used) -> None:
    """A line of three or more ``[key]: number`` pairs naming a loss is a record, even alone (prose does not bracket its
    keys); its step is its ``[step]``/``[iter]``/``[batch]`` pair, else the next after the last step seen."""
    lines = Lines(text, first_line)
    for ls, le in _candidate_lines(text, _BRACKET_LOSS.finditer(text), used):
        pairs = [(k.decode().strip().lower().replace(" ", "_"), float(v)) for k, v in _BRACKET_PAIR.findall(text, ls, le)]
        if len(pairs) < MIN_RECORD_PAIRS or not any(k.endswith("loss") for k, _ in pairs):
            continue
        given = next((int(v) for k, v in pairs if k in _BRACKET_STEPS), None)
        step = given if given is not None else (st.last_step + 1 if st.last_step is not None else 0)
        for k, v in pairs:
            if k not in _BRACKET_STEPS and k != "epoch":
                out.add(step, k, v, lines.at(ls))
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step


# -- "<name> loss at <counter> N: value" ------------------------------------------------------------------------

#: the literal core: a loss (or cost) said "at"/"after" a counter
_LOSS_AT_CORE = re.compile(rb"(?:oss|OSS|ost)[ \t]+(?:at|after|@)[ \t]+")
#: the whole line: TensorFlow's word2vec tutorial ``Average loss at step  2000 :  4.35``, the Udacity notMNIST
#: assignments ``Minibatch loss at step 500: 2.31``, CornerNet/CenterNet ``training loss at iteration 31000: 7.48``
#: (and their ``focal loss at iteration ...`` terms, ``validation loss at iteration ...``), ``Loss at epoch 3 is 0.42``
_LOSS_AT = re.compile(
    rb"[ \t]*(?:\[[^\]\r\n]{1,60}\][ \t]*)?((?:[A-Za-z][A-Za-z0-9]{0,20}[ _]){0,2})([Ll]oss|LOSS|[Cc]ost)[ \t]+"
    rb"(?:at|after|@)[ \t]+(?:the[ \t]+)?([Ss]tep|STEP|[Ii]teration|ITERATION|[Ii]ter|ITER|[Ee]poch|EPOCH|[Bb]atch)"
    rb"[ \t]*#?[ \t]*(\d+)(?:[ \t]*/[ \t]*\d+)?[ \t]*(?:[:=]|is\b|was\b)?[ \t]*(" + NUM + rb")[ \t]*[.,;]?[ \t]*\r?$")


def parse_loss_at_counter(text: bytes, first_line: int, st: StepState, out: Collector,
                          steps: StepMarks, used: Used) -> None:
    """``<name> loss at <step|iteration|epoch> N: value`` lines: the line holds the step itself, so one is a point.
    The words before ``loss`` name it as the loose pairs do (``training``/``average``/``minibatch``: the loss;
    ``validation``/``test``: eval_loss; ``focal``: focal_loss)."""
    lines = Lines(text, first_line)
    for ls, le in _candidate_lines(text, _LOSS_AT_CORE.finditer(text), used):
        m = _LOSS_AT.match(text[ls:le])
        if m is None:
            continue
        words = m[1].decode().replace("_", " ").split()
        word = words[-1].lower() if words else ""
        if any(w.lower() in _EVAL_WORDS for w in words):
            key = "eval_loss"
        elif not word or word in _NEUTRAL_WORDS or word == "minibatch":
            key = "loss"
        else:
            key = f"{word}_loss"
        step = int(m[4])
        out.add(step, key, float(m[5]), lines.at(ls + m.start(2)))
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step


# -- NVIDIA tacotron2 family: "Train loss <iteration> <loss> Grad Norm <norm> <t>s/it" -----------------------------------

#: tacotron2 / waveglow-era train.py (and Mellotron, Flowtron, Cross-Lingual-Voice-Cloning, many TTS forks):
#: ``print("Train loss {} {:.6f} Grad Norm {:.6f} {:.2f}s/it".format(iteration, reduced_loss, grad_norm, duration))``
#: (a GAN variant adds ``D Grad Norm``), and ``print("Validation loss {}: {:9f}  ".format(iteration, val_loss))``. The
#: number right after "loss" is the iteration, not the loss: the loose pair reader would take it as the value.
_TACO_TRAIN = re.compile(rb"Train loss (\d+) (" + NUM + rb") Grad Norm (" + NUM + rb")(?: D Grad Norm (" + NUM + rb"))?")
_TACO_VAL = re.compile(rb"Validation loss (\d+):[ \t]+(" + NUM + rb")[ \t]*\r?(?=\n|\Z)")


def parse_tacotron(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    lines = Lines(text, first_line)
    for rx, val in ((_TACO_TRAIN, False), (_TACO_VAL, True)):
        for m in rx.finditer(text):
            ls = line_start(text, m.start())
            if used.covers(ls, m.end()):
                continue
            step, line = int(m[1]), lines.at(m.start())
            if val:
                out.add(step, "eval_loss", float(m[2]), line)
            else:
                out.add(step, "loss", float(m[2]), line)
                out.add(step, "grad_norm", float(m[3]), line)
                if m[4] is not None:
                    out.add(step, "d_grad_norm", float(m[4]), line)
                steps.append((ls, step))
                st.last_step = step
            used.add(ls)


#: (parser, letters a chunk needs first), run after every other line parser
# -- one-pair detail lines under a counter line ------------------------------------------------------------

#: a line holding one ``key: number`` pair, maybe behind a bullet (tf-faster-rcnn's `` >>> rpn_loss_cls: 0.648``,
#: ``  - loss: 0.5``, ``    acc = 0.91``), or a namespaced key and its number with only blanks between them (a metrics
#: dict printed ``print(k, v)`` per item: ``train/loss 5.5021``, ``eval/accuracy 0.91``; the ``/`` keeps prose and
#: headers such as ``Epoch 5`` out)
_DETAIL = (rb"[ \t]*(?:>{1,3}[ \t]*|[-*][ \t]+)?(?:([A-Za-z][\w/.@-]{0,60})[ \t]*[:=][ \t]*|([A-Za-z]\w{0,20}/[\w/.@-]{1,60})[ \t]+)("
           + NUM + rb")[ \t]*\r?(?=\n|\Z)")
_DETAIL_LINE = re.compile(_DETAIL)
#: two such lines in a row: the gate (one scan that starts at a line break)
_DETAIL_PAIR = re.compile(rb"\n" + _DETAIL + rb"\n" + _DETAIL)
MAX_DETAIL_LINES = 40
#: a line that opens with its step counter (``step 50 token 250m``, ``Step: 300``, ``iteration 20``)
_LEADING_STEP = re.compile(rb"[ \t]*(?:[Gg]lobal[ _])?(?:[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER)[ \t]*[:=#]?[ \t]*(\d+)\b")


def parse_detail_blocks(text: bytes, first_line: int, st: StepState, out: Collector,
                        steps: StepMarks, used: Used) -> None:
    """A block of one-pair lines, one naming a loss, right under a line another parser gave a step (``iter: 20 / 70000,
    total loss: nan`` then `` >>> rpn_loss_cls: 0.648`` ...), or under a line that is its own step counter (``step 50
    token 250m`` then ``train/loss 2.2328``, ``train/grad_norm 12.5982``): the terms at that step. tf-faster-rcnn's
    ``train_val.py`` prints its loss terms this way; a block under no step line is left alone (no step to give it)."""
    if _DETAIL_PAIR.search(text) is None:
        return
    if steps:
        mark_pos, mark_step = steps.arrays()
    else:
        mark_pos = mark_step = np.zeros(0, dtype=np.int64)
    lines = Lines(text, first_line)
    pos = 0
    while True:
        m = _DETAIL_PAIR.search(text, pos)
        if m is None:
            return
        start = m.start() + 1
        block: list[tuple[int, str, float]] = []
        ls = start
        while ls < len(text) and len(block) < MAX_DETAIL_LINES:
            d = _DETAIL_LINE.match(text, ls)
            if d is None or used.covers(ls, d.end()):
                break
            block.append((ls, (d[1] or d[2]).decode(), float(d[3])))
            ls = d.end() + 1
        pos = max(ls, m.end())
        if len(block) < 2 or not any(is_loss_like(k) for _, k, _ in block):
            continue
        head = line_start(text, start - 1) if start > 0 else 0
        i = int(np.searchsorted(mark_pos, start)) - 1
        if i >= 0 and mark_pos[i] >= head:
            step = int(mark_step[i])
        else:  # no parser gave the line above a step: its own leading counter (``step 50 token 250m``), if any
            above = _LEADING_STEP.match(text, head, max(head, start - 1))
            if above is None:
                continue  # the line above holds no step
            step = int(above[1])
        for at, key, value in block:
            out.add(step, key, value, lines.at(at))
            used.add(at)


# -- a loss indexed by its counter: "train_batch_loss[ 6510 ]:  1.5743603706359863" ---------------------------------

#: a loss-named key, its counter in brackets (maybe ``[ 10 / 500 ]``), then the value (Git-YC/crnn-pytorch prints
#: ``print('train_batch_loss[', i, ']: ', loss)``)
_INDEXED_LOSS = re.compile(rb"(?<![\w.])([A-Za-z][\w.]{0,40}?(?:loss|Loss|LOSS)\w{0,20})[ \t]*\[[ \t]*(\d+)[ \t]*(?:/[ \t]*\d+[ \t]*)?\]"
                           rb"[ \t]*[:=][ \t]*(" + NUM + rb")(?![\w.])")


#: its literal-led core (``oss`` then the bracket and a digit), found first so the full pattern runs on candidate lines only
_INDEXED_CORES = tuple(re.compile(w + rb"\w{0,20}[ \t]*\[[ \t]*\d") for w in (b"oss", b"OSS"))


def parse_indexed_loss(text: bytes, first_line: int, st: StepState, out: Collector,
                       steps: StepMarks, used: Used) -> None:
    """``<loss name>[ N ]: value`` lines: the value at step N."""
    lines = Lines(text, first_line)
    for ls, le in _candidate_lines(text, (c for rx in _INDEXED_CORES for c in rx.finditer(text)), used):
        m = _INDEXED_LOSS.search(text, ls, le)
        if m is None:
            continue
        step = int(m[2])
        out.add(step, _loose_key(m[1].decode()), float(m[3]), lines.at(m.start()))
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step


# -- cells of "Name value" between pipes: "Epoch [000/210] | Loss 0.0029 | LR 0.00000000 | Step: 100%|..." ------------

#: a cell holding one name (up to three words) and its number, nothing else (``Loss 0.0029``, ``LR 0.00000000``,
#: ``val acc: 0.91``)
_CELL_VALUE = re.compile(rb"[ \t]*([A-Za-z][\w./@-]{0,30}(?: [A-Za-z][\w./@-]{0,30}){0,2})[ \t]*[:=]?[ \t]+(" + NUM
                         + rb")[ \t]*\Z")
#: a cell that is only a counter, maybe behind an emoji or arrow (``🏋️> Epoch [000/210]``, ``Step 300``, ``Batch 10/500``);
#: a tqdm cell (``Step: 100%``) is not one
_CELL_COUNTER = re.compile(rb"[^\w|%]{0,12}?[ \t]*(Epoch|EPOCH|epoch|Step|STEP|step|Iter|ITER|iter|Iteration|iteration|Batch|"
                           rb"batch)[ \t]*[:#]?[ \t]*\[?[ \t]*(\d+)[ \t]*(?:/[ \t]*(\d+)[ \t]*)?\]?[ \t]*\Z")
#: a within-epoch counter cell with its total and unit after it (pytorch/examples word_language_model, the PyTorch
#: nn.Transformer tutorial, AWD-LSTM: ``| epoch   1 |   200/ 2983 batches | lr 20.00 | ... | loss  7.63 | ppl  2063.80``)
_CELL_OF_TOTAL = re.compile(rb"[ \t]*(\d+)[ \t]*/[ \t]*(\d+)[ \t]+(?:batches|batch|steps|iters|iterations)[ \t]*\Z")
#: the cell of those scripts' validation line: ``| end of epoch   1 | time: 140.62s | valid loss  5.54 | valid ppl 254.71``
_CELL_EPOCH_END = re.compile(rb"[ \t]*(?:end of|End of|END OF)[ \t]+(?:epoch|Epoch|EPOCH)[ \t]*(\d+)[ \t]*\Z")
#: a line holds at least this many value cells besides its counter (an end-of-epoch line: one loss is enough)
MIN_VALUE_CELLS = 2


def parse_pipe_cells(text: bytes, first_line: int, st: StepState, out: Collector,
                     steps: StepMarks, used: Used) -> None:
    """A line of ``|``-separated cells, one a counter and two or more ``Name value`` (one naming a loss): the values at
    the counter's step (an iteration or step counter; else the epoch, or epoch x batches + batch when the batch cell
    gives its total). Cells of any other shape (a tqdm bar after the record, a timing) are skipped."""
    if b"|" not in text:
        return
    lines = Lines(text, first_line)
    cores = (c for rx in _LOSS_CORES for c in rx.finditer(text))
    for ls, le in _candidate_lines(text, cores, used):
        line = text[ls:le].rstrip(b"\r")
        if line.count(b"|") < 2:
            continue
        counters: dict[str, tuple[int, int | None]] = {}
        values: list[tuple[str, float]] = []
        epoch_end = None
        for cell in line.split(b"|"):
            c = _CELL_COUNTER.match(cell)
            if c is not None:
                counters.setdefault(c[1].decode().lower()[:4], (int(c[2]), int(c[3]) if c[3] else None))
                continue
            c = _CELL_OF_TOTAL.match(cell)
            if c is not None:
                counters.setdefault("batc", (int(c[1]), int(c[2])))
                continue
            c = _CELL_EPOCH_END.match(cell)
            if c is not None:
                epoch_end = int(c[1])
                continue
            v = _CELL_VALUE.match(cell)
            if v is not None:
                values.append((v[1].decode(), float(v[2])))
        if not any(is_loss_like(k.lower()) for k, _ in values):
            continue
        if epoch_end is not None and not counters:
            # the epoch's validation, after its last training log: at that log's step (the epoch without one)
            step = st.last_step if st.last_step is not None else epoch_end
            at = lines.at(ls)
            for k, v in values:
                out.add(step, _loose_key(k), v, at)
            used.add(ls)
            continue
        if not counters or len(values) < MIN_VALUE_CELLS:
            continue
        if "step" in counters or "iter" in counters:
            step = (counters.get("step") or counters["iter"])[0]
        elif "epoc" in counters and "batc" in counters:  # a batch counter that restarts every epoch, or not
            step = epoch_local_step(st, "pipe", counters["epoc"][0], *counters["batc"])
        else:
            step = (counters.get("epoc") or counters["batc"])[0]
        at = lines.at(ls)
        for k, v in values:
            out.add(step, _loose_key(k), v, at)
        steps.append((ls, step))
        used.add(ls)
        st.last_step = step


#: TF1's tf.Print of the loss (DeepLab research/deeplab train.py: ``tf.Print(total_loss, [total_loss], message='Total
#: loss is :')`` prints ``Total loss is :[0.140642926]``): the message, then each value in brackets
_TF_PRINT = re.compile(rb"(?m)^[ \t]*([A-Za-z][A-Za-z_ ]{0,30}?[Ll]oss)(?: is)?[ \t]*:?[ \t]*\[(" + NUM + rb")\][ \t]*\r?$")
#: its literal-led core, found first so the line pattern runs on candidate lines only (a scan of every line start cost
#: ~0.7 s per 100 MB of an HF log, where no line is one)
_TF_PRINT_CORE = re.compile(rb"oss(?: is)?[ \t]*:?[ \t]*\[")


def parse_tf_print(text: bytes, first_line: int, st: StepState, out: Collector,
                   steps: StepMarks, used: Used) -> None:
    """``<loss message>[value]`` lines, at least MIN_LOOSE_LINES of them: one point per line, numbered in order (the
    print carries no step)."""
    found = [m for ls, le in _candidate_lines(text, _TF_PRINT_CORE.finditer(text), used)
             if (m := _TF_PRINT.match(text, ls, le)) is not None]
    if len(found) < MIN_LOOSE_LINES:
        return
    lines = Lines(text, first_line)
    step = st.last_step if st.last_step is not None else 0
    for m in found:
        step += 1
        out.add(step, _loose_key(m[1].decode().strip()), float(m[2]), lines.at(m.start()))
        steps.append((m.start(), step))
        used.add(m.start())
    st.last_step = step
    st.inferred = True


LOOSE_PARSERS = (
    (parse_step_less_val_loss, (b"valloss",)),
    (parse_hf_metrics_block, (b"metrics",)),
    (parse_multiline_dicts, (b"",)),
    (parse_tensor_dicts, (b"tensor",)),
    (parse_progress_meter, (b"Epoch", b"Test")),
    (parse_scheduler_verbose, (b"Adjustinglearningrate",)),
    (parse_tacotron, (b"TrainlossGradNorm", b"Validationloss")),
    (parse_tf_translate, (b"globalsteplearningratesteptimeperplexity",)),
    (parse_bracket_pairs, (b"oss",)),
    (parse_gan_groups, (b"EpochBatch",)),
    (parse_loss_at_counter, (b"ossat", b"OSSat", b"ostat", b"ossafter", b"OSSafter")),
    (parse_indexed_loss, (b"oss", b"OSS")),
    (parse_pipe_cells, (b"oss", b"OSS")),
    (parse_tf_print, (b"oss",)),
    (parse_pair_records, _RECORD_LITERALS),
    (parse_loose_loss, (b"oss", b"OSS", *_COST_WORDS)),
    (parse_eval_set, (b"setAverageloss",)),
    (parse_detail_blocks, (b"",)),
)

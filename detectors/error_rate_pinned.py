"""Error rate pinned at 100%: every evaluation's word/character error rate is exactly 100% (1.0): the outputs are empty.

What it detects:
    A word, character, phone or token error rate (``WER``, ``CER``, ``PER``, ``TER``; ``eval_wer``, ``valid CER``,
    ``val/cer``) that is exactly 100 (percent) or exactly 1.0 (a fraction) at every one of at least ``MIN_EVALS``
    evaluations, the last included.

Why it matters:
    An error rate of exactly 100% at every evaluation is what an empty hypothesis gives: every reference word is a
    deletion. A CTC model that predicts only the blank, or a decoder that emits end-of-sequence at once, scores this
    way while its loss still creeps down, so the run reads as training. It is the usual early plateau of CTC
    training; a run that ends on it learned nothing usable.

Evidence used:
    The error-rate series; the ``loss`` series and held-out loss when logged (to say how far they moved).

Remedies:
    Train past the blank plateau with a warmup and a learning rate in the usual range for the model (wav2vec2
    fine-tuning: ~1e-4 with warmup, the feature encoder frozen); check that the vocabulary covers the transcripts'
    characters (labels mapped to <unk> or dropped) and that the blank index matches the loss's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Finding, Run
from detectors._common import Series, fmt, points

CODE = "OUT001"
SLUG = "error-rate-pinned"
ROOT_CAUSE = None
NEEDS = ("scalars",)

#: evaluations at exactly 100% needed (fewer is the start of a normal run)
MIN_EVALS = 3
#: an error-rate metric: the rate's own name as the last word of the key
_RATE = re.compile(r"(?i)(?:^|[/._\s-])(?:wer|cer|per|ter)$")


def _pinned(run: Run, metric: str) -> tuple[Series, float] | None:
    rows = points(run, metric)
    if len(rows) < MIN_EVALS or not bool(rows.finite.all()):
        return None
    v = rows.values
    full = 100.0 if bool(np.all(v == 100.0)) else 1.0 if bool(np.all(v == 1.0)) else None
    return (rows, full) if full is not None else None


def detect(run: Run) -> Iterable[Finding]:
    rates = sorted((m for m in run.metrics() if _RATE.search(m.strip())),
                   key=lambda m: ("wer", "cer", "per", "ter").index(m.strip()[-3:].lower()))
    pinned = [(m, got) for m in rates if (got := _pinned(run, m)) is not None]
    if pinned:
        metric, (rows, full) = pinned[0]
        others = [m for m, _ in pinned[1:]]
        first, last = rows[0], rows[-1]
        shown = "100%" if full == 100.0 else "1.0 (100%)"
        notes = []
        for m in ("loss", "eval_loss"):
            lp = points(run, m).finite_only()
            if len(lp) >= 2:
                notes.append(f"{m} {fmt(float(lp.values[0]))} -> {fmt(float(lp.values[-1]))}")
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6,
            title=f"{metric} is exactly {shown} at every one of {len(rows)} evaluations: the outputs are empty",
            message=(f"{metric} is exactly {shown} at all {len(rows)} evaluations from step {first.step} to step "
                     f"{last.step}: the score of an empty hypothesis, every reference word deleted (a CTC model that "
                     "predicts only the blank, a decoder that stops at once)"
                     + (f"; so {'is' if len(others) == 1 else 'are'} {', '.join(others)}" if others else "")
                     + (f", while {' and '.join(notes)}" if notes else "") + ". The model has produced nothing "
                     "usable; the cause is not in the log."),
            first_step=first.step, basis="direct", symptom="degenerate_output",
            evidence=[first.evidence(f"{metric} = {fmt(first.value)} at step {first.step}"),
                      last.evidence(f"{metric} = {fmt(last.value)} at step {last.step}: still exactly {shown}")],
            remedies=[
                "Train past the blank plateau: a warmup and a learning rate in the model's usual range (wav2vec2 "
                "fine-tuning: ~1e-4 with warmup, feature encoder frozen); a run stopped on the plateau is unfinished.",
                "Check the output vocabulary against the transcripts (characters mapped to <unk> or dropped leave "
                "nothing to predict) and that the blank index is the one the CTC loss uses.",
                "Decode a few training utterances: an empty string for every one confirms blank-only output.",
            ],
        )

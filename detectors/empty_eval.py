"""An evaluation that averaged over nothing: the held-out loss NaN from its first log, with NumPy's warning of a 0/0.

What it detects:
    Every logged value of a held-out loss (``eval_loss``, ``Val loss``, ``validation loss``) non-finite from the first,
    the training loss finite (or not logged), and NumPy's warning that a reduction had nothing in it
    (``RuntimeWarning: Mean of empty slice.``) or divided zero by zero (``invalid value encountered in scalar
    divide`` / ``divide`` / ``double_scalars``) printed before the first of those values.

Why it matters:
    A validation set smaller than the batch size yields no batch at all when the batching drops the last partial
    batch (``drop_last=True``, or the ``range(0, len(indices) - batch_size + 1, batch_size)`` loop of mlx-examples'
    LoRA trainer and its copies), and so does an empty or missing split, or a filter that removed every example: the
    average is then ``sum([]) / 0``, NaN at every evaluation, while the training is fine. Early stopping and model
    selection on that metric never see an improvement. Nothing in the model is wrong.

Evidence used:
    Events ``empty_reduction``; held-out and training loss series.

Remedies:
    Count the evaluation batches before training; make the eval batch size at most the eval set's size, or keep the
    last partial batch; check the split's path and the filters applied to it.
"""

from __future__ import annotations

from collections.abc import Iterable

from autopsy.metrics import loss_like
from autopsy.model import Evidence, Finding, Run
from detectors._common import HELD_OUT, event_evidence, fmt, points

CODE = "DATA003"
SLUG = "empty-evaluation"
ROOT_CAUSE = "data_exhausted"
NEEDS = ("scalars", "events")

REMEDIES = [
    "Count the evaluation batches before training (len(val_loader), or the batches your loop yields for the "
    "validation file): zero means the average is 0/0.",
    "Make the evaluation batch size at most the number of validation examples, or keep the last partial batch "
    "(drop_last=False); add examples to the validation split.",
    "Check the validation split's path and every filter applied to it (length limits, deduplication): an empty or "
    "fully filtered split gives the same NaN.",
]
REFS = ["https://github.com/instructlab/instructlab/issues/785",
        "https://github.com/PacktPublishing/Hands-On-Deep-Learning-for-Finance/issues/11"]


def detect(run: Run) -> Iterable[Finding]:
    warnings = run.events_of("empty_reduction")
    if not warnings:
        return
    held = [m for m in run.metrics() if (m == "eval_loss" or HELD_OUT.search(m) is not None) and loss_like(m)]
    logged = [(m, p) for m in held if len(p := points(run, m))]
    never = [(m, p) for m, p in logged if not p.finite.any()]
    if not never:
        return
    if len(never) < len(logged):
        return  # another held-out loss has finite values: the evaluation had batches
    train = [points(run, m) for m in run.metrics() if loss_like(m) and m not in held]
    if any(len(p) and not p.finite.all() for p in train):
        return  # the training went non-finite too: NUM001 and the causes of that
    metric, pts = never[0]
    first = pts[0]
    before = [w for w in warnings if w.source != first.source or first.line is None or w.line is None
              or w.line <= first.line]
    if not before:
        return  # a warning after the NaN evaluations is about something else
    w = before[0]
    empty = w.data.get("what") == "empty"
    evidence: list[Evidence] = [
        event_evidence(w, "NumPy: " + ("a mean over an empty array" if empty else "0 divided by 0") + f": \"{w.message.strip()[:200]}\""),
        first.evidence(f"{metric} = {fmt(first.value)} at its first log (step {first.step}) and at all {len(pts)} "
                       "of its logs: never computed from a single batch"),
    ]
    finite_train = [p for p in train if len(p)]
    if finite_train:
        t = max(finite_train, key=len)
        evidence.append(t[-1].evidence(f"the training loss is finite at all {len(t)} logs (last {fmt(t[-1].value)})"))
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7 if empty else 0.62,
        title=f"The evaluation had no batch: {metric} is NaN at every evaluation, an average over nothing",
        message=(f"{metric} is non-finite at each of its {len(pts)} logs from the first"
                 + (" while the training loss is finite" if finite_train else "")
                 + ", and NumPy warned of " + ("a mean of an empty slice" if empty else "a 0/0 division")
                 + f" just before ({w.source} line {w.line}): the evaluation summed no losses and divided by zero "
                 "examples or tokens. A validation set smaller than the batch size (the last partial batch dropped), "
                 "or an empty or fully filtered split, does this."),
        first_step=first.step, evidence=evidence, remedies=list(REMEDIES), references=list(REFS), basis="inferred",
        symptom="eval_nonfinite",
    )

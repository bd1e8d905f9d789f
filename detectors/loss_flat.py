"""Loss flat: the training loss stops moving for good, at chance level or at one value to the last digit.

What it detects:
    The trailing stretch of the ``loss`` series (at least ``MIN_STUCK_LOGS`` logs and ``MIN_STUCK_SHARE`` of them)
    that stays within ``FLAT_REL`` of its last value. It is reported when that value is ``ln(K)`` for a class count
    ``K`` in 2..``MAX_CLASSES`` or ``COMMON_CLASSES`` (the cross-entropy of predicting a uniform distribution over K classes: 2.3026 for 10,
    0.6931 for 2), or when every one of at least ``MIN_IDENTICAL_LOGS`` logs prints the same value. The printed
    resolution must be finer than the tolerance (a loss printed with two decimals can hide a slow descent), and an
    exact 0 is left to the masked-labels detector.

Why it matters:
    A run whose loss never leaves chance level learned nothing, and nothing in the log looks alarming: no NaN, no
    exception. Without this check such a run reads as healthy. The usual reasons are gradients that do not reach the
    weights, a loss fed probabilities instead of logits, a first step large enough to saturate the output, or labels
    that do not match their inputs.

Evidence used:
    ``loss`` series; ``learning_rate`` and ``grad_norm`` when logged (to say which reasons they rule out).

Remedies:
    Log grad_norm and check the optimizer holds the trainable parameters; feed raw logits to CrossEntropyLoss; lower
    the learning rate; check that inputs and labels are paired and that the labels are not one class.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from autopsy.model import Finding, Run
from detectors._common import fmt, points, starts_at_start

CODE = "FLAT001"
SLUG = "loss-flat"
ROOT_CAUSE = None
NEEDS = ("scalars",)

#: logs the loss must stay put, and the share of the run's logs that is
MIN_STUCK_LOGS = 8
MIN_STUCK_SHARE = 0.5
#: "put": within this fraction of the last value (real training noise is well above it)
FLAT_REL = 1e-3
#: class counts whose ln(K) is a chance-level loss (ln K values are 0.01 or more apart up to here)
MAX_CLASSES = 100
#: distance to ln(K) that counts as equal (printed losses have 4 or more decimals)
CHANCE_TOL = 2e-3
#: logs of one identical value that mean the weights are not changing, whatever the value
MIN_IDENTICAL_LOGS = 10


def _resolution(values: np.ndarray) -> float:
    """The finest decimal the values were printed with (1e-4 for 2.3026), from the values themselves."""
    for d in range(0, 9):
        scaled = values * 10 ** d
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-6 * np.maximum(1.0, np.abs(scaled))):
            return 10.0 ** -d
    return 1e-9


#: larger class counts of common datasets (ImageNet-1k and its background class, Tiny ImageNet)
COMMON_CLASSES = (200, 1000, 1001)


def _chance_classes(value: float, tol: float = CHANCE_TOL) -> int | None:
    for k in (*range(2, MAX_CLASSES + 1), *COMMON_CLASSES):
        if abs(value - math.log(k)) <= tol:
            return k
    return None


#: a loss at chance level from the run's start: this many logs at least, each within this fraction of ln(K)
MIN_CHANCE_START_LOGS = 5
CHANCE_START_REL = 5e-3


def _chance_from_start(loss) -> int | None:
    """Every log from the run's start within ``CHANCE_START_REL`` of one ln(K), at least ``MIN_CHANCE_START_LOGS`` of
    them, with no descent (the later half no lower than the earlier): the loss never left chance level (a forum run
    printing "epoch 0 loss = 2.3086 ... epoch 5 loss = 2.3057", dead ReLUs). Looser than the plateau rule: batch noise
    around ln(K) is larger than 0.1%, and an epoch's mean that sits there this long is no slow start."""
    v = loss.values
    if len(v) < MIN_CHANCE_START_LOGS or not starts_at_start(loss) or v[0] <= 0:
        return None
    k = _chance_classes(float(np.median(v)), CHANCE_START_REL * float(np.median(v)))
    if k is None or not np.all(np.abs(v - math.log(k)) <= CHANCE_START_REL * math.log(k)):
        return None
    half = len(v) // 2
    return k if float(np.mean(v[half:])) >= float(np.mean(v[:half])) - CHANCE_START_REL * math.log(k) / 2 else None


def detect(run: Run) -> Iterable[Finding]:
    loss = points(run, "loss").finite_only()
    early = _chance_from_start(loss) if len(loss) < MIN_STUCK_LOGS else None
    if len(loss) < MIN_STUCK_LOGS and early is None:
        return
    values = loss.values
    last = float(values[-1])
    if last == 0.0:
        return  # an exact zero is LBL001's (no supervised token)
    tol = max(FLAT_REL * abs(last), 1e-9)
    if early is not None:
        start, tol = 0, CHANCE_START_REL * math.log(early)
    else:
        start = len(values) - 1
        while start > 0 and abs(values[start - 1] - last) <= tol:
            start -= 1
    stuck = loss[start:]
    n = len(stuck)
    if early is None and (n < MIN_STUCK_LOGS or n < MIN_STUCK_SHARE * len(values)):
        return
    if _resolution(values) > tol:
        return  # printed too coarsely to tell a plateau from a slow descent
    k = early if early is not None else _chance_classes(last)
    identical = bool(np.all(stuck.values == stuck.values[0]))
    if k is None and not (identical and n >= MIN_IDENTICAL_LOGS):
        return
    if k == 2 and any(m.startswith(("rewards/", "logps/")) for m in run.metrics()):
        return  # a preference loss at ln 2 is the preference detectors' to read
    first, end = stuck[0], stuck[-1]
    shown = f"{last:.6g}"  # as printed: 2.3026, not rounded to 2.303 beside ln(10)
    spread = float(stuck.values.max() - stuck.values.min())
    where = f"at every one of the {n} logs from step {first.step} to step {end.step}"
    if k is not None:
        title = f"The loss is stuck at chance level: {shown} = ln({k}) {where}"
        what = (f"the cross-entropy of predicting every one of {k} classes with probability 1/{k}: the model outputs a "
                "uniform distribution and has learned nothing")
    else:
        title = f"The loss never changes: {shown} {where}"
        what = "the same value to the last printed digit: the weights that produce it are not changing"
    lr = points(run, "learning_rate").finite_only()
    gn = points(run, "grad_norm").finite_only()
    notes = []
    if len(lr) and float(np.max(lr.values)) > 0:
        notes.append(f"the learning rate is not zero (up to {fmt(float(np.max(lr.values)))})")
    if len(gn):
        notes.append(f"grad_norm is {fmt(float(gn.values[-1]))} at step {gn[-1].step}")
    evidence = [first.evidence(f"loss {fmt(first.value)} at step {first.step}, the first of {n} logs within "
                               + (f"{fmt(tol)} of ln({k}) = {math.log(k):.4f} from the start" if early is not None else
                                  f"{fmt(tol)} of each other") + f" (spread {fmt(spread)})"),
                end.evidence(f"loss {fmt(end.value)} at step {end.step}: still there at the last log")]
    if start > 0:
        before = loss[start - 1]
        evidence.insert(0, before.evidence(f"loss {fmt(before.value)} at step {before.step}, the last log before it "
                                           "settled"))
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7 if k is not None else 0.6,
        title=title,
        message=(f"The training loss is {shown} {where}: {what}"
                 + (f"; {', and '.join(notes)}" if notes else "") + "."),
        first_step=first.step, evidence=evidence, basis="direct", symptom="loss_flat",
        remedies=[
            "Check that gradients reach the weights: log grad_norm (0 or NaN means none), and check that the optimizer "
            "was built from the model's trainable parameters (requires_grad=True; created after wrapping or .to()).",
            "Feed the loss what it expects: nn.CrossEntropyLoss takes raw logits (no softmax before it) and class "
            "indices in [0, K); a loss on argmax outputs has no gradient.",
            "Lower the learning rate 10x and check input normalization and initialization: a first step that saturates "
            "the output layer (or kills the ReLUs) leaves the net predicting one constant distribution.",
            "Check the data: inputs and labels paired after shuffling/augmentation, and labels not all one class.",
        ],
    )

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
from detectors._common import Series, fmt, fp16_signals, hidden_zero_steps, points, starts_at_start

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
    """The class count K whose ln(K) is nearest ``value`` (to 1e-3), if within ``tol`` (a loose tolerance spans ln(99)
    and ln(100): the nearest one, not the first)."""
    # distances equal to 1e-3 keep the list's order (ln(1000) and ln(1001) are 0.001 apart: ImageNet-1k first)
    ks = (*range(2, MAX_CLASSES + 1), *COMMON_CLASSES)
    near = min(abs(value - math.log(k)) for k in ks)
    if near > tol:
        return None
    return next(k for k in ks if abs(value - math.log(k)) <= near + 1e-3)


def _vocab_chance(run: Run, value: float) -> int | None:
    """The vocabulary size V of a token language model whose loss ``value`` is ln(V) (within ``CHANCE_TOL``): a mean
    token cross-entropy of exactly ln(V) is what constant logits give, every token predicted with probability 1/V.
    The vocabulary is the run's own ``vocab_size`` (config.json, the trainer's settings); None without one."""
    from detectors._common import is_token_lm_run
    from detectors._facts import fact_number

    vocab = fact_number(run, "vocab_size")
    if vocab is None or vocab[0] <= MAX_CLASSES or not is_token_lm_run(run):
        return None
    v = int(vocab[0])
    return v if abs(value - math.log(v)) <= CHANCE_TOL else None


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
    return _chance_band(v)


def _chance_band(v: np.ndarray) -> int | None:
    """The K of a band around ln(K): every value within ``CHANCE_START_REL`` of ln(K) (K from the median), and no
    descent (the later half no lower than the earlier one, to half the tolerance)."""
    k = _chance_classes(float(np.median(v)), CHANCE_START_REL * float(np.median(v)))
    if k is None or not np.all(np.abs(v - math.log(k)) <= CHANCE_START_REL * math.log(k)):
        return None
    half = len(v) // 2
    return k if float(np.mean(v[half:])) >= float(np.mean(v[:half])) - CHANCE_START_REL * math.log(k) / 2 else None


#: a training accuracy at chance for K classes: at most this multiple of 1/K, plus ACC_CHANCE_SLACK
ACC_CHANCE_FACTOR = 1.5
ACC_CHANCE_SLACK = 0.01


def _accuracy_in(run: Run, loss: Series) -> np.ndarray | None:
    """The run's training accuracy logged at the loss's own steps, as fractions (a percent column, any value above 1,
    divided by 100); None when fewer than half of the loss's logs have one."""
    acc = points(run, "accuracy").finite_only()
    if not len(acc):
        return None
    a = acc.values[np.isin(acc.steps, loss.steps)]
    if len(a) * 2 < len(loss):
        return None
    return a / 100.0 if float(np.max(a)) > 1.0 else a


def _chance_with_accuracy(run: Run, loss: Series) -> int | None:
    """At least ``MIN_STUCK_LOGS`` logs, every one within ``CHANCE_START_REL`` of one ln(K), with no descent, and the
    run's own training accuracy at chance beside them (at most 1.5/K + 0.01 at every log): the window need not start
    at the run's start when the accuracy says the same (a pasted tail: donghao.org/2018/05/11/764, CIFAR-100 steps
    199-208 at 4.59-4.63 = ln(100) with accuracy 0). A run passing through ln(K) while it learns shows a descent or
    an accuracy above chance."""
    v = loss.values
    if len(v) < MIN_STUCK_LOGS or v[0] <= 0:
        return None
    k = _chance_band(v)
    if k is None:
        return None
    acc = _accuracy_in(run, loss)
    if acc is None or float(np.max(acc)) > ACC_CHANCE_FACTOR / k + ACC_CHANCE_SLACK:
        return None
    return k


#: trailing logs of exactly 0.0 needed, and the training accuracy below which a zero loss contradicts it
MIN_ZERO_LOGS = 3
ZERO_LOSS_MAX_ACCURACY = 0.9


def _zero_beside_accuracy(run: Run, loss: Series) -> Iterable[Finding]:
    """The loss reaches exactly 0.0 after non-zero logs and stays there (at least ``MIN_ZERO_LOGS`` logs) while the
    run's own training accuracy at those logs stays below ``ZERO_LOSS_MAX_ACCURACY``. A cross-entropy of 0 means every
    prediction is right with probability 1, so the two contradict each other: the loss is not measuring the
    predictions (keras#4032: float16 ``floatx``, loss 0.0049 then 0.0000e+00 at every epoch, acc 0.0987 on MNIST)."""
    v = loss.values
    z = len(v)
    while z > 0 and v[z - 1] == 0.0:
        z -= 1
    zeros = loss[z:]
    if z == 0 or len(zeros) < MIN_ZERO_LOGS or len(hidden_zero_steps(run)):
        return
    acc = _accuracy_in(run, zeros)
    if acc is None or float(np.max(acc)) >= ZERO_LOSS_MAX_ACCURACY:
        return
    before, first, end = loss[z - 1], zeros[0], zeros[-1]
    shown = fmt(float(np.max(acc)))
    # float16 said by the run itself (a dtype, fp16 = true, loss-scale messages): the zero is an underflow
    half = [sig for sig in fp16_signals(run) if sig.strength != "hint"][:1]
    yield Finding(
        code=CODE, name=SLUG, root_cause="fp16_overflow" if half else ROOT_CAUSE, severity="error",
        confidence=0.55 if half else 0.6,
        title=f"The loss is exactly 0 from step {first.step} on while the training accuracy stays at {shown} or less",
        message=(f"The training loss went from {fmt(before.value)} (step {before.step}) to exactly 0 at every one of the "
                 f"{len(zeros)} logs from step {first.step} to step {end.step}, while the run's own training accuracy at "
                 f"those logs is at most {shown}. A cross-entropy of 0 means every prediction is right with probability "
                 "1, so the loss is not measuring the predictions: a value that underflows (float16 training, where an "
                 "epsilon of 1e-7 is 0), an output layer the loss cannot use (a softmax over one unit is always 1), or "
                 "targets the loss never sees."),
        first_step=first.step, basis="direct", symptom="loss_flat",
        evidence=[before.evidence(f"loss {fmt(before.value)} at step {before.step}, the last non-zero log"),
                  first.evidence(f"loss exactly 0 at step {first.step}, and at each of the {len(zeros)} logs to step "
                                 f"{end.step}"),
                  *_accuracy_evidence(run, first.step, end.step), *(sig.evidence for sig in half)],
        remedies=[
            "Train in float32 (or mixed precision with loss scaling) instead of pure float16; Keras: raise the fuzz "
            "factor (K.set_epsilon(1e-4)) when float16 is required.",
            "Match the loss to the output layer: categorical cross-entropy needs one unit per class (a Dense(1) softmax "
            "always outputs 1); a binary output needs a sigmoid and binary cross-entropy.",
            "Check that the targets reach the loss (not all masked or ignored, paired with their inputs) by printing "
            "one batch's loss and predictions by hand.",
        ],
    )


def _top_accuracy(run: Run, lo: int | None, hi: int | None):  # noqa: ANN202 - a Point or None
    """The highest training accuracy logged from step ``lo`` to step ``hi``."""
    acc = points(run, "accuracy").finite_only()
    inside = acc[int(np.searchsorted(acc.steps, lo)):int(np.searchsorted(acc.steps, hi, "right"))]
    return inside[int(np.argmax(inside.values))] if len(inside) else None


def _accuracy_evidence(run: Run, lo: int | None, hi: int | None) -> list:
    top = _top_accuracy(run, lo, hi)
    return [] if top is None else [top.evidence(f"training accuracy {fmt(top.value)} at step {top.step}, the highest "
                                                "over these logs")]


#: an evaluation at chance is judged for class counts up to this (their ln(K) lie >= 0.095 apart)
EVAL_CHANCE_MAX_CLASSES = 10
EVAL_CHANCE_TOL = 1e-3


def _eval_at_chance(run: Run) -> Finding | None:
    """A run whose training loss is too short to judge (a pasted evaluation result, XLNet's ``Eval result | eval_accuracy
    0.2554 | eval_loss 1.38627 | global_step 4000``) but whose last evaluation, after training (step > 0), has a loss
    within ``EVAL_CHANCE_TOL`` of ln(K) for a small K and an accuracy at chance for K beside it (at most 1.5/K + 0.01),
    with no earlier evaluation below that level: two measures that say the same thing, the model's predictions are the
    uniform distribution it started from. A freshly initialised head evaluated before training (step 0) is not judged."""
    ev = points(run, "eval_loss").finite_only()
    if not len(ev) or ev[-1].step is None or ev[-1].step <= 0:
        return None
    last = ev[-1]
    k = _chance_classes(last.value, EVAL_CHANCE_TOL)
    if k is None or k > EVAL_CHANCE_MAX_CLASSES or float(np.min(ev.values)) < math.log(k) - EVAL_CHANCE_TOL:
        return None
    acc = points(run, "eval_accuracy").finite_only()
    at = acc.select(acc.steps == last.step) if len(acc) else acc
    if not len(at):
        return None
    a = at[-1]
    share = a.value / 100.0 if a.value > 1.0 else a.value
    if share > ACC_CHANCE_FACTOR / k + ACC_CHANCE_SLACK:
        return None
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.65,
        title=f"The evaluation is at chance level at step {last.step}: loss {last.value:.6g} = ln({k}), accuracy {fmt(a.value)}",
        message=(f"At step {last.step} the evaluation loss is {last.value:.6g} (ln({k}) = {math.log(k):.5f}) and the "
                 f"evaluation accuracy {fmt(a.value)} (chance for {k} classes: {fmt(1 / k)}): the cross-entropy of "
                 f"predicting every one of {k} classes with probability 1/{k}. After {last.step} steps the model outputs "
                 "a uniform distribution and has learned nothing; a learning rate too large for fine-tuning (the "
                 "classifier collapses to one constant output), gradients that do not reach the weights, or labels that "
                 "do not match their inputs are the usual reasons."),
        first_step=last.step, basis="direct", symptom="loss_flat",
        evidence=[last.evidence(f"evaluation loss {last.value:.6g} at step {last.step}, within {EVAL_CHANCE_TOL:g} of "
                                f"ln({k}) = {math.log(k):.5f}"),
                  a.evidence(f"evaluation accuracy {fmt(a.value)} at step {a.step}: chance for {k} classes is {fmt(1 / k)}")],
        remedies=[
            "Lower the learning rate (BERT-style fine-tuning: 1e-5..5e-5 with warmup): a step too large sends the "
            "classifier to one constant output it never leaves.",
            "Check that gradients reach the weights: log the training loss and grad_norm, and check that the optimizer "
            "holds the model's trainable parameters.",
            "Check the data: inputs and labels paired, and labels not all one class.",
        ],
    )


#: evaluations needed to call a classifier's predictions constant, and the equality tolerance of its accuracies
CONST_EVALS = 4
CONST_TOL = 1e-6


def _eval_constant_binary(run: Run) -> Finding | None:
    """A binary classifier that predicts one class at every evaluation: at least ``CONST_EVALS`` evaluations whose
    accuracy is always one of two values a and 1 - a (the two class shares: all-negative scores the negatives' share,
    all-positive the positives'; one value alone when it never switches) and whose loss never goes below ln 2, the
    cross-entropy of a coin. A model that learned anything scores other accuracies (a BERT fine-tune at lr 0.05,
    tests/test_constant_predictions.py: 0.48 and 0.52 on a 52%-positive set, eval_loss 0.70-0.87)."""
    acc = points(run, "eval_accuracy").finite_only()
    if len(acc) < CONST_EVALS:
        return None
    a = acc.values / 100.0 if float(np.max(acc.values)) > 1.0 else acc.values
    lo = float(np.min(a))
    hi = float(np.max(a))
    if not (np.all((np.abs(a - lo) <= CONST_TOL) | (np.abs(a - hi) <= CONST_TOL))
            and (hi - lo <= CONST_TOL or abs(lo + hi - 1.0) <= CONST_TOL)) or not 0.0 < lo <= hi < 1.0:
        return None
    ev = points(run, "eval_loss").finite_only()
    if len(ev) and float(np.min(ev.values)) < math.log(2) - CHANCE_TOL:
        return None  # a loss below a coin's: the probabilities carry something, whatever the argmax says
    shares = f"{fmt(lo)} or {fmt(hi)}" if hi - lo > CONST_TOL else fmt(lo)
    first, last = acc[0], acc[-1]
    evidence = [first.evidence(f"eval_accuracy {fmt(first.value)} at step {first.step}"),
                last.evidence(f"eval_accuracy {fmt(last.value)} at step {last.step}: {shares} at every one of the "
                              f"{len(acc)} evaluations" + (", the two summing to 1" if hi - lo > CONST_TOL else ""))]
    if len(ev):
        best = ev[int(np.argmin(ev.values))]
        evidence.append(best.evidence(f"eval_loss at best {fmt(best.value)} (step {best.step}): never below ln 2 = 0.6931, "
                                      "a coin's cross-entropy"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.65,
        title=f"The classifier predicts one class at every evaluation: eval_accuracy {shares} at all {len(acc)} evaluations",
        message=(f"eval_accuracy is {shares} at every one of the {len(acc)} evaluations (steps {first.step}-{last.step})"
                 + (", two values that sum to 1: the share of each class, which is what predicting all of one class "
                    "scores, the prediction switching between the two" if hi - lo > CONST_TOL else
                    ": the same value each time, the share of the class it always predicts")
                 + (", and the evaluation loss never goes below ln 2" if len(ev) else "")
                 + ". The model outputs one class whatever the input: it learned nothing. A learning rate too large "
                   "for fine-tuning (the classifier collapses to one constant output), gradients that do not reach "
                   "the weights, or labels that do not match their inputs are the usual reasons."),
        first_step=first.step, evidence=evidence, basis="direct", symptom="loss_flat",
        remedies=[
            "Lower the learning rate (BERT-style fine-tuning: 1e-5..5e-5 with warmup): a step too large sends the "
            "classifier to one constant output it never leaves.",
            "Check that gradients reach the weights (grad_norm above 0; the optimizer holds the model's parameters).",
            "Check the data: inputs and labels paired after shuffling, and both classes present in training.",
        ],
    )


def detect(run: Run) -> Iterable[Finding]:
    const = _eval_constant_binary(run)
    if const is not None:
        yield const
        return
    loss = points(run, "loss").finite_only()
    if len(loss) and loss.values[-1] == 0.0:
        # an exact zero from the start is LBL001's (no supervised token); one reached after other values, with the
        # run's own accuracy far from perfect beside it, is a loss that measures nothing
        yield from _zero_beside_accuracy(run, loss)
        return
    early = _chance_from_start(loss) if len(loss) < MIN_STUCK_LOGS else None
    with_acc = False  # the chance window is the accuracy's (not necessarily from the run's start)
    if len(loss) < MIN_STUCK_LOGS and early is None:
        got = _eval_at_chance(run)
        if got is not None:
            yield got
        return
    values = loss.values
    last = float(values[-1])  # not 0.0: a last zero is LBL001's or _zero_beside_accuracy's (above)
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
        early = _chance_with_accuracy(run, loss)
        if early is None:
            return
        with_acc, start, tol = True, 0, CHANCE_START_REL * math.log(early)
        stuck, n = loss, len(loss)
    if _resolution(values) > tol:
        return  # printed too coarsely to tell a plateau from a slow descent
    k = early if early is not None else (_chance_classes(last) or _vocab_chance(run, last))
    identical = bool(np.all(stuck.values == stuck.values[0]))
    if k is None and not (identical and n >= MIN_IDENTICAL_LOGS):
        return
    if k == 2 and any(m.startswith(("rewards/", "logps/")) for m in run.metrics()):
        return  # a preference loss at ln 2 is the preference detectors' to read
    first, end = stuck[0], stuck[-1]
    shown = f"{last:.6g}"  # as printed: 2.3026, not rounded to 2.303 beside ln(10)
    spread = float(stuck.values.max() - stuck.values.min())
    where = f"at every one of the {n} logs from step {first.step} to step {end.step}"
    if early is not None and spread > 0:  # a band around ln(K), not one value: say so
        shown = f"between {float(stuck.values.min()):.6g} and {float(stuck.values.max()):.6g}"
        where = f"at every one of the {n} logs from step {first.step} to step {end.step} (ln({k}) = {math.log(k):.4f})"
    vocab = k is not None and k > MAX_CLASSES and k not in COMMON_CLASSES  # a token LM's vocabulary (_vocab_chance)
    if vocab:
        title = f"The loss is stuck at ln(vocab_size {k}) = {math.log(k):.4f}: {shown} {where}"
        what = (f"the cross-entropy of constant logits, every one of the {k} tokens of the vocabulary predicted with "
                f"probability 1/{k}: the output no longer depends on the input (an output layer or final norm at zero, "
                "hidden states that died), whatever the learning rate")
    elif k is not None:
        title = f"The loss is stuck at chance level: {shown}{'' if early is not None and spread > 0 else f' = ln({k})'} {where}"
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
                               + (f"{fmt(tol)} of ln({k}) = {math.log(k):.4f}"
                                  + (" in every log read" if with_acc else " from the start") if early is not None else
                                  f"{fmt(tol)} of each other") + f" (spread {fmt(spread)})"),
                end.evidence(f"loss {fmt(end.value)} at step {end.step}: still there at the last log")]
    top = _top_accuracy(run, first.step, end.step) if with_acc and k is not None else None
    if top is not None:
        evidence.append(top.evidence(f"training accuracy at most {fmt(top.value)} (step {top.step}) over these logs: "
                                     f"chance level for {k} classes is {fmt(1 / k)}"))
        notes.append(f"the training accuracy stays at chance beside it (at most {fmt(top.value)})")
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

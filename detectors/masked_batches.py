"""Batches without supervised tokens: isolated exact-zero steps, or an evaluation loss of NaN.

What it detects:
    (1) Logged steps where the training loss and the gradient norm are both exactly 0.0 among
    ordinary, positive losses: the batch had no supervised token (every label -100), so there was
    nothing to learn and no gradient; common with batch size 1 and prompts that fill the length
    budget or lose their completion to truncation. (2) An evaluation loss that is NaN/Inf while
    every training loss is finite: the mean over an eval batch with zero supervised tokens is
    0/0. The whole-run version (loss 0 from the start, tokenization-mismatch warnings) is
    LBL001's. Policy-gradient RL runs are skipped (their loss is 0 by construction at times), and so are runs
    with no sign of token labels (vision, speech, tabular: ``detectors._common.is_token_lm_run``).

Why it matters:
    Each such step is a wasted update at best; in an evaluation it poisons the metric used for
    model selection and early stopping (``eval_loss`` NaN compares as "never better"). It is a
    data problem, and it grows as lengths grow.

Evidence used:
    ``loss``, ``grad_norm``, ``eval_loss`` series; config ``max_seq_length``/``max_length``/
    ``cutoff_len``, ``fp16``.

Remedies:
    Drop (and count) examples whose labels are all -100 after tokenization and truncation; raise
    the length limit or truncate prompts from the left so the completion survives; tokenize the
    response template in context (TRL DataCollatorForCompletionOnlyLM).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    config_evidence,
    fmt,
    hidden_zero_steps,
    is_policy_gradient_run,
    is_token_lm_run,
    points,
    truthy,
)

CODE = "DATA002"
SLUG = "masked-batches"
ROOT_CAUSE = "all_labels_masked"
NEEDS = ("scalars",)

#: at most this share of the logs zero: more is LBL001's "loss 0 from the start", not isolated steps
MAX_ZERO_SHARE = 0.5
LENGTH_KEYS = ("max_seq_length", "max_length", "cutoff_len")


def detect(run: Run) -> Iterable[Finding]:
    if is_policy_gradient_run(run) or not is_token_lm_run(run):
        return  # only token labels can be all -100: elsewhere a NaN eval loss or a zero step has other causes
    yield from _zero_steps(run)
    yield from _eval_nan(run)


def _zero_steps(run: Run) -> Iterable[Finding]:
    loss, gn = points(run, "loss"), points(run, "grad_norm")
    if len(loss) < 3 or not len(gn):
        return
    present, gval = gn.lookup(loss.steps)
    zero = (loss.values == 0.0) & present & (gval == 0.0)
    n = int(zero.sum())
    positive = int((np.isfinite(loss.values) & (loss.values > 0)).sum())
    if not n or n > MAX_ZERO_SHARE * len(loss) or positive < 2:
        return
    idx = np.flatnonzero(zero)
    z = loss[int(idx[0])]
    evidence = [loss[int(i)].evidence(f"loss 0.0 and grad_norm 0.0 at step {loss[int(i)].step}") for i in idx[:4]]
    evidence.append(loss[int(np.flatnonzero(loss.values > 0)[0])].evidence(
        f"other logs are ordinary positive losses ({positive} of {len(loss)})"))
    evidence.extend(_length_facts(run))
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7,
        title=f"{n} step(s) with loss and grad_norm exactly 0: batches without supervised tokens",
        message=(f"{n} of {len(loss)} logged steps have loss 0.0 and grad_norm 0.0 (first at step {z.step}) among "
                 f"{positive} positive losses: those batches had every label masked."),
        first_step=z.step, evidence=evidence, remedies=_remedies(), basis="inferred", symptom="zero_loss",
    )


def _eval_nan(run: Run) -> Iterable[Finding]:
    ev = points(run, "eval_loss")
    if not len(ev) or ev.finite.all():
        return
    train = points(run, "loss")
    if len(train) and not train.finite.all():
        return  # the training itself went non-finite: NUM001 and the causes of that
    if len(hidden_zero_steps(run)):
        return  # ... hidden as 0.0 by HF's logging_nan_inf_filter
    gn = points(run, "grad_norm")
    if len(gn) and int((~gn.finite).sum()) > len(gn) // 2:
        return
    b = ev[int(np.flatnonzero(~ev.finite)[0])]
    if bool(ev.finite[ev.steps < b.step].any()):
        # the Trainer evaluates the same batches each time: a batch with every label masked gives NaN at the first
        # evaluation and at each after it, never after a finite one (then the model changed: NUM001's reading)
        return
    evidence = [b.evidence(f"eval_loss = {fmt(b.value)} at step {b.step} ({int((~ev.finite).sum())} of {len(ev)} evals)")]
    if len(train):
        evidence.append(train[-1].evidence(f"training loss finite at all {len(train)} logs (last {fmt(train[-1].value)})"))
    train_txt = "while every training loss is finite" if len(train) else "(no training loss was logged beside it)"
    facts = _length_facts(run)
    evidence.extend(facts)
    if truthy(run.config.get("fp16_full_eval")):
        # HF's fp16_full_eval casts the whole model to float16 for evaluation (no autocast, no float32 copy): an
        # eval-only NaN beside finite training is that cast overflowing (transformers#10674: T5 with label smoothing,
        # whose sum over the vocabulary passes 65504), more than masked eval batches
        evidence.insert(1, config_evidence(run, "fp16_full_eval", "fp16_full_eval = true: evaluation runs the whole "
                                                                  "model in float16"))
        yield Finding(
            code=CODE, name=SLUG, root_cause="fp16_overflow", severity="error", confidence=0.6,
            title="eval_loss is NaN under fp16_full_eval: the float16 evaluation overflowed",
            message=(f"eval_loss = {fmt(b.value)} at step {b.step} {train_txt}, and evaluation ran the whole model in "
                     "float16 (fp16_full_eval): activations or the loss's sums past 65504 become inf, then NaN; masked "
                     "eval batches (labels all -100) are the other candidate."),
            first_step=b.step, evidence=evidence, basis="inferred", symptom="eval_nonfinite",
            remedies=["Evaluate without fp16_full_eval (fp16 autocast keeps the reductions in float32), or with "
                      "bf16_full_eval on hardware that has bf16.",
                      "Check one eval batch has labels other than -100 to rule out the masked-batch reading."])
        return
    fp16 = truthy(run.config.get("fp16"))
    conf = 0.6 + (0.1 if facts else 0.0) - (0.15 if fp16 else 0.0)
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=conf,
        title="eval_loss is NaN" + (" while training is finite" if len(train) else "") + ": eval batches without supervised tokens",
        message=(f"eval_loss = {fmt(b.value)} at step {b.step} {train_txt}: an evaluation batch "
                 "whose labels are all -100 gives a mean over zero tokens (0/0)"
                 + (" (fp16 is on: an overflow in the eval forward is the other candidate)" if fp16 else "") + "."),
        first_step=b.step, evidence=evidence, remedies=_remedies(), basis="inferred", symptom="eval_nonfinite",
    )


def _length_facts(run: Run) -> list[Evidence]:
    for key in LENGTH_KEYS:
        if run.config.fact(key) is not None:
            return [config_evidence(run, key, f"{key} = {run.config.get(key)}: truncation to this length can remove the "
                                              "whole completion")]
    return []


def _remedies() -> list[str]:
    return ["Drop and count examples whose labels are all -100 after tokenization and truncation (in eval too).",
            "Raise max_seq_length / max_length / cutoff_len, or truncate prompts from the left so the response survives.",
            "With a completion-only collator, pass the response template as token ids tokenized in context."]

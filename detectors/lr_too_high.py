"""Learning rate too high: the loss diverges as the LR reaches its peak, then goes non-finite.

What it detects:
    A failure (a non-finite onset, or a loss that rises to ``DIVERGE_FACTOR`` times its best
    value and never comes back) preceded by the signs of an optimisation blow-up: ``grad_norm``
    growing ``GRAD_GROWTH`` times over its early level, the loss rising before the NaN, the LR at
    or near its peak when it happens (end of warmup), or a peak LR far above the usual range for
    Adam-family fine-tuning; gradient clipping disabled makes it more likely. Silent when the LR
    is tiny at the failure (it cannot be the cause) and for spikes that recover.

Why it matters:
    Too large a step size is the most common cause of divergence; the fix is cheap (lower LR,
    warmup, clipping) but only if the curves are read in order: LR peak, then grad-norm growth,
    then the loss, then NaN.

Evidence used:
    ``learning_rate``, ``grad_norm`` and ``loss`` series; config ``learning_rate``,
    ``max_grad_norm``, ``optim``, ``lora.r``.

Remedies:
    Lower the peak learning rate by 3-10x (Adam-family fine-tuning usually 1e-5..2e-4, LoRA up to
    ~1e-3), add warmup (warmup_ratio 0.03-0.1), clip gradients (max_grad_norm=1.0), and resume from
    the last checkpoint before the divergence.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    DIVERGE_MIN_BEST,
    EXPLODED_RATIO,
    checkpoint_evidence,
    config_evidence,
    divergence_floor,
    fmt,
    fp16_signals,
    is_policy_gradient_run,
    nonfinite_onset,
    num,
    points,
    robust_level,
    value_at,
)
from detectors.knobs import knob, sentence

CODE = "OPT001"
SLUG = "lr-too-high"
ROOT_CAUSE = "lr_too_high"
NEEDS = ("scalars",)

#: logs the loss must stay diverged (to tell divergence from a spike that recovers)
DIVERGE_LOGS = 3
#: grad_norm at 4x its early median before the failure = growing gradients
GRAD_GROWTH = 4.0
#: last loss before the failure 1.3x above its best = rising loss, not a sudden NaN
LOSS_RISE = 1.3
#: a climb into the NaN: the last CLIMB_LOGS finite logs before it each higher than the one before, the last at least
#: CLIMB_RISE x the best: the run diverged first and went non-finite after (ssd.pytorch#7: 15.2 -> 15.5 -> 17.6 -> 31.7
#: -> nan), the shape a too-large step makes
CLIMB_LOGS = 3
CLIMB_RISE = 2.0
#: the failure happens with the LR within 80% of its peak so far (after warmup)
AT_PEAK = 0.8
#: peak LR above these is unusual for Adam-family fine-tuning (full / LoRA)
USUAL_LR_MAX = 1e-3
USUAL_LR_MAX_LORA = 3e-3
#: (the divergence bar itself, DIVERGE_FACTOR and DIVERGE_MIN_BEST, is shared with DIV001: detectors/_common.py)
#: a divergence without NaN and without any other LR sign: the LR is still the usual cause, at this confidence
BARE_DIVERGENCE_CONFIDENCE = 0.55
#: a NaN during the warmup ramp and nothing else: the lead, at the bar for a verdict (diagnosis.MIN_FAILED_CONFIDENCE)
WARMUP_NAN_CONFIDENCE = 0.5
#: below this LR an optimisation blow-up is implausible (mar69: NaN at lr 4e-6 was fp16)
TINY_LR = 1e-5


def _failure(run: Run) -> tuple[int, Evidence] | None:
    onset = nonfinite_onset(run)
    if onset is not None and onset.step is not None:
        return onset.step, onset.evidence
    if is_policy_gradient_run(run):
        return None  # a GRPO/PPO surrogate loss is ~0 or negative by construction: its level says nothing
    loss = points(run, "loss").finite_only()
    v = loss.values
    n = len(v)
    if n < DIVERGE_LOGS:
        return None
    # the first log i where: the best loss so far (first on ties) is > 0, at least DIVERGE_LOGS logs remain,
    # and every log from i to the end is >= DIVERGE_FACTOR x that best (the suffix minimum says "every")
    best_val = np.minimum.accumulate(v)
    is_new = v < np.concatenate(([np.inf], best_val[:-1]))
    best_idx = np.maximum.accumulate(np.where(is_new, np.arange(n), 0))
    suffix_min = np.minimum.accumulate(v[::-1])[::-1]
    floor = divergence_floor(best_val, float(v[0]))
    ok = (best_val > DIVERGE_MIN_BEST) & (np.arange(n) <= n - DIVERGE_LOGS) & (suffix_min >= floor)
    hit = np.flatnonzero(ok)
    if not hit.size:
        return None
    i = int(hit[0])
    p, best = loss[i], loss[int(best_idx[i])]
    return p.step, p.evidence(f"loss {fmt(p.value)} at step {p.step}, {p.value / best.value:.3g}x its best "
                              f"{fmt(best.value)} (step {best.step}), and it never comes back")


def detect(run: Run) -> Iterable[Finding]:
    fail = _failure(run)
    if fail is None:
        return
    step, fail_ev = fail
    lr = points(run, "learning_rate").finite_only()
    gn = points(run, "grad_norm").before(step, inclusive=True).finite_only()
    loss = points(run, "loss").before(step)
    loss = loss.select(loss.finite & (loss.values != 0.0))
    lr_at = value_at(lr, step)
    if lr_at is not None and lr_at.value < TINY_LR:
        return
    signals: list[tuple[str, Evidence]] = []
    if len(gn) >= 3:
        base = robust_level(gn.values[: max(2, len(gn) // 3)])
        late = gn[len(gn) // 3:]
        top = late[late.argmax()]
        if base and top.value >= GRAD_GROWTH * base:
            signals.append(("grad", top.evidence(f"grad_norm grew from ~{fmt(base)} to {fmt(top.value)} at step {top.step}")))
    exploded = climbed = False
    fp16 = bool(fp16_signals(run))  # read once: it looks through the config, the events and the loss scale
    # (two logs do when the second is already EXPLODED_RATIO x the first, several updates apart: 393 -> 1.7e6 -> NaN
    # over 10 iterations in Caffe's SSD; a blow-up in the very next update says the gradient itself was absurd,
    # a model or input bug as much as the step size: dfanet#27, 910 -> 2.9e12 at step 1)
    if len(loss) >= 3 or (len(loss) == 2 and loss.values[0] > 0 and loss.values[1] >= EXPLODED_RATIO * loss.values[0]
                          and loss.steps[1] - loss.steps[0] >= 2):
        best = loss[loss.argmin()]
        last = loss[-1]
        if best.value > 0 and last.value >= LOSS_RISE * best.value and last.step > best.step:
            signals.append(("loss", last.evidence(f"loss rose from {fmt(best.value)} (step {best.step}) to "
                                                  f"{fmt(last.value)} (step {last.step}) before the failure")))
            # a finite loss 1000x its best just before the NaN, with nothing saying fp16 (whose overflow gives
            # inf/NaN or the 1e34-then-0 shape of its own): the updates overshot
            exploded = last.value >= EXPLODED_RATIO * best.value and not fp16
            tail = loss.values[-CLIMB_LOGS:]
            climbed = (len(loss) >= CLIMB_LOGS + 1 and bool(np.all(np.diff(tail) > 0))
                       and last.value >= CLIMB_RISE * best.value and not fp16)
    ramp = False
    if lr_at is not None:
        before = lr.before(step, inclusive=True)
        peak = before[before.argmax()]
        if lr_at.value >= AT_PEAK * peak.value and before[0].value < peak.value:
            signals.append(("peak", peak.evidence(f"lr reached {fmt(peak.value)} at step {peak.step} (up from "
                                                   f"{fmt(before[0].value)} at step {before[0].step}), its peak so far; "
                                                   f"{fmt(lr_at.value)} at the failure")))
            # still climbing at the failure: the last LR log is the highest yet, above the one before it (warmup)
            ramp = len(before) >= 2 and lr_at.value >= peak.value and lr_at.value > before[-2].value
    peak_lr = (float(lr.values.max()) if len(lr) else None) or num(run.config.get("learning_rate"))
    optim = str(run.config.get("optim") or "").lower()
    ck_opt = (run.checkpoint_analysis or {}).get("optimizer")
    if isinstance(ck_opt, dict) and ck_opt.get("family") == "sgd":
        optim = optim or "sgd"  # the saved optimizer's param groups say SGD (momentum/dampening, no betas)
    limit = USUAL_LR_MAX_LORA if run.config.get("lora.r") is not None else USUAL_LR_MAX
    if peak_lr is not None and peak_lr > limit and "sgd" not in optim:
        src = config_evidence(run, "learning_rate", "") if run.config.fact("learning_rate") else (
            lr[lr.argmax()].evidence("") if len(lr) else Evidence("config", "learning_rate", "", config=True))
        src.detail = f"peak learning rate {fmt(peak_lr)} is above the usual range (<= {fmt(limit)}) for Adam-family fine-tuning"
        signals.append(("high", src))
    kinds = {k for k, _ in signals}
    diverged = nonfinite_onset(run) is None  # the failure is the divergence itself (no NaN)
    onset = nonfinite_onset(run)
    # a NaN that comes while the LR is still ramping up (warmup) and stays, with nothing saying fp16 or a bad batch
    # (finite logs after it) and a finite loss logged before it: the LR's own climb is the lead, at the verdict bar
    warmup_nan = (ramp and kinds == {"peak"} and onset is not None and onset.persistent and not onset.recovered
                  and not fp16 and len(loss) >= 1)
    if not diverged and not exploded and not climbed and not warmup_nan and (
            len(kinds) < 2 or not kinds & {"grad", "loss", "high"}):
        return
    clip = num(run.config.get("max_grad_norm"))
    evidence = [e for _, e in signals] + [fail_ev]
    conf = 0.45 + 0.1 * len(kinds) if kinds else BARE_DIVERGENCE_CONFIDENCE
    if warmup_nan:
        conf = WARMUP_NAN_CONFIDENCE
    if run.config.fact("max_grad_norm") is not None and (clip is None or clip <= 0):
        evidence.append(config_evidence(run, "max_grad_norm", "max_grad_norm = 0: gradient clipping is off"))
        conf += 0.05
    ck_ev, resume = checkpoint_evidence(run, step)
    evidence.extend(ck_ev)
    lr_txt = fmt(lr_at.value) if lr_at is not None else (fmt(peak_lr) if peak_lr else None)
    # the configured learning_rate is the schedule's peak (the logged lr may stop just short of it)
    cfg_lr = num(run.config.get("learning_rate"))
    peak_cfg = max(cfg_lr, peak_lr) if cfg_lr and peak_lr else (cfg_lr or peak_lr)
    remedies = [f"Lower the peak learning rate by 3-10x (e.g. {fmt(peak_cfg / 10)} instead of {fmt(peak_cfg)})." if peak_cfg else
                "Lower the peak learning rate by 3-10x.",
                sentence(f"{knob(run, 'warmup')}; {knob(run, 'clip')}")]
    if resume:
        remedies.append(resume[0].upper() + resume[1:] + ".")
    if not peak_cfg and not run.frameworks:
        # no LR read and no trainer recognised: a hand-written loop, whose commonest divergence besides the LR is
        # gradients never zeroed (IBM/aihwkit#446), each update adding every earlier gradient like a growing step
        remedies.append("In a hand-written loop, check that the gradients are zeroed every step (optimizer.zero_grad() "
                        "before loss.backward()): gradients that accumulate make every update larger, as a rising "
                        "learning rate would.")
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=min(conf, 0.85),
        title=f"Learning rate too high: diverged at step {step}" + (f" (lr {lr_txt})" if lr_txt else ""),
        message="; ".join([e.detail for _, e in signals] + [f"then {fail_ev.detail}" if signals else fail_ev.detail]) + (
            ". The LR was still rising (warmup) when it happened, and nothing read says float16 or a bad batch (no "
            "finite log after it): the climb is the lead; a rerun with the peak LR divided by 10 tells" if warmup_nan else "") + ".",
        first_step=step, evidence=evidence, remedies=remedies, basis="inferred", symptom="loss_divergence",
    )

"""LR stalled near zero: the learning rate never leaves ~0, so the model never trains.

What it detects:
    A logged ``learning_rate`` that stays below ``NEAR_ZERO_LR`` (or below ``WARMUP_SHARE_TINY`` of
    the configured peak) at every one of at least ``MIN_LOGS`` logs, with a loss that barely moves.
    It names why when the artifacts say: every optimizer step skipped by the fp16 loss scaler
    (non-finite ``grad_norm`` at most logs or overflow messages: HF and DeepSpeed do not step the
    scheduler on a skipped step, so a warmup that starts at 0 stays at 0), or a warmup longer than
    the run (``warmup_steps`` >= ``max_steps``, or a warmup ratio that ends past the last step).
    A few LR-0 logs at the start that then rise are a normal warmup or early skipped steps (BELLE
    #134, DeepSpeed's first overflows) and stay silent.

Why it matters:
    The run burns its whole budget and saves the initial weights; nothing in the loss looks
    alarming (it is just flat), so it is often reported as "the model didn't learn".

Evidence used:
    ``learning_rate``, ``loss``, ``grad_norm`` series; ``overflow`` events; config ``warmup_steps``,
    ``warmup_ratio``, ``max_steps``, ``learning_rate``, ``fp16``.

Remedies:
    Skipped steps: switch to bf16 (or fp32), or fix what overflows; a warmup longer than the run:
    set ``warmup_steps`` (or ``warmup_ratio``) well below ``max_steps``; a scheduler that never
    stepped: call ``scheduler.step()`` after ``optimizer.step()``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.metrics import LR_NAME
from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    config_evidence,
    count_of,
    event_evidence,
    fmt,
    num,
    points,
    rounded_lr_zero,
    truthy,
    value_at,
)

CODE = "LRZ001"
SLUG = "lr-stalled"
ROOT_CAUSE = "lr_schedule_stalled"
NEEDS = ("scalars", "events")  # events: a trainer's gradient guard skipping every step (_guard_skips_all)
NEEDS_ANY = True

#: below this absolute LR no fine-tuning moves (Adam-family recipes start at ~1e-6)
NEAR_ZERO_LR = 1e-8
#: or below this share of the configured peak at every log: the warmup never got anywhere
WARMUP_SHARE_TINY = 0.01
MIN_LOGS = 5
#: with a warmup as long as the run, a logged LR that never exceeds this trained nothing worth the name
TINY_LOGGED_LR = 1e-6
#: a warmup still rising at every log and still below this LR at the end never reached a useful LR (fine-tuning
#: peaks are >= ~5e-7 even for DPO/GRPO; a rising LR that ends below 1e-7 trained nothing)
WARMUP_NEVER_ENDS_MAX = 1e-7
#: the loss moved by less than this share of its first value: flat
FLAT_SHARE = 0.05
#: share of non-finite grad_norm logs that says the scaler skipped the steps
SKIPPED_SHARE = 0.5


#: a positive LR below this changes no weight (lr x grad is far below the float resolution of any weight): a decay
#: that ran past its useful range (an exponential decay stepped per batch instead of per epoch underflows to 1e-100)
UNDERFLOW_LR = 1e-20
#: an LR group at or above this beside it is training: the tiny one is that group's schedule, not the run's end
LIVE_LR = 1e-7


def _underflowed(run: Run) -> Finding | None:
    """A learning rate decayed to a positive value below ``UNDERFLOW_LR`` at two logs or more, or at one log while
    another LR series of the same step is live. A schedule that ends at its last step sits at exactly 0 (or at a
    float residue at that one step), so one tiny value alone is not enough."""
    names = [m for m in run.metrics() if LR_NAME.search(m.strip())]
    series = {m: points(run, m).finite_only() for m in names}
    for m, pts in series.items():
        tiny = np.flatnonzero((pts.values > 0) & (pts.values < UNDERFLOW_LR))
        if not tiny.size or tiny[-1] != len(pts) - 1:
            continue
        last = pts[-1]
        live = None
        for o, op in series.items():
            if o != m and len(op):
                at = value_at(op, last.step)
                if at is not None and at.step == last.step and at.value >= LIVE_LR:
                    live = (o, at)
                    break
        if tiny.size < 2 and live is None:
            continue
        first = pts[int(tiny[0])]
        evidence = [first.evidence(f"{m} {fmt(first.value)} at step {first.step}")] if tiny.size > 1 else []
        evidence += [last.evidence(f"{m} {fmt(last.value)} at step {last.step}: below {fmt(UNDERFLOW_LR)} at "
                                  f"{tiny.size} of {len(pts)} logs")]
        if live is not None:
            o, at = live
            evidence.append(at.evidence(f"{o} {fmt(at.value)} at step {at.step}: the other group still trains"))
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.75,
            title=f"{m} decayed to {fmt(last.value)}: the weights it drives no longer change",
            message=(f"{m} is {fmt(last.value)} at step {last.step}: an update of lr x gradient that small is far below "
                     "the float resolution of any weight, so the parameters of "
                     + (f"that group have stopped training while {live[0]} is still {fmt(live[1].value)}"
                        if live is not None else "the run have stopped training")
                     + ". A schedule decayed this far is a decay applied too often (an exponential or step decay "
                       "stepped every batch instead of every epoch) or a gamma too small for the run's length."),
            first_step=first.step, evidence=evidence,
            remedies=["Step the LR scheduler at the unit its gamma was chosen for (per epoch, not per batch), or set the "
                      "decay so the LR ends near its intended floor (ExponentialLR gamma ** steps), and resume from a "
                      "checkpoint saved before the LR collapsed.",
                      "Print each parameter group's LR at the first steps and at the end of the schedule."],
            basis="direct", symptom="lr_near_zero",
        )
    return None


#: consecutive skipped updates with an ordinary, finite gradient norm that mean the guard skips every step
MIN_GUARD_SKIPS = 3
#: a norm below this is an ordinary one (an overflowing one is inf, NaN or orders of magnitude larger)
ORDINARY_NORM = 100.0


def _guard_skips_all(run: Run) -> Finding | None:
    """A trainer's own gradient guard skipping the optimizer step at consecutive steps whose gradient norm is finite
    and ordinary (minFM#4: "detected nan/inf/spiky gradient (norm=2.197); skipping optimizer step." at every step, the
    config's threshold 2.0 below the run's usual ~2.2): the weights stop moving while the loss still prints."""
    evs = [e for e in run.events_of("step_skipped") if e.data.get("norm") is not None]
    if sum(e.count for e in evs) < MIN_GUARD_SKIPS:
        return None
    norms = [float(e.data["norm"]) for e in evs]
    if not all(np.isfinite(norms)) or max(norms) >= ORDINARY_NORM:
        return None  # a real overflow or spike: the guard did its job
    steps = [e.step for e in evs]
    if any(x is None for x in steps) or any(b - a not in (0, 1) for a, b in zip(steps, steps[1:])):
        return None  # skips here and there: a spike guard at work, not one that skips every step
    first, last = evs[0], evs[-1]
    lo, hi = min(norms), max(norms)
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.6,
        title=f"The trainer skipped the optimizer step at every step from {first.step} to {last.step}, for gradient "
              f"norms of {fmt(lo)}-{fmt(hi)}",
        message=(f"The training loop's own gradient guard skipped the update at every step it reported "
                 f"(from step {first.step} to step {last.step}), though each gradient norm was finite and ordinary "
                 f"({fmt(lo)} to {fmt(hi)}): its threshold sits below this run's normal gradient norm, so the weights no "
                 "longer change while the loss keeps printing."),
        first_step=first.step, basis="direct", symptom="skipped_steps",
        evidence=[event_evidence(e, f"\"{' '.join(e.message.split())[:160]}\"") for e in (first, last)],
        remedies=["Raise the guard's threshold above the run's usual gradient norm (or make it relative to a running "
                  "average of recent norms), or clip gradients instead of skipping the step.",
                  "A larger batch lowers the gradient noise, and with it how often an ordinary step looks like a spike."])


def detect(run: Run) -> Iterable[Finding]:
    guard = _guard_skips_all(run)
    if guard is not None:
        yield guard
        return
    underflow = _underflowed(run)
    if underflow is not None:
        yield underflow
        return
    lr = points(run, "learning_rate")
    covers = _warmup_covers_run(run)
    if covers is not None:
        yield _warmup_finding(run, lr, covers)
        return
    if 2 <= len(lr) < MIN_LOGS and lr.finite.all():
        few = _zero_at_few_logs(run, lr)
        if few is not None:
            yield few
        return
    if len(lr) < MIN_LOGS or not lr.finite.all():
        return
    peak_cfg = num(run.config.get("learning_rate"))
    limit = max(NEAR_ZERO_LR, WARMUP_SHARE_TINY * peak_cfg) if peak_cfg and peak_cfg > 0 else NEAR_ZERO_LR
    if float(np.max(lr.values)) >= limit and not _warmup_never_ends(lr):
        return
    if float(np.max(np.abs(lr.values))) == 0.0 and rounded_lr_zero(run, lr, limit) is not None:
        return  # zeros printed in fixed point: any LR below the print's last decimal, a working one included
    loss = points(run, "loss").finite_only()
    if len(loss) >= 2:
        first = loss[0].value
        if first and abs(loss[-1].value - first) > FLAT_SHARE * abs(first):
            return  # the loss moves: something trains (a constant-LR run logged in another unit, a frozen lr log)
    evidence: list[Evidence] = [lr[0].evidence(f"learning_rate {fmt(lr[0].value)} at step {lr[0].step}"),
                                lr[-1].evidence(f"learning_rate {fmt(lr[-1].value)} at step {lr[-1].step}: below "
                                                f"{fmt(limit)} at all {len(lr)} logs")]
    if len(loss) >= 2:
        evidence.append(loss[-1].evidence(f"loss {fmt(loss[0].value)} -> {fmt(loss[-1].value)}: flat"))
    gn = points(run, "grad_norm")
    n_bad = int((~gn.finite).sum()) if len(gn) else 0
    overflows = sum(e.count for e in run.events_of("overflow"))
    skipped = (len(gn) and n_bad / len(gn) >= SKIPPED_SHARE) or overflows >= MIN_LOGS
    if skipped:
        if n_bad:
            b = gn[int(np.flatnonzero(~gn.finite)[0])]
            evidence.append(b.evidence(f"grad_norm non-finite at {n_bad} of {len(gn)} logs (first at step {b.step}): "
                                       "the loss scaler skipped those optimizer steps, and the scheduler with them"))
        if overflows:
            evidence.append(Evidence(run.events_of("overflow")[0].source, "overflow messages",
                                     f"{count_of(overflows, 'overflow message')}: skipped steps"))
        fp16 = truthy(run.config.get("fp16"))
        if run.config.fact("fp16") is not None and fp16:
            evidence.append(config_evidence(run, "fp16", "fp16 = true"))
        yield Finding(
            code=CODE, name=SLUG, root_cause="fp16_overflow", severity="error", confidence=0.8 if fp16 else 0.7,
            title="Every step skipped by the fp16 loss scaler: the LR never left 0",
            message=("the learning rate stayed at ~0 for the whole run because the optimizer steps (and the scheduler "
                     f"steps with them) were skipped: grad_norm non-finite at {n_bad} of {len(gn)} logs, "
                     f"{overflows} overflow messages; the model never trained."),
            first_step=lr[0].step, evidence=evidence,
            remedies=["Train in bf16 (Ampere or newer) or fp32; in fp16, keep trainable/LoRA parameters in fp32.",
                      "Check the first steps for an overflow source (a bf16-pretrained model in fp16, a huge LR)."],
            basis="inferred", symptom="lr_near_zero",
        )
        return
    set_tiny = _set_too_small(run, lr, peak_cfg)
    if set_tiny is not None:
        yield set_tiny
        return
    why = _warmup_too_long(run, lr)
    if why is not None:
        evidence.append(why)
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.8 if why is not None else 0.6,
        title="The learning rate never left ~0: the model did not train",
        message=(f"learning_rate stayed below {fmt(limit)} at all {len(lr)} logs (steps {lr[0].step}-{lr[-1].step})"
                 + (f"; {why.detail}" if why is not None else "") + "."),
        first_step=lr[0].step, evidence=evidence,
        remedies=["Make the warmup a small share of the run (warmup_ratio 0.03-0.1, or warmup_steps << max_steps).",
                  "In a custom loop, call scheduler.step() after optimizer.step() and check the LR of the first steps."],
        basis="direct" if why is not None else "inferred", symptom="lr_near_zero",
    )


def _set_too_small(run: Run, lr, peak_cfg: float | None) -> Finding | None:
    """No schedule kept the LR down: the learning rate the run was given is itself below ``NEAR_ZERO_LR`` (the config's
    learning_rate, or, without one, the same positive LR at every log: a constant schedule): a typo or a unit slip
    (1e-10 for 1e-4, a value already scaled), not a warmup or a scheduler."""
    positive = lr.values[lr.values > 0]
    constant = len(positive) == len(lr) and float(np.max(positive)) == float(np.min(positive))
    if peak_cfg is not None and 0 < peak_cfg < NEAR_ZERO_LR:
        value, ev = peak_cfg, config_evidence(run, "learning_rate", f"learning_rate = {fmt(peak_cfg)} in the config")
    elif peak_cfg is None and constant and float(positive[0]) < NEAR_ZERO_LR:
        value, ev = float(positive[0]), lr[-1].evidence(f"learning_rate {fmt(float(positive[0]))} at every one of the "
                                                         f"{len(lr)} logs: a constant LR, not a schedule's ramp")
    else:
        return None
    loss = points(run, "loss").finite_only()
    evidence = [ev, lr[-1].evidence(f"learning_rate {fmt(lr[-1].value)} at step {lr[-1].step}, the last log")]
    if len(loss) >= 2:
        evidence.append(loss[-1].evidence(f"loss {fmt(loss[0].value)} -> {fmt(loss[-1].value)}: flat"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7,
        title=f"The learning rate set is {fmt(value)}: too small for any update to move the weights",
        message=(f"The run was given a learning rate of {fmt(value)} (below {fmt(NEAR_ZERO_LR)}), and the logged LR "
                 f"stays there (steps {lr[0].step}-{lr[-1].step}); no warmup or scheduler kept it down. At that size an "
                 "optimizer step changes the weights by less than their float rounding: the model did not train. A "
                 "typo or a unit slip is the usual reason (1e-10 for 1e-4, an LR divided by the batch size twice)."),
        first_step=lr[0].step, evidence=evidence, basis="direct", symptom="lr_near_zero",
        remedies=["Set the learning rate the recipe means: Adam-family fine-tuning 1e-5..2e-4 (LoRA up to ~1e-3); check "
                  "how the value is parsed and scaled (a command-line string, a per-batch-size scaling rule)."],
    )


def _zero_at_few_logs(run: Run, lr) -> Finding | None:
    """Fewer than MIN_LOGS logs, the learning rate exactly 0 at every one, at different steps, and the loss not falling:
    no update was made at any logged step (vitpose#9: "LR 0.00000000" at the end of each of two whole epochs). Too
    few logs to rule out a warmup that starts later, hence below the confidence of a failure: the run is not called
    healthy, nor this cause certain; a warmup that has started logs a positive LR."""
    if float(np.max(np.abs(lr.values))) != 0.0 or lr[0].step == lr[-1].step:
        return None
    if rounded_lr_zero(run, lr, NEAR_ZERO_LR) is not None:
        return None  # "0.0000": an LR below 5e-5, not a zero
    loss = points(run, "loss").finite_only()
    if len(loss) >= 2 and loss[-1].value < loss[0].value - FLAT_SHARE * abs(loss[0].value):
        return None  # the loss falls: something trains (an LR logged before the scheduler's first step)
    evidence = [lr[0].evidence(f"learning_rate {fmt(lr[0].value)} at step {lr[0].step}"),
                lr[-1].evidence(f"learning_rate {fmt(lr[-1].value)} at step {lr[-1].step}: exactly 0 at all {len(lr)} logs")]
    if len(loss) >= 2:
        evidence.append(loss[-1].evidence(f"loss {fmt(loss[0].value)} -> {fmt(loss[-1].value)}: not falling"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.45,
        title=f"The learning rate is 0 at all {len(lr)} logs (steps {lr[0].step}-{lr[-1].step}): no update was made",
        message=(f"learning_rate is exactly 0 at every log (steps {lr[0].step}-{lr[-1].step}) and the loss is not falling: "
                 "an optimizer step at LR 0 changes no weight. Only a few logs were read, so a warmup that starts later "
                 "is not ruled out, but a schedule that has started logs a positive LR: a scheduler never stepped, a "
                 "warmup or decay multiplied into the LR at every step, or an LR of 0 in the config are the usual causes."),
        first_step=lr[0].step, evidence=evidence, basis="inferred", symptom="lr_near_zero",
        remedies=["Print each parameter group's LR at the first steps; call scheduler.step() after optimizer.step(), and "
                  "check that no factor (layer decay, warmup) is applied to the LR in place at every step.",
                  "Make the warmup a small share of the run (warmup_ratio 0.03-0.1, or warmup_steps << max_steps)."],
    )


def _warmup_covers_run(run: Run) -> Evidence | None:
    """The configuration itself: a warmup as long as the run (``warmup_steps >= max_steps``; detectron2's
    WARMUP_ITERS = MAX_ITER) never reaches the peak LR, whatever the logs show."""
    warm = num(run.config.get("warmup_steps"))
    max_steps = num(run.config.get("max_steps"))
    if warm and max_steps and 0 < max_steps <= warm:
        return config_evidence(run, "warmup_steps", f"warmup_steps = {int(warm)} >= max_steps = {int(max_steps)}: the "
                               "warmup lasts the whole run, the LR never reaches its peak")
    return None


def _warmup_finding(run: Run, lr, covers: Evidence) -> Finding:
    evidence = [covers]
    fin = lr.finite_only() if len(lr) else lr
    tiny = bool(len(fin)) and float(np.max(fin.values)) < TINY_LOGGED_LR
    if len(fin):
        evidence.append(fin[-1].evidence(f"learning_rate {fmt(fin[0].value)} (step {fin[0].step}) -> {fmt(fin[-1].value)} "
                                         f"(step {fin[-1].step})" + (": never above ~0" if tiny else "")))
    loss = points(run, "loss").finite_only()
    if len(loss) >= 2:
        evidence.append(loss[-1].evidence(f"loss {fmt(loss[0].value)} -> {fmt(loss[-1].value)}"))
    severe = tiny or not len(fin)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error" if severe else "warning",
        confidence=0.75 if tiny else (0.6 if severe else 0.45),
        title="The warmup lasts the whole run: the learning rate never reaches its peak",
        message="; ".join(e.detail for e in evidence) + ".",
        first_step=fin[0].step if len(fin) else None, evidence=evidence, basis="direct", symptom="lr_near_zero",
        remedies=["Make the warmup a small share of the run (warmup_ratio 0.03-0.1, or warmup_steps/WARMUP_ITERS << "
                  "max_steps/MAX_ITER)."],
    )


def _warmup_never_ends(lr) -> bool:
    """A linear warmup still climbing at the last log, never past a tiny LR: the schedule never reached its peak."""
    v = lr.values
    if float(v.max()) >= WARMUP_NEVER_ENDS_MAX or len(v) < MIN_LOGS:
        return False
    d = np.diff(v)
    return bool((d > 0).all()) and float(d[-1]) >= 0.5 * float(np.median(d))


def _warmup_too_long(run: Run, lr) -> Evidence | None:
    """A warmup far longer than the logged run (max_steps unknown; warmup >= max_steps is _warmup_covers_run's)."""
    warm = num(run.config.get("warmup_steps"))
    max_steps = num(run.config.get("max_steps"))
    last = lr[-1].step
    if warm and warm > 10 * max(last, 1):
        return config_evidence(run, "warmup_steps", f"warmup_steps = {int(warm)}, but the run ends at step "
                               f"{int(max_steps) if max_steps and max_steps > 0 else last}: the warmup never finishes")
    return None

"""Loss divergence without NaN: the loss climbs far above its early best and never comes back.

What it detects:
    A training loss that rises to ``DIVERGE_FACTOR`` times its early best and stays at or above
    it for the rest of the run (at least ``MIN_LOGS_AFTER`` logs), or plateaus there; and, after
    warmup, repeated spikes far above the run's own running level (``SPIKE_FACTOR`` x the median
    of the preceding window) while the LR is far above the usual range. Everything is judged
    against the run's own early behaviour: healthy noise, slow decreases and normal plateaus
    stay silent, and policy-gradient RL losses (GRPO/PPO, ~0 or negative by construction) are not
    judged at all.

Why it matters:
    Not every failed run goes NaN. A loss that climbs from 1.2 to 6 and stays there (AdamW with
    an LR 10-100x too high, bf16 so nothing overflows) is as dead as a NaN run, and a tool that
    only looks for NaN calls it healthy.

Evidence used:
    ``loss`` series (with the learning rate at the divergence when logged).

Remedies:
    The cause is usually the step size: lower the peak LR 3-10x, add warmup and clipping, and
    resume from the checkpoint saved before the divergence; if the LR is ordinary, look at the
    data order (a shard of bad samples) and the precision.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Finding, Run
from detectors._common import (
    DIVERGE_FACTOR,
    DIVERGE_MIN_BEST,
    EXPLODED_RATIO,
    PERPLEXITY,
    WATCHED,
    divergence_floor,
    event_evidence,
    fmt,
    is_policy_gradient_run,
    latest_attempt,
    loss_like,
    nonfinite_onset,
    points,
    value_at,
)
from detectors.knobs import knob, sentence

CODE = "DIV001"
SLUG = "loss-divergence"
ROOT_CAUSE = None
NEEDS = ("scalars", "events")  # events: a trainer's own divergence check (_guard_stop)
NEEDS_ANY = True

#: logs the loss must stay diverged, so a spike that recovers is not divergence
MIN_LOGS_AFTER = 3
#: the "early best" is the best of the first third of the run (at least this many logs)
EARLY_SHARE = 1 / 3
MIN_EARLY = 3
#: a spike is a log this many times the median of the preceding SPIKE_WINDOW logs
SPIKE_FACTOR = 3.0
SPIKE_WINDOW = 10
MIN_SPIKES = 3
#: values no converging run logs: a loss this large beside a run that once logged 1000x less, or any
#: gradient norm this large (unscaled norms are O(1)-O(1e3); even a GradScaler-scaled norm stays < 1e9)
EXPLODED_LOSS = 1e8
EXPLODED_GRAD = 1e10
#: a loss this far from zero, of either sign, is beyond anything a loss computes (a mean cross-entropy stays below
#: ~20, an MSE on raw units rarely passes 1e12; float32 ends at 3.4e38): judged from one log, with no ratio to the
#: run's own level (ESPnet's CTC term at -5.7e35 in every log of espnet#2669)
ABSURD_LOSS = 1e20
#: a loss term this small (in magnitude) at the step where another term exploded is ordinary: the shared weights are fine
ORDINARY_TERM = 1e4
#: a late rise: the smoothed loss climbs for the last LATE_RISE_LOGS logs, LATE_RISE_SHARE above its minimum,
#: and the minimum lies in the first LATE_MIN_SHARE of the run (a run that stopped improving and went back up)
LATE_RISE_LOGS = 4
LATE_RISE_SHARE = 0.05
LATE_MIN_SHARE = 0.7
MIN_LATE_LOGS = 6


def detect(run: Run) -> Iterable[Finding]:
    if nonfinite_onset(run) is not None or is_policy_gradient_run(run):
        return  # NaN runs are NUM001/OPT001's; RL surrogate losses are not judged by level
    found = list(_from_series(run))
    if not found:
        swing = _oscillation(run, "loss") or _oscillation(run, "eval_loss")
        found = [swing] if swing is not None else []
    yield from found
    if not found:
        guard = _guard_stop(run)
        if guard is not None:
            yield guard
        collapse = _eval_collapsed(run)
        if collapse is not None:
            yield collapse


def _guard_stop(run: Run) -> Finding | None:
    """A trainer's own divergence check stopped the run (retinanet-examples: "RuntimeError: Loss is diverging! Try
    lowering the learning rate."), with no non-finite value and no divergence the logged series shows by itself (a
    check on the step's own loss fires before the log does)."""
    evs = run.events_of("loss_diverged")
    if not evs:
        return None
    ev = evs[0]
    # the run's loss, else its loss terms (retinanet-examples logs focal and box losses only)
    name = "loss" if "loss" in run.metrics() else next((m for m in sorted(run.metrics()) if loss_like(m)), "loss")
    loss = latest_attempt(points(run, name)).finite_only()
    step = ev.step if ev.step is not None else (loss[-1].step if len(loss) else None)
    evidence = [event_evidence(ev, f"\"{' '.join(ev.message.split())[:200]}\": the trainer's divergence check")]
    lr = points(run, "learning_rate").finite_only()
    if len(loss):
        last = loss[-1]
        at = value_at(lr, last.step) if len(lr) else None
        evidence.insert(0, last.evidence(f"last logged {name} {fmt(last.value)} at step {last.step}"
                                         + (f" (lr {fmt(at.value)})" if at is not None else "")))
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.55,
        title="The trainer's divergence check stopped the run" + (f" after step {step}" if step is not None else ""),
        message=("The run was stopped by the training loop's own check that the loss is diverging (it grew past the "
                 "check's bound; nothing had to go NaN). A step size too large for this setup is the usual cause: a "
                 "learning rate tuned for more GPUs (a larger global batch) or with a longer warmup; a bad batch and "
                 "precision are the others."),
        first_step=step, evidence=evidence,
        remedies=[sentence("Lower the peak learning rate 3-10x (scale it with the global batch when using fewer GPUs); "
                           f"{knob(run, 'warmup')}; {knob(run, 'clip')}")],
        basis="direct", symptom="loss_divergence",
    )


def _from_series(run: Run) -> Iterable[Finding]:
    loss = latest_attempt(points(run, "loss")).finite_only()
    floor = _softmax_floor(loss) or _softmax_floor(latest_attempt(points(run, "eval_loss")).finite_only(), "eval_loss")
    if floor is not None:
        yield floor
        return
    exploded = _exploded(run, loss)
    if exploded is not None:
        yield exploded
        return
    n = len(loss)
    if n < MIN_EARLY + MIN_LOGS_AFTER:
        short = _short_climb(run, loss)
        if short is not None:
            yield short
        return
    v = loss.values
    n_early = max(MIN_EARLY, int(n * EARLY_SHARE))
    early_idx = int(np.argmin(v[:n_early]))
    best = loss[early_idx]
    if best.value <= DIVERGE_MIN_BEST:
        return
    suffix_min = np.minimum.accumulate(v[::-1])[::-1]
    floor = float(divergence_floor(best.value, float(v[0])))
    hit = np.flatnonzero((np.arange(n) > early_idx) & (np.arange(n) <= n - MIN_LOGS_AFTER) & (suffix_min >= floor))
    if hit.size:
        i = int(hit[0])
        p, last, top = loss[i], loss[-1], loss[int(np.argmax(v))]
        lr = value_at(points(run, "learning_rate").finite_only(), p.step)
        lr_txt = f" (lr {fmt(lr.value)} there)" if lr is not None else ""
        evidence = [best.evidence(f"early best loss {fmt(best.value)} at step {best.step}"),
                    p.evidence(f"loss {fmt(p.value)} at step {p.step}{lr_txt}, {p.value / best.value:.3g}x the early best, "
                               f"and at or above {DIVERGE_FACTOR:g}x for all {n - i} logs to the end"),
                    top.evidence(f"highest loss {fmt(top.value)} at step {top.step}"),
                    last.evidence(f"last loss {fmt(last.value)} at step {last.step}")]
        # the symptom is certain (0.85); as a cause, a step size too large is the usual reading of a loss thrown out of
        # its basin for good with nothing non-finite (a bad data shard, a framework bug are the others): said at 0.5
        yield Finding(
            code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5,
            title=f"Loss diverged at step {p.step} without going NaN ({fmt(best.value)} -> {fmt(last.value)})",
            message=(f"the loss rose from its early best {fmt(best.value)} (step {best.step}) to {fmt(p.value)} at step "
                     f"{p.step} and stayed >= {DIVERGE_FACTOR:g}x it for the remaining {n - i} logs (last {fmt(last.value)}): "
                     "a step size too large for the run is the usual cause; a shard of bad samples reached at that step, "
                     "or a framework bug, are the others."),
            first_step=p.step, evidence=evidence,
            remedies=[sentence("Resume from the checkpoint saved before the divergence with a 3-10x lower peak LR; "
                               f"{knob(run, 'warmup')}; {knob(run, 'clip')}")],
            basis="inferred", symptom="loss_divergence",
        )
        return
    rise = _late_rise(run, loss) or _ends_spiked(run, loss)
    if rise is not None:
        yield rise
        return
    yield from _spikes(run, loss)


#: a paste too short for the rules above (3-5 logs) that ends this many times its best, rising at each of its last two
#: logs: the loss is running away as the paste ends (noise around a level, 2.58 -> 3.12 -> 2.57 -> 3.36, is not)
SHORT_CLIMB = 4.0


def _short_climb(run: Run, loss) -> Finding | None:
    """A short paste whose loss climbs to >= SHORT_CLIMB x its best over its last logs (PaddleDetection#6048: 4.83 ->
    4.72 -> 8.42 -> 21.5 while the warmup raises the LR); a candidate below the failure confidence unless the LR is
    logged and rising there (a warmup reaching a step size the run cannot take)."""
    v = loss.values
    if len(v) < 3 or not (v[-1] > v[-2] > v[-3]):
        return None
    i = int(np.argmin(v))
    best, last = loss[i], loss[-1]
    if best.value <= DIVERGE_MIN_BEST or last.value < SHORT_CLIMB * best.value or i >= len(v) - 2:
        return None
    lr = points(run, "learning_rate").finite_only()
    at_best, at_last = value_at(lr, best.step), value_at(lr, last.step)
    rising = at_best is not None and at_last is not None and at_last.value > at_best.value >= 0
    evidence = [best.evidence(f"lowest loss {fmt(best.value)} at step {best.step}"
                              + (f" (lr {fmt(at_best.value)})" if at_best is not None else "")),
                last.evidence(f"loss {fmt(last.value)} at step {last.step}, {last.value / best.value:.3g}x the lowest, rising "
                              "at each of the last two logs" + (f" (lr {fmt(at_last.value)})" if at_last is not None else ""))]
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5 if rising else 0.45,
        title=f"Loss climbing to {fmt(last.value)} at step {last.step} ({last.value / best.value:.3g}x its lowest)",
        message=(f"the loss rose from {fmt(best.value)} (step {best.step}) to {fmt(last.value)} (step {last.step}), higher at "
                 "each of the last two logs"
                 + (f", while the learning rate rose from {fmt(at_best.value)} to {fmt(at_last.value)} (a warmup reaching a "
                    "step size the run cannot take)" if rising else "")
                 + ": a loss running away as the log ends; only a few logs were read."),
        first_step=last.step, evidence=evidence,
        remedies=[sentence("Lower the peak learning rate 3-10x (scale it with the global batch when using fewer GPUs)"
                           + ("; the warmup is what raised it: make it longer too" if rising else f"; {knob(run, 'warmup')}")
                           + f"; {knob(run, 'clip')}")],
        basis="inferred", symptom="loss_divergence",
    )


#: Caffe's SoftmaxWithLoss clamps each probability at FLT_MIN: -ln(1.17549435e-38) = 87.3365 is the largest loss a
#: sample can give, so a batch loss of exactly that is every sample at the clamp (the logits blew up, NaN included)
SOFTMAX_FLOOR = -math.log(1.17549435e-38)
#: logs pinned there (the last ones of the run); a test pass is already the mean over its test_iter batches, so one
#: test loss at the ceiling is every test sample saturated
MIN_FLOOR_LOGS = {"loss": 2, "eval_loss": 1}


def _softmax_floor(loss, name: str = "loss") -> Finding | None:
    """The loss (else the test loss) pinned at Caffe's softmax floor 87.3365 for its last logs: the outputs diverged."""
    v = loss.values
    at = np.abs(v - SOFTMAX_FLOOR) < 5e-4
    need = MIN_FLOOR_LOGS[name]
    if len(v) < need or not bool(at[-need:].all()):
        return None
    first = int(np.flatnonzero(~at)[-1]) + 1 if (~at).any() else 0
    p, last = loss[first], loss[-1]
    before = loss[first - 1] if first > 0 else None
    what = "loss" if name == "loss" else "test loss"
    ev = [p.evidence(f"{what} {fmt(p.value)} at step {p.step} = -ln(FLT_MIN), Caffe's softmax-loss ceiling: every "
                     "sample's true-class probability clamped at FLT_MIN")]
    if len(v) - 1 > first:
        ev.append(last.evidence(f"still {fmt(last.value)} at step {last.step} ({len(v) - first} logs)"))
    if before is not None:
        ev.insert(0, before.evidence(f"{what} {fmt(before.value)} at step {before.step}, before it pinned"))
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5,
        title=f"{what.capitalize()} pinned at 87.3365 from step {p.step}: the softmax saturated (the outputs diverged)",
        message=(f"the {what} is 87.3365 = -ln(FLT_MIN) at {len(v) - first} log(s) from step {p.step}: Caffe's SoftmaxWithLoss "
                 "clamps each probability at FLT_MIN, so this is every sample predicted with probability ~0 for its "
                 "label, the logits blown up (or NaN). The usual cause is a learning rate too high for the net and "
                 "batch; unnormalised inputs and labels outside [0, num_output) give it too."),
        first_step=p.step, evidence=ev,
        remedies=["Lower base_lr 10x (and raise it back gradually), or add a warmup; clip gradients (clip_gradients).",
                  "Check the inputs are scaled (mean subtraction / scale in the data layer) and the labels lie in "
                  "[0, num_output)."],
        basis="inferred", symptom="loss_divergence",
    )


#: the log ends at this many times the median of the logs before its last one (and it is the highest of the run) ...
END_SPIKE = 5.0
#: ... after another jump of >= SPIKE_FACTOR x that median among the last END_WINDOW logs: spiking again and higher
END_WINDOW = 5
MIN_END_LOGS = 5


def _ends_spiked(run: Run, loss) -> Finding | None:
    """The loss jumped far above its level, fell back, and at the end of the log is higher still: a run that is
    leaving its basin (the first spike alone would be noise; the last log is its highest)."""
    n = len(loss)
    if n < MIN_END_LOGS:
        return None
    v = loss.values
    level = float(np.median(v[:-1]))
    last = loss[-1]
    if level <= DIVERGE_MIN_BEST or last.value < END_SPIKE * level or last.value < float(v.max()):
        return None
    earlier = [i for i in range(max(0, n - END_WINDOW), n - 1) if v[i] >= SPIKE_FACTOR * level]
    if not earlier:
        return None
    first = loss[earlier[0]]
    lr = value_at(points(run, "learning_rate").finite_only(), first.step)
    lr_txt = f" (lr {fmt(lr.value)})" if lr is not None else ""
    ev = [first.evidence(f"loss {fmt(first.value)} at step {first.step}{lr_txt}, {first.value / level:.3g}x the median "
                         f"{fmt(level)} of the logs before the end"),
          last.evidence(f"last loss {fmt(last.value)} at step {last.step}, {last.value / level:.3g}x that level and the "
                        "highest of the run")]
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5,
        title=f"Loss leaving its level: {fmt(level)} -> {fmt(first.value)} at step {first.step}, {fmt(last.value)} at "
              f"the end",
        message=(f"the loss, around {fmt(level)}, jumped to {fmt(first.value)} at step {first.step} and ends higher still "
                 f"({fmt(last.value)} at step {last.step}): repeated, growing spikes are how a too-large step size "
                 "throws a run out of its basin."),
        first_step=first.step, evidence=ev,
        remedies=[sentence("Lower the peak learning rate 3-10x (LoRA recipes' 2e-4 is often too high for a small task "
                           f"set); {knob(run, 'clip')}; resume from a checkpoint before the first spike"),
                  "If the spikes sit on particular batches, check those samples."],
        basis="inferred", symptom="loss_divergence",
    )


def _blown(values: np.ndarray) -> int | None:
    """Index of the log of largest magnitude when it is exploded: absurd by itself (``ABSURD_LOSS``), or past
    ``EXPLODED_LOSS`` and ``EXPLODED_RATIO`` x the smallest magnitude the series logged (or its only log)."""
    if not len(values):
        return None
    mag = np.abs(values)
    i = int(np.argmax(mag))
    low = max(float(np.min(mag)), 1e-12)
    if mag[i] >= ABSURD_LOSS or (mag[i] >= EXPLODED_LOSS and (len(values) == 1 or mag[i] >= EXPLODED_RATIO * low)):
        return i
    return None


#: a perplexity this large is exp(a cross-entropy >= 18.4 nats per token): worse than guessing uniformly over 1e8
#: tokens, far past any vocabulary (an untrained model sits near its vocabulary size, <= ~3e5)
EXPLODED_PPL = 1e8


def _perplexity_blown(run: Run) -> list:
    """The first perplexity past ``EXPLODED_PPL`` (or overflowed to inf: exp of a cross-entropy above 709), train or
    held-out: the loss it is the exponential of has exploded, whatever that loss's own units (a sum over tokens
    or a mean)."""
    for m in run.metrics():
        if not PERPLEXITY.search(m.strip()):
            continue
        pts = points(run, m)
        big = np.flatnonzero((pts.values >= EXPLODED_PPL) & ~np.isnan(pts.values))
        if big.size:
            p = pts[int(big[0])]
            what = "overflowed to inf (the cross-entropy is above 709 nats per token)" if math.isinf(p.value) else \
                f"= exp({math.log(p.value):.1f}): a cross-entropy of {math.log(p.value):.1f} nats per token"
            return [p.evidence(f"{m} {fmt(p.value)} at step {p.step} {what}; uniform guessing over any vocabulary "
                               "stays below exp(13)")]
    return []


def _exploded(run: Run, loss) -> Finding | None:
    """A loss or gradient norm at a size no converging run reaches, judged even from one log line."""
    gn = points(run, "grad_norm").finite_only()
    ev = []
    i = _blown(loss.values)
    if i is not None:
        top = loss[i]
        local = _one_term(run, top)
        if local is not None:
            return local
        low = max(float(np.min(np.abs(loss.values))), 1e-12)
        ev.append(top.evidence(f"loss {fmt(top.value)} at step {top.step}"
                               + (f", {abs(top.value) / low:.3g}x its smallest magnitude ({fmt(low)})"
                                  if len(loss) > 1 and abs(top.value) < ABSURD_LOSS else
                                  ": no loss computes a value this large" if abs(top.value) >= ABSURD_LOSS else "")))
    if not ev:
        ev.extend(_perplexity_blown(run))
    huge = np.flatnonzero(np.abs(gn.values) >= EXPLODED_GRAD) if len(gn) else np.zeros(0, dtype=int)
    # one huge norm beside an ordinary loss may be a scaled norm; beside a loss of ORDINARY_TERM or more at the same step
    # it is not (Cross-Lingual-Voice-Cloning#3, fp32: "Train loss 0 17732198.000000 Grad Norm 2364579774464.000000")
    # on arrays: iterating the series builds a point (and looks up its source line) per log, 49k of them in a 20 MB log
    big_loss = bool(huge.size) and bool(np.any((np.abs(loss.values) >= ORDINARY_TERM) & np.isin(loss.steps, gn.steps[huge])))
    if huge.size and (ev or huge.size >= 2 or big_loss):
        p = gn[int(np.argmax(np.abs(gn.values)))]
        ev.append(p.evidence(f"grad_norm {fmt(p.value)} at step {p.step}: no converging run has gradients this large"))
        same = np.flatnonzero(loss.steps == p.step)
        at = loss[int(same[0])] if same.size else None
        if big_loss and at is not None and not any(e.step == at.step and e.detail.startswith("loss") for e in ev):
            ev.append(at.evidence(f"loss {fmt(at.value)} at the same step"))
    if not ev:
        return None
    step = min(e.step for e in ev if e.step is not None) if any(e.step is not None for e in ev) else None
    lrs = points(run, "learning_rate").finite_only()
    lr = (value_at(lrs, step) or (lrs[0] if len(lrs) else None)) if step is not None else None
    if lr is not None:
        ev.append(lr.evidence(f"learning rate {fmt(lr.value)} at step {lr.step}"))
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.55,
        title=f"Loss exploded{f' at step {step}' if step is not None else ''} without going NaN",
        message="; ".join(e.detail for e in ev) + ". Values this large mean the updates overshoot: the step size (learning "
                "rate, often one tuned for a larger total batch, e.g. 8 GPUs run on 1) is the usual cause; check the "
                "precision and the data if the LR is ordinary.",
        first_step=step, evidence=ev,
        remedies=["Lower the learning rate (scale it linearly with the total batch size: divide by 8 when running an 8-GPU "
                  "recipe on 1 GPU), add warmup and gradient clipping (max_norm 1.0-35 for detectors)."],
        basis="inferred", symptom="loss_divergence",
    )


#: evaluation copies of a term are not the training terms beside it
_EVAL_TERM = re.compile(r"^(eval|val|valid|validation|test)[_/]|/(eval|val|valid|validation|test)/", re.I)
_ACCURACY = re.compile(r"(^|[/_.])(acc|accuracy|top1|token_acc)$", re.I)


def _one_term(run: Run, top) -> Finding | None:
    """The exploded loss is one term's doing, and not the updates': at that step one loss term is hugely *negative*
    while another term of the same log is ordinary. Overshooting updates make a loss large (mmdetection's RCNN head
    at 2.3e9 beside a calm RPN, mmdetection#4383, is the LR); a loss term far below zero is that term's own
    computation failing on particular samples (CTC on an utterance whose labels outnumber its frames: no valid
    alignment, so warp-ctc prints huge negative values and torch's CTCLoss inf)."""
    step = top.step
    if step is None:
        return None
    blown, calm, acc = [], [], []
    for m in run.metrics():
        if m in WATCHED or m == "learning_rate" or _EVAL_TERM.search(m):
            continue
        pts = points(run, m)
        at = pts.steps == step
        if not at.any():
            continue
        p = pts[int(np.flatnonzero(at)[0])]
        if _ACCURACY.search(m) and math.isfinite(p.value):
            acc.append((m, p))
        if not loss_like(m) or m.lower().startswith("loss_scale"):
            continue
        fin = pts.finite_only()
        j = _blown(fin.values)
        if j is not None and fin[j].step == step and fin[j].value <= -EXPLODED_LOSS:
            blown.append((m, fin[j]))
        elif math.isfinite(p.value) and abs(p.value) < ORDINARY_TERM:
            calm.append((m, p))
    if not blown or not calm:
        return None
    term, bp = max(blown, key=lambda mp: abs(mp[1].value))
    ctc = "ctc" in term.lower()
    ev = [bp.evidence(f"{term} = {fmt(bp.value)} at step {step}"),
          *(p.evidence(f"{m} = {fmt(p.value)} at step {step}: ordinary") for m, p in calm[:3]),
          *(p.evidence(f"{m} = {fmt(p.value)} at step {step}: the model still predicts") for m, p in acc[:1]),
          top.evidence(f"loss = {fmt(top.value)} at step {step} (the total, carried by {term})")]
    why = ("For CTC this is the classic sign of an utterance whose label sequence is longer than its input frames "
           "after subsampling: no alignment exists, so the loss is inf (torch's CTCLoss) or a huge negative number "
           "(warp-ctc)." if ctc else
           "Look for the samples that make this term degenerate (empty or malformed targets, zero-size boxes, lengths "
           "the term cannot handle).")
    remedies = (["Drop the utterances whose label length exceeds the subsampled input length (ESPnet recipes filter by "
                 "the input/output length ratio; WeNet by max/min length and token_max_length), or set "
                 "zero_infinity=True in torch.nn.CTCLoss so such samples give zero loss instead of inf.",
                 "Check the subsampling factor against the shortest utterances and the label unit (characters give "
                 "longer label sequences than BPE)."] if ctc else
                [f"Log {term} per sample for a few steps around step {step} and inspect the samples where it explodes; "
                 "filter them or guard the term (skip or clamp non-finite and absurd per-sample values)."])
    return Finding(
        code=CODE, name=SLUG, root_cause="ctc_output_longer_than_input" if ctc else "nan_in_data", severity="error",
        confidence=0.55, title=f"Only {term} blew up at step {step} ({fmt(bp.value)}); {calm[0][0]} stayed at {fmt(calm[0][1].value)}",
        message=(f"At step {step} {term} is {fmt(bp.value)} while {', '.join(f'{m} is {fmt(p.value)}' for m, p in calm[:3])}"
                 + (f" and {acc[0][0]} {fmt(acc[0][1].value)}" if acc else "")
                 + ". Updates that overshoot make a loss large, not hugely negative, and the other terms are "
                 f"ordinary: the learning rate is not what broke; {term}'s own computation fails on particular "
                 "samples. " + why),
        first_step=step, evidence=ev, remedies=remedies, basis="inferred", symptom="loss_divergence",
    )


def _late_rise(run: Run, loss) -> Finding | None:
    """The smoothed loss reached its minimum, then climbed steadily to the end of the run."""
    n = len(loss)
    if n < MIN_LATE_LOGS:
        return None
    w = max(1, n // 10)
    sm = np.convolve(loss.values, np.ones(w) / w, mode="valid") if w > 1 else loss.values.astype(float)
    m = int(np.argmin(sm))
    if m > LATE_MIN_SHARE * (len(sm) - 1) or sm[m] <= DIVERGE_MIN_BEST:
        return None
    tail = sm[-(LATE_RISE_LOGS + 1):]
    if len(tail) < LATE_RISE_LOGS + 1 or not bool(np.all(np.diff(tail) > 0)):
        return None
    if sm[-1] < (1 + LATE_RISE_SHARE) * sm[m]:
        return None
    best, last = loss[m + (w - 1) // 2], loss[-1]
    lr_txt = ""
    lr = value_at(points(run, "learning_rate").finite_only(), last.step)
    if lr is not None:
        lr_txt = f" (lr {fmt(lr.value)} at the end)"
    ev = [best.evidence(f"lowest loss {fmt(best.value)} at step {best.step}"),
          last.evidence(f"loss rose for the last {LATE_RISE_LOGS} logs to {fmt(last.value)} at step {last.step}, "
                        f"{last.value / best.value:.3g}x the lowest{lr_txt}")]
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5,
        title=f"Training loss rising since step {best.step} ({fmt(best.value)} -> {fmt(last.value)})",
        message=(f"the training loss fell to {fmt(best.value)} at step {best.step}, then rose at every one of the last "
                 f"{LATE_RISE_LOGS} logs to {fmt(last.value)}: the optimiser overshoots instead of converging, the "
                 "signature of a learning rate too high for this optimiser and batch."),
        first_step=best.step, evidence=ev,
        remedies=["Lower the learning rate 3-10x (or use an optimiser whose default suits the model), add decay or "
                  "warmup; resume from the checkpoint at the lowest loss."],
        basis="inferred", symptom="loss_divergence",
    )


def _spikes(run: Run, loss) -> Iterable[Finding]:
    v = loss.values
    spikes = []
    for i in range(SPIKE_WINDOW, len(v)):
        level = float(np.median(v[i - SPIKE_WINDOW:i]))
        if level > DIVERGE_MIN_BEST and v[i] >= SPIKE_FACTOR * level:
            spikes.append((i, level))
    if len(spikes) < MIN_SPIKES:
        return
    i0, level = spikes[0]
    p = loss[i0]
    evidence = [loss[i].evidence(f"loss {fmt(loss[i].value)} at step {loss[i].step} vs running median {fmt(lv)}")
                for i, lv in spikes[:4]]
    high = _lr_far_above_usual(run, p.step)
    if high is not None:
        evidence.append(high)
    yield Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high" if high is not None else None,
        severity="error" if high is not None else "warning", confidence=0.6 if high is not None else 0.7,
        title=f"{len(spikes)} loss spikes >= {SPIKE_FACTOR:g}x the running level (first at step {p.step})",
        message=(f"{len(spikes)} logs jump to >= {SPIKE_FACTOR:g}x the median of the {SPIKE_WINDOW} logs before them; the "
                 f"first at step {p.step}: {fmt(p.value)} vs ~{fmt(level)}."),
        first_step=p.step, evidence=evidence,
        remedies=["Lower the LR or add gradient clipping if spikes keep coming; check the batches at those steps."],
        basis="inferred" if high is not None else "symptom", symptom="loss_spike",
    )


#: a swing is a log this many times the one before it (up) or this many times smaller (down)
SWING_FACTOR = 3.0
#: swings each way a curve must show to oscillate, and the logs it needs
MIN_SWINGS = 3
MIN_SWING_LOGS = 6
#: the swings (up and down) make at least this share of the curve's steps: a curve that does little but swing. Batch noise
#: crosses 3x now and then (a per-step log with a lognormal spread of 0.35-0.5 does so at 1-12% of its steps, and
#: would pile up three swings each way over a few hundred logs); nlp-tutorial#77 swings at 60% of its steps
SWING_FRACTION = 0.4
#: an upward swing counts only when it climbs back to this share of the curve's first level (the highest of its first
#: three logs): a curve that returns most of the way to where it started has not kept what it learnt; a converged loss
#: jumping 0.002 -> 0.01 is noise around a floor, not a swing
SWING_SHARE = 0.25


def _oscillation(run: Run, name: str) -> Finding | None:
    """A curve that keeps swinging: at least MIN_SWINGS logs each SWING_FACTOR x the one before and as many each that
    much smaller, together SWING_FRACTION of its steps, the climbs returning to SWING_SHARE of the first level, the last
    climb in the second half of the run.
    The textbook sign of a step size too large: each update jumps across the valley instead of down it (the loss of
    graykode/nlp-tutorial#77 at lr 0.01, 1.6 <-> 18 every few logs while lr 1e-4 fell steadily; the validation loss of
    stats.stackexchange 478017, 0.14 <-> 3.3 from epoch to epoch). Batch noise around a level rarely moves 3x both ways
    three times, and one around a floor does not climb back to a quarter of the start."""
    from detectors.lr_too_high import TINY_LR

    s = latest_attempt(points(run, name)).finite_only()
    s = s.select(s.values > 0)
    v = s.values
    n = len(v)
    if n < MIN_SWING_LOGS:
        return None
    ratio = v[1:] / v[:-1]
    first = float(np.max(v[:3]))
    up = [i + 1 for i in np.flatnonzero(ratio >= SWING_FACTOR) if v[i + 1] >= SWING_SHARE * first]
    down = [i + 1 for i in np.flatnonzero(ratio <= 1 / SWING_FACTOR)]
    if len(up) < MIN_SWINGS or len(down) < MIN_SWINGS or up[-1] < n / 2 or len(up) + len(down) < SWING_FRACTION * (n - 1):
        return None
    lr = points(run, "learning_rate").finite_only()
    at = value_at(lr, s[up[0]].step)
    if at is not None and at.value < TINY_LR:
        return None  # no step size this small jumps a loss 3x back and forth: something else moves it
    label = "validation loss" if name == "eval_loss" else "loss"
    evidence = [s[i].evidence(f"{label} {fmt(v[i - 1])} at step {s[i - 1].step} -> {fmt(v[i])} at step {s[i].step} "
                              f"({v[i] / v[i - 1]:.3g}x)") for i in up[:4]]
    evidence.append(s[up[-1]].evidence(f"last climb: {fmt(v[up[-1] - 1])} -> {fmt(v[up[-1]])} at step "
                                       f"{s[up[-1]].step}, {len(up)} climbs and {len(down)} falls of >= "
                                       f"{SWING_FACTOR:g}x over {n} logs; last {label} {fmt(v[-1])}"))
    if at is not None:
        evidence.append(at.evidence(f"learning rate {fmt(at.value)} at step {at.step}"))
    low, high = float(np.min(v[n // 2:])), float(np.max(v[n // 2:]))
    other = (" The training loss is calm beside it: a validation set too small to average out, or BatchNorm statistics "
             "that do not fit the evaluation batches, are the other readings." if name == "eval_loss" else "")
    return Finding(
        code=CODE, name=SLUG, root_cause="lr_too_high", severity="error", confidence=0.5,
        title=f"The {label} oscillates: {len(up)} climbs of >= {SWING_FACTOR:g}x (first at step {s[up[0]].step})",
        message=(f"the {label} keeps jumping up {SWING_FACTOR:g}x or more and falling back ({len(up)} climbs, {len(down)} "
                 f"falls over {n} logs; between {fmt(low)} and {fmt(high)} in the second half): each update overshoots "
                 f"instead of descending, the sign of a learning rate too large for the run.{other}"),
        first_step=s[up[0]].step, evidence=evidence,
        remedies=[sentence(f"Lower the peak learning rate 3-10x; {knob(run, 'warmup')}; {knob(run, 'clip')}"),
                  "Keep the checkpoint with the best validation loss rather than the last one."],
        basis="inferred", symptom="loss_oscillation",
    )


#: an evaluation collapsed: its loss this many times the training loss beside it, its accuracy at most this share of the
#: training accuracy, which is itself at least EVAL_COLLAPSE_MIN_ACC (a model that learnt, evaluated as one that did not)
EVAL_COLLAPSE_LOSS = 5.0
EVAL_COLLAPSE_ACC_SHARE = 0.1
EVAL_COLLAPSE_MIN_ACC = 0.2
_TRAIN_ACCURACY = re.compile(r"^(?:train[_/])?(acc|accuracy|top1|acc@1)$", re.I)


def _eval_collapsed(run: Run) -> Finding | None:
    """The last evaluation is far worse than the training beside it on both counts: its loss >= 5x the training loss at
    that step, its accuracy <= a tenth of the training accuracy (itself >= 20%). Overfitting keeps a held-out accuracy
    well above a tenth of the training one; this is a model evaluated in another state than the one that trains
    (BatchNorm statistics ruined by a too-large step or batch, an eval-mode or loading bug: ReActNet#9, test loss 24.6
    and Acc@1 0.1% beside 1.9 and 59.8%). A symptom: the log rarely says which."""
    ev = points(run, "eval_loss").finite_only()
    loss = points(run, "loss").finite_only()
    if not len(ev) or not len(loss):
        return None
    last = ev[-1]
    tr = value_at(loss, last.step)
    if tr is None or tr.value <= 0 or last.value < EVAL_COLLAPSE_LOSS * tr.value:
        return None
    for m in run.metrics():
        k = _TRAIN_ACCURACY.match(m)
        if k is None:
            continue
        held_name = "eval_" + (k[1] if m.lower().startswith("train") else m)
        if held_name not in run.metrics():
            continue
        acc, held = points(run, m).finite_only(), points(run, held_name).finite_only()
        a, h = value_at(acc, last.step), value_at(held, last.step)
        if a is None or h is None:
            continue
        scale = 100.0 if max(a.value, h.value) > 1.0 else 1.0
        if a.value / scale < EVAL_COLLAPSE_MIN_ACC or h.value > EVAL_COLLAPSE_ACC_SHARE * a.value:
            continue
        return Finding(
            code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.6,
            title=(f"The evaluation collapsed at step {last.step}: loss {fmt(last.value)} and {held_name} {fmt(h.value)} "
                   f"beside a training loss of {fmt(tr.value)} and {m} {fmt(a.value)}"),
            message=(f"At step {last.step} the evaluation loss is {last.value / tr.value:.3g}x the training loss beside it "
                     f"({fmt(last.value)} vs {fmt(tr.value)}) and its accuracy {fmt(h.value)} is at most a tenth of the "
                     f"training accuracy {fmt(a.value)}: the model that trains is not the one evaluated. Overfitting "
                     "keeps far more of the accuracy; the usual reasons are BatchNorm running statistics ruined by a step "
                     "or batch size too large (the training batches still fit), a model evaluated in another mode, "
                     "precision or state than it trains in, or an evaluation set or preprocessing that does not match."),
            first_step=last.step, basis="symptom", symptom="eval_collapse",
            evidence=[last.evidence(f"evaluation loss {fmt(last.value)} at step {last.step}"),
                      tr.evidence(f"training loss {fmt(tr.value)} at step {tr.step}"),
                      h.evidence(f"{held_name} {fmt(h.value)} at step {h.step}"),
                      a.evidence(f"{m} {fmt(a.value)} at step {a.step}")],
            remedies=["Evaluate the training set in eval mode: a collapse there too is BatchNorm's running statistics "
                      "(lower the LR, scale it to the batch size, or recompute the statistics on training batches); a "
                      "good result there points at the evaluation data or its preprocessing.",
                      "Keep the checkpoint with the best evaluation and compare the evaluation code path with training's "
                      "(model.eval(), dtype, the weights it loads)."])
    return None


def _lr_far_above_usual(run: Run, step: int):
    """Evidence that the LR at the spikes is far above the usual Adam-family fine-tuning range (after warmup)."""
    from detectors.lr_too_high import USUAL_LR_MAX, USUAL_LR_MAX_LORA

    lr = points(run, "learning_rate").finite_only()
    at = value_at(lr, step)
    limit = USUAL_LR_MAX_LORA if run.config.get("lora.r") is not None else USUAL_LR_MAX
    if at is None or at.value <= limit:
        return None
    return at.evidence(f"learning rate {fmt(at.value)} at step {at.step}, above the usual range (<= {fmt(limit)}) for "
                       "Adam-family fine-tuning")

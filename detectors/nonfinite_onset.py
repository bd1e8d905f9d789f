"""Non-finite onset: the first step where loss, grad_norm or eval_loss went NaN or Inf.

What it detects:
    The first logged step at which a watched series (``loss``, ``grad_norm``, ``eval_loss``,
    and any other loss-like series) is NaN or +/-Inf, and how long it stays non-finite; also a
    training loop's own "Loss is nan, stopping training" message. It knows HF Trainer's
    ``logging_nan_inf_filter``: a logged ``loss`` of exactly 0.0 in the same record as a
    non-finite ``grad_norm`` means every step of that logging window was non-finite; it is
    counted as a hidden non-finite loss, not as a zero loss.

    Healthy patterns stay out: ``grad_norm`` NaN on the first logging step only (the AMP loss
    scaler calibrating) is silent; a few non-finite ``grad_norm`` logs while the loss stays
    finite and ``grad_norm`` ends finite (AMP skipped those steps) are a warning, not an error.

Why it matters:
    This is the symptom users already see; the step it starts at anchors the rest of the
    diagnosis (what the learning rate, grad norm and loss scale were just before it, and which
    checkpoint is the last clean one).

Evidence used:
    ``Run.scalars`` (every source: trainer_state.json, TensorBoard, jsonl, stdout), ``nan_stop``
    events, and checkpoint tensor statistics to name the last checkpoint with finite weights.

Remedies:
    Resume from the last checkpoint saved before the onset, after fixing the cause named by
    the other findings; add a non-finite guard (skip the batch, or stop) so NaN never reaches
    the weights.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import CONDITIONAL_REMEDY, Evidence, Finding, Run
from detectors._common import (
    HELD_OUT,
    Onset,
    bf16_or_fp32,
    checkpoint_evidence,
    event_evidence,
    fmt,
    fp16_signals,
    gradnorm_failure,
    loss_like,
    nonfinite_onset,
    onset_at,
    points,
    printed_zero_bound,
    robust_level,
    rose_before,
    rounded_lr_zero,
    transient_first_gradnorm,
    value_at,
)

CODE = "NUM001"
SLUG = "nonfinite-onset"
ROOT_CAUSE = None
NEEDS = ("scalars", "events")
NEEDS_ANY = True


def detect(run: Run) -> Iterable[Finding]:
    onset = nonfinite_onset(run)
    if onset is None:
        yield from _skipped_steps(run)
        yield from _trainer_skips(run)
        return
    evidence: list[Evidence] = [onset.evidence]
    for metric in ("loss", "grad_norm", "eval_loss"):
        pts = points(run, metric)
        bad = np.flatnonzero(~pts.finite)
        if bad.size and metric != onset.metric:
            b0 = pts[int(bad[0])]
            evidence.append(b0.evidence(f"{metric} = {fmt(b0.value)} at step {b0.step} "
                                        f"({bad.size} of {len(pts)} logs non-finite)"))
    ck_ev, resume = checkpoint_evidence(run, onset.step)
    evidence.extend(ck_ev)
    # a message with no step to place it: where it was printed (a traceback's stop is at the end anyway)
    at = onset_at(onset) if onset.step is not None or onset.message else "the end of the log"
    shape = "hidden as loss 0.0 by logging_nan_inf_filter" if onset.hidden_zero else (
        "then finite again (particular batches)" if onset.recovered and not onset.persistent else
        "then finite and non-finite in turn, non-finite at the last log" if onset.recovered else "and it stays non-finite")
    # the cause may be another finding's or, when none names one, the suspect a rerun confirms (the remedies above)
    then = resume if resume else f"resume from the last checkpoint saved before {at}"
    remedies = [f"Fix the cause (the one another finding names, else the suspect a rerun confirms), then {then}.",
                ("Guard the loop: skip batches with a non-finite loss or stop (check torch.isfinite(loss) before backward) "
                "so NaN never reaches the weights.")]
    first = _from_first_log(run, onset.step)
    # "before the optimizer could act" holds only when the first log is the first step; a first log at step 20
    # (logging every 20 steps) follows 20 unseen updates, so the usual suspects stay open
    at_start = first and onset.step is not None and onset.step <= 1
    suspects, facts, informed = differential(run, onset, at_start)
    evidence.extend(facts)
    if at_start:
        remedies.insert(0, "Non-finite from the first log, before the optimizer could act: suspect what the first "
                           "forward pass uses, not the learning rate: the loaded weights (autopsy scan the checkpoint), "
                           "the model's dtype or quantization, the first batches' inputs, the framework version.")
    elif suspects:
        n = len(suspects)
        why = "most likely, from this run's numbers" if informed else "the most common in public threads; this run gives no numbers to order them"
        remedies[:0] = [f"Suspect {i} of {n}" + (f" ({why})" if i == 1 else "")
                        + f" {CONDITIONAL_REMEDY}: {s}." for i, s in enumerate(suspects, 1)]
        if first:
            remedies.insert(0, f"Non-finite at the first log (step {onset.step}): the updates before it were not logged, "
                               "so the first forward passes (loaded weights, dtype, inputs) are suspects as well as "
                               f"the ones below, {CONDITIONAL_REMEDY}.")
    loss = points(run, "loss")
    held_out = onset.metric == "eval_loss" or HELD_OUT.search(onset.metric) is not None
    if len(loss):
        eval_only = held_out and bool(loss.finite.all())
    else:  # no total logged (ultralytics' train/box_loss, train/cls_loss...): every training term finite
        train = [points(run, m) for m in run.metrics() if loss_like(m) and HELD_OUT.search(m) is None]
        eval_only = held_out and any(len(p) for p in train) and all(bool(p.finite.all()) for p in train)
    terms = _terms_finite(run, onset)
    if terms is not None:
        evidence.append(terms)
        remedies.insert(0, "The total is non-finite while every logged term of it is finite: the NaN is in what the total "
                           "adds beyond those terms: a regularisation or weight-decay loss (Keras model.losses / add_loss, "
                           "an L2 term), a loss weight, or the framework's own summation; print those parts at this step.")
    if eval_only:
        remedies.insert(0, "Only the evaluation is non-finite: evaluate on a slice of the training data with the same "
                           "code; finite there means a held-out sample the training never sees (NaN or out-of-range "
                           "features, an empty sample), non-finite means the model is unstable in eval mode (BatchNorm "
                           "running statistics, an inverse or log-determinant that overflows off the training data).")
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.95,
        title=(f"The evaluation loss went non-finite at {at} while the training loss stayed finite"
               + (f" ({onset.metric})" if onset.metric != "eval_loss" else "") if eval_only else
               f"Training went non-finite at {at}" + (" (the first log)" if first else "")),
        message=(f"First non-finite value at {at}: {onset.evidence.detail}" if onset.message else
                 f"First non-finite value at {at}: {onset.metric} ({shape})")
                + ("; no finite loss was logged before it" if first else "") + ".",
        first_step=onset.step, evidence=evidence, remedies=remedies, basis="symptom",
        symptom="eval_nonfinite" if held_out else "nonfinite_grad_norm" if onset.metric == "grad_norm" else "nonfinite_loss",
    )


#: the loss at its last finite log before the onset this many times its best = the loss was climbing (overshoot)
RISING = 1.3
#: what a calm loss before the onset adds to the data suspect: above the LR's prior alone (0.16 vs 0.05 + 0.12)
CALM_DATA = 0.12
#: grad_norm this many times its early level before the onset = growing gradients
GRAD_GROWTH = 4.0
#: an LR below this cannot blow a run up by itself (the optimizer barely moves the weights)
TINY_LR = 1e-5


#: loss terms logged beside a non-finite total, all finite at its step, that say the NaN is outside them
MIN_FINITE_TERMS = 2


def _terms_finite(run: Run, onset: Onset) -> Evidence | None:
    """The training total non-finite at its onset step while >= MIN_FINITE_TERMS loss terms logged at that same step are
    all finite (Mask_RCNN#1162: "loss: nan - rpn_class_loss: 0.4798 - rpn_bbox_loss: 0.5489 - ..."): the NaN comes
    from what the total adds beyond the terms it logs."""
    if onset.metric != "loss" or onset.step is None:
        return None
    total = points(run, "loss")
    at = np.flatnonzero((total.steps == onset.step) & ~total.finite)
    if not at.size:
        return None
    finite: list[str] = []
    for m in run.metrics():
        if m == "loss" or not loss_like(m) or HELD_OUT.search(m) is not None:
            continue
        pts = points(run, m)
        same = np.flatnonzero(pts.steps == onset.step)
        if not same.size:
            continue
        if not bool(pts.finite[same].all()):
            return None  # a term is non-finite too: the NaN is in the terms
        finite.append(f"{m} {fmt(float(pts.values[same[0]]))}")
    if len(finite) < MIN_FINITE_TERMS:
        return None
    p = total[int(at[0])]
    return p.evidence(f"loss = {fmt(p.value)} at step {p.step} while its {len(finite)} logged terms are finite there ("
                      + ", ".join(finite[:5]) + (", ..." if len(finite) > 5 else "") + ")")


def differential(run: Run, onset: Onset, at_start: bool) -> tuple[list[str], list[Evidence], bool]:
    """The usual causes of a non-finite onset, ordered by what this run's own numbers say for and against each.

    Returns one sentence per suspect (what the run shows, and the test that tells it apart) and the evidence rows
    the sentences cite. An onset at the run's first step is left to its own remedy (the optimizer had not acted yet).
    """
    if at_start:
        return [], [], False
    # a stop message with no step of its own: the numbers logged up to the end of the log are the ones before it
    step = onset.step if onset.step is not None else 1 << 62
    facts: list[Evidence] = []
    score = {"lr": 0.16, "fp16": 0.14, "data": 0.05}  # the shares of these causes in public threads (causes.PRIOR)
    prior = dict(score)
    said = {"lr": "", "fp16": "", "data": ""}
    # learning rate: its value at the onset, whether it was still rising (warmup) or at its peak
    lr = points(run, "learning_rate").finite_only()
    lr_at = value_at(lr, step)
    if lr_at is not None:
        before = lr.before(step, inclusive=True)
        rising = len(before) >= 2 and before[-1].value > before[0].value
        rounded = rounded_lr_zero(run, lr, TINY_LR) if lr_at.value == 0.0 else None
        if rounded is not None:
            said["lr"] = (f"lr printed as 0 with {rounded.value} decimals at step {lr_at.step}: below "
                          f"{fmt(printed_zero_bound(rounded.value))}, which the log does not resolve")
        elif lr_at.value < TINY_LR:
            score["lr"] = 0.0
            said["lr"] = f"lr {fmt(lr_at.value)} at step {lr_at.step} is too small to blow the weights up"
        else:
            said["lr"] = f"lr {fmt(lr_at.value)} at step {lr_at.step}" + ("; still rising (warmup)" if rising else "")
            if rising:
                score["lr"] += 0.05
            facts.append(lr_at.evidence(f"learning_rate {fmt(lr_at.value)} at step {lr_at.step}, the last log at or "
                                        f"before the onset" + (f" (from {fmt(before[0].value)} at step {before[0].step})"
                                                               if rising else "")))
    # the loss before the onset: climbing (overshoot) or calm (one bad batch, or an overflow)
    loss = points(run, "loss").before(step)
    loss = loss.select(loss.finite)
    if len(loss) >= 2:
        best, last = loss[loss.argmin()], loss[-1]
        # above its best, and out of its recent level (a noisy per-batch loss is at 1.3x its best half the time)
        if (best.value > 0 and last.value >= RISING * best.value and last.step > best.step
                and rose_before(loss.values)):
            score["lr"] += 0.15
            said["lr"] = _also(said["lr"], f"the loss climbed from {fmt(best.value)} (step {best.step}) to {fmt(last.value)} "
                                            f"(step {last.step}) first")
            facts.append(last.evidence(f"loss {fmt(last.value)} at step {last.step}, {last.value / best.value:.3g}x its best "
                                       f"{fmt(best.value)} (step {best.step}), the last finite log before the onset"))
        else:
            # DATA001's reading of the same logs (a calm curve that turns NaN: the data more often than not), so the
            # suspects' order and the diagnosis' best candidate agree
            score["data"] += CALM_DATA
            said["data"] = f"the loss was calm ({fmt(last.value)} at step {last.step}) right before it"
            facts.append(last.evidence(f"loss {fmt(last.value)} at step {last.step}, the last finite log before the onset "
                                       f"(best {fmt(best.value)}): no climb first"))
    gn = points(run, "grad_norm").before(step).finite_only()
    if len(gn) >= 3:
        base = robust_level(gn.values[: max(2, len(gn) // 3)])
        top = gn[gn.argmax()]
        if base and top.value >= GRAD_GROWTH * base:
            score["lr"] += 0.1
            said["lr"] = _also(said["lr"], f"grad_norm grew from ~{fmt(base)} to {fmt(top.value)} (step {top.step})")
    # particular batches: finite logs after the non-finite ones
    if onset.recovered and not onset.persistent:
        score["data"] += 0.2
        said["data"] = _also(said["data"], "finite logs follow the non-finite ones (particular batches)")
    # precision
    half = fp16_signals(run)
    wide = bf16_or_fp32(run)
    if half:
        score["fp16"] += 0.2
        said["fp16"] = half[0].evidence.detail
    elif wide is not None:
        score["fp16"] = 0.0
        said["fp16"] = wide.detail
    else:
        said["fp16"] = "nothing read says which precision the run used"
    tests = {
        "lr": "learning rate too high: rerun from a checkpoint before the onset with the LR divided by 10 (and "
              "gradient clipping on); a NaN that disappears was the LR",
        "fp16": "float16 overflow: rerun the same steps in bf16 or fp32; a NaN that disappears was fp16's range "
                "(max 65504)",
        "data": "a bad batch (NaN/Inf or empty inputs, an impossible label or box): replay the batches of the failing "
                "steps alone in fp32; a NaN that follows the batch is the data",
    }
    order = sorted((k for k in score if score[k] > 0), key=lambda k: -score[k])
    out = [tests[k] + (f" (here: {said[k]})" if said[k] else "") for k in order]
    if score["fp16"] == 0.0 and said["fp16"]:
        out.append(f"not float16 overflow: {said['fp16']}")
    if score["lr"] == 0.0 and said["lr"]:
        out.append(f"not the learning rate: {said['lr']}")
    return out, facts, score != prior


def _from_first_log(run: Run, step: int | None) -> bool:
    """No finite training or eval loss was logged before the onset: the NaN came with the first forward passes."""
    if step is None:
        return False
    seen = False
    for metric in ("loss", "eval_loss"):
        pts = points(run, metric)
        if not len(pts):
            continue
        seen = True
        if bool((pts.finite & (pts.steps < step)).any()) or bool(pts.finite[pts.steps == step].any()):
            return False
    return seen


def _skipped_steps(run: Run) -> Iterable[Finding]:
    """grad_norm-only blips with a finite loss: AMP skipping a few steps, worth a warning only."""
    gn = points(run, "grad_norm")
    bad_idx = np.flatnonzero(~gn.finite)
    if not bad_idx.size or transient_first_gradnorm(gn) or gradnorm_failure(run, gn):
        return
    n_bad, b0 = int(bad_idx.size), gn[int(bad_idx[0])]
    evidence = [b0.evidence(f"grad_norm = {fmt(b0.value)} at step {b0.step}")]
    loss = points(run, "loss")
    later = np.flatnonzero(loss.steps > b0.step) if len(loss) else loss.steps
    if not gn.finite[-1] and len(later):  # the claim rests on the losses logged after the first bad grad_norm
        a0 = loss[int(later[0])]
        evidence.append(a0.evidence(f"loss {fmt(a0.value)} at step {a0.step}, after it: finite, no higher than before"))
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="warning", confidence=0.6,
        title=f"{n_bad} of {len(gn)} grad_norm logs non-finite while the loss stays finite",
        message=(f"grad_norm was non-finite at {n_bad} of {len(gn)} logs (first at step {b0.step}) "
                 + ("and finite at the end" if gn.finite[-1] else "while every loss logged after it stays finite, so "
                    "those updates never reached the weights")
                 + "; with fp16 AMP these are steps the loss scaler skipped, which is normal when rare."),
        first_step=b0.step, evidence=evidence,
        remedies=["Nothing to do if it stays rare; if it grows, switch to bf16 or lower the learning rate."],
        basis="symptom", symptom="skipped_steps",
    )


#: skip messages that make the skipping the run's state, not a blip: this many in all, or RUN_SKIPS on consecutive
#: lines (every step skipped while the paste lasts: ESPnet2 logs nothing else between them)
MANY_SKIPS = 10
RUN_SKIPS = 5


def _longest_run(evs: list) -> int:
    best = cur = 0
    prev = None
    for e in evs:
        cur = cur + e.count if prev is not None and e.line is not None and e.line == prev + 1 else e.count
        prev = e.line + e.count - 1 if e.line is not None else None
        best = max(best, cur)
    return best


def _trainer_skips(run: Run) -> Iterable[Finding]:
    """The trainer's own "grad norm is nan, skipping the update" messages (ESPnet1/2): each is an update that never
    reached the weights. A few are a blip; many in a row leave a model that is barely trained while its loss reads
    finite, since the loss of a skipped step is still logged."""
    evs = run.events_of("grad_skip")
    n = sum(e.count for e in evs)
    if not n:
        return
    first = evs[0]
    run_len = _longest_run(evs)
    many = n >= MANY_SKIPS or run_len >= RUN_SKIPS
    evidence = [event_evidence(first, f"\"{first.message.strip()[:160]}\"" + (f" (x{n} in all)" if n > 1 else ""))]
    loss = points(run, "loss").finite_only()
    if len(loss):
        evidence.append(loss[-1].evidence(f"loss {fmt(loss[-1].value)} at step {loss[-1].step}: finite, as a skipped "
                                          "step's loss still is"))
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error" if many else "warning", confidence=0.7 if many else 0.5,
        title=f"The trainer skipped {n} update{'s' if n > 1 else ''}: the gradient norm was {first.data.get('value', 'nan')}",
        message=(f"{n} update{'s were' if n > 1 else ' was'} skipped because the gradient norm was not finite (first "
                 + (f"at step {first.step}" if first.step is not None else f"at {first.source} line {first.line}")
                 + (f"; {run_len} of them on consecutive lines, every step skipped while they last" if run_len >= RUN_SKIPS
                    else "")
                 + "). " + ("Skipped updates never reach the weights: with this many, the model is barely training "
                            "while the logged loss stays finite." if many else
                            "An occasional skip is the trainer's guard working.")),
        first_step=first.step, evidence=evidence, basis="direct", symptom="skipped_steps",
        remedies=["Find what makes the gradients non-finite on those batches: a loss term inf/NaN on some samples (CTC "
                  "or attention on labels longer than the subsampled frames, an empty target), fp16 overflow, a learning "
                  "rate too high; log the per-term losses and sample ids of the skipped steps.",
                  "Filter the offending samples (ESPnet: by the label/frame ratio) and lower the learning rate if the "
                  "skips come after a warmup peak."],
    )


def _also(said: str, fact: str) -> str:
    """``fact`` after what is already said about a suspect ("; " between), or alone (no stray separator when an LR
    was not logged but the loss climbed)."""
    return f"{said}; {fact}" if said else fact

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

from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    checkpoint_evidence,
    fmt,
    gradnorm_failure,
    nonfinite_onset,
    points,
    transient_first_gradnorm,
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
    at = f"step {onset.step}" if onset.step is not None else "the end of the log"
    shape = "hidden as loss 0.0 by logging_nan_inf_filter" if onset.hidden_zero else (
        "then finite again (particular batches)" if onset.recovered and not onset.persistent else "and it stays non-finite")
    remedies = [f"Fix the cause named by the other findings, then {resume}." if resume else
                f"Fix the cause named by the other findings, then resume from the last checkpoint saved before {at}.",
                ("Guard the loop: skip batches with a non-finite loss or stop (check torch.isfinite(loss) before backward) "
                "so NaN never reaches the weights.")]
    first = _from_first_log(run, onset.step)
    if first:
        remedies.insert(0, "Non-finite from the first log, before the optimizer could act: suspect what the first "
                           "forward pass uses, not the learning rate: the loaded weights (autopsy scan the checkpoint), "
                           "the model's dtype or quantization, the first batches' inputs, the framework version.")
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.95,
        title=f"Training went non-finite at {at}" + (" (the first log)" if first else ""),
        message=f"First non-finite value at {at}: {onset.metric} ({shape})"
                + ("; no finite loss was logged before it" if first else "") + ".",
        first_step=onset.step, evidence=evidence, remedies=remedies, basis="symptom",
        symptom={"grad_norm": "nonfinite_grad_norm", "eval_loss": "eval_nonfinite"}.get(onset.metric, "nonfinite_loss"),
    )


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

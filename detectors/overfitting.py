"""Overfitting: the evaluation loss turns up and keeps rising while the training loss keeps falling.

What it detects:
    A run with at least ``MIN_EVALS`` finite evaluation losses whose lowest one comes before the last
    ``MIN_AFTER`` evaluations, each of which is at least ``RISE`` times that lowest value, while the training
    loss at the last log is below the training loss at the best evaluation (the gap widens). Runs that went
    non-finite, and runs whose training loss rose too (a divergence), are left to their own detectors.

Why it matters:
    The optimisation works (nothing crashes, no NaN), so the run reads as healthy, yet every evaluation
    after the best one is worse: the model is memorising the training set. The weights to keep are the ones
    of the best evaluation, and the fix is in the schedule and the data, not in the numerics.

Evidence used:
    ``eval_loss`` and ``loss`` series; the checkpoints (the one nearest the best evaluation).

Remedies:
    Keep the best evaluation's weights (load_best_model_at_end with metric_for_best_model="eval_loss", or an
    early-stopping callback); fewer epochs or more data; more regularisation (weight decay, dropout); a lower
    learning rate.

A warning, not a failure: the training itself is sound, so a verdict stays healthy with this beside it.

The same detector says, as information, when an early-stopping callback ended the run (``_early_stopped``):
transformers' EarlyStoppingCallback (trainer_state.json), Lightning's and Keras' EarlyStopping (their messages).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import ck_label, event_evidence, fmt, nonfinite_onset, points, value_at

CODE = "FIT001"
SLUG = "overfitting"
ROOT_CAUSE = None
NEEDS = ("scalars", "events", "config")
NEEDS_ANY = True

#: evaluations needed, and evaluations after the best one that must all stay up
MIN_EVALS = 3
MIN_AFTER = 2
#: "up": at least this multiple of the best evaluation loss (noise between evaluations of one model is far smaller)
RISE = 1.10


def detect(run: Run) -> Iterable[Finding]:
    yield from _overfitting(run)
    stop = _early_stopped(run)
    if stop is not None:
        yield stop


def _overfitting(run: Run) -> Iterable[Finding]:
    ev = points(run, "eval_loss").finite_only()
    ev = ev.select(ev.values > 0)
    if len(ev) < MIN_EVALS or nonfinite_onset(run) is not None:
        return
    b = int(np.argmin(ev.values))
    if len(ev) - 1 - b < MIN_AFTER:
        return
    best, last = ev[b], ev[-1]
    if not np.all(ev.values[-MIN_AFTER:] >= RISE * best.value):
        return
    train = points(run, "loss").finite_only()
    at_best = value_at(train, best.step) if len(train) else None
    end = train[-1] if len(train) else None
    if at_best is None or end is None or end.step <= at_best.step or not end.value < at_best.value:
        return  # no training loss beside it, or one that rose too: not a widening gap
    rise = last.value / best.value - 1
    evidence = [best.evidence(f"eval_loss {fmt(best.value)} at step {best.step}: the lowest of {len(ev)} evaluations"),
                last.evidence(f"eval_loss {fmt(last.value)} at step {last.step}: +{rise:.0%} over the best, and each of the "
                              f"last {MIN_AFTER} evaluations at least {RISE:.2f}x it"),
                at_best.evidence(f"training loss {fmt(at_best.value)} at step {at_best.step}, at the best evaluation"),
                end.evidence(f"training loss {fmt(end.value)} at step {end.step}: still falling")]
    keep = _nearest_checkpoint(run, best.step)
    remedies = []
    if keep is not None:
        there = ev.select(ev.steps == keep[1])
        score = (f", eval_loss {fmt(there[0].value)} there" if len(there) else "")
        exact = keep[1] == best.step
        evidence.append(Evidence(keep[0], "checkpoint", f"{ck_label(keep[0])} (step {keep[1]}{score}) is the checkpoint "
                                 + ("saved at the best evaluation" if exact else "nearest the best evaluation"), keep[1]))
        remedies.append(f"Keep {ck_label(keep[0])} (step {keep[1]}{score}), " + (
            "saved at the best evaluation, rather than the last one." if exact else
            f"the saved checkpoint nearest the best evaluation (step {best.step}), rather than the last one; save at "
            "every evaluation next time (save_steps = eval_steps) to keep the best weights themselves."))
    remedies += [
        "Select on the evaluation: HF Trainer load_best_model_at_end=True with metric_for_best_model='eval_loss' "
        "(save_steps a multiple of eval_steps), or EarlyStoppingCallback(early_stopping_patience=2-3); Lightning "
        "EarlyStopping and ModelCheckpoint(monitor='val_loss').",
        "Fewer epochs or more data; more regularisation (weight_decay, dropout, lora_dropout); a lower learning rate.",
    ]
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=0.7,
        title=f"Overfitting from step {best.step}: eval_loss {fmt(best.value)} -> {fmt(last.value)} while the training "
              f"loss fell to {fmt(end.value)}",
        message=(f"The evaluation loss was lowest at step {best.step} ({fmt(best.value)}) and rose to {fmt(last.value)} "
                 f"by step {last.step} (+{rise:.0%}), while the training loss fell from {fmt(at_best.value)} to "
                 f"{fmt(end.value)}: the model fits the training data ever better and the held-out data worse. The "
                 "training itself is sound; the weights worth keeping are those of the best evaluation."),
        first_step=best.step, evidence=evidence, remedies=remedies, basis="direct", symptom="eval_rise",
    )


def _nearest_checkpoint(run: Run, step: int) -> tuple[str, int] | None:
    """(path, step) of the saved checkpoint whose step is nearest ``step`` (the earlier one on a tie)."""
    got = [(c.path, c.step) for c in run.checkpoints if isinstance(c.step, int)]
    if not got:
        return None
    return min(got, key=lambda pc: (abs(pc[1] - step), pc[1]))


def _early_stopped(run: Run) -> Finding | None:
    """An early-stopping callback ended the run on purpose (information: the question "why did training stop?"
    answered): transformers' EarlyStoppingCallback, its counter at its patience in trainer_state.json (with the
    planned max_steps beside global_step); Lightning's EarlyStopping and Keras' EarlyStopping by their messages."""
    from detectors._facts import fact_evidence, fact_number

    evs = run.events_of("early_stop")
    gs = fact_number(run, "global_step")  # the latest trainer_state's (each checkpoint keeps its own copy)
    src = gs[1].source if gs else None
    patience = counter = None
    if not evs and src is not None:
        patience, counter = (fact_number(run, k, src) for k in ("early_stopping_patience", "early_stopping_patience_counter"))
    if evs:
        ev = evs[-1]
        d = ev.data
        if d.get("trainer") == "lightning":
            title = (f"Training stopped by early stopping: {d.get('metric')} did not improve in the last "
                     f"{d.get('records')} validations (best {fmt(float(d.get('best')))})")
        else:
            title = f"Training stopped by early stopping at epoch {d.get('epoch')}"
        evidence = [event_evidence(ev, f"\"{ev.message.strip()[:200]}\"")]
        step = ev.step
    elif patience is not None and counter is not None and counter[0] >= patience[0] >= 1:
        ms = fact_number(run, "max_steps", src)
        at = f" at step {int(gs[0])}" + (f" of {int(ms[0])}" if ms and ms[0] > gs[0] else "") if gs else ""
        title = (f"Training stopped by early stopping{at}: no improvement in {int(counter[0])} evaluations in a row "
                 f"(early_stopping_patience {int(patience[0])})")
        evidence = [fact_evidence(counter[1], f"early_stopping_patience_counter = {int(counter[0])}"),
                    fact_evidence(patience[1], f"early_stopping_patience = {int(patience[0])}")]
        best = fact_number(run, "best_metric", src)
        if best is not None:
            ckpt = next((f for f in run.config.facts("best_model_checkpoint") if f.source == src), None)
            evidence.append(fact_evidence(best[1], f"best_metric {fmt(best[0])}" + (
                f", best_model_checkpoint {ckpt.value}" if ckpt is not None else "")))
        step = int(gs[0]) if gs else None
    else:
        return None
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9, title=title,
        message=("The early-stopping callback ended training because the monitored metric stopped improving: the run "
                 "finished on purpose, not by a failure. Training stops this way after its best evaluation, whose "
                 "weights are the ones to keep."),
        first_step=step, evidence=evidence, basis="direct",
        remedies=["If it stopped too soon, raise the patience (or lower min_delta / early_stopping_threshold), or "
                  "evaluate less often; keep the best weights (load_best_model_at_end, restore_best_weights=True, "
                  "ModelCheckpoint(monitor=...))."],
    )


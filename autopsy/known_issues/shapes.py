"""The fixed vocabulary of metric shapes a known-issue entry may name as its signature.

Entries are data; a curve's shape is code. Each shape is measured once here, by name, so fifty
entries that say ``loss_zero_with_nonfinite_grad_norm`` all mean the same thing and a new entry
cannot invent an untested heuristic. A shape returns a :class:`ShapeHit` (the step and the
evidence, with numbers) or None.

Metric families: ``grad_norm`` also covers prefixed names (``actor/grad_norm`` of verl), ``loss``
covers ``*/loss`` and ``*_loss`` terms only where the shape says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autopsy.model import Evidence, Run

#: share of non-finite grad_norm logs from the first one on that makes "non-finite from the start"
#: a state of the run (not AMP's one calibration step, which is finite afterwards)
FROM_START_SHARE = 0.5
#: a causal-LM mean cross-entropy above ln(vocab) (uniform guessing) at the first log is not a mean of a
#: fine-tune (a pretrained model starts far below it; only from-scratch pretraining starts near it)
ABOVE_UNIFORM = 1.0
#: vocabulary assumed when none is recorded: the largest common LM vocab (Gemma, 262k): a first loss above
#: ln(262144) = 12.5 is above uniform guessing for any current model
DEFAULT_VOCAB = 262_144
#: logs of exactly-zero loss (or grad_norm) that make "stuck at zero" a state, not one batch
MIN_ZERO_LOGS = 3
#: TRL's sampling/importance_sampling_ratio is ~1 when vLLM samples from the trained policy; a mean
#: below this (or above its inverse) says the rollout engine runs other weights
IS_RATIO_FAR = 0.1
#: TRL's sampling/sampling_logp_difference/mean is ~0.01-0.05 when engine and policy agree
LOGP_DIFF_FAR = 0.5


@dataclass
class ShapeHit:
    name: str
    step: int | None
    evidence: Evidence


def _family(run: Run, base: str) -> list[str]:
    return [m for m in run.metrics() if m == base or m.endswith("/" + base)]


def _points(run: Run, metric: str):  # noqa: ANN202 - detectors._common.Series
    from detectors._common import points

    return points(run, metric)


def grad_norm_nonfinite_from_start(run: Run) -> ShapeHit | None:
    """grad_norm non-finite at its first log and at most logs after: no step ever had a finite norm."""
    for m in _family(run, "grad_norm"):
        gn = _points(run, m)
        if not len(gn) or gn.finite[0]:
            continue
        bad = int((~gn.finite).sum())
        if len(gn) >= 2 and bool(gn.finite[1:].all()):
            continue  # AMP's first-step calibration: healthy
        if bad / len(gn) >= FROM_START_SHARE:
            p = gn[0]
            return ShapeHit("grad_norm_nonfinite_from_start", p.step, p.evidence(
                f"{m} = {p.value} from the first log (step {p.step}); {bad} of {len(gn)} logs non-finite"))
    return None


def loss_zero_with_nonfinite_grad_norm(run: Run) -> ShapeHit | None:
    """loss logged as exactly 0.0 while grad_norm is NaN/Inf at the same step (HF's nan/inf filter)."""
    from detectors._common import hidden_zero_steps

    hz = hidden_zero_steps(run)
    if not len(hz):
        return None
    p = hz[0]
    return ShapeHit("loss_zero_with_nonfinite_grad_norm", p.step, p.evidence(
        f"loss 0.0 with a non-finite grad_norm from step {p.step} ({len(hz)} such logs)"))


def loss_zero_persistent(run: Run) -> ShapeHit | None:
    """The training loss is exactly 0.0 at the last MIN_ZERO_LOGS+ logs (and stays there)."""
    loss = _points(run, "loss")
    if len(loss) < MIN_ZERO_LOGS:
        return None
    zero = loss.values == 0.0
    if not bool(zero[-MIN_ZERO_LOGS:].all()):
        return None
    nz = np.flatnonzero(~zero)
    first = int(nz[-1]) + 1 if nz.size else 0
    p = loss[first]
    return ShapeHit("loss_zero_persistent", p.step, p.evidence(
        f"loss exactly 0.0 from step {p.step} to the last log ({len(loss) - first} logs)"))


def grad_norm_zero_persistent(run: Run) -> ShapeHit | None:
    """grad_norm exactly 0.0 at MIN_ZERO_LOGS+ logs to the end: no gradient reaches the weights."""
    for m in _family(run, "grad_norm"):
        gn = _points(run, m)
        if len(gn) < MIN_ZERO_LOGS:
            continue
        zero = gn.values == 0.0
        if bool(zero[-MIN_ZERO_LOGS:].all()):
            nz = np.flatnonzero(~zero)
            first = int(nz[-1]) + 1 if nz.size else 0
            p = gn[first]
            return ShapeHit("grad_norm_zero_persistent", p.step, p.evidence(
                f"{m} exactly 0.0 from step {p.step} to the last log ({len(gn) - first} logs)"))
    return None


def uniform_bound(run: Run):  # noqa: ANN201 - (detectors._common.Series, int, float, fact or None)
    """The positive finite losses, the vocabulary size (``DEFAULT_VOCAB`` when not recorded), ln of it (the loss of
    uniform guessing) and the vocab_size fact; None without such a loss."""
    from detectors._facts import fact_number

    loss = _points(run, "loss")
    loss = loss.select(loss.finite & (loss.values > 0))
    if not len(loss):
        return None
    vocab = fact_number(run, "vocab_size")
    v = int(vocab[0]) if vocab and vocab[0] > 1 else DEFAULT_VOCAB
    return loss, v, math.log(v), vocab


def loss_scaled_by_grad_accum(run: Run) -> ShapeHit | None:
    """With gradient_accumulation_steps > 1, a first loss no fine-tune's mean cross-entropy reaches: above
    ln(vocab_size), uniform guessing (ln of DEFAULT_VOCAB when the vocab is not recorded)."""
    from detectors._facts import fact_number

    ga = fact_number(run, "gradient_accumulation_steps")
    if ga is None or ga[0] <= 1:
        return None
    got = uniform_bound(run)
    if got is None:
        return None
    loss, v, bound, vocab = got
    p = loss[0]
    if p.value <= ABOVE_UNIFORM * bound:
        return None
    label = f"ln(vocab_size={v}) = {bound:.2f}" if vocab else f"ln({v}) = {bound:.2f} (the largest common vocabulary)"
    return ShapeHit("loss_scaled_by_grad_accum", p.step, p.evidence(
        f"first loss {p.value:.4g} is above {label}, the loss of uniform guessing; "
        f"/ gradient_accumulation_steps {int(ga[0])} = {p.value / ga[0]:.4g}"))


def nonfinite_from_start(run: Run) -> ShapeHit | None:
    """The loss (or grad_norm) is non-finite at its very first log."""
    for m in ["loss", *_family(run, "grad_norm")]:
        s = _points(run, m)
        if len(s) and not s.finite[0] and not (m != "loss" and len(s) >= 2 and bool(s.finite[1:].all())):
            p = s[0]
            return ShapeHit("nonfinite_from_start", p.step, p.evidence(f"{m} = {p.value} at the first log (step {p.step})"))
    return None


def nonfinite_after_healthy(run: Run) -> ShapeHit | None:
    """Finite loss/grad_norm logs, then non-finite for good (the failure-level onset of NUM001)."""
    from detectors._common import nonfinite_onset

    onset = nonfinite_onset(run)
    if onset is not None and onset.step is not None and onset.persistent:
        for m in ["loss", *_family(run, "grad_norm")]:
            s = _points(run, m)
            if len(s) and bool((s.finite & (s.steps < onset.step)).any()):
                return ShapeHit("nonfinite_after_healthy", onset.step, onset.evidence)
    for m in _family(run, "grad_norm") + [x for x in run.metrics() if x.endswith(("/pg_loss", "/kl_loss"))]:
        s = _points(run, m)
        bad = np.flatnonzero(~s.finite)
        if bad.size and bad[0] > 0 and not s.finite[-1]:
            p = s[int(bad[0])]
            return ShapeHit("nonfinite_after_healthy", p.step, p.evidence(
                f"{m} = {p.value} at step {p.step} after {int(bad[0])} finite logs, non-finite to the end"))
    return None


def kl_nonfinite(run: Run) -> ShapeHit | None:
    """A KL term (``kl``, ``actor/kl_loss``, ``actor/ppo_kl``, ``objective/kl``) is NaN/Inf."""
    for m in run.metrics():
        leaf = m.rsplit("/", 1)[-1]
        if leaf in ("kl", "kl_loss", "ppo_kl", "kl_div") or leaf.startswith("kl_loss"):
            s = _points(run, m)
            bad = np.flatnonzero(~s.finite)
            if bad.size:
                p = s[int(bad[0])]
                return ShapeHit("kl_nonfinite", p.step, p.evidence(f"{m} = {p.value} at step {p.step}"))
    return None


def loss_dropped_from_log(run: Run) -> ShapeHit | None:
    """The loss stops being logged while the same log goes on with other training metrics.

    Megatron-style loops print ``lm loss`` only when it is > 0 (``avg > 0.0``), so a NaN loss
    silently disappears from the iteration line instead of showing as nan.
    """
    loss = _points(run, "loss")
    if not len(loss):
        return _loss_never_logged(run)
    if len(loss) < 2:
        return None
    last = loss[-1]
    for m in ("learning_rate", "grad_norm", "loss_scale"):
        s = _points(run, m)
        if not len(s):
            continue
        later = s.select(s.steps > last.step)
        if len(later) and later[0].source == last.source:
            p = later[0]
            return ShapeHit("loss_dropped_from_log", p.step, p.evidence(
                f"the loss is missing from the log from step {p.step} on while {m} is still logged "
                f"(last loss {last.value:.4g} at step {last.step})"))
    return None


def _loss_never_logged(run: Run) -> ShapeHit | None:
    """A Megatron iteration line (its skipped-iterations counter logged) that advanced every iteration of its
    interval (``number of skipped iterations: 0``) yet prints no loss of any kind: Megatron-LM's training_log
    prints each loss only ``if avg > 0.0``, so a NaN average leaves it out. (A line whose whole interval was
    skipped, fp16's first loss-scale calibration, has no loss to print; and a log where some step was skipped shows
    the NaN check working: not this.)"""
    if any(_is_train_loss(m) for m in run.metrics()):
        return None
    skipped = _points(run, "skipped_iterations")
    lr = _points(run, "learning_rate")
    if not len(skipped) or not len(lr) or bool((skipped.values != 0).any()):
        return None  # a loop that skips (and counts) a bad step is not the one whose NaN check never runs
    for i in np.flatnonzero(skipped.values == 0):
        p = skipped[int(i)]
        at = lr.select(lr.steps == p.step)
        if len(at) and at[0].source == p.source:
            return ShapeHit("loss_dropped_from_log", p.step, p.evidence(
                f"the iteration line at step {p.step} prints no loss while its learning rate ({at[0].value:.4g}) "
                f"and 'number of skipped iterations: 0' are printed: Megatron prints a loss only when its average "
                f"is > 0, so a NaN loss is left out"))
    return None


def _is_train_loss(metric: str) -> bool:
    leaf = metric.rsplit("/", 1)[-1].lower()
    if leaf.startswith(("eval", "val", "test")) or metric.lower().startswith(("eval", "val", "test")):
        return False
    return leaf == "loss" or leaf.endswith(("_loss", " loss"))


def rollout_policy_mismatch(run: Run) -> ShapeHit | None:
    """The rollout engine samples from other weights than the policy being trained (TRL's vLLM
    importance-sampling diagnostics far from 1 / log-prob difference far from 0)."""
    for m in run.metrics():
        if m.endswith("importance_sampling_ratio/mean"):
            s = _points(run, m).finite_only()
            far = (s.values < IS_RATIO_FAR) | (s.values > 1 / IS_RATIO_FAR)
            if far.any():
                p = s[int(np.flatnonzero(far)[0])]
                return ShapeHit("rollout_policy_mismatch", p.step, p.evidence(
                    f"{m} = {p.value:.3g} at step {p.step} (~1 when vLLM samples from the trained weights)"))
    for m in run.metrics():
        if m.endswith("logp_difference/mean"):
            s = _points(run, m).finite_only()
            far = s.values > LOGP_DIFF_FAR
            if far.any():
                p = s[int(np.flatnonzero(far)[0])]
                return ShapeHit("rollout_policy_mismatch", p.step, p.evidence(
                    f"{m} = {p.value:.3g} at step {p.step} (~0.02 when vLLM samples from the trained weights)"))
    return None


def eval_loss_nonfinite_train_finite(run: Run) -> ShapeHit | None:
    """eval_loss is NaN/Inf while the training loss is finite at its last log."""
    ev = _points(run, "eval_loss")
    loss = _points(run, "loss")
    if not len(ev) or not len(loss) or not loss.finite[-1]:
        return None
    bad = np.flatnonzero(~ev.finite)
    if not bad.size:
        return None
    p = ev[int(bad[0])]
    return ShapeHit("eval_loss_nonfinite_train_finite", p.step, p.evidence(
        f"eval_loss = {p.value} at step {p.step} while the training loss stays finite ({loss[-1].value:.4g})"))


def nonfinite_seen(run: Run) -> ShapeHit | None:
    """Anything non-finite at all: a NaN/Inf log of the loss, an evaluation loss or grad_norm, or a message saying the
    loop met one (a stop on a NaN loss, tensorboardX's "NaN or Inf found in input tensor"). Only for entries whose own
    message (``match: all``) says which bug it is: on its own this shape names no cause."""
    for m in ["loss", "eval_loss", *_family(run, "grad_norm")]:
        s = _points(run, m)
        bad = np.flatnonzero(~s.finite) if len(s) else ()
        if len(bad):
            p = s[int(bad[0])]
            return ShapeHit("nonfinite_seen", p.step, p.evidence(f"{m} = {p.value} at step {p.step}"))
    from detectors._facts import event_evidence

    for kind in ("nan_stop", "nonfinite_logged"):
        for ev in run.events_of(kind):
            return ShapeHit("nonfinite_seen", ev.step, event_evidence(ev))
    return None


SHAPES: dict[str, Callable[[Run], ShapeHit | None]] = {
    f.__name__: f for f in (
        grad_norm_nonfinite_from_start, loss_zero_with_nonfinite_grad_norm, loss_zero_persistent,
        grad_norm_zero_persistent, loss_scaled_by_grad_accum, nonfinite_from_start, nonfinite_after_healthy,
        kl_nonfinite, loss_dropped_from_log, rollout_policy_mismatch, eval_loss_nonfinite_train_finite,
        nonfinite_seen,
    )
}


def measure(run: Run, name: str) -> ShapeHit | None:
    """One shape on a run; a shape that cannot be measured (no such series) is simply absent."""
    fn = SHAPES.get(name)
    return fn(run) if fn is not None else None

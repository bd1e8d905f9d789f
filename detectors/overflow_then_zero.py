"""Overflow then zero: the loss explodes by orders of magnitude, then reads 0.0 with NaN grad_norm.

What it detects:
    The "1.19e+34 then 0" shape: a finite loss that jumps at least ``SPIKE_FACTOR`` times above
    its recent level (or past fp16's maximum, 65504), followed within a few logs by losses of
    exactly 0.0 logged together with a non-finite ``grad_norm`` (or by NaN losses; where no ``grad_norm`` is logged,
    by exact zeros two or more logs in a row right after the spike).

Why it matters:
    The zeros are not a converged model: HF Trainer's ``logging_nan_inf_filter`` logs a window of
    non-finite losses as 0.0. The spike before them places the overflow; this shape usually means
    half precision ran out of range (fp16 max 65504) or the optimisation diverged.

Evidence used:
    ``loss`` and ``grad_norm`` series from any source.

Remedies:
    Train in bf16 or fp32 (``torch_dtype=auto``/``bfloat16``, ``bf16=True``) instead of pure fp16
    weights; lower the learning rate and enable gradient clipping (``max_grad_norm=1.0``); resume
    from the last checkpoint before the spike.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Finding, Run
from detectors._common import (
    FP16_MAX,
    Series,
    bf16_or_fp32,
    checkpoint_evidence,
    fmt,
    fp16_signals,
    hidden_zero_mask,
    points,
)
from detectors.knobs import knob, sentence

CODE = "NUM002"
SLUG = "overflow-then-zero"
ROOT_CAUSE = None
NEEDS = ("scalars",)

#: a jump of 10x over the recent median is far outside normal batch-to-batch noise of a loss
SPIKE_FACTOR = 10.0
#: logs before the spike whose median is the "normal" level
BASELINE_LOGS = 5
#: the zero / NaN readings must follow the spike within this many logs
FOLLOW_LOGS = 5


def _baselines(loss: Series, idx: np.ndarray) -> np.ndarray:
    """Median of the finite, non-zero values among the BASELINE_LOGS logs before each of ``idx``
    (NaN where there is none): ``robust_level`` of the window, for many candidates at once."""
    pad = np.concatenate((np.full(BASELINE_LOGS, np.nan), loss.values))
    win = np.lib.stride_tricks.sliding_window_view(pad, BASELINE_LOGS)[idx].copy()  # window i = logs i-5..i-1
    win[(win == 0.0) | ~np.isfinite(win)] = np.nan
    out = np.full(len(idx), np.nan)
    has = ~np.isnan(win).all(axis=1)
    if has.any():
        out[has] = np.nanmedian(win[has], axis=1)
    return out


def detect(run: Run) -> Iterable[Finding]:
    loss = points(run, "loss")
    if len(loss) < 2:
        return
    gn_pts = points(run, "grad_norm")
    v, fin = loss.values, loss.finite
    # a loss log is "dead" when it is non-finite, or exactly 0.0 with a non-finite grad_norm at its step
    zero_dead = hidden_zero_mask(loss, gn_pts)
    dead_all = ~fin | zero_dead
    # candidates: a finite positive loss past fp16's range, or at least SPIKE_FACTOR x a window value
    # (the window minimum bounds its median from below, so this keeps every spike; the medians are exact below)
    pos = fin & (v > 0)
    pad = np.concatenate((np.full(BASELINE_LOGS, np.inf), np.where(fin & (v != 0.0), v, np.inf)))
    win_min = np.lib.stride_tricks.sliding_window_view(pad, BASELINE_LOGS)[: len(v)].min(axis=1)
    cand = np.flatnonzero(pos & ((v > FP16_MAX) | (v >= SPIKE_FACTOR * win_min)))
    if not cand.size:
        return
    bases = _baselines(loss, cand)
    spike = (v[cand] > FP16_MAX) | ((bases > 0) & (v[cand] >= SPIKE_FACTOR * bases))
    # followed by a dead log within FOLLOW_LOGS
    csum = np.concatenate(([0], np.cumsum(dead_all)))
    n = len(v)
    followed = csum[np.minimum(cand + 1 + FOLLOW_LOGS, n)] - csum[np.minimum(cand + 1, n)] > 0
    hits = np.flatnonzero(spike & followed)
    if not hits.size:
        return
    i = int(cand[hits[0]])
    b = bases[hits[0]]
    base = None if np.isnan(b) else float(b)
    p = loss[i]
    past_fp16 = p.value > FP16_MAX
    d_idx = i + 1 + int(np.flatnonzero(dead_all[i + 1:i + 1 + FOLLOW_LOGS])[0])
    n_zero = int(zero_dead[i + 1:].sum())
    n_nan = int((~fin[i + 1:]).sum())
    # only a run that computes in fp16 "overflows"; an fp32/bf16 loss that explodes is divergence
    half = bool(fp16_signals(run)) and bf16_or_fp32(run) is None
    spike_txt = f"loss {fmt(p.value)} at step {p.step}" + (
        f" ({p.value / base:.3g}x its recent level {fmt(base)})" if base and base > 0 else "")
    tail = []
    if n_zero:
        tail.append(f"then exactly 0.0 for {n_zero} logs" + (" while grad_norm is non-finite" if len(gn_pts) else
                                                            " (no grad_norm logged; a loss does not fall from there to "
                                                            "exactly 0.0)"))
    if n_nan:
        tail.append(f"NaN/Inf for {n_nan} logs")
    evidence = [p.evidence(spike_txt + (" (past fp16's max 65504)" if past_fp16 and half else ""))]
    d = loss[d_idx]
    d_present, d_gn = gn_pts.lookup(np.array([d.step]))
    evidence.append(d.evidence(f"loss = {fmt(d.value)} at step {d.step}"
                               + (f" with grad_norm = {fmt(float(d_gn[0]))}" if d_present[0] else "")))
    ck_ev, resume = checkpoint_evidence(run, p.step)
    evidence.extend(ck_ev)
    precision = "Train in bf16 (Ampere or newer) or fp32: torch_dtype=auto or bfloat16 rather than float16/half weights."
    lower = sentence(f"Lower the learning rate and {knob(run, 'clip')}; accumulate fewer batches per step while testing")
    remedies = [precision, lower] if half else [lower]
    if resume:
        remedies.append(resume[0].upper() + resume[1:] + ".")
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.9,
        title=f"Loss {'overflowed' if half else 'exploded'} at step {p.step}, then read 0.0/NaN",
        message=f"{spike_txt}, {', '.join(tail)}" + (": the zeros are hidden non-finite losses, not convergence."
                                                     if n_zero else "."),
        first_step=p.step, evidence=evidence, remedies=remedies, basis="symptom", symptom="overflow_then_zero",
    )
    return

"""A failed run against a good one: what changed, where the curves part, and what that says.

Why a baseline sharpens the diagnosis: one run's loss of 5.3 at step 1 may be normal for its data;
the same 5.3 next to a twin that started at 1.2 with only ``padding_free`` flipped is evidence.
So this module *measures* the differences (config and versions, the first step where the loss
curves part beyond their own step-to-step noise, start and final loss gaps, tensor differences of
checkpoints saved at the same step) and turns the telling ones into findings (codes ``CMP*``)
whose evidence cites both runs. Judging stays with ``autopsy.diagnosis.diagnose``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autopsy.model import Checkpoint, Evidence, Finding, Run, jsonable, save_order_key

#: keys of Run.config that describe the run's outcome or bookkeeping, not how it was configured
OUTCOME_KEYS = frozenset({"global_step", "best_metric", "best_model_checkpoint", "last_model_checkpoint",
                          "training_args.class", "architectures"})
OUTCOME_PREFIXES = ("results.",)
#: curves "part" when |a - b| exceeds this many times the two runs' own step-to-step noise (summed)
PART_NOISE_FACTOR = 3.0
#: ... and stay apart for this many further common points (one outlier log is not a parting)
PART_PERSIST = 2
#: noise is the median |step-to-step change| of a run's first points up to the candidate step, at least these many
MIN_NOISE_POINTS = 3
#: a start loss counts as "far above" the baseline when it exceeds it by this share and by the noise test
START_GAP_SHARE = 0.25
#: checkpoints compared tensor by tensor at most (first, middle and last matching step): each costs a full read
MAX_CHECKPOINT_DIFFS = 3
#: changed tensors listed per checkpoint pair
TOP_CHANGED = 5
#: config keys whose flip explains a start-loss jump: cross-sample attention (see detectors/padding_free.py)
PACKING_KEYS = ("padding_free", "packing")


@dataclass
class Curve:
    """One metric's comparison: where the two runs part, and their start and final values."""

    metric: str
    common_steps: int
    part_step: int | None = None
    part_values: tuple[float, float] | None = None
    noise: tuple[float, float] | None = None
    start: tuple[float | None, float | None] = (None, None)
    start_steps: tuple[int | None, int | None] = (None, None)
    final: tuple[float | None, float | None] = (None, None)
    final_steps: tuple[int | None, int | None] = (None, None)

    @property
    def start_gap(self) -> float | None:
        a, b = self.start
        return a - b if a is not None and b is not None else None

    @property
    def final_gap(self) -> float | None:
        a, b = self.final
        return a - b if a is not None and b is not None else None

    def to_json(self) -> dict[str, Any]:
        return jsonable({"metric": self.metric, "common_steps": self.common_steps, "part_step": self.part_step,
                         "part_values": list(self.part_values) if self.part_values else None,
                         "noise": list(self.noise) if self.noise else None,
                         "start": list(self.start), "start_steps": list(self.start_steps), "start_gap": self.start_gap,
                         "final": list(self.final), "final_steps": list(self.final_steps), "final_gap": self.final_gap})


@dataclass
class Comparison:
    """Everything measured between a run (``a``, the failed one) and its baseline (``b``)."""

    a_root: str
    b_root: str
    config: list[dict[str, Any]] = field(default_factory=list)  # {key, a, b, a_source, b_source}
    versions: list[dict[str, Any]] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    baseline_verdict: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)

    def curve(self, metric: str) -> Curve | None:
        return next((c for c in self.curves if c.metric == metric), None)

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a_root, "b": self.b_root, "baseline_verdict": self.baseline_verdict,
                "config": jsonable(self.config), "versions": jsonable(self.versions),
                "curves": [c.to_json() for c in self.curves], "checkpoints": jsonable(self.checkpoints)}


# -- measuring ---------------------------------------------------------------------------------

def _scalar(v: Any) -> Any:
    """A config value comparable with ==: lists as tuples, floats as floats (1e-2 == 0.01)."""
    if isinstance(v, list):
        return tuple(_scalar(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _scalar(x)) for k, x in v.items()))
    return v


def config_differences(a: Run, b: Run) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(config rows, version rows) for canonical keys whose first value differs or is on one side only."""
    rows: list[dict[str, Any]] = []
    versions: list[dict[str, Any]] = []
    for key in sorted(set(a.config.keys()) | set(b.config.keys())):
        if key in OUTCOME_KEYS or key.startswith(OUTCOME_PREFIXES):
            continue
        fa, fb = a.config.fact(key), b.config.fact(key)
        va = fa.value if fa else None
        vb = fb.value if fb else None
        if fa and fb and _scalar(va) == _scalar(vb):
            continue
        row = {"key": key, "a": va, "b": vb, "a_source": fa.source if fa else None, "b_source": fb.source if fb else None,
               "a_where": fa.where if fa else None, "b_where": fb.where if fb else None}
        (versions if key.startswith("version.") else rows).append(row)
    return rows, versions


def _series(run: Run, metric: str) -> tuple[np.ndarray, np.ndarray]:
    arr = run.arrays(metric)
    if arr is None:
        return np.zeros(0, dtype="int64"), np.zeros(0)
    steps, values = np.asarray(arr.steps), np.asarray(arr.values, dtype="float64")
    # one value per step (the last logged), so the two runs align step by step
    if len(steps) > 1:
        keep = np.append(steps[1:] != steps[:-1], True)
        steps, values = steps[keep], values[keep]
    return steps, values


def _noise(values: np.ndarray) -> float:
    """Median |step-to-step change| of the finite values: a run's own jitter."""
    v = values[np.isfinite(values)]
    if len(v) < 2:
        return 0.0
    return float(np.median(np.abs(np.diff(v))))


def compare_curve(a: Run, b: Run, metric: str) -> Curve | None:
    sa, va = _series(a, metric)
    sb, vb = _series(b, metric)
    if not len(sa) or not len(sb):
        return None
    common, ia, ib = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
    curve = Curve(metric, int(len(common)))
    (s0a, v0a), (s0b, v0b) = _first_finite(sa, va), _first_finite(sb, vb)
    curve.start, curve.start_steps = (v0a, v0b), (s0a, s0b)
    la, lb = _last_finite(sa, va), _last_finite(sb, vb)
    curve.final, curve.final_steps = (la[1], lb[1]), (la[0], lb[0])
    xa, xb = va[ia], vb[ib]
    for i in range(len(common)):
        # each run's noise from its points up to here, and never from fewer than MIN_NOISE_POINTS (so a gap
        # present from the first step is judged against the next few points' jitter)
        k = max(i + 1, MIN_NOISE_POINTS)
        na, nb = _noise(xa[:k]), _noise(xb[:k])
        if _parted(xa, xb, i, na + nb) and all(_parted(xa, xb, j, na + nb)
                                                for j in range(i + 1, min(len(common), i + 1 + PART_PERSIST))):
            curve.part_step = int(common[i])
            curve.part_values = (float(xa[i]), float(xb[i]))
            curve.noise = (na, nb)
            break
    if curve.noise is None and len(common) >= 2:
        curve.noise = (_noise(xa), _noise(xb))
    return curve


def _parted(xa: np.ndarray, xb: np.ndarray, i: int, noise: float) -> bool:
    fa, fb = math.isfinite(xa[i]), math.isfinite(xb[i])
    if fa != fb:
        return True  # one went non-finite, the other did not
    if not fa:
        return False
    return abs(float(xa[i] - xb[i])) > PART_NOISE_FACTOR * max(noise, 1e-12)


def _first_finite(steps: np.ndarray, values: np.ndarray) -> tuple[int | None, float | None]:
    idx = np.flatnonzero(np.isfinite(values))
    return (int(steps[idx[0]]), float(values[idx[0]])) if idx.size else (None, None)


def _last_finite(steps: np.ndarray, values: np.ndarray) -> tuple[int | None, float | None]:
    idx = np.flatnonzero(np.isfinite(values))
    return (int(steps[idx[-1]]), float(values[idx[-1]])) if idx.size else (None, None)


def checkpoint_differences(a: Run, b: Run) -> list[dict[str, Any]]:
    """Tensor differences of checkpoints saved at the same step in both runs (checkpoints/diff.py)."""
    from autopsy.checkpoints.diff import diff

    # one pair per step: a run may hold two saves at one step (checkpoint-60 and the final save in the run
    # folder); the numbered checkpoints come first in save order and are paired like with like
    def first_per_step(r: Run) -> dict[int, Checkpoint]:
        out: dict[int, Checkpoint] = {}
        for c in sorted((c for c in r.checkpoints if c.step is not None), key=lambda c: save_order_key(c.step, c.path)):
            out.setdefault(c.step, c)
        return out

    by_step_a, by_step_b = first_per_step(a), first_per_step(b)
    pairs = [(c, by_step_b[s]) for s, c in by_step_a.items() if s in by_step_b]
    if len(pairs) > MAX_CHECKPOINT_DIFFS:
        pairs = [pairs[0], pairs[len(pairs) // 2], pairs[-1]]
    out = []
    for ca, cb in pairs:
        res = diff(Path(a.root) / ca.path, Path(b.root) / cb.path)
        bad_a = {t.name for t in ca.nonfinite_tensors}
        bad_b = {t.name for t in cb.nonfinite_tensors}
        out.append({
            "step": ca.step, "a": ca.path, "b": cb.path, "changed": len(res.changed), "identical": len(res.identical),
            "only_a": len(res.only_a), "only_b": len(res.only_b),
            "nonfinite_only_a": sorted(bad_a - bad_b)[:20], "nonfinite_only_b": sorted(bad_b - bad_a)[:20],
            "top": [d.to_json() for d in res.changed[:TOP_CHANGED]], "problems": res.problems[:5],
        })
    return out


def compare_runs(a: Run, b: Run, baseline_verdict: dict[str, Any] | None = None,
                 with_checkpoints: bool = True) -> Comparison:
    cmp = Comparison(str(a.root), str(b.root), baseline_verdict=baseline_verdict)
    cmp.config, cmp.versions = config_differences(a, b)
    for metric in ("loss", "eval_loss", "grad_norm"):
        c = compare_curve(a, b, metric)
        if c is not None:
            cmp.curves.append(c)
    if with_checkpoints:
        cmp.checkpoints = checkpoint_differences(a, b)
    cmp.findings = comparison_findings(cmp, a, b)
    return cmp


# -- judging: findings that use the baseline as evidence ----------------------------------------

def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "(not set)" if v is None else str(v)


def _config_evidence(cmp: Comparison, keys: tuple[str, ...] | None = None) -> list[Evidence]:
    out = []
    for r in cmp.config + cmp.versions:
        if keys is not None and r["key"] not in keys:
            continue
        out.append(Evidence(r["a_source"] or r["b_source"] or "", f"key {r['key']}",
                            f"{r['key']} = {_fmt(r['a'])} here, {_fmt(r['b'])} in the baseline "
                            f"({r['b_source'] or 'not set'})"))
    return out


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1", "yes"))


def comparison_findings(cmp: Comparison, a: Run, b: Run) -> list[Finding]:
    out: list[Finding] = []
    loss = cmp.curve("loss")
    base = f"baseline {cmp.b_root}"
    if loss is not None and loss.start_gap is not None:
        sa, sb = loss.start
        na, nb = loss.noise or (0.0, 0.0)
        if loss.start_gap > max(START_GAP_SHARE * abs(sb), PART_NOISE_FACTOR * (na + nb)):
            out.append(_start_loss_finding(cmp, a, loss, base))
    if loss is not None and loss.part_step is not None:
        out.append(_parting_finding(cmp, a, loss, base))
    if cmp.config or cmp.versions:
        n = len(cmp.config) + len(cmp.versions)
        keys = ", ".join(r["key"] for r in (cmp.config + cmp.versions)[:8])
        out.append(Finding(
            "CMP003", "config-differs-from-baseline", None, "info", 1.0,
            f"{n} configuration key(s) differ from the baseline",
            f"Against {base}: {keys}{' ...' if n > 8 else ''}. Only keys that differ are listed.",
            evidence=_config_evidence(cmp), basis="symptom"))
    return out


def _start_loss_finding(cmp: Comparison, a: Run, loss: Curve, base: str) -> Finding:
    sa, sb = loss.start
    flipped = [r for r in cmp.config if r["key"] in PACKING_KEYS and _truthy(r["a"]) and not _truthy(r["b"])]
    ev = [Evidence(a.series_sources.get("loss", ""), f"step {loss.start_steps[0]}",
                   f"first loss {_fmt(sa)} here vs {_fmt(sb)} at step {loss.start_steps[1]} in the baseline",
                   loss.start_steps[0])]
    if flipped:
        ev += _config_evidence(cmp, PACKING_KEYS + ("attn_implementation",))
        return Finding(
            "CMP001", "start-loss-above-baseline", "padding_free_without_flash_attn", "error", 0.7,
            f"Start loss {_fmt(sa)} vs {_fmt(sb)} in the padded baseline: samples attend across each other",
            f"The first loss is {_fmt(sa - sb)} above the baseline's and {', '.join(r['key'] for r in flipped)} is the "
            "packing switch that differs: a packed batch whose attention kernel ignores sample boundaries "
            "conditions every sample on unrelated text, which shows first as a high start loss.",
            first_step=loss.start_steps[0], evidence=ev,
            remedies=["load the model with attn_implementation=\"flash_attention_2\" (or transformers >= 4.54 "
                      "without an explicit attention_mask), or turn padding-free/packing off"],
            references=["https://github.com/huggingface/trl/issues/2834"], basis="inferred")
    ev += _config_evidence(cmp)[:6]
    return Finding(
        "CMP001", "start-loss-above-baseline", None, "warning", 0.6,
        f"Start loss {_fmt(sa)} vs {_fmt(sb)} in the baseline",
        f"The first loss is {_fmt(sa - sb)} above the baseline's before any training happened: the data, model, "
        "tokenizer or loss differ (see the configuration differences).",
        first_step=loss.start_steps[0], evidence=ev, basis="symptom")


def _parting_finding(cmp: Comparison, a: Run, loss: Curve, base: str) -> Finding:
    va, vb = loss.part_values or (math.nan, math.nan)
    na, nb = loss.noise or (0.0, 0.0)
    fa, fb = loss.final
    worse = (fa is None or (fb is not None and fa - fb > PART_NOISE_FACTOR * (na + nb))
             or _nonfinite_after(a, loss.part_step or 0))
    ev = [Evidence(a.series_sources.get("loss", ""), f"step {loss.part_step}",
                   f"loss {_fmt(va)} here vs {_fmt(vb)} in the baseline; step-to-step noise {_fmt(na)} / {_fmt(nb)}",
                   loss.part_step),
          Evidence(a.series_sources.get("loss", ""), f"step {loss.final_steps[0]}",
                   f"last finite loss {_fmt(fa)} (step {loss.final_steps[0]}) vs {_fmt(fb)} "
                   f"(step {loss.final_steps[1]}) in the baseline", loss.final_steps[0])]
    lr = next((r for r in cmp.config if r["key"] == "learning_rate"), None)
    higher_lr = (lr is not None and isinstance(lr["a"], (int, float)) and isinstance(lr["b"], (int, float))
                 and lr["a"] > lr["b"])
    if worse and higher_lr:
        ev += _config_evidence(cmp, ("learning_rate", "optim", "max_grad_norm", "warmup_steps", "lr_scheduler_type"))
        return Finding(
            "CMP002", "diverges-from-baseline", "lr_too_high", "warning", 0.6,
            f"Loss parts from the baseline at step {loss.part_step} and ends worse; the learning rate is "
            f"{_fmt(lr['a'])} vs {_fmt(lr['b'])}",
            f"From step {loss.part_step} the loss is more than {PART_NOISE_FACTOR:g}x both runs' step-to-step noise "
            f"away from {base}, and it ends worse (higher or non-finite); the learning rate is higher "
            "than the baseline's, the usual cause of such a divergence.",
            first_step=loss.part_step, evidence=ev, basis="inferred")
    ev += _config_evidence(cmp)[:6]
    return Finding(
        "CMP002", "diverges-from-baseline", None, "warning" if worse else "info", 0.6,
        f"Loss parts from the baseline at step {loss.part_step}" + (" and ends worse" if worse else ""),
        f"From step {loss.part_step} the loss is more than {PART_NOISE_FACTOR:g}x both runs' step-to-step noise "
        f"away from {base}. The configuration differences are the first suspects.",
        first_step=loss.part_step, evidence=ev, basis="symptom")


def _nonfinite_after(run: Run, step: int) -> bool:
    """Loss or grad_norm non-finite at or after ``step``: a run that "ends at loss 0.0" under HF's NaN filter
    (``logging_nan_inf_filter``) has not ended better than its baseline."""
    for metric in ("loss", "grad_norm"):
        s, v = _series(run, metric)
        if len(s) and bool((~np.isfinite(v[s >= step])).any()):
            return True
    return False

"""Combine findings into one verdict: a causal timeline, not a sort by severity.

Measuring (detectors) and judging (here) are kept apart. docs/diagnosis.md describes the model:

1. **Timeline.** Every finding is an anomaly at a time: config facts at step 0, events at their
   step or line, series anomalies at their onset, checkpoint anomalies at their save step. Each
   carries what it observed (``Finding.symptom``) and, when it can, the cause it proposes.
2. **Candidates.** One candidate per proposed root cause; detectors that name the same cause
   reinforce it (noisy-or, capped). A candidate's onset is its earliest finding (0 when a config or
   a message present from the start establishes it).
3. **Consequences are not rivals.** A candidate established only by symptoms that an earlier (or
   simultaneous) candidate explains (``autopsy.causes.EXPLAINS``) is that candidate's consequence:
   weights that stop moving *after* an LR-driven NaN are shown under the LR, never beside it.
   A candidate seen directly (a message or config naming it) is never demoted, except the generic
   ``crash``.
4. **Ranking.** Among the remaining candidates at error level: how much of the observed failure
   (the distinct error-level symptoms) each explains, then directness (direct > inferred), then
   confidence, then the prior (``autopsy.causes.PRIOR``), then the earliest onset.
5. **Verdict.** ``failed`` with the top cause; ``inconclusive`` when the two best are
   indistinguishable (same coverage and basis, confidences within ``TIE_MARGIN``), when only
   symptoms are at error level, or when there is nothing to judge; ``healthy`` when nothing at error
   level remains. Damage (non-finite, empty or all-zero saved weights) is an error by itself, so a
   run with NaN weights is never healthy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from autopsy.causes import DAMAGE, PRIOR, explains
from autopsy.metrics import PRIMARY_LOSSES, UNNAMED_COLUMN, loss_like, stand_in_losses
from autopsy.model import (
    CONDITIONAL_REMEDY,
    ROOT_CAUSES,
    SEVERITY_RANK,
    ChainStep,
    DetectorOutcome,
    Diagnosis,
    Finding,
    Run,
    TimelineEntry,
    Verdict,
)

BASIS_RANK = {"direct": 2, "inferred": 1, "symptom": 0}
#: two causes whose confidences are closer than this are "too close to call" unless one is direct
TIE_MARGIN = 0.05
#: below this, an inferred cause is a candidate, not a verdict
MIN_FAILED_CONFIDENCE = 0.5
#: agreement between detectors raises confidence, but never to certainty
MAX_CONFIDENCE = 0.97
#: each error-level symptom the verdict's cause does not explain lowers its confidence by this much
UNEXPLAINED_PENALTY = 0.08
#: causes that say "it died" without saying why: any specific cause of equal standing ranks above
GENERIC_CAUSES = ("crash", "unknown")
MAX_CHAIN = 40
MAX_TIMELINE = 60

#: what would tell a cause apart from the others (shown with the alternatives)
TELLS: dict[str, str] = {
    "lr_too_high": "rerun from the last clean checkpoint with the LR divided by 10: divergence that disappears was the LR",
    "fp16_overflow": "rerun the same steps in bf16 or fp32: a NaN that disappears was fp16's range (max 65504)",
    "loss_scale_collapse": "watch the loss scale in bf16/fp32 (no scaler) or with a lower LR: no overflow means fp16 range",
    "nan_in_data": "replay the batches of the failing steps alone in fp32: a NaN that follows the batch is the data",
    "gradientless_params": "print the trainable parameters and their .grad after one backward: None means no gradient path",
    "framework_bug": "rerun with the named version upgraded or the flag turned off, everything else unchanged",
    "out_of_memory": "rerun with half the batch size: an OOM that disappears was memory",
    "crash": "read the full traceback: the frame that raised names the component at fault",
    "lr_schedule_stalled": "print the LR of the first steps: a schedule that never leaves ~0 trains nothing",
    "kl_estimator_overflow": "clamp the log-ratio before exp() in the KL term: a NaN that disappears was the estimator",
    "zero3_empty_tensors": "load the saved state dict and print shapes: [0] means partitions were saved ungathered",
    "degenerate_labels": "count the training labels per class after loading: one class (or all-background masks) is a task with nothing to learn",
    "ctc_output_longer_than_input": "compare each failing sample's label length with its input frames after subsampling: "
                                    "labels that outnumber the frames have no CTC alignment",
    "loss_shape_mismatch": "print output.shape and target.shape right before the loss: they must be equal (squeeze the "
                           "[N, 1] output or unsqueeze the [N] target)",
    "pretrained_weights_not_loaded": "check the checkpoint path exists where the run looks (ls it) and that the log says it "
                                     "was loaded: a fine-tune from random weights starts at the untrained loss",
}


@dataclass
class _Cause:
    root_cause: str
    confidence: float
    basis: str
    first_step: int | None
    best: Finding
    support: list[Finding]
    onset: int | None = None  # 0 when present from the start (config, or a message with no step)
    consequence_of: str | None = None
    explained: list[Finding] = field(default_factory=list)

    @property
    def coverage(self) -> int:
        return len({f.symptom for f in self.explained if f.symptom and SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]})


def rank_key(f: Finding) -> tuple:
    return (-SEVERITY_RANK[f.severity] if f.severity in ("critical", "error") else -1,
            -BASIS_RANK.get(f.basis, 0), -f.confidence,
            f.first_step if f.first_step is not None else 1 << 62)


def diagnose(findings: list[Finding], outcomes: list[DetectorOutcome], run: Run | None = None) -> Diagnosis:
    ordered = sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], -BASIS_RANK.get(f.basis, 0),
                                              -f.confidence, f.code))
    for f in ordered:
        f.explained_by = None
    serious = [f for f in ordered if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]]
    causes = _causes(ordered)
    _mark_consequences(causes)
    live = [c for c in causes if c.consequence_of is None]
    for c in live:
        c.explained = [f for f in ordered if f.root_cause == c.root_cause or (
            explains(c.root_cause, f.symptom) and _precedes(c.onset, f.first_step))]
    live.sort(key=_cause_key)
    strong = [c for c in live if SEVERITY_RANK[c.best.severity] >= SEVERITY_RANK["error"]
              and (c.basis == "direct" or c.confidence >= MIN_FAILED_CONFIDENCE)]
    alternatives: list[dict] = []
    top: _Cause | None = None
    if not serious and run is not None and _nothing_to_judge(run):
        verdict = Verdict("inconclusive", "unknown", 0.0, _nothing_headline(run))
    elif not serious and any(o.status == "failed" for o in outcomes):
        # a check that raised may be the one that would have found the failure (a NaN run's NUM001): not healthy
        broke = [o for o in outcomes if o.status == "failed"]
        verdict = Verdict("inconclusive", "unknown", 0.0,
                          "No failure found by the checks that ran, but " + ", ".join(f"{o.code} {o.name}" for o in broke[:3])
                          + (" and others" if len(broke) > 3 else "") + " failed to run (see the detector table): the run "
                          "cannot be called healthy.")
        alternatives = _alternatives(causes, None)
    elif not serious:
        headline = "No failure found in the artifacts read." + _healthy_evidence(run)
        warnings = [f for f in ordered if f.severity == "warning"]
        # (not a known bug's "exposed, no sign of it": a version range, nothing this run showed)
        notes = [f for f in ordered if f.severity == "info" and f.symptom != "known_bug_signature"]
        if warnings:  # the first one named (an overfitting run reads as sound training, and is)
            more = len(warnings) - 1
            headline += f" Worth a look: {warnings[0].title}" + (f" (and {more} more warning{'s' * (more > 1)})" if more else "") + "."
        elif notes:  # why a sound run ended where it did (early stopping, a Ctrl-C), how its checkpoints are kept
            headline += f" Note: {notes[0].title}."
        verdict = Verdict("healthy", "healthy", _healthy_confidence(ordered, run), headline)
        alternatives = _alternatives(causes, None)
    elif strong:
        top = strong[0]
        status = "failed"
        if len(strong) > 1 and _indistinguishable(top, strong[1]):
            status = "inconclusive"
        unexplained = _unexplained(serious, top)
        conf = max(0.3, top.confidence - UNEXPLAINED_PENALTY * len(unexplained)) if status == "failed" else top.confidence
        verdict = Verdict(status, top.root_cause if status == "failed" else "unknown", conf,
                          _headline(top, ordered, status))
        if status == "failed":
            for f in top.explained:
                if f.root_cause != top.root_cause:
                    f.explained_by = top.root_cause
            for c in causes:
                if c.consequence_of == top.root_cause:
                    for f in c.support:
                        f.explained_by = top.root_cause
            for f in ordered:  # a symptom's "if no other finding names the cause" advice: another one does
                if f.explained_by and any(CONDITIONAL_REMEDY in r for r in f.remedies):
                    f.remedies = [r for r in f.remedies if CONDITIONAL_REMEDY not in r]
        alternatives = _alternatives(causes, top)
    else:
        # the earliest error-level anomaly leads (the onset); saved damage is named beside it
        symptom = min(serious, key=lambda f: (f.first_step is None, f.first_step or 0, f.symptom in DAMAGE))
        conf = min(serious[0].confidence, live[0].confidence if live else 0.3, 0.5)
        damage = next((f for f in serious if f.symptom in DAMAGE and f is not symptom), None)
        headline = symptom.title + (f"; {damage.title[0].lower()}{damage.title[1:]}" if damage else "")
        headline += "; the artifacts do not single out a cause"
        if live:
            headline += f" (best candidate: {live[0].root_cause}, {live[0].confidence:.2f})"
        verdict = Verdict("inconclusive", "unknown", conf, headline + ".")
        alternatives = _alternatives(causes, None)
    chain = build_chain(ordered, verdict)
    timeline = build_timeline(ordered, verdict)
    return Diagnosis(verdict=verdict, findings=ordered, chain=chain, timeline=timeline, alternatives=alternatives,
                     detectors=outcomes)


def _precedes(onset: int | None, step: int | None) -> bool:
    """A cause must precede, or be present from the start of, the symptom it explains."""
    return onset is None or step is None or step >= onset


def _cause_key(c: _Cause) -> tuple:
    return (-SEVERITY_RANK[c.best.severity] if c.best.severity in ("critical", "error") else -1,
            c.root_cause in GENERIC_CAUSES and c.basis != "direct",
            -c.coverage, -BASIS_RANK.get(c.basis, 0), c.root_cause in GENERIC_CAUSES,
            -round(c.confidence, 2), -PRIOR.get(c.root_cause, 0.0),
            c.onset if c.onset is not None else 1 << 62)


def _indistinguishable(a: _Cause, b: _Cause) -> bool:
    return (b.basis == a.basis and b.coverage == a.coverage and abs(b.confidence - a.confidence) < TIE_MARGIN
            and a.root_cause not in GENERIC_CAUSES and b.root_cause not in GENERIC_CAUSES)


def _unexplained(serious: list[Finding], top: _Cause) -> list[Finding]:
    got = {id(f) for f in top.explained}
    return [f for f in serious if id(f) not in got and f.root_cause != top.root_cause and f.symptom]


def _unnamed_only(run: Run) -> bool:
    """Every series read is a headerless table's column: numbers whose meaning the log does not give, no evidence of
    health (a NaN among them is NUM001's, and that is judged)."""
    metrics = run.metrics()
    return bool(metrics) and all(UNNAMED_COLUMN.match(m) for m in metrics)


def _nothing_to_judge(run: Run) -> bool:
    return (run.scalars.empty or _unnamed_only(run)) and not run.events and not run.checkpoints


def _nothing_headline(run: Run) -> str:
    """Say plainly what was looked at, so "nothing to judge" is never read as "something is wrong"."""
    read = [a.path for a in run.artifacts if a.status in ("read", "partial") and a.kind not in ("ignored", "skipped")]
    other = [a.path for a in run.artifacts if a.status in ("ignored", "unreadable") or a.kind in ("ignored", "skipped")]
    parts = ["Nothing to judge: no training metrics, log events or checkpoints were found"
             + (" (only unnamed columns of numbers, whose meaning the log does not give)" if _unnamed_only(run) else "")]
    if read:
        parts.append(f"read {len(read)} file(s) ({', '.join(read[:4])}{', ...' if len(read) > 4 else ''})"
                     + (f", {len(run.config.keys())} config fact(s)" if run.config.keys() else ""))
    if other:
        parts.append(f"not recognised or not readable: {len(other)} ({', '.join(other[:4])}{', ...' if len(other) > 4 else ''})")
    return "; ".join(parts) + "."


def _causes(ordered: list[Finding]) -> list[_Cause]:
    """One entry per root cause, confidence combined over the detectors that name it."""
    by_cause: dict[str, list[Finding]] = {}
    for f in ordered:
        if f.root_cause and f.root_cause not in ("unknown", "healthy") and f.severity != "info":
            by_cause.setdefault(f.root_cause, []).append(f)
    out = []
    for rc, fs in by_cause.items():
        fs.sort(key=rank_key)
        best = fs[0]
        miss = 1.0
        seen_codes = set()
        for f in fs:
            if f.code in seen_codes or SEVERITY_RANK[f.severity] < SEVERITY_RANK["warning"]:
                continue
            seen_codes.add(f.code)
            miss *= 1.0 - f.confidence
        conf = min(MAX_CONFIDENCE, max(best.confidence, 1.0 - miss))
        basis = max((f.basis for f in fs), key=lambda b: BASIS_RANK.get(b, 0))
        # the cause was there from its earliest evidence (the LR peak before the NaN it causes), not only from
        # the step its detector reports
        steps = [x for f in fs for x in [f.first_step, *(e.step for e in f.evidence)] if x is not None]
        present_from_start = any(f.first_step is None and f.basis == "direct" for f in fs)
        onset = 0 if present_from_start else (min(steps) if steps else None)
        out.append(_Cause(rc, conf, basis, best.first_step, best, fs, onset=onset))
    out.sort(key=_cause_key)
    return out


def _mark_consequences(causes: list[_Cause]) -> None:
    """A candidate whose every finding is a symptom an earlier candidate explains is its consequence."""
    ranked = sorted(causes, key=_cause_key)
    for x in sorted(causes, key=lambda c: -(c.onset if c.onset is not None else -1)):
        if x.basis == "direct" and x.root_cause not in GENERIC_CAUSES:
            continue
        own = [f for f in x.support if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"]]
        if not own or any(not f.symptom for f in own):
            continue
        for y in ranked:
            if y is x or y.consequence_of is not None or y.root_cause in GENERIC_CAUSES:
                continue
            if _top_severity(y) < _top_severity(x):
                continue  # a weaker hypothesis (a warning) does not explain away a stronger one (an error)
            if not (y.onset is not None and x.onset is not None and y.onset <= x.onset) and y.onset != 0:
                continue
            if all(explains(y.root_cause, f.symptom) for f in own):
                if y.onset == x.onset and _cause_key(x) < _cause_key(y) and all(
                        explains(x.root_cause, f.symptom) for f in y.support if f.symptom):
                    continue  # mutual and simultaneous: the stronger one stays the cause
                x.consequence_of = y.root_cause
                break


def _top_severity(c: _Cause) -> int:
    return max((SEVERITY_RANK[f.severity] for f in c.support), default=0)


def _headline(top: _Cause, ordered: list[Finding], status: str) -> str:
    if status == "inconclusive":
        return f"Too close to call: {top.best.title} (and another cause with the same evidence)."
    onset = next((f for f in ordered if f.code == "NUM001" and f.severity == "error"), None)
    head = top.best.title
    if onset is not None and onset.first_step is not None and str(onset.first_step) not in head:
        head += f"; non-finite from step {onset.first_step}"
    return head


#: finite loss logs a healthy verdict needs for full confidence; fewer is a snapshot, said with less
HEALTHY_FULL_POINTS = 10


def _healthy_confidence(findings: list[Finding], run: Run | None = None) -> float:
    conf = 0.8 if any(f.severity == "warning" for f in findings) else 0.9
    if run is not None and not run.checkpoints:
        n = len(run.series("loss")) if run.has_metric("loss") else 0
        if n < 3:
            conf -= 0.3  # one or two logged points: nothing says how the run went on
        elif n < HEALTHY_FULL_POINTS:
            conf -= 0.15
    return round(conf, 2)


def _alternatives(causes: list[_Cause], top: _Cause | None) -> list[dict]:
    out = []
    for c in causes:
        if top is not None and c.root_cause == top.root_cause:
            continue
        if c.consequence_of:
            why = (f"a consequence, not a cause: {c.best.symptom or 'its evidence'} (from step {c.onset}) is explained by "
                   f"{c.consequence_of}, which came first")
        elif top is not None:
            why = _why_lower(top, c)
        else:
            why = "not enough evidence for a verdict"
        out.append({"root_cause": c.root_cause, "confidence": round(c.confidence, 3), "code": c.best.code,
                    "title": c.best.title, "basis": c.basis, "why_lower": why,
                    "explains": c.coverage, "consequence_of": c.consequence_of,
                    "tell_apart": TELLS.get(c.root_cause, "")})
    return out[:6]


def _why_lower(top: _Cause, other: _Cause) -> str:
    if top.coverage > other.coverage:
        return (f"explains less of the failure: {other.coverage} of the observed error-level symptoms vs "
                f"{top.coverage} for {top.root_cause}")
    if BASIS_RANK.get(top.basis, 0) > BASIS_RANK.get(other.basis, 0):
        return (f"{ROOT_CAUSES.get(top.root_cause, top.root_cause)} is seen directly ({top.basis}); "
                f"{other.root_cause} is {other.basis} from the curves.")
    if other.root_cause in GENERIC_CAUSES:
        return f"{other.root_cause} names no specific failure; {top.root_cause} explains it."
    return f"lower confidence ({other.confidence:.2f} vs {top.confidence:.2f})"


def build_chain(findings: list[Finding], verdict: Verdict) -> list[ChainStep]:
    """The evidence chain in time order, from the findings that matter for the verdict."""
    relevant = [f for f in findings if f.severity in ("critical", "error") or f.root_cause == verdict.root_cause]
    items: list[ChainStep] = []
    seen: set[tuple] = set()
    for f in relevant:
        for e in f.evidence:
            key = (e.artifact, e.where, e.detail)
            if key in seen or not e.detail:
                continue
            seen.add(key)
            fact = _same_fact(e.artifact, e.where, e.detail)
            if fact is not None:
                if fact in seen:  # the same value of the same log line, worded by another finding
                    continue
                seen.add(fact)
            items.append(ChainStep(e.step, e.detail, e.artifact, e.where, e.step is None and e.is_config))
    # preconditions (config) first, then by step, then what has no known step (a log line's event, a
    # tensor); within a step, by position in the file
    items.sort(key=lambda c: (0 if c.config else 1 if c.step is not None else 2,
                              c.step if c.step is not None else 0, c.artifact, _line(c.where)))
    return items[:MAX_CHAIN]


def build_timeline(findings: list[Finding], verdict: Verdict) -> list[TimelineEntry]:
    """Every anomaly at its time (config at step 0), with its role: the cause, what it explains, the rest."""
    out: list[TimelineEntry] = []
    for f in findings:
        if f.severity == "info":
            continue
        if verdict.status == "failed" and f.root_cause == verdict.root_cause:
            role = "cause"
        elif f.explained_by:
            role = "explained"
        elif SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]:
            role = "unexplained" if verdict.status != "healthy" else "context"
        else:
            role = "context"
        ev = f.evidence[0] if f.evidence else None
        step = f.first_step if f.first_step is not None else (ev.step if ev is not None else None)
        config = step is None and ev is not None and ev.is_config
        out.append(TimelineEntry(0 if config else step, f.code, f.symptom, role, f.title, ev.artifact if ev else "",
                                 ev.where if ev else "", config))
    out.sort(key=lambda t: (t.step is None, t.step if t.step is not None else 0, t.role != "cause", t.code))
    return out[:MAX_TIMELINE]


#: "loss = NaN at step 2 ...", "loss 37.24 at step 2, ...", "highest loss 2.6e+06 at step 9", "loss logged as exactly
#: 0.0 at step 16": a metric and its value
_FACT = re.compile(r"(?:(?:highest|lowest|last|first|final|peak)\s+)?([A-Za-z_][\w/@.]*)\s*"
                   r"(?:logged as (?:exactly )?)?[=:]?\s*(-?\d[\d.]*(?:e[+-]?\d+)?|NaN|-?Inf)(?![\w.])")


def _same_fact(artifact: str, where: str, detail: str) -> tuple[str, ...] | None:
    """(artifact, line, metric, value) of a detail that opens with a metric's value read from one log line, so
    the chain lists it once however many findings cite it; None for anything else (config, tensors, events)."""
    if not where.startswith("line "):
        return None
    m = _FACT.match(detail)
    return None if m is None else ("fact", artifact, where, m[1], m[2])


def _line(where: str) -> int:
    return int(where[5:]) if where.startswith("line ") and where[5:].isdigit() else 0


def _healthy_evidence(run: Run | None) -> str:
    """What a healthy verdict rests on, in numbers: the loss trajectory and the checkpoints."""
    if run is None:
        return ""
    parts = []
    # the per-step loss; else an epoch summary's or the evaluation's (fairseq's train_loss, a run logging only val), or
    # the perplexity a trainer prints instead (the Lua OpenNMT); else the run's own loss terms (faceswap's loss_A/loss_B)
    name = next((m for m in PRIMARY_LOSSES if run.has_metric(m)), None)
    if name is not None:
        names = [name]
    else:
        names = stand_in_losses({m: len(run.series(m)) for m in run.metrics() if loss_like(m)})
    if not names:  # a reinforcement-learning log of returns only (openai/maddpg's "mean episode reward", CleanRL's)
        names = sorted((m for m in run.metrics() if "reward" in m.lower() or m.endswith("return")),
                       key=lambda m: (m != "reward", m))[:1]
    for name in names:
        loss = run.series(name)
        vals = [v for v in loss["value"].tolist() if math.isfinite(v)]
        steps = loss["step"].tolist()
        if vals:
            parts.append(f"{name} {vals[0]:.4g} at the only logged point (step {steps[0]})" if len(steps) == 1 else
                         f"{name} {vals[0]:.4g} -> {vals[-1]:.4g} over {len(steps)} logged points "
                         f"(steps {steps[0]}-{steps[-1]}), all finite" if len(vals) == len(steps)
                         else f"{name} {vals[0]:.4g} -> {vals[-1]:.4g} over {len(steps)} logged points")
    if run.checkpoints:
        parts.append(_checkpoints_evidence(run))
    return (" " + "; ".join(parts) + ".") if parts else ""


def _checkpoints_evidence(run: Run) -> str:
    """The checkpoints in a healthy verdict's headline: whether the weights and optimizer state are finite (what
    CKPT001 checks); a non-finite value elsewhere (Lightning's ModelCheckpoint keeps ``kth_value = inf`` until
    it has a k-th best score, schedulers and callbacks keep their own scalars) is named as such, not as damage."""
    from autopsy.checkpoints.analysis import optimizer_tensors, weight_tensors

    n, bad, other = len(run.checkpoints), 0, []
    for c in run.checkpoints:
        nonfinite = c.nonfinite_tensors
        if not nonfinite:
            continue
        state = {id(t) for _, t in [*weight_tensors(c, ordered=False), *optimizer_tensors(c)] if t.nonfinite}
        if state:
            bad += 1
        other += [t for t in nonfinite if id(t) not in state]
    text = f"{n} checkpoint(s), " + ("all weights finite" if not bad else f"{bad} with non-finite weights or optimizer state")
    if other:
        t = other[0]
        kinds = "+Inf" if t.posinf and not (t.nan or t.neginf) else "-Inf" if t.neginf and not (t.nan or t.posinf) else "NaN/Inf"
        name = re.sub(r"\{[^{}]*\}", "{...}", t.name)  # Lightning keys callbacks by their settings: {'monitor': ...}
        name = name if len(name) <= 80 else name[:36] + "..." + name[-41:]  # the leaf names the value
        more = f" and {len(other) - 1} more" if len(other) > 1 else ""
        text += f" (non-finite only outside them: {name} = {kinds}{more}, callback or scheduler state)"
    return text

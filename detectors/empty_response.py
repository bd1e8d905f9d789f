"""Empty responses: the prompt fills the length budget, so the completion has no tokens.

What it detects:
    Preference training (DPO, CPO, SimPO, ORPO) where prompts leave no room for the response:
    ``max_prompt_length >= max_length`` in the config; TRL's warning "The prompt alone fills
    `max_length`, so truncation leaves an empty completion"; NaN that appears first in the
    length-normalised metrics (``logps/*``, ``rewards/*``) while the NLL term is still finite;
    a DPO run whose loss stays at ln 2 (0.6931) with rewards and log-probs exactly 0 at every
    logged step (the first log of a healthy DPO run looks like that too, so one point is not
    enough).

Why it matters:
    SimPO/CPO divide the completion log-probability by its token count: with no completion
    tokens that is 0/0 = NaN, which then poisons the loss and the weights. DPO sums log-probs,
    so an empty completion gives 0 for policy and reference alike: rewards 0, loss ln 2 and no
    gradient, the run "trains" without learning anything.

Evidence used:
    Config facts ``max_prompt_length``, ``max_length``, ``loss_type``; events
    ``prompt_fills_max_length``; series ``logps/*``, ``rewards/*``, ``nll_loss``, ``loss``.

Remedies:
    Keep ``max_prompt_length`` well below ``max_length`` (leave at least 32-64 tokens for the
    response); drop or truncate over-long prompts when preparing the data; guard the
    denominator (``max(n_tokens, 1)``); skip and log samples whose completion is empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import FP16_MAX, LN2, LN2_TOL, points
from detectors._facts import (
    event_evidence,
    fact_evidence,
    fact_number,
    fmt,
    matching_events,
    scalar_evidence,
    total_count,
)

CODE = "LEN001"
SLUG = "empty-response"
ROOT_CAUSE = "empty_response"
NEEDS = ("config", "events", "scalars")
NEEDS_ANY = True

#: TRL's CPO/SimPO/ORPO message (trl/experimental/cpo/cpo_trainer.py, 1.x) and close variants
#: other versions and forks print ("prompt ... longer than max_length", "empty completion").
PROMPT_FILLS_RE = re.compile(
    r"prompt alone fills `?max_length|leaves an empty completion|empty (?:completion|response)s?\b.*truncat"
    r"|max_prompt_length`? *(?:>=|is (?:greater|larger) than|should be (?:smaller|less) than) *`?max_length",
    re.IGNORECASE)
#: a whole run, not the healthy first log: at least this many logged points must all be stuck
MIN_STUCK_POINTS = 3
LENGTH_NORMALISED_PREFIXES = ("logps/", "rewards/")
REFS = ["https://github.com/huggingface/trl/issues/3339", "https://github.com/huggingface/trl/issues/6548",
        "https://github.com/princeton-nlp/SimPO/issues/35"]
REMEDIES = [
    "Set max_prompt_length well below max_length (leave >= 32-64 tokens for the response), or raise max_length.",
    "Filter or truncate over-long prompts when preparing the data so every sample keeps a non-empty completion.",
    "Guard the length normalisation: divide by max(n_completion_tokens, 1) and skip samples with empty completions.",
]


def _nan_onset(run: Run) -> tuple[str, tuple] | None:
    """The earliest non-finite point among length-normalised metrics: (metric, row)."""
    best: tuple[str, tuple] | None = None
    for metric in run.metrics():
        if not metric.startswith(LENGTH_NORMALISED_PREFIXES):
            continue
        s = points(run, metric)
        bad = np.flatnonzero(~s.finite)
        if bad.size:
            row = s.row(int(bad[0]))
            if best is None or row[0] < best[1][0]:
                best = (metric, row)
    return best


def _finite_at(run: Run, metric: str, step: int) -> tuple | None:
    """The first row logged at ``step``, when finite."""
    s = points(run, metric)
    i = int(np.searchsorted(s.steps, step, side="left"))
    if i < len(s) and s.steps[i] == step:
        return s.row(i) if s.finite[i] else None
    return None


def _dpo_stuck(run: Run) -> list[Evidence] | None:
    """loss == ln 2 and rewards == logps == 0 at every logged point (>= MIN_STUCK_POINTS)."""
    loss = points(run, "loss")
    if len(loss) < MIN_STUCK_POINTS or not bool((np.abs(loss.values - LN2) <= LN2_TOL).all()):
        return None
    zero_metrics = ["rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected"]
    have = [m for m in zero_metrics if run.has_metric(m)]
    if not any(m.startswith("logps/") for m in have):
        return None  # rewards 0 alone also means "weights never moved"; only empty logps name this cause
    for m in have:
        if not bool((points(run, m).values == 0.0).all()):
            return None
    first, last = loss.row(0), loss.row(-1)
    ev = [scalar_evidence("loss", last, f"loss = {fmt(last[1])} (ln 2 = 0.6931) at all {len(loss)} logged steps "
                                         f"{first[0]}-{last[0]}")]
    for m in have:
        rows = points(run, m)
        ev.append(scalar_evidence(m, rows.row(-1), f"{m} exactly 0 at all {len(rows)} logged steps"))
    return ev


#: pairs of preference metrics that are equal at every log when chosen and rejected are the same tokens
_TWIN_METRICS = (("logps/chosen", "logps/rejected"), ("logits/chosen", "logits/rejected"),
                 ("rewards/chosen", "rewards/rejected"))


def _pairs_identical(run: Run) -> Finding | None:
    """A DPO-family loss at ln 2 at every log (>= MIN_STUCK_POINTS) with the chosen and rejected sides equal at every
    log (their log-probs, logits or rewards; rewards/margins exactly 0 is cited beside them) and not all zero (empty
    completions are ``_dpo_stuck``'s): the policy sees the same tokens on both sides, so the margin is 0 whatever the weights, the loss
    is ln 2 and no gradient flows. The pairs are identical after tokenization and truncation: duplicated responses,
    or responses that differ only after max_length cuts them."""
    loss = points(run, "loss")
    if len(loss) < MIN_STUCK_POINTS or not bool((np.abs(loss.values - LN2) <= LN2_TOL).all()):
        return None
    twins = []
    for a, b in _TWIN_METRICS:
        pa, pb = points(run, a), points(run, b)
        if len(pa) >= MIN_STUCK_POINTS and len(pa) == len(pb) and bool((pa.values == pb.values).all()) \
                and bool((pa.values != 0.0).any()):
            twins.append((a, b, pa))
    if not twins:
        return None
    margins = points(run, "rewards/margins")
    zero_margin = len(margins) >= MIN_STUCK_POINTS and bool((margins.values == 0.0).all())
    first, last = loss.row(0), loss.row(-1)
    evidence = [scalar_evidence("loss", last, f"loss = {fmt(last[1])} (ln 2 = 0.6931) at all {len(loss)} logged steps "
                                              f"{first[0]}-{last[0]}")]
    for a, b, pa in twins[:2]:
        evidence.append(scalar_evidence(a, pa.row(-1), f"{a} = {b} at every one of the {len(pa)} logs ({fmt(pa.row(-1)[1])} "
                                                       "at the last)"))
    if zero_margin:
        evidence.append(scalar_evidence("rewards/margins", margins.row(-1), f"rewards/margins exactly 0 at all {len(margins)} logs"))
    gn = points(run, "grad_norm").finite_only()
    if len(gn):
        evidence.append(scalar_evidence("grad_norm", gn.row(-1), f"grad_norm at most {fmt(float(np.max(gn.values)))}: "
                                                                  "no gradient to speak of"))
    ml = fact_number(run, "max_length")
    if ml is not None:
        evidence.append(fact_evidence(ml[1], f"max_length = {int(ml[0])}: the pairs are compared after truncation to it"))
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.75,
        title=f"Chosen and rejected are the same to the model: the loss is ln 2 at all {len(loss)} logs",
        message=(f"The preference loss is ln 2 = 0.6931 at every log (steps {first[0]}-{last[0]}) and the chosen and "
                 f"rejected sides score exactly alike ({', '.join(a.split('/')[0] for a, _, _ in twins)} equal at every "
                 "log): the policy sees the same tokens on both sides, so the margin is 0 whatever the weights and no "
                 "gradient flows. The pairs are identical after tokenization and truncation: responses duplicated in "
                 "the data, or responses that differ only after max_length cuts them."),
        first_step=first[0], evidence=evidence, basis="direct", symptom="loss_ln2",
        remedies=["Count the pairs whose chosen == rejected after the chat template and tokenization, and drop them.",
                  "Raise max_length (and max_completion_length) so the responses survive truncation up to where they "
                  "differ; check the lengths of a few tokenized pairs."],
        references=list(REFS),
    )


def detect(run: Run) -> Iterable[Finding]:
    twins = _pairs_identical(run)
    if twins is not None:
        yield twins
    evidence: list[Evidence] = []
    reasons: list[str] = []
    direct = False
    symptom = False
    first_step: int | None = None

    mpl, ml = fact_number(run, "max_prompt_length"), fact_number(run, "max_length")
    config_bad = bool(mpl and ml and ml[0] > 0 and mpl[0] >= ml[0])
    if config_bad:
        assert mpl and ml
        evidence.append(fact_evidence(mpl[1], f"max_prompt_length = {int(mpl[0])}"))
        evidence.append(fact_evidence(ml[1], f"max_length = {int(ml[0])}: a prompt of max_prompt_length tokens leaves "
                                              f"{max(0, int(ml[0] - mpl[0]))} tokens for the response"))
        reasons.append(f"max_prompt_length {int(mpl[0])} >= max_length {int(ml[0])}")
        direct = True

    warned = matching_events(run, "prompt_fills_max_length", PROMPT_FILLS_RE)
    if warned:
        evidence.extend(event_evidence(e) for e in warned[:3])
        reasons.append(f"the trainer warned {total_count(warned)}x that the prompt fills max_length")
        direct = True

    onset = _nan_onset(run)
    if onset is not None:
        metric, row = onset
        step = row[0]
        term = "nll_loss" if run.has_metric("nll_loss") else "loss"
        other = _finite_at(run, term, step)
        if other is not None and term == "loss" and other[1] == 0.0:
            other = None  # HF logging_nan_inf_filter writes an all-NaN window as 0.0: not a finite loss
        if other is not None and abs(other[1]) > FP16_MAX:
            # a loss past fp16's range beside the NaN terms is the overflow itself (trl#1371: Gemma DPO in fp16, loss
            # 9.08e6 with NaN log-probs), not the ordinary finite loss an empty completion leaves beside them
            other = None
        if other is not None:
            evidence.append(scalar_evidence(metric, row, f"{metric} = {fmt(row[1])} at step {step}, the first non-finite "
                                                         "length-normalised value"))
            evidence.append(scalar_evidence(term, other, f"{term} = {fmt(other[1])} still finite at step {step}"))
            reasons.append(f"{metric} went NaN at step {step} while {term} was finite ({fmt(other[1])})")
            symptom, first_step = True, step
        elif direct:
            evidence.append(scalar_evidence(metric, row, f"{metric} = {fmt(row[1])} at step {step}"))
            reasons.append(f"{metric} went non-finite at step {step}")
            symptom, first_step = True, step

    stuck = _dpo_stuck(run)
    if stuck:
        evidence.extend(stuck)
        reasons.append("the DPO loss stayed at ln 2 with rewards and log-probs exactly 0 for the whole run")
        symptom = True
        first_step = first_step if first_step is not None else stuck[0].step

    if not reasons or (not direct and not symptom):
        return
    if direct and symptom:
        severity, confidence = "error", 0.9
    elif direct:
        # the config/warning shows empty completions exist, but no metric shows the damage yet
        severity, confidence = "warning", 0.6
    else:
        severity, confidence = "error", 0.7 if stuck else 0.6
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=confidence,
        title="Empty responses: the prompt fills the length budget" if direct else
              "Empty responses likely: only the length-normalised terms went NaN",
        message="; ".join(reasons) + ".",
        first_step=first_step, evidence=evidence, remedies=list(REMEDIES), references=list(REFS),
        basis="direct" if direct else "inferred", symptom="nonfinite_aux" if symptom else "config_defect",
    )

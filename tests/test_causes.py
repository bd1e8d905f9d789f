"""The causal model (autopsy/causes.py) and the ranking that uses it (autopsy/diagnosis.py).

The explains table is data; these tests pin what it must say (the relations issue 10 names), that
every id in it is a real root cause or symptom, that detectors only tag symptoms from the
vocabulary, that docs/diagnosis.md renders the table exactly, and that the ranking behaves as
documented on small, hand-built sets of findings: a consequence goes under its cause, coverage
beats a lone symptom, and a cause may not explain what came before it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autopsy.causes import EXPLAINS, PRIOR, SYMPTOMS, explains
from autopsy.diagnosis import diagnose
from autopsy.model import ROOT_CAUSES, Evidence, Finding

DOC = Path(__file__).resolve().parent.parent / "docs" / "diagnosis.md"

#: relations the diagnosis must know (issue 10, point 2), as (cause, symptom)
REQUIRED = [
    ("lr_too_high", "loss_divergence"), ("lr_too_high", "overflow_then_zero"), ("lr_too_high", "nonfinite_loss"),
    ("lr_too_high", "frozen_weights"), ("lr_too_high", "nonfinite_weights"),
    ("fp16_overflow", "skipped_steps"), ("fp16_overflow", "lr_near_zero"), ("fp16_overflow", "loss_scale_collapse"),
    ("empty_response", "zero_grad_norm"), ("empty_response", "loss_ln2"), ("empty_response", "nonfinite_aux"),
    ("nan_in_data", "nonfinite_loss"), ("zero3_empty_tensors", "empty_tensors"),
    ("lr_schedule_stalled", "lr_near_zero"), ("gradientless_params", "frozen_weights"),
]
#: relations that would be wrong: a cause that cannot produce that symptom
FORBIDDEN = [
    ("lr_schedule_stalled", "nonfinite_loss"), ("out_of_memory", "nonfinite_loss"), ("padding_free_without_flash_attn",
                                                                                  "nonfinite_weights"),
    ("gradientless_params", "nonfinite_loss"), ("bf16_unsupported_hardware", "frozen_weights"),
]


@pytest.mark.parametrize("cause,symptom", REQUIRED)
def test_required_relations(cause, symptom):
    assert explains(cause, symptom)


@pytest.mark.parametrize("cause,symptom", FORBIDDEN)
def test_forbidden_relations(cause, symptom):
    assert not explains(cause, symptom)


def test_table_ids_are_real():
    for cause, symptoms in EXPLAINS.items():
        assert cause in ROOT_CAUSES, cause
        assert symptoms <= set(SYMPTOMS), (cause, symptoms - set(SYMPTOMS))
    assert set(PRIOR) <= set(ROOT_CAUSES)
    failure_ids = set(ROOT_CAUSES) - {"healthy", "unknown"}
    assert failure_ids <= set(EXPLAINS), failure_ids - set(EXPLAINS)


def test_detectors_tag_symptoms_from_the_vocabulary():
    root = Path(__file__).resolve().parent.parent / "detectors"
    used = set()
    for p in root.glob("*.py"):
        used |= set(re.findall(r'symptom="([a-z_0-9]+)"', p.read_text()))
        used |= set(re.findall(r'"([a-z_0-9]+)" if ', p.read_text())) & set(SYMPTOMS)
    assert used and used <= set(SYMPTOMS), used - set(SYMPTOMS)


def test_doc_renders_the_table():
    """docs/diagnosis.md carries both tables exactly (regenerate: python -m autopsy.causes)."""
    from autopsy.causes import markdown_table, symptoms_table

    text = DOC.read_text()
    assert markdown_table() in text and symptoms_table() in text


def _f(code, rc, symptom, step, severity="error", conf=0.7, basis="inferred"):
    return Finding(code=code, name=code.lower(), root_cause=rc, severity=severity, confidence=conf, title=f"{code} title",
                   message="m", first_step=step, evidence=[Evidence("log.txt", f"line {step}", "d", step)], basis=basis,
                   symptom=symptom)


def test_consequence_goes_under_its_cause():
    """Weights frozen after an LR-driven NaN: the LR is the verdict, the frozen weights are explained by it."""
    lr = _f("OPT001", "lr_too_high", "loss_divergence", 30, conf=0.65)
    nan = _f("NUM001", None, "nonfinite_loss", 32, conf=0.95, basis="symptom")
    frozen = _f("GRAD001", "gradientless_params", "frozen_weights", 40, conf=0.7)
    dx = diagnose([frozen, nan, lr], [])
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_too_high")
    assert frozen.explained_by == "lr_too_high" and nan.explained_by == "lr_too_high"
    alt = next(a for a in dx.alternatives if a["root_cause"] == "gradientless_params")
    assert alt["consequence_of"] == "lr_too_high"
    roles = {t.code: t.role for t in dx.timeline}
    assert roles == {"OPT001": "cause", "NUM001": "explained", "GRAD001": "explained"}
    assert [t.step for t in dx.timeline] == [30, 32, 40]


def test_a_cause_cannot_explain_what_came_before_it():
    """Frozen weights from step 5 and an LR divergence at step 30: the LR does not explain the earlier symptom."""
    frozen = _f("GRAD001", "gradientless_params", "frozen_weights", 5, conf=0.7)
    lr = _f("OPT001", "lr_too_high", "loss_divergence", 30, conf=0.65)
    dx = diagnose([lr, frozen], [])
    assert frozen.explained_by is None or dx.verdict.root_cause == "gradientless_params"
    alt = {a["root_cause"]: a for a in dx.alternatives}
    assert alt.get("gradientless_params", {}).get("consequence_of") is None


def test_coverage_ranks_above_confidence():
    """Empty completions explain both the NaN logps and the zero gradients; the zero gradients alone do not."""
    empty = _f("LEN001", "empty_response", "nonfinite_aux", 10, conf=0.6)
    zero = _f("GRAD001", "gradientless_params", "zero_grad_norm", 10, conf=0.75)
    dx = diagnose([zero, empty], [])
    assert dx.verdict.root_cause == "empty_response"
    assert zero.explained_by == "empty_response"


def test_damage_alone_is_never_healthy():
    dmg = _f("CKPT001", None, "nonfinite_weights", 100, conf=0.99, basis="symptom")
    dx = diagnose([dmg], [])
    assert dx.verdict.status == "inconclusive"
    assert "NaN" not in dx.verdict.headline or "do not single out" in dx.verdict.headline

"""The judgement: findings -> one verdict, a time-ordered chain, and alternatives."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopsy.diagnosis import MIN_FAILED_CONFIDENCE, diagnose
from autopsy.ingest.base import RunBuilder
from autopsy.model import Checkpoint, CheckpointFile, Evidence, Finding, Run, TensorStat
from autopsy.pipeline import run_detectors

NAN = float("nan")


def F(code, root_cause, conf, basis="inferred", severity="error", step=None, evidence=()):
    return Finding(code=code, name=code.lower(), root_cause=root_cause, severity=severity, confidence=conf,
                   title=f"{code} title", message="m", first_step=step, evidence=list(evidence), basis=basis)


def some_run() -> Run:
    b = RunBuilder(Path("/tmp"))
    b.scalar("trainer_state.json", "trainer_state", 1, "loss", 2.0)
    return b.finish()


def test_direct_cause_beats_more_confident_inferred_one():
    dx = diagnose([F("OPT001", "lr_too_high", 0.85), F("PREC001", "fp16_overflow", 0.7, basis="direct")], [], some_run())
    assert (dx.verdict.status, dx.verdict.root_cause, dx.verdict.confidence) == ("failed", "fp16_overflow", 0.7)
    (alt,) = dx.alternatives
    assert alt["root_cause"] == "lr_too_high" and "seen directly" in alt["why_lower"]
    assert "LR divided by 10" in alt["tell_apart"]


def test_symptom_only_is_inconclusive_with_the_onset_in_the_headline():
    dx = diagnose([F("NUM001", None, 0.95, basis="symptom", step=37)], [], some_run())
    assert (dx.verdict.status, dx.verdict.root_cause) == ("inconclusive", "unknown")
    assert dx.verdict.headline.startswith("NUM001 title; the artifacts do not single out a cause")
    assert dx.verdict.confidence <= 0.5


def test_weak_inferred_cause_is_a_candidate_not_a_verdict():
    dx = diagnose([F("NUM001", None, 0.95, basis="symptom"), F("DATA001", "nan_in_data", MIN_FAILED_CONFIDENCE - 0.15)],
                  [], some_run())
    assert dx.verdict.status == "inconclusive"
    assert "best candidate: nan_in_data" in dx.verdict.headline
    assert dx.alternatives[0]["root_cause"] == "nan_in_data"


def test_two_inferred_causes_too_close_to_call():
    dx = diagnose([F("OPT001", "lr_too_high", 0.62), F("DATA001", "nan_in_data", 0.6)], [], some_run())
    assert (dx.verdict.status, dx.verdict.root_cause) == ("inconclusive", "unknown")
    dx2 = diagnose([F("OPT001", "lr_too_high", 0.75), F("DATA001", "nan_in_data", 0.6)], [], some_run())
    assert (dx2.verdict.status, dx2.verdict.root_cause) == ("failed", "lr_too_high")


def test_agreeing_detectors_reinforce_a_cause_but_never_reach_certainty():
    dx = diagnose([F("PREC001", "fp16_overflow", 0.6), F("FW001", "fp16_overflow", 0.5)], [], some_run())
    assert dx.verdict.confidence == pytest.approx(0.8)
    many = [F(f"X{i:03d}", "fp16_overflow", 0.9) for i in range(5)]
    assert diagnose(many, [], some_run()).verdict.confidence == pytest.approx(0.97)


def test_generic_crash_loses_to_a_specific_direct_cause():
    dx = diagnose([F("CRASH001", "crash", 0.6, basis="direct"), F("HW001", "bf16_unsupported_hardware", 0.55, basis="direct")],
                  [], some_run())
    assert dx.verdict.root_cause == "bf16_unsupported_hardware"
    assert "names no specific failure" in dx.alternatives[0]["why_lower"]
    alone = diagnose([F("CRASH001", "crash", 0.6, basis="direct")], [], some_run())
    assert (alone.verdict.status, alone.verdict.root_cause) == ("failed", "crash")


def test_healthy_when_nothing_at_error_level_and_nothing_to_judge_is_inconclusive():
    warn = F("NUM001", None, 0.6, basis="symptom", severity="warning")
    long_run = RunBuilder(Path("/tmp"))
    for step in range(1, 13):
        long_run.scalar("trainer_state.json", "trainer_state", step, "loss", 2.0 - 0.1 * step)
    long_run = long_run.finish()
    dx = diagnose([warn, F("PREC001", None, 0.8, severity="info")], [], long_run)
    assert (dx.verdict.status, dx.verdict.root_cause, dx.verdict.confidence) == ("healthy", "healthy", 0.8)
    assert diagnose([], [], long_run).verdict.confidence == 0.9
    # one logged point is a snapshot: healthy, said with less confidence
    one = diagnose([], [], some_run()).verdict
    assert one.status == "healthy" and one.confidence == 0.6 and "only logged point" in one.headline
    b = RunBuilder(Path("/tmp"))
    b.fact("learning_rate", 1e-4, "config.json")
    empty = diagnose([], [], b.finish())
    assert (empty.verdict.status, empty.verdict.root_cause) == ("inconclusive", "unknown")
    assert empty.verdict.headline.startswith("Nothing to judge")


def _tensors(n, nan):
    return [TensorStat(name=f"layers.{i}.w", dtype="F32", shape=[4], numel=4, nan=4 if i < nan else 0) for i in range(n)]


def test_lr_chain_in_time_order_from_real_detectors():
    """The issue's example: lr peak at the end of warmup -> grad_norm growth -> NaN -> NaN checkpoint."""
    b = RunBuilder(Path("/tmp"))
    src = "trainer_state.json"
    for s in range(1, 30):
        for k, v in {"loss": 3.0 - 0.05 * s, "grad_norm": 0.8, "learning_rate": 5e-3 * s / 30}.items():
            b.scalar(src, "trainer_state", s, k, v)
    for i in range(7):
        for k, v in {"loss": 1.6 + 0.4 * i, "grad_norm": 0.8 * 2 ** i, "learning_rate": 5e-3}.items():
            b.scalar(src, "trainer_state", 30 + i, k, v)
    for k in ("loss", "grad_norm"):
        b.scalar(src, "trainer_state", 37, k, NAN)
    b.scalar(src, "trainer_state", 37, "learning_rate", 5e-3)
    run = b.finish()
    run.checkpoints = [Checkpoint("checkpoint-30", 30, files=[CheckpointFile("model.safetensors", "safetensors", tensors=_tensors(28, 0))]),
                       Checkpoint("checkpoint-40", 40, files=[CheckpointFile("model.safetensors", "safetensors", tensors=_tensors(28, 28))])]
    findings, outcomes = run_detectors(run, debug=True)
    dx = diagnose(findings, outcomes, run)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_too_high")
    texts = [c.text for c in dx.chain]
    order = [next(i for i, t in enumerate(texts) if needle in t) for needle in (
        "last checkpoint with finite weights: checkpoint-30", "lr reached 0.005 at step 30 (up from ",
        "grad_norm grew from ~0.8 to 51.2 at step 36", "loss = NaN at step 37", "checkpoint-40: 28/28 tensors hold NaN/Inf")]
    assert order == sorted(order), texts
    assert [c.step for c in dx.chain] == sorted(c.step for c in dx.chain)


def test_report_json_contract_kept():
    dx = diagnose([F("OPT001", "lr_too_high", 0.8, evidence=[Evidence("a", "step 3", "d", 3)]),
                   F("DATA001", "nan_in_data", 0.4)], [], some_run())
    js = dx.verdict.to_json()
    assert set(js) == {"status", "root_cause", "confidence", "headline"}
    assert {"root_cause", "confidence", "code", "title", "why_lower"} <= set(dx.alternatives[0])


def test_healthy_headline_names_the_first_warning_else_a_note_not_a_version_range():
    """A healthy verdict names its first warning ("Worth a look: ..."), else its first note ("Note: ..."), but not a
    known bug's "exposed, no sign of it" (a version range, nothing the run showed)."""
    warn, note = F("FIT001", None, 0.7, basis="direct", severity="warning"), F("FIT001", None, 0.9, basis="direct", severity="info")
    exposed = F("FW001", None, 0.3, severity="info")
    exposed.symptom = "known_bug_signature"
    assert diagnose([warn, note], [], some_run()).verdict.headline.endswith("Worth a look: FIT001 title.")
    assert diagnose([note], [], some_run()).verdict.headline.endswith("Note: FIT001 title.")
    v = diagnose([exposed], [], some_run()).verdict
    assert v.status == "healthy" and "Note:" not in v.headline and "Worth a look" not in v.headline

"""sample_logs/: each generated run holds the artifacts and the failure shape it claims.

These read the committed samples (no training here; ``scripts/make_samples.py`` regenerates them).
The exact numbers pinned below are the ones listed in sample_logs/README.md; if a regeneration moves
them, update both together.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from tests.conftest import REPO

SAMPLES_DIR = REPO / "sample_logs"

#: sample -> (verdict status, root cause) a careful engineer reaches from the artifacts
EXPECTED: dict[str, tuple[str, str]] = {
    "healthy_sft": ("healthy", "healthy"),
    "lr_too_high_nan": ("failed", "lr_too_high"),
    "lora_frozen_gradientless": ("failed", "gradientless_params"),
    "simpo_empty_response": ("failed", "empty_response"),
    "fp16_overflow": ("failed", "fp16_overflow"),
    "minimind_style_nan": ("failed", "lr_too_high"),
}


def load_script():
    spec = importlib.util.spec_from_file_location("make_samples", REPO / "scripts" / "make_samples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_logs(run: str) -> list[dict]:
    """log_history of the last checkpoint (the only trainer_state.json a crashed/unsaved run leaves)."""
    ckpts = sorted((SAMPLES_DIR / run).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    state = json.loads((ckpts[-1] / "trainer_state.json").read_text())
    return [e for e in state["log_history"] if "grad_norm" in e]


def first_nonfinite_step(logs: list[dict], key: str) -> int | None:
    return next((e["step"] for e in logs if not math.isfinite(e[key])), None)


def all_finite(path: Path) -> bool:
    return all(np.isfinite(t).all() for t in load_file(str(path)).values())


def all_nan(path: Path) -> bool:
    return all(np.isnan(t).all() for t in load_file(str(path)).values() if t.dtype.kind == "f")


def test_script_lists_every_expected_sample():
    script = load_script()
    assert set(script.SAMPLES) == set(EXPECTED)
    assert callable(script.main)


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_sample_has_log_and_readme_line(run):
    log = (SAMPLES_DIR / run / "train.log").read_text(errors="replace")
    assert len(log) > 200
    assert "Traceback" not in log
    assert f"`{run}/`" in (SAMPLES_DIR / "README.md").read_text()


@pytest.mark.parametrize("run", sorted(set(EXPECTED) - {"minimind_style_nan"}))
def test_hf_samples_have_tensorboard_events(run):
    assert list((SAMPLES_DIR / run / "runs").glob("*/events.out.tfevents.*"))


def test_samples_stay_small():
    size = sum(p.stat().st_size for p in SAMPLES_DIR.rglob("*") if p.is_file())
    assert size < 3 * 1024 * 1024


def test_healthy_sft_loss_falls_and_weights_finite():
    run = SAMPLES_DIR / "healthy_sft"
    logs = train_logs("healthy_sft")
    assert [e["step"] for e in logs][:3] == [2, 4, 6]
    assert logs[0]["loss"] > 3.8 and logs[-1]["loss"] < 1.2
    assert all(math.isfinite(e["grad_norm"]) and e["grad_norm"] < 2.0 for e in logs)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-20", "checkpoint-40", "checkpoint-60"]
    assert all(all_finite(p) for p in run.glob("**/model.safetensors"))
    assert (run / "trainer_state.json").exists() and (run / "train_results.json").exists()


def test_lr_too_high_diverges_then_nan():
    run = SAMPLES_DIR / "lr_too_high_nan"
    logs = train_logs("lr_too_high_nan")
    by_step = {e["step"]: e for e in logs}
    assert first_nonfinite_step(logs, "grad_norm") == 32
    assert by_step[32]["grad_norm"] == math.inf
    assert by_step[24]["loss"] < by_step[26]["loss"] < by_step[28]["loss"] < by_step[30]["loss"]
    assert by_step[8]["loss"] < by_step[2]["loss"]  # it learned before the LR got too high
    assert all(by_step[s]["loss"] == 0.0 and math.isnan(by_step[s]["grad_norm"]) for s in range(34, 61, 2))
    assert all_finite(run / "checkpoint-20" / "model.safetensors")
    assert all_nan(run / "checkpoint-40" / "model.safetensors")
    assert all_nan(run / "checkpoint-60" / "model.safetensors")


def test_lora_b_never_leaves_zero():
    run = SAMPLES_DIR / "lora_frozen_gradientless"
    adapters = [load_file(str(run / f"checkpoint-{n}" / "adapter_model.safetensors")) for n in (20, 40, 60)]
    b_keys = [k for k in adapters[0] if k.endswith("lora_B.weight")]
    assert len(b_keys) == 4
    assert all(not a[k].any() for a in adapters for k in b_keys)
    assert all(np.array_equal(adapters[0][k], a[k]) for a in adapters[1:] for k in adapters[0])
    optim = torch.load(run / "checkpoint-60" / "optimizer.pt", weights_only=True)
    assert len(optim["state"]) == 1  # only lm_head trained
    logs = train_logs("lora_frozen_gradientless")
    assert logs[-1]["loss"] < logs[0]["loss"] - 0.4  # the loss falls anyway, via lm_head


def test_simpo_nan_starts_at_the_empty_response_batch():
    run = SAMPLES_DIR / "simpo_empty_response"
    logs = train_logs("simpo_empty_response")
    assert first_nonfinite_step(logs, "logps/chosen") == 18
    assert first_nonfinite_step(logs, "grad_norm") == 18
    assert all(math.isfinite(e["logps/chosen"]) and e["grad_norm"] < 5 for e in logs if e["step"] < 18)
    assert "The prompt alone fills `max_length`" in (run / "train.log").read_text()
    assert all_finite(run / "checkpoint-10" / "model.safetensors")
    assert all_nan(run / "checkpoint-20" / "model.safetensors")


def test_fp16_overflow_shape():
    run = SAMPLES_DIR / "fp16_overflow"
    base_cfg = json.loads((run / "base_model" / "config.json").read_text())
    assert base_cfg["dtype"] == "bfloat16"
    logs = train_logs("fp16_overflow")
    assert first_nonfinite_step(logs, "grad_norm") == 26
    assert all(e["loss"] > 3.8 for e in logs if e["step"] < 26)
    assert all_finite(run / "checkpoint-20" / "adapter_model.safetensors")
    assert all_nan(run / "checkpoint-40" / "adapter_model.safetensors")
    events = b"".join(p.read_bytes() for p in (run / "runs").glob("*/events.out.tfevents.*"))
    assert b'\\"dtype\\": \\"float16\\"' in events or b'"dtype": "float16"' in events


MINIMIND_LINE = re.compile(r"^Epoch:\[(\d+)/(\d+)\]\((\d+)/(\d+)\) loss:(\S+) lr:(\S+) epoch_Time:\S+min:$", re.MULTILINE)


def test_minimind_lines_and_half_pth():
    run = SAMPLES_DIR / "minimind_style_nan"
    rows = MINIMIND_LINE.findall((run / "train.log").read_text())
    assert len(rows) == 40
    losses = [float(r[4]) for r in rows]
    onset = next(i for i, v in enumerate(losses) if math.isnan(v))
    assert rows[onset][2] == "60" and rows[onset][0] == "1"
    assert losses[onset - 1] > 100 * losses[1]  # diverged before the NaN
    state = torch.load(run / "out" / "full_sft_16.pth", weights_only=True)
    assert {t.dtype for t in state.values()} == {torch.float16}
    assert all(torch.isnan(t).any() for t in state.values())  # embedding rows of unseen tokens stay finite
    assert sum(bool(torch.isnan(t).all()) for t in state.values()) == len(state) - 1
    resume = torch.load(run / "checkpoints" / "full_sft_16_resume.pth", weights_only=True)
    assert {"model", "optimizer", "epoch", "step"} <= set(resume)


#: sample -> the exact set of error/critical finding codes: the cause plus its symptoms, nothing else
#: (a false positive, e.g. GRAD001 on a stateless SGD optimizer, must fail here)
ERROR_CODES: dict[str, set[str]] = {
    "healthy_sft": set(),
    "lr_too_high_nan": {"OPT001", "NUM001", "NUM002", "CKPT001"},
    "lora_frozen_gradientless": {"GRAD001"},
    "simpo_empty_response": {"LEN001", "NUM001", "CKPT001", "DATA001"},  # DATA001: shown as explained by the empty responses
    "fp16_overflow": {"PREC001", "NUM001", "CKPT001"},
    "minimind_style_nan": {"OPT001", "NUM001", "NUM002", "CKPT001"},
}

#: sample -> (first bad checkpoint, last clean checkpoint) that the verdict's evidence chain must cite
CHAIN_CHECKPOINTS: dict[str, tuple[str | None, str | None]] = {
    "lr_too_high_nan": ("first checkpoint with non-finite values: checkpoint-40 (step 40): 21/21 weight tensors",
                        "last checkpoint with finite weights: checkpoint-20 (step 20, all 21 weight tensors finite)"),
    "simpo_empty_response": ("first checkpoint with non-finite values: checkpoint-20 (step 20)",
                             "last checkpoint with finite weights: checkpoint-10 (step 10"),
    "fp16_overflow": ("first checkpoint with non-finite values: checkpoint-40 (step 40): 12/12 weight tensors",
                      "last checkpoint with finite weights: checkpoint-20 (step 20, all 12 weight tensors finite)"),
    "minimind_style_nan": ("first checkpoint with non-finite values: checkpoints/full_sft_16_resume.pth",
                           "no checkpoint with finite weights was saved before the failure"),
}


@pytest.fixture(scope="module")
def analyses():
    from autopsy.pipeline import analyze

    return {run: analyze(SAMPLES_DIR / run) for run in EXPECTED}


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_verdict_pinned(run, analyses):
    dx = analyses[run].diagnosis
    assert (dx.verdict.status, dx.verdict.root_cause) == EXPECTED[run], [(f.code, f.confidence) for f in dx.findings]
    assert not [o for o in dx.detectors if o.status == "failed"]
    errors = {f.code for f in dx.findings if f.severity in ("error", "critical")}
    assert errors == ERROR_CODES[run]


@pytest.mark.parametrize("run", sorted(CHAIN_CHECKPOINTS))
def test_chain_cites_checkpoints(run, analyses):
    chain = [c.text for c in analyses[run].diagnosis.chain]
    first_bad, last_clean = CHAIN_CHECKPOINTS[run]
    assert any(first_bad in t for t in chain), chain
    assert any(last_clean in t for t in chain), chain


def test_lr_sample_evidence_numbers(analyses):
    """The divergence story with the README's numbers: lr peak, grad_norm growth, loss rise, Inf at 32."""
    (f,) = [f for f in analyses["lr_too_high_nan"].diagnosis.findings if f.code == "OPT001"]
    assert f.first_step == 32
    assert "lr reached 4.833 at step 30 (up from 0.1667 at step 2)" in f.message
    assert "grad_norm grew from ~1.704 to 2.75e+05 at step 30" in f.message  # trainer_state's step, not stdout's 29
    assert "loss rose from 2.254 (step 8) to 6.36e+08 (step 30)" in f.message
    assert "Resume from checkpoint-20 (step 20), the last checkpoint with finite weights." in f.remedies
    # SGD: the "above the usual range for Adam-family" signal must not be claimed
    assert not any("Adam-family" in e.detail for e in f.evidence)


def test_fp16_sample_cites_the_dtype_disagreement(analyses):
    (f,) = [f for f in analyses["fp16_overflow"].diagnosis.findings if f.code == "PREC001"]
    assert f.root_cause == "fp16_overflow" and f.first_step == 26 and f.basis == "direct"
    dtype = f.evidence[0]
    assert dtype.artifact.startswith("runs/") and "events.out.tfevents" in dtype.artifact
    assert "torch_dtype = float16" in dtype.detail and "bfloat16 in base_model/config.json" in dtype.detail


def test_gradientless_sample_cites_adapter_tensors(analyses):
    (f,) = [f for f in analyses["lora_frozen_gradientless"].diagnosis.findings if f.code == "GRAD001"]
    details = " | ".join(e.detail for e in f.evidence)
    assert "all 4 lora_B tensors are still all zero" in details
    assert ("8 of 8 tensors that should train are bitwise identical in every checkpoint from checkpoint-20 to "
            "the run folder (final save)") in details
    assert ("the optimizer in checkpoint-60 holds 1 parameter tensor(s) but the adapter has 8 LoRA tensors") in details
    assert f.evidence[0].artifact == "adapter_model.safetensors"
    assert f.evidence[0].where == "tensor base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    # no gradient checkpointing in this run: the requires_grad remedy comes first
    assert f.remedies[0].startswith("Check which parameters require grad")


def test_healthy_verdict_states_what_it_rests_on():
    """A healthy verdict is a claim too: it cites the loss trajectory and the checkpoints' health,
    with numbers taken from the sample's own trainer_state.json."""
    from autopsy.pipeline import analyze

    run_dir = REPO / "sample_logs" / "healthy_sft"
    logs = [e for e in train_logs("healthy_sft") if "loss" in e]
    dx = analyze(run_dir).diagnosis
    assert dx.verdict.status == "healthy"
    head = dx.verdict.headline
    assert f"loss {logs[0]['loss']:.4g} -> {logs[-1]['loss']:.4g}" in head
    assert f"over {len(logs)} logged points (steps {logs[0]['step']}-{logs[-1]['step']}), all finite" in head
    assert "all weights finite" in head

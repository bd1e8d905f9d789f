"""Numeric detectors on small runs: each fires on its failure with exact values and stays silent
on healthy runs and near misses. Runs are built with the RunBuilder (what readers fill), from
real artifacts (the HF NaN run's trainer_state.json) and from real torch optimisation loops."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from autopsy.checkpoints.analysis import analyze as analyze_checkpoints
from autopsy.diagnosis import diagnose
from autopsy.ingest.base import RunBuilder
from autopsy.model import Checkpoint, CheckpointFile, Run, TensorStat
from detectors import (
    crash,
    fp16_overflow,
    framework_bug,
    gradientless_params,
    lr_too_high,
    nan_in_data,
    nonfinite_onset,
    overflow_then_zero,
)

EXAMPLES = Path(__file__).parent / "fixtures" / "examples"
NAN = float("nan")


def make_run(rows=(), events=(), facts=(), source="trainer_state.json", kind="trainer_state",
             checkpoints=()) -> Run:
    """rows: (step, {metric: value}); events: (kind, message, line, step, data); facts: (key, value)."""
    b = RunBuilder(Path("/tmp/detA"))
    for i, (step, rec) in enumerate(rows):
        for key, value in rec.items():
            b.scalar(source, kind, step, key, value, line=i + 1 if source.endswith(".txt") else None)
    for kind_, msg, line, step, data in events:
        b.event(kind_, msg, source if kind == "text_log" else "train.log", line=line, step=step, **data)
    for key, value in facts:
        b.fact(key, value, "config.json", where=key)
    run = b.finish()
    run.checkpoints.extend(checkpoints)
    return run


def codes(module, run: Run) -> list:
    return list(module.detect(run))


def hf_state_run(path: Path) -> Run:
    """The real trainer_state.json of the HF NaN run (bare NaN, as transformers writes it)."""
    state = json.loads(path.read_text())
    b = RunBuilder(path.parent)
    for i, rec in enumerate(state["log_history"]):
        for k, v in rec.items():
            if k in ("step", "epoch") or k.startswith("train_") or k == "total_flos":
                continue
            b.scalar("trainer_state.json", "trainer_state", rec["step"], k, v, line=i)
    return b.finish()


def tensor(name, numel=4, nan=0, zeros=0, digest="d"):
    return TensorStat(name=name, dtype="F32", shape=[numel], numel=numel, nan=nan, zeros=zeros, digest=digest)


def ckpt(step, tensors, **kw):
    return Checkpoint(path=f"checkpoint-{step}", step=step, files=[CheckpointFile("model.safetensors", "safetensors", tensors=tensors)], **kw)


# -- NUM001 nonfinite-onset --------------------------------------------------------------------

def test_onset_real_hf_nan_run_hidden_zero_and_checkpoint():
    run = hf_state_run(EXAMPLES / "hf_trainer_nan_run" / "trainer_state.json")
    run.checkpoints.extend([ckpt(4, [tensor("a"), tensor("b")]), ckpt(12, [tensor("a", nan=4), tensor("b", nan=4)])])
    (f,) = codes(nonfinite_onset, run)
    assert f.first_step == 6 and f.severity == "error"
    assert f.evidence[0].detail.startswith("grad_norm = NaN at step 6")
    details = " | ".join(e.detail for e in f.evidence)
    assert "eval_loss = NaN at step 8" in details
    assert "checkpoint-12: 2/2 tensors hold NaN/Inf" in details
    assert "last checkpoint with finite weights: checkpoint-4" in details
    assert any("checkpoint-4" in r for r in f.remedies)


def test_onset_hidden_zero_loss_alone():
    run = make_run([(1, {"loss": 2.0, "grad_norm": 1.0}), (2, {"loss": 0.0, "grad_norm": NAN}),
                    (3, {"loss": 0.0, "grad_norm": NAN})])
    (f,) = codes(nonfinite_onset, run)
    assert f.first_step == 2 and "hidden as loss 0.0" in f.message


def test_onset_silent_first_step_gradnorm_nan_mmocr_shape():
    run = make_run([(100, {"loss": 1.9091, "grad_norm": NAN}), (200, {"loss": 0.9186, "grad_norm": 3.9772}),
                    (300, {"loss": 0.81, "grad_norm": 2.5})])
    assert codes(nonfinite_onset, run) == []


def test_onset_rare_amp_skips_are_warning_only():
    rows = [(s, {"loss": 2.0 - s / 100, "grad_norm": NAN if s in (30, 70) else 1.0}) for s in range(10, 110, 10)]
    (f,) = codes(nonfinite_onset, make_run(rows))
    assert f.severity == "warning" and f.title.startswith("2 of 10 grad_norm")


def test_onset_nan_stop_event_and_healthy_loss_silent():
    run = make_run([(200, {"loss": 0.2606, "learning_rate": 4e-6})],
                   events=[("nan_stop", "Loss is nan, stopping training", 2, None, {})], source="log.txt", kind="text_log")
    (f,) = codes(nonfinite_onset, run)
    assert f.first_step == 200 and "stopped on a non-finite loss" in f.evidence[0].detail
    assert codes(nonfinite_onset, make_run([(s, {"loss": 3.0 / s}) for s in range(1, 20)])) == []


# -- NUM002 overflow-then-zero ---------------------------------------------------------------

def test_overflow_then_zero_cases3_shape():
    rows = [(10, {"loss": 0.69, "grad_norm": 3.1}), (20, {"loss": 0.71, "grad_norm": 2.9}), (30, {"loss": 0.68, "grad_norm": 4.0}),
            (40, {"loss": 1.19e34, "grad_norm": NAN})] + [(s, {"loss": 0.0, "grad_norm": NAN}) for s in range(50, 450, 10)]
    (f,) = codes(overflow_then_zero, make_run(rows))
    assert f.first_step == 40
    assert "loss 1.19e+34 at step 40" in f.message and "then exactly 0.0 for 40 logs while grad_norm is non-finite" in f.message


def test_overflow_then_zero_silent_on_spike_that_recovers_and_grpo_zero_loss():
    rows = [(s, {"loss": 2.0, "grad_norm": 1.0}) for s in range(1, 6)] + [(6, {"loss": 40.0, "grad_norm": 30.0})] + \
           [(s, {"loss": 2.1, "grad_norm": 1.0}) for s in range(7, 12)]
    assert codes(overflow_then_zero, make_run(rows)) == []
    grpo = [(s, {"loss": 4.9e-09 if s % 2 else 0.0, "grad_norm": 0.3}) for s in range(1, 30)]
    assert codes(overflow_then_zero, make_run(grpo)) == []
    assert codes(nonfinite_onset, make_run(grpo)) == []


# -- PREC001 fp16 overflow / loss-scale collapse -------------------------------------------------

def _overflows(pairs, start_line=10, step0=None):
    return [("overflow", f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a:g}, reducing to {n:g}",
             start_line + i, None if step0 is None else step0 + i, {"attempted": float(a), "new": float(n)})
            for i, (a, n) in enumerate(pairs)]


def test_loss_scale_collapse_from_overflow_lines():
    evs = _overflows([(64, 32), (32, 16), (16, 8), (8, 4), (4, 2)], step0=378)
    run = make_run([(140, {"loss": 1.6747}), (380, {"loss": 2.0491})], events=evs,
                   facts=[("deepspeed.fp16.enabled", "auto"), ("deepspeed.fp16.initial_scale_power", 16)])
    (f,) = codes(fp16_overflow, run)
    assert f.root_cause == "loss_scale_collapse" and f.basis == "direct" and f.severity == "error"
    assert "5 overflow messages drove the dynamic loss scale down to 2" in f.message
    assert f.first_step == 380  # 16 -> 8: the first scale at or below COLLAPSE_SCALE
    assert any("1.675" in e.detail and "2.049" in e.detail for e in f.evidence)


def test_loss_scale_at_minimum_is_critical():
    evs = _overflows([(2, 1)]) + [("loss_scale_min", "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", 40, 900, {})]
    (f,) = codes(fp16_overflow, make_run(events=evs))
    assert f.severity == "critical" and f.confidence == pytest.approx(0.95) and f.first_step == 900


def test_early_overflows_that_stop_high_are_calibration_info():
    evs = _overflows([(2 ** k, 2 ** (k - 1)) for k in range(32, 26, -1)])
    (f,) = codes(fp16_overflow, make_run(events=evs))
    assert f.severity == "info" and f.root_cause is None and "6 early loss-scale overflows" in f.title
    dx = diagnose([f], [], make_run(events=evs))
    assert dx.verdict.status == "healthy"


def test_fp16_half_weights_with_overflow_then_zero_is_direct():
    rows = [(10, {"loss": 0.7, "grad_norm": 3.0}), (20, {"loss": 1.19e34, "grad_norm": NAN}), (30, {"loss": 0.0, "grad_norm": NAN})]
    run = make_run(rows, facts=[("torch_dtype", "float16"), ("gradient_accumulation_steps", 32)])
    (f,) = codes(fp16_overflow, run)
    assert f.root_cause == "fp16_overflow" and f.basis == "direct" and f.confidence == pytest.approx(0.9)
    assert f.first_step == 20


def test_fp16_amp_every_step_skipped_lr_pinned():
    rows = [(s, {"loss": 2.5, "grad_norm": NAN, "learning_rate": 0.0}) for s in range(5, 55, 5)]
    (f,) = codes(fp16_overflow, make_run(rows, facts=[("fp16", True)]))
    assert f.basis == "inferred" and "10/10 logs" in f.message and "learning rate stays at 0 for 9 logs" in f.message


def test_fp16_silent_without_fp16_or_without_symptom():
    rows = [(10, {"loss": 0.7, "grad_norm": 3.0}), (20, {"loss": NAN, "grad_norm": NAN})]
    assert codes(fp16_overflow, make_run(rows, facts=[("bf16", True)])) == []
    healthy = [(s, {"loss": 2.0 / s, "grad_norm": 1.0}) for s in range(1, 20)]
    assert codes(fp16_overflow, make_run(healthy, facts=[("fp16", True)])) == []


def test_fp16_hint_from_amp_engine_nan_stop():
    run = make_run([(200, {"loss": 0.2606, "learning_rate": 4e-6})],
                   events=[("nan_stop", "[11:41:59.064379] Loss is nan, stopping training", 2, None, {})],
                   source="log.txt", kind="text_log")
    (f,) = codes(fp16_overflow, run)
    assert f.root_cause == "fp16_overflow" and f.basis == "inferred" and f.confidence == pytest.approx(0.55)
    assert codes(lr_too_high, run) == []  # lr 4e-6 cannot be the cause


# -- OPT001 lr-too-high: a real AdamW loop --------------------------------------------------------

def _real_loop(lr: float, steps: int = 60, warmup: int = 10) -> list[tuple[int, dict]]:
    """A tiny regression net trained by real SGD+momentum with linear warmup; logs loss, grad_norm, lr."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    rows = []
    for step in range(1, steps + 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        rows.append((step, {"loss": loss.item(), "grad_norm": gn.item(), "learning_rate": sched.get_last_lr()[0]}))
        if not math.isfinite(loss.item()):
            break
        opt.step()
        sched.step()
    return rows


def test_lr_too_high_fires_on_real_divergence_and_silent_on_smooth_run():
    bad = _real_loop(lr=0.3)
    assert not math.isfinite(bad[-1][1]["loss"])  # the real loop really blew up
    run = make_run(bad, facts=[("learning_rate", 0.3), ("optim", "sgd"), ("max_grad_norm", 0)])
    (f,) = codes(lr_too_high, run)
    first_bad = min(s for s, rec in bad if not all(math.isfinite(v) for v in rec.values()))
    assert f.root_cause == "lr_too_high" and f.first_step == first_bad
    assert "lr reached 0.3 at step 10 (up from " in f.message and "grad_norm grew" in f.message
    assert any("max_grad_norm = 0" in e.detail for e in f.evidence)
    smooth = _real_loop(lr=0.01)
    assert all(math.isfinite(r[1]["loss"]) for r in smooth) and smooth[-1][1]["loss"] < smooth[0][1]["loss"]
    assert codes(lr_too_high, make_run(smooth, facts=[("learning_rate", 0.01), ("optim", "sgd")])) == []
    assert codes(nonfinite_onset, make_run(smooth)) == []


def test_lr_too_high_synthetic_warmup_peak_then_nan():
    rows = [(s, {"loss": 3.0 - 0.05 * s, "grad_norm": 0.8, "learning_rate": 5e-3 * s / 30}) for s in range(1, 30)]
    rows += [(30 + i, {"loss": 1.6 + 0.4 * i, "grad_norm": 0.8 * 2 ** i, "learning_rate": 5e-3}) for i in range(7)]
    rows += [(37, {"loss": NAN, "grad_norm": NAN, "learning_rate": 5e-3})]
    (f,) = codes(lr_too_high, make_run(rows))
    assert f.first_step == 37 and f.confidence == pytest.approx(0.85)
    assert "lr reached 0.005 at step 30 (up from " in f.message and "grad_norm grew from ~0.8 to 51.2 at step 36" in f.message
    # the same run at the same LR with a calm curve before the NaN is not lr_too_high
    calm = [(s, {"loss": 2.0, "grad_norm": 0.8, "learning_rate": 5e-4}) for s in range(1, 37)] + [(37, {"loss": NAN, "grad_norm": NAN, "learning_rate": 5e-4})]
    assert codes(lr_too_high, make_run(calm)) == []


def test_lr_divergence_without_nan_and_recovering_spike_silent():
    rows = [(s, {"loss": 2.0 - 0.1 * s, "learning_rate": 1e-2}) for s in range(1, 10)]
    rows += [(s, {"loss": 1.0 * (s - 8), "grad_norm": 5.0 * (s - 8), "learning_rate": 1e-2}) for s in range(10, 16)]
    (f,) = codes(lr_too_high, make_run(rows))
    assert "never comes back" in " ".join(e.detail for e in f.evidence)
    spike = [(s, {"loss": 2.0, "learning_rate": 1e-2}) for s in range(1, 10)] + [(10, {"loss": 9.0, "learning_rate": 1e-2})] + \
            [(s, {"loss": 2.0, "learning_rate": 1e-2}) for s in range(11, 20)]
    assert codes(lr_too_high, make_run(spike)) == []


# -- GRAD001 gradientless ---------------------------------------------------------------------

def test_gradientless_from_no_grad_fn_traceback():
    ev = [("traceback", "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn", 2, None,
           {"exc_type": "RuntimeError", "exc_message": "element 0 of tensors does not require grad and does not have a grad_fn"})]
    (f,) = codes(gradientless_params, make_run(events=ev))
    assert f.basis == "direct" and f.confidence == pytest.approx(0.85) and "grad_fn" in f.message


def test_gradientless_from_checkpoints_and_grad_norm_zero():
    # optimizer summary in the real schema (autopsy.checkpoints.summaries.optimizer_summary)
    opt = {"n_groups": 1, "n_params": 2, "n_with_state": 0, "n_params_without_state": 2, "family": "adam",
           "stateless": False, "params_without_state": [{"index": 0, "group": 0}, {"index": 1, "group": 0}]}
    cks = [ckpt(10, [tensor("x.lora_A.weight", digest="a1"), tensor("x.lora_B.weight", zeros=4, digest="b")]),
           ckpt(20, [tensor("x.lora_A.weight", digest="a1"), tensor("x.lora_B.weight", zeros=4, digest="b")],
                optimizer=opt)]
    rows = [(s, {"loss": 2.3, "grad_norm": 0.0}) for s in range(1, 8)]
    run = make_run(rows, checkpoints=cks)
    run.checkpoint_analysis = analyze_checkpoints(cks)  # the real cross-checkpoint analysis
    (f,) = codes(gradientless_params, run)
    details = " | ".join(e.detail for e in f.evidence)
    assert "all 1 lora_B tensors are still all zero" in details
    assert "2 of 2 optimizer parameters have no state in checkpoint-20 (e.g. param #0 in group 0)" in details
    assert "2 of 2 tensors that should train are bitwise identical in every checkpoint from checkpoint-10 to checkpoint-20" in details
    assert "grad_norm is exactly 0.0 for 7 consecutive logs from step 1" in details
    assert f.confidence == pytest.approx(0.9)


def test_gradientless_silent_on_trained_lora_and_short_zero_grad():
    cks = [ckpt(10, [tensor("x.lora_B.weight", zeros=0, digest="b1")]), ckpt(20, [tensor("x.lora_B.weight", digest="b2")])]
    rows = [(s, {"grad_norm": 0.0 if s < 3 else 0.5}) for s in range(1, 10)]
    assert codes(gradientless_params, make_run(rows, checkpoints=cks)) == []


# -- DATA001 nan-in-data --------------------------------------------------------------------

def test_nan_in_data_particular_batches():
    rows = [(s, {"loss": 1.5 + 0.01 * (s % 3), "grad_norm": 1.0}) for s in range(1, 30)]
    rows[11] = (12, {"loss": NAN, "grad_norm": NAN})
    rows[20] = (21, {"loss": NAN, "grad_norm": NAN})
    (f,) = codes(nan_in_data, make_run(rows, facts=[("bf16", True)]))
    assert f.severity == "error" and f.confidence == pytest.approx(0.6) and "steps 12, 21" in f.message
    (g,) = codes(nan_in_data, make_run(rows, facts=[("fp16", True)]))
    assert g.severity == "warning" and "equally good explanation" in g.message


def test_nan_in_data_silent_after_divergence():
    rows = [(s, {"loss": 1.0 * s, "grad_norm": 2.0 ** s}) for s in range(1, 10)] + [(10, {"loss": NAN, "grad_norm": NAN})]
    assert codes(nan_in_data, make_run(rows)) == []


# -- CRASH001 ----------------------------------------------------------------------------------

def test_crash_oom_and_generic_with_last_checkpoint():
    oom = [("traceback", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 50, 120,
            {"exc_type": "torch.OutOfMemoryError", "exc_message": "CUDA out of memory. Tried to allocate 2.00 GiB"})]
    run = make_run([(100, {"loss": 1.0})], events=oom, checkpoints=[ckpt(100, [tensor("w")])])
    (f,) = codes(crash, run)
    assert f.root_cause == "out_of_memory" and f.title == "Out of memory at step 120"
    assert any("checkpoint-100" in r for r in f.remedies)
    kerr = [("traceback", "KeyError: 'labels'", 9, 7, {"exc_type": "KeyError", "exc_message": "'labels'"})]
    (g,) = codes(crash, make_run(events=kerr))
    assert g.root_cause == "crash" and g.title == "Crashed with KeyError at step 7" and g.confidence == pytest.approx(0.6)
    assert codes(crash, make_run(events=[("warning", "some warning", 1, None, {})])) == []


# -- FW001 (knowledge-base entries; the entries' own thread fixtures are in tests/test_known_issues.py) ------

def test_framework_bug_zero2_overlap_and_versions():
    rows = [(1, {"loss": 1.6, "grad_norm": 9.3}), (2, {"loss": 0.0, "grad_norm": NAN}), (3, {"loss": 0.0, "grad_norm": NAN})]
    facts = [("deepspeed.zero_stage", 2), ("deepspeed.overlap_comm", True), ("version.deepspeed", "0.14.0")]
    (f,) = codes(framework_bug, make_run(rows, facts=facts))
    assert "overlap_comm" in f.title and f.title.startswith("KI-DEEPSPEED-001") and f.first_step == 2
    assert f.basis == "direct" and f.severity == "error" and "https://github.com/deepspeedai/DeepSpeed/issues/5242" in f.references
    assert codes(framework_bug, make_run(rows, facts=facts[:2] + [("version.deepspeed", "0.10.2")])) == []
    # exposed (version and config in range) but healthy: info only, never a failure
    healthy = codes(framework_bug, make_run([(1, {"loss": 1.6, "grad_norm": 2.0})], facts=facts))
    assert [x.severity for x in healthy] == ["info"] and "KI-DEEPSPEED-001" in healthy[0].title
    # versions unknown: a candidate that says which version to check
    (c,) = codes(framework_bug, make_run(rows, facts=facts[:2]))
    assert c.basis == "inferred" and "check the installed deepspeed" in c.message.lower()


def test_framework_bug_cudnn_sdpa_and_ga_loss():
    rows = [(1, {"loss": 1.2, "grad_norm": 1.0}), (2, {"loss": 1.1, "grad_norm": NAN}), (3, {"loss": 0.0, "grad_norm": NAN})]
    ev = [("cudnn_sdpa_warning", "UserWarning: cuDNN SDPA backward got grad_output.strides() != output.strides()", 5, None, {})]
    (f,) = codes(framework_bug, make_run(rows, events=ev, facts=[("version.torch", "2.5.0+cu124")]))
    assert f.basis == "direct" and f.confidence == pytest.approx(0.9) and f.title.startswith("KI-TORCH-001")
    assert codes(framework_bug, make_run(rows, facts=[("version.torch", "2.5.1")])) == []
    ga = [(1, {"loss": 138.0})]
    (g,) = codes(framework_bug, make_run(ga, facts=[("version.transformers", "4.46.1"), ("gradient_accumulation_steps", 32), ("vocab_size", 32000)]))
    assert g.severity == "error" and any("ln(vocab_size=32000) = 10.37" in e.detail for e in g.evidence)
    assert codes(framework_bug, make_run(ga, facts=[("version.transformers", "4.47.1"), ("gradient_accumulation_steps", 32)])) == []


@pytest.mark.parametrize("exc_type,msg,kind,explained", [
    # each with the event the text reader makes of the same line (the explaining detector's evidence)
    ("ValueError", "Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
     "bf16_unsupported", True),
    ("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn", "no_grad_fn", True),
    ("Exception", "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "loss_scale_min",
     True),
    ("IndexError", "index out of range in self", "index_out_of_range", True),
    ("KeyError", "'input_ids'", None, False),
    # the words alone, with no detector's event to explain them (FSDP's refusal, flan-alpaca#10): a crash, not info
    ("ValueError", "`FlatParameter` requires uniform `requires_grad`", None, False),
])
def test_crash_explained_by_a_specific_cause_is_info(exc_type, msg, kind, explained):
    ev = [("traceback", f"{exc_type}: {msg}", 9, 3, {"exc_type": exc_type, "exc_message": msg})]
    if kind:
        ev.append((kind, f"{exc_type}: {msg}", 9, 3, {}))
    (f,) = codes(crash, make_run(events=ev))
    if explained:
        assert (f.severity, f.root_cause) == ("info", None)
        assert msg[:40] in f.message and "other findings" in f.message
    else:
        assert (f.severity, f.root_cause) == ("error", "crash")

"""Diagnosis v2 (issue 10): checkpoint evidence on its own, divergence and stalls without NaN, transient vs
persistent, messages that name a cause, metrics NaN by construction.

Checkpoints are written by the real writer (safetensors); trainer states follow the HF Trainer's
``trainer_state.json`` layout (``log_history`` records with ``step``, ``loss``, ``grad_norm``,
``learning_rate``, ``epoch``), as ``Trainer.log`` appends them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from autopsy.cli import app
from autopsy.pipeline import analyze


def _state(d: Path, hist: list[dict], **extra) -> None:
    d.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"global_step": max(h["step"] for h in hist), "log_history": hist, **extra}, indent=2)
    (d / "trainer_state.json").write_text(text.replace("NaN", "NaN"))


def _hist(losses, lrs=None, gns=None, start=10, every=10):
    out = []
    for i, loss in enumerate(losses):
        rec = {"epoch": round(0.01 * (i + 1), 4), "step": start + every * i, "loss": loss,
               "learning_rate": (lrs[i] if lrs else 2e-5), "grad_norm": (gns[i] if gns else 1.0)}
        out.append(rec)
    return out


def _verdict(path: Path):
    return analyze(path).diagnosis


# -- 1. checkpoint evidence stands on its own ---------------------------------------------------

def _sharded_bad(d: Path, nan: int = 4, inf: int = 3) -> None:
    d.mkdir(parents=True)
    a = torch.randn(32, 32, dtype=torch.bfloat16)
    b = torch.randn(32, 32, dtype=torch.bfloat16)
    a.view(-1)[:nan] = float("nan")
    b.view(-1)[:inf] = float("inf")
    save_file({"model.layers.0.mlp.w": a}, str(d / "model-00001-of-00002.safetensors"))
    save_file({"model.layers.1.mlp.w": b}, str(d / "model-00002-of-00002.safetensors"))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 4096}, "weight_map": {
        "model.layers.0.mlp.w": "model-00001-of-00002.safetensors", "model.layers.1.mlp.w": "model-00002-of-00002.safetensors"}}))


def test_nan_weights_beside_healthy_logs_are_never_healthy(tmp_path: Path):
    hist = _hist([2.0 - 0.02 * i for i in range(30)])
    for step in (100, 200, 300):
        _sharded_bad(tmp_path / f"checkpoint-{step}")
        _state(tmp_path / f"checkpoint-{step}", [h for h in hist if h["step"] <= step])
    dx = _verdict(tmp_path)
    assert dx.verdict.status != "healthy"
    (f,) = [f for f in dx.findings if f.code == "CKPT001"]
    assert f.severity == "error" and f.first_step == 100 and "checkpoint-100" in f.title
    assert "7 non-finite value(s) in 2 tensor(s)" in f.message
    assert f.evidence[0].artifact.startswith("checkpoint-100/model-0000")
    places = [(e.artifact, e.where) for e in f.evidence if e.where.startswith("tensor ")]
    assert len(places) == len(set(places)) == 2, places  # each bad tensor named once, both named
    res = CliRunner().invoke(app, ["run", str(tmp_path), "--format", "json", "--output", str(tmp_path.parent / "r.json"), "-q"])
    assert res.exit_code == 1


def test_one_nan_value_in_one_file_fails_the_run(tmp_path: Path):
    w = torch.randn(64, 64)
    w[7, 7] = float("nan")
    save_file({"model.embed_tokens.weight": w}, str(tmp_path / "model.safetensors"))
    dx = _verdict(tmp_path / "model.safetensors")
    assert dx.verdict.status == "inconclusive" and "NaN/Inf" in dx.verdict.headline
    res = CliRunner().invoke(app, ["run", str(tmp_path / "model.safetensors"), "-o", str(tmp_path / "r.md"), "--format", "md"])
    assert res.exit_code == 1


def test_finite_checkpoints_stay_healthy(tmp_path: Path):
    hist = _hist([2.0 - 0.02 * i for i in range(30)])
    d = tmp_path / "checkpoint-300"
    d.mkdir()
    save_file({"model.layers.0.w": torch.randn(16, 16)}, str(d / "model.safetensors"))
    _state(d, hist)
    dx = _verdict(tmp_path)
    assert dx.verdict.status == "healthy" and not [f for f in dx.findings if f.code == "CKPT001"]


def test_zero3_empty_adapter_names_the_cause(tmp_path: Path):
    d = tmp_path / "checkpoint-50"
    d.mkdir()
    save_file({f"base_model.model.model.layers.{i}.self_attn.q_proj.lora_{x}.weight": torch.empty(0)
               for i in range(4) for x in "AB"}, str(d / "adapter_model.safetensors"))
    (d / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "task_type": "CAUSAL_LM"}))
    _state(d, _hist([2.0 - 0.02 * i for i in range(5)]))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "zero3_empty_tensors")


def test_empty_tensor_load_message_names_the_cause(tmp_path: Path):
    # quoted from https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/392 (merge after ZeRO-3 LoRA training)
    log = tmp_path / "merge.log"
    log.write_text("The vocab size of the tokenizer 55296 does not match the vocab size of the LoRA weight 0!\n"
                   "\tsize mismatch for base_model.model.model.layers.76.self_attn.v_proj.lora_A.default.weight: copying a "
                   "param with shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([64, 8192]).\n")
    dx = _verdict(log)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "zero3_empty_tensors")


# -- 3. divergence and stalls without NaN --------------------------------------------------------

def test_divergence_without_nan_is_lr_too_high(tmp_path: Path):
    losses = [2.5, 2.1, 1.8, 1.7, 1.9, 2.6, 3.9, 5.2, 6.1, 6.4, 6.3, 6.5, 6.2, 6.4]
    lrs = [1e-4 * (i + 1) for i in range(5)] + [5e-4] * 9
    _state(tmp_path, _hist(losses, lrs))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_too_high")
    div = next(f for f in dx.findings if f.code == "DIV001")
    # DIV001 names the cause itself (0.5) or is explained by OPT001's
    assert "lr_too_high" in (div.explained_by, div.root_cause) and div.first_step is not None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_decrease_and_plateau_stay_healthy(tmp_path: Path, seed: int):
    import random

    rnd = random.Random(seed)
    losses = [max(0.3, 2.0 * math.exp(-i / 15) + 0.6 + rnd.uniform(-0.25, 0.25)) for i in range(80)]
    _state(tmp_path, _hist(losses))
    assert _verdict(tmp_path).verdict.status == "healthy"


def test_warmup_longer_than_the_run(tmp_path: Path):
    lrs = [2e-5 * (10 * (i + 1)) / 20000 for i in range(12)]
    losses = [2.31, 2.30, 2.31, 2.30, 2.30, 2.31, 2.30, 2.30, 2.29, 2.30, 2.30, 2.30]
    _state(tmp_path, _hist(losses, lrs))
    # LLaMA-Factory writes its arguments as training_args.yaml in the output dir
    (tmp_path / "training_args.yaml").write_text("learning_rate: 2.0e-05\nwarmup_steps: 20000\nmax_steps: 120\n")
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_schedule_stalled"), [
        (f.code, f.root_cause, f.severity) for f in dx.findings]


def test_every_step_skipped_lr_stays_zero_is_fp16(tmp_path: Path):
    n = 10
    _state(tmp_path, _hist([3.1] * n, [0.0] * n, [float("nan")] * n))
    (tmp_path / "training_args.yaml").write_text("fp16: true\nlearning_rate: 1.0e-04\nwarmup_ratio: 0.1\n")
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "fp16_overflow")
    assert any(f.code == "LRZ001" for f in dx.findings)


def test_lr_zero_only_at_the_start_is_healthy(tmp_path: Path):
    """BELLE #134's shape: DeepSpeed fp16 skips the first steps (lr 0), then trains."""
    lrs = [0.0, 0.0, 0.0] + [2e-5] * 12
    losses = [2.2, 2.2, 2.2] + [2.0 - 0.05 * i for i in range(12)]
    _state(tmp_path, _hist(losses, lrs))
    assert _verdict(tmp_path).verdict.status == "healthy"


# -- 4. transient vs persistent ------------------------------------------------------------------

def test_skipped_steps_while_loss_improves_is_healthy(tmp_path: Path):
    losses = [2.0 - 0.03 * i for i in range(30)]
    gns = [1.0] * 30
    for i in (5, 6, 7, 12):
        gns[i] = float("nan")
    _state(tmp_path, _hist(losses, gns=gns))
    dx = _verdict(tmp_path)
    assert dx.verdict.status == "healthy"
    assert any(f.code == "NUM001" and f.severity == "warning" for f in dx.findings)


def test_isolated_zero_loss_steps_are_masked_batches(tmp_path: Path):
    losses = [2.0 - 0.02 * i for i in range(30)]
    gns = [1.0] * 30
    for i in (4, 17, 23):
        losses[i], gns[i] = 0.0, 0.0
    _state(tmp_path, _hist(losses, gns=gns))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "all_labels_masked")
    assert "3 step(s)" in next(f for f in dx.findings if f.code == "DATA002").title


def test_eval_nan_with_finite_training_is_masked_eval_batches(tmp_path: Path):
    hist = _hist([2.0 - 0.02 * i for i in range(10)])
    hist.append({"epoch": 0.1, "step": 100, "eval_loss": float("nan"), "eval_runtime": 143.8})
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 100, "log_history": hist}))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "all_labels_masked")


def test_grpo_kl_nan_by_construction_is_healthy(tmp_path: Path):
    """TRL GRPO with beta 0 (default since 0.19) computes no KL: the kl column is NaN at every log."""
    hist = [{"step": s, "loss": -0.05 + 0.01 * (s % 3), "reward": 6.0 + 0.1 * s, "reward_std": 12.0, "kl": float("nan"),
             "completions/mean_length": 600.0, "learning_rate": 1e-6, "epoch": 0.01 * s} for s in range(1, 30)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 29, "log_history": hist}))
    assert _verdict(tmp_path).verdict.status == "healthy"


def test_constant_loss_scale_in_bf16_is_not_a_collapse(tmp_path: Path):
    # Megatron-LM prints "loss scale: 1.0" in bf16 runs (training_log in megatron/training/training.py)
    lines = [f" iteration {i:>8}/    8000 | consumed samples: {64 * i:>12} | learning rate: 6.680E-06 | global batch size:"
             f"    64 | lm loss: {0.75 - 0.001 * i:.6E} | loss scale: 1.0 | grad norm: 0.752 | number of skipped iterations:"
             f"   0 | number of nan iterations:   0 |" for i in range(3380, 3400)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    dx = _verdict(tmp_path)
    assert not [f for f in dx.findings if f.code == "PREC001"] and dx.verdict.status == "healthy"


# -- 6. messages that name a cause ---------------------------------------------------------------

def test_data_pipeline_nan_message_names_the_data(tmp_path: Path):
    lines = [f"{{'loss': {2.0 - 0.01 * i:.4f}, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}"
             for i in range(1, 20)]
    lines.append("WARNING: batch 20 contains NaN values in pixel_values")
    lines += ["{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.21}"] * 3
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    dx = _verdict(tmp_path / "train.log")
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "nan_in_data")
    assert next(f for f in dx.findings if f.code == "DATA001").basis == "direct"


# -- 7. nothing to judge -------------------------------------------------------------------------

def test_nothing_to_judge_says_what_was_read(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16"}))
    dx = _verdict(tmp_path)
    assert dx.verdict.status == "inconclusive" and dx.verdict.headline.startswith("Nothing to judge")
    assert "config.json" in dx.verdict.headline


def test_grpo_completions_all_truncated(tmp_path: Path):
    """TRL GRPO logs completions/clipped_ratio (share without EOS) and mean_terminated_length 0 when none ended."""
    hist = [{"step": s, "loss": 0.0, "reward": 0.0, "reward_std": 0.0, "completions/mean_length": 512.0,
             "completions/clipped_ratio": 1.0, "completions/mean_terminated_length": 0.0, "learning_rate": 1e-6,
             "epoch": 0.01 * s} for s in range(1, 20)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 19, "log_history": hist}))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "completions_truncated")


def test_grpo_some_truncation_is_healthy(tmp_path: Path):
    hist = [{"step": s, "loss": 0.01, "reward": 0.2 + 0.03 * s, "reward_std": 0.3, "completions/mean_length": 300.0,
             "completions/clipped_ratio": 0.25, "completions/mean_terminated_length": 280.0, "learning_rate": 1e-6,
             "epoch": 0.01 * s} for s in range(1, 20)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 19, "log_history": hist}))
    assert _verdict(tmp_path).verdict.status == "healthy"


def test_warmup_still_climbing_without_config_is_stalled(tmp_path: Path):
    lrs = [5e-9 * (i + 1) for i in range(12)]
    _state(tmp_path, _hist([2.30 + 0.005 * (i % 2) for i in range(12)], lrs))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_schedule_stalled")


def test_nothing_to_judge_never_says_something_is_wrong(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("hello world\n")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    res = CliRunner().invoke(app, ["run", str(tmp_path), "-o", str(tmp_path.parent / "r.html")])
    assert res.exit_code == 0 and "Nothing to judge" in res.output and "Something is wrong" not in res.output


def test_spikes_at_a_far_too_high_lr_name_the_lr(tmp_path: Path):
    losses = [2.0 - 0.01 * i for i in range(40)]
    for i in (15, 22, 30, 36):
        losses[i] *= 4
    _state(tmp_path, _hist(losses, [5e-3] * 40))
    dx = _verdict(tmp_path)
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_too_high")


def test_spikes_at_an_ordinary_lr_are_a_warning(tmp_path: Path):
    losses = [2.0 - 0.01 * i for i in range(40)]
    for i in (15, 22, 30, 36):
        losses[i] *= 4
    _state(tmp_path, _hist(losses, [2e-5] * 40))
    assert _verdict(tmp_path).verdict.status == "healthy"


def test_internal_failure_inside_a_framework_names_the_framework(tmp_path: Path):
    # quoted from https://github.com/hiyouga/LlamaFactory/issues/10224 (DeepSpeed ZeRO-3, rank 7)
    log = tmp_path / "log.txt"
    log.write_text(
        '[rank7]:   File "/opt/conda/envs/ai/lib/python3.12/site-packages/deepspeed/runtime/zero/utils.py", line 82, in '
        "assert_lst_len_same_as_other_ranks\n"
        '[rank7]:     raise RuntimeError(f"Detected a disagreement on list length between rank0 and rank{dist.get_rank()}: "\n'
        "[rank7]: RuntimeError: Detected a disagreement on list length between rank0 and rank7: \n")
    dx = _verdict(log)
    own = [f for f in dx.findings if f.code == "CRASH001" and f.root_cause == "framework_bug"]
    assert own and "deepspeed" in own[0].title
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "framework_bug")


@pytest.mark.parametrize("frame,exc", [
    ("site-packages/torch/nn/modules/module.py", "RuntimeError: Expected all tensors to be on the same device, but found "
                                                "at least two devices, cuda:0 and cpu!"),
    ("site-packages/transformers/trainer.py", "ValueError: You should supply an encoding or a list of encodings"),
    ("site-packages/deepspeed/runtime/engine.py", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
])
def test_caller_errors_raised_in_libraries_are_not_framework_bugs(tmp_path: Path, frame: str, exc: str):
    log = tmp_path / "log.txt"
    log.write_text(f'Traceback (most recent call last):\n  File "/usr/lib/python3.10/{frame}", line 10, in f\n    x()\n{exc}\n')
    dx = _verdict(log)
    assert not [f for f in dx.findings if f.code == "CRASH001" and f.root_cause == "framework_bug"]


def test_healthy_headline_counts_weights_not_callback_state(copy_fixture):
    """The real Lightning checkpoint (examples/lightning: Trainer.fit with the default ModelCheckpoint) stores
    ``kth_value = inf`` in its callback state, as Lightning does until a k-th best score exists. The run is
    healthy and its headline says the weights are finite, naming that tensor as other saved state; it used
    to read "1 with non-finite tensors", which contradicts a healthy verdict."""
    import autopsy

    a = autopsy.analyze(copy_fixture("examples/lightning"))
    v = a.diagnosis.verdict
    assert v.status == "healthy"
    assert "1 checkpoint(s), all weights finite (non-finite only outside them: callbacks.ModelCheckpoint{...}.kth_value " \
           "= +Inf, callback or scheduler state)" in v.headline
    assert "with non-finite tensors" not in v.headline

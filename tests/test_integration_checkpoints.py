"""Detectors and report read the real ``run.checkpoint_analysis`` (schema: autopsy/checkpoints/__init__.py).

Every checkpoint here is written by the real writers (safetensors, torch.save of a real optimizer /
GradScaler state dict) from a tiny model trained in the test, then read through
``autopsy.pipeline.analyze``: the detectors' evidence must cite the right checkpoint, tensor and
numbers, and stay silent where the same evidence is innocent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from autopsy.pipeline import analyze
from autopsy.render import html, markdown
from autopsy.report import build_report
from tests.conftest import REPO

EXAMPLES = Path(__file__).parent / "fixtures" / "examples"
SAMPLES = REPO / "sample_logs"


class TwoLayers(torch.nn.Module):
    """``unused`` is in the optimizer but never in the forward pass: it never gets a .grad."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.unused = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


def _train_and_save(root: Path, opt_name: str, saves: tuple[int, ...] = (5, 10)) -> None:
    model = TwoLayers()
    opt = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0) if opt_name == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=1e-2))
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    for step in range(1, max(saves) + 1):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step in saves:
            d = root / f"checkpoint-{step}"
            d.mkdir(parents=True)
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(d / "model.safetensors"))
            torch.save(opt.state_dict(), d / "optimizer.pt")


def _codes(a) -> set[str]:
    return {f.code for f in a.diagnosis.findings}


def test_params_without_state_fire_for_adam_and_stay_silent_for_stateless_sgd(tmp_path):
    _train_and_save(tmp_path / "adam", "adam")
    a = analyze(tmp_path / "adam")
    opt = a.run.checkpoint_analysis["optimizer"]
    assert (opt["family"], opt["stateless"], opt["n_params"], opt["n_params_without_state"]) == ("adam", False, 4, 2)
    (f,) = [f for f in a.diagnosis.findings if f.code == "GRAD001"]
    details = [e.detail for e in f.evidence]
    assert "2 of 4 optimizer parameters have no state in checkpoint-10 (e.g. param #0 in group 0) while 2 do: " \
           "their .grad was always None" in details
    assert any(d.startswith("2 of 4 tensors that should train are bitwise identical in every checkpoint from "
                            "checkpoint-5 to checkpoint-10") for d in details)
    assert f.evidence[0].artifact in ("checkpoint-10/model.safetensors", "checkpoint-10/optimizer.pt")

    # plain SGD keeps no state by design: an empty state is not a missing gradient, every weight moved
    _train_and_save(tmp_path / "sgd", "sgd")
    b = analyze(tmp_path / "sgd")
    opt = b.run.checkpoint_analysis["optimizer"]
    assert (opt["family"], opt["stateless"], opt["n_with_state"], opt["n_params_without_state"]) == ("sgd", True, 0, 4)
    # the unused Linear still never moves (2 of 4 tensors): that evidence stays, the optimizer one must not appear
    details = [e.detail for f in b.diagnosis.findings if f.code == "GRAD001" for e in f.evidence]
    assert not any("optimizer parameters have no state" in d for d in details)


def test_all_trained_sgd_run_is_not_gradientless(tmp_path):
    """Every parameter in the forward pass, SGD momentum 0: empty optimizer state, weights moving: healthy."""

    class Used(TwoLayers):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.unused(x))

    model = Used()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    for step in range(1, 11):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step in (5, 10):
            d = tmp_path / f"checkpoint-{step}"
            d.mkdir()
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(d / "model.safetensors"))
            torch.save(opt.state_dict(), d / "optimizer.pt")
    a = analyze(tmp_path)
    assert a.run.checkpoint_analysis["unchanged"]["pairs"][0]["identical"] == 0
    assert "GRAD001" not in _codes(a)
    assert a.diagnosis.verdict.status == "healthy"


@pytest.mark.parametrize("scale,collapses", [(4.0, True), (65536.0, False)])
def test_gradscaler_scale_from_scaler_pt(tmp_path, scale, collapses):
    d = tmp_path / "checkpoint-10"
    d.mkdir()
    save_file({"w": torch.ones(2, 2)}, str(d / "model.safetensors"))
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    torch.save(scaler.state_dict(), d / "scaler.pt")
    a = analyze(tmp_path)
    assert a.run.checkpoint_analysis["scaler"]["scale"] == scale
    prec = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    if not collapses:
        assert prec == []
        return
    (f,) = prec
    assert f.root_cause == "loss_scale_collapse" and f.first_step == 10
    ev = [e for e in f.evidence if e.where == "key scale"]
    assert ev and ev[0].artifact == "checkpoint-10/scaler.pt" and ev[0].detail == "GradScaler scale = 4 in checkpoint-10"


@pytest.mark.parametrize("adam_steps,skipped", [(5, True), (20, False)])
def test_fp16_optimizer_step_count_behind_global_step(tmp_path, adam_steps, skipped):
    """fp16 weights + an optimizer that stepped 5 times in 20 global steps = skipped (overflowing) updates."""
    d = tmp_path / "checkpoint-20"
    d.mkdir()
    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.AdamW([w], lr=1e-3)
    for _ in range(adam_steps):
        opt.zero_grad()
        (w * 2).sum().backward()
        opt.step()
    save_file({"w": w.detach().half()}, str(d / "model.safetensors"))
    torch.save(opt.state_dict(), d / "optimizer.pt")
    logs = [{"step": s, "loss": 2.0 - 0.01 * s, "learning_rate": 1e-3} for s in range(2, 21, 2)]
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 20, "log_history": logs}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "float16"}))
    a = analyze(tmp_path)
    assert a.run.checkpoint_analysis["optimizer"]["step_max"] == adam_steps
    prec = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    (f,) = prec
    if skipped:
        assert f.severity == "error" and f.root_cause == "fp16_overflow"
        assert "15 of 20 updates were skipped (overflowing steps)" in f.message
        ev = [e for e in f.evidence if e.where == "optimizer state"]
        assert ev[0].artifact == "checkpoint-20/optimizer.pt" and ev[0].step == 20
        assert ev[0].detail == "the optimizer's step count is 5 at global step 20 in checkpoint-20"
    else:
        assert f.severity == "warning"  # float16 weights, no symptom: a caution, not a failure
        assert a.diagnosis.verdict.status == "healthy"


def test_deepspeed_static_loss_scaler_is_not_a_collapse():
    """bf16/fp32 ZeRO saves a static LossScaler with cur_scale 1.0: not an fp16 scale at its minimum."""
    a = analyze(EXAMPLES / "deepspeed" / "hf_trainer_zero2_checkpoint-4")
    ck = a.run.checkpoints[0]
    assert ck.deepspeed["optimizer"]["cur_scale"] == 1.0 and ck.deepspeed["optimizer"]["dynamic_loss_scale"] is False
    assert "PREC001" not in _codes(a)
    assert a.diagnosis.verdict.status == "healthy"


def test_trained_lora_adapter_is_not_gradientless():
    a = analyze(EXAMPLES / "hf_lora_checkpoint")
    lb = a.run.checkpoint_analysis["lora_b_all_zero"]
    assert (lb["n_lora_b"], lb["n_all_zero"]) == (4, 0)
    assert "GRAD001" not in _codes(a) and a.diagnosis.verdict.status == "healthy"


def test_report_checkpoint_grid_from_real_analysis():
    """HTML and Markdown show last_clean = {checkpoint, step} and per-pair unchanged counts."""
    rep = build_report(analyze(SAMPLES / "lr_too_high_nan"))
    doc = html.render(rep)
    section = doc[doc.index('id="checkpoints"'): doc.index('id="config"')]
    rows = re.findall(r"<tr class=\"([^\"]*)\">\s*<td><code>(checkpoint-\d+)</code>", section)
    assert rows == [("lastclean", "checkpoint-20"), ("bad", "checkpoint-40"), ("bad", "checkpoint-60")]
    assert "Last clean checkpoint: <strong" in section and "<code>checkpoint-20</code></strong>" in section
    md = markdown.render(rep)
    assert "<summary>Checkpoints (3; last clean: checkpoint-20)</summary>" in md
    assert "| checkpoint-20 **(last clean)** | 20 |" in md

    rep = build_report(analyze(SAMPLES / "lora_frozen_gradientless"))
    doc = html.render(rep)
    section = doc[doc.index('id="checkpoints"'): doc.index('id="config"')]
    unchanged = re.findall(r"<td><code>([^<]+)</code>.*?</td>\s*<td class=\"num\">[^<]*</td><td class=\"num\">\d+</td>\s*"
                           r"<td class=\"num\">\d+</td><td class=\"num\">\d+</td>\s*<td class=\"num\">(\d*)</td>", section, re.DOTALL)
    assert unchanged == [("checkpoint-20", ""), ("checkpoint-40", "8"), ("checkpoint-60", "8"),
                         ("(run folder, final save)", "8")]

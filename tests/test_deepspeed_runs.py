"""`autopsy run` on real HF Trainer runs under DeepSpeed ZeRO-3 (tests/deepspeed_trainer_run.py: CPU, one rank).

Without ``stage3_gather_16bit_weights_on_model_save`` the Trainer saves DeepSpeed's own checkpoint ("Saving the full
checkpoint instead, use zero_to_fp32.py to recover weights"): the module's parameters are [0]-shaped placeholders by
design (DeepSpeed engine.py; formats.md §5) and the weights are the fp32 partitions in the optimizer state file.
That is no damage: a run whose loss diverges at lr 5 is named lr_too_high, with the checkpoint layout as
information; a checkpoint missing its optimizer partitions still is the empty-tensors failure."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autopsy.pipeline import analyze

SCRIPT = Path(__file__).with_name("deepspeed_trainer_run.py")


@pytest.fixture(scope="module")
def zero3_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero3") / "out"
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--stage", "3", "--lr", "5", "--steps", "40"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "use zero_to_fp32.py to recover weights" in r.stdout + r.stderr
    return out


def test_zero3_checkpoints_are_whole_and_the_divergence_is_named(zero3_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(zero3_run, run)
    dx = analyze(run).diagnosis
    assert (dx.verdict.status, dx.verdict.root_cause) == ("failed", "lr_too_high"), dx.verdict
    assert not any(f.root_cause == "zero3_empty_tensors" for f in dx.findings)
    info = [f for f in dx.findings if f.code == "CKPT001" and f.severity == "info"]
    assert len(info) == 1 and "the weights are in the optimizer partitions" in info[0].title
    assert "zero_to_fp32.py" in info[0].remedies[0] and "checkpoint-10" in info[0].message


def test_zero3_checkpoint_without_its_optimizer_partitions_is_empty(zero3_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(zero3_run, run)
    for f in run.glob("checkpoint-*/global_step*/*optim_states.pt"):
        f.unlink()
    dx = analyze(run).diagnosis
    found = [f for f in dx.findings if f.root_cause == "zero3_empty_tensors"]
    assert len(found) == 1 and found[0].severity == "error"

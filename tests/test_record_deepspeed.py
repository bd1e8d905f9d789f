"""Flight recorder in a real DeepSpeed loop (ZeRO stages 1, 2 and 3; DeepSpeed's CPU accelerator, gloo, one
rank; each run its own process: tests/record_deepspeed.py). ZeRO keeps every gradient out of ``param.grad``:
the recorder reads the rank's gradient fragments (autopsy/record/zero.py). Checked here against DeepSpeed's
own global gradient norm, with a NaN planted in model.layers.2.mlp's gradient at step 4: the record and
`autopsy run` name that layer, "skip" zeroes DeepSpeed's gradients so the engine's step applies none, "stop"
under ZeRO-3 saves the gathered weights (the parameters themselves are empty placeholders there)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from record_plants import all_finite

from autopsy.pipeline import analyze
from autopsy.record.format import read_record

SCRIPT = Path(__file__).with_name("record_deepspeed.py")
STEP, GROUP = 4, "model.layers.2"


def _run(out: Path, stage: int, action: str = "skip", bf16: bool = False) -> dict:
    cmd = [sys.executable, str(SCRIPT), str(out), "--stage", str(stage), "--action", action] + (["--bf16"] if bf16 else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((out / "result.json").read_text())


@pytest.mark.parametrize(("stage", "bf16"), [(1, False), (2, True), (3, False)])
def test_zero_gradients_are_recorded_and_the_nan_layer_named(tmp_path, stage, bf16):
    res = _run(tmp_path, stage, bf16=bf16)
    assert res["optimizer"] == ("DeepSpeedZeroOptimizer_Stage3" if stage == 3 else "DeepSpeedZeroOptimizer")
    rec = read_record(tmp_path / "autopsy-record" / "record.jsonl")
    assert rec.problems == [] and rec.header["grads"].startswith("deepspeed-zero3" if stage == 3 else "deepspeed-zero:")
    assert rec.header["numel"] > 40_000  # ZeRO-3's placeholders are empty: the count comes from ds_numel
    steps = {s["step"]: s for s in rec.steps}
    for k in range(1, STEP):  # the recorder's norm of the fragments is DeepSpeed's own global norm (one rank)
        assert math.isclose(steps[k]["gn"], res["ds_norms"][str(k)], rel_tol=2e-3), (k, steps[k]["gn"], res["ds_norms"])
        assert len(steps[k]["g"]) == len(rec.groups) and all(math.isfinite(v) and v > 0 for v in steps[k]["g"])
    on = rec.onset
    assert on["step"] == STEP and on["what"] == "grad" and on["direction"] == "backward", on
    assert on["group"] == GROUP and on["param"].startswith(f"{GROUP}.mlp") and on["how"] == "backward-order"
    assert on["action"] == "skip" and STEP not in res["taken"] and res["taken"] == [1, 2, 3, 5, 6, 7]
    # the step after the skip was taken with zeroed gradients: DeepSpeed's own norm of that step is 0
    assert res["ds_norms"][str(STEP)] == 0.0 and all(res["ds_norms"][str(k)] > 1 for k in (5, 6, 7))
    assert all_finite(tmp_path / "final" / "model.safetensors")
    # update ratios sampled from the weights this rank holds (ZeRO-3: its slices); under bf16 a norm weight of 1.0
    # does not move by a 1e-3 step (bf16's spacing at 1.0 is 2**-7), so only the layers are required to move
    g = rec.updates[0]["g"]
    assert all(math.isfinite(v) for v in g) and all(g[rec.groups.index(f"model.layers.{i}")] > 0 for i in range(4))
    found = [f for f in analyze(tmp_path).diagnosis.findings if f.code == "REC001"]
    assert len(found) == 1 and found[0].first_step == STEP and GROUP in found[0].message


def test_zero3_stop_saves_the_gathered_weights(tmp_path):
    from safetensors.torch import load_file

    res = _run(tmp_path, 3, action="stop")
    assert res["taken"] == [1, 2, 3]
    rec = read_record(tmp_path / "autopsy-record" / "record.jsonl")
    assert rec.end["status"] == "stopped" and rec.checkpoints[-1]["clean"] is True
    ck = tmp_path / "autopsy-record" / "last-clean" / "model.safetensors"
    weights = load_file(str(ck))
    # whole tensors, not ZeRO-3's empty placeholders, and finite
    assert weights["model.layers.2.mlp.down_proj.weight"].shape == (32, 64) and all_finite(ck)
    assert weights["model.embed_tokens.weight"].shape == (64, 32)


def test_two_ranks_stop_together_when_one_fragment_is_nan(tmp_path):
    """ZeRO-2 on two ranks (two processes, gloo): one NaN element in down_proj's gradient on rank 1 lands in the
    fragment of the rank that owns it, the other rank's fragments stay finite. Both ranks must stop at that step
    (one all-reduce of a flag): a rank stopping alone would leave the other waiting in the next collective. Each
    rank writes its own record and batch; `autopsy run` names the parameter from the owner's record."""
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path), "--stage", "2", "--action", "stop",
                                       "--element-nan", "model.layers.2.mlp.down_proj.weight", "--nan-rank", "1"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    results = [json.loads((tmp_path / name).read_text()) for name in ("result.json", "result.rank1.json")]
    assert [r["taken"] for r in results] == [[1, 2, 3], [1, 2, 3]]
    recs = [read_record(tmp_path / "autopsy-record" / name) for name in ("record.jsonl", "record.rank1.jsonl")]
    assert all(r.end["status"] == "stopped" and r.onset["step"] == STEP for r in recs)
    owner = [r for r in recs if not r.onset.get("other_rank")]
    other = [r for r in recs if r.onset.get("other_rank")]
    assert len(owner) == 1 and len(other) == 1, [r.onset for r in recs]
    assert owner[0].onset["param"] == "model.layers.2.mlp.down_proj.weight" and owner[0].onset["nonfinite_params"] == 1
    assert {s["step"]: s for s in other[0].steps}[STEP]["other_rank"] == 1
    assert (tmp_path / "autopsy-record" / "batch-step0000004.safetensors").exists()
    assert (tmp_path / "autopsy-record" / "batch-step0000004.rank1.safetensors").exists()
    assert all_finite(tmp_path / "autopsy-record" / "last-clean" / "model.safetensors")
    found = [f for f in analyze(tmp_path).diagnosis.findings if f.code == "REC001"]
    assert len(found) == 1 and "model.layers.2.mlp.down_proj.weight" in found[0].title


def test_hf_trainer_with_deepspeed_guard(tmp_path):
    """Guard (passes before and after the ZeRO reading): with the HF Trainer, accelerate runs engine.backward and
    engine.step in one call, and the callback takes the norms when backward ends, while ``param.grad`` still
    holds them; they equal the Trainer's own logged grad_norm, and the planted NaN gradient is named."""
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--hf", "--stage", "2", "--action", "skip"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    hf = json.loads((tmp_path / "result.json").read_text())["hf_norms"]
    rec = read_record(tmp_path / "autopsy-record" / "record.jsonl")
    steps = {s["step"]: s for s in rec.steps}
    for k in range(1, STEP):
        assert math.isclose(steps[k]["gn"], hf[str(k)], rel_tol=2e-3), (k, steps[k]["gn"], hf)
    assert rec.onset["step"] == STEP and rec.onset["group"] == GROUP and rec.onset["direction"] == "backward"
    assert not math.isfinite(hf[str(STEP)])  # DeepSpeed's own norm of that step: its overflow check skipped it

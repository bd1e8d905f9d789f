"""PEFT adapters, DeepSpeed/Lightning fixtures, fp16 limits, and the scan/diff commands."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from autopsy.checkpoints import collect
from autopsy.checkpoints.cli import diff_command, scan_command
from autopsy.discover import discover
from autopsy.ingest.base import RunBuilder


def read_run(path):
    """Only the checkpoint stage (the other readers are tested elsewhere)."""
    root = path if path.is_dir() else path.parent
    builder = RunBuilder(root)
    collect(builder, discover(path))
    return builder.run, None

EXAMPLES = Path(__file__).parent / "fixtures" / "examples"
NAN, INF = float("nan"), float("inf")


def test_peft_lora_b_zero_and_trainable_unchanged(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    base = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1))
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for step in (2, 4):  # never trained: lora_B stays zero, every adapter tensor unchanged
        model.save_pretrained(tmp_path / f"checkpoint-{step}")
    run, _ = read_run(tmp_path)
    a = run.checkpoint_analysis
    assert [c.kind for c in run.checkpoints] == ["peft", "peft"]
    lb = a["lora_b_all_zero"]
    assert (lb["checkpoint"], lb["n_lora_b"], lb["n_all_zero"]) == ("checkpoint-4", 4, 4)
    assert lb["tensors"][0] == "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    un = a["unchanged"]
    assert un["n_trainable_unchanged"] == 8 and un["frozen_by_design"] == [] and un["pairs"][0]["identical"] == 8
    assert a["first_bad"] is None and a["last_clean"]["checkpoint"] == "checkpoint-4"


def test_real_fixtures_deepspeed_lightning_scaler(copy_fixture):
    run, _ = read_run(copy_fixture("examples/deepspeed"))
    a = run.checkpoint_analysis
    z3 = [c for c in run.checkpoints if c.path == "raw_zero3/global_step3"][0]
    assert z3.deepspeed["zero_stage"] == 3 and z3.deepspeed["optimizer"]["zero_stage"] == 3
    assert z3.deepspeed["optimizer"]["cur_scale"] == 1.0 and z3.deepspeed["optimizer"]["loss_scaler"] == "LossScaler"
    # DeepSpeed's own ZeRO-3 save: [0] placeholders by design, the weights in the optimizer file's fp32 partitions
    assert a["zero3_empty"] == [] and a["zero3_partitioned"] == [{"checkpoint": "raw_zero3/global_step3", "step": 3, "n": 4}]
    hf = [c for c in run.checkpoints if c.path == "hf_trainer_zero2_checkpoint-4"][0]
    assert (hf.kind, hf.step, hf.deepspeed["skipped_steps"], hf.deepspeed["global_steps"]) == ("deepspeed", 4, 0, 4)
    assert {"checkpoint": "hf_trainer_zero2_checkpoint-4", "step": 4, "source": "deepspeed", "skipped": 0,
            "global_steps": 4} in a["skipped_steps"]
    # unrelated runs side by side are never compared with each other
    assert all(p["from"].split("/")[0] == p["to"].split("/")[0] for p in a["unchanged"]["pairs"])

    run, _ = read_run(copy_fixture("examples/lightning"))
    ck = run.checkpoints[0]
    assert (ck.kind, ck.step, [t.name for t in ck.files[0].tensors][:2]) == ("lightning", 16, ["net.0.weight", "net.0.bias"])
    assert run.checkpoint_analysis["optimizer"]["names_mapped"] is True

    run, _ = read_run(copy_fixture("examples/misc/gradscaler_scaler.pt"))
    assert run.checkpoint_analysis["scaler"]["scale"] == 32768.0


def test_fp16_limits_and_minimind_half_save(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"a.weight": torch.tensor([40000.0, 1.0]).half(), "b.weight": torch.tensor([1.0, 2.0]).half()},
               out / "full_sft_512.pth")
    save_file({"big": torch.tensor([70000.0, 1.0]), "ok": torch.tensor([60000.0])}, str(tmp_path / "model.safetensors"))
    run, _ = read_run(tmp_path)
    a = run.checkpoint_analysis
    assert [(x["tensor"], x["max_abs"]) for x in a["fp16_near_limit"]] == [("a.weight", 40000.0)]
    assert [(x["tensor"], x["max_abs"]) for x in a["fp16_overflow_on_cast"]] == [("big", 70000.0)]
    assert {c.kind for c in run.checkpoints} == {"minimind", "hf"}  # a root model.safetensors is an HF save


def test_scan_exit_codes_and_json(tmp_path, capsys):
    clean, bad = tmp_path / "clean.safetensors", tmp_path / "bad.safetensors"
    save_file({"w": torch.ones(4, dtype=torch.bfloat16)}, str(clean))
    save_file({"w": torch.tensor([1.0, NAN, INF, 0.0], dtype=torch.bfloat16), "z": torch.zeros(2)}, str(bad))
    assert scan_command([clean]) == 0
    out = tmp_path / "r.json"
    assert scan_command([clean, bad], fmt="json", output=str(out)) == 1
    doc = json.loads(out.read_text())
    f = [x for x in doc["files"] if x["path"].endswith("bad.safetensors")][0]
    assert [(t["name"], t["nan"], t["posinf"], t["all_zero"]) for t in f["tensors"]] == [("w", 1, 1, False), ("z", 0, 0, True)]
    assert doc["summary"]["nonfinite_tensors"] == 1
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 3)
    assert scan_command([tmp_path / "junk.safetensors"]) == 2
    assert scan_command([tmp_path / "missing"]) == 2
    assert "missing: no such file or directory" in capsys.readouterr().err
    assert scan_command([bad]) == 1
    table = capsys.readouterr().out
    assert table.index("│ BF16") < table.index("│ F32")  # the non-finite tensor is listed first


def test_diff_bitwise_nan_is_identical(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    t = torch.tensor([1.0, NAN, 3.0, 4.0])
    save_file({"same_nan": t, "moved": torch.tensor([3.0, 4.0]), "only_a": torch.ones(1)}, str(a))
    save_file({"same_nan": t.clone(), "moved": torch.tensor([3.0, 4.3]), "only_b": torch.ones(1)}, str(b))
    out = tmp_path / "d.json"
    assert diff_command(a, b, fmt="json", output=str(out)) == 0
    d = json.loads(out.read_text())
    assert d["identical"] == ["same_nan"] and d["only_in_a"] == ["only_a"] and d["only_in_b"] == ["only_b"]
    moved = d["changed"][0]
    assert moved["name"] == "moved" and abs(moved["max_abs_delta"] - 0.3) < 1e-6
    assert abs(moved["rel_l2"] - 0.3 / 5.0) < 1e-6
    assert diff_command(a, tmp_path / "nope", fmt="json") == 2

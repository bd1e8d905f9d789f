"""``autopsy preflight`` and ``autopsy known-issues``: exit codes, output formats, error messages.

The founding cases (shared CASES.md 1, 3, 4) are written as the configs those runs had: a TRL CPO/SimPO
config whose prompt budget equals max_length, a LoRA adapter_config with CAUSAL_LM next to a
sequence-classification model config, an SFT config with padding_free and eager attention. Each must
exit 1 naming the defect and the fix; the healthy samples' real configs (written by transformers/TRL in
scripts/make_samples.py) must exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopsy.cli import app

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "sample_logs"
runner = CliRunner()


def _write(tmp: Path, name: str, doc: dict) -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


@pytest.fixture
def case1(tmp_path: Path) -> list[Path]:
    return [_write(tmp_path, "cpo_config.json", {
        "output_dir": "simpo-out", "loss_type": "simpo", "cpo_alpha": 0.0, "max_length": 512,
        "max_prompt_length": 512, "learning_rate": 1e-6, "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 8, "bf16": True})]


@pytest.fixture
def case3(tmp_path: Path) -> list[Path]:
    return [_write(tmp_path, "adapter_config.json", {
        "base_model_name_or_path": "Qwen/Qwen2-0.5B-Instruct", "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 16,
        "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], "modules_to_save": None}),
        _write(tmp_path, "config.json", {"architectures": ["Qwen2ForSequenceClassification"], "model_type": "qwen2",
                                         "num_labels": 1, "torch_dtype": "float16", "vocab_size": 151936})]


@pytest.fixture
def case4(tmp_path: Path) -> list[Path]:
    return [_write(tmp_path, "sft_config.json", {
        "output_dir": "sft-out", "padding_free": True, "per_device_train_batch_size": 8, "learning_rate": 2e-5,
        "max_length": 4096, "model_init_kwargs": {"attn_implementation": "eager", "torch_dtype": "bfloat16"}})]


@pytest.mark.parametrize("case,code,defect,fix", [
    ("case1", "LEN001", "max_prompt_length 512 >= max_length 512", "Set max_prompt_length well below max_length"),
    ("case3", "LORA001", "task_type CAUSAL_LM", "task_type='SEQ_CLS'"),
    ("case4", "PACK001", "attn_implementation is eager", "attn_implementation='flash_attention_2'"),
])
def test_founding_case_configs_exit_1(case: str, code: str, defect: str, fix: str, request: pytest.FixtureRequest):
    paths = request.getfixturevalue(case)
    out = runner.invoke(app, ["preflight", "--no-env", *map(str, paths)])
    assert out.exit_code == 1, out.output
    assert code in out.output and defect in out.output and "fix: " in out.output and fix in out.output


def test_founding_case_json_output(case1: list[Path]):
    out = runner.invoke(app, ["preflight", "--no-env", "--format", "json", str(case1[0])])
    assert out.exit_code == 1
    doc = json.loads(out.output)
    assert doc["status"] == "defects" and [d["code"] for d in doc["defects"]] == ["LEN001"]
    assert doc["defects"][0]["remedies"] and doc["known_issues"] == []


@pytest.mark.parametrize("sample,files", [
    ("healthy_sft", ["training_args.bin", "config.json"]),
    ("healthy_sft", ["checkpoint-60/config.json"]),
    ("lora_frozen_gradientless", ["adapter_config.json"]),
])
def test_healthy_sample_configs_exit_0(sample: str, files: list[str]):
    for env in (["--no-env"], []):
        out = runner.invoke(app, ["preflight", *env, *[str(SAMPLES / sample / f) for f in files]])
        assert out.exit_code == 0, out.output
        assert "preflight: clean" in out.output


def test_known_bug_exposure_from_installed_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A ZeRO-2 + overlap_comm DeepSpeed config on an installed deepspeed in KI-DEEPSPEED-001's range."""
    import autopsy.known_issues.cli as kcli

    monkeypatch.setattr(kcli, "installed_versions", lambda packages=kcli.ENV_PACKAGES: {"deepspeed": "0.14.0"})
    monkeypatch.setattr(kcli, "gpu_name", lambda: None)
    ds = _write(tmp_path, "ds_z2_config.json", {"zero_optimization": {"stage": 2, "overlap_comm": True},
                                                "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"})
    out = runner.invoke(app, ["preflight", str(ds)])
    assert out.exit_code == 1, out.output
    assert "KI-DEEPSPEED-001" in out.output and "deepspeed 0.14.0 is in >=0.12.4" in out.output
    assert "overlap_comm" in out.output and "environment: deepspeed 0.14.0" in out.output
    monkeypatch.setattr(kcli, "installed_versions", lambda packages=kcli.ENV_PACKAGES: {"deepspeed": "0.12.3"})
    assert runner.invoke(app, ["preflight", str(ds)]).exit_code == 0


def test_llamafactory_yaml_follows_its_deepspeed_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import autopsy.known_issues.cli as kcli

    monkeypatch.setattr(kcli, "installed_versions", lambda packages=kcli.ENV_PACKAGES: {"deepspeed": "0.16.4"})
    monkeypatch.setattr(kcli, "gpu_name", lambda: None)
    _write(tmp_path, "ds_z2.json", {"zero_optimization": {"stage": 2, "overlap_comm": True}})
    y = tmp_path / "train.yaml"
    y.write_text("model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\ndeepspeed: ds_z2.json\n"
                 "cutoff_len: 2048\nbf16: true\n")
    out = runner.invoke(app, ["preflight", str(y)])
    assert out.exit_code == 1 and "KI-DEEPSPEED-001" in out.output, out.output


def test_preflight_usage_errors(tmp_path: Path):
    out = runner.invoke(app, ["preflight", str(tmp_path / "nope.json")])
    assert out.exit_code == 2 and "nope.json: no such file or directory" in out.output
    bad = tmp_path / "args.json"
    bad.write_text("{not json")
    out = runner.invoke(app, ["preflight", "--no-env", str(bad)])
    assert out.exit_code == 2 and "args.json" in out.output and "invalid JSON" in out.output
    out = runner.invoke(app, ["preflight", "--no-env", "--format", "xml", str(bad)])
    assert out.exit_code == 2 and "unknown format" in out.output


def test_known_issues_list_filter_and_json():
    out = runner.invoke(app, ["known-issues"])
    assert out.exit_code == 0 and "KI-DEEPSPEED-001" in out.output and "entries" in out.output
    out = runner.invoke(app, ["known-issues", "--package", "verl"])
    assert out.exit_code == 0 and "KI-VERL-001" in out.output and "KI-DEEPSPEED-001" not in out.output
    doc = json.loads(runner.invoke(app, ["known-issues", "--format", "json", "--package", "torch"]).output)
    e = next(x for x in doc["entries"] if x["id"] == "KI-TORCH-001")
    assert e["affected"][0]["ranges"] == "==2.5.0" and e["references"] and e["fixed_in"] and e["signatures"]["events"]
    bad = runner.invoke(app, ["known-issues", "--package", "nosuchpkg"])
    assert bad.exit_code == 2 and "no entry for package" in bad.output


def test_known_issues_match_a_run(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text("[rank1]: RuntimeError: Detected a disagreement on list length between rank0 and rank1: \n")
    out = runner.invoke(app, ["known-issues", "--match", str(log)])
    assert out.exit_code == 1 and "CANDIDATE KI-DEEPSPEED-002" in out.output and "check: installed deepspeed" in out.output
    doc = json.loads(runner.invoke(app, ["known-issues", "--match", str(log), "--format", "json"]).output)
    assert doc["matches"][0]["id"] == "KI-DEEPSPEED-002" and doc["matches"][0]["level"] == "candidate"
    clean = runner.invoke(app, ["known-issues", "--match", str(SAMPLES / "healthy_sft")])
    assert clean.exit_code == 0 and "no known issue matches" in clean.output
    missing = runner.invoke(app, ["known-issues", "--match", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output

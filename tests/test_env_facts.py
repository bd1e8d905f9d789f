"""Environment facts from real pasted blocks (tests/fixtures/env, sources in SOURCES.md), through
the text-log reader as a user would hand them in, with the exact facts expected (two-sided)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopsy.ingest.env_facts import EnvScanner, key_for, scan_text
from autopsy.pipeline import read_run

ENV = Path(__file__).parent / "fixtures" / "env"


def facts_of(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    scan_text(text, lambda k, v, n, o: out.setdefault(k, []).append((v, n)))
    return out


EXPECTED = {
    "transformers_env_diffusers_7403.txt": {
        "version.transformers": [("4.38.2", 3)], "platform": [("Linux-6.5.0-26-generic-x86_64-with-glibc2.35", 4)],
        "python.version": [("3.10.12", 5)], "version.huggingface_hub": [("0.21.4", 6)],
        "version.safetensors": [("0.4.2", 7)], "version.accelerate": [("0.28.0", 8)],
        "version.torch": [("2.2.1+cu121", 10)], "cuda.version": [("12.1", 10)], "version.flax": [("0.8.2", 12)],
        "version.jax": [("0.4.25", 13)], "version.jaxlib": [("0.4.25", 14)]},
    "collect_env_vllm_9060.txt": {
        "version.torch": [("2.4.0+cu121", 1)], "cuda.version": [("12.1", 1), ("12.1.105", 15)],
        "python.version": [("3.10.14", 12)], "platform": [("Linux-5.15.0-113-generic-x86_64-with-glibc2.35", 13)],
        "gpu.name": [("NVIDIA RTX A5000", 18)], "gpu.count": [(4, 18)], "nvidia.driver_version": [("535.183.01", 23)]},
    "check_env_sglang_21460.txt": {
        "python.version": [("3.12.3", 2)], "gpu.name": [("NVIDIA H800 80GB", 4)], "gpu.count": [(8, 4)],
        "nvidia.driver_version": [("580.105.08", 8)], "version.torch": [("2.9.1+cu129", 9)],
        "cuda.version": [("12.9", 9)], "version.sglang": [("0.5.9", 10)], "version.flashinfer_python": [("0.6.3", 12)],
        "version.triton": [("3.5.1", 15)], "version.transformers": [("5.3.0", 16)], "version.torchao": [("0.9.0", 17)],
        "version.numpy": [("1.26.4", 18)]},
    "ds_report_deepspeed_6762.txt": {
        "version.torch": [("2.3.0+cu121", 3)], "cuda.version": [("12.1", 3), ("12.1", 6)],
        "version.deepspeed": [("0.15.5+46d7d0d1", 5)], "cuda.nvcc_version": [("12.0", 8)]},
    "nvidia_smi_nccl_1967.txt": {
        "nvidia.driver_version": [("560.35.03", 2)], "cuda.driver_version": [("12.9", 2)],
        "gpu.name": [("NVIDIA H100 80GB HBM3", 8)], "gpu.count": [(2, 8)]},
    "nvidia_smi_header_deepspeed_2055.txt": {
        "nvidia.driver_version": [("470.129.06", 3)], "cuda.driver_version": [("11.4", 3)],
        "version.torch": [("1.7.1+cu110", 5)], "cuda.version": [("11.0", 5)], "version.deepspeed": [("0.6.5", 5)]},
    "pip_list_deepspeed_4614.txt": {
        "version.sentencepiece": [("0.1.99", 3)], "version.tensorboard": [("2.15.0", 8)],
        "version.tokenizers": [("0.14.1", 9)], "version.torch": [("2.1.0+cu121", 10)], "cuda.version": [("12.1", 10)],
        "version.torchaudio": [("2.1.0+cu121", 12)], "version.torchvision": [("0.16.0+cu121", 13)],
        "version.transformers": [("4.34.1", 15)], "version.triton": [("2.1.0", 16)]},
    "conda_list_dope_268.txt": {"cuda.version": [("10.2.89", 5)]},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_blocks(name: str) -> None:
    assert facts_of((ENV / name).read_text()) == EXPECTED[name]


def test_conda_list_with_header() -> None:
    header = "# Name                    Version                   Build  Channel\n"
    text = (ENV / "conda_list_dope_268.txt").read_text().replace("```\n", "```\n" + header)
    text += "pytorch                   2.1.0           py3.10_cuda12.1_cudnn8.9.2_0    pytorch\n"
    got = facts_of(text)
    assert got["version.torch"] == [("2.1.0", 9)]
    assert got["cuda.version"] == [("10.2.89", 6), ("12.1", 9)] and got["cudnn.version"] == [("8.9.2", 9)]
    assert "version.blas" not in got  # listings record the ML stack only


@pytest.mark.parametrize("text", [
    "loss: 0.5321", "eval loss ....... 0.53", "step   1.5", "{'loss': 1.25, 'learning_rate': 0.0002, 'epoch': 0.5}",
    "grad_norm = 3.2", "| epoch 001 | loss 4.123 | lr 0.0005", "iter 100: loss 2.5, time 30.2ms",
    "GPU: 45%", "- Using GPU in script?: <fill in>",
])
def test_metric_lines_are_not_versions(text: str) -> None:
    assert facts_of(text) == {}


def test_torch_prints_and_repl() -> None:
    text = (">>> import torch\n>>> torch.__version__\n'2.5.1+cu124'\n>>> torch.version.cuda\n'12.4'\n"
            "print(torch.backends.cudnn.version())\n90100\n"
            "transformers.__version__: 4.46.3\n")
    got = facts_of(text)
    assert got["version.torch"] == [("2.5.1+cu124", 3)]
    assert got["version.transformers"] == [("4.46.3", 8)]
    assert got["cuda.version"] == [("12.4", 3), ("12.4", 5)]  # from +cu124, and torch.version.cuda
    assert got["cudnn.version"] == [("90100", 7)]


def test_key_convention() -> None:
    assert [key_for(n) for n in ("flash-attn", "ms-swift", "PyTorch", "Flash_Attn", "vllm", "nvidia-cudnn-cu12",
                                 "Python", "deepspeed info")] == [
        "version.flash_attn", "version.ms_swift", "version.torch", "version.flash_attn", "version.vllm",
        "cudnn.version", "python.version", "version.deepspeed"]


def test_pasted_issue_body_through_the_text_reader(tmp_path: Path) -> None:
    """A whole issue body pasted into a .txt: env blocks and a training log, facts with their lines."""
    body = ("### System Info\n\n" + (ENV / "transformers_env_diffusers_7403.txt").read_text()
            + "\n```\n" + (ENV / "nvidia_smi_nccl_1967.txt").read_text() + "```\n\npip list:\n"
            + "Package                   Version\n------------------------- ------------\n"
            + (ENV / "pip_list_deepspeed_4614.txt").read_text()
            + "\n{'loss': 2.3, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': 0.1}\n")
    p = tmp_path / "issue.txt"
    p.write_text(body)
    run, _ = read_run(p, with_checkpoints=False)
    c = run.config
    tf = c.facts("version.transformers")
    assert [(f.value, f.where) for f in tf] == [("4.38.2", "line 5"), ("4.34.1", "line 55")]
    assert (c.get("gpu.name"), c.get("gpu.count")) == ("NVIDIA H100 80GB HBM3", 2)
    assert c.fact("gpu.count").where == "line 28" and c.get("cuda.driver_version") == "12.9"
    assert c.get("version.torch") == "2.2.1+cu121" and c.get("python.version") == "3.10.12"
    assert "version.six" not in c and "version.setuptools" not in c


def test_requirements_in_run_dir(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "# pinned\ntorch==2.4.0\nflash-attn==2.6.3\ntransformers>=4.40\nms-swift[llm]==3.1.0\nrequests==2.31.0\n")
    run, disc = read_run(tmp_path, with_checkpoints=False)
    assert [f.kind for f in disc.files] == ["requirements"]
    c = run.config
    assert (c.get("version.torch"), c.get("version.flash_attn"), c.get("version.ms_swift")) == ("2.4.0", "2.6.3", "3.1.0")
    assert "version.transformers" not in c  # a lower bound is not the installed version
    assert c.fact("version.flash_attn").where == "line 3"


def test_gpu_table_count_needs_the_whole_table() -> None:
    got: list = []
    sc = EnvScanner(lambda k, v, n, o: got.append((k, v)))
    for i, line in enumerate((ENV / "nvidia_smi_nccl_1967.txt").read_text().splitlines(), 1):
        sc.line(i, line)
    assert ("gpu.count", 2) not in got  # emitted when the table is over
    sc.finish()
    assert ("gpu.count", 2) in got


def test_tensorboard_text_summary(tmp_path: Path) -> None:
    """An environment report logged with SummaryWriter.add_text becomes facts of the event file."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    w.add_text("env", (ENV / "ds_report_deepspeed_6762.txt").read_text())
    w.add_scalar("train/loss", 1.0, 1)
    w.close()
    run, _ = read_run(tmp_path, with_checkpoints=False)
    f = run.config.fact("version.deepspeed")
    assert (f.value, f.where) == ("0.15.5+46d7d0d1", "env/text_summary line 5")
    assert f.source.startswith("events.out.tfevents")
    assert run.config.get("cuda.nvcc_version") == "12.0"

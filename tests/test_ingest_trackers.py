"""MLflow and W&B runs written by the real libraries (mlflow, wandb offline) in tmp dirs, plus
truncated and garbled variants. The writers run in a subprocess: wandb starts its own service
process and mlflow keeps global state, neither of which should leak into the test process."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autopsy.pipeline import read_run

pytest.importorskip("mlflow")

#: the HF Trainer's own arguments, as MLflowCallback / WandbCallback log them
HF_PARAMS = {"learning_rate": 0.001, "fp16": True, "gradient_accumulation_steps": 4,
             "per_device_train_batch_size": 8, "transformers_version": "4.46.0", "model_type": "llama"}


def _python(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _series(run, metric: str) -> list[tuple[int, float]]:
    s = run.scalars[run.scalars.metric == metric].sort_values("step")
    return list(zip(s.step.tolist(), s.value.tolist()))


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    return len(got) == len(want) and all(
        gs == ws and (gv == wv or (math.isnan(gv) and math.isnan(wv))) for (gs, gv), (ws, wv) in zip(got, want))


LOSS = [(0, 1.0), (1, 0.5), (2, 0.25), (3, math.nan), (4, 0.125)]
GRAD = [(0, 0.5), (1, 0.5), (2, 0.5), (3, 0.5), (4, math.inf)]

MLFLOW_WRITER = """
    import json, math, mlflow
    mlflow.set_tracking_uri({uri!r})
    mlflow.set_experiment("exp")
    with mlflow.start_run(run_name="r1"):
        mlflow.log_params({params})
        for step, value in {loss!r}:
            mlflow.log_metric("loss", float(value), step=step)
        for step, value in {grad!r}:
            mlflow.log_metric("train/grad_norm", float(value), step=step)
        mlflow.set_tag("note", "tiny run")
        {end}
"""


def _mlflow(uri: str, end: str = "pass") -> None:
    _python(MLFLOW_WRITER.format(uri=uri, params=HF_PARAMS, loss=[(s, repr(v)) for s, v in LOSS],
                                 grad=[(s, repr(v)) for s, v in GRAD], end=end),
            env={"MLFLOW_ALLOW_FILE_STORE": "true"})


@pytest.fixture(scope="module")
def mlruns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mlflow") / "mlruns"
    _mlflow(root.as_uri(), end='mlflow.end_run(status="FAILED")')
    return root


def _run_dir(mlruns: Path) -> Path:
    (meta,) = [p for p in mlruns.glob("*/*/meta.yaml")]
    return meta.parent


def test_mlflow_file_store(mlruns: Path) -> None:
    run, disc = read_run(mlruns, with_checkpoints=False)
    assert _same(_series(run, "loss"), LOSS)
    assert _same(_series(run, "grad_norm"), GRAD)
    kinds = {f.kind for f in disc.files}
    assert {"mlflow_run", "mlflow_part"} <= kinds and "text_log" not in kinds
    c = run.config
    assert (c.get("learning_rate"), c.get("fp16"), c.get("gradient_accumulation_steps")) == (0.001, True, 4)
    assert c.get("version.transformers") == "4.46.0" and c.get("model_type") == "llama"
    assert c.fact("learning_rate").source.endswith("params/learning_rate")
    assert c.get("tracker.status") == "FAILED"
    loss = run.scalars[run.scalars.metric == "loss"]
    assert set(loss.source) == {run.config.fact("tracker.run_id").source.replace("meta.yaml", "metrics/loss")}
    assert sorted(loss.line.tolist()) == [1, 2, 3, 4, 5]
    assert not run.problems


def test_mlflow_metric_file_format(mlruns: Path) -> None:
    """The writer's own line format (timestamp value step), non-finite values as Python prints them."""
    lines = (_run_dir(mlruns) / "metrics" / "loss").read_text().splitlines()
    assert [ln.split()[1:] for ln in lines] == [["1.0", "0"], ["0.5", "1"], ["0.25", "2"], ["nan", "3"], ["0.125", "4"]]


def test_mlflow_garbled(mlruns: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "mlruns"
    shutil.copytree(mlruns, root)
    rd = _run_dir(root)
    with open(rd / "metrics" / "loss", "a") as fh:
        fh.write("garbage here\n1795429664476 0.1\n")  # junk, then a line cut before its step
    (rd / "metrics" / "train" / "grad_norm").write_bytes(b"\x00\x01binary\x00")
    meta = (rd / "meta.yaml").read_text()
    (rd / "meta.yaml").write_text(meta[: len(meta) // 2] + "\n  - [unclosed")
    run, _ = read_run(root, with_checkpoints=False)
    assert _same(_series(run, "loss"), LOSS)  # the good points survive
    probs = {a.path.split("/")[-1]: a for a in run.problems}
    assert probs["loss"].status == "partial" and "2 line(s)" in probs["loss"].problem and "line 6, 7" in probs["loss"].problem
    assert "binary data" in probs["grad_norm"].problem
    assert "meta.yaml not readable" in probs["meta.yaml"].problem
    assert run.config.get("learning_rate") == 0.001  # params still read


def test_mlflow_old_store_without_steps(tmp_path: Path) -> None:
    rd = tmp_path / "mlruns" / "0" / "abc"
    (rd / "metrics").mkdir(parents=True)
    (rd / "meta.yaml").write_text("run_id: abc\nstatus: 3\n")
    (rd / "metrics" / "loss").write_text("1 2.0\n2 1.5\n3 nan\n")
    run, _ = read_run(tmp_path / "mlruns", with_checkpoints=False)
    assert _same(_series(run, "loss"), [(0, 2.0), (1, 1.5), (2, math.nan)])
    assert "steps inferred" in run.problems[0].problem


def test_mlflow_sqlite_store(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    db = tmp_path / "mlflow.db"
    _mlflow(f"sqlite:///{db}")
    run, disc = read_run(tmp_path, with_checkpoints=False)
    assert [f.kind for f in disc.files if f.path == db] == ["mlflow_db"]
    assert _same(_series(run, "loss"), LOSS)  # NaN stored as value 0 + is_nan
    assert _same(_series(run, "grad_norm"), GRAD)  # inf stored as 1.797e308
    assert run.config.get("learning_rate") == 0.001 and run.config.get("tracker.status") == "FINISHED"
    # a cut-off copy: a clear message, no crash
    cut = tmp_path / "cut" / "mlflow.db"
    cut.parent.mkdir()
    cut.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    run2, _ = read_run(cut.parent, with_checkpoints=False)
    (p,) = [a for a in run2.problems if a.path.endswith("mlflow.db")]
    assert "SQLite" in p.problem


# -- W&B ---------------------------------------------------------------------------------------

WANDB_WRITER = """
    import math, wandb
    run = wandb.init(project="p", config={params!r})
    for i, (loss, grad) in enumerate({rows!r}):
        run.log({{"train/loss": float(loss), "train/grad_norm": float(grad), "train/global_step": 10 * i}})
    print("{{'loss': 0.125, 'grad_norm': 'inf', 'epoch': 1.0}}")
    run.finish()
"""
WANDB_ROWS = [(repr(a), repr(b)) for (_, a), (_, b) in zip(LOSS, GRAD)]
WANDB_LOSS = [(10 * s, v) for s, v in LOSS]


@pytest.fixture(scope="module")
def wandb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("wandb")
    d = tmp_path_factory.mktemp("wb")
    code = WANDB_WRITER.format(params=HF_PARAMS, rows=WANDB_ROWS)
    _python(code, env={"WANDB_MODE": "offline", "WANDB_DIR": str(d), "WANDB_SILENT": "true",
                       "WANDB_DISABLE_CODE": "true"}, cwd=d)
    return d / "wandb"


def _wandb_run(wandb_dir: Path) -> Path:
    (rd,) = [p for p in wandb_dir.iterdir() if p.name.startswith("offline-run-")]
    return rd


def rd_id(wandb_dir: Path) -> str:
    return _wandb_run(wandb_dir).name.rsplit("-", 1)[1]


def test_wandb_offline_run(wandb_dir: Path) -> None:
    run, disc = read_run(wandb_dir, with_checkpoints=False)
    assert _same(_series(run, "loss"), WANDB_LOSS)  # steps are HF's train/global_step, not wandb's _step
    assert _same(_series(run, "grad_norm"), [(10 * s, v) for s, v in GRAD])
    kinds = {f.path.name: f.kind for f in disc.files}
    assert kinds["output.log"] == "text_log" and any(k == "wandb_history" for k in kinds.values())
    assert all(k == "ignored" for n, k in kinds.items() if n.startswith("debug"))
    assert any(p.name == "latest-run" for p, _ in disc.skipped)
    c = run.config
    assert (c.get("learning_rate"), c.get("fp16")) == (0.001, True)
    import transformers

    versions = {(f.value, f.source.split("/")[-1]) for f in c.facts("version.transformers")}
    assert versions == {("4.46.0", f"run-{rd_id(wandb_dir)}.wandb"), (transformers.__version__, "requirements.txt")}
    assert c.get("python.version") == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert c.get("tracker.exit_code") == 0
    assert c.fact("learning_rate").source.endswith(".wandb")
    hist = [a for a in run.artifacts if a.kind == "wandb_history"]
    assert hist and hist[0].status == "read"


def test_wandb_without_the_extra(wandb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    rd = tmp_path / "wandb" / _wandb_run(wandb_dir).name
    shutil.copytree(_wandb_run(wandb_dir), rd)
    (rd / "files" / "config.yaml").write_text(
        "_wandb:\n  value:\n    cli_version: 0.17.0\nlearning_rate:\n  desc: null\n  value: 0.002\n"
        "bf16:\n  value: true\n")
    (rd / "files" / "wandb-summary.json").write_text(
        '{"train/loss": NaN, "train/global_step": 40, "_step": 4, "_runtime": 1.0}')
    meta = Path(__file__).parent / "fixtures" / "wandb" / "wandb-metadata.json"
    shutil.copy(meta, rd / "files" / "wandb-metadata.json")
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    monkeypatch.setitem(sys.modules, "wandb.proto", None)
    run, _ = read_run(tmp_path / "wandb", with_checkpoints=False)
    (h,) = [a for a in run.artifacts if a.kind == "wandb_history"]
    assert h.status == "unreadable" and "install autopsy-ml[wandb]" in h.problem
    c = run.config
    assert (c.get("learning_rate"), c.get("bf16")) == (0.002, True)
    assert (c.get("gpu.name"), c.get("gpu.count"), c.get("cuda.driver_version")) == ("NVIDIA L4", 1, "12.4")
    assert c.get("python.version") == "3.12.12"
    assert _same(_series(run, "loss"), [(40, math.nan)])  # the summary's last value, NaN kept


def _corrupt(src: Path, dst: Path, how: str) -> None:
    data = bytearray(src.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0xFF
    elif how == "cut":
        data = data[: int(len(data) * 0.7)]
    elif how == "header":
        data[:4] = b"XXXX"
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize("how, status, text", [
    ("flip", "partial", "damaged record"),
    ("cut", "partial", "file ends inside a record"),
    ("header", "unreadable", "not a W&B run log"),
])
def test_wandb_garbled_history(wandb_dir: Path, tmp_path: Path, how: str, status: str, text: str) -> None:
    (wb,) = list(_wandb_run(wandb_dir).glob("*.wandb"))
    rd = tmp_path / "wandb" / "run-20240101_000000-abc123"
    rd.mkdir(parents=True)
    _corrupt(wb, rd / "run-abc123.wandb", how)
    run, _ = read_run(tmp_path / "wandb", with_checkpoints=False)
    (h,) = [a for a in run.artifacts if a.kind == "wandb_history"]
    assert h.status == status and text in h.problem
    if how == "cut":  # the rows before the cut are kept
        got = _series(run, "loss")
        assert 0 < len(got) < len(WANDB_LOSS) and _same(got, WANDB_LOSS[: len(got)])


def test_wandb_framing_resyncs_after_damage() -> None:
    """A damaged record costs the rest of its 32 KiB block only: later blocks are read."""
    import struct
    import zlib

    from autopsy.ingest.wandb_run import BLOCK, FULL, HEADER, Framing

    def rec(payload: bytes) -> bytes:
        crc = zlib.crc32(payload, zlib.crc32(bytes([FULL]))) & 0xFFFFFFFF
        return struct.pack("<IHB", crc, len(payload), FULL) + payload

    first = HEADER + rec(b"a" * 10) + rec(b"b" * 10)
    bad = bytearray(first)
    bad[len(HEADER) + 7] ^= 1  # the first record's payload
    data = bytes(bad) + b"\x00" * (BLOCK - len(bad)) + rec(b"c" * 10)
    f = Framing(data)
    assert list(f.records()) == [b"c" * 10] and f.bad == [f"byte {len(HEADER)}"]


def test_json_metadata_fixture_is_wandb_shape() -> None:
    d = json.loads((Path(__file__).parent / "fixtures" / "wandb" / "wandb-metadata.json").read_text())
    assert {"gpu_nvidia", "cudaVersion", "python"} <= set(d)


def test_mlflow_several_runs_say_so(mlruns: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "mlruns"
    shutil.copytree(mlruns, root)
    rd = _run_dir(root)
    twin = rd.parent / "0123456789abcdef"
    shutil.copytree(rd, twin)
    (twin / "meta.yaml").write_text((twin / "meta.yaml").read_text().replace(rd.name, twin.name))
    run, _ = read_run(root, with_checkpoints=False)
    assert any("2 MLflow runs under the path" in (a.problem or "") for a in run.problems)

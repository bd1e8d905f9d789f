"""Property tests: random bytes and random mutations of real files give only documented outcomes.

For every reader in ``autopsy.ingest.readers()`` and every checkpoint format: the reader never
raises; the artifact ends ``read``/``partial``/``unreadable``/``ignored``; a partial/unreadable
one has a problem message. Seeds are real artifacts from the real writers (make_corpus.py).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_corpus import safetensors_bytes, tfevents_bytes, torch_legacy_bytes, torch_zip_bytes, write_good_state

from autopsy.checkpoints import scan_file
from autopsy.discover import Found
from autopsy.ingest import readers
from autopsy.ingest.base import RunBuilder

STATUSES = {"read", "partial", "unreadable", "ignored"}
#: CI runs a fixed set of examples (derandomized) so a build does not fail on a draw; to hunt for new failures
#: run ``AUTOPSY_FUZZ_EXAMPLES=2000 AUTOPSY_FUZZ_RANDOM=1 pytest tests/test_robustness_properties.py`` and pin
#: what it finds as a plain test (test_ingest_arrival's cut gzip header came from such a run)
FUZZ = settings(max_examples=int(os.environ.get("AUTOPSY_FUZZ_EXAMPLES", "25")), deadline=None,
                derandomize=not os.environ.get("AUTOPSY_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.function_scoped_fixture])

#: file name per reader kind (discover classifies by name)
NAMES = {
    "trainer_state": "trainer_state.json", "results_json": "all_results.json", "swift_jsonl": "logging.jsonl",
    "llamafactory_jsonl": "trainer_log.jsonl", "jsonl": "metrics.jsonl", "lightning_csv": "metrics.csv",
    "hparams_yaml": "hparams.yaml", "adapter_config": "adapter_config.json", "model_config": "config.json",
    "args_json": "args.json", "args_yaml": "training_args.yaml", "training_args_bin": "training_args.bin",
    "weights_index": "model.safetensors.index.json", "json_config": "ds_config.json", "yaml_config": "train.yaml",
    "text_log": "train.log", "tfevents": "events.out.tfevents.1.host",
    "mlflow_run": "meta.yaml", "mlflow_part": "loss", "mlflow_db": "mlflow.db", "wandb_history": "run-abc123.wandb",
    "wandb_config": "config.yaml", "wandb_summary": "wandb-summary.json", "wandb_metadata": "wandb-metadata.json",
    "requirements": "requirements.txt",
    "metrics_csv": "results.csv",
    "archive": "logs.gz",
    "autopsy_record": "autopsy-record/record.jsonl",
    "elastic_error": "logs/attempt_0/3/error.json",
    "raytune_result": "result.json", "raytune_params": "params.json", "raytune_progress": "progress.csv",
}


def _tracker_seeds() -> dict[str, bytes]:
    """Tracker artifacts in their writers' formats (whole runs written by mlflow/wandb are in
    test_ingest_trackers.py; here one file per reader kind, built fast)."""
    import sqlite3
    import struct
    import zlib

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "mlflow.db"
        con = sqlite3.connect(db)
        con.executescript(
            "CREATE TABLE runs (run_uuid TEXT, name TEXT, status TEXT, lifecycle_stage TEXT, start_time INT);"
            "CREATE TABLE metrics (key TEXT, value REAL, timestamp INT, run_uuid TEXT, step INT, is_nan INT);"
            "CREATE TABLE params (key TEXT, value TEXT, run_uuid TEXT);"
            "INSERT INTO runs VALUES ('r1', 'run', 'FAILED', 'active', 1);"
            "INSERT INTO metrics VALUES ('loss', 0, 1, 'r1', 3, 1), ('loss', 1.5, 1, 'r1', 1, 0);"
            "INSERT INTO params VALUES ('learning_rate', '0.001', 'r1');")
        con.commit()
        con.close()
        db_bytes = db.read_bytes()
    wb = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
    try:
        from wandb.proto import wandb_internal_pb2 as pb

        for i in range(5):
            rec = pb.Record()
            for k, v in (("train/loss", "NaN" if i == 3 else str(1 / (i + 1))), ("_step", str(i))):
                item = rec.history.item.add()
                item.nested_key.append(k)
                item.value_json = v
            payload = rec.SerializeToString()
            crc = zlib.crc32(payload, zlib.crc32(b"\x01")) & 0xFFFFFFFF
            wb += struct.pack("<IHB", crc, len(payload), 1) + payload
    except ImportError:
        wb += b"\x00" * 16
    return {
        "mlflow_run": b"run_id: abc\nstatus: 4\nlifecycle_stage: active\nrun_name: r1\n",
        "mlflow_part": b"1717000000000 1.5 0\n1717000000001 nan 1\n", "mlflow_db": db_bytes, "wandb_history": wb,
        "wandb_config": b"_wandb:\n  value:\n    cli_version: 0.17.0\nlearning_rate:\n  desc: null\n  value: 0.001\n",
        "wandb_summary": b'{"train/loss": NaN, "_step": 4, "train/global_step": 40}',
        "wandb_metadata": b'{"python": "CPython 3.10.12", "gpu": "NVIDIA A100", "gpu_count": 8, "cudaVersion": "12.2"}',
        "requirements": b"torch==2.4.0\nflash-attn==2.6.3\ntransformers>=4.40\n",
    }


def _seeds() -> dict[str, bytes]:
    """One real artifact per reader kind."""
    import torch

    with tempfile.TemporaryDirectory() as d:
        write_good_state(Path(d))
        state = (Path(d) / "trainer_state.json").read_bytes()
        tb = tfevents_bytes(Path(d))

        class _Args:  # pickled like TrainingArguments: a class instance with attributes
            pass

    args = _Args()
    args.__dict__.update({"learning_rate": 1e-4, "fp16": True})
    jsonl = b"\n".join(json.dumps({"loss": 1.0 / i, "learning_rate": 1e-4, "global_step/max_steps": f"{i}/9",
                                   "current_steps": i, "step": i}).encode() for i in range(1, 10))
    return {
        "trainer_state": state, "results_json": b'{"train_loss": 1.2, "epoch": 1.0}',
        "swift_jsonl": jsonl, "llamafactory_jsonl": jsonl, "jsonl": jsonl,
        "lightning_csv": b"epoch,step,train_loss,lr\n" + b"".join(b"0,%d,%f,0.001\n" % (i, 1 / (i + 1)) for i in range(20)),
        "archive": __import__("gzip").compress(b"".join(b"{'loss': %f, 'epoch': 0.1}\n" % (1 / i) for i in range(1, 20)), mtime=0),
        "metrics_csv": b"  epoch,  train/box_loss,  val/box_loss,  lr/pg0\n" + b"".join(
            b"  %d,  %f,  %f,  0.001\n" % (i, 1 / (i + 1), 1 / (i + 2)) for i in range(1, 20)),
        "hparams_yaml": b"lr: 0.001\nprecision: 16-mixed\nmodel:\n  hidden: 8\n",
        "adapter_config": b'{"task_type": "CAUSAL_LM", "r": 8, "target_modules": ["q_proj"]}',
        "model_config": b'{"model_type": "llama", "torch_dtype": "float16", "vocab_size": 32000}',
        "args_json": b'{"learning_rate": 1e-4, "bf16": true, "max_length": 2048}',
        "args_yaml": b"learning_rate: 1.0e-4\nfp16: true\ncutoff_len: 1024\n",
        "training_args_bin": torch_zip_bytes({"learning_rate": 1e-4, "fp16": True, "t": torch.ones(1)}),
        "weights_index": b'{"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}',
        "json_config": b'{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true, "initial_scale_power": 16}}',
        "yaml_config": b"compute_environment: LOCAL_MACHINE\nmixed_precision: fp16\n",
        "text_log": b"\x1b[32m{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.1}\x1b[0m\n"
                    b"\r 10%|#         | 10/100 [00:01<00:09]\nTraceback (most recent call last):\n"
                    b'  File "t.py", line 1, in <module>\nRuntimeError: CUDA out of memory.\n',
        "tfevents": tb,
        **_tracker_seeds(),
        "autopsy_record": _flight_record(),
        "elastic_error": _elastic_error(),
        **_raytune_seeds(),
    }


def _elastic_error() -> bytes:
    """The error.json torchrun wrote for a failing worker in the real --log-dir run committed as a fixture."""
    from conftest import FIXTURES

    return next((FIXTURES / "torchrun_logdir").rglob("error.json")).read_bytes()


def _flight_record() -> bytes:
    """A real flight record (autopsy.record.Recorder) of a tiny model whose loss goes NaN at step 2."""
    import torch

    from autopsy.record import Recorder

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    with tempfile.TemporaryDirectory() as d:
        rec = Recorder(d, model=net, on_nonfinite="skip", update_every=1)
        for step in range(1, 4):
            x = torch.randn(2, 4)
            if step == 2:
                x[0, 0] = float("nan")
            loss = net(x).mean()
            loss.backward()
            rec.step(loss=loss, batch={"input_ids": torch.ones(2, 4, dtype=torch.long), "x": x})
            net.zero_grad()
        rec.close()
        return rec.path.read_bytes()


def _raytune_seeds() -> dict[str, bytes]:
    """The diverging trial of the real Ray Tune fixture (its last lines hold the inf/NaN records)."""
    from conftest import FIXTURES

    trial = next(p for p in (FIXTURES / "raytune_sweep").iterdir() if p.is_dir() and "lr=8.0000" in p.name)
    result = (trial / "result.json").read_bytes().splitlines(keepends=True)
    progress = (trial / "progress.csv").read_bytes().splitlines(keepends=True)
    return {"raytune_result": b"".join(result[:3] + result[-3:]), "raytune_params": (trial / "params.json").read_bytes(),
            "raytune_progress": b"".join(progress[:4] + progress[-3:])}


SEEDS = _seeds()
CKPT_SEEDS = {"model.safetensors": safetensors_bytes(),
              "pytorch_model.bin": torch_zip_bytes({"w": __import__("torch").ones(4, 4)}),
              "legacy.pt": torch_legacy_bytes({"w": __import__("torch").zeros(3)})}


def _check_reader(kind: str, data: bytes, tmp: Path) -> None:
    run = tmp / "run"
    run.mkdir(parents=True, exist_ok=True)
    p = run / NAMES[kind]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    (run / "model-00001-of-00001.safetensors").write_bytes(CKPT_SEEDS["model.safetensors"])
    b = RunBuilder(run)
    readers()[kind](Found(p, kind, len(data)), b)  # must not raise
    r = b.finish()
    for a in r.artifacts:
        assert a.status in STATUSES
        if a.status in ("partial", "unreadable"):
            assert a.problem
    assert r.scalars["step"].dtype.kind == "i" and r.scalars["value"].dtype.kind == "f"


def _check_scan(name: str, data: bytes, tmp: Path) -> None:
    p = tmp / name
    p.write_bytes(data)
    s = scan_file(p)
    assert s.status in STATUSES
    if s.status != "read":
        assert s.problems
    for t in s.tensors:
        assert t.nan + t.posinf + t.neginf + t.zeros <= t.numel


def _mutate(data: bytes, ops: list[tuple[int, int, int]]) -> bytes:
    """Apply (op, position, value) edits: flip a byte, truncate, insert junk, duplicate a slice."""
    b = bytearray(data)
    for op, pos, val in ops:
        if not b:
            b = bytearray([val])
        i = pos % len(b)
        if op == 0:
            b[i] ^= val or 0xFF
        elif op == 1:
            del b[i:]
        elif op == 2:
            b[i:i] = bytes([val]) * (val % 17 + 1)
        else:
            b[i:i] = b[i:i + val]
    return bytes(b)


MUTATIONS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1 << 30), st.integers(0, 255)), min_size=1, max_size=6)


def test_every_reader_has_a_seed() -> None:
    assert set(readers()) == set(SEEDS)


@pytest.mark.parametrize("kind", sorted(SEEDS))
@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes(kind: str, data: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    _check_reader(kind, data, tmp_path_factory.mktemp("r"))


@pytest.mark.parametrize("kind", sorted(SEEDS))
@FUZZ
@given(ops=MUTATIONS)
def test_mutated_real_files(kind: str, ops: list, tmp_path_factory: pytest.TempPathFactory) -> None:
    _check_reader(kind, _mutate(SEEDS[kind], ops), tmp_path_factory.mktemp("m"))


@pytest.mark.parametrize("name", sorted(CKPT_SEEDS))
@FUZZ
@given(ops=MUTATIONS)
def test_mutated_checkpoints(name: str, ops: list, tmp_path_factory: pytest.TempPathFactory) -> None:
    _check_scan(name, _mutate(CKPT_SEEDS[name], ops), tmp_path_factory.mktemp("c"))


@pytest.mark.parametrize("name", sorted(CKPT_SEEDS))
@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_checkpoint_bytes(name: str, data: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    _check_scan(name, data, tmp_path_factory.mktemp("c"))


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_seeds_are_good_files(kind: str, tmp_path: Path) -> None:
    """The mutations start from files each reader reads cleanly (else the fuzz proves little)."""
    run = tmp_path / "run"
    run.mkdir()
    p = run / NAMES[kind]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(SEEDS[kind])
    (run / "model-00001-of-00001.safetensors").write_bytes(CKPT_SEEDS["model.safetensors"])
    b = RunBuilder(run)
    readers()[kind](Found(p, kind, p.stat().st_size), b)
    r = b.finish()
    assert [a.problem for a in r.artifacts if a.status in ("partial", "unreadable")] == []
    assert len(r.scalars) or len(r.config.keys()) or r.events


@pytest.mark.parametrize("ops", [[(2, 4, 149)], [(2, 2, 149)]])
def test_pickle_frame_length_beyond_any_size_is_unreadable_not_a_crash(ops: list, tmp_path: Path) -> None:
    """Found by test_mutated_checkpoints: one byte set to 149 makes the unpickler read a FRAME length of ~2**63
    and raise OverflowError, which the scanner did not expect."""
    from autopsy.checkpoints import scan_file

    p = tmp_path / "legacy.pt"
    p.write_bytes(_mutate(CKPT_SEEDS["legacy.pt"], ops))
    s = scan_file(p)
    assert not s.tensors and any("OverflowError" in why for _, why in s.problems)

"""TensorBoard reader: real files from the real writers, exact values, corrupt variants."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.tensorboard import READERS, decode, read_tfevents
from autopsy.ingest.tfrecord import crc32c, masked_crc32c, walk
from autopsy.model import Run


def F32(x: float) -> float:
    """What a float32 simple_value holds."""
    return float(np.float32(x))


def events_in(d: Path) -> list[Path]:
    return sorted(d.rglob("events.out.tfevents.*"))


def read(path: Path, root: Path | None = None) -> Run:
    b = RunBuilder(root or path.parent)
    b.artifact(path, "tfevents", size=path.stat().st_size)  # as the pipeline does before a reader runs
    read_tfevents(Found(path, "tfevents", path.stat().st_size), b)
    return b.finish()


def rows(path: Path, **kw) -> list[tuple[int, str, float]]:
    df = decode(path.read_bytes(), **kw).frame()
    return list(zip(df["step"].tolist(), df["key"].tolist(), df["value"].tolist()))


def same(a: list[tuple[int, str, float]], b: list[tuple[int, str, float]]) -> bool:
    return len(a) == len(b) and all(
        x[:2] == y[:2] and (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2]))) for x, y in zip(a, b))


def artifact(run: Run, name: str):
    return next(a for a in run.artifacts if a.path.endswith(name))


# -- writers ---------------------------------------------------------------------------------------

SERIES = [(0, 1.5), (1, 1.2), (2, math.nan), (3, math.inf), (4, -math.inf), (5, 1e-8), (7, -3.25)]


def torch_file(d: Path, new_style: bool = False, double: bool = False) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(d))
    for step, v in SERIES:
        w.add_scalar("train/loss", v, step, new_style=new_style, double_precision=double)
        w.add_scalar("train/grad_norm", v * 2, step, new_style=new_style, double_precision=double)
    w.add_scalar("big_step", 4.0, 2**40)  # a 6-byte varint step
    w.add_histogram("weights", np.array([0.1, 0.2, 0.3]), 1)
    w.add_text("notes", "free text, not a config", 1)
    w.close()
    (f,) = events_in(d)
    return f


def expected_torch(exact: bool = False) -> list[tuple[int, str, float]]:
    conv = float if exact else F32
    out = []
    for step, v in SERIES:
        out += [(step, "train/loss", conv(v)), (step, "train/grad_norm", conv(v * 2))]
    return out + [(2**40, "big_step", 4.0)]


def tf_event_file(d: Path, events: list) -> Path:
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(d))
    for ev in events:
        w.add_event(ev)
    w.close()
    (f,) = events_in(d)
    return f


def tensor_value(tag: str, dtype: int, plugin: str | None = "scalars", **fields):
    from tensorboard.compat.proto import summary_pb2, tensor_pb2

    v = summary_pb2.Summary.Value(tag=tag, tensor=tensor_pb2.TensorProto(dtype=dtype, **fields))
    if plugin:
        v.metadata.plugin_data.plugin_name = plugin
    return v


def event(step: int | None, *values, wall: float = 1.0):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    ev = event_pb2.Event(wall_time=wall, summary=summary_pb2.Summary(value=list(values)))
    if step is not None:
        ev.step = step
    return ev


# -- the writers' encodings ------------------------------------------------------------------------

def test_torch_simple_value_exact(tmp_path):
    f = torch_file(tmp_path)
    assert same(rows(f), expected_torch())
    assert not same(rows(f), expected_torch(exact=True))  # 1.2 and 1e-8 are float32-rounded
    assert same(rows(f, fast=False), expected_torch())  # the general walker agrees


@pytest.mark.parametrize("double", [False, True])
def test_torch_new_style_tensors(tmp_path, double):
    f = torch_file(tmp_path, new_style=True, double=double)
    want = expected_torch(exact=double)  # double_precision keeps the exact Python float
    assert same(rows(f), want)
    assert same(rows(f, fast=False), want)


def test_tensorboardx_nan_inf(tmp_path):
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    for step, v in SERIES:
        w.add_scalar("train/loss", v, step)
    w.close()
    (f,) = events_in(tmp_path)
    assert same(rows(f), [(s, "train/loss", F32(v)) for s, v in SERIES])


def test_tf2_style_tensor_scalars(tmp_path):
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb

    evs = [event(s, *scalar_pb("train/loss", v).value, wall=float(s + 1)) for s, v in SERIES]
    f = tf_event_file(tmp_path, evs)
    assert same(rows(f), [(s, "train/loss", F32(v)) for s, v in SERIES])


def test_tensor_encodings_general_walker(tmp_path):
    """tensor_content bytes, double, bf16/half bit patterns, ints; metadata on the first event only."""
    half_bits = int(np.float16(0.5).view(np.uint16))
    bf16_bits = int(np.float32(-2.0).view(np.uint32) >> 16)
    evs = [
        event(1, tensor_value("c_f32", 1, tensor_content=np.float32(2.5).tobytes())),
        event(2, tensor_value("c_f32", 1, None, tensor_content=np.float32(np.nan).tobytes())),  # no metadata
        event(1, tensor_value("c_f64", 2, tensor_content=np.float64(1 / 3).tobytes())),
        event(1, tensor_value("d_val", 2, double_val=[0.1])),
        event(1, tensor_value("half", 19, half_val=[half_bits])),
        event(1, tensor_value("bf16", 14, half_val=[bf16_bits])),
        event(1, tensor_value("bf16c", 14, tensor_content=np.uint16(bf16_bits).tobytes())),
        event(1, tensor_value("i64", 9, int64_val=[-7])),
        event(1, tensor_value("i32", 3, int_val=[12])),
        event(1, tensor_value("hist", 2, "histograms", double_val=[1.0, 2.0, 3.0])),  # not scalars
        event(1, tensor_value("vec", 1, None, float_val=[1.0, 2.0])),  # two elements: not a scalar
        event(None, tensor_value("no_step", 1, float_val=[9.0])),
    ]
    f = tf_event_file(tmp_path, evs)
    want = [(1, "c_f32", 2.5), (2, "c_f32", math.nan), (1, "c_f64", 1 / 3), (1, "d_val", 0.1), (1, "half", 0.5),
            (1, "bf16", -2.0), (1, "bf16c", -2.0), (1, "i64", -7.0), (1, "i32", 12.0), (0, "no_step", 9.0)]
    assert same(rows(f), want)


def test_several_values_in_one_summary_and_untagged(tmp_path):
    from tensorboard.compat.proto import summary_pb2

    V = summary_pb2.Summary.Value
    evs = [event(3, V(tag="a", simple_value=1.0), V(tag="b", simple_value=2.0)),
           event(4, V(tag="", simple_value=5.0)),  # no tag: nothing to name it by
           event(5, V(tag="c", simple_value=3.0, metadata=summary_pb2.SummaryMetadata(
               plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="custom"))))]
    f = tf_event_file(tmp_path, evs)
    assert same(rows(f), [(3, "a", 1.0), (3, "b", 2.0)])


def test_matches_tbparse(tmp_path):
    from tbparse import SummaryReader

    for sub, new_style in (("old", False), ("new", True)):
        d = tmp_path / sub
        f = torch_file(d, new_style=new_style)
        r = SummaryReader(str(d))
        # tbparse puts tensor scalars in .tensors; big_step is a simple_value either way
        df = pd.concat([r.tensors, r.scalars]) if new_style else r.scalars
        theirs = [(int(s), t, float(v)) for s, t, v in zip(df["step"], df["tag"], df["value"])]
        ours = sorted(rows(f), key=lambda x: (x[0], x[1], 0 if math.isnan(x[2]) else x[2]))
        theirs.sort(key=lambda x: (x[0], x[1], 0 if math.isnan(x[2]) else x[2]))
        assert same(ours, theirs), sub


# -- real example files ----------------------------------------------------------------------------

def test_hf_trainer_run(copy_fixture):
    root = copy_fixture("examples/hf_trainer_nan_run")
    (f,) = events_in(root / "runs")
    run = read(f, root)
    assert artifact(run, f.name).status == "read"
    src = f.relative_to(root).as_posix()
    assert set(run.scalars["source"]) == {src}
    gn = run.series("grad_norm")
    assert gn["step"].tolist() == [1, 2, 4, 6, 8, 10, 12]
    assert [math.isnan(v) for v in gn["value"]] == [False] * 3 + [True] * 4
    ev = run.series("eval_loss")
    assert ev["step"].tolist() == [4, 8, 12]
    assert ev["value"].tolist()[0] == F32(4.15143728) and all(math.isnan(v) for v in ev["value"].tolist()[1:])
    assert run.series("loss")["value"].tolist() == [F32(x) for x in (4.17276907, 4.15283203, 4.15423775, 3.11860228, 0, 0, 0)]
    assert run.series("learning_rate")["value"].tolist()[0] == F32(0.001)
    assert run.series("train_loss")["value"].tolist() == [F32(1.90594)]
    c = run.config
    assert (c.get("learning_rate"), c.get("fp16"), c.get("bf16"), c.get("max_grad_norm")) == (0.001, False, False, 1.0)
    assert (c.get("model_type"), c.get("vocab_size"), c.get("version.transformers")) == ("llama", 64, "5.23.0")
    assert c.fact("learning_rate").where == "args/text_summary:learning_rate"
    assert "deepspeed.zero_stage" not in c and "torch_dtype" not in c  # null / absent in the dump
    assert run.frameworks == ["hf_trainer"]


def test_lightning_hp_metric_placeholder_dropped(copy_fixture):
    d = copy_fixture("examples/lightning")
    (f,) = events_in(d)
    run = read(f, d)
    assert "hp_metric" not in set(run.scalars["key"])
    assert run.series("loss")["step"].tolist() == [1, 3, 5, 7, 9, 11, 13, 15]
    assert run.series("eval_loss")["value"].tolist() == [F32(0.687276602), F32(0.651429534)]
    assert run.frameworks == ["lightning"]


def test_real_hp_metric_kept(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path))
    w.add_scalar("hp_metric", -1, 0)
    w.add_scalar("hp_metric", 0.75, 10)
    w.close()
    assert rows(events_in(tmp_path)[0]) == [(10, "hp_metric", 0.75)]


@pytest.mark.parametrize("name,want", [
    ("tensorboardX__events.out.tfevents.1795324456.vm", [(0, 1.5), (1, 1.2), (2, math.nan), (3, math.inf)]),
    ("tf2style_tensor_scalars__events.out.tfevents.1795324456.vm.12827.1", [(0, 1.5), (1, math.nan)]),
    ("torch_utils_tensorboard__events.out.tfevents.1795324456.vm.12827.0",
     [(0, 1.5), (1, 1.2), (2, math.nan), (3, math.inf)]),
])
def test_example_files(name, want):
    got = [(s, v) for s, k, v in rows(EXAMPLES / "tfevents" / name) if k == "train/loss"]
    assert same([(s, "", v) for s, v in got], [(s, "", F32(v)) for s, v in want])


def test_text_summary_config_facts(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    args = {"fp16": True, "learning_rate": 2e-5, "warmup_ratio": None, "max_grad_norm": 0.0,
            "model_init_kwargs": {"torch_dtype": "float16", "attn_implementation": "eager"},
            "deepspeed": {"zero_optimization": {"stage": 3}, "fp16": {"enabled": "auto", "min_loss_scale": 1}}}
    w = SummaryWriter(str(tmp_path))
    w.add_text("args", json.dumps(args, indent=2))
    w.add_text("model_config", json.dumps({"model_type": "qwen2", "dtype": "bfloat16", "vocab_size": 151936}))
    w.add_text("other/text_summary_like", "{not json")
    w.close()
    c = read(events_in(tmp_path)[0]).config
    assert (c.get("fp16"), c.get("learning_rate"), c.get("max_grad_norm")) == (True, 2e-5, 0.0)
    assert "warmup_ratio" not in c
    assert [f.value for f in c.facts("torch_dtype")] == ["float16", "bfloat16"]
    assert c.get("attn_implementation") == "eager"
    assert (c.get("deepspeed.zero_stage"), c.get("deepspeed.fp16.enabled"), c.get("deepspeed.fp16.min_loss_scale")) == (3, "auto", 1)
    assert (c.get("model_type"), c.get("vocab_size")) == ("qwen2", 151936)


# -- several files / directories ------------------------------------------------------------------

def test_resumed_run_two_files_one_dir_via_pipeline(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from autopsy.pipeline import read_run

    logdir = tmp_path / "runs" / "exp"
    for steps, suffix in ((range(5), ".a"), (range(3, 8), ".b")):
        w = SummaryWriter(str(logdir), filename_suffix=suffix)
        for s in steps:
            w.add_scalar("train/loss", float(s), s)
        w.close()
    run, _ = read_run(tmp_path, with_checkpoints=False)
    files = [p.relative_to(tmp_path).as_posix() for p in events_in(tmp_path)]
    assert len(files) == 2 and all(f.startswith("runs/exp/events.out.tfevents.") for f in files)
    assert {a.path: a.status for a in run.artifacts if a.kind == "tfevents"} == {f: "read" for f in files}
    loss = run.series("loss")
    assert loss["step"].tolist() == list(range(8)) and loss["value"].tolist() == [float(s) for s in range(8)]
    assert set(loss["source"]) <= set(files)


# -- corrupt and truncated files ------------------------------------------------------------------

def record_offsets(data: bytes) -> list[int]:
    fr = walk(data)
    return [int(s) - 12 for s in fr.starts]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("good")
    return torch_file(d).read_bytes()


def write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "events.out.tfevents.1.host"
    p.write_bytes(data)
    return p


def test_truncated_tail_at_several_offsets(tmp_path, good):
    offs = record_offsets(good)
    full = rows(write(tmp_path, good))
    last = offs[-1]  # the text record; the one before it is the histogram
    before = offs[-2]
    assert same(rows(write(tmp_path, good[:last])), full)  # cut at a record boundary: clean
    assert artifact(read(write(tmp_path, good[:last])), "host").status == "read"
    for cut in (before + 3, before + 12, before + 40, last - 2):
        p = write(tmp_path, good[:cut])
        run = read(p)
        a = artifact(run, "host")
        assert a.status == "partial", cut
        assert f"truncated last record at byte {before} ({cut - before} bytes not read)" in a.problem
        assert same(rows(p), full)  # histogram and text held no scalars: every point is still there
    cut_scalar = offs[-3] + 20  # inside the big_step record
    p = write(tmp_path, good[:cut_scalar])
    assert same(rows(p), [r for r in full if r[1] != "big_step"])


def test_flipped_data_byte_drops_only_that_record(tmp_path, good):
    offs = record_offsets(good)
    data = bytearray(good)
    data[offs[3] + 12 + 25] ^= 0x01  # inside record 3's data (train/loss @ step 1)
    p = write(tmp_path, bytes(data))
    run = read(p)
    a = artifact(run, "host")
    assert a.status == "partial"
    assert f"1 record(s) failed their data checksum (first at byte {offs[3]})" in a.problem
    want = [r for i, r in enumerate(expected_torch()) if i != 2]
    assert same(rows(p), want)
    assert len(rows(p, verify_data=False)) == len(expected_torch())  # unchecked, the record is read


def test_flipped_length_crc_cuts_the_walk(tmp_path, good):
    offs = record_offsets(good)
    data = bytearray(good)
    data[offs[5] + 9] ^= 0xFF  # the length checksum of record 5
    run = read(write(tmp_path, bytes(data)))
    a = artifact(run, "host")
    assert a.status == "partial" and f"corrupt record header at byte {offs[5]}" in a.problem
    assert len(run.scalars) == 4


@pytest.mark.parametrize("fix_crc", [False, True])
def test_huge_length_field(tmp_path, good, fix_crc):
    offs = record_offsets(good)
    data = bytearray(good)
    length = struct.pack("<Q", 2**60)
    data[offs[2]:offs[2] + 8] = length
    if fix_crc:
        data[offs[2] + 8:offs[2] + 12] = struct.pack("<I", masked_crc32c(length))
    run = read(write(tmp_path, bytes(data)))  # must not try to allocate 2**60 bytes
    a = artifact(run, "host")
    assert a.status == "partial" and f"byte {offs[2]}" in a.problem
    assert a.problem.startswith("truncated last record" if fix_crc else "corrupt record header")
    assert len(run.scalars) == 1


def test_random_bytes_and_empty_file(tmp_path):
    rng = np.random.default_rng(0)
    p = write(tmp_path, rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    a = artifact(read(p), "host")
    assert a.status == "unreadable" and a.problem.startswith("not a TensorBoard event file")
    p.write_bytes(b"")
    a = artifact(read(p), "host")
    assert a.status == "unreadable" and a.problem.startswith("empty event file")
    p.write_bytes(b"\x00" * 3)
    a = artifact(read(p), "host")
    assert a.status == "partial" and "truncated last record at byte 0 (3 bytes not read)" in a.problem


def test_junk_appended_after_records(tmp_path, good):
    p = write(tmp_path, good + b"garbage that is not a record" * 3)
    run = read(p)
    a = artifact(run, "host")
    assert a.status == "partial" and f"byte {len(good)}" in a.problem
    assert len(run.scalars) == len(expected_torch())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutations_never_raise(tmp_path, good, data):
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    buf = buf[: data.draw(st.integers(0, len(buf)))]
    p = write(tmp_path, bytes(buf))
    run = read(p)  # never raises
    assert len(run.scalars) <= len(expected_torch())
    assert same(rows(p, verify_data=False, fast=False), rows(p, verify_data=False))  # both paths agree


def test_tags_whose_different_bytes_decode_alike_keep_their_values(tmp_path):
    """Two tags damaged into different invalid UTF-8 bytes both decode to U+FFFD + the rest: the fast path must index
    the decoded names, not the byte strings (found by test_mutations_never_raise: values shifted to the next tag)."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "tb"))
    for step, v in [(0, 1.5), (1, 1.2)]:
        w.add_scalar("train/loss", v, step)
        w.add_scalar("xrain/loss", v * 2, step)
        w.add_scalar("grad_norm", v * 3, step)
    w.close()
    (f,) = events_in(tmp_path / "tb")
    buf = f.read_bytes().replace(b"train/loss", b"\xe2rain/loss").replace(b"xrain/loss", b"\xc3rain/loss")
    p = write(tmp_path, buf)
    fast, slow = rows(p, verify_data=False), rows(p, verify_data=False, fast=False)
    assert same(fast, slow)
    assert [r for r in fast if r[1] == "grad_norm"] == [(0, "grad_norm", 4.5), (1, "grad_norm", F32(3.6))]


def test_crc32c_reference_values():
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for blob in (b"", b"a", b"hello world" * 7):
        assert masked_crc32c(blob) == tb_masked(blob)


def test_reader_registered():
    assert READERS == {"tfevents": read_tfevents}


def test_file_copy_unchanged(copy_fixture):
    """The reader never writes: a read-only copy is read and left as it was."""
    d = copy_fixture("examples/tfevents")
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    for p in d.iterdir():
        read(p)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    shutil.rmtree(d)


def test_vectorised_varint_matches_the_encoding():
    from autopsy.ingest.tensorboard import _varint_words

    def enc(v: int) -> bytes:
        out = bytearray()
        while True:
            b, v = v & 0x7F, v >> 7
            out.append(b | 0x80 if v else b)
            if not v:
                return bytes(out)

    vals = [0, 1, 127, 128, 300, 2**14, 2**21, 2**28 + 5, 2**42 - 1, 2**49, 2**56 - 1, 2**56, 2**63]
    words = np.array([int.from_bytes((enc(v) + b"\x99" * 8)[:8], "little") for v in vals], dtype=np.uint64)
    got, nbytes = _varint_words(words)
    assert nbytes.tolist() == [len(enc(v)) if len(enc(v)) <= 8 else 0 for v in vals]
    assert [g for g, n in zip(got.tolist(), nbytes.tolist()) if n] == [v for v in vals if len(enc(v)) <= 8]


def test_layouts_outside_the_fast_path(tmp_path):
    """Long tags (2-byte lengths), huge and negative steps, same-length tags: all read exactly."""
    from torch.utils.tensorboard import SummaryWriter

    long_tag = "train/" + "x" * 200
    w = SummaryWriter(str(tmp_path))
    for i, s in enumerate((0, 2**56 + 3, -5)):
        w.add_scalar("m/a1", float(i), s)
        w.add_scalar("m/a2", float(-i), s)
        w.add_scalar(long_tag, 0.5 + i, s)
    w.close()
    (f,) = events_in(tmp_path)
    want = []
    for i, s in enumerate((0, 2**56 + 3, -5)):
        want += [(s, "m/a1", float(i)), (s, "m/a2", float(-i)), (s, long_tag, 0.5 + i)]
    assert same(rows(f), want)
    assert same(rows(f, fast=False), want)


def tfrecord(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc32c(head)) + payload + struct.pack("<I", masked_crc32c(payload))


def test_framed_but_not_protobuf(tmp_path, good):
    junk = tfrecord(b"\x0f\xff\xff\xff") + tfrecord(b"\x09" + b"\xff" * 20)  # wire type 7; a fixed64 then junk
    p = write(tmp_path, good + junk)
    run = read(p)
    a = artifact(run, "host")
    assert a.status == "partial"
    assert f"2 record(s) are not valid Event protobufs (first at byte {len(good)})" in a.problem
    assert len(run.scalars) == len(expected_torch())
    p.write_bytes(tfrecord(b"just some bytes") * 3)  # TFRecord framing, but not events
    a = artifact(read(p), "host")
    assert a.status == "unreadable" and "valid TFRecord framing but no Event records" in a.problem

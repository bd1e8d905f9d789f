"""TensorBoard event files -> scalars (every point) and the config HF logs as text.

Why not tbparse / EventAccumulator: they build a protobuf object per event (~17 µs per scalar)
and the accumulator keeps only 10,000 reservoir-sampled points per tag by default, which can drop
the one NaN that explains a run. Here every record is decoded: the common layouts (torch /
tensorboardX ``simple_value``, ``new_style`` and TF2 ``float_val`` tensors with the "scalars"
plugin) are decoded for all records at once with numpy; anything else goes through a general
protobuf wire walker (TF2 ``tensor_content`` bytes, double, bf16/half, ints, text summaries).

Each file is its own source (resumed runs leave several; the builder de-duplicates). The ``line``
of a point is its record index in the file (record 0 is ``file_version``), so evidence can cite
``events...:17``. Encodings: see /work/shared/formats.md §2. Event: 1 wall_time, 2 step (absent => 0), 5 summary.
Summary.Value: 1 tag, 2 simple_value (float32), 8 tensor, 9 metadata.plugin_data.plugin_name.
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.ranks import tree_rank_suffix
from autopsy.ingest.tfrecord import Bytes, Frames, Malformed, fields, masked_crc32c_many, packed_varints, signed64, walk
from autopsy.metrics import canonical

KIND = "tfevents"
#: check every used record's data checksum (the length checksum is always checked)
VERIFY_DATA_CRC = True
#: Lightning logs hp_metric=-1 as a placeholder before any real value exists
HP_METRIC_PLACEHOLDER = -1.0
#: tags whose meaning in an event file differs from the same key elsewhere: Lightning logs its
#: per-step loss as ``train_loss``; HF's one-off summary value of that name is ``train/train_loss``
TAG_METRICS = {"train_loss": "loss"}
#: text summaries parsed into config facts; longer texts are user content, not a config dump
MAX_CONFIG_TEXT = 1 << 20

# TensorProto DataType enum values
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_STRING, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF = 1, 2, 3, 7, 9, 10, 14, 19
_CONTENT_DTYPES = {DT_FLOAT: "<f4", DT_DOUBLE: "<f8", DT_INT32: "<i4", DT_INT64: "<i8", DT_HALF: "<f2", DT_BOOL: "u1"}


@dataclass
class EventData:
    """What one event file holds, before it goes into the Run."""

    frames: Frames
    record: np.ndarray  # int64 record index of each point (0 = the file_version record)
    step: np.ndarray  # int64
    value: np.ndarray  # float64
    tag_code: np.ndarray  # int64 index into tags
    tags: list[str]
    texts: list[tuple[int, str, str]] = field(default_factory=list)  # (record, tag, text)
    malformed: list[int] = field(default_factory=list)  # record indices that did not decode
    bad_crc: list[int] = field(default_factory=list)  # record indices whose data checksum failed
    first_is_event: bool = True  # first record decodes as an Event with file_version
    plugins: dict[str, str] = field(default_factory=dict)  # tag -> plugin name seen in metadata

    def frame(self) -> pd.DataFrame:
        """Columns step, key, value, line (the record index) and metric (canonical name)."""
        tags = np.asarray(self.tags + [""], dtype=object)
        metrics = np.asarray([TAG_METRICS.get(t, canonical(t)) for t in self.tags] + [""], dtype=object)
        # explicit object columns: letting pandas infer its str dtype costs ~0.25 s per million rows
        return pd.DataFrame({"step": self.step, "key": pd.Series(tags[self.tag_code], dtype=object),
                             "value": self.value, "line": self.record,
                             "metric": pd.Series(metrics[self.tag_code], dtype=object)})


# -- fast path: every record at once ----------------------------------------------------------

def _le(raw: bytes) -> np.uint64:
    """The uint64 whose little-endian bytes start with ``raw`` (a byte pattern, compared as a word)."""
    return np.uint64(int.from_bytes(raw[:8], "little"))


U64 = np.uint64
#: Summary{value{tag ...}} opening: 2a <slen> 0a <vlen> 0a <tlen>, every length one byte (< 128)
_HEAD, _HEAD_MASK = _le(b"\x2a\x00\x0a\x00\x0a"), U64(0xFF00FF00FF)
_HEAD_LEN_HIGH = U64(0x800080008000)  # high bits of the three length bytes: set means >= 128
#: Value.tensor {dtype: DT_FLOAT, [tensor_shape {}], float_val: [x] packed}: torch new_style and
#: tensorboard's summary_v2.scalar_pb
_TENSOR_SHAPED = _le(bytes.fromhex("420a080112002a04"))
_TENSOR_BARE, _TENSOR_BARE_MASK = _le(bytes.fromhex("420808012a04")), U64(0xFFFFFFFFFFFF)
#: Value.metadata {plugin_data {plugin_name: "scalars"}}: 13 bytes, checked as two overlapping words
_META = bytes.fromhex("4a0b0a090a07") + b"scalars"
_META_LO, _META_HI = _le(_META[:8]), _le(_META[5:])


def _varint_words(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the varint in the low bytes of each uint64: (value, byte count; 0 when > 8 bytes).

    Branch-free: the first byte with a clear high bit ends the varint; the 7-bit groups are then
    packed together in three shift-and-mask steps.
    """
    stop = ~w & U64(0x8080808080808080)
    lowest = stop & (~stop + U64(1))  # 2**(8k-1) for a k-byte varint, 0 when longer than 8
    keep = (lowest << U64(1)) - U64(1)  # the low k bytes (wraps to all ones for k = 8)
    nbytes = np.where(lowest == 0, 0, np.bitwise_count(keep) // 8).astype(np.int64)
    x = w & keep & U64(0x7F7F7F7F7F7F7F7F)
    x = (x & U64(0x007F007F007F007F)) | ((x & U64(0x7F007F007F007F00)) >> U64(1))
    x = (x & U64(0x00003FFF00003FFF)) | ((x & U64(0x3FFF00003FFF0000)) >> U64(2))
    x = (x & U64(0x000000000FFFFFFF)) | ((x & U64(0x0FFFFFFF00000000)) >> U64(4))
    return x, nbytes


def _fast(data: Bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """Decode records shaped ``Event{wall_time, [step], Summary{one Value{tag, scalar}}}``.

    Returns (ok mask, step, value, tag start, tag length). Each record costs a handful of word
    gathers: the step varint, the whole Summary/Value/tag header, the scalar's layout and value.
    A record shaped otherwise (several values, histograms, text, tensor_content, lengths over 127,
    steps >= 2**56 or negative) is left for the general walker.
    """
    ok = (data.at(starts) == 0x09) & (ends - starts >= 15)
    has_step = data.at(starts + 9) == 0x10
    step, nb = _varint_words(data.u64_at(starts + 10))
    ok &= ~has_step | (nb > 0)
    step = np.where(has_step, step, U64(0)).view(np.int64)
    p = np.where(has_step, starts + 10 + nb, starts + 9)
    head = data.u64_at(p)
    ok &= ((head & _HEAD_MASK) == _HEAD) & ((head & _HEAD_LEN_HIGH) == 0)
    slen = ((head >> U64(8)) & U64(0xFF)).astype(np.int64)
    vlen = ((head >> U64(24)) & U64(0xFF)).astype(np.int64)
    tag_len = ((head >> U64(40)) & U64(0xFF)).astype(np.int64)
    ok &= (p + 2 + slen == ends) & (p + 4 + vlen == ends)
    tag_start = p + 6
    t = tag_start + tag_len
    simple = ok & (t + 5 == ends) & (data.at(t) == 0x15)
    vpos = t + 1
    rest = np.flatnonzero(ok & ~simple)  # tensor layouts: only looked at where there are some
    tensor = np.zeros(len(starts), dtype=bool)
    if len(rest):
        tr, er = t[rest], ends[rest]
        word = data.u64_at(tr)
        meta = (data.u64_at(er - 13) == _META_LO) & (data.u64_at(er - 8) == _META_HI)
        shaped = (word == _TENSOR_SHAPED) & (tr + 12 + 13 == er) & meta
        bare = ((word & _TENSOR_BARE_MASK) == _TENSOR_BARE) & (tr + 10 + 13 == er) & meta
        tensor[rest] = shaped | bare
        vpos[rest] = np.where(shaped, tr + 8, tr + 6)
    value = data.u32_at(vpos).view("<f4").astype(np.float64)
    return simple | tensor, step, value, tag_start, tag_len


def _tag_codes(data: Bytes, tag_start: np.ndarray, tag_len: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Factorise tag bytes without a Python object per record: hash 8-byte words, then verify.

    A fast record's tag is followed by at least 9 bytes (value and checksum), so reading whole
    words past its end stays inside the file; the bytes past the end are masked off.
    """
    codes = np.zeros(len(tag_start), dtype=np.int64)
    tags: list[bytes] = []
    order = np.argsort(tag_len, kind="stable")
    bounds = np.flatnonzero(np.diff(tag_len[order])) + 1
    for grp in np.split(order, bounds):
        if len(grp) == 0:
            continue
        n = int(tag_len[grp[0]])
        s = tag_start[grp]
        words = []
        for j in range(0, n, 8):
            w = data.u64_at(s + j)
            if n - j < 8:
                w = w & np.uint64((1 << (8 * (n - j))) - 1)
            words.append(w)
        h = np.zeros(len(grp), dtype=np.uint64)
        for j, w in enumerate(words):
            h = (h ^ w) * np.uint64(0x100000001B3) + np.uint64(j + 1)
        sub, uniq = pd.factorize(h)
        first = np.zeros(len(uniq), dtype=np.int64)
        first[sub] = np.arange(len(sub))  # any member represents its hash; all are verified below
        rep = first[sub]
        if not all((w == w[rep]).all() for w in words):  # a hash collision: fall back to exact bytes
            raw = [data.u8[a:a + n].tobytes() for a in s.tolist()]
            sub, uniq_b = pd.factorize(np.asarray(raw, dtype=object))
            first = np.asarray([int(np.flatnonzero(sub == k)[0]) for k in range(len(uniq_b))], dtype=np.int64)
        codes[grp] = sub + len(tags)
        tags.extend(data.u8[a:a + n].tobytes() for a in s[first].tolist())
    return codes, tags


# -- general path: one record at a time --------------------------------------------------------

def _plugin_name(b: bytes, s: int, e: int) -> str | None:
    for num, wire, a, z in fields(b, s, e):
        if num == 1 and wire == 2:  # plugin_data
            for n2, w2, a2, z2 in fields(b, a, z):
                if n2 == 1 and w2 == 2:
                    return b[a2:z2].decode("utf-8", "replace")
    return None


def _tensor(b: bytes, s: int, e: int) -> tuple[int, int | None, list[float], list[bytes]]:
    """(dtype, element count or None when no shape, numbers, strings) of a TensorProto."""
    dtype = 0
    count: int | None = None
    content = b""
    nums: list[float] = []
    strings: list[bytes] = []
    halves: list[int] = []
    for num, wire, a, z in fields(b, s, e):
        if num == 1 and wire == 0:
            dtype = a
        elif num == 2 and wire == 2:
            count = 1
            for n2, w2, a2, z2 in fields(b, a, z):
                if n2 == 2 and w2 == 2:
                    size = next((signed64(v) for n3, w3, v, _ in fields(b, a2, z2) if n3 == 1 and w3 == 0), 0)
                    count *= max(size, 0)
        elif num == 4 and wire == 2:
            content = b[a:z]
        elif num == 5 and wire in (2, 5):  # float_val, packed or not
            nums.extend(np.frombuffer(b[a:z], "<f4").tolist())
        elif num == 6 and wire in (1, 2):  # double_val
            nums.extend(np.frombuffer(b[a:z], "<f8").tolist())
        elif num in (7, 10, 11) and wire in (0, 2):  # int_val, int64_val, bool_val
            vals = packed_varints(b, a, z) if wire == 2 else [a]
            nums.extend(float(v != 0) if num == 11 else float(signed64(v) if num == 10 else _int32(v)) for v in vals)
        elif num == 13 and wire in (0, 2):  # half_val: fp16/bf16 bit patterns
            halves.extend(packed_varints(b, a, z) if wire == 2 else [a])
        elif num == 8 and wire == 2:
            strings.append(b[a:z])
    if halves:
        bits = np.asarray(halves, dtype=np.uint32) & 0xFFFF
        if dtype == DT_BFLOAT16:
            nums.extend((bits << 16).view("<f4").astype(np.float64).tolist())
        else:
            nums.extend(bits.astype(np.uint16).view("<f2").astype(np.float64).tolist())
    if content:
        if dtype == DT_BFLOAT16:
            arr = (np.frombuffer(content[: len(content) // 2 * 2], "<u2").astype(np.uint32) << 16).view("<f4")
        elif dtype in _CONTENT_DTYPES:
            item = np.dtype(_CONTENT_DTYPES[dtype]).itemsize
            arr = np.frombuffer(content[: len(content) // item * item], _CONTENT_DTYPES[dtype])
        else:
            arr = np.zeros(0)
        nums.extend(arr.astype(np.float64).tolist())
    return dtype, count, nums, strings


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@dataclass
class _Slow:
    record: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    tag: list[str] = field(default_factory=list)
    texts: list[tuple[int, str, str]] = field(default_factory=list)


def _general(b: bytes, rec: int, plugins: dict[str, str], out: _Slow) -> bool:
    """Decode one Event; append its scalars and texts to ``out``. Returns whether it held any."""
    step = 0
    summary = None
    for num, wire, a, z in fields(b, 0, len(b)):
        if num == 2 and wire == 0:
            step = signed64(a)
        elif num == 5 and wire == 2:
            summary = (a, z)
    if summary is None:
        return False
    used = False
    for num, wire, a, z in fields(b, *summary):
        if num != 1 or wire != 2:
            continue
        tag = ""
        simple: float | None = None
        tensor = None
        plugin = None
        for n2, w2, a2, z2 in fields(b, a, z):
            if n2 == 1 and w2 == 2:
                tag = b[a2:z2].decode("utf-8", "replace")
            elif n2 == 2 and w2 == 5:
                simple = float(np.frombuffer(b[a2:z2], "<f4")[0])
            elif n2 == 8 and w2 == 2:
                tensor = (a2, z2)
            elif n2 == 9 and w2 == 2:
                plugin = _plugin_name(b, a2, z2)
        if plugin is not None and tag:
            plugins.setdefault(tag, plugin)
        if not tag:
            continue
        if simple is not None:
            if plugin in (None, "scalars"):  # its own metadata only: simple_value is a scalar by nature
                out.record.append(rec), out.step.append(step), out.value.append(simple), out.tag.append(tag)
                used = True
            continue
        if tensor is None:
            continue
        plugin = plugin or plugins.get(tag)  # TF2 writers put metadata on a tag's first event only
        dtype, count, nums, strings = _tensor(b, *tensor)
        if plugin == "text" or (plugin is None and dtype == DT_STRING):
            if strings:
                out.texts.append((rec, tag, strings[0].decode("utf-8", "replace")))
                used = True
        elif plugin in (None, "scalars") and len(nums) == 1 and count in (None, 1) and dtype != DT_STRING:
            out.record.append(rec), out.step.append(step), out.value.append(nums[0]), out.tag.append(tag)
            used = True
    return used


def _is_file_version(b: bytes) -> bool:
    try:
        return any(num == 3 and wire == 2 and b[a:z].startswith(b"brain.Event:") for num, wire, a, z in fields(b, 0, len(b)))
    except Malformed:
        return False


def decode(buf: bytes | mmap.mmap, verify_data: bool = VERIFY_DATA_CRC, fast: bool = True) -> EventData:
    """Decode every record of an event file held in ``buf``; never raises for bad bytes.

    ``fast=False`` sends every record through the general walker (tests compare the two).
    """
    data = Bytes(buf)
    frames = walk(buf, data)
    starts, ends = frames.starts, frames.starts + frames.lengths
    if len(starts):
        ok, step, value, tag_start, tag_len = _fast(data, starts, ends)
        ok &= fast
    else:
        ok, step, value, tag_start, tag_len = (np.zeros(0, np.int64),) * 5
        ok = ok.astype(bool)
    fast_idx = np.flatnonzero(ok)
    codes, tag_bytes = _tag_codes(data, tag_start[fast_idx], tag_len[fast_idx]) if len(fast_idx) else (np.zeros(0, np.int64), [])
    tags = [t.decode("utf-8", "replace") for t in tag_bytes]
    plugins = {t: "scalars" for t in tags}
    slow = _Slow()
    malformed: list[int] = []
    used_slow: list[int] = []
    for rec in np.flatnonzero(~ok).tolist():
        s, e = int(starts[rec]), int(ends[rec])
        try:
            if _general(bytes(buf[s:e]), rec, plugins, slow):
                used_slow.append(rec)
        except Exception:  # noqa: BLE001 - one undecodable record must not lose the rest of the file
            malformed.append(rec)
    first_is_event = bool(len(starts)) and _is_file_version(bytes(buf[int(starts[0]):int(ends[0])]))

    bad_crc: list[int] = []
    if verify_data:
        used = np.concatenate([fast_idx, np.asarray(used_slow, dtype=np.int64)])
        good = masked_crc32c_many(data, starts[used], frames.lengths[used]) == data.u32_at(ends[used])
        bad_crc = sorted(used[~good].tolist())
    del data

    # distinct tag bytes can decode to one string (two invalid bytes both become U+FFFD): codes index the strings
    tag_index: dict[str, int] = {}
    remap = np.array([tag_index.setdefault(t, len(tag_index)) for t in tags], dtype=np.int64)
    if len(remap) and len(tag_index) < len(remap):
        codes = remap[codes]
    slow_codes = [tag_index.setdefault(t, len(tag_index)) for t in slow.tag]
    tags = list(tag_index)
    record = np.concatenate([fast_idx, np.asarray(slow.record, dtype=np.int64)])
    out = EventData(
        frames=frames,
        record=record,
        step=np.concatenate([step[fast_idx], np.asarray(slow.step, dtype=np.int64)]),
        value=np.concatenate([value[fast_idx], np.asarray(slow.value, dtype=np.float64)]),
        tag_code=np.concatenate([codes, np.asarray(slow_codes, dtype=np.int64)]),
        tags=tags, texts=slow.texts, malformed=malformed, bad_crc=bad_crc, first_is_event=first_is_event,
        plugins=plugins,
    )
    keep = np.ones(len(record), dtype=bool)
    if bad_crc:
        keep &= ~np.isin(record, bad_crc)
        bad = set(bad_crc)
        out.texts = [t for t in out.texts if t[0] not in bad]
    hp = tag_index.get("hp_metric")
    if hp is not None:
        keep &= ~((out.tag_code == hp) & (out.value == HP_METRIC_PLACEHOLDER))
    if slow.record or not keep.all():
        order = np.argsort(record, kind="stable")
        order = order[keep[order]]
        out.record, out.step, out.value, out.tag_code = (
            out.record[order], out.step[order], out.value[order], out.tag_code[order])
    return out


# -- config facts from HF text summaries -------------------------------------------------------

#: TrainingArguments / TRL config keys kept as config facts under the same name
ARGS_KEYS = (
    "fp16", "bf16", "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "max_grad_norm",
    "gradient_accumulation_steps", "per_device_train_batch_size", "max_length", "max_prompt_length",
    "max_seq_length", "cutoff_len", "padding_free", "packing", "attn_implementation", "sequence_parallel_size",
    "logging_nan_inf_filter", "gradient_checkpointing", "optim", "loss_type", "rpo_alpha", "beta", "torch_dtype",
)
#: model config.json key -> fact key
MODEL_KEYS = {
    "model_type": "model_type", "vocab_size": "vocab_size", "torch_dtype": "torch_dtype", "dtype": "torch_dtype",
    "attn_implementation": "attn_implementation", "_attn_implementation": "attn_implementation",
    "transformers_version": "version.transformers",
}
#: DeepSpeed config path (inside TrainingArguments.deepspeed when it is a dict) -> fact key
DEEPSPEED_KEYS = {
    ("zero_optimization", "stage"): "deepspeed.zero_stage",
    ("zero_optimization", "overlap_comm"): "deepspeed.overlap_comm",
    ("fp16", "enabled"): "deepspeed.fp16.enabled",
    ("bf16", "enabled"): "deepspeed.bf16.enabled",
    ("fp16", "initial_scale_power"): "deepspeed.fp16.initial_scale_power",
    ("fp16", "min_loss_scale"): "deepspeed.fp16.min_loss_scale",
}


def _config_facts(tag: str, obj: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(fact key, value, original key) for a JSON object HF logged as text."""
    out: list[tuple[str, Any, str]] = []
    name = tag.rsplit("/text_summary", 1)[0]
    if name == "args":
        out += [(k, obj[k], k) for k in ARGS_KEYS if obj.get(k) is not None]
        init = obj.get("model_init_kwargs")
        if isinstance(init, dict):
            for k, fact in MODEL_KEYS.items():
                if init.get(k) is not None and fact in ("torch_dtype", "attn_implementation"):
                    out.append((fact, init[k], f"model_init_kwargs.{k}"))
        ds = obj.get("deepspeed")
        if isinstance(ds, dict):
            for (sect, key), fact in DEEPSPEED_KEYS.items():
                sub = ds.get(sect)
                if isinstance(sub, dict) and sub.get(key) is not None:
                    out.append((fact, sub[key], f"deepspeed.{sect}.{key}"))
    elif name == "model_config":
        out += [(fact, obj[k], k) for k, fact in MODEL_KEYS.items() if obj.get(k) is not None]
        text = obj.get("text_config")
        if "vocab_size" not in obj and isinstance(text, dict) and text.get("vocab_size") is not None:
            out.append(("vocab_size", text["vocab_size"], "text_config.vocab_size"))
    return out


def _texts_to_facts(texts: list[tuple[int, str, str]], source: str, builder: RunBuilder) -> None:
    for _rec, tag, text in texts:
        if not tag.endswith("text_summary") or len(text) > MAX_CONFIG_TEXT:
            continue
        if not text.lstrip().startswith("{"):  # an environment report logged as text (pip freeze, env dump)
            from autopsy.ingest.env_facts import scan_text

            scan_text(text, lambda key, value, line, orig, tag=tag: builder.fact(
                key, value, source, where=f"{tag} line {line}", original_key=orig))
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        facts = _config_facts(tag, obj)
        for key, value, original in facts:
            builder.fact(key, value, source, where=f"{tag}:{original}", original_key=original)
        if facts and tag.startswith("args/"):
            builder.framework("hf_trainer")


# -- the reader ---------------------------------------------------------------------------------

def _report(data: EventData, rel: str, builder: RunBuilder) -> None:
    fr = data.frames
    left = fr.size - fr.end
    if len(fr) == 0 and fr.stop == "header_crc":
        builder.problem(rel, KIND, "not a TensorBoard event file: the first record's length checksum is wrong "
                        "(random or non-TFRecord bytes); nothing was read")
        return
    if len(fr) and not data.first_is_event and len(data.record) == 0:
        builder.problem(rel, KIND, "not a TensorBoard event file: valid TFRecord framing but no Event records "
                        "(no file_version, no summaries); nothing was read")
        return
    if fr.stop == "tail" and left:
        builder.problem(rel, KIND, f"truncated last record at byte {fr.end} ({left} bytes not read): the writer "
                        f"was killed mid-write (or is still writing); the {len(fr)} records before it were read",
                        "partial")
    elif fr.stop == "header_crc":
        builder.problem(rel, KIND, f"corrupt record header at byte {fr.end} (length checksum mismatch): "
                        f"{left} bytes after it were not read; the {len(fr)} records before it were read", "partial")
    if data.bad_crc:
        off = int(fr.starts[data.bad_crc[0]]) - 12
        builder.problem(rel, KIND, f"{len(data.bad_crc)} record(s) failed their data checksum (first at byte {off}); "
                        "their values were left out", "partial")
    if data.malformed:
        off = int(fr.starts[data.malformed[0]]) - 12
        builder.problem(rel, KIND, f"{len(data.malformed)} record(s) are not valid Event protobufs (first at byte "
                        f"{off}); they were skipped", "partial")


def _holds_event_file(d: Path) -> bool:
    """An event file in ``d`` or one level below it (a lower rank's sibling directory)."""
    return any(next(d.glob(pattern), None) is not None for pattern in ("events.out.tfevents.*", "*/events.out.tfevents.*"))


def read_tfevents(found: Found, builder: RunBuilder) -> None:
    """Read one event file into ``builder`` as its own source; never raises for bad bytes."""
    rel = builder.rel(found.path)
    try:
        with open(found.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                builder.problem(rel, KIND, "empty event file (0 bytes): the writer never flushed (killed within "
                                "flush_secs of starting?); nothing to read")
                return
            try:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # a filesystem without mmap: read it instead
                data = decode(fh.read())
            else:
                try:
                    data = decode(mm)
                finally:
                    try:
                        mm.close()
                    except BufferError:  # a numpy view still alive; the GC closes it
                        pass
    except OSError as exc:
        builder.problem(rel, KIND, f"cannot read the event file: {exc.strerror or exc}; check it exists and is readable")
        return
    _report(data, rel, builder)
    if len(data.record):
        frame = data.frame()
        suffix = tree_rank_suffix(found.path, _holds_event_file)
        if suffix:  # one event dir per rank (torchrun/verl/Megatron loops): rank N's points are <metric>@rankN
            frame["metric"] = frame["metric"] + suffix
        builder.scalar_frame(rel, KIND, frame)
    _texts_to_facts(data.texts, rel, builder)
    if "hp_metric" in data.tags or "hparams" in data.plugins.values():
        builder.framework("lightning")


READERS = {KIND: read_tfevents}

__all__ = ["READERS", "EventData", "decode", "read_tfevents"]

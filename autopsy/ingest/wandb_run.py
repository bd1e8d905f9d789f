"""W&B run folders: ``wandb/run-*/`` and ``wandb/offline-run-*/``.

``files/config.yaml`` (``key: {value: ...}``), ``files/wandb-summary.json`` (last values; bare
``NaN``), ``files/wandb-metadata.json`` (Python, GPUs, CUDA) and ``files/requirements.txt`` are
plain files read here; ``files/output.log`` is the captured stdout and goes to the text-log
reader. The history lives only in ``run-<id>.wandb``: a LevelDB-style log (7-byte header
``:W&B`` + magic 0xBEE1 + version; 32 KiB blocks of records ``crc32 | length | type | data``,
types FULL/FIRST/MIDDLE/LAST, CRC = zlib.crc32 of the type byte then the data) whose records are
``wandb.proto.wandb_internal_pb2.Record`` protobufs. The framing is read here (wandb >= 0.19 has
no Python reader left: its writer is Go); the protobufs are decoded with wandb's own generated
classes, the optional ``autopsy-ml[wandb]`` extra. Without it everything else is still read and
the ``.wandb`` file is reported as not read, with the install hint. Offline runs of recent wandb
versions write config, summary and metadata only into the ``.wandb`` file.

Steps: HF's ``WandbCallback`` logs ``train/global_step`` in each history row and W&B's own
``_step`` counts ``log()`` calls, so the trainer's step is used when a row has one.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from autopsy.discover import Found
from autopsy.ingest import config_facts as cf
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.env_facts import metadata_facts
from autopsy.ingest.jsonsafe import load_json, read_bytes

HEADER = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
BLOCK = 32768
RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
#: keys of a history row / summary that hold the trainer's step (HF, Lightning, generic loops)
STEP_KEYS = ("train/global_step", "trainer/global_step", "global_step", "step", "_step")
#: config.yaml / summary / metadata above this are not what wandb writes
MAX_SIDE_FILE_BYTES = 16 * 1024 * 1024
INSTALL_HINT = "install autopsy-ml[wandb] (pip install 'autopsy-ml[wandb]') to read the .wandb history"


# -- the record log ------------------------------------------------------------------------

class Framing:
    """Records of a W&B LevelDB-style log; damage is skipped block-wise and counted."""

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        self.bad: list[str] = []  # what was skipped, with byte offsets
        self.truncated_at: int | None = None

    def records(self) -> Iterator[bytes]:
        data, n = self.data, len(self.data)
        off = len(HEADER)
        parts: list[bytes] = []
        while off + RECORD_HEADER <= n:
            left = BLOCK - off % BLOCK
            if left < RECORD_HEADER:  # block trailer (zero padding)
                off += left
                continue
            crc, length, rtype = struct.unpack_from("<IHB", data, off)
            if rtype == 0 and length == 0 and crc == 0:  # zero fill: the writer pre-allocated or padded
                off += left
                continue
            end = off + RECORD_HEADER + length
            if end > n:
                self.truncated_at = off
                break
            payload = data[off + RECORD_HEADER:end]
            ok = rtype in (FULL, FIRST, MIDDLE, LAST) and length <= left - RECORD_HEADER
            if ok and zlib.crc32(payload, zlib.crc32(bytes([rtype]))) & 0xFFFFFFFF != crc:
                ok = False
            if not ok:
                self.bad.append(f"byte {off}")
                parts = []
                off += left  # resynchronise at the next block, as LevelDB readers do
                continue
            off = end
            if rtype == FULL:
                parts = []
                yield payload
            elif rtype == FIRST:
                parts = [payload]
            elif rtype == MIDDLE:
                if parts:
                    parts.append(payload)
            elif parts:
                parts.append(payload)
                yield b"".join(parts)
                parts = []
        if off < n and self.truncated_at is None and any(self.data[off:off + BLOCK]):
            self.truncated_at = off


def _json_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _item_key(item: Any) -> str:
    nested = list(getattr(item, "nested_key", []) or [])
    return ".".join(nested) if nested else item.key


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _row_step(row: Mapping[str, Any], fallback: int) -> int:
    for k in STEP_KEYS:
        v = row.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return int(v)
    return fallback


def read_wandb_history(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    try:
        with open(found.path, "rb") as fh:
            head = fh.read(len(HEADER))
            if head != HEADER:
                got = "empty file" if not head else f"starts with {head!r}"
                builder.problem(src, "wandb_history", f"not a W&B run log ({got}; expected the ':W&B' header): "
                                "not read")
                return
            # mapped, not read: a long run's log can be GBs; pages are file-backed and dropped as needed
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        builder.problem(src, "wandb_history", f"W&B history not read: {getattr(exc, 'strerror', None) or exc}")
        return
    with data:
        _read_history(data, src, builder)


def _read_history(data: mmap.mmap, src: str, builder: RunBuilder) -> None:
    try:
        from wandb.proto import wandb_internal_pb2 as pb  # optional extra: protobuf classes only
    except Exception as exc:  # noqa: BLE001 - missing or broken optional dependency
        builder.problem(src, "wandb_history", f"W&B history (metrics per step) not read: the .wandb file is a "
                        f"protobuf record log and the wandb package is not importable ({type(exc).__name__}); "
                        f"{INSTALL_HINT}. config.yaml, wandb-summary.json, wandb-metadata.json and output.log "
                        "are read without it", "unreadable")
        return
    from google.protobuf.json_format import MessageToDict

    framing = Framing(data)
    undecodable = 0
    rows = 0
    for raw in framing.records():
        rec = pb.Record()
        try:
            rec.ParseFromString(raw)
        except Exception:  # noqa: BLE001 - protobuf DecodeError and friends
            undecodable += 1
            continue
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            rows += 1
            _history(rec.history, src, rows, builder)
        elif kind == "config":
            _config_items(rec.config.update, src, builder)
        elif kind == "run":
            _config_items(rec.run.config.update, src, builder)
        elif kind == "environment":
            meta = MessageToDict(rec.environment)
            for key, value, orig in metadata_facts(meta):
                builder.fact(key, value, src, "environment record", orig)
        elif kind == "exit":
            builder.fact("tracker.exit_code", int(rec.exit.exit_code), src, "exit record", "exit_code")
    problems = []
    if framing.bad:
        problems.append(f"{len(framing.bad)} damaged record(s) skipped (checksum or framing; first at "
                        f"{framing.bad[0]})")
    if undecodable:
        problems.append(f"{undecodable} record(s) that are not W&B protobufs skipped")
    if framing.truncated_at is not None:
        problems.append(f"file ends inside a record at byte {framing.truncated_at} (the run was cut off while "
                        "writing); the records before it were read")
    if problems:
        builder.problem(src, "wandb_history", "; ".join(problems) + f"; {rows} history row(s) read", "partial")


def _history(history: Any, src: str, index: int, builder: RunBuilder) -> None:
    row: dict[str, Any] = {}
    for item in history.item:
        row[_item_key(item)] = _json_value(item.value_json)
    step = history.step.num if history.HasField("step") else row.get("_step")
    fallback = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else index - 1
    at = _row_step(row, fallback)
    for key, value in row.items():
        if key.startswith("_") or key in STEP_KEYS:
            continue
        v = _number(value)
        if v is not None:
            builder.scalar(src, "wandb_history", at, key, v, line=index)


def _config_items(items: Any, src: str, builder: RunBuilder) -> None:
    d: dict[str, Any] = {}
    for item in items:
        key = _item_key(item)
        if key.startswith("_"):
            continue
        d[key] = _json_value(item.value_json)
    _config_facts(d, src, "config record", builder)


def _config_facts(d: Mapping[str, Any], src: str, where: str, builder: RunBuilder) -> None:
    facts = cf.args_facts(d) + cf.model_config_facts(d)
    seen: set[str] = set()
    for f in facts:
        if f.key in seen:
            continue
        seen.add(f.key)
        builder.fact(f.key, f.value, src, f"{where}: {f.where}", f.original_key)
    if facts and any(k in d for k in cf.HF_ARGS_MARKERS):
        builder.framework("hf_trainer")


# -- the plain files -----------------------------------------------------------------------

def read_wandb_config(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    data, why = read_bytes(found.path, MAX_SIDE_FILE_BYTES)
    if data is None:
        builder.problem(src, "wandb_config", f"W&B config not read: {why}")
        return
    try:
        doc = yaml.safe_load(data.decode("utf-8", "replace"))
    except (yaml.YAMLError, RecursionError) as exc:
        builder.problem(src, "wandb_config", f"invalid YAML ({str(exc).splitlines()[0][:200]}): W&B config not read")
        return
    if not isinstance(doc, Mapping):
        builder.problem(src, "wandb_config", "W&B config is not a mapping of settings: not read", "ignored")
        return
    if cf.count_nodes(doc) >= cf.MAX_NODES:
        builder.problem(src, "wandb_config", f"more than {cf.MAX_NODES} nodes: only top-level keys used", "partial")
    flat = {k: (v.get("value") if isinstance(v, Mapping) and "value" in v else v)
            for k, v in doc.items() if isinstance(k, str) and not k.startswith("_")}
    _config_facts(flat, src, "config.yaml", builder)


def read_wandb_summary(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    res = load_json(found.path)
    if res.value is None or not isinstance(res.value, Mapping):
        builder.problem(src, "wandb_summary", f"W&B summary not read: {res.error or 'not a JSON object'}")
        return
    if res.error:
        builder.problem(src, "wandb_summary", f"W&B summary partly read: {res.error}", "partial")
    d = res.value
    step = _row_step(d, 0)
    for key, value in d.items():
        if not isinstance(key, str) or key.startswith("_") or key in STEP_KEYS:
            continue
        v = _number(value)
        if v is not None:
            builder.scalar(src, "wandb_summary", step, key, v)


def read_wandb_metadata(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    res = load_json(found.path, salvage=False)
    if not isinstance(res.value, Mapping):
        builder.problem(src, "wandb_metadata", f"W&B metadata not read: {res.error or 'not a JSON object'}")
        return
    for key, value, orig in metadata_facts(res.value):
        builder.fact(key, value, src, orig, orig)


def read_requirements(found: Found, builder: RunBuilder) -> None:
    """Pinned versions (``name==1.2.3``) of a requirements.txt / conda env export."""
    from autopsy.ingest.env_facts import scan_text

    src = builder.rel(found.path)
    data, why = read_bytes(found.path, MAX_SIDE_FILE_BYTES)
    if data is None:
        builder.problem(src, "requirements", f"not read: {why}")
        return
    if b"\x00" in data[:4096]:
        builder.problem(src, "requirements", "binary data (NUL bytes), not a requirements list: not read")
        return
    scan_text(data.decode("utf-8", "replace"),
              lambda key, value, line, orig: builder.fact(key, value, src, f"line {line}", orig))


READERS = {
    "wandb_history": read_wandb_history, "wandb_config": read_wandb_config, "wandb_summary": read_wandb_summary,
    "wandb_metadata": read_wandb_metadata, "requirements": read_requirements,
}

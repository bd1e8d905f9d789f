"""Readers for configuration artifacts: model/adapter config.json, argument dumps (ms-swift
args.json, LLaMA-Factory yaml, HF/TRL ``training_args.bin``), DeepSpeed/accelerate configs,
``*_results.json`` summaries and sharded-weights indexes.

They only record facts (:mod:`autopsy.ingest.config_facts` maps the keys) and frameworks; the
pickled ``training_args.bin`` is read through :mod:`autopsy.safe_pickle` so nothing from the
file is ever executed.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autopsy.discover import Found
from autopsy.ingest import config_facts as cf
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.jsonsafe import decode_text, load_json, read_bytes
from autopsy.safe_pickle import (
    LEGACY_TORCH_MAGIC,
    InertUnpickler,
    Stub,
    StubObject,
    enum_value,
    plain,
    torch_zip_pickle,
)

#: config files are small; a "config" bigger than this is a dataset or a dump and is not read
MAX_CONFIG_BYTES = 64 << 20
#: a training_args.bin is a few KB; anything beyond this is not one
MAX_ARGS_BIN_BYTES = 64 << 20
#: at most this many top-level hparams are kept verbatim as ``hparams.<key>`` facts
MAX_HPARAM_FACTS = 200


def emit(builder: RunBuilder, source: str, facts: list[cf.Fact]) -> None:
    for f in facts:
        builder.fact(f.key, f.value, source, f.where, f.original_key)


def load_mapping(found: Found, builder: RunBuilder, yaml_file: bool = False) -> Mapping[str, Any] | None:
    """Parse a small JSON/YAML config into a mapping, or record why not (never raises)."""
    src = builder.rel(found.path)
    if yaml_file:
        data, why = read_bytes(found.path, MAX_CONFIG_BYTES)
        if data is None:
            builder.problem(src, found.kind, why or "unreadable")
            return None
        if b"\x00" in data[:4096]:
            builder.problem(src, found.kind, "binary data (NUL bytes), not YAML")
            return None
        text, _ = decode_text(data)
        try:
            value = yaml.safe_load(text)
        except RecursionError:
            builder.problem(src, found.kind, "YAML nested too deeply to parse; fix or remove the file")
            return None
        except yaml.YAMLError as exc:
            builder.problem(src, found.kind, f"invalid YAML: {str(exc).splitlines()[0][:200]}")
            return None
    else:
        if found.size > MAX_CONFIG_BYTES:
            builder.problem(src, found.kind, f"{found.size / 1e6:.0f} MB is too large for a config file; not read", "ignored")
            return None
        res = load_json(found.path, salvage=False)
        if res.error:
            builder.problem(src, found.kind, f"invalid JSON: {res.error}"[:500])
            return None
        value = res.value
    if value is None:
        builder.problem(src, found.kind, "empty document", "ignored")
        return None
    if not isinstance(value, Mapping):
        builder.problem(src, found.kind, f"top level is a {type(value).__name__}, expected a mapping of settings", "ignored")
        return None
    if cf.count_nodes(value) >= cf.MAX_NODES:
        builder.problem(src, found.kind, f"more than {cf.MAX_NODES} nodes: not a config (or an alias bomb); only top-level keys used", "partial")
    return value


def read_config_mapping(d: Mapping[str, Any], src: str, kind: str, builder: RunBuilder) -> bool:
    """Facts from a mapping whose kind we infer from its keys; False when it is no known config."""
    fl = cf.flavor(d)
    if fl == "deepspeed":
        builder.framework("deepspeed")
        emit(builder, src, cf.deepspeed_facts(d))
        return True
    if fl == "accelerate":
        emit(builder, src, cf.accelerate_facts(d))
        return True
    if fl in ("ms_swift", "llamafactory", "hf_args"):
        if fl != "hf_args":
            builder.framework(fl)
        elif set(d) & cf.TRL_MARKERS:
            builder.framework("trl")
        emit(builder, src, cf.args_facts(d))
        if isinstance(d.get("deepspeed"), Mapping):
            builder.framework("deepspeed")
        return True
    if "model_type" in d or "architectures" in d:
        emit(builder, src, cf.model_config_facts(d))
        return True
    return False


def read_model_config(found: Found, builder: RunBuilder) -> None:
    d = load_mapping(found, builder)
    if d is None:
        return
    src = builder.rel(found.path)
    if "model_type" in d or "architectures" in d or "vocab_size" in d:
        emit(builder, src, cf.model_config_facts(d))
    elif not read_config_mapping(d, src, found.kind, builder):
        builder.problem(src, found.kind, "config.json without model_type/architectures: not a model config", "ignored")


def read_adapter_config(found: Found, builder: RunBuilder) -> None:
    d = load_mapping(found, builder)
    if d is None:
        return
    builder.framework("peft")
    emit(builder, builder.rel(found.path), cf.adapter_facts(d))


def read_args(found: Found, builder: RunBuilder) -> None:
    """args.json (ms-swift and others) / training_args.yaml (LLaMA-Factory)."""
    d = load_mapping(found, builder, yaml_file=found.kind == "args_yaml")
    if d is None:
        return
    src = builder.rel(found.path)
    if not read_config_mapping(d, src, found.kind, builder):
        emit(builder, src, cf.args_facts(d))


def read_generic_config(found: Found, builder: RunBuilder) -> None:
    """Any other .json/.yaml: DeepSpeed, accelerate, argument dumps; anything else is ignored."""
    d = load_mapping(found, builder, yaml_file=found.kind == "yaml_config")
    if d is None:
        return
    src = builder.rel(found.path)
    if not read_config_mapping(d, src, found.kind, builder):
        builder.problem(src, found.kind, "not a known configuration (no DeepSpeed, trainer or model keys)", "ignored")


def read_hparams_yaml(found: Found, builder: RunBuilder) -> None:
    """Lightning hparams.yaml: user-defined hyper-parameters, kept verbatim plus mapped facts."""
    d = load_mapping(found, builder, yaml_file=True)
    if d is None:
        return
    src = builder.rel(found.path)
    builder.framework("lightning")
    for i, (k, v) in enumerate(d.items()):
        if i >= MAX_HPARAM_FACTS:
            break
        if cf.is_scalar(v):
            builder.fact(f"hparams.{k}", v, src, str(k), str(k))
    emit(builder, src, cf.args_facts(d))
    for alias in ("lr", "learning_rate"):
        v = d.get(alias)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            builder.fact("learning_rate", v, src, alias, alias)
    prec = d.get("precision")
    flag = cf.precision_flag(prec) if isinstance(prec, (str, int)) else None
    if flag is not None:
        builder.fact(flag, True, src, "precision", "precision")


def read_results_json(found: Found, builder: RunBuilder) -> None:
    """all/train/eval_results.json: end-of-run summary metrics, kept as ``results.<key>`` facts."""
    d = load_mapping(found, builder)
    if d is None:
        return
    src = builder.rel(found.path)
    builder.framework("hf_trainer")
    for k, v in d.items():
        if v is not None and cf.is_scalar(v):
            builder.fact(f"results.{k}", v, src, str(k), str(k))


def read_weights_index(found: Found, builder: RunBuilder) -> None:
    """``*.safetensors.index.json``: check the shard map; never look outside the run root."""
    d = load_mapping(found, builder)
    if d is None:
        return
    src = builder.rel(found.path)
    wm = d.get("weight_map")
    meta = d.get("metadata") if isinstance(d.get("metadata"), Mapping) else {}
    for k in ("total_size", "total_parameters"):
        v = meta.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            builder.fact(f"weights.{k}", v, src, f"metadata.{k}", k)
    if not isinstance(wm, Mapping):
        builder.problem(src, found.kind, "no weight_map object: not a valid shard index", "partial")
        return
    bad = [k for k, v in wm.items() if not isinstance(v, str)]
    shards = sorted({v for v in wm.values() if isinstance(v, str)})
    builder.fact("weights.tensors", len(wm), src, "weight_map", "weight_map")
    builder.fact("weights.shards", len(shards), src, "weight_map", "weight_map")
    root = builder.root if builder.root.is_dir() else builder.root.parent
    outside, missing = [], []
    for name in shards:
        target = _inside(found.path.parent, name, root)
        if target is None:
            outside.append(name)
        elif not target.is_file():
            missing.append(name)
    msgs = []
    if bad:
        msgs.append(f"{len(bad)} weight_map entries are not file names (e.g. {bad[0]!r})")
    if outside:
        msgs.append(f"{len(outside)} shard(s) point outside the run directory and were not followed: {', '.join(outside[:3])}")
    if missing:
        msgs.append(f"{len(missing)} of {len(shards)} shard file(s) are missing: {', '.join(missing[:3])}"
                    " (the save was interrupted or the files were moved); the checkpoint cannot be loaded as is")
    if msgs:
        builder.problem(src, found.kind, "; ".join(msgs), "partial")


def _inside(base: Path, name: str, root: Path) -> Path | None:
    """``base/name`` when it stays inside ``root`` (no absolute paths, no ``..`` escapes)."""
    if not name or "\x00" in name or Path(name).is_absolute() or name.startswith(("/", "\\")):
        return None
    try:
        target = (base / name).resolve()
        target.relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return None
    return target


# -- training_args.bin ------------------------------------------------------------------------


def _inert_value(v: Any, depth: int = 0) -> Any:
    """Plain value of an unpickled field: enums -> their value, torch dtypes -> their name."""
    if depth > 20:
        return None
    if isinstance(v, Stub):
        return v.name if v.module == "torch" else v.qualname
    if isinstance(v, StubObject):
        ev = enum_value(v)
        if ev is not v:
            return ev
        return plain(v)
    if isinstance(v, Mapping):
        return {str(k): _inert_value(x, depth + 1) for k, x in list(v.items())[:500]}
    if isinstance(v, (list, tuple)):
        return [_inert_value(x, depth + 1) for x in list(v)[:500]]
    if isinstance(v, float) and math.isnan(v):
        return v
    return v


def unpickle_args(data: bytes, seen: set[str] | None = None) -> tuple[Any, str]:
    """The pickled arguments object of a training_args.bin (zip or legacy torch.save, or a plain
    pickle) and its format name. Raises on corrupt input; the caller records the problem.
    ``seen`` collects the globals the pickle names (none is imported or called)."""
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            _, pkl = torch_zip_pickle(zf)
        up = InertUnpickler(io.BytesIO(pkl), torch_zip=True)
        up.globals_seen = seen if seen is not None else up.globals_seen
        return up.load(), "torch_zip"
    up = InertUnpickler(io.BytesIO(data))
    up.globals_seen = seen if seen is not None else up.globals_seen
    first = up.load()
    if isinstance(first, int) and first == LEGACY_TORCH_MAGIC:
        up.load()  # protocol version
        up.load()  # sys_info
        return up.load(), "torch_legacy"
    return first, "pickle"


def read_training_args_bin(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    data, why = read_bytes(found.path, MAX_ARGS_BIN_BYTES)
    if data is None:
        builder.problem(src, found.kind, why or "unreadable")
        return
    if not data:
        builder.problem(src, found.kind, "empty file (the save was interrupted)")
        return
    seen: set[str] = set()
    try:
        obj, fmt = unpickle_args(data, seen)
    except Exception as exc:  # noqa: BLE001 - any corrupt pickle/zip is a problem record
        builder.problem(src, found.kind, f"cannot unpickle ({type(exc).__name__}: {str(exc)[:150]}); "
                        "the file is truncated or not a torch.save of TrainingArguments")
        return
    from autopsy.checkpoints.torch_file import classify_globals

    dangerous, _ = classify_globals(seen)
    if dangerous:
        builder.problem(src, found.kind, f"the pickle references {', '.join(dangerous[:5])}: loading it with "
                        "pickle or torch.load(weights_only=False) would run that code. It was NOT executed and "
                        "nothing from it was used; do not load this file outside autopsy, and find out who wrote it")
        return
    if isinstance(obj, StubObject):
        qual = obj.qualname
        fields = obj.fields()
    elif isinstance(obj, Mapping):
        qual, fields = "dict", dict(obj)
    else:
        builder.problem(src, found.kind, f"holds a {type(obj).__name__}, not a TrainingArguments object", "ignored")
        return
    if not fields:
        builder.problem(src, found.kind, f"{qual}: no attributes recovered from the pickle", "partial")
        return
    values = {str(k): _inert_value(v) for k, v in fields.items()}
    if qual.startswith("trl."):
        builder.framework("trl")
    elif qual.startswith("swift."):
        builder.framework("ms_swift")
    if qual.startswith(("transformers.", "trl.", "swift.")):
        builder.framework("hf_trainer")
    builder.fact("training_args.class", qual, src, fmt, None)
    emit(builder, src, cf.args_facts(values))
    if isinstance(values.get("deepspeed"), Mapping) or values.get("deepspeed"):
        builder.framework("deepspeed")


READERS = {
    "adapter_config": read_adapter_config,
    "model_config": read_model_config,
    "args_json": read_args,
    "args_yaml": read_args,
    "training_args_bin": read_training_args_bin,
    "json_config": read_generic_config,
    "yaml_config": read_generic_config,
    "hparams_yaml": read_hparams_yaml,
    "results_json": read_results_json,
    "weights_index": read_weights_index,
}

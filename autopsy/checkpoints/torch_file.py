"""torch.save files (zip and legacy) read without executing anything.

The pickle goes through :mod:`autopsy.safe_pickle` (every global becomes an inert stub), tensors come
back as ``TensorRef`` and their bytes are streamed from the raw storages: the zip's ``data/<key>``
entries (stored uncompressed, read at their data offset) or, for the legacy format, the storages
that follow the pickles. Globals outside torch's ``weights_only`` allowlist are reported by name;
ones that would run code under ``pickle.load`` (``posix.system`` and friends) make the file a
problem. Tensor names are the paths in the object tree, in pickle (= model) order; a top-level
weights container (``module``, ``state_dict``, ``model``) is dropped from the name.
"""

from __future__ import annotations

import pickle
import struct
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from autopsy.checkpoints.scanfile import FileScan, Reader, numel_of, to_stat
from autopsy.checkpoints.stats import feed, nbytes_of
from autopsy.safe_pickle import (
    LEGACY_TORCH_MAGIC,
    InertUnpickler,
    StorageRef,
    StubObject,
    TensorRef,
    _TensorRebuilder,
    loads_inert,
    torch_zip_pickle,
)

#: top-level keys whose value is the model's state dict (DeepSpeed, Lightning, minimind resume, plain)
WEIGHT_CONTAINERS = ("module", "state_dict", "model", "model_state_dict")
#: a non-contiguous tensor is gathered in memory only when its storage span is below this
MAX_GATHER_BYTES = 64 * 1024 * 1024
#: data.pkl larger than this is not a checkpoint pickle we can hold in memory
MAX_PICKLE_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 40

#: modules/callables that run code or touch the system when a pickle is loaded for real
DANGEROUS_MODULES = ("os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "runpy", "pty",
                     "webbrowser", "code", "ctypes", "marshal", "pickle", "_pickle", "types", "multiprocessing",
                     "asyncio", "urllib", "http", "requests", "commands", "popen2", "signal", "tempfile", "io",
                     "pathlib", "platform", "operator", "functools", "inspect", "builtins.__import__")
DANGEROUS_BUILTINS = {"eval", "exec", "compile", "getattr", "setattr", "delattr", "__import__", "open", "apply",
                      "input", "breakpoint", "globals", "locals", "vars", "execfile", "file", "reload", "memoryview"}
#: data-only globals torch's weights_only unpickler also accepts, plus numpy arrays (rng_state.pth)
SAFE_PREFIXES = ("torch._utils._rebuild", "torch._tensor._rebuild", "torch.Size", "torch.device", "torch.Tensor",
                 "torch.nn.parameter.Parameter", "collections.OrderedDict", "collections.Counter",
                 "collections.defaultdict", "_codecs.encode", "numpy.core.multiarray._reconstruct",
                 "numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype", "numpy.core.multiarray.scalar",
                 "numpy._core.multiarray.scalar", "numpy.dtypes.", "builtins.set", "builtins.frozenset", "builtins.list",
                 "builtins.dict", "builtins.tuple", "builtins.bytearray", "builtins.complex", "builtins.slice",
                 "builtins.int", "builtins.float", "builtins.bool", "builtins.str", "builtins.bytes", "__builtin__.set")
#: framework classes that real checkpoints reference (DeepSpeed optimizer states, HF training args)
KNOWN_FRAMEWORKS = ("deepspeed.", "transformers.", "accelerate.", "peft.", "trl.", "lightning.", "pytorch_lightning.",
                    "lightning_fabric.", "torch.optim.", "torch.amp.", "torch.cuda.amp.", "swift.", "llamafactory.")


def classify_globals(names: set[str]) -> tuple[list[str], list[str]]:
    """(dangerous, unexpected) globals of a pickle; neither list is ever imported or called."""
    dangerous, unexpected = [], []
    for g in sorted(names):
        module, _, attr = g.rpartition(".")
        top = module.split(".")[0]
        if top in ("builtins", "__builtin__") and attr in DANGEROUS_BUILTINS or top in DANGEROUS_MODULES or module in DANGEROUS_MODULES:
            dangerous.append(g)
        elif g.startswith(SAFE_PREFIXES) or g.startswith(KNOWN_FRAMEWORKS) or module == "torch" and (attr.endswith("Storage") or attr in _TORCH_DTYPES):
            continue
        else:
            unexpected.append(g)
    return dangerous, unexpected


_TORCH_DTYPES = {"float64", "double", "float32", "float", "float16", "half", "bfloat16", "int64", "long", "int32", "int",
                 "int16", "short", "int8", "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz", "float8_e8m0fnu", "uint16", "uint32", "uint64", "complex64", "complex128", "dtype"}


def _report_globals(scan: FileScan, names: set[str]) -> None:
    scan.globals_seen = sorted(names)
    dangerous, unexpected = classify_globals(names)
    if dangerous:
        scan.problem(f"the pickle references {', '.join(dangerous[:5])}: loading it with pickle or "
                     "torch.load(weights_only=False) would run that code. It was NOT executed; do not load this "
                     "file outside autopsy, and find out who wrote it", "partial")
    if unexpected:
        scan.problem(f"the pickle references {', '.join(unexpected[:5])}"
                     f"{' and more' if len(unexpected) > 5 else ''} (not executed; torch.load(weights_only=True) "
                     "would refuse it)", "read")


# -- tree walking ------------------------------------------------------------------------------
def as_tensor(obj: Any) -> TensorRef | None:
    if isinstance(obj, TensorRef):
        return obj
    # torch._tensor._rebuild_from_type_v2(func, type, args, state): ZeRO-3 flat groups, subclasses
    if isinstance(obj, StubObject) and obj.cls.name == "_rebuild_from_type_v2" and len(obj.args) >= 3:
        func, args = obj.args[0], obj.args[2]
        if isinstance(func, _TensorRebuilder) and isinstance(args, tuple):
            got = func(*args)
            return got if isinstance(got, TensorRef) else None
    return None


def walk_tree(obj: Any) -> Iterator[tuple[str, Any]]:
    """(name, node) for every tensor (a TensorRef, not descended) and every dict of an inert pickle,
    in pickle order. Names join keys and list indices with dots; a top-level weights container
    (``state_dict``, ``module``...) is not part of the name; an object's attributes are walked as a
    dict at the object's place. Cycles and depth are bounded."""
    seen: set[int] = set()

    def walk(o: Any, prefix: str, depth: int) -> Iterator[tuple[str, Any]]:
        t = as_tensor(o)
        if t is not None:
            yield prefix, t
            return
        if depth > MAX_DEPTH or id(o) in seen:
            return
        if isinstance(o, dict):
            seen.add(id(o))
            yield prefix, o
            for k, v in o.items():
                key = str(k)
                name = key if not prefix else f"{prefix}.{key}"
                if depth == 0 and key in WEIGHT_CONTAINERS and isinstance(v, dict):
                    name = ""
                yield from walk(v, name, depth + 1)
        elif isinstance(o, (list, tuple)):
            seen.add(id(o))
            for i, v in enumerate(o):
                yield from walk(v, f"{prefix}.{i}" if prefix else str(i), depth + 1)
        elif isinstance(o, StubObject):
            seen.add(id(o))
            f = o.fields()
            if f:
                yield from walk(f, prefix, depth + 1)

    yield from walk(obj, "", 0)


def iter_tensors(obj: Any) -> Iterator[tuple[str, TensorRef]]:
    """(name, tensor) pairs in pickle order (see :func:`walk_tree` for the names)."""
    for name, node in walk_tree(obj):
        if isinstance(node, TensorRef):
            yield name, node


# -- storages ----------------------------------------------------------------------------------
def _contiguous(t: TensorRef) -> bool:
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _stat_tensor(reader: Reader, scan: FileScan, name: str, t: TensorRef, where: dict[str, tuple[int, int]]) -> None:
    dtype = t.dtype or t.storage.dtype
    shape = list(t.shape)
    numel = numel_of(shape)
    if dtype is None:
        scan.problem(f"tensor {name!r}: unknown storage type, not scanned")
        return
    esize_bytes = nbytes_of(dtype, 1)
    loc = where.get(t.storage.key)
    if loc is None or esize_bytes is None:
        scan.problem(f"tensor {name!r}: storage {t.storage.key!r} is missing from the file")
        return
    start, length = loc
    if numel == 0:
        scan.tensors.append(to_stat(name, dtype, shape, 0, reader.accumulator(dtype)))
        return
    if _contiguous(t):
        lo, n = t.offset * esize_bytes, numel * esize_bytes
        if lo + n > length:
            scan.problem(f"tensor {name!r}: needs bytes {lo}-{lo + n} of a {length}-byte storage: truncated")
            return
        stat, got = reader.stat_range(name, dtype, shape, numel, start + lo, n)
        if got < n:
            scan.problem(f"tensor {name!r}: short read ({got} of {n} bytes)")
            return
        scan.tensors.append(stat)
        return
    span = (t.offset + sum((s - 1) * st for s, st in zip(t.shape, t.stride)) + 1) * esize_bytes
    if span > MAX_GATHER_BYTES or span > length or min(t.stride, default=0) < 0:
        scan.problem(f"tensor {name!r}: non-contiguous view over {span} bytes, not scanned")
        return
    raw = bytearray(span)
    reader.fh.seek(start)
    reader.fh.readinto(raw)  # type: ignore[attr-defined]
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(esize_bytes)
    if uint is None:
        scan.problem(f"tensor {name!r}: non-contiguous {dtype} view, not scanned")
        return
    base = np.frombuffer(raw, dtype=uint)
    view = np.lib.stride_tricks.as_strided(base[t.offset:], shape=t.shape,
                                           strides=[s * esize_bytes for s in t.stride], writeable=False)
    acc = reader.accumulator(dtype)
    feed(acc, np.ascontiguousarray(view).reshape(-1))
    scan.tensors.append(to_stat(name, dtype, shape, numel, acc))


def _stat_all(fh: Any, scan: FileScan, obj: Any, where: dict[str, tuple[int, int]], digest: bool = True) -> None:
    used: set[str] = set()
    with Reader(fh, digest) as reader:
        for name, t in iter_tensors(obj):
            scan.names[id(t)] = name
            if name in used:
                name = f"{name}#{len(used)}"
            used.add(name)
            _stat_tensor(reader, scan, name, t, where)


# -- zip ---------------------------------------------------------------------------------------
def _zip_locations(path: Path, zf: zipfile.ZipFile, prefix: str, scan: FileScan) -> dict[str, tuple[int, int]]:
    where: dict[str, tuple[int, int]] = {}
    pre = prefix + "data/"
    with open(path, "rb") as fh:
        for info in zf.infolist():
            if not info.filename.startswith(pre) or info.is_dir():
                continue
            key = info.filename[len(pre):]
            if info.compress_type != zipfile.ZIP_STORED:
                scan.problem(f"storage {key!r} is compressed (the archive was re-zipped); not scanned")
                continue
            fh.seek(info.header_offset)
            local = fh.read(30)
            if len(local) < 30 or local[:4] != b"PK\x03\x04":
                scan.problem(f"storage {key!r}: bad zip local header (truncated or corrupt archive)")
                continue
            nlen, elen = struct.unpack("<HH", local[26:30])
            where[key] = (info.header_offset + 30 + nlen + elen, info.file_size)
    return where


def scan_torch(path: Path, scan: FileScan | None = None, digest: bool = True) -> FileScan:
    scan = scan or FileScan(path, "torch_zip")
    t0 = time.perf_counter()
    try:
        scan.bytes = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        scan.problem(f"cannot read: {exc.strerror or exc}", "unreadable")
        return scan
    try:
        loaded = _load(path, scan, head)
        if loaded is not None:
            with open(path, "rb", buffering=0) as fh:
                _stat_all(fh, scan, loaded[0], loaded[1], digest)
    except zipfile.BadZipFile as exc:
        scan.problem(f"corrupt or truncated zip archive ({exc}); re-copy or re-save the checkpoint", "unreadable")
    except _READ_ERRORS as exc:
        scan.problem(f"cannot read the torch pickle: {type(exc).__name__}: {str(exc)[:160]}",
                     "unreadable" if not scan.tensors else "partial")
    scan.seconds = time.perf_counter() - t0
    return scan


_READ_ERRORS = (OSError, EOFError, OverflowError, ValueError, TypeError, IndexError, KeyError, AttributeError, RecursionError,
                MemoryError, struct.error, pickle.UnpicklingError)


def _load(path: Path, scan: FileScan, head: bytes) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    """(inert object, storage key -> (file offset, bytes)) or None (problem recorded)."""
    if head.startswith(b"PK\x03\x04"):
        return _scan_zip(path, scan)
    if head[:2] == b"\x80\x02" and head[2:4] == b"\x8a\x0a":
        scan.format = "torch_legacy"
        return _scan_legacy(path, scan)
    if scan.bytes > 262 and _is_tar(path):
        scan.format = "torch_tar"
        scan.problem("pre-1.0 tar-based torch.save format: not supported; re-save it with a current torch", "unreadable")
    elif head[:1] == b"\x80":
        scan.format = "pickle"
        _scan_plain_pickle(path, scan)
    else:
        scan.problem("not a torch.save file (no zip or pickle header); truncated or another format", "unreadable")
    return None


def _is_tar(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(257)
        return fh.read(5) == b"ustar"


def _scan_zip(path: Path, scan: FileScan) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    scan.format = "torch_zip"
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if n.endswith("data.pkl")]
        if names:
            info = zf.getinfo(sorted(names, key=len)[0])
            if info.file_size > MAX_PICKLE_BYTES:
                scan.problem(f"data.pkl is {info.file_size} bytes: too large to be a checkpoint pickle", "unreadable")
                return None
        prefix, data = torch_zip_pickle(zf)
        obj, seen = loads_inert(data, torch_zip=True)
        scan.obj = obj
        _report_globals(scan, seen)
        where = _zip_locations(path, zf, prefix, scan)
    return obj, where


def _scan_legacy(path: Path, scan: FileScan) -> tuple[Any, dict[str, tuple[int, int]]] | None:
    """Legacy format: magic, protocol, sys_info, object, storage keys (pickles), then raw storages."""
    with open(path, "rb") as fh:
        def load() -> tuple[Any, set[str]]:
            up = InertUnpickler(fh, torch_zip=True)  # type: ignore[arg-type]
            return up.load(), up.globals_seen

        magic, _ = load()
        if magic != LEGACY_TORCH_MAGIC:
            scan.problem("legacy torch file with a wrong magic number: corrupt", "unreadable")
            return None
        load()  # protocol version
        sys_info, _ = load()
        if isinstance(sys_info, dict) and sys_info.get("little_endian") is False:
            scan.problem("big-endian legacy torch file: not supported", "unreadable")
            return None
        obj, seen = load()
        scan.obj = obj
        _report_globals(scan, seen)
        keys, _ = load()
        storages: dict[str, StorageRef] = {}
        for _, t in iter_tensors(obj):
            storages.setdefault(t.storage.key, t.storage)
        where: dict[str, tuple[int, int]] = {}
        pos = fh.tell()
        size = scan.bytes
        for key in keys if isinstance(keys, list) else []:
            ref = storages.get(str(key))
            esize = nbytes_of(ref.dtype, 1) if ref is not None and ref.dtype else None
            if pos + 8 > size:
                scan.problem("truncated: storages end before the last one", "partial")
                break
            fh.seek(pos)
            (numel,) = struct.unpack("<q", fh.read(8))
            if esize is None:
                scan.problem(f"storage {key!r} has an unknown element type; storages after it are not scanned")
                break
            where[str(key)] = (pos + 8, min(numel * esize, max(0, size - pos - 8)))
            pos += 8 + numel * esize
    return obj, where


def _scan_plain_pickle(path: Path, scan: FileScan) -> None:
    if scan.bytes > MAX_PICKLE_BYTES:
        scan.problem("a plain pickle larger than 512 MB: not read", "unreadable")
        return
    obj, seen = loads_inert(path.read_bytes())
    scan.obj = obj
    _report_globals(scan, seen)
    scan.problem("a plain pickle, not a torch.save file: tensors inside are not scanned", "read")
    return


def locate(path: Path, scan: FileScan) -> list[tuple[str, str, list[int], int, int]]:
    """[(name, dtype, shape, file offset, bytes)] of the contiguous tensors, for ``autopsy diff``."""
    out: list[tuple[str, str, list[int], int, int]] = []
    try:
        scan.bytes = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(16)
        loaded = _load(path, scan, head)
    except zipfile.BadZipFile as exc:
        scan.problem(f"corrupt or truncated zip archive ({exc})", "unreadable")
        return out
    except _READ_ERRORS as exc:
        scan.problem(f"cannot read the torch pickle: {type(exc).__name__}: {str(exc)[:160]}", "unreadable")
        return out
    if loaded is None:
        return out
    obj, where = loaded
    for name, t in iter_tensors(obj):
        dtype = t.dtype or t.storage.dtype
        esize = nbytes_of(dtype, 1) if dtype else None
        loc = where.get(t.storage.key)
        if esize is None or loc is None:
            continue
        if not _contiguous(t):
            scan.problem(f"tensor {name!r}: non-contiguous view, not compared", "read")
            continue
        n = numel_of(list(t.shape)) * esize
        if t.offset * esize + n <= loc[1]:
            out.append((name, dtype, list(t.shape), loc[0] + t.offset * esize, n))
    return out

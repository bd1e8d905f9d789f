"""safetensors reader: the header is parsed and validated like the official library, then the data
section is streamed in file order through one buffer (formats.md §3).

Validation mirrors safetensors' Rust checks (header <= 100 MB, valid JSON object, known dtypes,
sizes = numel*bits/8, contiguous offsets, file size) so a file the library would refuse is
reported as such; a partly valid file still gets every tensor that lies inside the file scanned.
"""

from __future__ import annotations

import json
import os
import struct
import time
from math import prod
from operator import itemgetter
from pathlib import Path
from typing import Any

from autopsy.checkpoints.scanfile import FileScan, Reader
from autopsy.checkpoints.smallbatch import (
    BATCH_BYTES,
    BATCH_BYTES_NO_DIGEST,
    BATCH_TENSORS,
    BATCHABLE,
    SMALL_TENSOR_BYTES,
    stat_window,
)
from autopsy.checkpoints.stats import DTYPE_BITS, UNCHECKED_DTYPES

#: the official library refuses headers above this size (MAX_HEADER_SIZE)
MAX_HEADER_SIZE = 100_000_000


def read_header(path: Path, scan: FileScan, source: Any = None
                ) -> tuple[list[tuple[str, str, list[int], int, int]], int] | None:
    """[(name, dtype, shape, begin, end)] sorted by offset, and the data section start; None if unusable.

    ``source``: anything with ``size`` and ``read(offset, n) -> bytes`` (a remote object,
    :mod:`.remote`); by default the local file at ``path``.
    """
    try:
        if source is None:
            size = path.stat().st_size
            with open(path, "rb") as fh:
                raw = _header_bytes(lambda off, n: (fh.seek(off), fh.read(n))[1], size, scan)
        else:
            size = source.size
            raw = _header_bytes(source.read, size, scan)
    except OSError as exc:
        scan.problem(f"cannot read: {exc.strerror or exc}", "unreadable")
        return None
    if raw is None:
        return None
    hlen = len(raw)
    try:
        text = raw.decode("utf-8")
        del raw  # a 100 MB header: the bytes and the text need not both stay while it is parsed
        header = json.loads(text, object_hook=_compact)
        del text
    except (UnicodeDecodeError, ValueError) as exc:
        scan.problem(f"safetensors header is not valid JSON ({str(exc)[:80]}): corrupt file", "unreadable")
        return None
    if not isinstance(header, dict):
        scan.problem("safetensors header is not a JSON object: corrupt file", "unreadable")
        return None
    meta = header.pop("__metadata__", None)
    if isinstance(meta, dict):
        scan.metadata = {str(k): v for k, v in meta.items()}
    # _compact made every valid entry a tuple: the common case is one C-level pass
    entries = [(name, *info) for name, info in header.items() if type(info) is tuple]
    if len(entries) != len(header):
        for name, info in header.items():
            if type(info) is not tuple:
                scan.problem(_entry_problem(name, info))
    entries.sort(key=_BY_OFFSET)
    data_start = 8 + hlen
    pos = 0
    for name, _, _, begin, end in entries:
        if begin != pos:
            scan.problem(f"tensor {name!r} starts at byte {begin}, expected {pos}: offsets not contiguous (InvalidOffset)")
            break
        pos = end
    if data_start + pos != size:
        if data_start + pos > size:
            scan.problem(f"truncated: tensors need {data_start + pos} bytes, the file has {size}; tensors past the end are not scanned")
        else:
            scan.problem(f"{size - data_start - pos} trailing bytes after the last tensor (MetadataIncompleteBuffer)")
    return entries, data_start


_DTYPES = {d: d for d in DTYPE_BITS}  # one str object per dtype, not one per tensor


def _header_bytes(read: Any, size: int, scan: FileScan) -> bytes | None:
    """The JSON header's bytes, or None with the problem recorded (too short, too long, truncated)."""
    head = read(0, 8)
    if len(head) < 8:
        scan.problem(f"not a safetensors file: {len(head)} bytes, the 8-byte header length is missing; the file is truncated", "unreadable")
        return None
    (hlen,) = struct.unpack("<Q", head)
    if hlen > MAX_HEADER_SIZE:
        scan.problem(f"safetensors header length {hlen} exceeds the 100 MB limit: corrupt or not a safetensors file", "unreadable")
        return None
    if 8 + hlen > size:
        scan.problem(f"truncated: header says {hlen} header bytes but the file has {size} bytes; re-copy or re-save the checkpoint", "unreadable")
        return None
    raw = read(8, hlen)
    if len(raw) < hlen:
        scan.problem(f"truncated: {len(raw)} of {hlen} header bytes could be read", "unreadable")
        return None
    return raw


def _compact(d: dict) -> Any:
    """json object_hook: a valid tensor entry becomes (dtype, shape, begin, end) as soon as it is parsed.

    Why: a 100k-tensor header parsed to dicts holds ~600 B per tensor at once (the scan's peak
    memory); the tuple holds ~200 B. The checks the official library makes on an entry (known dtype,
    shape >= 0, begin <= end, bytes = numel * bits / 8) run here too, so anything that fails them
    stays a dict and :func:`_entry_problem` says why. map/prod/min run in C: this is most of the
    per-tensor cost of a big header.
    """
    offs = d.get("data_offsets")
    if type(offs) is not list:
        return d
    try:
        dtype = _DTYPES[d["dtype"]]
        shape = list(map(int, d["shape"]))
        begin, end = map(int, offs)
    except (KeyError, TypeError, ValueError):
        return d
    if (shape and min(shape) < 0) or end < begin:
        return d
    total = prod(shape) * DTYPE_BITS[dtype]
    if total % 8 or total // 8 != end - begin:
        return d
    return dtype, shape, begin, end


def _entry_problem(name: str, info: Any) -> str:
    """Why ``_compact`` left a header entry a dict (the safetensors library would refuse it)."""
    try:
        dtype = str(info["dtype"])
        shape = list(map(int, info["shape"]))
        begin, end = map(int, info["data_offsets"])
    except (KeyError, TypeError, ValueError):
        return f"tensor {name!r}: malformed header entry {str(info)[:100]}"
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return f"tensor {name!r}: unknown dtype {dtype!r} (the safetensors library would refuse the file)"
    if (shape and min(shape) < 0) or end < begin:
        return f"tensor {name!r}: invalid shape {shape} or offsets [{begin}, {end}]"
    total = prod(shape) * bits
    expected = total // 8 if total % 8 == 0 else None
    return f"tensor {name!r}: {end - begin} bytes for {dtype}{shape}, expected {expected} (TensorInvalidInfo)"


_BY_OFFSET = itemgetter(3, 4)


def scan_safetensors(path: Path, scan: FileScan | None = None, digest: bool = True,
                     part: tuple[int, int] = (0, 1)) -> FileScan:
    """Scan one safetensors file; ``part=(i, k)``: only the tensors that start in the i-th of k equal
    byte ranges of the data section (parallel workers on one big file; merge with :func:`merge_parts`).
    The header's problems are reported by part 0 only."""
    scan = scan or FileScan(path, "safetensors")
    t0 = time.perf_counter()
    i, k = part
    try:
        scan.bytes = path.stat().st_size
    except OSError:
        pass
    got = read_header(path, scan if i == 0 else FileScan(path, "safetensors"))
    if got is not None:
        entries, data_start = got
        if k > 1:
            span = max((e[4] for e in entries), default=0)
            lo, hi = span * i // k, span * (i + 1) // k
            entries = [e for e in entries if lo <= e[3] < hi or (i == k - 1 and e[3] == hi)]
        try:
            with open(path, "rb", buffering=0) as fh, Reader(fh, digest) as reader:
                scan_entries(scan, reader, entries, data_start, digest)
        except OSError as exc:
            scan.problem(f"read error: {exc.strerror or exc}", "unreadable" if not scan.tensors else "partial")
        unchecked = sorted({t.dtype for t in scan.tensors if t.dtype in UNCHECKED_DTYPES})
        if unchecked:
            scan.problem(f"{', '.join(unchecked)} tensors: packed 6-bit values are not decoded; zeros and NaN not checked", "read")
    scan.seconds = time.perf_counter() - t0
    return scan


def scan_entries(scan: FileScan, reader: Any, entries: list[tuple[str, str, list[int], int, int]], data_start: int,
                 digest: bool) -> None:
    """Stats of every entry inside the file, in file order; ``reader``: :class:`Reader` or a remote one
    (``stat_range`` and ``bytes_at``). Runs of small contiguous tensors go through :mod:`.smallbatch`;
    the header's entry tuples are handed on as they are (no per-tensor copies)."""
    batch: list[tuple[str, str, list[int], int, int]] = []
    limit = scan.bytes - data_start
    b_end, b_lo = -1, 0
    batch_bytes = BATCH_BYTES if digest else BATCH_BYTES_NO_DIGEST
    for e in entries:
        name, dtype, shape, begin, end = e
        if end > limit:
            continue  # reported as truncated above
        if 0 < end - begin <= SMALL_TENSOR_BYTES and dtype in BATCHABLE:
            # contiguous tensors of mixed dtypes share a batch (each dtype gets its own passes: stat_window)
            if begin != b_end or end - b_lo > batch_bytes or len(batch) >= BATCH_TENSORS:
                if batch:
                    _flush(scan, reader, batch, data_start, digest)
                b_lo = begin
            batch.append(e)
            b_end = end
            continue
        if batch:
            _flush(scan, reader, batch, data_start, digest)
            b_end = -1
        stat, read = reader.stat_range(name, dtype, shape, prod(shape), data_start + begin, end - begin)
        if read < end - begin:
            scan.problem(f"tensor {name!r}: short read ({read} of {end - begin} bytes)")
            continue
        scan.tensors.append(stat)
    _flush(scan, reader, batch, data_start, digest)


def _flush(scan: FileScan, reader: Any, batch: list[tuple[str, str, list[int], int, int]], data_start: int,
           digest: bool) -> None:
    """Scan a run of contiguous small tensors in one go (see :mod:`.smallbatch`); empties ``batch``."""
    if not batch:
        return
    lo, hi = batch[0][3], batch[-1][4]
    raw = reader.bytes_at(data_start + lo, hi - lo)
    if raw is None:
        for name, _, _, begin, end in batch:
            scan.problem(f"tensor {name!r}: short read (0 of {end - begin} bytes)")
    else:
        scan.tensors.extend(stat_window(raw, batch, digest, lo, getattr(reader, "_scratch", None)))
    batch.clear()


def merge_parts(parts: list[FileScan]) -> FileScan:
    """One FileScan from the parts of one file, in part order (tensors stay in file order)."""
    out = parts[0]
    for p in parts[1:]:
        out.tensors.extend(p.tensors)
        out.problems.extend(x for x in p.problems if x not in out.problems)
        out.seconds += p.seconds
        out.bytes = max(out.bytes, p.bytes)
    return out


def read_index(path: Path, scan: FileScan | None = None) -> FileScan:
    """``*.safetensors.index.json`` / ``*.bin.index.json``: the shard map (no tensors)."""
    scan = scan or FileScan(path, "index")
    try:
        scan.bytes = os.path.getsize(path)
        if scan.bytes > MAX_HEADER_SIZE:
            scan.problem("index file larger than 100 MB: not a weights index", "unreadable")
            return scan
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        scan.problem(f"weights index is not valid JSON ({str(exc)[:80]})", "unreadable")
        return scan
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict):
        scan.problem("weights index has no weight_map object", "unreadable")
        return scan
    scan.metadata = {"weight_map": {str(k): str(v) for k, v in wm.items()},
                     "metadata": data.get("metadata") if isinstance(data.get("metadata"), dict) else {}}
    return scan

"""Statistics of many small tensors at once: one set of numpy passes per run of neighbours.

Why: a MoE checkpoint holds tens of thousands of tensors, many of them tiny (router weights,
norms, biases). Scanning each through :func:`stats.feed` costs ~10 numpy calls of 1-5 us each
per tensor, so per-tensor overhead, not bytes, decided the scan time (100k tensors: ~12 s). Here a
run of *contiguous* same-dtype small tensors is viewed as one array and every statistic comes
out per tensor from segment reductions (``ufunc.reduceat`` / cumulative counts), so the per-tensor
cost is a few array elements plus building its ``TensorStat``.

Every result is identical to the one-tensor path (tests/test_checkpoints_scale.py checks it bit
for bit, digest included): the same counts, the same max over finite values, and the same digest,
because the uint64 word sum of a tensor's bytes equals the sum of ``byte << 8 * (pos % 8)`` with
``pos`` counted from the tensor's own first byte (the tail bytes are the same little-endian int).
"""

from __future__ import annotations

from math import prod

import numpy as np

from autopsy.checkpoints.stats import _M64, CHUNK_BYTES, FLOAT_DTYPES, IEEE, INT_UINT, _decode_max, scratch_buffer
from autopsy.model import TensorStat

#: tensors up to this many bytes are batched (one chunk of the one-tensor path, so the digest matches).
#: MoE experts are often 50-500 KB each: one at a time they cost ~45 us of per-call overhead each
SMALL_TENSOR_BYTES = CHUNK_BYTES
assert SMALL_TENSOR_BYTES <= CHUNK_BYTES
#: bytes of tensor data per batch: the digest pass needs ~32 bytes of scratch per byte (~8 MB here)
BATCH_BYTES = 256 * 1024
#: the same without digests (``autopsy scan``, a run with one checkpoint): ~3 bytes of scratch per byte;
#: a 0.76 GB shard of 80 KB experts scanned in ~20% less CPU than with 256 KiB batches
BATCH_BYTES_NO_DIGEST = 2 * 1024 * 1024
#: tensors per batch at most: 2 MiB of 16-byte tensors would be 131k entries and stats built at once
#: (+15 MB peak for a 100k-tensor file); this many keeps a batch's Python objects to a few MB
BATCH_TENSORS = 16384
#: dtypes batched (others - FNUZ fp8, E8M0, F4, F6 - take the one-tensor path)
BATCHABLE = set(IEEE) | set(INT_UINT)
_FLOAT_VIEW = {"F64": np.float64, "F32": np.float32, "C64": np.float32, "C128": np.float64, "F16": np.float16}


def segment_counts(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """True values of ``mask`` per segment (segments begin at ``starts``, the last runs to the end). A sparse mask
    (a few zeros or NaN in a 2 MB window: the usual case) is counted from its true positions; a dense one from a
    running count (8 bytes per element written)."""
    hits = np.flatnonzero(mask)
    if hits.size * 16 < mask.size:
        return np.bincount(np.searchsorted(starts, hits, side="right") - 1, minlength=starts.size)
    c = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
    ends = np.append(starts[1:], mask.size)
    return c[ends] - c[starts]


def batch_digests(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The digest :func:`stats.digest_hex` gives each tensor read alone (one chunk each)."""
    rel = np.arange(raw.size, dtype=np.int64) - np.repeat(starts, lengths)
    shifts = ((rel & 7) << 3).astype(np.uint64)
    del rel
    vals = np.left_shift(raw.astype(np.uint64), shifts)
    sums = np.add.reduceat(vals, starts, dtype=np.uint64).tolist()
    out = []
    for s, n in zip(sums, lengths.tolist()):
        d = (s + n) & _M64  # stats._digest of one chunk: (0 * _DIGEST_MULT + sum + length) mod 2**64
        out.append(f"{n:x}-{d:016x}")
    return out


def stat_window(raw: np.ndarray, items: list[tuple[str, str, list[int], int, int]], digest: bool,
                lo: int = 0, scratch: dict[type, np.ndarray] | None = None) -> list[TensorStat]:
    """:func:`stat_batch` of contiguous tensors of any batchable dtypes, in ``items`` order.

    Checkpoints interleave dtypes tensor by tensor (a BF16 expert and its F32 scales, an FP8 weight and its F32
    ``weight_scale_inv``); cut into same-dtype runs, every run would pay the passes' fixed cost (~30-120 us) for a
    few tensors. Here the dtype with the most bytes is computed over the whole window in place, the other tensors
    being segments whose results are dropped (and whose values cannot reach its guards: see ``foreign``); the other
    dtypes' tensors, the small share, are gathered (copied) into one array each. When the window's tensors do not
    all keep the main dtype's element alignment (an odd-length int8 tensor), it is cut into same-dtype runs."""
    dtype = items[0][1]
    if all(it[1] == dtype for it in items):
        return stat_batch(raw, items, digest, lo, scratch=scratch)
    nbytes: dict[str, int] = {}
    for it in items:
        nbytes[it[1]] = nbytes.get(it[1], 0) + it[4] - it[3]
    main = max(nbytes, key=nbytes.__getitem__)
    size = _itemsize(main)
    out: list[TensorStat | None] = [None] * len(items)
    if any((it[4] - it[3]) % size for it in items):
        k = 0
        while k < len(items):  # same-dtype runs, as contiguous slices of the window
            j = k
            while j + 1 < len(items) and items[j + 1][1] == items[k][1]:
                j += 1
            run = items[k:j + 1]
            out[k:j + 1] = stat_batch(raw[run[0][3] - lo:run[-1][4] - lo], run, digest, run[0][3], scratch=scratch)
            k = j + 1
        return out  # type: ignore[return-value]
    keep = [i for i, it in enumerate(items) if it[1] == main]
    for i, st in zip(keep, stat_batch(raw, items, digest, lo, keep=keep, scratch=scratch)):
        out[i] = st
    for dt in nbytes:
        if dt == main:
            continue
        idx = [i for i, it in enumerate(items) if it[1] == dt]
        part = [items[i] for i in idx]
        lengths = np.fromiter((it[4] - it[3] for it in part), dtype=np.int64, count=len(part))
        sub = np.concatenate([raw[it[3] - lo:it[4] - lo] for it in part])
        starts = np.zeros(len(part), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        for i, st in zip(idx, stat_batch(sub, part, digest, byte_starts=starts, scratch=scratch)):
            out[i] = st
    return out  # type: ignore[return-value]


def _itemsize(dtype: str) -> int:
    spec = IEEE.get(dtype)
    return np.dtype(spec.uint if spec is not None else INT_UINT[dtype]).itemsize


def stat_batch(raw: np.ndarray, items: list[tuple[str, str, list[int], int, int]], digest: bool,
               lo: int = 0, byte_starts: np.ndarray | None = None, keep: list[int] | None = None,
               scratch: dict[type, np.ndarray] | None = None) -> list[TensorStat]:
    """``raw``: the bytes of contiguous tensors ``items`` = [(name, dtype, shape, begin, end)] (safetensors
    header entries, offsets in the data section), one dtype; ``raw[0]`` is at offset ``lo``, or each tensor's
    first byte is at ``byte_starts`` in ``raw`` (tensors gathered from elsewhere).
    ``shape`` lists are kept (not copied): the caller hands over fresh ones.

    ``keep``: the stats of these items only (their dtype); the others are foreign segments of the window, of
    other dtypes, read as this dtype and dropped. Their elements are set to the smallest non-zero finite
    pattern in the abs-value array, so they cannot trip the whole-array guards (a zero, a NaN pattern) that
    decide which passes run; per-segment results keep every segment apart anyway. Every length must be a
    multiple of this dtype's element size.

    ``scratch``: the reader's buffers by element type (``stats.Accumulator``'s), reused for the abs values: a fresh
    2 MB array per window is fresh pages from the kernel each time (a third of the CPU time again, as system time).

    Each tensor is non-empty and at most SMALL_TENSOR_BYTES long.
    """
    dtype = items[keep[0] if keep else 0][1]
    if byte_starts is None:
        byte_starts = np.fromiter((it[3] for it in items), dtype=np.int64, count=len(items)) - lo
    lengths = np.diff(np.append(byte_starts, raw.size))
    digests = batch_digests(raw, byte_starts, lengths) if digest else [None] * len(items)
    spec = IEEE.get(dtype)
    uint = spec.uint if spec is not None else INT_UINT[dtype]
    size = np.dtype(uint).itemsize
    x = raw.view(uint)
    starts = byte_starts // size
    n = len(items)
    zeros_list = [0] * n
    nan = pos = neg = None
    maxes: list | None = None
    if spec is None:
        zeros_list = segment_counts(x == 0, starts).tolist()
    else:
        if scratch is not None:
            a = scratch_buffer(scratch, uint, x.size)
            np.bitwise_and(x, spec.abs_mask, out=a)
        else:
            a = np.bitwise_and(x, spec.abs_mask)
        if keep is not None:
            kept = set(keep)
            ends = starts + lengths // size
            for i in range(n):
                if i not in kept:
                    a[starts[i]:ends[i]] = 1
        if np.minimum.reduce(a) == 0:
            zeros_list = segment_counts(a == 0, starts).tolist()
        inf = spec.inf
        top = int(np.maximum.reduce(a))
        if top > inf or (top == inf and spec.has_inf):
            nanm = a > inf
            nan = segment_counts(nanm, starts)
            pos = segment_counts(x == spec.uint(inf), starts) if spec.has_inf else np.zeros(n, np.int64)
            neg = segment_counts(x == spec.uint(inf | spec.sign), starts) if spec.has_inf else np.zeros(n, np.int64)
            a[(a >= inf) if spec.has_inf else nanm] = 0
        max_bits = np.maximum.reduceat(a, starts)
        if dtype in FLOAT_DTYPES:
            maxes = _decode_all(dtype, max_bits)
            if nan is not None:
                numel_el = lengths // size
                none = (nan + pos + neg) == numel_el  # no finite value: max_abs is None
                maxes = [None if e else m for m, e in zip(maxes, none.tolist())]
    nan_l = nan.tolist() if nan is not None else [0] * n
    pos_l = pos.tolist() if pos is not None else [0] * n
    neg_l = neg.tolist() if neg is not None else [0] * n
    if maxes is None:
        maxes = [None] * n
    numels = (lengths // size).tolist() if dtype not in ("C64", "C128") else [prod(it[2]) for it in items]
    stats = [TensorStat(name, dtype, shape, numel, nn, pp, ng, mx, z, dg)
             for (name, _, shape, _, _), numel, nn, pp, ng, mx, z, dg
             in zip(items, numels, nan_l, pos_l, neg_l, maxes, zeros_list, digests)]
    return stats if keep is None else [stats[i] for i in keep]


def _decode_all(dtype: str, bits: np.ndarray) -> list[float]:
    """max |x| of every tensor from its max abs bit pattern, as the one-tensor path decodes it."""
    view = _FLOAT_VIEW.get(dtype)
    if view is not None:
        return bits.view(view).astype(np.float64).tolist()
    if dtype == "BF16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
    return [_decode_max(dtype, b) for b in bits.tolist()]

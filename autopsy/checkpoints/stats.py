"""Per-tensor health from raw little-endian bytes: numpy bit masks over a reused buffer.

Why bit masks and not float math: NaN/Inf are bit patterns (formats.md §3), so counting them needs
no conversion, works for dtypes numpy has no float type for (bf16, fp8) and never allocates a
tensor-sized array. For every sign-magnitude float format, the order of ``bits & ~sign`` equals the
order of ``|x|``, so max |x| over finite values is a max over integers, decoded once per tensor.

Digest: bitwise equality across checkpoints is decided by a 64-bit digest of the raw bytes: per
chunk the wrapping uint64 sum of the words, chained through a multiply (position-sensitive across
chunks) together with the byte length. It costs one extra in-cache pass (blake2b runs at ~0.5-1
GB/s here, far too slow for the scan budget). It is not cryptographic: two *different* tensors
collide only if their word sums inside every chunk agree mod 2**64 (e.g. two words swapped within
one 512 KiB chunk), which training updates do not produce. ``autopsy diff`` compares bytes exactly.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: bytes per read; a multiple of 8 so every dtype's elements and the uint64 digest view fit exactly.
#: 512 KiB keeps the 4-5 passes per chunk inside L2 cache.
CHUNK_BYTES = 512 * 1024
_M64 = (1 << 64) - 1
_DIGEST_MULT = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd: a bijective multiplier mod 2**64

#: bits per element of every dtype safetensors defines (Rust enum, formats.md §3)
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64, "C128": 128,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
                "F4", "F6_E2M3", "F6_E3M2", "C64", "C128"}
#: dtypes whose values are not decoded: zeros and NaN are not checked (packed 6-bit codes)
UNCHECKED_DTYPES = {"F6_E2M3", "F6_E3M2"}


def nbytes_of(dtype: str, numel: int) -> int | None:
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return None
    total = numel * bits
    return total // 8 if total % 8 == 0 else None


def _minifloat_table(exp_bits: int, man_bits: int, bias: int) -> list[float]:
    """Magnitude of every (exponent, mantissa) code of a small float, IEEE-style subnormals."""
    out = []
    for code in range(1 << (exp_bits + man_bits)):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        if e == 0:
            out.append(math.ldexp(m / (1 << man_bits), 1 - bias))
        else:
            out.append(math.ldexp(1 + m / (1 << man_bits), e - bias))
    return out


_E4M3 = _minifloat_table(4, 3, 7)
_E5M2 = _minifloat_table(5, 2, 15)
_E4M3FNUZ = _minifloat_table(4, 3, 8)
_E5M2FNUZ = _minifloat_table(5, 2, 16)
_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


@dataclass(frozen=True)
class _Ieee:
    """A sign-magnitude format whose Inf is exponent-all-ones with a zero mantissa."""

    uint: type
    sign: int
    inf: int  # abs bits of Inf; abs bits above it are NaN
    decode: Callable[[int], float]
    has_inf: bool = True
    size: int = field(init=False)  # bytes per element
    abs_mask: Any = field(init=False)  # numpy scalar clearing the sign bit

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", np.dtype(self.uint).itemsize)
        object.__setattr__(self, "abs_mask", self.uint(self.sign - 1))


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _f16(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits))[0]


IEEE: dict[str, _Ieee] = {
    "F64": _Ieee(np.uint64, 1 << 63, 0x7FF0000000000000, _f64),
    "F32": _Ieee(np.uint32, 1 << 31, 0x7F800000, _f32),
    "C64": _Ieee(np.uint32, 1 << 31, 0x7F800000, _f32),  # counted per real/imag component
    "C128": _Ieee(np.uint64, 1 << 63, 0x7FF0000000000000, _f64),
    "F16": _Ieee(np.uint16, 0x8000, 0x7C00, _f16),
    "BF16": _Ieee(np.uint16, 0x8000, 0x7F80, lambda b: _f32(b << 16)),
    "F8_E5M2": _Ieee(np.uint8, 0x80, 0x7C, lambda b: _E5M2[b]),
    # E4M3FN: no Inf; only S.1111.111 is NaN, so "abs > 0x7E" is NaN and nothing is Inf
    "F8_E4M3": _Ieee(np.uint8, 0x80, 0x7E, lambda b: _E4M3[b], has_inf=False),
}
INT_UINT: dict[str, type] = {"I8": np.uint8, "U8": np.uint8, "BOOL": np.uint8, "I16": np.uint16, "U16": np.uint16,
                             "I32": np.uint32, "U32": np.uint32, "I64": np.uint64, "U64": np.uint64}


@dataclass
class Accumulator:
    """Running statistics of one tensor, fed chunk by chunk (see :func:`feed`)."""

    dtype: str
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0
    max_bits: int = -1  # max abs bit pattern over finite values (-1 = none yet)
    digest: int = 0
    nbytes: int = 0
    checked: bool = True
    want_digest: bool = True  # False: skip the digest pass (``autopsy scan`` without --digest)
    _scratch: dict[type, np.ndarray] = field(default_factory=dict, repr=False)

    def _buf(self, uint: type, n: int) -> np.ndarray:
        return scratch_buffer(self._scratch, uint, n)

    def max_abs(self) -> float | None:
        if self.max_bits < 0 or self.dtype not in FLOAT_DTYPES or not self.checked:
            return None
        return _decode_max(self.dtype, self.max_bits)


def scratch_buffer(scratch: dict[type, np.ndarray], uint: type, n: int) -> np.ndarray:
    """The first ``n`` elements of a reader's ``uint`` buffer (kept in ``scratch``, shared by its accumulators and
    its small-tensor batches), grown when too small: one buffer reused instead of a fresh array per chunk."""
    buf = scratch.get(uint)
    if buf is None or buf.size < n:
        buf = scratch[uint] = np.empty(max(n, CHUNK_BYTES // np.dtype(uint).itemsize), dtype=uint)
    return buf[:n]


def _decode_max(dtype: str, bits: int) -> float:
    spec = IEEE.get(dtype)
    if spec is not None:
        return float(spec.decode(bits))
    if dtype == "F8_E4M3FNUZ":
        return _E4M3FNUZ[bits & 0x7F]
    if dtype == "F8_E5M2FNUZ":
        return _E5M2FNUZ[bits & 0x7F]
    if dtype == "F8_E8M0":
        return math.ldexp(1.0, bits - 127)
    if dtype == "F4":
        return _E2M1[bits]
    return float(bits)


def feed(acc: Accumulator, chunk: memoryview | bytes | np.ndarray) -> None:
    """Add one chunk of a tensor's raw bytes. Chunks must hold whole elements except the last."""
    raw = np.frombuffer(chunk, dtype=np.uint8) if not isinstance(chunk, np.ndarray) else chunk.view(np.uint8)
    n = raw.size
    if n == 0:
        return
    acc.nbytes += n
    if acc.want_digest:
        _digest(acc, raw)
    dt = acc.dtype
    spec = IEEE.get(dt)
    if spec is not None:
        _feed_ieee(acc, spec, raw)
    elif dt in INT_UINT:
        x = raw[: n - n % np.dtype(INT_UINT[dt]).itemsize].view(INT_UINT[dt])
        acc.zeros += x.size - int(np.count_nonzero(x))
    elif dt in ("F8_E4M3FNUZ", "F8_E5M2FNUZ"):
        nan = int(np.count_nonzero(raw == 0x80))  # the "-0" code is the only NaN; no Inf, no -0
        acc.nan += nan
        acc.zeros += raw.size - int(np.count_nonzero(raw))
        a = acc._buf(np.uint8, n)
        np.bitwise_and(raw, 0x7F, out=a)  # NaN's abs is 0: harmless for the max
        acc.max_bits = max(acc.max_bits, int(a.max()))
    elif dt == "F8_E8M0":
        nan = int(np.count_nonzero(raw == 0xFF))  # exponent-only, unsigned: no zero, no Inf
        acc.nan += nan
        if nan < raw.size:
            m = int(raw.max()) if nan == 0 else int(raw[raw != 0xFF].max())
            acc.max_bits = max(acc.max_bits, m)
    elif dt == "F4":
        lo = acc._buf(np.uint8, n)
        np.bitwise_and(raw, 0x07, out=lo)
        hi = np.right_shift(raw, 4) & 0x07
        acc.zeros += 2 * n - int(np.count_nonzero(lo)) - int(np.count_nonzero(hi))
        acc.max_bits = max(acc.max_bits, int(lo.max()), int(hi.max()))
    else:  # F6_*: packed 6-bit codes, not decoded
        acc.checked = False


_MAX = np.maximum.reduce  # the ufunc reductions directly: ndarray.max() adds ~1.5 us of Python per call
_MIN = np.minimum.reduce


def _feed_ieee(acc: Accumulator, spec: _Ieee, raw: np.ndarray) -> None:
    size = spec.size
    x = raw.view(spec.uint) if raw.size % size == 0 else raw[: raw.size - raw.size % size].view(spec.uint)
    if x.size == 0:
        return
    a = acc._buf(spec.uint, x.size)
    np.bitwise_and(x, spec.abs_mask, out=a)
    m = int(_MAX(a))
    inf = spec.inf
    if _MIN(a) == 0:  # a min pass is cheaper than counting; most chunks of weights hold no zero
        acc.zeros += x.size - int(np.count_nonzero(a))
    if m < inf or (m == inf and not spec.has_inf):
        if m > acc.max_bits:
            acc.max_bits = m  # fast path: every value in the chunk is finite
        return
    nan = int(np.count_nonzero(a > inf))
    pos = neg = 0
    if spec.has_inf:
        pos = int(np.count_nonzero(x == spec.uint(inf)))
        neg = int(np.count_nonzero(x == spec.uint(inf | spec.sign)))
    acc.nan += nan
    acc.posinf += pos
    acc.neginf += neg
    if nan + pos + neg < x.size:
        a[(a >= inf) if spec.has_inf else (a > inf)] = 0
        acc.max_bits = max(acc.max_bits, int(_MAX(a)))


def _digest(acc: Accumulator, raw: np.ndarray) -> None:
    whole = raw.size - raw.size % 8
    s = int(np.add.reduce(raw[:whole].view(np.uint64), dtype=np.uint64)) if whole else 0
    if whole < raw.size:
        s = (s + int.from_bytes(raw[whole:].tobytes(), "little")) & _M64
    acc.digest = (acc.digest * _DIGEST_MULT + s + raw.size) & _M64


def digest_hex(acc: Accumulator) -> str | None:
    if not acc.want_digest:
        return None
    return f"{acc.nbytes:x}-{acc.digest:016x}"

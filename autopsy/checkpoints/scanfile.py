"""Common result of scanning one checkpoint file, and the tensor-stream helper all readers use."""

from __future__ import annotations

import mmap
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from autopsy.checkpoints.stats import CHUNK_BYTES, Accumulator, digest_hex, feed
from autopsy.model import TensorStat

#: bytes of the file mapped at a time, per reader (one reader per file being scanned)
WINDOW_BYTES = 16 * 1024 * 1024
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


@dataclass
class FileScan:
    """What one file held: tensor stats, problems, and (pickles) the inert object tree."""

    path: Path
    format: str  # safetensors | torch_zip | torch_legacy | index
    bytes: int = 0
    seconds: float = 0.0
    tensors: list[TensorStat] = field(default_factory=list)
    #: (status, message): status "unreadable" (nothing usable), "partial", or "read" (a note)
    problems: list[tuple[str, str]] = field(default_factory=list)
    obj: Any = None  # inert pickle tree (torch files), for optimizer/scaler/DeepSpeed summaries
    names: dict[int, str] = field(default_factory=dict)  # id(TensorRef) -> tensor name (torch files)
    metadata: dict[str, Any] = field(default_factory=dict)
    globals_seen: list[str] = field(default_factory=list)

    def problem(self, message: str, status: str = "partial") -> None:
        self.problems.append((status, message))

    @property
    def status(self) -> str:
        order = {"read": 0, "partial": 1, "unreadable": 2}
        return max((s for s, _ in self.problems), key=lambda s: order.get(s, 0), default="read")

    @property
    def nonfinite(self) -> bool:
        return any(t.nonfinite for t in self.tensors)


class Reader:
    """Streams byte ranges of one open file in CHUNK_BYTES pieces with bounded memory.

    Regular files are read through a sliding read-only memory map of at most ``WINDOW_BYTES``
    (no copy out of the page cache; about 1.5-2x the throughput of ``preadv`` into a buffer here,
    see benchmarks/bench_scan.py). Only ranges inside the size the file had when opened are mapped,
    so a truncated file is never read past its end; anything that cannot be mapped (pipes, special
    files, filesystems without mmap) falls back to ``preadv`` into one reused buffer. Peak memory
    per reader is one window plus one chunk of scratch, whatever the file size.
    """

    def __init__(self, fh: BinaryIO, digest: bool = True) -> None:
        self.fh = fh
        self.digest = digest
        self._buf: bytearray | None = None
        self._map: mmap.mmap | None = None
        self._arr: np.ndarray | None = None
        self._lo = self._hi = 0
        self._scratch: dict[type, np.ndarray] = {}
        try:
            st = os.fstat(fh.fileno())
            self.size = st.st_size if stat.S_ISREG(st.st_mode) else -1
        except (OSError, AttributeError, ValueError):
            self.size = -1
        self.mapped = self.size > 0

    def accumulator(self, dtype: str) -> Accumulator:
        return Accumulator(dtype, want_digest=self.digest, _scratch=self._scratch)

    def stat_range(self, name: str, dtype: str, shape: list[int], numel: int, offset: int, length: int) -> tuple[TensorStat, int]:
        """Stats of ``length`` bytes at ``offset``; returns (stat, bytes actually read)."""
        acc = self.accumulator(dtype)
        got = self.feed_range(acc, offset, length)
        return to_stat(name, dtype, shape, numel, acc), got

    def feed_range(self, acc: Accumulator, offset: int, length: int) -> int:
        done = self._feed_mapped(acc, offset, length) if self.mapped else 0
        if self.mapped:
            return done
        return done + self._feed_read(acc, offset + done, length - done)

    def bytes_at(self, offset: int, length: int) -> np.ndarray | None:
        """``length`` bytes at ``offset`` as a uint8 array (a view of the map while it stays mapped),
        or None when they cannot all be read (past the end, read error)."""
        if self.mapped and offset + length <= self.size:
            if offset < self._lo or offset + length > self._hi:
                try:
                    self._remap(offset, length)
                except (OSError, ValueError, OverflowError):
                    self.close()
                    self.mapped = False
            if self.mapped:
                assert self._arr is not None
                return self._arr[offset - self._lo: offset - self._lo + length]
        try:
            data = os.pread(self.fh.fileno(), length, offset)
        except (AttributeError, ValueError):  # no file descriptor; OSError propagates like any read error
            return None
        return np.frombuffer(data, dtype=np.uint8) if len(data) == length else None

    def _feed_mapped(self, acc: Accumulator, offset: int, length: int) -> int:
        """Bytes fed; where a window cannot be mapped, mapping stops for good and the caller reads the rest."""
        end = min(offset + length, self.size)
        pos = offset
        while pos < end:
            n = min(CHUNK_BYTES, end - pos)
            if pos < self._lo or pos + n > self._hi:
                try:
                    self._remap(pos, n)
                except (OSError, ValueError, OverflowError):
                    self.close()
                    self.mapped = False  # e.g. a filesystem without mmap
                    break
            assert self._arr is not None
            feed(acc, self._arr[pos - self._lo: pos - self._lo + n])
            pos += n
        return pos - offset

    def _remap(self, pos: int, n: int) -> None:
        self.close()
        lo = pos - pos % mmap.ALLOCATIONGRANULARITY
        hi = min(self.size, max(lo + WINDOW_BYTES, pos + n))
        self._map = mmap.mmap(self.fh.fileno(), hi - lo, flags=_MAP_FLAGS, prot=mmap.PROT_READ, offset=lo)
        self._arr = np.frombuffer(self._map, dtype=np.uint8)
        self._lo, self._hi = lo, hi

    def close(self) -> None:
        self._arr = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view still exported: the map goes when it is collected
                pass
            self._map = None
        self._lo = self._hi = 0

    def _feed_read(self, acc: Accumulator, offset: int, length: int) -> int:
        if self._buf is None:
            self._buf = bytearray(CHUNK_BYTES)
        view = memoryview(self._buf)
        done = 0
        fd = self.fh.fileno()
        while done < length:
            n = min(CHUNK_BYTES, length - done)
            got = os.preadv(fd, [view[:n]], offset + done) if hasattr(os, "preadv") else _pread_into(self.fh, view[:n], offset + done)
            if got <= 0:
                break
            feed(acc, view[:got])
            done += got
            if got < n:
                break
        return done

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def auto_workers() -> int:
    """Files scanned at once when not told: one per core, at most 2.

    ``autopsy scan`` runs them as worker processes (threads of one process serialise on its
    memory-map lock; see checkpoints/cli.py). Each maps one WINDOW_BYTES window, so two keep the
    scan's total memory well under 200 MB, and two streams already outrun a fast NVMe disk.
    """
    return max(1, min(2, os.cpu_count() or 1))


def _pread_into(fh: BinaryIO, view: memoryview, offset: int) -> int:
    fh.seek(offset)
    return fh.readinto(view) or 0  # type: ignore[attr-defined]


def to_stat(name: str, dtype: str, shape: list[int], numel: int, acc: Accumulator) -> TensorStat:
    return TensorStat(name=name, dtype=dtype, shape=list(shape), numel=numel, nan=acc.nan, posinf=acc.posinf,
                      neginf=acc.neginf, max_abs=acc.max_abs(), zeros=acc.zeros, digest=digest_hex(acc))


def numel_of(shape: list[int] | tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n

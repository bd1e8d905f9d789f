"""Keep the process's memory close to what it actually holds.

Reading a multi-GB log allocates and frees many short-lived chunk-sized buffers. glibc's malloc
raises its mmap threshold after such frees (dynamic threshold), so later buffers come from the
heap, and freed heap memory is not returned to the OS: RSS then grows with the file size although
the live data does not. Fixing the thresholds (allocations >= 1 MiB are mmapped and unmapped when
freed; the heap top is trimmed above 8 MiB) keeps RSS bounded. No-op where glibc is absent.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
TRIM_THRESHOLD_BYTES = 8 << 20
_done = False


def tune_allocator() -> bool:
    """Fix glibc's malloc thresholds once per process; True when applied."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return _done
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and ok
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok


#: objects allocated (net) before a young-generation collection in a CLI process (CPython's default: 700).
#: Why: a checkpoint of 100k tensors or a long log builds hundreds of thousands of long-lived, acyclic
#: objects (tensor stats, header tuples); at 700 the collector's passes over them and over the
#: imported libraries cost ~0.7 s of the 3 s a 100k-tensor `autopsy run` took (CPU, measured with
#: benchmarks/bench_scale.py). Cyclic garbage still goes, in larger and rarer batches.
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Rarer cyclic collections for the command-line process only (not for a notebook's ``analyze``)."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(GC_YOUNG_THRESHOLD, young), older, oldest)

"""The record file: append-only JSON lines written whole with ``write(2)``, so a killed process
leaves whole lines (and at most one cut last line); ``fsync`` only for the lines that must survive a
crash of the machine (non-finite steps, checkpoints, the end).

Step lines are deferred: kept as dicts and serialized together when ``FLUSH_SECS`` have passed since
the last flush, when ``FLUSH_LINES`` are waiting, before any other line, and at close or interpreter
exit. Serializing and writing one line per step cost about as much as the rest of a cheap step on a
small model; a killed process loses at most the last ``FLUSH_SECS`` of step lines (the failure
events themselves are written at once, synced).
"""

from __future__ import annotations

import atexit
import json
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: step lines wait at most this long in memory (what a SIGKILL can lose; ``autopsy watch`` polls
#: about every second)
FLUSH_SECS = 1.0
#: and at most this many of them (bounded memory and loss on a fast loop)
FLUSH_LINES = 32

_OPEN: weakref.WeakSet[RecordWriter] = weakref.WeakSet()
_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=True, default=str).encode


def _flush_all() -> None:
    for w in list(_OPEN):
        w.flush()


atexit.register(_flush_all)


class RecordWriter:
    def __init__(self, path: Path, prepare: Callable[[dict[str, Any]], None] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        #: called on each deferred line just before it is serialized (rounding, done in bulk)
        self._prepare = prepare
        self._pending: list[dict[str, Any]] = []
        self._flushed = time.monotonic()
        _OPEN.add(self)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def defer(self, obj: dict[str, Any]) -> None:
        """Queue a step line; written with the next flush (see the module docstring for when)."""
        if self._fd is None:
            return
        pending = self._pending
        pending.append(obj)
        if len(pending) >= FLUSH_LINES or time.monotonic() - self._flushed >= FLUSH_SECS:
            self.flush()

    def flush(self) -> None:
        """Write the deferred lines now."""
        self.write(None)

    def write(self, obj: dict[str, Any] | None, sync: bool = False) -> None:
        """Write one line now, after the deferred ones (so the file stays in step order)."""
        if self._fd is None:
            return
        self._flushed = time.monotonic()
        objs, self._pending = self._pending, []
        if objs and self._prepare is not None:
            for p in objs:
                self._prepare(p)
        if obj is not None:
            objs.append(obj)
        if objs:
            # one write(2) of whole lines: a kill can cut the file at one place only, leaving every
            # line before it whole and at most one cut last line (which the reader drops and reports)
            view = memoryview("".join([_dumps(o) + "\n" for o in objs]).encode("utf-8"))
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        if sync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None
        _OPEN.discard(self)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass

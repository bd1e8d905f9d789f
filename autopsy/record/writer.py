"""The record file: append-only JSON lines, one ``write(2)`` per line, so a killed process leaves
whole lines (and at most one cut last line); ``fsync`` only for the lines that must survive a crash
of the machine (non-finite steps, checkpoints, the end)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class RecordWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, obj: dict[str, Any], sync: bool = False) -> None:
        if self._fd is None:
            return
        data = (json.dumps(obj, separators=(",", ":"), allow_nan=True, default=str) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if sync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

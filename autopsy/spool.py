"""``autopsy run -``: a log piped on stdin is spooled to a private file named ``<stdin>``.

Readers need a seekable file (sniffing the head, then streaming it); a pipe is neither, so it is
copied once, up to ``MAX_STDIN_BYTES``, into a temporary directory the caller removes. Every
message about it names ``<stdin>``. Gzip or zip data on stdin is recognised by content.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

#: bytes of stdin kept: a longer stream is cut here and the report says so
MAX_STDIN_BYTES = 2 << 30
STDIN_NAME = "<stdin>"
_BLOCK = 1 << 20


def spool_stdin(stream: BinaryIO, directory: Path, limit: int = MAX_STDIN_BYTES) -> tuple[Path, int, bool]:
    """Copy ``stream`` into ``directory/<stdin>``; returns (path, bytes kept, whether it was cut)."""
    path = directory / STDIN_NAME
    kept = 0
    cut = False
    with open(path, "wb") as out:
        while True:
            block = stream.read(min(_BLOCK, limit - kept + 1))
            if not block:
                break
            if kept + len(block) > limit:
                out.write(block[:limit - kept])
                kept = limit
                cut = True
                break
            out.write(block)
            kept += len(block)
    return path, kept, cut


def cut_message(limit: int = MAX_STDIN_BYTES) -> str:
    return (f"stdin held more than {limit >> 20} MiB: only the first {limit >> 20} MiB were read; save the log "
            "to a file and pass its path to read all of it")

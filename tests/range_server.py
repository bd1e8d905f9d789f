"""A local HTTP file server with ``Range: bytes=a-b`` support (206 Partial Content), which Python's
own ``http.server`` lacks, and the two Hub API calls that list a ``hf://`` folder (``/api/models/...``):
the one server the remote-checkpoint tests (tests/test_checkpoints_remote.py)
and the remote benchmark (benchmarks/bench_scale.py, which imports this file by path) read from.
Test code only: the autopsy package does not ship it.

    with serve(root) as base:          # in this process, a thread per connection
        ... f"{base}/model.safetensors"

    python tests/range_server.py ROOT  # its own process (the benchmark): prints the base URL, serves until killed
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

#: bytes per write to the socket (the stdlib copies 64 KiB at a time)
COPY_BYTES = 1 << 20


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's file server plus single byte ranges. ``requests`` records "GET bytes=a-b" / "GET whole file"
    / "HEAD ..." per request (reset it per test)."""

    requests: list[str] = []
    ignore_ranges = False  # True: answer every GET with the whole file (200), as a server without Range support
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections as they would with a real store

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def send_head(self):  # type: ignore[override]
        if self.path.startswith("/api/"):
            return self._hub_api()
        path = self.translate_path(self.path)
        rng = self.headers.get("Range")
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        size = os.path.getsize(path)
        type(self).requests.append(f"{self.command} {rng or 'whole file'}")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if m is None or type(self).ignore_ranges:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the handler after the copy
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            return fh
        a = int(m[1])
        b = min(int(m[2]) if m[2] else size - 1, size - 1)
        if a >= size:
            self.send_error(416)
            return None
        fh = open(path, "rb")  # noqa: SIM115
        fh.seek(a)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.send_header("Content-Length", str(b - a + 1))
        self.end_headers()
        return _Limited(fh, b - a + 1)

    def _hub_api(self) -> Any:
        """The two Hub API calls huggingface_hub's HfFileSystem makes to list a repo folder, answered from the
        resolve layout ``ROOT/{org}/{repo}/resolve/{rev}/...`` (see tests/test_checkpoints_remote.py):
        ``GET /api/models/{org}/{repo}[/revision/{rev}]`` (repo_info) and
        ``GET /api/models/{org}/{repo}/tree/{rev}[/{path}]?recursive=...`` (list_repo_tree, one page).
        The JSON carries the keys huggingface_hub's ModelInfo / RepoFile / RepoFolder read."""
        import hashlib
        from urllib.parse import parse_qs, unquote, urlsplit

        u = urlsplit(self.path)
        type(self).requests.append(f"{self.command} {u.path}")
        m = re.fullmatch(r"/api/models/([^/]+)/([^/]+)(?:/(revision|tree)/([^/]+)(/.*)?)?", u.path)
        base = os.path.join(self.directory, unquote(m[1]), unquote(m[2])) if m else ""
        top = os.path.join(base, "resolve", unquote(m[4] or "main")) if m else ""
        if m is None or not os.path.isdir(top):
            code = "RepoNotFound" if m is None or not os.path.isdir(base) else "RevisionNotFound"
            return self._json(404, {"error": f"{code}: {u.path}"}, {"X-Error-Code": code})
        if m[3] != "tree":  # repo_info, with or without a revision
            sha = hashlib.sha1(top.encode()).hexdigest()
            return self._json(200, {"id": f"{m[1]}/{m[2]}", "modelId": f"{m[1]}/{m[2]}", "sha": sha, "private": False})
        sub = unquote(m[5] or "").strip("/")
        start = os.path.join(top, sub)
        if not os.path.isdir(start):
            return self._json(404, {"error": f"EntryNotFound: {sub}"}, {"X-Error-Code": "EntryNotFound"})
        recursive = parse_qs(u.query).get("recursive", ["false"])[0].lower() == "true"
        out = []
        for dirpath, dirnames, filenames in os.walk(start):
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, top).replace(os.sep, "/")
                oid = hashlib.sha1(rel.encode()).hexdigest()
                if os.path.isdir(full):
                    out.append({"type": "directory", "oid": oid, "path": rel})
                else:
                    out.append({"type": "file", "oid": oid, "size": os.path.getsize(full), "path": rel})
            if not recursive:
                break
        return self._json(200, out)

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
        import io
        import json

        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        return io.BytesIO(data)

    def copyfile(self, source: Any, outputfile: Any) -> None:
        while True:
            data = source.read(COPY_BYTES)
            if not data:
                return
            outputfile.write(data)


class _Limited:
    """The first ``n`` bytes of an open file from its position."""

    def __init__(self, fh: Any, n: int) -> None:
        self.fh, self.left = fh, n

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.fh.read(n)
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.fh.close()


@contextlib.contextmanager
def serve(root: str | os.PathLike[str], port: int = 0) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 from a thread of this process; yields the base URL (no trailing slash)."""
    RangeHandler.requests = []
    RangeHandler.ignore_ranges = False
    handler = lambda *a, **k: RangeHandler(*a, directory=str(root), **k)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def main() -> None:
    with serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0) as base:
        print(base, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()

"""SIGTERM (``timeout``, a cancelled CI job) must not leave the private folder an archive was unpacked into.

Python's default SIGTERM action ends the process without running ``finally`` blocks, so before the CLI
handled it, every ``autopsy run`` stopped that way left an ``autopsy-unpack-*`` folder (a copy of the log)
in the temp dir.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: HF Trainer 4.x log lines, enough that unpacking and reading take seconds, not milliseconds
LINES = 1_500_000


def _big_archive(run: Path) -> None:
    run.mkdir()
    with gzip.open(run / "train.log.gz", "wt", compresslevel=1) as fh:
        for i in range(1, LINES + 1):
            fh.write(f"{{'loss': {3.0 / (1 + i / 1000):.4f}, 'grad_norm': {0.5 + 1 / i!r}, "
                     f"'learning_rate': 1e-05, 'epoch': {i / LINES:.4f}}}\n")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_removes_the_unpacked_archive(tmp_path: Path) -> None:
    run, tmp = tmp_path / "run", tmp_path / "tmp"
    tmp.mkdir()
    _big_archive(run)
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "autopsy", "run", str(run), "--format", "json",
                             "--output", str(tmp_path / "r.json"), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp.glob("autopsy-unpack-*")):
        assert proc.poll() is None, "finished before the archive was unpacked: make the log bigger"
        assert time.monotonic() < deadline, "no unpack folder appeared"
        time.sleep(0.005)
    time.sleep(0.2)  # inside the unpack or the read
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode(errors="replace")[-400:]  # as shells report it
    assert list(tmp.iterdir()) == []

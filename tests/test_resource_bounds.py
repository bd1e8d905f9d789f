"""Resource bounds (CI-sized variants of benchmarks/bench_bounds.py), measured on child processes.

Peak RSS is each child's own ru_maxrss (os.wait4), so the numbers are the tool's, not pytest's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_bounds import (
    LOG_RSS_BOUND_MB,
    PY,
    SCAN_RSS_BOUND_MB,
    autopsy,
    measure,
    write_log,
    write_many_files,
    write_safetensors,
)

from autopsy.discover import MAX_GENERIC_FILES

#: CI sizes: big enough that holding the file in memory would break the bound
LOG_MB = 48
CKPT_MB = 512  # 4 shards of 128 MB: each larger than a map window
FILES = 20_000

READ_LOG = """
import sys
from pathlib import Path
from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.textlog import read_text_log
p = Path(sys.argv[1])
b = RunBuilder(p.parent)
read_text_log(Found(p, "text_log", p.stat().st_size), b)
run = b.finish()
print(len(run.scalars))
"""


@pytest.mark.slow
def test_log_reader_streams_a_large_log(tmp_path: Path) -> None:
    """The text reader holds blocks, not the file: a log bigger than the bound reads under it."""
    log = tmp_path / "train.log"
    n = write_log(log, LOG_MB)
    m = measure([PY, "-c", READ_LOG, str(log)], timeout=120)
    assert m.rc == 0, m.stderr[-2000:]
    assert int(m.stdout.strip()) >= 3 * n  # loss, grad_norm, learning_rate (+epoch) of every dict
    assert m.peak_rss_mb < LOG_RSS_BOUND_MB, m.peak_rss_mb


@pytest.mark.slow
def test_scan_rss_stays_under_200_mb(tmp_path: Path) -> None:
    """Four shards scanned by four worker processes at once: all of them together stay under the bound."""
    shards = [tmp_path / f"model-{i}-of-4.safetensors" for i in range(4)]
    n = [write_safetensors(f, CKPT_MB / 4) for f in shards]
    m = measure(autopsy("scan", *map(str, shards), "-f", "json", "-j", "4"), timeout=120)
    assert m.rc == 0, m.stderr[-2000:]
    rep = json.loads(m.stdout)
    assert [len(x["tensors"]) for x in rep["files"]] == n
    assert all(x["status"] == "read" and x["nonfinite_tensors"] == 0 for x in rep["files"])
    assert m.peak_rss_mb < SCAN_RSS_BOUND_MB, m.peak_rss_mb
    # the main process and its 4 workers together: their summed PSS (shared pages counted once)
    assert 0 < m.tree_pss_mb < SCAN_RSS_BOUND_MB, (m.tree_pss_mb, m.tree_rss_mb)


@pytest.mark.slow
def test_many_small_files_finish_and_say_what_was_skipped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_many_files(run, FILES)
    out = tmp_path / "r.json"
    m = measure(autopsy("run", str(run), "-f", "json", "-o", str(out), "-q"), timeout=60)
    assert m.rc == 0, m.stderr[-2000:]
    arts = json.loads(out.read_text())["artifacts"]
    read = [a for a in arts if a["kind"] == "text_log"]
    skipped = [a for a in arts if a["kind"] == "skipped"]
    assert len(read) == MAX_GENERIC_FILES
    assert sum(int(a["problem"].split()[0]) for a in skipped) == FILES - MAX_GENERIC_FILES
    assert all("point autopsy at this directory" in a["problem"] for a in skipped)
    assert any(a["path"] == "trainer_state.json" and a["status"] == "read" for a in arts)

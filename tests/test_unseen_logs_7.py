"""Judging on logs of the seventh unseen round and the coverage probes before it: each test quotes its source."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run

# https://github.com/sconlyshootery/FeatDepth/issues/68 (the traceback as pasted)
FEATDEPTH = """\
Traceback (most recent call last):
  File "./infer.py", line 76, in <module>
    evaluate(cfg_path, model_path, img_path, output_path)
  File "./infer.py", line 27, in transform
    im_tensor = im_tensor.permute(0, 3, 1, 2).contiguous()
RuntimeError: CUDA error: no kernel image is available for execution on the device
"""


def test_crash_evidence_quotes_the_frame_as_a_reader_would(tmp_path: Path):
    a = _run(tmp_path, FEATDEPTH)
    crash = [f for f in a.diagnosis.findings if f.code == "CRASH001"]
    assert crash
    texts = [e.detail for e in crash[0].evidence]
    assert "raised in ./infer.py:27 in transform" in texts, texts

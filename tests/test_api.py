"""The Python API: `autopsy.analyze(path, baseline=None) -> Analysis`, loaded lazily (import autopsy stays light)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

import autopsy
from autopsy.model import Checkpoint, Config, Event, Finding, Verdict

SAMPLES = REPO / "sample_logs"


def test_import_autopsy_pulls_in_no_pandas_or_torch():
    code = "import sys, autopsy; print(sorted(m for m in ('pandas', 'torch', 'numpy', 'distributed') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert {"analyze", "sweep", "Analysis"} <= set(dir(autopsy))


def test_analysis_attributes():
    a = autopsy.analyze(SAMPLES / "lr_too_high_nan")
    assert isinstance(a, autopsy.Analysis)
    assert isinstance(a.verdict, Verdict) and a.verdict.root_cause == "lr_too_high"
    assert a.findings and all(isinstance(f, Finding) for f in a.findings)
    assert list(a.scalars.columns) == ["step", "metric", "value", "source", "line", "key"]
    loss = a.scalars[a.scalars.metric == "loss"]
    assert loss.step.min() == 2 and loss.step.max() == 60  # README: logging every 2 steps, 60 steps
    assert isinstance(a.config, Config) and a.config.get("learning_rate") == 5.0
    assert all(isinstance(e, Event) for e in a.events)
    assert [c.step for c in a.checkpoints] == [20, 40, 60] and isinstance(a.checkpoints[0], Checkpoint)
    assert a.baseline is None and a.comparison is None


def test_every_format_from_one_object():
    a = autopsy.analyze(SAMPLES / "healthy_sft", baseline=SAMPLES / "healthy_sft")
    report = json.loads(a.to_json())
    assert report["verdict"] == a.verdict.to_json()
    assert report["comparison"]["b"].endswith("healthy_sft")
    html = a.to_html()
    assert html.startswith("<!") and 'id="comparison"' in html and "<script" not in html
    assert "### Compared with the baseline" in a.to_markdown()
    assert a.to_text().lstrip().startswith("HEALTHY")

"""When a piece of evidence happened, as the reports say it: a setting reads "config", an event with a
step reads its step, and an event whose step is unknown (an ESPnet warning line, which carries a time
but no iteration) reads its log line: it used to be placed at step 0 and shown as "config"."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from autopsy.render import html, markdown, view
from autopsy.report import build_report
from tests.test_unseen_logs import _run
from tests.test_unseen_logs_9 import ESPNET_863

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "autopsy" / "schema" / "report.schema.json").read_text())

# an HF TrainingArguments dump (the settings as the Trainer prints them) and the fp16 loss shape of
# ../shared/CASES.md case 3 (1.19e+34, then 0.0 from logging_nan_inf_filter)
HF_FP16 = "TrainingArguments(\n_n_gpu=1,\nfp16=True,\nlearning_rate=0.0002,\n)\n" + "".join(
    f"{{'loss': {2.3 - i * 0.01:.4f}, 'learning_rate': 0.0002, 'epoch': {i / 40:.2f}}}\n" for i in range(1, 41)) + (
    "{'loss': 1.19e+34, 'learning_rate': 0.0002, 'epoch': 1.05}\n" + "{'loss': 0.0, 'learning_rate': 0.0002, 'epoch': 1.1}\n" * 5)


def test_a_stepless_event_is_placed_by_its_line_not_at_config(tmp_path: Path):
    a = _run(tmp_path, ESPNET_863)
    rep = build_report(a)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(rep, default=str)))
    row = next(t for t in rep["timeline"] if t["code"] == "DATA001")
    assert row["step"] is None and row["config"] is False and row["where"] == "line 1"
    md = markdown.render(rep)
    assert "| line 1 | context | 5 batch loss(es)" in md
    assert "| 0 | context" not in md
    page = html.render(rep)
    assert "<td>line 1</td><td>context</td>" in page


def test_a_setting_still_reads_config(tmp_path: Path):
    a = _run(tmp_path, HF_FP16)
    rep = build_report(a)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(rep, default=str)))
    fp16 = next(c for c in rep["chain"] if c["text"].startswith("fp16 = true"))
    assert fp16["config"] is True and fp16["step"] is None and fp16["where"] == "line 3"
    assert rep["chain"][0] is fp16  # settings come first
    stepped = [c for c in rep["chain"] if c["step"] is not None]
    assert stepped and all(c["config"] is False for c in stepped)
    md = markdown.render(rep)
    assert "| config | fp16 = true" in md
    assert '<span class="step">config</span> fp16 = true' in html.render(rep)


def test_when_reads_old_reports_as_before():
    # a report written before "config" existed: a stepless chain item was a setting, a timeline one unknown
    assert view.when({"step": None, "where": "line 4"}) == "config"
    assert view.when({"step": None, "where": "line 4"}, "", "?", "?") == "?"
    assert view.when({"step": 12, "where": "line 4"}) == "step 12"
    assert view.when({"step": 0, "where": "key fp16", "config": True}, "") == "config"
    assert view.when({"step": None, "where": "tensor w", "config": False}) == "-"

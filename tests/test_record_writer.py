"""The record writer defers step lines (serialized in bulk, at most FLUSH_SECS / FLUSH_LINES later)
without losing them or their order: any other line, close, and interpreter exit flush them first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autopsy.record import writer
from autopsy.record.writer import RecordWriter


def _kinds(path: Path) -> list[str]:
    return [json.loads(line)["t"] + str(json.loads(line).get("step", "")) for line in path.read_text().splitlines()]


def test_deferred_lines_wait_then_keep_their_order(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FLUSH_SECS", 3600.0)
    path = tmp_path / "r.jsonl"
    w = RecordWriter(path, prepare=lambda o: o.update(prepared=True))
    w.write({"t": "header"})
    w.defer({"t": "step", "step": 1})
    w.defer({"t": "step", "step": 2})
    assert _kinds(path) == ["header"]  # queued, not written yet
    w.write({"t": "nonfinite", "step": 2}, sync=True)  # a failure line goes out at once, after them
    assert _kinds(path) == ["header", "step1", "step2", "nonfinite2"]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[1]["prepared"] and lines[2]["prepared"] and "prepared" not in lines[3]
    w.defer({"t": "step", "step": 3})
    w.close()
    assert _kinds(path)[-1] == "step3"
    w.defer({"t": "step", "step": 4})  # after close: ignored, no error
    assert _kinds(path)[-1] == "step3"


def test_flush_after_flush_lines_or_flush_secs(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FLUSH_SECS", 3600.0)
    path = tmp_path / "r.jsonl"
    w = RecordWriter(path)
    for i in range(writer.FLUSH_LINES - 1):
        w.defer({"t": "step", "step": i})
    assert not path.read_text()
    w.defer({"t": "step", "step": 99})
    assert len(path.read_text().splitlines()) == writer.FLUSH_LINES
    monkeypatch.setattr(writer, "FLUSH_SECS", 0.0)
    w.defer({"t": "step", "step": 100})  # the time limit has passed: written at once
    assert _kinds(path)[-1] == "step100"
    w.close()


def test_queued_steps_are_written_at_interpreter_exit_without_close(tmp_path):
    """A loop that ends (or raises) without rec.close() still leaves every step line."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import torch\n"
        "from record_plants import tiny_llama, collate, token_rows\n"
        "from autopsy.record import Recorder\n"
        "m = tiny_llama(layers=2); opt = torch.optim.SGD(m.parameters(), lr=1e-3)\n"
        f"rec = Recorder({str(tmp_path)!r}, model=m)\n"
        "rows = token_rows(20)\n"
        "for s in range(5):\n"
        "    b = collate(rows[s * 4:(s + 1) * 4]); loss = m(**b).loss; loss.backward()\n"
        "    rec.step(loss=loss, optimizer=opt, batch=b); opt.step(); opt.zero_grad()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    lines = [json.loads(x) for x in (tmp_path / "autopsy-record" / "record.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x["t"] == "step"]
    assert [x["step"] for x in steps] == [1, 2, 3, 4, 5]
    assert all(len(repr(v).split("e")[0].strip("-").replace(".", "").lstrip("0")) <= 4 for v in steps[0]["g"])

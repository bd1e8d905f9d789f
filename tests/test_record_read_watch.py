"""Reading a flight record written by the real Recorder, damaged in the ways files get damaged;
the heatmap in the HTML report; `autopsy watch` following a record as it grows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autopsy.pipeline import analyze
from autopsy.record.format import read_record

AUTOPSY = [sys.executable, "-m", "autopsy"]


@pytest.fixture(scope="module")
def real_record(tmp_path_factory) -> Path:
    """A record of a plain loop with a forward NaN planted in model.layers.2.mlp at step 4."""
    from record_loop import train

    out = tmp_path_factory.mktemp("rec")
    train(out, "forward", steps=6)
    return out / "autopsy-record" / "record.jsonl"


def _copy(real: Path, tmp: Path) -> Path:
    dst = tmp / "run" / "autopsy-record" / "record.jsonl"
    dst.parent.mkdir(parents=True)
    shutil.copy(real, dst)
    return dst


def _problems(run_dir: Path) -> str:
    a = analyze(run_dir)
    return " | ".join(x.problem or "" for x in a.run.artifacts if x.path == "autopsy-record/record.jsonl"), a


@pytest.mark.parametrize("damage, expect", [
    ("truncate_mid_line", "cut short"),
    ("garbage_lines", "not a JSON record"),
    ("binary_junk", "not a JSON record"),
    ("newer_version", "newer than this autopsy reads"),
])
def test_damaged_record_still_read(real_record, tmp_path, damage, expect):
    dst = _copy(real_record, tmp_path)
    data = dst.read_bytes()
    lines = data.split(b"\n")
    if damage == "truncate_mid_line":
        dst.write_bytes(data[: data.rindex(b'"t":"nonfinite"') + 60])
    elif damage == "garbage_lines":
        dst.write_bytes(b"\n".join(lines[:3] + [b"{not json", b"[1, 2", b"NaN NaN"] + lines[3:]))
    elif damage == "binary_junk":
        dst.write_bytes(b"\n".join(lines[:3] + [os.urandom(300).replace(b"\n", b"x")] + lines[3:]))
    elif damage == "newer_version":
        head = json.loads(lines[0])
        head["version"] = 99
        dst.write_bytes(b"\n".join([json.dumps(head).encode()] + lines[1:]))
    problems, a = _problems(dst.parent.parent)
    assert expect in problems
    if damage != "truncate_mid_line":
        rec001 = [f for f in a.diagnosis.findings if f.code == "REC001"]
        assert rec001 and rec001[0].first_step == 4 and "model.layers.2.mlp" in rec001[0].title
    else:  # the cut line was the onset event: the NaN is still seen in the step lines
        assert a.run.series("loss")["value"].isna().any()


def test_record_without_header_is_unreadable_not_fatal(real_record, tmp_path):
    dst = _copy(real_record, tmp_path)
    dst.write_bytes(b"\n".join(dst.read_bytes().split(b"\n")[1:]))
    rec = read_record(dst)
    assert any("no header" in p for p in rec.problems)
    (tmp_path / "run" / "train.log").write_text("{'loss': 1.0, 'grad_norm': 1.0, 'epoch': 0.1}\n")
    problems, a = _problems(tmp_path / "run")
    assert "no header" in problems and not a.run.flight_records


def test_empty_and_unreadable_record(tmp_path):
    d = tmp_path / "run" / "autopsy-record"
    d.mkdir(parents=True)
    (d / "record.jsonl").write_bytes(b"")
    assert "no header" in " ".join(read_record(d / "record.jsonl").problems)
    assert "cannot read" in " ".join(read_record(d / "missing.jsonl").problems)


def test_html_heatmap_self_contained_and_escaped(real_record, tmp_path):
    from autopsy.render import html
    from autopsy.report import build_report

    dst = _copy(real_record, tmp_path)
    lines = dst.read_bytes().split(b"\n")
    head = json.loads(lines[0])
    evil = "<script>alert(1)</script>"
    head["groups"][0] = evil
    dst.write_bytes(b"\n".join([json.dumps(head).encode()] + lines[1:]))
    page = html.render(build_report(analyze(dst.parent.parent)))
    assert 'id="gradnorm-heatmap"' in page and "<script" not in page and "&lt;script&gt;" in page
    start = page.index('id="gradnorm-heatmap"')
    section = page[start: page.index("</section>", start)]
    assert section.count('class="hc"') == len(head["groups"]) * 4  # steps 1-4, onset last
    assert "#c81e1e" in section and 'class="origin"' in section  # NaN cells, origin layer marked
    assert "http" not in section


def _write_slowly(real: Path, dst: Path, delay: float) -> float:
    """Append the real record line by line; returns when the onset event was written."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    onset_at = 0.0
    with open(dst, "ab") as fh:
        for line in real.read_bytes().splitlines(keepends=True):
            fh.write(line)
            fh.flush()
            if b'"t":"nonfinite"' in line and not onset_at:
                return time.monotonic()
            time.sleep(delay)
    return onset_at


def test_watch_exits_1_soon_after_the_failure_is_written(real_record, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    flag = tmp_path / "on-failure-ran"
    cmd = f"{sys.executable} -c \"open({str(flag)!r}, 'w').write('x')\""
    proc = subprocess.Popen(AUTOPSY + ["watch", str(run), "--interval", "0.2", "--on-failure", cmd, "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    written = _write_slowly(real_record, run / "autopsy-record" / "record.jsonl", 0.3)
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - written
    assert proc.returncode == 1, out + err
    assert "REC001 step 4" in out and "model.layers.2.mlp" in out
    assert flag.read_text() == "x"  # the command ran, without a shell
    assert took < 30, took  # "within seconds" (generous: this machine is shared)


def test_watch_on_failure_uses_no_shell_unless_asked(real_record, tmp_path):
    _copy(real_record, tmp_path)
    marker = tmp_path / "marker"
    out = subprocess.run(AUTOPSY + ["watch", str(tmp_path / "run"), "--on-failure", f"echo hi; touch {marker}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and f"hi; touch {marker}" in out.stdout and not marker.exists()
    out = subprocess.run(AUTOPSY + ["watch", str(tmp_path / "run"), "--shell", "--on-failure", f"touch {marker}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and marker.exists()


def test_watch_ctrl_c_stops_cleanly(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("{'loss': 2.0, 'grad_norm': 1.0, 'learning_rate': 1e-4, 'epoch': 0.1}\n")
    # a test runner started in the background has SIGINT ignored, and children inherit that: restore it
    proc = subprocess.Popen(AUTOPSY + ["watch", str(run), "--interval", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    line = proc.stdout.readline()
    assert "following" in line
    time.sleep(1.0)
    while time.monotonic() < deadline and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue
    assert proc.returncode == 0 and "stopped" in err and "Traceback" not in err


def test_watch_usage_errors():
    out = subprocess.run(AUTOPSY + ["watch", "/nonexistent", "--fail-on", "bad"], capture_output=True, text=True)
    assert out.returncode == 2 and "--fail-on" in out.stderr

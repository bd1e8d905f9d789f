"""The malformed-artifact corpus (tests/make_corpus.py): every case gives its documented outcome.

Each case's broken artifact sits next to a good trainer_state.json. Per case: the analysis runs
with ``debug=True`` (so a reader that raises fails the test instead of hiding behind the
pipeline's fault isolation), the broken artifact has the documented status and a problem message
that says what is wrong and what to do, the good file's loss series is still read exactly, the
verdict is computed, no detector fails, and ``autopsy run`` exits with the documented code and
no traceback.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from make_corpus import CASES, build_case, good_losses
from typer.testing import CliRunner

from autopsy.cli import app
from autopsy.ingest.advice import ACTION
from autopsy.pipeline import analyze

runner = CliRunner()


def _deny_read(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    """chmod 000 does not stop root: make os.access say what it says for a normal user."""
    from autopsy import pipeline

    real = os.access

    def access(path, mode, *a, **k):
        if Path(path) == target:
            return False
        return real(path, mode, *a, **k)

    monkeypatch.setattr(pipeline.os, "access", access)


class _Appender(threading.Thread):
    """Appends log lines to a file while it is being read (a run that is still going)."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.stop = path, threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            with open(self.path, "ab") as fh:
                fh.write(b"".join(f"{{'loss': 1.3, 'learning_rate': 1e-05, 'epoch': {i}}}\n".encode() for _ in range(200)))
            i += 1
            time.sleep(0.001)


def test_corpus_is_big_and_covers_every_reader():
    kinds = {c.reader for c in CASES.values()}
    assert len(CASES) >= 40
    assert {"safetensors", "torch", "weights_index", "tfevents", "trainer_state", "swift_jsonl", "jsonl", "text_log",
            "lightning_csv", "model_config", "hparams_yaml", "yaml_config", "training_args_bin", "adapter_config",
            "fs"} <= kinds


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_case(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    run = build_case(case, tmp_path / "run")
    if name == "unreadable_file" and os.geteuid() == 0:
        _deny_read(monkeypatch, run / case.target)
    appender = _Appender(run / case.target) if name == "log_appended_while_read" else None
    if appender:
        appender.start()
    try:
        analysis = analyze(run, debug=True)
        out = tmp_path / "report.json"
        result = runner.invoke(app, ["run", str(run), "-f", "json", "-o", str(out), "-q"])
    finally:
        if appender:
            appender.stop.set()
            appender.join()

    arts = {a.path: a for a in analysis.run.artifacts}
    art = arts.get(case.target)
    if case.status == ("absent",):
        assert art is None, art
    else:
        assert art is not None, sorted(arts)
        assert art.status in case.status, (art.status, art.problem)
    if art is not None and art.status != "read":
        msg = (art.problem or "").lower()
        for w in case.words:
            assert w in msg, (w, art.problem)
    # every problem says what is wrong and what to do; none comes from the isolation fallback
    for a in analysis.run.artifacts:
        if a.status in ("partial", "unreadable"):
            assert a.problem and len(a.problem) > 30, (a.path, a.problem)
            assert ACTION.search(a.problem), (a.path, a.problem)
        assert not (a.problem or "").startswith(("reader failed", "checkpoint analysis failed")), (a.path, a.problem)
    # the good trainer_state.json next to it is still read, exactly, and a verdict is made
    loss = analysis.run.series("loss")
    good = loss[loss["source"] == "trainer_state.json"]
    assert good["step"].tolist() == list(range(1, 21))
    assert good["value"].tolist() == good_losses()
    assert analysis.run.series_sources.get("loss") == "trainer_state.json"
    assert analysis.diagnosis.verdict.status == ("healthy" if case.exit == 0 else "failed")
    assert [d.name for d in analysis.diagnosis.detectors if d.status == "failed"] == []
    # the CLI: documented exit code, a report, never a traceback
    assert result.exit_code == case.exit, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert out.is_file()


def test_no_marker_from_any_corpus_pickle(tmp_path: Path) -> None:
    """The corpus's malicious pickles never run (their marker sits next to the run dir)."""
    for name in ("torch_evil_pickle", "training_args_evil", "yaml_python_tag"):
        run = build_case(CASES[name], tmp_path / name)
        analyze(run, debug=True)
    assert not list(tmp_path.glob("PWNED*")) and not Path("PWNED_yaml").exists()


# -- whole-run cases: one-line messages, exit 2 ------------------------------------------------

def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("autopsy: error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_missing_path_is_one_line(tmp_path: Path) -> None:
    line = _one_line_error(runner.invoke(app, ["run", str(tmp_path / "nope")]))
    assert f"{tmp_path / 'nope'}: no such file or directory" in line and "hint: give the run's output directory" in line


def test_empty_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    line = _one_line_error(runner.invoke(app, ["run", str(tmp_path / "empty")]))
    assert "no training artifacts found" in line and "hint: point autopsy at the run's output directory" in line


def test_only_a_broken_file_names_it_and_says_what_to_do(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_bytes(b"\x00\x01binary")
    line = _one_line_error(runner.invoke(app, ["run", str(run)]))
    assert "trainer_state.json: binary data (NUL bytes), not JSON" in line
    assert "use the copy in an earlier checkpoint-*/ directory" in line


def test_symlink_loop_as_the_run_dir_finishes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_case(CASES["symlink_loop"], run)
    os.symlink(run, run / "sub" / "again")
    a = analyze(run, debug=True)
    assert a.run.series("loss")["value"].tolist() == good_losses()
    loops = [x for x in a.run.artifacts if "symlink loop" in (x.problem or "")]
    assert {x.path for x in loops} == {"sub/loop", "sub/again"}


# -- fault isolation (issue item 5) ------------------------------------------------------------

NAN_RUN = Path(__file__).parent / "fixtures" / "examples" / "hf_trainer_nan_run"


def _boom(*_a, **_k):
    raise ZeroDivisionError("planted failure")


class _BrokenDetector:
    CODE, SLUG, NEEDS, ROOT_CAUSE = "ZZZ999", "planted_failure", (), None
    detect = staticmethod(_boom)


def test_a_raising_reader_is_recorded_and_the_rest_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autopsy import ingest

    baseline = analyze(NAN_RUN, debug=False)
    real = ingest.readers

    def readers(broken=None):
        table = dict(real())
        table["results_json"] = _boom
        return table

    monkeypatch.setattr(ingest, "readers", readers)
    a = analyze(NAN_RUN, debug=False)
    failed = {x.path: x for x in a.run.artifacts if x.kind == "results_json"}
    assert set(failed) == {"all_results.json", "train_results.json"}
    for x in failed.values():
        assert x.status == "unreadable"
        assert x.problem.startswith("reader failed: ZeroDivisionError: planted failure; set AUTOPSY_DEBUG=1")
    assert [f.code for f in a.diagnosis.findings] == [f.code for f in baseline.diagnosis.findings] != []
    assert a.diagnosis.verdict.root_cause == baseline.diagnosis.verdict.root_cause
    with pytest.raises(ZeroDivisionError):
        analyze(NAN_RUN, debug=True)
    monkeypatch.setenv("AUTOPSY_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        analyze(NAN_RUN)


def test_a_raising_detector_is_reported_failed_and_the_rest_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import detectors

    baseline = analyze(NAN_RUN, debug=False)
    monkeypatch.setattr(detectors, "ALL", [_BrokenDetector, *detectors.ALL])
    a = analyze(NAN_RUN, debug=False)
    outcome = next(o for o in a.diagnosis.detectors if o.code == "ZZZ999")
    assert outcome.status == "failed"
    assert outcome.reason.startswith("ZeroDivisionError: planted failure at test_robustness_corpus.py:")
    assert [f.code for f in a.diagnosis.findings] == [f.code for f in baseline.diagnosis.findings] != []
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["run", str(NAN_RUN), "-f", "json", "-o", str(out), "-q"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    import json

    rep = json.loads(out.read_text())
    assert {"code": "ZZZ999", "status": "failed"}.items() <= next(d for d in rep["detectors"] if d["code"] == "ZZZ999").items()
    res = runner.invoke(app, ["run", str(NAN_RUN), "-f", "json", "-o", str(out), "-q"], env={"AUTOPSY_DEBUG": "1"})
    assert isinstance(res.exception, ZeroDivisionError)


def test_a_raising_detector_keeps_a_clean_run_from_being_called_healthy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that raised may be the one that would have found the failure: the verdict says so instead."""
    import detectors

    healthy = next(p for p in (Path(__file__).resolve().parent.parent / "sample_logs").iterdir() if "healthy" in p.name)
    assert analyze(healthy, debug=False).diagnosis.verdict.status == "healthy"
    monkeypatch.setattr(detectors, "ALL", [_BrokenDetector, *detectors.ALL])
    v = analyze(healthy, debug=False).diagnosis.verdict
    assert v.status == "inconclusive" and "ZZZ999" in v.headline

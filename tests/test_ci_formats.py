"""`--format github` (workflow commands + $GITHUB_STEP_SUMMARY) and `--format sarif` (validated against the
official SARIF 2.1.0 schema, tests/fixtures/sarif-schema-2.1.0.json, source in tests/fixtures/SOURCES.md)."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest
from conftest import FIXTURES, REPO
from typer.testing import CliRunner

import autopsy
from autopsy.cli import app
from autopsy.render import ci

SAMPLES = REPO / "sample_logs"
runner = CliRunner()
SCHEMA = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text())
#: ::level key=value,key=value::message (actions/toolkit command syntax)
COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


@pytest.fixture
def run_copy(tmp_path, monkeypatch):
    """A sample copied under the working directory, as a CI checkout would hold it."""
    def make(name: str):
        dst = tmp_path / "work" / name
        shutil.copytree(SAMPLES / name, dst)
        monkeypatch.chdir(tmp_path / "work")
        return dst
    return make


def _commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    out = []
    for line in text.splitlines():
        m = COMMAND.match(line)
        assert m, f"not a workflow command: {line!r}"
        props = dict(p.split("=", 1) for p in m.group(2).split(",")) if m.group(2) else {}
        out.append((m.group(1), props, m.group(3)))
    return out


def test_github_annotations_name_the_file_and_line(run_copy, tmp_path, monkeypatch):
    run = run_copy("minimind_style_nan")  # text-log evidence: findings cite train.log lines
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step output\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    res = runner.invoke(app, ["run", str(run), "-f", "github"])
    assert res.exit_code == 1
    cmds = _commands(res.stdout)
    errors = [c for c in cmds if c[0] == "error" and "file" in c[1]]
    assert errors
    for _, props, _ in errors:
        assert (run.parent / props["file"]).is_file()  # relative to the checkout (cwd)
    with_line = [p for _, p, _ in errors if "line" in p]
    assert with_line, "text-log evidence gives a line"
    for p in with_line:
        lines = (run.parent / p["file"]).read_text(errors="replace").splitlines()
        assert 1 <= int(p["line"]) <= len(lines)
    assert cmds[-1][1] == {"title": "autopsy verdict"} and cmds[-1][2].startswith("Failed: lr_too_high")
    text = summary.read_text()
    assert text.startswith("earlier step output\n")  # appended, not overwritten
    assert "## autopsy: FAILED" in text


def test_github_escapes_newlines_percent_and_property_separators():
    report = {"verdict": {"status": "failed", "root_cause": "crash", "confidence": 0.5, "headline": "100% dead\nnext"},
              "findings": [{"code": "X1", "name": "a,b:c", "severity": "warning", "title": "t", "message": "m%\r\n::x",
                            "evidence": [{"artifact": "dir,x/log:1.txt", "where": "line 7", "detail": ""}],
                            "remedies": []}],
              "run": {"root": "."}}
    lines = ci.github(report).splitlines()
    assert len(lines) == 2  # nothing in the message broke a line
    assert lines[0].startswith("::warning file=dir%2Cx/log%3A1.txt,line=7,title=X1 a%2Cb%3Ac::")
    assert lines[0].endswith("t: m%25%0D%0A::x")
    assert "100%25 dead%0Anext" in lines[1]


def test_healthy_run_gives_a_notice_and_exit_0(run_copy, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = run_copy("healthy_sft")
    res = runner.invoke(app, ["run", str(run), "-f", "github"])
    assert res.exit_code == 0
    assert [c[0] for c in _commands(res.stdout)] == ["notice"]


@pytest.mark.parametrize("name", ["lr_too_high_nan", "minimind_style_nan", "healthy_sft", "fp16_overflow"])
def test_sarif_validates_against_the_official_schema(run_copy, name):
    run = run_copy(name)
    res = runner.invoke(app, ["run", str(run), "-f", "sarif", "-o", "out.sarif"])
    assert res.exit_code in (0, 1), res.output
    log = json.loads((run.parent / "out.sarif").read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    a = autopsy.analyze(run)
    assert [r["ruleId"] for r in results] == [f.code for f in a.findings]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert (run.parent / uri).exists()  # relative to the checkout
        line = r["locations"][0]["physicalLocation"].get("region", {}).get("startLine")
        assert line is None or line >= 1
    assert log["runs"][0]["properties"]["verdict"]["status"] == a.verdict.status


def test_sarif_schema_catches_a_broken_log():
    """The schema copy is the real one: a result without a message is rejected."""
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "autopsy"}}, "results": [{"ruleId": "X"}]}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(bad)


def test_sarif_with_a_baseline_keeps_cmp_rules(tmp_path):
    a = autopsy.analyze(FIXTURES / "padding_free_twin" / "padding_free", baseline=FIXTURES / "padding_free_twin" / "padded")
    log = ci.sarif(a.to_dict())
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert "CMP001" in {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]}

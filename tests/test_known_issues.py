"""The known-issues knowledge base: every entry loads and validates, and every entry matches its own
thread's log excerpt and stays below "candidate" on its negative (a fixed version, or a healthy run
on the same stack).

One YAML file per entry under tests/fixtures/known_issues/ holds its cases (sqlfluff style); one
parametrised loader below turns every case into a pytest case. Each case's files are written into a
temp dir and read by the real pipeline (discover -> readers -> Run), then matched.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from autopsy.known_issues import load_entries, match_run
from autopsy.known_issues.match import LEVEL_RANK, check_version, parse_version
from autopsy.known_issues.schema import Affected, load_file, validate, version_fact_key
from autopsy.pipeline import read_run

FIXTURES = Path(__file__).parent / "fixtures"
CASE_DIR = FIXTURES / "known_issues"
ENTRIES = load_entries().entries
CASE_FILES = sorted(CASE_DIR.glob("*.yaml"))
#: expected levels a case may pin; "none" = the entry does not match at all
LEVELS = ("none", "info", "candidate", "direct")
#: the issue's floor: at least this many entries, each established in a public thread or PR
MIN_ENTRIES = 30


def _cases() -> list:
    out = []
    for f in CASE_FILES:
        doc = yaml.safe_load(f.read_text())
        for case in doc.get("cases", []):
            out.append(pytest.param(doc["entry"], case, id=f"{doc['entry']}::{case['name']}"))
    return out


def test_knowledge_base_loads_clean():
    res = load_entries()
    assert res.problems == [], res.problems
    assert len(res.entries) >= MIN_ENTRIES, len(res.entries)
    for e in res.entries:
        assert e.references and all(u.startswith("https://github.com/") or u.startswith("https://") for u in e.reference_urls())
        assert e.remedy and e.fixed_in and e.summary


def test_every_entry_has_a_positive_and_a_negative_case():
    by_entry: dict[str, list[str]] = {}
    for f in CASE_FILES:
        doc = yaml.safe_load(f.read_text())
        assert f.stem == doc["entry"], f"{f.name}: name it after its entry"
        by_entry[doc["entry"]] = [c["expect"] for c in doc["cases"]]
        for c in doc["cases"]:
            assert c["expect"] in LEVELS, (f.name, c["name"])
            assert c.get("source", "").startswith("https://"), f"{f.name}::{c['name']}: say which thread the excerpt is from"
    for e in ENTRIES:
        got = by_entry.get(e.id)
        assert got, f"{e.id}: no fixture file tests/fixtures/known_issues/{e.id}.yaml"
        assert any(x in ("candidate", "direct") for x in got), f"{e.id}: no case where it must match"
        assert any(x in ("none", "info") for x in got), f"{e.id}: no case where it must not match"


def test_fixture_sources_are_noted():
    sources = (FIXTURES / "SOURCES.md").read_text()
    for f in CASE_FILES:
        for c in yaml.safe_load(f.read_text())["cases"]:
            assert c["source"] in sources, f"{f.name}::{c['name']}: add {c['source']} to tests/fixtures/SOURCES.md"


@pytest.mark.parametrize("entry_id,case", _cases())
def test_entry_case(entry_id: str, case: dict, tmp_path: Path):
    for name, text in case["files"].items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    for key, value in (case.get("facts") or {}).items():
        # versions of packages the env-block reader does not extract yet (verl, accelerate, flash-attn...),
        # given as the environment line of the same thread states them
        run.config.add(key, value, "environment", "case facts")
    matches = {m.entry.id: m for m in match_run(run)}
    got = matches.get(entry_id)
    level = got.level if got else "none"
    expect = case["expect"]
    assert level == expect, (f"{entry_id}::{case['name']}: expected {expect}, got {level}",
                             got.why() if got else None, sorted(run.config.keys()), [e.message[:80] for e in run.events][:5])
    if expect in ("candidate", "direct"):
        assert got is not None and (got.events or got.shapes)
        for want in case.get("names_versions_to_check", []):
            assert want in [v.affected.package for v in got.to_check()]


# -- schema ----------------------------------------------------------------------------------------

GOOD = {
    "id": "KI-TEST-001", "summary": "s", "details": "d", "fixed_in": "1.1",
    "affected": [{"package": "deepspeed", "ranges": ">=0.12.4,<0.14"}],
    "signatures": {"shapes": ["nonfinite_after_healthy"]}, "remedy": "r",
    "references": [{"type": "REPORT", "url": "https://github.com/x/y/issues/1"}],
}


@pytest.mark.parametrize("patch,problem", [
    ({"id": "DS-1"}, "KI-<PACKAGE>-<NNN>"),
    ({"affected": [{"package": "torch", "ranges": "2.5.0"}]}, "not a PEP 440 specifier set"),
    ({"signatures": {"shapes": ["loss_looks_weird"]}}, "unknown metric shape"),
    ({"signatures": {"events": ["(unclosed"]}}, "invalid regex"),
    ({"signatures": {}}, "missing required field 'signatures'"),
    ({"signatures": {"events": ["x"], "match": "all"}}, "needs both events and shapes"),
    ({"references": [{"type": "BLOG", "url": "https://a"}]}, "references[0]"),
    ({"conditions": [{"fact": "deepspeed.zero_stage", "in": 2}]}, "must be a list"),
    ({"conditions": [{"fact": "x", "equals": 1, "gt": 0}]}, "exactly one of"),
    ({"surprise": 1}, "unknown field 'surprise'"),
    ({"remedy": None}, "missing required field 'remedy'"),
    ({"database_specific": {"candidate_severity": "critical"}}, "candidate_severity"),
])
def test_schema_rejects(patch: dict, problem: str):
    assert validate(GOOD) == []
    doc = {**GOOD, **patch}
    errs = validate(doc)
    assert any(problem in e for e in errs), errs


def test_bad_entry_file_is_skipped_with_a_reason(tmp_path: Path):
    (tmp_path / "KI-TEST-001.yaml").write_text(yaml.safe_dump(GOOD))
    (tmp_path / "KI-TEST-002.yaml").write_text("id: KI-TEST-002\nsummary: [unclosed\n")
    (tmp_path / "KI-TEST-003.yaml").write_text(yaml.safe_dump({**GOOD, "id": "KI-TEST-009"}))
    res = load_entries(tmp_path)
    assert [e.id for e in res.entries] == ["KI-TEST-001"]
    why = dict(res.problems)
    assert "invalid YAML" in why["KI-TEST-002.yaml"]
    assert "file name must be the entry id" in why["KI-TEST-003.yaml"]
    entry, errs = load_file(tmp_path / "missing.yaml")
    assert entry is None and "unreadable" in errs[0]


def test_version_keys_and_ranges():
    assert version_fact_key("flash-attn") == "version.flash_attn"
    assert version_fact_key("ms-swift") == "version.ms_swift"
    assert version_fact_key("bitsandbytes") == "version.bitsandbytes"
    assert str(parse_version("2.5.0+cu124")) == "2.5.0+cu124"
    assert str(parse_version("v0.14.0")) == "0.14.0"
    assert str(parse_version("2.11.0a0+eb65b36914.nv26.02")).startswith("2.11.0a0")
    assert parse_version("junk") is None
    from autopsy.model import Run

    run = Run(root=Path("."))
    run.config.add("version.torch", "2.5.0+cu124", "env.txt", "line 3")
    assert check_version(run, Affected("torch", "==2.5.0")).in_range is True
    assert check_version(run, Affected("torch", ">=2.5.1")).in_range is False
    assert check_version(run, Affected("deepspeed", ">=0.12.4")).in_range is None


def test_levels_are_ordered():
    assert [LEVEL_RANK[x] for x in ("info", "candidate", "direct")] == [0, 1, 2]


# -- docs ------------------------------------------------------------------------------------------

def test_docs_list_matches_the_entries():
    from autopsy.known_issues.cli import generated_list

    doc = (Path(__file__).parent.parent / "docs" / "known-issues.md").read_text()
    m = re.search(r"<!-- BEGIN GENERATED LIST -->\n(.*?)<!-- END GENERATED LIST -->", doc, re.S)
    assert m, "docs/known-issues.md lost its generated-list markers"
    assert m.group(1) == generated_list(ENTRIES), \
        "docs/known-issues.md is stale: run `python -m autopsy.known_issues.cli --write-docs`"


# -- the framework-bug dev cases (tests/fixtures/dev_cases): FW001 names the entry or the version to check --

DEV = FIXTURES / "dev_cases"


@pytest.mark.parametrize("case,entry,levels", [
    ("automodel1883_gemma4_sdpa_nan_lbs2", "KI-TRANSFORMERS-004", ("direct",)),
    ("automodel1883_gemma4_sdpa_nan_lbs2", "KI-TORCH-002", ("direct",)),
    ("megatronllm33_bf16_nan_not_detected", "KI-MEGATRON-001", ("candidate",)),
    ("trl5312_grpo_vllm_sleep_mode_weights_not_synced", "KI-TRL-001", ("candidate",)),
    ("llamafactory10224_qwen35moe_zero3_rank_disagreement", "KI-DEEPSPEED-002", ("candidate",)),
    ("verl721_grpo_nan_oldlogprob_exclamation_collapse", "KI-VERL-001", ("candidate",)),
])
def test_dev_case_names_the_entry(case: str, entry: str, levels: tuple[str, ...], tmp_path: Path):
    import shutil

    from detectors import framework_bug

    dst = tmp_path / case
    shutil.copytree(DEV / case, dst, ignore=shutil.ignore_patterns("truth.json"))
    run, _ = read_run(dst, with_checkpoints=False)
    found = [f for f in framework_bug.detect(run) if f.title.startswith(entry)]
    assert found, [f.title for f in framework_bug.detect(run)]
    f = found[0]
    assert f.root_cause == "framework_bug" and f.severity == "error" and f.references
    level = "direct" if f.basis == "direct" else "candidate"
    assert level in levels
    if level == "candidate":  # says which version to check
        assert "check the installed" in f.message.lower()
    assert any(e.artifact == "known-issues" and entry in e.where for e in f.evidence)

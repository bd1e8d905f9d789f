"""`autopsy compare FAILED GOOD` / `run --baseline` on real pairs: the samples' failing and healthy SFT runs
(same seed, same data; lr/optimizer/clipping/warmup differ) and a padding-free TRL run with its padded twin."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from typer.testing import CliRunner

import autopsy
from autopsy.cli import app
from autopsy.compare import PART_NOISE_FACTOR, compare_curve

SAMPLES = REPO / "sample_logs"
TWIN = FIXTURES / "padding_free_twin"
runner = CliRunner()


@pytest.fixture(scope="module")
def lr_vs_healthy():
    return autopsy.analyze(SAMPLES / "lr_too_high_nan", baseline=SAMPLES / "healthy_sft")


@pytest.fixture(scope="module")
def twin():
    return autopsy.analyze(TWIN / "padding_free", baseline=TWIN / "padded")


def test_config_differences_are_only_the_keys_that_differ_with_canonical_names(lr_vs_healthy):
    rows = {r["key"]: (r["a"], r["b"]) for r in lr_vs_healthy.comparison.config}
    # sample_logs/README.md: the lr sample is the healthy one with optim sgd, lr 5.0 warmed up over 30 steps,
    # max_grad_norm 1e9; nothing else (seed, data, model, lengths) changes
    assert rows == {"learning_rate": (5.0, 0.01), "optim": ("sgd", "adamw_torch"),
                    "max_grad_norm": (1e9, 1.0), "warmup_steps": (30, 6)}
    assert lr_vs_healthy.comparison.versions == []  # same transformers/trl/torch on both sides


def test_curves_part_where_the_divergence_starts_not_at_the_first_wobble(lr_vs_healthy):
    loss = lr_vs_healthy.comparison.curve("loss")
    assert loss.start == (pytest.approx(3.8927, abs=1e-3), pytest.approx(3.8927, abs=1e-3))  # same seed: same first loss
    assert loss.start_gap == pytest.approx(0.0, abs=1e-9)
    # README: the lr run's loss falls to 2.25 (step 8), rises from step 22; NaN filter zeros from step 34
    assert loss.part_step == 22
    a, b = loss.part_values
    na, nb = loss.noise
    assert abs(a - b) > PART_NOISE_FACTOR * (na + nb)
    assert loss.final == (0.0, pytest.approx(1.056, abs=1e-3))  # 0.0 is HF's NaN filter, not convergence


def test_identical_runs_do_not_part_and_have_no_differences():
    same = autopsy.analyze(SAMPLES / "healthy_sft", baseline=SAMPLES / "healthy_sft")
    cmp = same.comparison
    assert cmp.config == [] and cmp.versions == []
    assert all(c.part_step is None for c in cmp.curves)
    assert [f.code for f in cmp.findings] == []
    assert [(c["step"], c["changed"]) for c in cmp.checkpoints] == [(20, 0), (40, 0), (60, 0)]
    assert same.verdict.status == "healthy"


def test_checkpoint_tensor_differences_at_matching_steps(lr_vs_healthy):
    cks = {c["step"]: c for c in lr_vs_healthy.comparison.checkpoints}
    assert sorted(cks) == [20, 40, 60]
    assert cks[20]["changed"] == 21 and cks[20]["identical"] == 0
    assert cks[20]["nonfinite_only_a"] == []  # checkpoint-20 is the last clean one (README)
    assert len(cks[40]["nonfinite_only_a"]) >= 20 and cks[40]["nonfinite_only_b"] == []
    top = cks[20]["top"][0]
    assert top["rel_l2"] > 0.1 and top["name"].startswith("model.")


def test_baseline_findings_strengthen_the_verdict(lr_vs_healthy):
    alone = autopsy.analyze(SAMPLES / "lr_too_high_nan")
    assert alone.verdict.root_cause == lr_vs_healthy.verdict.root_cause == "lr_too_high"
    assert lr_vs_healthy.verdict.confidence > alone.verdict.confidence
    cmp = {f.code: f for f in lr_vs_healthy.findings if f.code.startswith("CMP")}
    assert set(cmp) == {"CMP002", "CMP003"}
    assert cmp["CMP002"].root_cause == "lr_too_high" and cmp["CMP002"].first_step == 22
    details = " ".join(e.detail for e in cmp["CMP002"].evidence)
    assert "learning_rate = 5 here, 0.01 in the baseline" in details
    assert {e.where for e in cmp["CMP003"].evidence} == {"key learning_rate", "key optim", "key max_grad_norm",
                                                         "key warmup_steps"}


def test_padding_free_twin_start_loss_far_above_the_padded_baseline(twin):
    alone = autopsy.analyze(TWIN / "padding_free")
    # transformers 5.23 >= 4.54: the single-run detector trusts the version and stays silent
    assert alone.verdict.status == "healthy"
    cmp = twin.comparison
    assert {r["key"] for r in cmp.config} == {"padding_free", "max_length"}
    loss = cmp.curve("loss")
    assert loss.start[0] == pytest.approx(5.61, abs=0.01) and loss.start[1] == pytest.approx(0.8344, abs=0.001)
    assert loss.part_step == 1
    f = next(f for f in twin.findings if f.code == "CMP001")
    assert f.root_cause == "padding_free_without_flash_attn" and f.severity == "error"
    assert any("padding_free = true here, false in the baseline" in e.detail for e in f.evidence)
    assert twin.verdict.status == "failed" and twin.verdict.root_cause == "padding_free_without_flash_attn"


def test_padded_run_against_padding_free_twin_is_not_blamed_on_padding_free():
    """Reversed roles: the padded run starts *below* its baseline: no start-loss finding, no packing cause."""
    rev = autopsy.analyze(TWIN / "padded", baseline=TWIN / "padding_free")
    assert not any(f.code == "CMP001" for f in rev.findings)
    assert rev.verdict.root_cause != "padding_free_without_flash_attn"


def test_compare_curve_judges_noise_per_run(tmp_path):
    """A run with a big but steady offset parts at once; jitter of each run's own size does not part."""
    import pandas as pd

    from autopsy.model import Run

    def run(values):
        r = Run(root=tmp_path)
        r.scalars = pd.DataFrame({"step": list(range(1, len(values) + 1)), "metric": ["loss"] * len(values),
                                  "value": values, "source": ["x"] * len(values),
                                  "line": pd.array([None] * len(values), dtype="Int64"), "key": ["loss"] * len(values)})
        return r

    jitter = [2.0 + (0.1 if i % 2 else -0.1) for i in range(20)]
    other = [2.0 + (-0.1 if i % 2 else 0.1) for i in range(20)]  # same noise, opposite phase: gap 0.2 < 3 x 0.4
    assert compare_curve(run(jitter), run(other), "loss").part_step is None
    late = other[:12] + [v + 5 for v in other[12:]]
    assert compare_curve(run(late), run(other), "loss").part_step == 13


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.svgs = 0
        self.scripts = 0
        self.section = False

    def handle_starttag(self, tag, attrs):
        self.svgs += tag == "svg"
        self.scripts += tag == "script"
        self.section |= tag == "section" and ("id", "comparison") in attrs


def test_cli_compare_html_overlays_both_runs_and_escapes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cmp.html"
    res = runner.invoke(app, ["compare", str(SAMPLES / "lr_too_high_nan"), str(SAMPLES / "healthy_sft"), "-o", str(out)])
    assert res.exit_code == 1, res.output  # a failure is diagnosed
    assert "curves part at step 22" in res.output
    html = out.read_text()
    p = _Text()
    p.feed(html)
    assert p.section and p.scripts == 0
    overlay = html[html.index('id="comparison"'):]
    assert 'data-metric="loss (this run)"' in overlay and 'data-metric="loss (baseline)"' in overlay
    assert "curves part at step 22" in overlay


def test_comparison_html_escapes_config_values(tmp_path):
    a = autopsy.analyze(SAMPLES / "lr_too_high_nan", baseline=SAMPLES / "healthy_sft")
    report = a.to_dict()
    report["comparison"]["config"][0]["a"] = "<script>alert(1)</script>"
    from autopsy.render import html as html_render

    text = html_render.render(report)
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_run_baseline_equals_compare(tmp_path):
    a = runner.invoke(app, ["run", str(TWIN / "padding_free"), "--baseline", str(TWIN / "padded"), "-f", "json", "-o", "-"])
    b = runner.invoke(app, ["compare", str(TWIN / "padding_free"), str(TWIN / "padded"), "-f", "json", "-o", "-"])
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert ja["verdict"] == jb["verdict"] and ja["verdict"]["root_cause"] == "padding_free_without_flash_attn"
    assert ja["comparison"]["curves"] == jb["comparison"]["curves"]
    assert a.exit_code == b.exit_code == 1


def test_compared_report_validates_against_the_report_schema(lr_vs_healthy):
    import jsonschema

    schema = json.loads((REPO / "autopsy" / "schema" / "report.schema.json").read_text())
    jsonschema.validate(json.loads(lr_vs_healthy.to_json()), schema)


def test_markdown_has_the_comparison_table(lr_vs_healthy):
    md = lr_vs_healthy.to_markdown()
    block = md[md.index("### Compared with the baseline"):]
    assert re.search(r"\| learning_rate \| 5 \| 0\.01 \|", block)  # Markdown escapes only what changes the rendering
    assert "| loss |" in block


def test_missing_baseline_is_a_one_line_error(tmp_path):
    res = runner.invoke(app, ["compare", str(SAMPLES / "healthy_sft"), str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "nope: no such file or directory" in res.output


def test_paths_in_config_rows_are_artifacts_of_each_side(lr_vs_healthy):
    row = next(r for r in lr_vs_healthy.comparison.config if r["key"] == "learning_rate")
    assert Path(SAMPLES / "lr_too_high_nan" / row["a_source"]).is_file()
    assert Path(SAMPLES / "healthy_sft" / row["b_source"]).is_file()


def test_versions_are_listed_apart_and_outcome_keys_are_not_config(tmp_path):
    from autopsy.compare import config_differences
    from autopsy.model import Run

    a, b = Run(root=tmp_path), Run(root=tmp_path)
    for run, tf, lr, gs in ((a, "4.53.0", 2e-5, 120), (b, "4.56.1", 2e-5, 300)):
        run.config.add("version.transformers", tf, "trainer_state.json")
        run.config.add("learning_rate", lr, "training_args.bin")
        run.config.add("global_step", gs, "trainer_state.json")  # how far it got: an outcome, not a setting
        run.config.add("results.train_loss", 1.0 + gs, "all_results.json")
    a.config.add("packing", True, "args.json")
    rows, versions = config_differences(a, b)
    assert [(r["key"], r["a"], r["b"]) for r in rows] == [("packing", True, None)]
    assert [(r["key"], r["a"], r["b"]) for r in versions] == [("version.transformers", "4.53.0", "4.56.1")]

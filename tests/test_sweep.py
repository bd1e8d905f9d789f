"""`autopsy sweep` / `autopsy.sweep`: a folder of real sample runs, locally and on a real Dask LocalCluster;
a Ray Tune experiment folder read as a sweep; a broken run never stops the sweep; the API and the CLI agree."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from typer.testing import CliRunner

import autopsy
from autopsy.cli import app
from autopsy.sweep_engine import analyze_one, expand, run_sweep

SAMPLES = REPO / "sample_logs"
runner = CliRunner()
#: sample_logs/README.md's expected verdicts
EXPECTED = {"healthy_sft": ("healthy", "healthy"), "lr_too_high_nan": ("failed", "lr_too_high"),
            "lora_frozen_gradientless": ("failed", "gradientless_params"),
            "simpo_empty_response": ("failed", "empty_response"), "fp16_overflow": ("failed", "fp16_overflow"),
            "minimind_style_nan": ("failed", "lr_too_high")}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """The samples, plus a broken run (a truncated, binary trainer_state.json and nothing else)."""
    d = tmp_path_factory.mktemp("sweep")
    for name in EXPECTED:
        shutil.copytree(SAMPLES / name, d / name)
    broken = d / "zz_broken"
    broken.mkdir()
    (broken / "trainer_state.json").write_bytes(b"\x00\x01{\"log_history\": [" + b"\xff" * 100)
    return d


def _verdicts(rows) -> dict[str, tuple]:
    return {Path(r["run"]).name: (r["status"], r["root_cause"]) for r in rows}


def test_expand_finds_each_run_of_a_sweep_folder(sweep_dir):
    specs, problems = expand([str(sweep_dir)])
    assert sorted(Path(s.path).name for s in specs) == sorted([*EXPECTED, "zz_broken"])
    assert problems == []
    specs, problems = expand([str(sweep_dir / "*_nan"), str(sweep_dir / "nothing-*")])
    assert sorted(Path(s.path).name for s in specs) == ["lr_too_high_nan", "minimind_style_nan"]
    assert problems == [f"{sweep_dir / 'nothing-*'}: no such file or directory (the glob matched nothing)"]


def test_local_sweep_matches_the_samples_verdicts_and_survives_a_broken_run(sweep_dir, tmp_path):
    res = run_sweep([str(sweep_dir)], workers=2, reports_dir=tmp_path / "reports")
    got = _verdicts(res.rows)
    assert {k: v for k, v in got.items() if k != "zz_broken"} == EXPECTED
    assert got["zz_broken"] == ("error", None)
    broken = next(r for r in res.rows if r["name"] == "zz_broken")
    assert "trainer_state.json" in broken["error"]
    for r in res.rows:
        if r["status"] != "error":
            assert Path(r["report"]).is_file() and Path(r["report"]).parent == tmp_path / "reports"
    # grouped by cause: failures first (largest group first), then healthy, then errors
    names = [n for n, _ in res.groups()]
    assert names[0] == "lr_too_high" and names[-2:] == ["healthy", "error"]
    assert "learning_rate" in res.varying() and "seed" not in res.varying()  # seed is 1234 in every sample


def test_dask_local_cluster_gives_the_same_rows(sweep_dir, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        res = run_sweep([str(sweep_dir)], cluster=client, reports_dir=tmp_path / "dask-reports")
        # the same function ran in the cluster's worker processes, not here
        assert set(client.run(lambda: __import__("os").getpid())) and res.workers.startswith("dask")
        by_address = run_sweep([str(sweep_dir / "healthy_sft")], cluster=cluster.scheduler_address)
    local = run_sweep([str(sweep_dir)], workers=1)
    assert _verdicts(res.rows) == _verdicts(local.rows)
    assert [r["confidence"] for r in sorted(res.rows, key=lambda r: r["run"])] == \
        [r["confidence"] for r in sorted(local.rows, key=lambda r: r["run"])]
    assert _verdicts(by_address.rows) == {"healthy_sft": ("healthy", "healthy")}
    assert all(Path(r["report"]).is_file() for r in res.rows if r["status"] != "error")


def _deadly(path, reports_dir=None, params=None, baseline=None):
    """Kills its worker process on one run (os._exit, as a crashing native reader would); analyses the others."""
    import os

    if path.endswith("fp16_overflow"):
        os._exit(9)
    return analyze_one(path, reports_dir, params, baseline)


def test_a_worker_process_that_dies_costs_only_its_run(sweep_dir, monkeypatch, tmp_path):
    import autopsy.sweep_engine as sweep_mod

    monkeypatch.setattr(sweep_mod, "analyze_one", _deadly)  # the pool runs the module's function: forked workers see this
    res = run_sweep([str(sweep_dir)], workers=2)
    got = _verdicts(res.rows)
    assert got["fp16_overflow"] == ("error", None)
    assert "worker process died" in next(r for r in res.rows if r["name"] == "fp16_overflow")["error"]
    assert {k: v for k, v in got.items() if k not in ("fp16_overflow", "zz_broken")} == \
        {k: v for k, v in EXPECTED.items() if k != "fp16_overflow"}


def test_ray_tune_experiment_folder_is_read_as_a_sweep(tmp_path):
    exp = tmp_path / "raytune_sweep"
    shutil.copytree(FIXTURES / "raytune_sweep", exp)
    specs, _ = expand([str(exp)])
    assert len(specs) == 3 and all(s.params.get("batch_size") == 64 for s in specs)
    df = autopsy.sweep(exp, workers=1)
    df["lr"] = df["hp.lr"]
    by_lr = {row.lr: (row.status, row.root_cause) for row in df.itertuples()}
    assert by_lr == {0.01: ("healthy", "healthy"), 0.05: ("healthy", "healthy"), 8.0: ("failed", "lr_too_high")}
    assert "hp.batch_size" not in df.columns  # 64 in every trial: not a varying hyper-parameter
    onset = df.loc[df["hp.lr"] == 8.0, "onset"].item()
    assert onset == 81  # the loss overflows to inf at training_iteration 81 (scripts/make_raytune_fixture.py)


def test_ray_tune_trial_reader_uses_training_iteration_and_skips_autofilled_keys():
    trial = next(p for p in (FIXTURES / "raytune_sweep").iterdir() if p.is_dir() and "lr=8.0000" in p.name)
    a = autopsy.analyze(trial)
    assert "ray_tune" in a.run.frameworks
    loss = a.run.series("loss")
    assert loss["step"].min() == 1 and loss["step"].max() == 100
    assert not {"time_this_iter_s", "pid", "timestamp"} & set(a.run.scalars["key"])
    assert a.config.get("learning_rate") == 8.0
    kinds = {x.path: x.status for x in a.run.artifacts if x.kind.startswith("raytune")}
    assert kinds["progress.csv"] == "ignored" and kinds["result.json"] == "read"


def test_api_returns_the_same_verdicts_as_the_cli(sweep_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    df = autopsy.sweep([sweep_dir], workers=2)
    res = runner.invoke(app, ["sweep", str(sweep_dir), "-f", "json", "-o", "-", "-j", "2", "-q"])
    assert res.exit_code == 1  # failures in the sweep
    cli = {Path(r["run"]).name: (r["status"], r["root_cause"]) for r in json.loads(res.stdout)["runs"]}
    api = {Path(r).name: (s, c if isinstance(c, str) else None)  # pandas: a missing string is NaN
           for r, s, c in zip(df["run"], df["status"], df["root_cause"])}
    assert cli == api
    for name, (status, cause) in EXPECTED.items():
        single = runner.invoke(app, ["run", str(sweep_dir / name), "-f", "json", "-o", "-", "-q"])
        v = json.loads(single.stdout)["verdict"]
        assert (v["status"], v["root_cause"]) == (status, cause) == api[name]
        assert autopsy.analyze(sweep_dir / name).verdict.to_json() == v


def test_sweep_outputs_csv_md_html(sweep_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for fmt in ("csv", "md", "html"):
        res = runner.invoke(app, ["sweep", str(sweep_dir), "-f", fmt, "-j", "2"])
        assert res.exit_code == 1, res.output
        assert f"table: autopsy-sweep.{fmt}" in res.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "autopsy-sweep.csv").read_text())))
    assert len(rows) == 7 and {"run", "status", "root_cause", "onset", "confidence", "report", "hp.learning_rate"} <= set(rows[0])
    md = (tmp_path / "autopsy-sweep.md").read_text()
    assert "### lr_too_high (2)" in md and "](autopsy-sweep-reports/" in md
    html = (tmp_path / "autopsy-sweep.html").read_text()
    assert 'href="autopsy-sweep-reports/healthy_sft-' in html and "<script" not in html
    assert "&lt;p&gt;" not in html and "&lt;/td&gt;" not in html  # our own markup is never escaped into text
    assert (tmp_path / "autopsy-sweep-reports").is_dir()


def test_run_names_are_escaped_and_csv_cells_cannot_be_formulas(tmp_path):
    evil = tmp_path / "runs" / "=HYPERLINK(1)<b>x"
    shutil.copytree(SAMPLES / "minimind_style_nan", evil)
    from autopsy.render import sweep_out

    res = run_sweep([str(tmp_path / "runs")], workers=1)
    html = sweep_out.to_html(res, tmp_path)
    assert "<b>x" not in html and "&lt;b&gt;x" in html
    assert "'=HYPERLINK(1)<b>x" in sweep_out.to_csv(res)


def test_autopsy_sweep_stays_the_function_after_the_engine_is_imported():
    import autopsy.sweep_engine  # noqa: F401

    assert callable(autopsy.sweep) and autopsy.sweep.__module__ == "autopsy.api"


def test_analyze_one_never_raises(tmp_path):
    row = analyze_one(str(tmp_path / "missing"))
    assert row["status"] == "error" and "no such file" in row["error"]


def test_no_runs_is_a_usage_error(tmp_path):
    res = runner.invoke(app, ["sweep", str(tmp_path / "none-*")])
    assert res.exit_code == 2 and "the glob matched nothing" in res.output

"""How logs arrive (issue 11): format by content, stdin, .gz/.zip, multi-rank logs, and the small
things users hit (help text, progress bars glued to messages, Markdown escaping)."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import math
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopsy.cli import app
from autopsy.discover import classify, discover
from autopsy.ingest import archives
from autopsy.ingest.events import strip_bar
from autopsy.pipeline import read_run
from autopsy.render.markdown import md

runner = CliRunner()
DEV = Path(__file__).parent / "fixtures" / "dev_cases"
#: LLaMA-Factory trainer_log.jsonl records (llamafactory/train/callbacks.py LogCallback.on_log keys)
LF_RECORDS = "".join(json.dumps({"current_steps": i, "total_steps": 30, "loss": 2.0 / i, "lr": 1e-5, "epoch": i / 10,
                                 "percentage": i / 30 * 100, "elapsed_time": "0:00:10", "remaining_time": "0:01:00"}) + "\n"
                     for i in range(1, 31))


def series(run, metric):
    s = run.series(metric)
    return [(int(a), float(b)) for a, b in zip(s["step"], s["value"])]


# -- format by content -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["log.txt", "pasted", "trainer_log.jsonl", "notes.md"])
def test_llamafactory_records_are_read_as_such_whatever_the_name(tmp_path: Path, name: str):
    p = tmp_path / name
    p.write_text(LF_RECORDS)
    assert classify(p, p.stat().st_size) == "llamafactory_jsonl"
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss")[:2] == [(1, 2.0), (2, 1.0)] and len(series(run, "loss")) == 30
    assert "llamafactory" in run.frameworks


def test_content_decides_tables_trainer_state_and_plain_logs(tmp_path: Path):
    yolo = tmp_path / "results.txt"  # ultralytics results.csv attached under another name
    yolo.write_text("                  epoch,         train/box_loss,         train/cls_loss,           val/box_loss,"
                    "                 lr/pg0\n                      1,                 1.2185,                 1.4082,"
                    "                 1.1012,               0.070291\n                      2,                    nan,"
                    "                    nan,                    nan,               0.040291\n")
    listing = tmp_path / "losses"  # a bare step/loss listing with no extension and no header
    listing.write_text("100 2.5\n200 2.1\n300 1.9\n")
    state = tmp_path / "state.txt"
    state.write_text(json.dumps({"global_step": 2, "log_history": [{"loss": 1.5, "step": 1}, {"loss": 1.4, "step": 2}]},
                                indent=2))
    config = tmp_path / "config.txt"  # one JSON config object stays a text file (facts come from it)
    config.write_text('{"fp16": {"enabled": true}}')
    kinds = {f.path.name: f.kind for f in discover(tmp_path).files}
    assert kinds == {"results.txt": "metrics_csv", "losses": "metrics_csv", "state.txt": "trainer_state",
                     "config.txt": "text_log"}
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "box_loss")[0] == (1, 1.2185) and math.isnan(series(run, "box_loss")[1][1])
    assert series(run, "eval_box_loss")[0] == (1, 1.1012) and series(run, "learning_rate")[1] == (2, 0.040291)
    assert [p for p in series(run, "loss") if p[0] >= 100] == [(100, 2.5), (200, 2.1), (300, 1.9)]
    assert (1, 1.5) in series(run, "loss")


def test_a_file_mixing_formats_is_read_part_by_part(tmp_path: Path):
    p = tmp_path / "issue.md"
    p.write_text("## Bug\nTraining diverges.\n```\n" + LF_RECORDS.splitlines()[0] + "\n```\nand later\n```\n"
                 "iteration       10/     100 | lm loss: 2.000000E+00 | loss scale: 1.0 | grad norm: 0.9 |\n```\n"
                 "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                 "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 2.0), (10, 2.0)] and series(run, "grad_norm") == [(10, 0.9)]
    assert [e.kind for e in run.events if e.kind == "traceback"] == ["traceback"]


# -- stdin -------------------------------------------------------------------------------------

def test_run_dash_reads_stdin_and_names_it(tmp_path: Path):
    log = (DEV / "timm814_mnv3_lr_not_scaled_for_batch_nan" / "log.txt").read_bytes()
    res = runner.invoke(app, ["run", "-", "--format", "json", "--output", "-", "--quiet"], input=log)
    rep = json.loads(res.stdout)
    assert res.exit_code == 1 and rep["verdict"]["root_cause"] == "lr_too_high"
    assert [a["path"] for a in rep["artifacts"]] == ["<stdin>"]
    gz = runner.invoke(app, ["run", "-", "--format", "json", "--output", "-", "--quiet"], input=gzip.compress(log))
    assert json.loads(gz.stdout)["verdict"]["root_cause"] == "lr_too_high"


def test_run_dash_with_empty_stdin_is_a_clear_error():
    res = runner.invoke(app, ["run", "-"], input=b"")
    assert res.exit_code == 2 and "stdin was empty" in res.output


def test_stdin_longer_than_the_bound_is_cut_and_said(tmp_path: Path):
    from autopsy.spool import spool_stdin

    path, kept, cut = spool_stdin(io.BytesIO(b"x" * 5000), tmp_path, limit=1000)
    assert path.name == "<stdin>" and kept == 1000 and cut and path.stat().st_size == 1000


# -- archives ----------------------------------------------------------------------------------

def test_gz_and_zip_are_read_transparently(tmp_path: Path):
    timm = (DEV / "timm814_mnv3_lr_not_scaled_for_batch_nan" / "log.txt").read_bytes()
    (tmp_path / "train.log.gz").write_bytes(gzip.compress(timm))
    with zipfile.ZipFile(tmp_path / "logs.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("run/trainer_log.jsonl", LF_RECORDS)
        z.writestr("inner.zip", b"PK\x03\x04")
        z.writestr("../../escape.log", "step 1 | loss 9.0\nstep 2 | loss 8.0\nstep 3 | loss 7.0\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    read = {a.path: a.kind for a in run.artifacts if a.status in ("read", "partial")}
    assert read == {"train.log.gz": "text_log", "logs.zip": "archive", "logs.zip/run/trainer_log.jsonl": "llamafactory_jsonl",
                    "logs.zip/../../escape.log": "text_log"}
    assert series(run, "learning_rate")[-1] == (4 * 5004 + 550, 6.227e-02)  # the timm log inside the .gz
    assert len(series(run, "loss")) >= 30
    arch = next(a for a in run.artifacts if a.path == "logs.zip")
    assert arch.status == "partial" and "inner.zip (an archive inside the archive: not opened)" in arch.problem
    assert not (tmp_path.parent / "escape.log").exists() and not (tmp_path / "escape.log").exists()


def test_zip_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", 64 * 1024)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("train.log", b"{'loss': 1.0, 'epoch': 0.1}\n" * 200_000)  # 5.6 MB -> a few KB compressed
    run, _ = read_run(tmp_path, with_checkpoints=False)
    member = next(a for a in run.artifacts if a.path == "bomb.zip/train.log")
    assert member.status == "partial" and "zip bomb" in member.problem
    assert 0 < len(series(run, "loss")) < 200_000


def test_damaged_gz_reads_what_came_before_the_cut(tmp_path: Path):
    data = gzip.compress(b"".join(b"step %d | loss %f\n" % (i, 1 / i) for i in range(1, 2000)))
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) // 2])
    run, _ = read_run(tmp_path, with_checkpoints=False)
    art = next(a for a in run.artifacts if a.path == "cut.log.gz")
    assert art.status == "partial" and "damaged or cut" in art.problem
    assert len(series(run, "loss")) > 10


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


STEP_LOG = b"".join(b"step %d | loss %.4f\n" % (i, 2.0 / i) for i in range(1, 41))


@pytest.mark.parametrize("name,mode", [("logs.tar", "w"), ("logs.tar.gz", "w:gz"), ("logs.tgz", "w:gz"),
                                       ("logs.tar.bz2", "w:bz2"), ("logs.tar.xz", "w:xz"),
                                       ("bundle", "w:gz")])  # no extension: the content decides
def test_tar_archives_are_read_transparently(tmp_path: Path, name: str, mode: str):
    with tarfile.open(tmp_path / name, mode) as tf:
        _add(tf, "run/trainer_log.jsonl", LF_RECORDS.encode())
        _add(tf, "run/train.log", STEP_LOG)
        tf.add(tmp_path, arcname="run/subdir", recursive=False)  # a directory entry: passed over silently
    run, _ = read_run(tmp_path, with_checkpoints=False)
    read = {a.path: a.kind for a in run.artifacts if a.status in ("read", "partial")}
    assert read == {name: "archive", f"{name}/run/trainer_log.jsonl": "llamafactory_jsonl",
                    f"{name}/run/train.log": "text_log"}
    assert next(a for a in run.artifacts if a.path == name).status == "read"
    assert len(series(run, "loss")) == 40  # the 30 LLaMA-Factory steps and the 40 text steps, by step
    assert series(run, "loss")[-1] == (40, 0.05)


def test_tar_links_devices_and_escaping_names_are_skipped_and_named(tmp_path: Path):
    with tarfile.open(tmp_path / "logs.tar.gz", "w:gz") as tf:
        _add(tf, "train.log", STEP_LOG)
        link = tarfile.TarInfo("passwd.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
        hard = tarfile.TarInfo("again.log")
        hard.type, hard.linkname = tarfile.LNKTYPE, "train.log"
        tf.addfile(hard)
        dev = tarfile.TarInfo("dev/null.log")
        dev.type = tarfile.CHRTYPE
        tf.addfile(dev)
        _add(tf, "../../escape.log", b"step 1 | loss 9.0\n")
        _add(tf, "/abs/root.log", b"step 1 | loss 9.0\n")
        _add(tf, "inner.tar.gz", gzip.compress(b"x"))
    run, _ = read_run(tmp_path, with_checkpoints=False)
    arch = next(a for a in run.artifacts if a.path == "logs.tar.gz")
    assert arch.status == "partial" and arch.problem.startswith("6 member(s) not read")
    for what in ("passwd.log (a symbolic link to '/etc/passwd'", "again.log (a hard link", "dev/null.log (a device file)",
                 "../../escape.log (an absolute or '..' name", "/abs/root.log (an absolute or '..' name"):
        assert what in arch.problem
    assert [a.path for a in run.artifacts if a.path.startswith("logs.tar.gz/")] == ["logs.tar.gz/train.log"]
    assert series(run, "loss")[0] == (1, 2.0)  # not the 9.0 of the refused members
    assert not (tmp_path.parent / "escape.log").exists() and not (tmp_path / "escape.log").exists()


def test_truncated_tar_keeps_the_members_before_the_cut(tmp_path: Path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        _add(tf, "a/train.log", STEP_LOG)
        _add(tf, "b/noise.bin", bytes(range(256)) * 4000)  # incompressible-ish: the cut falls inside it
        _add(tf, "c/late.log", STEP_LOG)
    data = buf.getvalue()
    (tmp_path / "logs.tar.gz").write_bytes(data[: len(data) * 2 // 3])
    (tmp_path / "other.log").write_text("step 1 | grad_norm 1.5\nstep 2 | grad_norm 1.6\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    arch = next(a for a in run.artifacts if a.path == "logs.tar.gz")
    assert arch.status == "partial" and "tar archive is damaged or cut" in arch.problem
    assert "members before the damage were read" in arch.problem
    assert series(run, "loss")[-1] == (40, 0.05)  # a/train.log came before the cut
    assert not any(a.path == "logs.tar.gz/c/late.log" for a in run.artifacts)
    assert series(run, "grad_norm") == [(1, 1.5), (2, 1.6)]  # the rest of the run is still read


@pytest.mark.parametrize("cut", [3, 4, 9])
def test_gzip_cut_inside_its_header_is_a_problem_not_a_crash(tmp_path: Path, cut: int):
    """CPython's tarfile raises TypeError (``ord(b"")``) on a gzip header cut after the magic (found by the fuzz test)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        _add(tf, "train.log", STEP_LOG)
    (tmp_path / "logs.tar.gz").write_bytes(buf.getvalue()[:cut])
    (tmp_path / "train.log").write_bytes(STEP_LOG)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    arch = next(a for a in run.artifacts if a.path == "logs.tar.gz")
    assert arch.status in ("partial", "unreadable") and arch.problem
    assert len(series(run, "loss")) == 40


def test_garbage_named_tar_is_a_clear_problem(tmp_path: Path):
    (tmp_path / "logs.tar").write_bytes(b"this is not a tar file at all\n" * 30)
    (tmp_path / "train.log").write_bytes(STEP_LOG)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    arch = next(a for a in run.artifacts if a.path == "logs.tar")
    assert arch.status == "ignored" and "not gzip, bzip2, xz, zip or tar data" in arch.problem
    assert len(series(run, "loss")) == 40


@pytest.mark.parametrize("ext,compress", [(".bz2", bz2.compress), (".xz", lzma.compress)])
def test_bz2_and_xz_logs_are_read_and_a_cut_one_keeps_its_head(tmp_path: Path, ext: str, compress):
    data = compress(STEP_LOG)
    (tmp_path / f"train.log{ext}").write_bytes(data)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss")[:2] == [(1, 2.0), (2, 1.0)]
    assert next(a for a in run.artifacts if a.path == f"train.log{ext}").status == "read"
    cut = tmp_path / "cut"
    cut.mkdir()
    big = compress(b"".join(b"step %d | loss %f\n" % (i, 1 / i) for i in range(1, 200_000)))
    (cut / f"train.log{ext}").write_bytes(big[: len(big) // 2])
    run, _ = read_run(cut, with_checkpoints=False)
    art = next(a for a in run.artifacts if a.path == f"train.log{ext}")
    assert art.status == "partial" and "damaged or cut" in art.problem
    assert 10 < len(series(run, "loss")) < 199_999


def test_tar_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", 64 * 1024)
    with tarfile.open(tmp_path / "bomb.tar.xz", "w:xz") as tf:
        _add(tf, "train.log", b"{'loss': 1.0, 'epoch': 0.1}\n" * 200_000)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    member = next(a for a in run.artifacts if a.path == "bomb.tar.xz/train.log")
    assert member.status == "partial" and "only the first" in member.problem
    assert 0 < len(series(run, "loss")) < 200_000


# -- ranks -------------------------------------------------------------------------------------

def test_rank_tagged_lines_keep_their_rank(tmp_path: Path):
    lines = []
    for s in range(1, 4):
        lines.append(f"[rank0]: step {s} | loss {2 - s / 10:.2f}")
        lines.append(f"[rank1]: step {s} | loss {'nan' if s == 3 else f'{2 - s / 10:.2f}'}")
    # https://github.com/hiyouga/LlamaFactory/issues/10224
    lines.append("[rank7]: RuntimeError: Detected a disagreement on list length between rank0 and rank7: ")
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7)]
    got = series(run, "loss@rank1")
    assert got[:2] == [(1, 1.9), (2, 1.8)] and math.isnan(got[2][1])
    (tb,) = [e for e in run.events if e.kind == "traceback"]
    assert tb.rank == 7


def test_per_rank_files(tmp_path: Path):
    (tmp_path / "rank0.log").write_text("step 1 | loss 2.0\nstep 2 | loss 1.9\n")
    (tmp_path / "rank1.log").write_text("step 1 | loss 2.0\nstep 2 | loss nan\nRuntimeError: boom\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 2.0), (2, 1.9)] and len(series(run, "loss@rank1")) == 2
    assert [e.rank for e in run.events if e.kind == "traceback"] == [1]
    alone = tmp_path / "only"
    alone.mkdir()
    (alone / "rank3.log").write_text("step 1 | loss 2.0\n")  # the only log: it is the series
    assert series(read_run(alone, with_checkpoints=False)[0], "loss") == [(1, 2.0)]


TORCHRUN = Path(__file__).parent / "fixtures" / "torchrun_logdir"  # made by torchrun itself: see SOURCES.md


def test_torchrun_log_dir_keeps_each_workers_rank(tmp_path: Path):
    """``torchrun --log-dir logs --redirects 3 --tee 3``: attempt_0/<local_rank>/{stdout,stderr}.log and the
    failing worker's error.json (written by ``@record``); rank 1 went NaN at step 3 and raised."""
    shutil.copytree(TORCHRUN / "logs", tmp_path / "logs")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7), (4, 1.6), (5, 1.5)]
    got = series(run, "loss@rank1")
    assert got[:2] == [(1, 1.9), (2, 1.8)] and all(math.isnan(v) for _, v in got[2:]) and len(got) == 5
    err = next(a for a in run.artifacts if a.path.endswith("attempt_0/1/error.json"))
    assert err.kind == "elastic_error" and err.status == "read"
    tbs = [e for e in run.events if e.kind == "traceback"]
    assert {e.rank for e in tbs} == {1} and len(tbs) == 2  # stderr.log and error.json
    assert all("loss is nan on rank 1 at step 5" in e.message for e in tbs)


@pytest.mark.parametrize("console", ["console.txt", "console_trainer.txt"])  # [default1]: and [trainer1]: prefixes
def test_torchrun_tee_console_keeps_the_rank(tmp_path: Path, console: str):
    shutil.copy(TORCHRUN / console, tmp_path / "train.log")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss")[-1] == (5, 1.5)
    assert math.isnan(series(run, "loss@rank1")[-1][1])
    tbs = [e for e in run.events if e.kind == "traceback"]
    assert [e.rank for e in tbs] == [1, None]  # the worker's traceback, then the launcher's own ChildFailedError
    assert "loss is nan on rank 1 at step 5" in tbs[0].message and "ChildFailedError" in tbs[1].message


def _write_rank_events(d: Path, rank: int, nan_at: int | None = None) -> None:
    """One rank's TensorBoard dir as a per-rank SummaryWriter writes it (torchrun loops that log on every rank)."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(d))
    for s in range(1, 5):
        w.add_scalar("train/loss", math.nan if nan_at is not None and s >= nan_at else 2.0 - s / 4, s)  # exact in f32
        w.add_scalar("train/grad_norm", 1.0 + rank, s)
    w.close()


@pytest.mark.parametrize("layout", ["runs/rank{r}", "logs/rank_{r}/train", "tb/worker{r}"])
def test_per_rank_tensorboard_dirs_keep_their_rank(tmp_path: Path, layout: str):
    """``runs/rank0/events...`` beside ``runs/rank1/events...``: rank 1's scalars are ``loss@rank1``, so its NaN
    is not mixed into (or de-duplicated against) rank 0's series, as for text logs."""
    for r in (0, 1):
        _write_rank_events(tmp_path / layout.format(r=r), r, nan_at=3 if r == 1 else None)
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.75), (2, 1.5), (3, 1.25), (4, 1.0)]
    got = series(run, "loss@rank1")
    assert got[:2] == [(1, 1.75), (2, 1.5)] and len(got) == 4 and all(math.isnan(v) for _, v in got[2:])
    assert {v for _, v in series(run, "grad_norm@rank1")} == {2.0}
    assert not run.has_metric("grad_norm@rank0") and {v for _, v in series(run, "grad_norm")} == {1.0}


def test_a_lone_rank_tensorboard_dir_is_the_run(tmp_path: Path):
    """Only ``rank3/`` was copied (no lower rank beside it): its scalars are the run's series, unsuffixed; an event
    dir named otherwise (``runs/Nov23_host``) is untouched."""
    _write_rank_events(tmp_path / "runs" / "rank3", 3)
    _write_rank_events(tmp_path / "other" / "Nov23_16-02-00_host", 0)
    run, _ = read_run(tmp_path / "runs", with_checkpoints=False)
    assert len(series(run, "loss")) == 4 and not run.has_metric("loss@rank3")
    run, _ = read_run(tmp_path / "other", with_checkpoints=False)
    assert len(series(run, "loss")) == 4


def test_rank_directories_and_rank_fields_in_structured_files(tmp_path: Path):
    for r in (0, 3):
        d = tmp_path / f"rank_{r}"
        d.mkdir()
        with open(d / "metrics.jsonl", "w") as fh:
            for s in range(1, 4):
                fh.write(json.dumps({"step": s, "loss": math.nan if (r == 3 and s == 3) else 2.0 - s / 10}) + "\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7)]
    got = series(run, "loss@rank3")
    assert got[:2] == [(1, 1.9), (2, 1.8)] and math.isnan(got[2][1])

    one = tmp_path / "one_file"
    one.mkdir()
    with open(one / "log.jsonl", "w") as fh:  # a trainer that logs every rank into one file, with a rank field
        for s in range(1, 4):
            for r in (0, 1):
                fh.write(json.dumps({"step": s, "rank": r, "loss": 2.0 - s / 10 + (5.0 * s if r == 1 else 0)}) + "\n")
    run, _ = read_run(one, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7)]
    assert series(run, "loss@rank1") == [(1, 6.9), (2, 11.8), (3, 16.7)]
    assert not run.has_metric("rank")  # the rank field names the writer, it is not a metric

    table = tmp_path / "table"
    table.mkdir()
    with open(table / "metrics.csv.txt", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "rank", "loss", "grad_norm"])
        for s in range(1, 4):
            w.writerow([s, 0, 2.0 - s / 10, 1.0])
            w.writerow([s, 2, "nan" if s == 3 else 2.0 - s / 10, "inf" if s == 3 else 1.0])
    run, _ = read_run(table, with_checkpoints=False)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7)] and series(run, "grad_norm")[-1] == (3, 1.0)
    assert math.isnan(series(run, "loss@rank2")[-1][1]) and series(run, "grad_norm@rank2")[-1] == (3, math.inf)


def test_worker_directories_of_text_logs(tmp_path: Path):
    for r in (0, 1):
        (tmp_path / f"worker{r}").mkdir()
        (tmp_path / f"worker{r}" / "train.log").write_text(
            "step 1 | loss 2.0\nstep 2 | loss " + ("1.9" if r == 0 else "nan") + "\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    assert series(run, "loss") == [(1, 2.0), (2, 1.9)]
    assert math.isnan(series(run, "loss@rank1")[-1][1])


# -- small things ------------------------------------------------------------------------------

def test_help_has_no_stray_backslash():
    res = runner.invoke(app, ["run", "--help"])
    assert "[default: html]" in res.output and "\\[" not in res.output


def test_progress_bar_glued_in_front_of_an_event_is_dropped(tmp_path: Path):
    (tmp_path / "train.log").write_text(
        "Map:   0%|          | 0/256 [00:00<?, ? examples/s][RANK 0] The prompt alone fills `max_length` (512)\n")
    run, _ = read_run(tmp_path, with_checkpoints=False)
    (ev,) = run.events
    assert ev.kind == "prompt_fills_max_length" and ev.message.startswith("[RANK 0] The prompt alone fills")
    assert ev.rank == 0
    assert strip_bar(" 45%|####5     | 9/20 [00:03<00:04,  2.61it/s]Warning: x") == "Warning: x"


def test_markdown_escapes_only_what_changes_the_rendering():
    assert md("empty_response") == "empty_response"
    assert md("(leave >= 32-64 tokens for the answer)") == "(leave >= 32-64 tokens for the answer)"
    assert md("lr=1e-3; see checkpoint-200.") == "lr=1e-3; see checkpoint-200."
    assert md("a | b") == "a \\| b" and md("<b>x</b>") == "\\<b>x\\</b>" and md("**x**") == "\\*\\*x\\*\\*"
    assert md("_x_") == "\\_x\\_" and md("[a](javascript:x)") == "\\[a](javascript:x)"
    assert md("# not a heading") == "\\# not a heading" and md("1. not a list") == "1\\. not a list"
    assert md("ping @octocat") == "ping &#64;octocat" and md("a@ b") == "a@ b"
    assert re.search(r"https\\://", md("see https://evil.example"))

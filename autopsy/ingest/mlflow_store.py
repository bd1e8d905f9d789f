"""MLflow runs: the file store (``mlruns/<exp>/<run>/``) and the SQLite store (``mlflow.db``).

Read with plain file parsing and the stdlib ``sqlite3`` (opened read-only): no mlflow import,
nothing executed. Formats checked against mlflow's ``store/tracking/file_store.py``: a metric
file holds one ``<timestamp_ms> <value> <step>`` line per logged point (2 fields in old stores:
step 0; 5 fields with a dataset name and digest), values written with Python's ``str(float)``
so non-finite values appear as ``nan``/``inf``/``-inf``; a param file's whole content is the
value; keys containing ``/`` are sub-folders. ``sqlalchemy_store.py`` stores NaN as
``value=0, is_nan=1`` and +/-inf as +/-1.7976931348623157e308, which are mapped back here.
HF's ``MLflowCallback`` logs TrainingArguments and the model config as params (so they map to
the canonical config keys) and metrics with ``step=global_step``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autopsy.discover import Found
from autopsy.ingest import config_facts as cf
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.text_facts import parse_value

KIND = "mlflow"
#: bytes of one metric file read (a metric logged every step for 10M steps is ~400 MB)
MAX_METRIC_BYTES = 512 * 1024 * 1024
#: a param/tag value longer than this is not a setting (MLflow caps params at 6000 chars)
MAX_PARAM_BYTES = 64 * 1024
#: meta.yaml larger than this is not MLflow's
MAX_META_BYTES = 1024 * 1024
#: run status numbers of the file store (mlflow.entities.RunStatus)
RUN_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
#: how the SQL store writes +/-inf
SQL_INF = 1.7976931348623157e308
#: bad lines listed by number in a problem message
SHOW_BAD = 5


def _read_text(path: Path, limit: int) -> tuple[str | None, str | None]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if len(data) > limit:
        return None, f"larger than {limit // 1024} KiB: not a setting"
    if b"\x00" in data:
        return None, "binary data (NUL bytes)"
    return data.decode("utf-8", "replace"), None


def parse_metric_lines(text: str) -> tuple[list[int], list[float], list[int], list[int], bool]:
    """(steps, values, line numbers, bad line numbers, steps_exact) of one metric file.

    A file of 2-field lines is an old store (no steps: line order is kept, steps inferred); in a
    file with steps, a 2-field line is a line cut short and counts as bad.
    """
    rows: list[tuple[int, list[str]]] = []
    bad: list[int] = []
    for no, raw in enumerate(text.split("\n"), 1):
        parts = raw.split()
        if parts:
            if len(parts) in (2, 3, 4, 5):
                rows.append((no, parts))
            else:
                bad.append(no)
    exact = any(len(p) >= 3 for _, p in rows) or not rows
    steps: list[int] = []
    values: list[float] = []
    lines: list[int] = []
    for no, parts in rows:
        if exact and len(parts) == 2:
            bad.append(no)
            continue
        try:
            int(parts[0])
            value = float(parts[1])
            step = int(parts[2]) if exact else len(steps)
        except ValueError:
            bad.append(no)
            continue
        steps.append(step)
        values.append(value)
        lines.append(no)
    bad.sort()
    return steps, values, lines, bad, exact


def params_facts(params: Mapping[str, Any]) -> list[cf.Fact]:
    """Canonical facts of MLflow params (HF logs TrainingArguments + model config as params)."""
    d = {k: _param_value(v) for k, v in params.items()}
    facts = cf.args_facts(d) + cf.model_config_facts(d)
    seen: set[tuple[str, str]] = set()
    out = []
    for f in facts:
        if (f.key, f.where) not in seen:
            seen.add((f.key, f.where))
            out.append(f)
    return out


def _param_value(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    ok, value = parse_value(raw)
    return value if ok else raw.strip()


# -- file store --------------------------------------------------------------------------------

def read_mlflow_run(found: Found, builder: RunBuilder) -> None:
    """A file-store run's ``meta.yaml``: status, name, id (its metrics and params files are read
    one by one as ``mlflow_part``, so a single metric file handed in alone is read too)."""
    meta_src = builder.rel(found.path)
    text, why = _read_text(found.path, MAX_META_BYTES)
    meta: Any = None
    if text is not None:
        try:
            meta = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            why = f"invalid YAML: {str(exc).splitlines()[0][:200]}"
    if not isinstance(meta, Mapping):
        builder.problem(meta_src, "mlflow_run", f"MLflow run meta.yaml not readable ({why or 'not a mapping'}); "
                        "its metrics and params are still read", "partial")
        return
        meta = {}
    status = meta.get("status")
    status = RUN_STATUS.get(status, status) if isinstance(status, int) else status
    if isinstance(status, str):
        builder.fact("tracker.status", status, meta_src, "status", "status")
    if meta.get("lifecycle_stage") == "deleted":
        builder.fact("tracker.deleted", True, meta_src, "lifecycle_stage", "lifecycle_stage")
    for key in ("run_name", "run_id"):
        if isinstance(meta.get(key), str) and meta[key]:
            builder.fact(f"tracker.{key}", meta[key], meta_src, key, key)
    runs = {f.source for f in builder.run.config.facts("tracker.run_id")}
    if len(runs) > 1:
        builder.problem(meta_src, "mlflow_run", f"{len(runs)} MLflow runs under the path read: series of the same "
                        "metric from different runs are merged; point autopsy at one run's folder "
                        "(mlruns/<experiment>/<run>) to diagnose it alone", "partial")


def _part_of(path: Path) -> tuple[str, str]:
    """(folder, key) of a file inside an MLflow run: ``metrics/train/loss`` -> ("metrics", "train/loss")."""
    for i, d in enumerate(path.parents):
        if d.name in ("metrics", "params", "tags"):
            return d.name, path.relative_to(d).as_posix()
        if i >= 8:
            break
    return "metrics", path.name


def read_part(found: Found, builder: RunBuilder) -> None:
    """One file of an MLflow run: a metric's points, a param's value (tags are bookkeeping)."""
    folder, key = _part_of(found.path)
    if folder == "metrics":
        _read_metric(found.path, key, builder)
    elif folder == "params":
        _read_param(found.path, key, builder)


def _read_metric(path: Path, key: str, builder: RunBuilder) -> None:
    src = builder.rel(path)
    text, why = _read_text(path, MAX_METRIC_BYTES)
    if text is None:
        builder.problem(src, KIND, f"MLflow metric {key!r} not read: {why}")
        return
    steps, values, lines, bad, exact = parse_metric_lines(text)
    for s, v, ln in zip(steps, values, lines):
        builder.scalar(src, KIND, s, key, v, line=ln, exact_steps=exact)
    if bad:
        shown = ", ".join(str(b) for b in bad[:SHOW_BAD]) + (" ..." if len(bad) > SHOW_BAD else "")
        builder.problem(src, KIND, f"{len(bad)} line(s) not in MLflow's '<timestamp> <value> <step>' form "
                        f"(line {shown}): skipped; {len(values)} point(s) read", "partial")
    elif not values:
        builder.problem(src, KIND, f"MLflow metric {key!r} holds no points (empty file)", "partial")
    if not exact:
        builder.problem(src, KIND, "old MLflow metric lines without a step: points are ordered by line, "
                        "steps inferred", "partial")


def _read_param(path: Path, key: str, builder: RunBuilder) -> None:
    src = builder.rel(path)
    text, why = _read_text(path, MAX_PARAM_BYTES)
    if text is None:
        builder.problem(src, "mlflow_param", f"MLflow param {key!r} not read: {why}", "partial")
        return
    for f in params_facts({key: text}):
        builder.fact(f.key, f.value, src, "line 1", f.original_key)


# -- SQLite store ------------------------------------------------------------------------------

def read_mlflow_db(found: Found, builder: RunBuilder) -> None:
    """Every run of an MLflow SQLite store (``mlflow.db``), opened read-only."""
    src = builder.rel(found.path)
    try:
        con = sqlite3.connect(f"{found.path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        builder.problem(src, "mlflow_db", f"cannot open the SQLite file: {exc}")
        return
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"runs", "metrics", "params"} <= tables:
            builder.problem(src, "mlflow_db", "a SQLite file without MLflow's runs/metrics/params tables: not read",
                            "ignored")
            return
        _read_db(con, src, builder)
    except sqlite3.Error as exc:
        builder.problem(src, "mlflow_db", f"SQLite read failed ({exc}); the file may be truncated or corrupt: "
                        "what was read before the failure is kept", "partial")
    finally:
        con.close()


def _read_db(con: sqlite3.Connection, src: str, builder: RunBuilder) -> None:
    runs = con.execute("SELECT run_uuid, name, status, lifecycle_stage FROM runs ORDER BY start_time").fetchall()
    many = len(runs) > 1
    for run_uuid, name, status, stage in runs:
        label = f"{src}#{name or run_uuid}" if many else src
        rows = con.execute("SELECT key, value, step, is_nan FROM metrics WHERE run_uuid=? ORDER BY key, step, timestamp",
                           (run_uuid,)).fetchall()
        for i, (key, value, step, is_nan) in enumerate(rows, 1):
            v = math.nan if is_nan else (math.copysign(math.inf, value) if value is not None and abs(value) >= SQL_INF
                                         else value)
            builder.scalar(label, KIND, int(step or 0), str(key), v, line=i)
        where = f"run {name or run_uuid}"
        if status:
            builder.fact("tracker.status", str(status), src, where, "status")
        if stage == "deleted":
            builder.fact("tracker.deleted", True, src, where, "lifecycle_stage")
        params = dict(con.execute("SELECT key, value FROM params WHERE run_uuid=?", (run_uuid,)).fetchall())
        for f in params_facts(params):
            builder.fact(f.key, f.value, src, f"{where} params.{f.where}", f.original_key)
    if many:
        builder.problem(src, "mlflow_db", f"{len(runs)} runs in one MLflow store: each run's metrics are a separate "
                        "source (path#run); point autopsy at one run's export to diagnose it alone", "partial")


READERS = {"mlflow_run": read_mlflow_run, "mlflow_part": read_part, "mlflow_db": read_mlflow_db}

"""Ray Tune trial folders: ``result.json`` (one JSON record per reported result), ``progress.csv`` (the same
results as a table, read only when result.json is missing) and ``params.json`` (the trial's sampled config).

Names and auto-filled keys are Ray Tune's own (ray/tune/result.py: EXPR_PARAM_FILE, EXPR_RESULT_FILE,
EXPR_PROGRESS_FILE; TRAINING_ITERATION and the other auto-filled result keys). The step is
``training_iteration``: Tune numbers each ``tune.report``/``train.report`` call from 1. Sampled
hyper-parameters become config facts: names Tune users commonly give the learning rate map to the
canonical ``learning_rate``; every parameter is also kept as ``hparam.<name>`` so ``autopsy sweep`` can
show what varies.
"""

from __future__ import annotations

import csv
from typing import Any

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.jsonsafe import load_json
from autopsy.ingest.structured import _int_step, _is_number, _read_step_jsonl

STEP_KEY = "training_iteration"
#: keys Tune fills in itself (ray/tune/result.py): bookkeeping, not training metrics
AUTO_FILLED = frozenset({
    "training_iteration", "time_this_iter_s", "time_total_s", "timestamp", "done", "timesteps_total",
    "episodes_total", "timesteps_since_restore", "iterations_since_restore", "time_since_restore", "pid",
    "hostname", "node_ip", "date", "trial_id", "experiment_id", "experiment_tag", "warmup_time", "config",
    "checkpoint_dir_name", "should_checkpoint", "episodes_this_iter", "timesteps_this_iter", "perf",
})
#: sampled names that mean the (peak) learning rate
LR_NAMES = frozenset({"lr", "learning_rate", "learning-rate", "optimizer/lr"})
#: a progress.csv wider than this is not a Tune table
MAX_COLUMNS = 5000


def read_result_json(found: Found, builder: RunBuilder) -> None:
    builder.framework("ray_tune")
    _read_step_jsonl(found, builder, lambda d: _int_step(d.get(STEP_KEY)), set(AUTO_FILLED))


def read_progress_csv(found: Found, builder: RunBuilder) -> None:
    """progress.csv, when the trial has no result.json (Tune writes both by default; they hold the same)."""
    if (found.path.parent / "result.json").is_file():
        builder.problem(builder.rel(found.path), found.kind, "same results as result.json, which is read instead", "ignored")
        return
    builder.framework("ray_tune")
    src = builder.rel(found.path)
    steps: list[int] = []
    keys: list[str] = []
    values: list[float] = []
    lines: list[int] = []
    bad = 0
    try:
        with open(found.path, newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header or STEP_KEY not in header or len(header) > MAX_COLUMNS:
                builder.problem(src, found.kind, f"no {STEP_KEY} column: not a Ray Tune progress.csv", "ignored")
                return
            si = header.index(STEP_KEY)
            for lineno, row in enumerate(reader, start=2):
                step = _int_step(_num(row[si])) if si < len(row) else None
                if step is None:
                    bad += 1
                    continue
                for k, cell in zip(header, row):
                    if k in AUTO_FILLED or k.startswith("config/"):
                        continue
                    v = _num(cell)
                    if v is not None:
                        steps.append(step)
                        keys.append(k)
                        values.append(v)
                        lines.append(lineno)
    except (OSError, csv.Error) as exc:
        builder.problem(src, found.kind, f"cannot read: {getattr(exc, 'strerror', None) or exc}", "partial" if steps else "unreadable")
    if steps:
        builder.scalar_columns(src, found.kind, steps, keys, values, lines)
    if bad:
        builder.problem(src, found.kind, f"{bad} row(s) without a {STEP_KEY} value skipped", "partial")


def _num(cell: str) -> float | None:
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return None
    return v


def read_params_json(found: Found, builder: RunBuilder) -> None:
    d = load_json_mapping(found, builder)
    if d is None:
        return
    builder.framework("ray_tune")
    src = builder.rel(found.path)
    for key, value in _flat(d):
        if isinstance(value, (dict, list)):
            continue
        builder.fact(f"hparam.{key}", value, src, key, key)
        if key.rsplit("/", 1)[-1].lower() in LR_NAMES and _is_number(value):
            builder.fact("learning_rate", value, src, key, key)


def load_json_mapping(found: Found, builder: RunBuilder) -> dict[str, Any] | None:
    got = load_json(found.path)
    if not isinstance(got.value, dict):
        builder.problem(builder.rel(found.path), found.kind, f"not a JSON object: {got.error or 'another JSON value'}")
        return None
    if got.error:
        builder.problem(builder.rel(found.path), found.kind, got.error, "partial")
    return got.value


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}/")
        else:
            out.append((f"{prefix}{k}", v))
    return out


READERS = {"raytune_result": read_result_json, "raytune_progress": read_progress_csv, "raytune_params": read_params_json}

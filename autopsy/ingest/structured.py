"""Readers for structured metric logs: HF ``trainer_state.json``, ms-swift ``logging.jsonl``,
LLaMA-Factory ``trainer_log.jsonl``, generic JSONL and Lightning ``metrics.csv``; config files
are read by :mod:`autopsy.ingest.config_readers` and exported from here too.

Readers collect columns and hand one DataFrame per file to ``builder.scalar_frame`` (100k log
entries must read in well under a second). Bad input never raises: truncated JSON keeps the
complete entries before the cut, junk lines/rows/values are counted and reported, and the
artifact is marked "partial" with a message that says where and what to do.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from autopsy.discover import Found
from autopsy.ingest import config_readers
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.jsonsafe import BLANK, decode_text, iter_lines, load_json, parse_record
from autopsy.ingest.ranks import RANK_FIELDS, rank_suffix, record_rank
from autopsy.metrics import canonical

#: steps outside this range cannot be real optimizer steps (and would overflow int64 columns)
MAX_STEP = 2**62
#: keys in TRL trainers' logs that plain HF Trainer never writes (formats.md §1.4)
TRL_KEY_PREFIXES = ("rewards/", "logps/", "logits/", "completions/", "clip_ratio/", "sampling/")
TRL_KEYS = {"mean_token_accuracy", "frac_reward_zero_std", "reward_std", "min_reward", "mean_reward", "max_reward",
            "log_odds_ratio", "log_odds_chosen"}
#: trainer_state.json top-level fields recorded as facts
STATE_FACTS = ("global_step", "max_steps", "logging_steps", "save_steps", "eval_steps", "train_batch_size",
               "num_train_epochs", "best_model_checkpoint", "best_metric")
#: keys that are bookkeeping, not metrics, in ms-swift / LLaMA-Factory / generic jsonl records
SWIFT_SKIP = {"global_step/max_steps", "percentage", "elapsed_time", "remaining_time", "global_step", "step"}
LLAMAFACTORY_SKIP = {"current_steps", "total_steps", "percentage", "elapsed_time", "remaining_time"}
GENERIC_STEP_KEYS = ("step", "global_step", "iteration", "iter", "_step", "trainer/global_step")
#: records of a generic .jsonl are read as metrics only if some key looks like one (else it is a dataset)
_METRIC_LIKE = re.compile(r"loss|lr|learning_rate|grad|reward|acc|perplexity|ppl|eval|kl|entropy", re.IGNORECASE)
#: records sniffed to decide whether a generic .jsonl is a metric log
SNIFF_RECORDS = 200
#: bytes of an unknown .json looked at for a TrainerState's "log_history" key (it sorts near the top)
SNIFF_BYTES = 64 * 1024
_NAN_SPELLINGS = {"nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _early_stopping_facts(builder: RunBuilder, callbacks: Any, src: str) -> None:
    """transformers' EarlyStoppingCallback as the TrainerState keeps it (``stateful_callbacks``, transformers >= 4.39):
    ``{"EarlyStoppingCallback": {"args": {"early_stopping_patience": 3, ...}, "attributes":
    {"early_stopping_patience_counter": 3}}}``; a counter at the patience is the callback having stopped the run."""
    cb = callbacks.get("EarlyStoppingCallback") if isinstance(callbacks, dict) else None
    if isinstance(cb, list):  # several instances are kept as a list
        cb = cb[0] if cb else None
    if not isinstance(cb, dict):
        return
    for part, key in (("args", "early_stopping_patience"), ("attributes", "early_stopping_patience_counter")):
        v = cb[part].get(key) if isinstance(cb.get(part), dict) else None
        if isinstance(v, int) and not isinstance(v, bool):
            builder.fact(key, v, src, f"stateful_callbacks.EarlyStoppingCallback.{part}.{key}", key)


@dataclass
class Columns:
    """Scalar columns of one source plus counts of what was skipped and why."""

    step: list[int] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    #: rank of each point when records name their rank (``{"rank": 3, ...}``), else empty
    rank: list[int | None] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    first_skip: dict[str, str] = field(default_factory=dict)

    def skip(self, why: str, where: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        self.first_skip.setdefault(why, where)

    def frame(self) -> pd.DataFrame:
        try:
            values = np.asarray(self.value, dtype="float64")
        except OverflowError:  # ints beyond float range
            values = np.asarray([_to_float(v) for v in self.value], dtype="float64")
        return pd.DataFrame({"step": np.asarray(self.step, dtype="int64"), "key": self.key,
                             "value": values,
                             "line": pd.array(np.asarray(self.line, dtype="int64"), dtype="Int64")})

    def flush(self, builder: RunBuilder, source: str, kind: str, exact_steps: bool = True, path: Path | None = None) -> None:
        """Hand the columns over; points of a rank other than the primary one become ``<metric>@rank<N>``
        (the file's rank from ``path``, or each record's own rank field)."""
        if self.step:
            try:
                values = np.asarray(self.value, dtype="float64")
            except OverflowError:  # ints beyond float range
                values = np.asarray([_to_float(v) for v in self.value], dtype="float64")
            builder.scalar_columns(source, kind, self.step, self.key, values, self.line, exact_steps=exact_steps,
                                   metric=self.rank_metrics(path))

    def rank_metrics(self, path: Path | None) -> list[str] | None:
        """Canonical metric per point with the ``@rankN`` of a non-primary rank, or None when every point is the primary's."""
        suffix = rank_suffix(path) if path is not None else ""
        ranks = [r for r in set(self.rank) if r is not None] if self.rank else []
        if not suffix and len(ranks) < 2:
            return None
        names = {k: canonical(str(k)) for k in set(self.key)}
        if suffix:
            return [names[k] + suffix for k in self.key]
        primary = min(ranks)
        return [names[k] + ("" if r is None or r == primary else f"@rank{r}") for k, r in zip(self.key, self.rank)]

    def report(self, builder: RunBuilder, source: str, kind: str, unit: str) -> None:
        if not self.skipped:
            return
        pre = f"{unit} " if unit else ""
        parts = [f"{n} {why} (first at {pre}{self.first_skip[why]})" for why, n in self.skipped.items()]
        builder.problem(source, kind, "skipped " + "; ".join(parts) + "; the rest was read", "partial")


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (OverflowError, TypeError, ValueError):
        return math.inf if isinstance(v, int) and v > 0 else -math.inf if isinstance(v, int) else math.nan


def _int_step(v: Any) -> int | None:
    """An integer step from an int or an integral float; None for anything else."""
    t = type(v)
    if t is int:
        return v if -MAX_STEP < v < MAX_STEP else None
    if t is float and v.is_integer() and abs(v) < MAX_STEP:
        return int(v)
    return None


def _is_number(v: Any) -> bool:
    t = type(v)
    return t is float or t is int


def _fact_latest(builder: RunBuilder, key: str, value: Any, source: str) -> None:
    """Record a fact, keeping the largest value first (root and checkpoint-N/ trainer_state.json
    files disagree on global_step; the latest is the run's)."""
    builder.fact(key, value, source, key, key)
    facts = builder.run.config._facts.get(key)
    if facts and len(facts) > 1 and all(_is_number(f.value) for f in facts):
        facts.sort(key=lambda f: -f.value)


# -- trainer_state.json ----------------------------------------------------------------------


def log_history_columns(entries: list[Any]) -> Columns:
    """Columns of a HF ``log_history``: step = entry["step"], line = list index.

    Entries that are not objects or carry no integer step are skipped and counted; values that
    are not numbers (dicts, lists, strings) are skipped and counted; None values are dropped
    silently (trainers write them for metrics they could not compute).
    """
    c = Columns()
    steps, keys, vals, lines = c.step, c.key, c.value, c.line
    for idx, e in enumerate(entries):
        if type(e) is not dict:
            c.skip("log entries that are not objects", f"index {idx}")
            continue
        st = e.get("step")
        if type(st) is not int or not -MAX_STEP < st < MAX_STEP:  # 2**70 would overflow int64
            st = _int_step(st)
            if st is None:
                c.skip("log entries without an integer step", f"index {idx}")
                continue
        # epoch of eval/summary entries repeats the train entry's epoch at the same step
        extra = "train_runtime" in e or "eval_loss" in e or "eval_runtime" in e
        for k, v in e.items():
            if type(v) is float or type(v) is int:
                if k == "step" or (extra and k == "epoch"):
                    continue
                steps.append(st)
                keys.append(k)
                vals.append(v)
                lines.append(idx)
            elif v is not None:
                c.skip("values that are not numbers", f"index {idx} key {k!r}")
    return c


def looks_like_trainer_state(path: Path) -> bool:
    """A .json with a ``log_history`` key near the top: a renamed or copied trainer_state.json."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    return b'"log_history"' in head


def read_json_config(found: Found, builder: RunBuilder) -> None:
    """Other .json files: TrainerState copies (``dpo_trainer_state.json``) are read as such,
    the rest as configs."""
    if looks_like_trainer_state(found.path):
        builder.artifact(found.path, "trainer_state")
        read_trainer_state(Found(found.path, "trainer_state", found.size), builder)
    else:
        config_readers.read_generic_config(found, builder)


def read_trainer_state(found: Found, builder: RunBuilder) -> None:
    src, kind = builder.rel(found.path), found.kind
    res = load_json(found.path)
    doc = res.value
    if _pasted_fragments(found, res):
        # a text file recognised by its head: a paste of trainer_state.json pieces (all_results.json above it, the
        # log_history cut, "..." between entries) that no JSON parser reads whole; the text reader takes each
        # pretty-printed record it holds
        from autopsy.ingest.textlog import read_text_log

        read_text_log(found, builder)
        return
    if doc is None:
        builder.problem(src, kind, f"{res.error}; no metrics read from it")
        return
    if not isinstance(doc, dict):
        builder.problem(src, kind, f"top level is a {type(doc).__name__}, expected the TrainerState object")
        return
    builder.framework("hf_trainer")
    for k in STATE_FACTS:
        v = doc.get(k)
        if v is not None and (isinstance(v, (str, int, float)) and not isinstance(v, bool)):
            if k == "global_step":
                _fact_latest(builder, k, v, src)
            else:
                builder.fact(k, v, src, k, k)
    _early_stopping_facts(builder, doc.get("stateful_callbacks"), src)
    lh = doc.get("log_history")
    if res.partial:
        n = len(lh) if isinstance(lh, list) else 0
        builder.problem(src, kind, f"truncated or corrupt JSON ({res.error}); read the {n} complete log_history "
                        "entries before the break — the rest of the file is lost (the job was probably killed while "
                        "saving; the previous checkpoint's copy may be complete)", "partial")
    if lh is None:
        if not res.partial:
            builder.problem(src, kind, "no log_history: nothing to read", "partial")
        return
    if not isinstance(lh, list):
        builder.problem(src, kind, f"log_history is a {type(lh).__name__}, expected a list; no metrics read", "partial")
        return
    cols = log_history_columns(lh)
    cols.flush(builder, src, kind, path=found.path)
    cols.report(builder, src, kind, "log_history")
    keys = set(cols.key)
    if keys & TRL_KEYS or any(k.startswith(TRL_KEY_PREFIXES) for k in keys):
        builder.framework("trl")


def _pasted_fragments(found: Found, res: Any) -> bool:
    """A file not named trainer_state.json whose JSON breaks before any log_history entry."""
    if Path(found.path).name.lower() == "trainer_state.json" or not (res.value is None or res.partial):
        return False
    lh = res.value.get("log_history") if isinstance(res.value, dict) else None
    return not (isinstance(lh, list) and lh)


# -- JSONL -------------------------------------------------------------------------------------


@dataclass
class Record:
    line: int
    data: dict[str, Any]


def _records(found: Found, builder: RunBuilder, limit: int | None = None) -> tuple[list[Record], Columns] | None:
    """Parse a JSONL file record by record; junk lines are counted in the returned Columns."""
    src = builder.rel(found.path)
    out: list[Record] = []
    c = Columns()
    try:
        with open(found.path, "rb") as fh:
            for lineno, raw in iter_lines(fh):
                if raw is None:
                    c.skip("over-long lines", f"line {lineno}")
                    continue
                value, err = parse_record(raw)
                if err is not None:
                    c.skip("lines that are not JSON", f"line {lineno}")
                elif value is BLANK:
                    continue
                elif not isinstance(value, dict):
                    c.skip("lines that are not JSON objects", f"line {lineno}")
                else:
                    out.append(Record(lineno, value))
                    if limit is not None and len(out) >= limit:
                        break
    except OSError as exc:
        builder.problem(src, found.kind, f"cannot read: {exc.strerror or exc}")
        return None
    return out, c


def _add_numbers(c: Columns, rec: Record, step: int, skip: set[str] | frozenset[str], rank_field: str | None = None) -> None:
    rank = record_rank(rec.data.get(rank_field)) if rank_field else None
    for k, v in rec.data.items():
        if k in skip or k == rank_field:
            continue
        if _is_number(v):
            c.step.append(step)
            c.key.append(k)
            c.value.append(v)
            c.line.append(rec.line)
            if rank_field:
                c.rank.append(rank)


def _rank_field(records: list[Record]) -> str | None:
    """The field that names each record's rank (``rank``/``global_rank``), when records carry one."""
    for rec in records[:SNIFF_RECORDS]:
        for k in RANK_FIELDS:
            if record_rank(rec.data.get(k)) is not None:
                return k
    return None


def _read_step_jsonl(found: Found, builder: RunBuilder, step_of: Callable[[dict[str, Any]], int | None],
                     skip: set[str], on_summary: Callable[[Record, str], bool] | None = None) -> Columns | None:
    """Shared loop: records with a step -> scalars; records without one reuse the last step."""
    src = builder.rel(found.path)
    got = _records(found, builder)
    if got is None:
        return None
    records, c = got
    rank_field = _rank_field(records)
    last: int | None = None
    for rec in records:
        if on_summary is not None and on_summary(rec, src):
            continue
        st = step_of(rec.data)
        if st is None:
            if last is None:
                c.skip("records before any step", f"line {rec.line}")
                continue
            st = last
        last = st
        _add_numbers(c, rec, st, skip, rank_field)
    c.flush(builder, src, found.kind, path=found.path)
    c.report(builder, src, found.kind, "")
    return c


def _swift_step(d: dict[str, Any]) -> int | None:
    gm = d.get("global_step/max_steps")
    if isinstance(gm, str) and "/" in gm:
        try:
            return _int_step(int(gm.split("/", 1)[0].strip()))
        except ValueError:
            return None
    return _int_step(d.get("global_step"))


def read_swift_jsonl(found: Found, builder: RunBuilder) -> None:
    """ms-swift logging.jsonl; the final record (log_history, last_model_checkpoint) is a summary."""
    builder.framework("ms_swift")
    max_steps: list[int] = []

    def summary(rec: Record, src: str) -> bool:
        d = rec.data
        gm = d.get("global_step/max_steps")
        if isinstance(gm, str) and "/" in gm and not max_steps:
            tail = gm.split("/", 1)[1].strip()
            if tail.isascii() and tail.isdigit() and len(tail) < 19:  # int() refuses "²" and 5000-digit strings
                max_steps.append(int(tail))
                builder.fact("max_steps", int(tail), src, f"line {rec.line}: global_step/max_steps", "global_step/max_steps")
        if "log_history" in d or "last_model_checkpoint" in d or "model_parameter_info" in d:
            for k in ("last_model_checkpoint", "best_model_checkpoint", "best_metric", "global_step"):
                v = d.get(k)
                if v is not None and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                    builder.fact(k, v, src, f"line {rec.line}: {k}", k)
            return True
        return False

    _read_step_jsonl(found, builder, _swift_step, SWIFT_SKIP, summary)


def read_llamafactory_jsonl(found: Found, builder: RunBuilder) -> None:
    """LLaMA-Factory trainer_log.jsonl: current_steps is the step, total_steps the planned total."""
    builder.framework("llamafactory")
    seen_total: list[int] = []

    def summary(rec: Record, src: str) -> bool:
        tot = _int_step(rec.data.get("total_steps"))
        if tot is not None and not seen_total:
            seen_total.append(tot)
            builder.fact("max_steps", tot, src, f"line {rec.line}: total_steps", "total_steps")
        return False

    _read_step_jsonl(found, builder, lambda d: _int_step(d.get("current_steps")), LLAMAFACTORY_SKIP, summary)


def _generic_step_key(records: Iterable[Record]) -> str | None:
    for rec in records:
        for k in GENERIC_STEP_KEYS:
            if _int_step(rec.data.get(k)) is not None:
                return k
    return None


def read_generic_jsonl(found: Found, builder: RunBuilder) -> None:
    """Any other .jsonl: a metric log if its records have metric-like numeric keys (else a dataset).

    Steps come from a step/global_step/iteration key; without one the record index is used and
    the source is marked as having inferred steps.
    """
    src = builder.rel(found.path)
    head = _records(found, builder, limit=SNIFF_RECORDS)
    if head is None:
        return
    if not any(_is_number(v) and _METRIC_LIKE.search(k) for r in head[0] for k, v in r.data.items()):
        builder.problem(src, found.kind, "no numeric metric keys in its first records: a dataset or other data, not a "
                        "metric log; not read", "ignored")
        return
    got = _records(found, builder)
    if got is None:
        return
    records, c = got
    step_key = _generic_step_key(records)
    rank_field = _rank_field(records)
    if step_key is None:
        for i, rec in enumerate(records):
            _add_numbers(c, rec, i, set(), rank_field)
        c.flush(builder, src, found.kind, exact_steps=False, path=found.path)
    else:
        last: int | None = None
        for rec in records:
            st = _int_step(rec.data.get(step_key))
            if st is None:
                if last is None:
                    c.skip("records before any step", f"line {rec.line}")
                    continue
                st = last
            last = st
            _add_numbers(c, rec, st, set(GENERIC_STEP_KEYS), rank_field)
        c.flush(builder, src, found.kind, path=found.path)
    c.report(builder, src, found.kind, "")


# -- Lightning metrics.csv ---------------------------------------------------------------------


def integer_steps(raw: pd.Series, line: pd.Series, c: Columns) -> tuple[pd.Series, pd.Series]:
    """A step column as int64 and the mask of rows whose step is an integer; the others are counted in ``c``
    (with the line of the first) and their step set to 0 for the caller to drop."""
    step = pd.to_numeric(raw, errors="coerce")
    ok = step.notna() & (step == step.round()) & (step.abs() < MAX_STEP)
    nbad = int((~ok).sum())
    if nbad:
        c.skipped["rows without an integer step"] = nbad
        c.first_skip["rows without an integer step"] = f"line {int(line[~ok].iloc[0])}"
    return step.where(ok, 0).astype("int64"), ok


def lightning_metric(key: str) -> str:
    """Lightning's CSVLogger names -> canonical: train_loss -> loss, val_loss -> eval_loss,
    train_loss_step -> loss; ``*_epoch`` aggregates keep the suffix (not a per-step series)."""
    k = key.strip()
    low = k.lower()
    if low.startswith(("lr-", "lr_")):
        return "learning_rate"
    suffix = ""
    if low.endswith("_epoch"):
        suffix, k, low = "_epoch", k[:-6], low[:-6]
    elif low.endswith("_step"):
        k, low = k[:-5], low[:-5]
    for pre in ("train_", "train/", "training_"):
        if low.startswith(pre):
            return canonical(k[len(pre):]) + suffix
    for pre in ("val_", "val/", "valid_", "validation_", "eval_"):
        if low.startswith(pre):
            return "eval_" + canonical(k[len(pre):]) + suffix
    return canonical(k) + suffix


def read_lightning_csv(found: Found, builder: RunBuilder) -> None:
    src, kind = builder.rel(found.path), found.kind
    builder.framework("lightning")
    rows: list[list[str]] = []
    lines: list[int] = []
    c = Columns()
    header: list[str] | None = None
    try:
        with open(found.path, "rb") as fh:
            for lineno, raw in iter_lines(fh):
                if raw is None:
                    c.skip("over-long rows", f"line {lineno}")
                    continue
                text, _ = decode_text(raw)
                if not text.strip():
                    continue
                if "\x00" in text:
                    c.skip("binary rows", f"line {lineno}")
                    continue
                try:
                    cells = next(csv.reader([text.rstrip("\r\n")]))
                except (csv.Error, StopIteration):
                    c.skip("unparsable rows", f"line {lineno}")
                    continue
                if header is None:
                    header = [h.strip() for h in cells]
                    continue
                if len(cells) != len(header):
                    c.skip("rows with the wrong number of cells", f"line {lineno}")
                    continue
                rows.append(cells)
                lines.append(lineno)
    except OSError as exc:
        builder.problem(src, kind, f"cannot read: {exc.strerror or exc}")
        return
    if header is None:
        builder.problem(src, kind, "empty file: no header row")
        return
    bad_cols = [h for i, h in enumerate(header) if not h or h in header[:i]]
    if bad_cols:
        builder.problem(src, kind, f"header has empty or duplicate column names ({bad_cols[:3]}); those columns were not read", "partial")
    if rows:
        _lightning_frame(rows, lines, header, bad_cols, c, builder, src, kind, rank_suffix(found.path))
    c.report(builder, src, kind, "")


def _lightning_frame(rows: list[list[str]], lines: list[int], header: list[str], bad_cols: list[str],
                     c: Columns, builder: RunBuilder, src: str, kind: str, suffix: str = "") -> None:
    df = pd.DataFrame(rows, columns=range(len(header)))
    line = pd.Series(lines, dtype="int64")
    exact = "step" in header
    if exact:
        step, ok = integer_steps(df[header.index("step")].str.strip(), line, c)
    else:
        ok = pd.Series(True, index=df.index)
        step = pd.Series(range(len(df)), dtype="int64")
    parts = []
    for i, name in enumerate(header):
        if name == "step" or name in bad_cols:
            continue
        cell = df[i].str.strip()
        present = (cell != "") & ok
        num = pd.to_numeric(cell.where(present), errors="coerce")
        special = present & cell.str.lower().isin(_NAN_SPELLINGS)
        if special.any():  # to_numeric does not know every spelling of inf
            num = num.where(~special, cell[special].map(float))
        junk = present & num.isna() & ~special
        if junk.any():
            why = "cells that are not numbers"
            c.skipped[why] = c.skipped.get(why, 0) + int(junk.sum())
            c.first_skip.setdefault(why, f"line {int(line[junk].iloc[0])} column {name!r}")
        keep = present & ~junk
        if keep.any():
            parts.append(pd.DataFrame({"step": step[keep].to_numpy(), "key": name, "value": num[keep].to_numpy(dtype="float64"),
                                       "line": line[keep].to_numpy(), "metric": lightning_metric(name) + suffix}))
    if parts:
        frame = pd.concat(parts, ignore_index=True)
        frame["line"] = frame["line"].astype("Int64")
        builder.scalar_frame(src, kind, frame, exact_steps=exact)


READERS: dict[str, Callable[[Found, RunBuilder], None]] = {
    "trainer_state": read_trainer_state,
    "swift_jsonl": read_swift_jsonl,
    "llamafactory_jsonl": read_llamafactory_jsonl,
    "jsonl": read_generic_jsonl,
    "lightning_csv": read_lightning_csv,
    **config_readers.READERS,
    "json_config": read_json_config,
}

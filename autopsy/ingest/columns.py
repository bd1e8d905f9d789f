"""Reader for metric tables: CSV/TSV with metric columns (YOLO ``results.csv``, a pandas or
spreadsheet export) and bare numeric ``step loss`` listings, whatever the file is called.

Discovery sends a file here when its content is a table (:mod:`autopsy.sniff`); Lightning's own
``metrics.csv`` keeps its reader. The step column is the first of ``STEP_COLUMNS`` present
(ultralytics writes ``epoch``); with none, the row index is the step and the source is marked as
having inferred steps. A headerless two-column listing is ``step loss``. Column names go through
the Lightning/TensorBoard naming rules (``train/box_loss`` -> ``box_loss``, ``val/x`` -> ``eval_x``).
"""

from __future__ import annotations

import csv
import re

import pandas as pd

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.jsonsafe import decode_text, iter_lines
from autopsy.ingest.ranks import RANK_FIELDS, rank_suffix, record_rank
from autopsy.ingest.structured import Columns, integer_steps, lightning_metric
from autopsy.sniff import is_number

KIND = "metrics_csv"
#: step column names, most specific first
STEP_COLUMNS = ("step", "global_step", "trainer/global_step", "_step", "iteration", "iter", "num_updates",
                "update", "epoch")
#: column names (lower-cased) -> canonical metric, for names the generic rules do not know
TABLE_METRICS = {"lr/pg0": "learning_rate", "x/lr0": "learning_rate", "training loss": "loss",
                 "validation loss": "eval_loss"}
_WS = re.compile(r"[ \t]+")
#: rows kept per file (a table bigger than this is data, not a training log)
MAX_ROWS = 5_000_000


def _split(text: str, delim: str | None) -> list[str]:
    if delim is None:
        return [c for c in _WS.split(text.strip()) if c]
    try:
        return next(csv.reader([text], delimiter=delim))
    except (csv.Error, StopIteration):
        return []


def read_metrics_csv(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    c = Columns()
    header: list[str] | None = None
    delim: str | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        with open(found.path, "rb") as fh:
            for lineno, raw in iter_lines(fh):
                if raw is None:
                    c.skip("over-long rows", f"line {lineno}")
                    continue
                text, _ = decode_text(raw)
                text = text.rstrip("\r\n")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                if "\x00" in text:
                    c.skip("binary rows", f"line {lineno}")
                    continue
                if header is None:
                    delim = next((d for d in (",", "\t") if d in text), None)
                    cells = [h.strip() for h in _split(text, delim)]
                    if all(is_number(x) for x in cells if x):
                        header = ["step"] + [("loss" if i == 0 else f"value{i}") for i in range(len(cells) - 1)]
                    else:
                        header = cells
                        continue
                cells = _split(text, delim)
                if len(cells) != len(header):
                    c.skip("rows with the wrong number of cells", f"line {lineno}")
                    continue
                rows.append([x.strip() for x in cells])
                lines.append(lineno)
                if len(rows) >= MAX_ROWS:
                    builder.problem(src, KIND, f"more than {MAX_ROWS} rows: only the first {MAX_ROWS} were read",
                                    "partial")
                    break
    except OSError as exc:
        builder.problem(src, KIND, f"cannot read: {exc.strerror or exc}")
        return
    if header is None:
        builder.problem(src, KIND, "empty file: no header row and no data")
        return
    if rows:
        _frame(rows, lines, header, c, builder, src, rank_suffix(found.path))
    else:
        builder.problem(src, KIND, "a header but no rows of numbers", "partial")
    c.report(builder, src, KIND, "")


def _metric(name: str) -> str:
    low = name.lower()
    return TABLE_METRICS.get(low) or lightning_metric(name)


def _frame(rows: list[list[str]], lines: list[int], header: list[str], c: Columns, builder: RunBuilder,
           src: str, suffix: str = "") -> None:
    """One long frame of the table's metric columns; ``suffix`` (``@rank3``) names a non-primary rank's
    file, and a ``rank`` column sends each row's points to its rank's series."""
    df = pd.DataFrame(rows, columns=range(len(header)))
    line = pd.Series(lines, dtype="int64")
    lower = [h.lower() for h in header]
    step_col = next((lower.index(s) for s in STEP_COLUMNS if s in lower), None)
    rank_col = next((lower.index(s) for s in RANK_FIELDS if s in lower), None)
    row_suffix = None
    if rank_col is not None:
        ranks = df[rank_col].map(lambda v: record_rank(v.strip()))
        seen = {r for r in ranks if r is not None}
        if len(seen) > 1:
            primary = min(seen)
            row_suffix = ranks.map(lambda r: "" if r is None or r == primary else f"@rank{r}")
    exact = step_col is not None
    if exact:
        step, ok = integer_steps(df[step_col], line, c)
    else:
        ok = pd.Series(True, index=df.index)
        step = pd.Series(range(len(df)), dtype="int64")
    parts = []
    seen: set[str] = set()
    for i, name in enumerate(header):
        if i in (step_col, rank_col) or not name or name in seen:
            continue
        seen.add(name)
        cell = df[i]
        present = (cell != "") & ok
        num = pd.to_numeric(cell.where(present), errors="coerce")
        special = present & num.isna() & cell.str.lower().isin({"nan", "-nan", "inf", "-inf", "+inf", "infinity",
                                                                 "-infinity"})
        if special.any():
            num = num.where(~special, cell[special].map(float))
        junk = present & num.isna() & ~special
        if junk.any():
            if junk.sum() == present.sum():
                continue  # a text column (a run name, a timestamp): not a metric
            why = "cells that are not numbers"
            c.skipped[why] = c.skipped.get(why, 0) + int(junk.sum())
            c.first_skip.setdefault(why, f"line {int(line[junk].iloc[0])} column {name!r}")
        keep = present & ~junk
        if keep.any():
            metric = _metric(name) + suffix
            parts.append(pd.DataFrame({"step": step[keep].to_numpy(), "key": name,
                                       "value": num[keep].to_numpy(dtype="float64"), "line": line[keep].to_numpy(),
                                       "metric": (metric + row_suffix[keep]).to_numpy(dtype=object)
                                       if row_suffix is not None else metric}))
    if parts:
        frame = pd.concat(parts, ignore_index=True)
        frame["line"] = frame["line"].astype("Int64")
        builder.scalar_frame(src, KIND, frame, exact_steps=exact)
    if any(h.startswith(("train/box_loss", "train/obj_loss")) for h in lower):
        builder.framework("ultralytics")
    if len(lower) >= 2 and lower[0] in ("step", "epoch") and lower[1] == "training loss":
        # transformers' NotebookProgressCallback table (and Unsloth's and TRL's copies), copied out of a notebook: its
        # losses are the Trainer's logs, logging_nan_inf_filter included
        builder.framework("hf_trainer")


READERS = {KIND: read_metrics_csv}

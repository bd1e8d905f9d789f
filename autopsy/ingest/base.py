"""RunBuilder: what every reader writes into.

Readers never raise for bad input: they call :meth:`RunBuilder.problem` and go on. Scalars are
collected in column lists (cheap appends) and turned into one long DataFrame in
:meth:`RunBuilder.finish`, where series held by several sources are de-duplicated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from autopsy.metrics import ALIASES, RUNNING_LOSS_NAMES, TOTAL_LOSS_NAMES, canonical
from autopsy.model import Artifact, ArtifactStatus, Event, Run, empty_scalars, relpath

#: Source kinds in order of trust when several hold the same series (lower = preferred).
#: trainer_state.json holds the Trainer's own record; TensorBoard gets the same values; jsonl
#: files are framework copies; stdout is parsed text and may round values.
SOURCE_PRIORITY: dict[str, int] = {
    "trainer_state": 0,
    "tfevents": 1,
    "swift_jsonl": 2,
    "llamafactory_jsonl": 2,
    "jsonl": 3,
    "lightning_csv": 2,
    "text_log": 5,
    "mlflow": 1,  # the tracker's own record of each logged value
    "wandb_history": 1,
    "wandb_summary": 6,  # last values only
}


#: points of one series from one source kept in memory (~9 MB). A longer series (a multi-GB stdout log:
#: 6.5M records x 4 metrics) is compacted to min and max per bucket plus the first and last
#: non-finite point of each bucket, so memory stays bounded whatever the log size while every
#: spike, the non-finite onset and the end of the run survive. The artifact says when it happened.
MAX_SERIES_POINTS = 500_000
#: compaction runs when a series holds this many times the cap (amortises its cost)
COMPACT_AT = 1.5


@dataclass
class _SourceColumns:
    kind: str
    exact_steps: bool
    step: list[int] = field(default_factory=list)
    metric: list[str] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    line: list[int | None] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    #: metric -> compact column blocks (see _Block); frames are split into these on arrival so
    #: no reader's DataFrame outlives its hand-off
    blocks: dict[str, list[_Block]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # points held per metric
    seen: dict[str, int] = field(default_factory=dict)  # points read per metric (before compaction)


@dataclass
class _Block:
    """Points of one metric from one hand-off: the smallest dtypes that hold them."""

    step: np.ndarray  # int32 or int64
    value: np.ndarray  # float64
    line: np.ndarray  # int32 or int64; -1 = no line
    key: pd.Categorical

    def __len__(self) -> int:
        return len(self.step)


def _compact(blocks: list[_Block], target: int) -> _Block:
    """Blocks of one series -> one block of about ``target`` points: per bucket of consecutive
    points (in step order) the min and max finite value and the first and last non-finite point,
    plus the first and last point of the series."""
    step = np.concatenate([b.step.astype("int64") for b in blocks])
    value = np.concatenate([b.value for b in blocks])
    line = np.concatenate([b.line.astype("int64") for b in blocks])
    key = pd.api.types.union_categoricals([b.key for b in blocks], ignore_order=True)
    order = np.argsort(step, kind="stable")
    step, value, line = step[order], value[order], line[order]
    key = key[order]
    n = len(step)
    buckets = max(1, target // 4)
    bucket = (np.arange(n, dtype="int64") * buckets) // n
    bounds = np.flatnonzero(np.diff(bucket)) + 1
    starts = np.concatenate(([0], bounds))
    fin = np.isfinite(value)
    keep = np.zeros(n, dtype=bool)
    keep[0] = keep[-1] = True
    big = np.where(fin, value, -np.inf)
    small = np.where(fin, value, np.inf)
    # each bucket's max / min by reduceat, then the first index holding it
    vmax = np.maximum.reduceat(big, starts)
    vmin = np.minimum.reduceat(small, starts)
    bid = np.repeat(np.arange(len(starts)), np.diff(np.concatenate((starts, [n]))))
    for target_vals, arr in ((vmax, big), (vmin, small)):
        first_hit = np.flatnonzero((arr == target_vals[bid]) & fin)
        if first_hit.size:  # keep the first hit of each bucket
            fb = bid[first_hit]
            firsts = first_hit[np.concatenate(([True], fb[1:] != fb[:-1]))]
            keep[firsts] = True
    bad = np.flatnonzero(~fin)
    if bad.size:
        bb = bid[bad]
        keep[bad[np.concatenate(([True], bb[1:] != bb[:-1]))]] = True
        keep[bad[np.concatenate((bb[1:] != bb[:-1], [True]))]] = True
    return _Block(step=_small_int(step[keep]), value=value[keep], line=_small_int(line[keep]), key=key[keep])


def _small_int(a: np.ndarray) -> np.ndarray:
    """int32 when every value fits (halves the memory of step/line columns), else int64."""
    a = np.asarray(a, dtype="int64")
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        return a
    return a.astype("int32")


#: canonical metrics that hold a loss-named value other than the training loss (loss_scale, nll_loss, aux_loss...)
_KNOWN_LOSS_NAMED = frozenset(v for v in ALIASES.values() if "loss" in v)


def _own_loss_name(metric: str) -> bool:
    """A training loss under the run's own name: "loss" in it, not a held-out, per-rank or known auxiliary series."""
    low = metric.lower()
    return ("loss" in low and "@" not in metric and metric not in _KNOWN_LOSS_NAMED
            and not low.startswith(("eval", "val", "test", "dev")) and low not in ("epoch_avg_loss", "bar_loss"))


class RunBuilder:
    """Collects what readers find; ``finish()`` returns the :class:`Run`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run = Run(root=root)
        self._sources: dict[str, _SourceColumns] = {}
        self.max_series_points = MAX_SERIES_POINTS
        #: unpacked archive members (temporary path -> the name the report uses, ``logs.zip/rank0.log``)
        self.aliases: dict[str, str] = {}

    # -- paths -------------------------------------------------------------------------------
    def rel(self, path: Path | str) -> str:
        alias = self.aliases.get(str(path)) if self.aliases else None
        if alias is not None:
            return alias
        return relpath(path, self.root if self.root.is_dir() else self.root.parent)

    # -- artifacts ---------------------------------------------------------------------------
    def artifact(self, path: Path | str, kind: str, status: ArtifactStatus = "read",
                 problem: str | None = None, size: int | None = None) -> Artifact:
        rel = path if isinstance(path, str) else self.rel(path)
        for a in self.run.artifacts:
            if a.path == rel:
                a.kind = kind
                if status != "read":
                    self.run.problem(rel, kind, problem or status, status)
                return a
        a = Artifact(path=rel, kind=kind, status=status, problem=problem, bytes=size)
        self.run.artifacts.append(a)
        return a

    def problem(self, path: Path | str, kind: str, message: str, status: ArtifactStatus = "unreadable") -> None:
        rel = path if isinstance(path, str) else self.rel(path)
        self.run.problem(rel, kind, message, status)

    # -- scalars -----------------------------------------------------------------------------
    def _src(self, source: str, kind: str, exact_steps: bool) -> _SourceColumns:
        s = self._sources.get(source)
        if s is None:
            s = self._sources[source] = _SourceColumns(kind=kind, exact_steps=exact_steps)
        return s

    def scalar(self, source: str, kind: str, step: int, key: str, value: float,
               line: int | None = None, exact_steps: bool = True, metric: str | None = None) -> None:
        """Add one point. ``key`` is the original key; ``metric`` overrides canonicalisation."""
        s = self._src(source, kind, exact_steps)
        s.step.append(int(step))
        s.metric.append(metric or canonical(key))
        try:
            s.value.append(float(value))
        except (TypeError, ValueError):
            s.value.append(math.nan)
        s.line.append(line)
        s.key.append(key)

    def set_exact(self, source: str, exact: bool) -> None:
        """Whether a source's steps are exact, when a streaming reader learns it only at the end."""
        if source in self._sources:
            self._sources[source].exact_steps = exact

    def scalar_frame(self, source: str, kind: str, frame: pd.DataFrame, exact_steps: bool = True) -> None:
        """Add many points at once: columns step, key, value[, line][, metric]."""
        line = (pd.array(frame["line"], dtype="Int64").to_numpy(dtype="int64", na_value=-1)
                if "line" in frame else None)
        metric = frame["metric"].to_numpy(dtype=object) if "metric" in frame else None
        self.scalar_columns(source, kind, frame["step"].to_numpy(dtype="int64"), frame["key"].to_numpy(dtype=object),
                            frame["value"].to_numpy(dtype="float64"), line, exact_steps, metric)

    def scalar_columns(self, source: str, kind: str, step: Any, key: Any, value: Any, line: Any = None,
                       exact_steps: bool = True, metric: Any = None) -> None:
        """Add many points from plain columns (lists or arrays; ``line`` -1/None = no line).

        The cheapest hand-off: no DataFrame, keys factorised once, split by canonical metric into
        compact blocks.
        """
        s = self._src(source, kind, exact_steps)
        step = np.asarray(step, dtype="int64")
        value = np.asarray(value, dtype="float64")
        key = np.asarray(key, dtype=object)
        if line is None:
            line = np.full(len(step), -1, dtype="int64")
        else:
            line = np.asarray([-1 if v is None else v for v in line], dtype="int64") if isinstance(line, list) \
                and None in line else np.asarray(line, dtype="int64")
        key_codes, key_uniques = pd.factorize(key)
        names = [str(k) for k in key_uniques.tolist()]
        if len(set(names)) != len(names):  # e.g. 1 and "1": factorise their text instead
            key_codes, key_uniques = pd.factorize(np.asarray([str(k) for k in key.tolist()], dtype=object))
            names = [str(k) for k in key_uniques.tolist()]
        key_cats = pd.Index(names, dtype=object)
        if metric is None:
            canon = [canonical(str(k)) for k in key_uniques.tolist()]
            m_uniques = sorted(set(canon))
            m_index = {m: i for i, m in enumerate(m_uniques)}
            m_codes = np.array([m_index[c] for c in canon], dtype="int64")[key_codes]
        else:
            m_codes, m_uniques_idx = pd.factorize(np.asarray(metric, dtype=object))
            m_uniques = [str(m) for m in m_uniques_idx.tolist()]
        for i, metric_name in enumerate(m_uniques):
            mask = None if len(m_uniques) == 1 else m_codes == i
            if mask is not None and not mask.any():
                continue
            kc = key_codes if mask is None else key_codes[mask]
            self._add_block(s, str(metric_name), _Block(
                step=_small_int(step if mask is None else step[mask]),
                value=value.copy() if mask is None else value[mask],
                line=_small_int(line if mask is None else line[mask]),
                key=pd.Categorical.from_codes(kc, categories=key_cats)))

    def _add_block(self, s: _SourceColumns, metric: str, block: _Block) -> None:
        s.blocks.setdefault(metric, []).append(block)
        n = len(block)
        s.counts[metric] = s.counts.get(metric, 0) + n
        s.seen[metric] = s.seen.get(metric, 0) + n
        if s.counts[metric] > COMPACT_AT * self.max_series_points:
            s.blocks[metric] = [_compact(s.blocks[metric], self.max_series_points)]
            s.counts[metric] = len(s.blocks[metric][0])

    # -- events, config ----------------------------------------------------------------------
    def event(self, kind: str, message: str, source: str, line: int | None = None,
              step: int | None = None, **data: Any) -> Event:
        ev = Event(kind=kind, message=message[:2000], source=source, line=line, step=step, data=data)
        self.run.events.append(ev)
        return ev

    def fact(self, key: str, value: Any, source: str, where: str | None = None,
             original_key: str | None = None) -> None:
        self.run.config.add(key, value, source, where, original_key)

    def framework(self, name: str) -> None:
        self.run.add_framework(name)

    # -- finish ------------------------------------------------------------------------------
    def finish(self) -> Run:
        self.run.scalars, self.run.series_sources = self._merge()
        self.run.artifacts.sort(key=lambda a: a.path)
        return self.run

    def _flush_lists(self, s: _SourceColumns) -> None:
        """Move points added one by one (scalar()) into blocks."""
        if not s.step:
            return
        lines = np.array([-1 if ln is None else ln for ln in s.line], dtype="int64")
        frame_metrics = np.array(s.metric, dtype=object)
        codes, uniques = pd.factorize(frame_metrics)
        steps = np.asarray(s.step, dtype="int64")
        values = np.asarray(s.value, dtype="float64")
        keys = np.array(s.key, dtype=object)
        for i, metric in enumerate(uniques.tolist()):
            m = codes == i
            self._add_block(s, str(metric), _Block(
                step=_small_int(steps[m]), value=values[m], line=_small_int(lines[m]), key=pd.Categorical(keys[m])))
        s.step, s.metric, s.value, s.line, s.key = [], [], [], [], []

    def _promote_total_loss(self) -> None:
        """A run that logs no ``loss`` but one total (``total_loss``, ``losses``: the sum its optimizer steps on)
        has that total as its loss: detectors read ``loss``. Failing a total, one running or per-step loss
        (``avr_loss``, ``step_loss``: ``RUNNING_LOSS_NAMES``) is, then the one loss-named series of a run that prints
        no other (``MSE_loss``). Two candidates stay as they are (no guess)."""
        names = {m for s in self._sources.values() for m in s.blocks}
        if "loss" in names:
            return
        totals = [m for m in names if m.lower() in TOTAL_LOSS_NAMES]
        if not totals:
            totals = [m for m in names if m.lower() in RUNNING_LOSS_NAMES]
        if not totals and "eval_train_loss" in names:
            # the training split's loss as an evaluation estimates it, printed beside the held-out loss (nanoGPT's
            # "step N: train loss X, val loss Y", LLMs-from-scratch's "Ep 1 (Step 000005): Train loss 8.059, Val loss
            # 8.126"): with no per-iteration loss beside it, the only training loss the run has
            totals = ["eval_train_loss"]
        if not totals:
            # the only loss the run prints, under a name of its own ("MSE loss: 0.5" read as MSE_loss)
            totals = [m for m in names if _own_loss_name(m)]
        if len(totals) != 1:
            return
        for s in self._sources.values():
            for table in (s.blocks, s.counts, s.seen):
                if totals[0] in table:
                    table["loss"] = table.pop(totals[0])

    def _merge(self) -> tuple[pd.DataFrame, dict[str, str]]:
        """One long frame; where several sources hold a metric, the most trusted one wins.

        Per metric: exact-step sources are preferred over inferred-step ones (which are dropped
        when an exact source exists); sources are ranked by kind priority, then by point count;
        each lower-ranked source only contributes steps before or after the range the higher-ranked
        ones cover (so a crashed run's stdout tail beyond the last checkpoint's trainer_state is kept,
        but no off-by-one stdout point is interleaved inside that range).

        Memory: points live in compact per-metric blocks; the output columns are allocated once
        and filled metric by metric while the blocks are released, so the peak stays near the size
        of the final frame (categorical metric/source/key columns).
        """
        for source, s in self._sources.items():
            self._flush_lists(s)
            for metric, blocks in list(s.blocks.items()):
                if s.counts.get(metric, 0) > self.max_series_points:
                    s.blocks[metric] = [_compact(blocks, self.max_series_points)]
                    s.counts[metric] = len(s.blocks[metric][0])
            thinned = {m: (n, s.counts[m]) for m, n in s.seen.items() if s.counts.get(m, n) < n}
            if thinned:
                desc = ", ".join(f"{m}: {n:,} points kept as {k:,}" for m, (n, k) in sorted(thinned.items()))
                self.run.problem(source, s.kind, f"series too long to keep whole ({desc}): every point was read; "
                                 "kept min and max per step bucket and the first and last non-finite point of each "
                                 "bucket, so spikes, the non-finite onset and the last step survive (counts of "
                                 "non-finite points are lower bounds)", "partial")
        self._promote_total_loss()
        metrics = sorted({m for s in self._sources.values() for m in s.blocks})
        if not metrics:
            return empty_scalars(), {}
        # per metric: the selected (source, keep-mask per block) in rank order
        plan: list[tuple[str, list[tuple[str, list[tuple[_Block, np.ndarray | None]]]]]] = []
        chosen: dict[str, str] = {}
        total = 0
        for metric in metrics:
            cands = []
            for source, s in self._sources.items():
                blocks = s.blocks.get(metric)
                if blocks:
                    n = sum(len(b) for b in blocks)
                    cands.append((not s.exact_steps, SOURCE_PRIORITY.get(s.kind, 4), -n, source, blocks))
            if any(not c[0] for c in cands):
                cands = [c for c in cands if not c[0]]
            cands.sort(key=lambda c: (c[0], c[1], c[2], c[3]))
            chosen[metric] = cands[0][3]
            lo = hi = None
            picked = []
            for _, _, _, source, blocks in cands:
                sel = []
                src_lo = src_hi = None
                for b in blocks:
                    steps = b.step
                    if lo is None:
                        mask = None
                        kept = len(b)
                    else:
                        # only outside the covered range: a stdout reader's tqdm-inferred steps are often
                        # one off (step 29 for the record of step 30); interleaving them forges points
                        mask = (steps < lo) | (steps > hi)
                        kept = int(mask.sum())
                        if kept == 0:
                            continue
                        if kept == len(b):
                            mask = None
                    ks = steps if mask is None else steps[mask]
                    src_lo = int(ks.min()) if src_lo is None else min(src_lo, int(ks.min()))
                    src_hi = int(ks.max()) if src_hi is None else max(src_hi, int(ks.max()))
                    sel.append((b, mask))
                    total += kept
                if sel:
                    picked.append((source, sel))
                    lo = src_lo if lo is None else min(lo, src_lo)
                    hi = src_hi if hi is None else max(hi, src_hi)
            plan.append((metric, picked))

        step_out = np.empty(total, dtype="int64")
        value_out = np.empty(total, dtype="float64")
        max_line = max((int(b.line.max()) for s in self._sources.values() for bl in s.blocks.values()
                        for b in bl if len(b)), default=0)
        line_out = np.empty(total, dtype="int32" if max_line < 2**31 else "int64")
        metric_codes = np.empty(total, dtype="int16" if len(metrics) < 2**15 else "int32")
        sources = sorted(self._sources)
        source_index = {src: i for i, src in enumerate(sources)}
        source_codes = np.empty(total, dtype="int16" if len(sources) < 2**15 else "int32")
        key_cats: dict[str, int] = {}
        key_codes = np.empty(total, dtype="int32")
        pos = 0
        for mi in range(len(plan)):
            metric, picked = plan[mi]
            plan[mi] = (metric, [])  # the blocks are released as soon as they are copied
            for s in self._sources.values():
                s.blocks.pop(metric, None)
            start = pos
            for source, sel in picked:
                while sel:
                    b, mask = sel.pop(0)
                    take = (lambda a: a) if mask is None else (lambda a, m=mask: a[m])
                    n = len(b) if mask is None else int(mask.sum())
                    step_out[pos:pos + n] = take(b.step)
                    value_out[pos:pos + n] = take(b.value)
                    line_out[pos:pos + n] = take(b.line)
                    cat_map = np.array([key_cats.setdefault(str(c), len(key_cats)) for c in b.key.categories],
                                       dtype="int32")
                    key_codes[pos:pos + n] = cat_map[take(b.key.codes)]
                    source_codes[pos:pos + n] = source_index[source]
                    pos += n
            metric_codes[start:pos] = mi
            seg = step_out[start:pos]
            if pos - start > 1 and (np.diff(seg) < 0).any():
                order = np.argsort(seg, kind="stable") + start
                for arr in (step_out, value_out, line_out, key_codes, source_codes):
                    arr[start:pos] = arr[order]
        for s in self._sources.values():
            s.blocks.clear()
        line_mask = line_out < 0
        line_out[line_mask] = 0
        df = pd.DataFrame({
            "step": step_out,
            "metric": pd.Categorical.from_codes(metric_codes, categories=metrics),
            "value": value_out,
            "source": pd.Categorical.from_codes(source_codes, categories=sources),
            "line": pd.arrays.IntegerArray(line_out, line_mask),
            "key": pd.Categorical.from_codes(key_codes, categories=list(key_cats)),
        }, copy=False)
        return df, chosen

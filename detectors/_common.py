"""Helpers shared by the numeric detectors: points of a series, the non-finite onset, precision
signals, checkpoints around an onset, number formatting.

Detectors measure; these helpers only read the Run, so every detector sees the same onset, the
same "last clean checkpoint" and the same reading of the precision settings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, overload

import numpy as np

from autopsy.metrics import LOSS_PART, LR_PRINT_DECIMALS, UNNAMED_COLUMN, loss_like
from autopsy.model import Checkpoint, ConfigFact, Event, Evidence, Run
from detectors.knobs import HF_FRAMEWORKS

#: metrics that are end-of-run summaries, never a training curve
SUMMARY_METRICS = frozenset({"train_loss", "train_runtime", "train_samples_per_second",
                             "train_steps_per_second", "total_flos"})
#: largest finite float16 value; a loss or activation beyond it cannot exist in fp16
FP16_MAX = 65504.0
#: file endings whose ``line`` column is a real line number (else it is a record index)
TEXT_SUFFIXES = (".log", ".txt", ".out", ".err", ".jsonl", ".csv")


#: ln 2: the DPO/IPO sigmoid loss when policy and reference agree exactly (rewards 0)
LN2 = math.log(2.0)
#: tolerance for "stuck at ln 2": logged losses are rounded to 4 digits in transformers 4.x
LN2_TOL = 5e-4

@dataclass(frozen=True)
class Point:
    step: int
    value: float
    source: str
    line: int | None

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)

    def where(self) -> str:
        return where(self.source, self.line, self.step)

    def evidence(self, detail: str) -> Evidence:
        return Evidence(self.source, self.where(), detail, self.step)


def where(source: str, line: Any, step: int | None) -> str:
    """``line N`` for text artifacts (clickable), ``step N`` for structured ones."""
    if line is not None and not _isna(line) and source.lower().endswith(TEXT_SUFFIXES):
        return f"line {int(line)}"
    return f"step {step}" if step is not None else source


def _isna(x: Any) -> bool:
    try:
        return x is None or (isinstance(x, float) and math.isnan(x)) or str(x) == "<NA>"
    except Exception:  # noqa: BLE001
        return False


class Series(Sequence[Point]):
    """One metric's points in step order, backed by numpy arrays (a read-only list of :class:`Point`).

    Long runs log 100k+ steps per series: detectors measure with the vectorised attributes
    (``steps``, ``values``, ``finite``, :meth:`select`, :meth:`at_or_before`) and build a
    :class:`Point` (with its source and line) only for the few points they cite. Indexing with an
    int gives a Point, with a slice or :meth:`select` another Series; iterating works but is the
    slow path, kept for small series and old callers.
    """

    __slots__ = ("_run", "steps", "values", "rows", "_finite")

    def __init__(self, run: Run | None, steps: np.ndarray, values: np.ndarray, rows: Any) -> None:
        self._run = run
        self.steps = steps
        self.values = values
        self.rows = rows
        self._finite: np.ndarray | None = None

    @classmethod
    def empty(cls) -> Series:
        return cls(None, np.empty(0, dtype="int64"), np.empty(0, dtype="float64"), range(0))

    @property
    def finite(self) -> np.ndarray:
        """Boolean mask of the finite values (computed once)."""
        if self._finite is None:
            self._finite = np.isfinite(self.values)
        return self._finite

    def __len__(self) -> int:
        return len(self.steps)

    def __bool__(self) -> bool:
        return len(self.steps) > 0

    @overload
    def __getitem__(self, i: int) -> Point: ...

    @overload
    def __getitem__(self, i: slice) -> Series: ...

    def __getitem__(self, i: int | slice) -> Point | Series:
        if isinstance(i, slice):
            out = Series(self._run, self.steps[i], self.values[i], self.rows[i])
            if self._finite is not None:
                out._finite = self._finite[i]
            return out
        return self.point(i)

    def __iter__(self) -> Iterator[Point]:
        for i in range(len(self)):
            yield self.point(i)

    def point(self, i: int) -> Point:
        """The i-th point (negative i counts from the end) with its source and line."""
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        source, line = _source_line(self._run, int(self.rows[i]))
        return Point(int(self.steps[i]), float(self.values[i]), source, line)

    def select(self, mask_or_index: np.ndarray) -> Series:
        """The points where a boolean mask is true (or at integer positions), order kept."""
        idx = np.flatnonzero(mask_or_index) if mask_or_index.dtype == bool else mask_or_index
        rows = self.rows
        rows = np.arange(rows.start, rows.stop)[idx] if isinstance(rows, range) else rows[idx]
        return Series(self._run, self.steps[idx], self.values[idx], rows)

    def finite_only(self) -> Series:
        return self if bool(self.finite.all()) else self.select(self.finite)

    def at_or_before(self, step: int) -> Point | None:
        """The last point at or before ``step`` (steps are sorted)."""
        i = int(np.searchsorted(self.steps, step, side="right")) - 1
        return self.point(i) if i >= 0 else None

    def before(self, step: int, inclusive: bool = False) -> Series:
        """The points with step < ``step`` (<= with ``inclusive``): a prefix, steps being sorted."""
        return self[: int(np.searchsorted(self.steps, step, side="right" if inclusive else "left"))]

    def argmin(self) -> int:
        """Position of the smallest value (first on ties, like ``min(key=...)``); -1 when empty."""
        return int(np.argmin(self.values)) if len(self) else -1

    def argmax(self) -> int:
        return int(np.argmax(self.values)) if len(self) else -1

    def lookup(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(present, value) of this series at each of ``steps``, like ``{p.step: p.value}.get``: the last
        point logged at a step wins; ``value`` is NaN where not present."""
        if not len(self):
            return np.zeros(len(steps), dtype=bool), np.full(len(steps), np.nan)
        idx = np.searchsorted(self.steps, steps, side="right") - 1
        safe = np.clip(idx, 0, None)
        present = (idx >= 0) & (self.steps[safe] == steps)
        return present, np.where(present, self.values[safe], np.nan)

    def row(self, i: int) -> tuple[int, float, str, int | None]:
        """(step, value, source, line) of the i-th point: the row shape of ``detectors._facts``."""
        p = self.point(i)
        return p.step, p.value, p.source, p.line


def _source_line(run: Run | None, row: int) -> tuple[str, int | None]:
    if run is None:
        return "", None
    df = run.scalars
    line = df["line"].iat[row]
    return str(df["source"].iat[row]), None if _isna(line) else int(line)


def points(run: Run, metric: str) -> Series:
    """The points of one canonical metric in step order (a :class:`Series`; empty for summaries)."""
    if metric in SUMMARY_METRICS:
        return Series.empty()
    arr = run.arrays(metric)
    if arr is None:
        return Series.empty()
    return Series(run, arr.steps, arr.values, arr.rows)


def printed_zero_bound(decimals: int) -> float:
    """What a zero printed in fixed point with ``decimals`` decimals says of the value: below half a unit of the last."""
    return 0.5 * 10.0 ** -decimals


def rounded_lr_zero(run: Run, lr: Series, below: float) -> ConfigFact | None:
    """The fact that the log ``lr`` was read from prints its learning rate's zeros in fixed point with too few decimals
    to tell them from an LR of ``below`` or more (``lr: 0.0000`` is any LR under 5e-5, a fine-tuning LR included:
    Composer's console logger prints floats ``{:.4f}``), or None. Such zeros say nothing of a stalled schedule."""
    if not len(lr):
        return None
    sources = {lr[0].source, lr[-1].source}
    for f in run.config.facts(LR_PRINT_DECIMALS):
        if f.source in sources and isinstance(f.value, int) and printed_zero_bound(f.value) > below:
            return f
    return None


#: the NLL/cross-entropy range check refusing a class label (aten LossNLL.cpp's "Target 5 is out of bounds.", its CUDA
#: kernels' and TH's ClassNLLCriterion's "Assertion `t >= 0 && t < n_classes` failed", TensorFlow's sparse softmax
#: "Received a label value of 10 which is outside the valid range of [0, 10)"): VOCAB001 names it, CRASH001 leaves the
#: exception to it
CLASS_LABEL_RE = re.compile(r"\b(?:Target|Received a label value of) (-?\d+) (?:(?:is )?out of bounds|which is outside "
                            r"the valid range)|Assertion \W{0,2}(?:cur_target|t) >= 0 && "
                            r"(?:cur_target|t) < n_classes\W{0,2} failed")
#: TensorFlow's gather refusing an index (an embedding lookup's GatherV2/ResourceGather): "indices[5,3] = 30522 is not in
#: [0, 30522)"
TF_GATHER_RE = re.compile(r"\bindices\[[\d,]+\] = -?\d+ is not in \[0, \d+\)")
#: a held-out copy of a metric (``val_loss``, ``giou_val_loss``, ``test/loss``, ``eval_nll``, ``valid CER``)
HELD_OUT = re.compile(r"(?i)(?:^|[/_.\s-])(?:eval|val|valid|validation|test|dev)(?:$|[/_.\s-])")


#: a first log at most this many logging intervals into the run is "from the start" (HF logs first at logging_steps)
START_INTERVALS = 3


def starts_at_start(rows: Series) -> bool:
    """The first log is near the run's start (a few logging intervals in), not an excerpt from its middle: only
    then does "from the first log on" mean "from the start". One point (or one step): taken as the start."""
    if len(rows) < 2 or bool((rows.steps == rows.steps[0]).all()):
        return True  # (one record printed by every rank is one point)
    gaps = np.diff(rows.steps.astype(np.float64))
    interval = float(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 1.0
    return float(rows.steps[0]) <= START_INTERVALS * max(interval, 1.0)


#: step-counter restarts (back to the first step) that still read as attempts pasted one after the other; more are a
#: per-epoch counter the parser could not compose (``Epoch 2, Step 0``), not runs
MAX_ATTEMPTS = 3


def latest_attempt(pts: Series) -> Series:
    """The points of the last attempt when a log holds several runs one after the other (a rerun pasted below the
    failed one, or a restart from scratch): in file order the step counter falls back to the first step it showed.
    Without such a restart (or with many: an epoch-local counter) the series is returned as is."""
    if len(pts) < 2 or len(np.unique(pts.steps)) == len(pts):
        return pts
    run = pts._run
    if run is None or "line" not in run.scalars:
        return pts
    lines = run.scalars["line"].to_numpy(dtype="float64", na_value=np.nan)[np.asarray(pts.rows)]
    if np.isnan(lines).any():
        return pts  # not all from one text log: no file order to read a restart from
    order = np.argsort(lines, kind="stable")
    st = pts.steps[order]
    back = np.flatnonzero((st[1:] < st[:-1]) & (st[1:] <= st[0])) + 1
    if not back.size or back.size >= MAX_ATTEMPTS:
        return pts
    keep = np.zeros(len(pts), dtype=bool)
    keep[order[int(back[-1]):]] = True
    return pts.select(keep)


def value_at(pts: Sequence[Point], step: int) -> Point | None:
    """The last point at or before ``step``."""
    if isinstance(pts, Series):
        return pts.at_or_before(step)
    best = None
    for p in pts:
        if p.step <= step:
            best = p
        else:
            break
    return best


def count_of(n: int, noun: str, plural: str | None = None) -> str:
    """``1 overflow message``, ``3 overflow messages`` (``plural`` where adding an s is wrong)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def fmt(x: float | None) -> str:
    """Compact number for messages: 1.19e+34, 0.0001, 4.17, NaN."""
    if x is None:
        return "?"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    if x == 0:
        return "0.0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def robust_level(values: Iterable[float] | np.ndarray) -> float | None:
    """Median of the finite values (None when there are none)."""
    if isinstance(values, np.ndarray):
        fin_arr = values[np.isfinite(values)]
        return float(np.median(fin_arr)) if fin_arr.size else None
    fin = [v for v in values if math.isfinite(v)]
    return median(fin) if fin else None


#: the last loss before an onset this many times the median of the recent logs before it: it jumped out of its level
ROSE_JUMP = 1.5
#: the newest third of those logs this many times the oldest third (medians): a steady climb (noise around a level, a
#: per-batch loss swinging 1.5-2.1, is neither)
ROSE_TREND = 1.15
#: the recent logs the test looks at (the last finite ones before the onset)
ROSE_WINDOW = 8


def rose_before(values: np.ndarray) -> bool:
    """Whether the last finite losses before an onset rose out of their recent level (a jump of the last one, or a
    steady climb of the window): the one test NUM001 (divergence first) and DATA001 (a calm curve) share, so the two
    never say opposite things of the same logs."""
    v = values[np.isfinite(values)][-ROSE_WINDOW:]
    if v.size < 2:
        return False
    level = float(np.median(v[:-1]))
    if level > 0 and v[-1] > ROSE_JUMP * level:
        return True
    third = v.size // 3
    if third < 1:
        return False
    old, new = float(np.median(v[:third])), float(np.median(v[-third:]))
    return old > 0 and new >= ROSE_TREND * old


# -- the non-finite onset -------------------------------------------------------------------

#: metrics whose non-finite value is the failure itself
WATCHED = ("loss", "eval_loss", "grad_norm")
#: a perplexity (exp of the loss; the Lua OpenNMT logs only that): NaN in it is a non-finite loss, while inf is exp of
#: a cross-entropy above 709, an explosion (DIV001's), not a NaN
PERPLEXITY = re.compile(r"(?i)(?:^|[/_.\s])(?:ppl|perplexity)$")


@dataclass
class Onset:
    """Where the run first went non-finite, and how."""

    step: int | None
    metric: str
    evidence: Evidence
    hidden_zero: bool = False  # HF logging_nan_inf_filter: loss logged as 0.0
    persistent: bool = True  # stays non-finite to the end of the series
    recovered: bool = False  # finite values follow the non-finite ones (particular batches)
    n_bad: int = 1
    n_total: int = 1
    message: bool = False  # read from a log message (a NaN-stop line), not from a series


#: metrics of RL trainers (TRL GRPO/PPO/RLOO, verl, OpenRLHF, ms-swift GRPO; SB3/baselines/RLlib agents): in such runs the
#: "loss" is an advantage-weighted surrogate that is ~0 or negative by construction, and some metrics are NaN or 0
#: by design (TRL GRPO logs ``kl`` as NaN/absent when beta == 0, its default since v0.19; ``clip_ratio`` is 0 with
#: one policy update per generation)
_RL_METRIC = re.compile(r"(^|/)(kl|reward_std|frac_reward_zero_std|clip_ratio|clipped_ratio|pg_loss|pg_clipfrac|"
                        r"advantages?|critic/|completions?/|completion_length|response_length/)|^rewards?/.*/(mean|std)$|"
                        r"critic/score|^reward(_mean)?$|"
                        # classic RL (stable-baselines3, OpenAI baselines, RLlib): episode returns and PPO/SAC/DQN terms
                        r"(^|/)(ep_?rew_?mean|ep_?len_?mean|episode_(reward|len)_(mean|max|min)|approx_?kl|"
                        r"explained_variance|clip_?frac(tion)?|policy_entropy|ent_coef(_loss)?|policy_gradient_loss|"
                        r"exploration_rate)$")
#: ``trainer.type`` values (TRL classes, ms-swift ``--rlhf_type``, verl ``adv_estimator``) of policy-gradient training
RL_TRAINERS = {"grpo", "ppo", "rloo", "reinforce", "reinforce_plus_plus", "remax", "gae", "dapo", "gspo", "opo"}


def is_policy_gradient_run(run: Run) -> bool:
    """A GRPO/PPO-style run, recognised by the metrics its trainer logs or the trainer its config names."""
    if any(str(f.value).lower() in RL_TRAINERS for f in run.config.facts("trainer.type")):
        return True
    return any(_RL_METRIC.search(m) for m in run.metrics())


#: what marks a token-level language-model run, where labels are token ids and a mean over zero supervised tokens is
#: NaN: its metrics, the trainers that print them, or settings only such runs have
_LM_METRICS = {"nll_loss", "token_accuracy", "num_tokens", "ppl", "eval_ppl", "perplexity", "eval_perplexity"}
_LM_FRAMEWORKS = {"hf_trainer", "trl", "ms_swift", "llamafactory", "llama_recipes", "minimind", "torchtune", "axolotl",
                  "megatron", "verl", "openrlhf", "unsloth", "fairseq", "opennmt", "nemo"}
_LM_FACTS = ("max_seq_length", "max_length", "cutoff_len", "lora.r", "lora.target_modules", "template",
             "dataset_text_field", "max_completion_length", "max_prompt_length", "packing", "completion_only_loss",
             "assistant_only_loss", "vocab_size")


def is_token_lm_run(run: Run) -> bool:
    """A language-model run (SFT, pretraining, translation), by its metrics, trainer or settings. Other runs (vision,
    speech, tabular) have no token labels to mask, so "labels all masked" cannot explain them."""
    if any(m in _LM_METRICS for m in run.metrics()) or set(run.frameworks) & _LM_FRAMEWORKS:
        return True
    return any(run.config.facts(k) for k in _LM_FACTS)


#: logs of an all-NaN loss term before it counts as a term the trainer does not compute
NOT_COMPUTED_LOGS = 3


def not_computed(run: Run, metric: str, pts: Series) -> bool:
    """An auxiliary metric that is NaN at every log from the first while the loss is finite: a term the trainer did
    not compute (by construction, e.g. TRL GRPO ``kl`` with beta 0), not a failure. The main series never qualify."""
    if metric in WATCHED or not len(pts) or pts.finite.any():
        return False
    if HELD_OUT.search(metric) is not None and loss_like(metric):
        return False  # an evaluation loss NaN at every evaluation was computed, from NaN (ultralytics' val/box_loss)
    if len(pts) < NOT_COMPUTED_LOGS and LOSS_PART.search(metric.lower()):
        return False  # a loss term NaN at its one or two logs has not shown it is never computed
    loss = points(run, "loss")
    if len(loss):
        return bool(loss.finite.all())
    # no total loss logged (mmseg's decode.loss_seg, per-head terms): another loss term finite at every log computes
    return any(m != metric and loss_like(m) and len(p := points(run, m)) and bool(p.finite.all())
               for m in run.metrics() if m not in WATCHED)


#: exact-zero losses that start within this many logs after a spike are the spike's hidden non-finite window
ZERO_AFTER_SPIKE_LOGS = 5
#: a spike: this many times the median of the finite non-zero logs before it, or past fp16's max
ZERO_SPIKE_FACTOR = 10.0


#: HF runs: exact zeros right after a log at least this high are a cliff no learning makes (the Trainer prints 4 decimals)
ZERO_CLIFF_FROM = 0.5
#: frameworks whose loss logs are the HF Trainer's own (its logging_nan_inf_filter logs an all-NaN window as 0.0):
#: TRL, ms-swift, LLaMA-Factory (trainer_log.jsonl is written from the Trainer's logs) and axolotl train through it;
#: llama-recipes has a loop of its own
HF_TRAINER_LOGS = frozenset({"hf_trainer", "trl", "ms_swift", "llamafactory", "axolotl"})


def hidden_zero_mask(loss: Series, gn: Series, cliff: bool = False) -> np.ndarray:
    """Per loss point: exactly 0.0 with a non-finite grad_norm logged at the same step; where no grad_norm is logged,
    exact zeros two or more logs in a row that start right after a spike (``_zeros_after_spike``), or, with ``cliff``
    (an HF Trainer's log), right after a log of ``ZERO_CLIFF_FROM`` or more."""
    zero = loss.values == 0.0
    if not zero.any():
        return np.zeros(len(loss), dtype=bool)
    if not len(gn):
        return _zeros_after_spike(loss.values, cliff)
    present, gval = gn.lookup(loss.steps)
    return zero & present & ~np.isfinite(gval)


def _zeros_after_spike(v: np.ndarray, cliff: bool = False) -> np.ndarray:
    """A loss does not fall from a spike 10x its level (or past 65504) to exactly 0.0 and stay there: HF's
    logging_nan_inf_filter logs a window of non-finite losses as 0.0 (alpaca-lora#418: 537 .. 2697, then 6.17e+07, then
    0.0 for 5 logs, no grad_norm logged). Zeros from the start (nothing to learn) or after a gradual fall are not this.
    With ``cliff``, neither is a fall straight from ``ZERO_CLIFF_FROM`` or more to 0.0 at consecutive logs: a mean loss
    printed to 4 decimals does not go from 3.8462 to 0.0000 in one logging window by learning (Qwen-VL#352, fp16 on a
    V100: 3.8462, then 0.0 at every log)."""
    out = np.zeros(len(v), dtype=bool)
    z = v == 0.0
    i, n = 0, len(v)
    while i < n:
        if not z[i]:
            i += 1
            continue
        e = i
        while e < n and z[e]:
            e += 1
        if e - i >= 2:
            lo = max(0, i - ZERO_AFTER_SPIKE_LOGS)
            window = v[lo:i]
            pre = np.flatnonzero(np.isfinite(window) & (window != 0))
            if pre.size:
                j = lo + int(pre[np.argmax(window[pre])])  # the highest finite log just before the zeros
                before = v[max(0, j - ZERO_AFTER_SPIKE_LOGS):j]
                base = robust_level(before[before != 0])
                if v[j] > FP16_MAX or (base is not None and base > 0 and v[j] >= ZERO_SPIKE_FACTOR * base):
                    out[i:e] = True
        # the cliff also when the zero is the last log read (the run, or the paste, ends in it: LlamaFactory#506,
        # 2.7044 then 0.0 at the last line of trainer_log.jsonl); a lone zero between two finite logs stays a window
        if cliff and (e - i >= 2 or e == n) and i > 0 and np.isfinite(v[i - 1]) and v[i - 1] >= ZERO_CLIFF_FROM:
            out[i:e] = True
        i = e
    return out


def hidden_zero_steps(run: Run) -> Series:
    """Loss points of exactly 0.0 logged with a non-finite grad_norm at the same step."""
    loss = points(run, "loss")
    return loss.select(hidden_zero_mask(loss, points(run, "grad_norm"), cliff=bool(HF_TRAINER_LOGS & set(run.frameworks))))


def transient_first_gradnorm(gn: Series) -> bool:
    """grad_norm non-finite only at the first logged step, finite afterwards: AMP scaler calibration."""
    return len(gn) >= 2 and not gn.finite[0] and bool(gn.finite[1:].all())


def nonfinite_onset(run: Run) -> Onset | None:
    """The earliest failure-level non-finite point over loss-like series, or a NaN-stop message.

    Healthy patterns are excluded: a grad_norm that is non-finite only on the first log, and
    grad_norm-only blips (AMP skipped a step) while the loss stays finite and grad_norm ends finite.
    """
    candidates: list[Onset] = []
    metrics = run.metrics()
    # no loss read at all (a table whose column is named after the run, DeepSpeed#5347's "Stage2_1node_ds0.14.0"):
    # a series that was finite and went non-finite is the only sign there is; rates, scores and rewards are not it
    ppls = {m for m in metrics if PERPLEXITY.search(m.strip())}
    unnamed = not ppls and not any(loss_like(m) for m in metrics)
    for metric in metrics:
        ppl = metric in ppls
        if not loss_like(metric) and not ppl and not (unnamed and _went_nonfinite(run, metric)):
            continue
        pts = points(run, metric)
        bad = np.flatnonzero(np.isnan(pts.values) if ppl else ~pts.finite)
        if not bad.size:
            continue
        if metric == "grad_norm" and not gradnorm_failure(run, pts):
            continue
        if not_computed(run, metric, pts):
            continue
        b0 = int(bad[0])
        first = pts[b0]
        persistent = not pts.finite[-1]
        recovered = bool(pts.finite[b0:].any())
        if metric != "loss" and b0 == len(pts) - 1 and first.step is not None:
            # the onset is this series' last log (a grad_norm logged once): whether the run stayed non-finite is the
            # loss's to say, where it was logged after (gemma_pytorch#24: grad_norm nan at step 3, the loss finite at
            # step 4 and NaN only at some later logs)
            loss = points(run, "loss")
            after = loss.steps > first.step
            if after.any():
                fin = loss.finite[after]
                persistent, recovered = not bool(fin[-1]), bool(fin.any())
        candidates.append(Onset(first.step, metric, first.evidence(
            f"{metric} = {fmt(first.value)} at step {first.step} ({bad.size} of {len(pts) - b0} logs from here non-finite)"),
            persistent=persistent, recovered=recovered, n_bad=int(bad.size), n_total=len(pts)))
    hidden = hidden_zero_steps(run)
    if len(hidden):
        h = hidden[0]
        if len(points(run, "grad_norm")):
            with_gn = f"with a non-finite grad_norm at step {h.step}"
        else:
            loss = points(run, "loss")
            before = loss.select((loss.steps < h.step) & loss.finite & (loss.values != 0.0))
            with_gn = (f"at step {h.step}, right after {fmt(before[-1].value)} at step {before[-1].step} (no learning "
                       "falls to exactly 0 in one logging window)") if len(before) else f"at step {h.step}"
        candidates.append(Onset(h.step, "loss", h.evidence(
            f"loss logged as exactly 0.0 {with_gn} ({len(hidden)} such logs): "
            "HF logging_nan_inf_filter hides a window of non-finite losses as 0.0"), hidden_zero=True,
            n_bad=len(hidden), n_total=len(points(run, "loss"))))
    for ev in run.events_of("nan_stop"):
        what = (f"autograd anomaly detection: the backward of {ev.data.get('tensor')} produced NaN"
                if ev.data.get("anomaly") else
                f"TensorFlow's histogram summary of {ev.data.get('tensor')} found NaN: that variable's values (the "
                "weights, once a NaN update reached them) are non-finite"
                if ev.data.get("what") == "weights" else
                f"torch.distributions refused the model's {ev.data.get('tensor')}: they were NaN (a Real() constraint "
                "fails on nothing else), so the network's forward pass produced NaN"
                if ev.data.get("what") == "distribution" else
                "torch.multinomial refused to sample: the probabilities held NaN or Inf (a softmax gives no negative), "
                "so the model's logits were non-finite in generation"
                if ev.data.get("what") == "sampling" else
                f"JAX's debug_nans check: the jitted {ev.data.get('tensor')} produced a NaN/Inf (the first computation "
                "that did; the step's loss or gradients are non-finite from here)"
                if ev.data.get("what") == "jax_debug" else
                (f"TensorFlow's CheckNumerics ({ev.data.get('tensor')}) found a non-finite tensor"
                 + (": the global norm of the gradients, so the gradients were NaN/Inf"
                    if "global norm" in str(ev.data.get("tensor")).lower() else ""))
                if ev.data.get("what") == "check_numerics" else
                "the training loop reported a non-finite loss" if ev.data.get("warned") else
                "the training loop stopped on a non-finite loss")
        candidates.append(Onset(ev.step if ev.step is not None else step_near(run, ev), "loss",
                                event_evidence(ev, f"{what}: \"{ev.message.strip()[:160]}\""), message=True))
    if not candidates:
        return None
    order = {"loss": 0, "eval_loss": 2, "grad_norm": 1}
    candidates.sort(key=lambda o: (o.step if o.step is not None else 1 << 62, order.get(o.metric, 3)))
    return candidates[0]


def evidence_line(ev: Evidence) -> int | None:
    """The line number of evidence placed by its line (``where`` = ``line N``), else None."""
    m = re.fullmatch(r"line (\d+)", ev.where)
    return int(m[1]) if m is not None else None


def onset_at(onset: Onset) -> str:
    """Where an onset is, in words: its step, else the line of the message that reported it."""
    if onset.step is not None:
        return f"step {onset.step}"
    ev = onset.evidence
    return f"{ev.where} of {ev.artifact}" if evidence_line(ev) is not None else "a step the log does not give"


#: series that are no loss when nothing else is logged: NaN there is no failure of the training (a class absent from an
#: evaluation, an episode that did not finish, an unset learning rate)
_NOT_LOSS_ALONE = re.compile(r"(?i)lr|learning|acc|time|speed|mem|eta|epoch|step|iou|map|f1|auc|recall|precision|"
                             r"reward|return|episode|score|bleu|rouge|wer|cer|sample|token|throughput")


def _went_nonfinite(run: Run, metric: str) -> bool:
    """A series of an unknown quantity finite at first, non-finite later (not NaN from its first log: never computed)."""
    if _NOT_LOSS_ALONE.search(metric):
        return False
    pts = points(run, metric)
    if len(pts) >= 2 and not pts.finite.any() and UNNAMED_COLUMN.match(metric):
        return True  # a headerless table's column NaN at every row: whatever it holds, the paste may start mid-run
    return len(pts) >= 2 and bool(pts.finite[0]) and not bool(pts.finite.all())


#: share of non-finite grad_norm logs above which skipped steps are the run, not a blip
GRADNORM_FAILURE_SHARE = 0.5


def gradnorm_failure(run: Run, gn: Series) -> bool:
    """Is this grad_norm series' non-finiteness a failure (not AMP's occasional skipped step)?"""
    n_bad = int((~gn.finite).sum())
    if not n_bad:
        return False
    if transient_first_gradnorm(gn):
        return False
    if len(hidden_zero_steps(run)):
        return True  # HF's logging_nan_inf_filter hid non-finite losses as 0.0
    if loss_improving(run):
        return False  # skipped steps (the scaler at work) while the loss stays finite and keeps falling: transient
    if updates_skipped(run, gn):
        return False  # a NaN gradient applied would make the next loss NaN: these steps were not applied
    if not gn.finite[-1]:
        return True  # ends non-finite: the weights (or every step) are broken
    return n_bad / len(gn) > GRADNORM_FAILURE_SHARE


def updates_skipped(run: Run, gn: Series) -> bool:
    """Non-finite grad_norm logs whose updates never reached the weights: a loss is logged after them, every logged
    loss is finite and non-zero, the first loss after the first bad log is no higher than the loss ever was before it,
    and at most half the grad_norm logs are bad. An applied NaN update makes every later loss NaN; a scaler (fp16
    AMP) or a finite check skipped these steps instead (mmengine/xtuner log ``grad_norm: nan`` for them)."""
    bad = np.flatnonzero(~gn.finite)
    loss = points(run, "loss")
    if not bad.size or bad.size * 2 > len(gn) or len(loss) < 3:
        return False
    if not loss.finite.all() or bool((loss.values == 0.0).any()):
        return False
    first_bad = int(gn.steps[int(bad[0])])
    before, after = loss.values[loss.steps <= first_bad], loss.values[loss.steps > first_bad]
    return bool(len(before) and len(after) and after[0] <= before.max())


#: "keeps falling": the median of the last third of the loss logs is below this share of the first third's
IMPROVING_SHARE = 0.9
MIN_IMPROVING_POINTS = 6


def loss_improving(run: Run) -> bool:
    """Every logged loss finite and the loss clearly lower at the end than at the start (Megatron's "transient")."""
    loss = points(run, "loss")
    n = len(loss)
    if n < MIN_IMPROVING_POINTS or not loss.finite.all() or bool((loss.values == 0.0).any()):
        return False
    third = max(2, n // 3)
    first, last = float(np.median(loss.values[:third])), float(np.median(loss.values[-third:]))
    return first > 0 and last < IMPROVING_SHARE * first


#: the divergence bar shared by DIV001 and OPT001: a loss at DIVERGE_FACTOR x its best that never comes back, and
#: back above DIVERGE_BACK_TO_START x its first value (a climb from 0.1 to 0.25 far below the start is a data
#: shift, not a blow-up) unless it is DIVERGE_FAR_ABOVE x the best anyway; a best at or below DIVERGE_MIN_BEST is
#: already ~0 (RL surrogates, near-perfect fits) and ratios against it mean nothing
DIVERGE_FACTOR = 2.0
DIVERGE_BACK_TO_START = 0.8
DIVERGE_FAR_ABOVE = 5.0
DIVERGE_MIN_BEST = 0.05
#: a finite loss this many times the run's lowest is an explosion (DIV001 from one line on, OPT001 before a NaN)
EXPLODED_RATIO = 1e3


def divergence_floor(best: Any, first: float) -> Any:
    """The level a loss must stay at or above to have diverged from ``best`` (a number or an array of bests)."""
    return np.minimum(np.maximum(DIVERGE_FACTOR * best, DIVERGE_BACK_TO_START * first), DIVERGE_FAR_ABOVE * best)


def step_near(run: Run, ev: Event) -> int | None:
    """Best step for an event without one: the last scalar logged before its line, same file."""
    if ev.line is None or run.scalars.empty:
        return run.last_step
    got = _line_index(run).get(ev.source)
    if got is None:
        return None
    lines, step_max = got
    i = int(np.searchsorted(lines, int(ev.line), side="right")) - 1
    return int(step_max[i]) if i >= 0 else None


def _line_index(run: Run) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per source: its rows' lines sorted, and the largest step logged at or before each (built once per
    scalars frame: ``step_near`` is asked for every event without a step, by several detectors)."""
    import pandas as pd

    df = run.scalars
    cached = run.__dict__.get("_line_index")
    if cached is not None and cached[0] is df and cached[1] == len(df):
        return cached[2]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    has = df["line"].notna().to_numpy()
    if has.any():
        sub = df[has]
        codes, sources = pd.factorize(sub["source"], sort=False)
        lines = sub["line"].to_numpy(dtype="int64")
        steps = sub["step"].to_numpy(dtype="int64")
        order = np.lexsort((lines, codes))
        codes, lines, steps = codes[order], lines[order], steps[order]
        bounds = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [len(codes)]))
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            if codes[a] >= 0:
                out[str(sources[codes[a]])] = (lines[a:b], np.maximum.accumulate(steps[a:b]))
    run.__dict__["_line_index"] = (df, len(df), out)
    return out


def event_evidence(ev: Event, detail: str | None = None) -> Evidence:
    where_ = f"line {ev.line}" if ev.line is not None else (f"step {ev.step}" if ev.step is not None else ev.source)
    return Evidence(ev.source, where_, detail or ev.message.strip()[:300], ev.step)


# -- checkpoints ----------------------------------------------------------------------------

def checkpoints_sorted(run: Run) -> list[Checkpoint]:
    return sorted((c for c in run.checkpoints if c.step is not None), key=lambda c: c.step or 0)


def _analysis_rows(run: Run) -> list[dict[str, Any]]:
    """Per-checkpoint rows of ``run.checkpoint_analysis["checkpoints"]`` (ordered by step, final save last)."""
    rows = (run.checkpoint_analysis or {}).get("checkpoints")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _row_bad(r: dict[str, Any]) -> bool:
    return bool((num(r.get("nonfinite_tensors")) or 0) + (num(r.get("nonfinite_optimizer_tensors")) or 0))


def checkpoint_state(run: Run, onset_step: int | None) -> tuple[Checkpoint | None, Checkpoint | None]:
    """(last checkpoint with finite weights saved before the onset, first checkpoint with NaN/Inf).

    Reads ``run.checkpoint_analysis`` (the checkpoint stage's verdict, which also counts non-finite
    optimizer state); falls back to the tensor stats when the analysis is absent.
    """
    by_path = {c.path: c for c in run.checkpoints}
    rows = _analysis_rows(run)
    if rows:
        fb = (run.checkpoint_analysis or {}).get("first_bad")
        first_bad = by_path.get(fb.get("checkpoint")) if isinstance(fb, dict) else None
        last_clean = None
        for r in rows:
            if _row_bad(r):
                break
            step = r.get("step")
            if not r.get("tensors"):
                continue
            if onset_step is not None and (not isinstance(step, int) or step >= onset_step):
                continue  # saved at or after the onset (or at an unknown step): not a safe resume point
            last_clean = by_path.get(r.get("checkpoint"), last_clean)
        return last_clean, first_bad
    last_clean = first_bad = None
    for c in checkpoints_sorted(run):
        if not any(True for _ in c.tensors()):
            continue
        if c.nonfinite_tensors:
            if first_bad is None:
                first_bad = c
        elif first_bad is None and (onset_step is None or (c.step or 0) < onset_step):
            last_clean = c
    return last_clean, first_bad


def ck_label(path: Any) -> str:
    """A checkpoint's path as a reader understands it: the run root itself is "the run folder (final save)"."""
    return "the run folder (final save)" if str(path) in (".", "") else str(path)


def tensor_file(run: Run, ck_path: Any, tensor: str | None = None) -> str:
    """The file of a checkpoint holding ``tensor`` (else its first weights file), to cite as the artifact."""
    for c in run.checkpoints:
        if c.path == ck_path:
            for f in c.files:
                if tensor is None or any(t.name == tensor for t in f.tensors):
                    return f.path
    return str(ck_path)


def _step_txt(step: Any) -> str:
    return f"step {step}" if step is not None else "step not recorded"


def ck_step(run: Run, step: Any) -> int | None:
    """Step to place a checkpoint in the chain: its own, else the run's last (a final or overwritten save)."""
    return step if isinstance(step, int) else run.last_step


def checkpoint_evidence(run: Run, onset_step: int | None) -> tuple[list[Evidence], str | None]:
    """Evidence lines for the checkpoints around the onset (first bad, last clean), and a resume remedy."""
    last_clean, first_bad = checkpoint_state(run, onset_step)
    ev: list[Evidence] = []
    fb = (run.checkpoint_analysis or {}).get("first_bad")
    if isinstance(fb, dict) and first_bad is not None:
        tensors = [t for t in fb.get("tensors") or [] if isinstance(t, dict)]
        otensors = [t for t in fb.get("optimizer_tensors") or [] if isinstance(t, dict)]
        n_w, n_all = int(num(fb.get("n_tensors")) or 0), int(num(fb.get("n_weight_tensors")) or 0)
        n_o = int(num(fb.get("n_optimizer_tensors")) or 0)
        parts = []
        if n_w:
            parts.append(f"{n_w}/{n_all} weight tensors hold NaN/Inf")
        if n_o:
            parts.append(f"{n_o} optimizer-state tensors hold NaN/Inf")
        t = tensors[0] if tensors else (otensors[0] if otensors else {})
        name = str(t.get("name", "?"))
        bad_vals = sum(int(num(t.get(k)) or 0) for k in ("nan", "posinf", "neginf"))
        first_txt = f" (first in model order: {name}, {bad_vals}/{t.get('numel')} values non-finite)" if t else ""
        layers = [str(x) for x in fb.get("layers") or []][:4]
        layer_txt = f"; layers {', '.join(layers)}" + (" ..." if len(fb.get("layers") or []) > 4 else "") if layers else ""
        ev.append(Evidence(str(t.get("file") or first_bad.path), f"tensor {name}",
                           f"first checkpoint with non-finite values: {ck_label(first_bad.path)} ({_step_txt(first_bad.step)}): "
                           + " and ".join(parts or ["non-finite values"]) + first_txt + layer_txt, ck_step(run, first_bad.step)))
    elif first_bad is not None:
        bad = first_bad.nonfinite_tensors
        ev.append(Evidence(first_bad.path, f"tensor {bad[0].name if bad else '?'}",
                           f"first checkpoint with non-finite values: {first_bad.path}: {len(bad)}/"
                           f"{sum(1 for _ in first_bad.tensors())} tensors hold NaN/Inf", ck_step(run, first_bad.step)))
    if last_clean is not None:
        row = next((r for r in _analysis_rows(run) if r.get("checkpoint") == last_clean.path), None)
        n = int(num(row.get("tensors")) or 0) if row else sum(1 for _ in last_clean.tensors())
        ev.append(Evidence(last_clean.path, "checkpoint",
                           f"last checkpoint with finite weights: {ck_label(last_clean.path)} ({_step_txt(last_clean.step)}, "
                           f"all {n} weight tensors finite) - resume from here", ck_step(run, last_clean.step)))
        return ev, f"resume from {ck_label(last_clean.path)} ({_step_txt(last_clean.step)}), the last checkpoint with finite weights"
    if first_bad is not None:
        ev.append(Evidence(first_bad.path, "checkpoint", "no checkpoint with finite weights was saved before the failure: "
                           "restart from the base model", ck_step(run, first_bad.step)))
    return ev, None


# -- configuration --------------------------------------------------------------------------

def truthy(v: Any) -> bool | None:
    """True/False for config values like true, "True", 1, "yes"; None for "auto"/unknown."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1", "yes", "y", "on"):
            return True
        if s in ("false", "0", "no", "n", "off", "none", ""):
            return False
    return None


def config_evidence(run: Run, key: str, detail: str) -> Evidence:
    f = run.config.fact(key)
    if f is None:
        return Evidence("config", f"key {key}", detail, config=True)
    w = f.where or f"key {f.original_key or key}"
    if w.isdigit():
        w = f"line {w}"
    elif not w.startswith(("key ", "line ")):
        w = f"key {w}"
    return Evidence(f.source, w, detail, config=True)


def num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def version_tuple(v: Any) -> tuple[int, ...] | None:
    """"4.46.3" -> (4, 46, 3); "2.5.0+cu121" -> (2, 5, 0); None when unparsable."""
    if v is None:
        return None
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(v))
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None) + ((0,) if m.group(3) is None else ())


HALF_DTYPES = ("float16", "fp16", "half", "torch.float16", "f16")


@dataclass
class PrecisionSignal:
    evidence: Evidence
    pure_half: bool  # weights themselves are fp16 (not just AMP)
    strength: str  # "config" | "message" | "hint"


def fp16_signals(run: Run) -> list[PrecisionSignal]:
    """Everything saying the run computes in float16, strongest first."""
    out: list[PrecisionSignal] = []
    cfg = run.config
    half_dtype = _half_dtype_evidence(run)
    if half_dtype is not None:
        out.append(PrecisionSignal(half_dtype, True, "config"))
    if truthy(cfg.get("fp16")):
        out.append(PrecisionSignal(config_evidence(run, "fp16", "fp16 = true: mixed precision in float16 (max 65504)"), False, "config"))
    ds = cfg.get("deepspeed.fp16.enabled")
    if truthy(ds) or (isinstance(ds, str) and ds.lower() == "auto" and truthy(cfg.get("fp16")) is not False
                      and not truthy(cfg.get("bf16")) and run.events_of("overflow")):
        out.append(PrecisionSignal(config_evidence(run, "deepspeed.fp16.enabled", f"DeepSpeed fp16.enabled = {ds}"), False, "config"))
    for ev in run.events_of("unscale_fp16")[:1]:
        out.append(PrecisionSignal(event_evidence(ev, "\"Attempting to unscale FP16 gradients\": trainable parameters are stored in float16"), True, "message"))
    for ev in run.events_of("overflow")[:1]:
        out.append(PrecisionSignal(event_evidence(ev, "DeepSpeed/AMP loss-scale overflow messages: the run uses fp16 dynamic loss scaling"), False, "message"))
    scale = points(run, "loss_scale")
    dyn = scale.select(scale.finite & (scale.values > 1.0)) if len(scale) else scale
    if len(dyn):  # a dynamic loss scale above 1 exists only for float16 (bf16 and fp32 log a constant 1.0, or none)
        out.append(PrecisionSignal(dyn[0].evidence(f"loss scale {fmt(dyn[0].value)} at step {dyn[0].step}: dynamic loss "
                                                   "scaling, which only float16 mixed precision uses"), False, "message"))
    elif len(scale):
        # a scale printed under a name that says fp16 (InsightFace's "Fp16 Grad Scale: 0", a GradScaler's scale rounded
        # to an integer), or one a dynamic scaler has backed off below 1: float16 either way
        named = next((str(k) for k in run.series("loss_scale")["key"].unique() if "fp16" in str(k).lower()), None)
        low = scale.select(scale.finite & (scale.values > 0.0) & (scale.values < 1.0))
        if named is not None or len(low):
            p = scale[0] if named is not None else low[0]
            why = (f"{named} = {fmt(p.value)} at step {p.step}: a gradient scale printed under fp16 only" if named is not None
                   else f"loss scale {fmt(p.value)} at step {p.step}: a dynamic fp16 scaler backed off below 1")
            out.append(PrecisionSignal(p.evidence(why), False, "message"))
    skipped = _skipped_start(run)
    if skipped is not None:
        out.append(PrecisionSignal(skipped, False, "hint"))
    for ev in run.events_of("nan_stop"):
        if AMP_ENGINE_STOP.search(ev.message) and not _loss_dict_follows(run, ev):
            out.append(PrecisionSignal(event_evidence(ev, "\"Loss is nan, stopping training\" is the stop message of the DeiT/MAE/MAR-style "
                                                          "engine, which trains under torch.cuda.amp.autocast (float16) with a GradScaler by default"),
                                       False, "hint"))
            break
    return out


#: trainers that do not step the LR scheduler when the fp16 loss scaler skips an optimizer step (HF Trainer's
#: ``optimizer_step_was_skipped``; DeepSpeed's overflow skip), so a warmup from 0 stays at 0 while every step overflows
_SKIP_HOLDS_LR = HF_FRAMEWORKS | {"deepspeed"}
#: logs in a row at exactly lr 0 from the first: one is a warmup logged before its first step; more are skipped steps
SKIPPED_START_LOGS = 3


def _skipped_start(run: Run) -> Evidence | None:
    """The learning rate exactly 0 at the first ``SKIPPED_START_LOGS``+ logs, then above 0, in a trainer that holds
    the scheduler on a skipped step: the optimizer steps of that stretch were skipped, which only fp16 dynamic loss
    scaling does."""
    if not set(run.frameworks) & _SKIP_HOLDS_LR:
        return None
    lr = points(run, "learning_rate")
    if len(lr) <= SKIPPED_START_LOGS:
        return None
    v = lr.values
    nz = np.flatnonzero(v != 0.0)
    k = int(nz[0]) if nz.size else len(v)
    if k < SKIPPED_START_LOGS or k == len(v) or not (np.isfinite(v[k]) and v[k] > 0):
        return None
    last = lr[k - 1]
    return last.evidence(f"learning_rate exactly 0 at the first {k} logs (to step {last.step}), then {fmt(v[k])}: "
                         "the scheduler did not step, which HF and DeepSpeed do when the fp16 loss scaler skips a step")


def _is_half(v: Any) -> bool:
    return isinstance(v, str) and v.strip().lower() in HALF_DTYPES


def _half_dtype_evidence(run: Run) -> Evidence | None:
    """Evidence that the model's weights were float16, from ANY source of ``torch_dtype``.

    Sources may disagree: a base model's config.json says how it was pretrained (often bfloat16),
    while the config the trainer logged (TensorBoard ``model_config``, the saved config.json) says
    how it was loaded for training. One float16 reading is enough; the disagreement is the story
    (a bf16-pretrained model loaded as fp16) and is said in the detail.
    """
    facts = run.config.facts("torch_dtype")
    half = [f for f in facts if _is_half(f.value)]
    if not half:
        return None
    f = half[0]
    others = sorted({f"{o.value} in {o.source}" for o in facts if not _is_half(o.value) and o.value not in (None, "auto")})
    w = f.where or f"key {f.original_key or 'torch_dtype'}"
    w = f"line {w}" if w.isdigit() else (w if w.startswith(("key ", "line ")) else f"key {w}")
    detail = f"torch_dtype = {f.value}: the weights themselves are float16 (max 65504)"
    if others:
        detail += f"; {', '.join(others[:2])}: the model was pretrained in another dtype and loaded as float16"
    return Evidence(f.source, w, detail, config=True)


#: the DeiT / MAE / BEiT / MAR ``engine_*.py`` family: ``print("Loss is {}, stopping training")``;
#: those engines wrap the forward in ``torch.cuda.amp.autocast()`` (fp16) by default
AMP_ENGINE_STOP = re.compile(r"Loss is (nan|inf|-inf), stopping training", re.IGNORECASE)


def _loss_dict_follows(run: Run, ev: Event) -> bool:
    """The stop message followed by the loss dict (``print(loss_dict_reduced)``, read as loss terms on the next line):
    torchvision's detection reference engine and the DETR family, which train in float32 unless ``--amp`` is given;
    DeiT/MAE print the message alone."""
    df = run.scalars
    if ev.line is None or not len(df) or "line" not in df or "source" not in df:
        return False
    nxt = df[(df["source"] == ev.source) & (df["line"] == ev.line + 1)]
    return bool(nxt["metric"].map(lambda m: loss_like(str(m)) and m != "loss").any())


def bf16_or_fp32(run: Run) -> Evidence | None:
    """Evidence that the run is NOT fp16 (bf16 or explicit fp32), when the config says so."""
    cfg = run.config
    if truthy(cfg.get("bf16")) or truthy(cfg.get("deepspeed.bf16.enabled")):
        key = "bf16" if truthy(cfg.get("bf16")) else "deepspeed.bf16.enabled"
        return config_evidence(run, key, "bf16 = true: bfloat16 has fp32's range, fp16 overflow does not apply")
    return None


def first_of(items: Iterable[Any]) -> Any:
    for x in items:
        return x
    return None

"""The normalised picture of a run, and the findings made from it.

Everything downstream (detectors, diagnosis, renderers) reads only these types. Readers in
``autopsy.ingest`` fill a :class:`Run`; detectors in ``detectors/`` turn a Run into
:class:`Finding` objects; ``autopsy.diagnosis`` ranks them into a :class:`Diagnosis`.

Paths stored in the model are strings relative to the run root (``Run.root``) when the file
is inside it, so reports are stable across machines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pandas is imported lazily: `autopsy scan` never needs it (~1 s of start-up)
    import pandas as pd


Severity = Literal["critical", "error", "warning", "info"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2, "critical": 3}

ArtifactStatus = Literal["read", "partial", "unreadable", "ignored"]

#: Root-cause ids of the output contract. Documented in docs/root-causes.md.
#: Add an id when a real failure needs one; never rename one.
ROOT_CAUSES: dict[str, str] = {
    "healthy": "No failure: the run looks healthy.",
    "lr_too_high": "Learning rate too high: the updates overshoot, so the loss diverges (and often goes non-finite).",
    "fp16_overflow": "fp16 range overflow (max 65504): half-precision weights or activations overflowed.",
    "loss_scale_collapse": "fp16 dynamic loss scale collapsed to its minimum (persistent overflow).",
    "bf16_unsupported_hardware": "bf16 requested on hardware without bf16 support (pre-Ampere GPU).",
    "empty_response": "Empty responses: the prompt fills the length budget, leaving no response tokens.",
    "all_labels_masked": "Every target is masked or missing (labels all -100, no ground-truth box): nothing to learn from, loss 0 or NaN.",
    "sequence_parallel_labels": "Sequence parallelism leaves shards without supervised labels.",
    "padding_free_without_flash_attn": "Padding-free/packed batches without FlashAttention attend across samples.",
    "gradientless_params": "Trainable parameters receive no gradient; weights never move.",
    "lora_task_type_mismatch": "LoRA task_type does not match the model head (e.g. reward model not SEQ_CLS).",
    "nan_in_data": "Non-finite (or absurd) values come from the data, particular bad samples, not from the optimisation.",
    "vocab_mismatch": "Ids exceed what the model has: token ids beyond its vocabulary (tokenizer/model mismatch), position ids beyond its position embeddings (sequences longer than its maximum, not truncated), or class labels beyond its classifier's outputs.",
    "framework_bug": "A known bug of a framework version triggered by this configuration.",
    "out_of_memory": "The run died from running out of memory (the GPU's, or the host's RAM).",
    "zero3_empty_tensors": "ZeRO-3 partitioned parameters were saved without gathering: the checkpoint holds [0]-shaped tensors.",
    "kl_estimator_overflow": "The KL estimator (exp of a log-ratio) overflowed: NaN gradients reached the policy weights.",
    "completions_truncated": "Sampled completions hit the length cap: no final answer, flat rewards, nothing to learn (GRPO/PPO).",
    "zero_advantage_groups": "Every group of sampled completions got the same reward (GRPO/RLOO): the advantages are 0, so the loss and gradient are 0 and nothing is learned (a reward that never fires or never discriminates).",
    "lr_schedule_stalled": "The learning rate stayed near zero, so nothing trained: a schedule that kept it there (warmup longer than the run, scheduler never stepped, a decay run far past its floor), or an LR set to ~0 (a typo, a unit slip).",
    "data_exhausted": "The input pipeline ran out of batches before the planned steps, or held none (an empty dataset): training stopped early or never started, or an evaluation averaged over no batch at all (NaN at every evaluation).",
    "fp16_unsupported_hardware": "fp16 on a GPU whose half-precision kernels give NaN (GTX 16xx, Quadro T-series): train in fp32 there.",
    "ctc_output_longer_than_input": "CTC: a label sequence longer than the (subsampled) input frames has no alignment: the loss is inf or a huge negative number on those samples.",
    "degenerate_labels": "Every training target is the same class (a one-class dataset, masks all background): the task is trivial, accuracy is 100% from the start (the loss falling to ~0), nothing is learned.",
    "loss_shape_mismatch": "The loss compares predictions and targets of different shapes: broadcasting pairs every prediction with every target (or with nothing), so the loss is wrong and the model cannot learn the task, or the loss refuses rows that do not pair up, or labels in another form than it takes (integers for one-hot, classes in the wrong dimension), and the run dies.",
    "pretrained_weights_not_loaded": "The pretrained weights the run was meant to start from were never loaded (the checkpoint path not found, or a checkpoint made for another architecture): it fine-tunes a randomly initialised model, or stops at the load.",
    "crash": "The run died from an exception that names no known training failure.",
    "unknown": "Something is wrong, but the evidence does not single out a cause.",
}

#: A remedy holding this phrase applies only while no other finding names the cause (a symptom's list of usual
#: suspects): the diagnosis drops it from a finding that the verdict's cause explains.
CONDITIONAL_REMEDY = "if no other finding names the cause"

#: Columns of ``Run.scalars``; one row per (source, step, metric) point.
SCALAR_COLUMNS = ["step", "metric", "value", "source", "line", "key"]


def relpath(path: Path | str, root: Path | None) -> str:
    """Path relative to ``root`` when inside it, else as given (posix form).

    Only the parent is resolved: a symlink is named by its own name in the run (a broken link or
    an HF-cache blob link must not be reported under its target's name), and a symlink loop
    (``RuntimeError`` from ``resolve``) must not raise.
    """
    p = Path(path)
    if root is not None:
        try:
            full = p.parent.resolve() / p.name if p.name not in ("", ".", "..") else p.resolve()
            return full.relative_to(root.resolve()).as_posix() or p.name
        except (ValueError, OSError, RuntimeError):
            pass
    return p.as_posix()


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Artifact:
    """One file (or directory) the discovery step found."""

    path: str
    kind: str  # e.g. trainer_state, stdout_log, tfevents, config_json, safetensors, ...
    status: ArtifactStatus = "read"
    problem: str | None = None
    bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "status": self.status, "problem": self.problem}


@dataclass
class Event:
    """Something a log said: a traceback, an overflow line, a warning.

    ``kind`` is a stable id (see ``autopsy.ingest.events.EVENT_KINDS``); ``data`` holds parsed
    fields (e.g. ``{"attempted": 64.0, "new": 32.0}`` for a loss-scale overflow).
    """

    kind: str
    message: str
    source: str
    line: int | None = None
    step: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    count: int = 1  # identical repeats folded into one event
    rank: int | None = None  # distributed rank that printed it (``[rank3]:`` tag or ``rank3.log``), when known

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass
class ConfigFact:
    """One configuration value and where it came from."""

    key: str  # canonical key, e.g. "fp16", "learning_rate", "deepspeed.zero_stage"
    value: Any
    source: str  # artifact path
    where: str | None = None  # key path inside the artifact, or a line number
    original_key: str | None = None


class Config:
    """Configuration facts, keyed by canonical name; several sources may disagree."""

    def __init__(self) -> None:
        self._facts: dict[str, list[ConfigFact]] = {}

    def add(self, key: str, value: Any, source: str, where: str | None = None, original_key: str | None = None) -> None:
        facts = self._facts.setdefault(key, [])
        for f in facts:
            if f.source == source and f.value == value:
                return
        facts.append(ConfigFact(key, value, source, where, original_key))

    def get(self, key: str, default: Any = None) -> Any:
        facts = self._facts.get(key)
        return facts[0].value if facts else default

    def fact(self, key: str) -> ConfigFact | None:
        facts = self._facts.get(key)
        return facts[0] if facts else None

    def facts(self, key: str) -> list[ConfigFact]:
        return list(self._facts.get(key, []))

    def __contains__(self, key: str) -> bool:
        return key in self._facts

    def __iter__(self) -> Iterator[ConfigFact]:
        for facts in self._facts.values():
            yield from facts

    def keys(self) -> list[str]:
        return list(self._facts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, facts in sorted(self._facts.items()):
            f = facts[0]
            entry = {"value": _jsonable(f.value), "source": f.source, "where": f.where}
            if len(facts) > 1:
                entry["others"] = [{"value": _jsonable(o.value), "source": o.source, "where": o.where} for o in facts[1:]]
            out[key] = entry
        return out


@dataclass(slots=True)  # 100k-tensor MoE checkpoints: ~half the memory per tensor
class TensorStat:
    """Health of one tensor, computed from its raw bytes (never by running code)."""

    name: str
    dtype: str  # safetensors dtype string: F32, BF16, F8_E4M3, I64, ...
    shape: list[int]
    numel: int
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    max_abs: float | None = None  # over finite values; None when no finite value / not float
    zeros: int = 0
    digest: str | None = None  # hash of the raw bytes, for bitwise comparison across checkpoints

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf

    @property
    def zero_fraction(self) -> float:
        return self.zeros / self.numel if self.numel else 0.0

    @property
    def all_zero(self) -> bool:
        return self.numel > 0 and self.zeros == self.numel

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "dtype": self.dtype, "shape": self.shape, "numel": self.numel,
            "nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
            "max_abs": _jsonable(self.max_abs), "zero_fraction": self.zero_fraction, "all_zero": self.all_zero,
        }


@dataclass
class CheckpointFile:
    path: str
    format: str  # safetensors | torch_zip | torch_legacy | deepspeed_model | deepspeed_optim | ...
    bytes: int = 0
    seconds: float = 0.0
    tensors: list[TensorStat] = field(default_factory=list)
    problem: str | None = None


def save_order_key(step: int | None, path: str) -> tuple:
    """Sort key of a save: by step, those without one last; at one step a numbered checkpoint before the run
    folder's final save of the same weights."""
    return (step is None, step if step is not None else 0, path in (".", ""), path)


@dataclass
class Checkpoint:
    """One saved checkpoint (a directory like ``checkpoint-40`` or a single weights file)."""

    path: str
    step: int | None
    kind: str = "hf"  # hf | peft | deepspeed | lightning | minimind | torch | safetensors
    files: list[CheckpointFile] = field(default_factory=list)
    optimizer: dict[str, Any] | None = None  # summary: n_params, params_without_state, step counts, ...
    scaler: dict[str, Any] | None = None  # GradScaler state (scale, _growth_tracker, ...)
    deepspeed: dict[str, Any] | None = None  # skipped_steps, global_steps, loss scaler, zero stage
    adapter: dict[str, Any] | None = None  # adapter_config.json content (PEFT)
    extra: dict[str, Any] = field(default_factory=dict)

    def tensors(self) -> Iterator[TensorStat]:
        for f in self.files:
            yield from f.tensors

    @property
    def nonfinite_tensors(self) -> list[TensorStat]:
        return [t for t in self.tensors() if t.nonfinite]


@dataclass
class Run:
    """Everything read from one run directory or log file."""

    root: Path
    artifacts: list[Artifact] = field(default_factory=list)
    scalars: pd.DataFrame = field(default_factory=lambda: empty_scalars())
    events: list[Event] = field(default_factory=list)
    config: Config = field(default_factory=Config)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    frameworks: list[str] = field(default_factory=list)
    #: canonical metric -> source chosen when several artifacts held the same series
    series_sources: dict[str, str] = field(default_factory=dict)
    #: free-form cross-checkpoint analysis results (filled by autopsy.checkpoints)
    checkpoint_analysis: dict[str, Any] = field(default_factory=dict)
    #: flight records written by autopsy.record during training (autopsy/ingest/flight_record.py), one per file
    flight_records: list[dict[str, Any]] = field(default_factory=list)

    # -- helpers for detectors -------------------------------------------------------------
    def series(self, metric: str) -> pd.DataFrame:
        """Rows of one canonical metric, sorted by step (columns as SCALAR_COLUMNS)."""
        df = self.scalars
        if df.empty:
            return df
        arr = self.arrays(metric)
        if arr is None:
            return df.iloc[0:0]
        rows = arr.rows
        return df.iloc[rows.start:rows.stop] if isinstance(rows, range) else df.take(rows)

    def arrays(self, metric: str) -> SeriesArrays | None:
        """One metric's points as numpy arrays in ``series()`` order; None when the run has no such metric.

        Built once per ``scalars`` frame for every metric (one factorize + sort), then memoised: detectors
        and the report ask for the same series dozens of times, and a boolean mask over the whole frame
        per ask is what made long runs slow. Replacing ``scalars`` (a new frame) rebuilds the cache.
        """
        return self._series_arrays().get(metric)

    def _series_arrays(self) -> dict[str, SeriesArrays]:
        df = self.scalars
        cached = self.__dict__.get("_arrays_cache")
        if cached is not None and cached[0] is df and cached[1] == len(df):
            return cached[2]
        groups = group_series(df)
        self.__dict__["_arrays_cache"] = (df, len(df), groups)
        return groups

    def metrics(self) -> list[str]:
        if self.scalars.empty:
            return []
        return sorted(self._series_arrays())

    def has_metric(self, metric: str) -> bool:
        return not self.scalars.empty and metric in self._series_arrays()

    def events_of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def add_framework(self, name: str) -> None:
        if name not in self.frameworks:
            self.frameworks.append(name)

    def problem(self, path: str, kind: str, message: str, status: ArtifactStatus = "unreadable") -> None:
        """Record that an artifact could not be (fully) read; the analysis goes on."""
        for a in self.artifacts:
            if a.path == path:
                if SEVERITY_OF_STATUS[status] >= SEVERITY_OF_STATUS[a.status]:
                    a.status = status
                a.problem = message if not a.problem else f"{a.problem}; {message}"
                return
        self.artifacts.append(Artifact(path=path, kind=kind, status=status, problem=message))

    @property
    def problems(self) -> list[Artifact]:
        return [a for a in self.artifacts if a.status in ("partial", "unreadable")]

    @property
    def last_step(self) -> int | None:
        if self.scalars.empty:
            return None
        return int(self.scalars["step"].max())


@dataclass(frozen=True)
class SeriesArrays:
    """One metric's points as numpy arrays, in step order (file order within a step).

    ``rows`` are positions in ``Run.scalars`` (a ``range`` when the metric's rows are already
    contiguous and sorted, which is what ``RunBuilder.finish`` writes: then ``steps`` and ``values``
    are views of the frame's columns and the cache costs no memory).
    """

    steps: Any  # np.ndarray[int64]
    values: Any  # np.ndarray[float64]
    rows: Any  # np.ndarray[int64] | range


def group_series(df: pd.DataFrame) -> dict[str, SeriesArrays]:
    """Every metric of a scalars frame as :class:`SeriesArrays`, in O(n log n) once (O(n) when grouped)."""
    import numpy as np
    import pandas as pd

    if df.empty:
        return {}
    codes, uniques = pd.factorize(df["metric"], sort=False)
    steps = df["step"].to_numpy(dtype="int64")
    values = df["value"].to_numpy(dtype="float64", na_value=np.nan)
    n = len(codes)
    grouped = bool((codes[1:] >= codes[:-1]).all()) if n > 1 else True
    order = None if grouped else np.argsort(codes, kind="stable")
    sorted_codes = codes if order is None else codes[order]
    bounds = np.concatenate(([0], np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1, [n]))
    out: dict[str, SeriesArrays] = {}
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        code = int(sorted_codes[a])
        if code < 0:
            continue  # a missing metric name names no series
        rows: Any = range(a, b) if order is None else order[a:b]
        st = steps[a:b] if order is None else steps[rows]
        if b - a > 1 and bool((st[1:] < st[:-1]).any()):
            sub = np.argsort(st, kind="stable")
            rows = (np.arange(a, b) if order is None else rows)[sub]
            st = steps[rows]
        vals = values[rows.start:rows.stop] if isinstance(rows, range) else values[rows]
        out[str(uniques[code])] = SeriesArrays(st, vals, rows)
    return out


SEVERITY_OF_STATUS = {"read": 0, "ignored": 0, "partial": 1, "unreadable": 2}


def empty_scalars() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "step": pd.Series([], dtype="int64"),
            "metric": pd.Series([], dtype="object"),
            "value": pd.Series([], dtype="float64"),
            "source": pd.Series([], dtype="object"),
            "line": pd.Series([], dtype="Int64"),
            "key": pd.Series([], dtype="object"),
        }
    )


@dataclass
class Evidence:
    artifact: str
    where: str  # "line 123", "step 37", "tensor model.layers.0.q_proj.weight", "key fp16"
    detail: str
    step: int | None = None
    #: a setting of the run (a config key, or a config line printed in a log), not something that happened
    config: bool = False

    @property
    def is_config(self) -> bool:
        return self.config or self.where.startswith("key ")

    def to_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "where": self.where, "detail": self.detail}


@dataclass
class Finding:
    code: str  # detector code, e.g. NUM001
    name: str  # detector slug
    root_cause: str | None  # a ROOT_CAUSES id, or None for a symptom that names no cause
    severity: Severity
    confidence: float
    title: str
    message: str
    first_step: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    #: how the cause was established: "direct" (a message or config that names it) or "inferred"
    basis: Literal["direct", "inferred", "symptom"] = "inferred"
    #: what was observed, one id of autopsy.causes.SYMPTOMS (the diagnosis matches it against EXPLAINS)
    symptom: str | None = None
    #: set by the diagnosis: the root cause that explains this finding when it is not the cause itself
    explained_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code, "name": self.name, "root_cause": self.root_cause, "severity": self.severity,
            "confidence": round(float(self.confidence), 3), "title": self.title, "message": self.message,
            "first_step": self.first_step, "evidence": [e.to_json() for e in self.evidence],
            "remedies": list(self.remedies), "references": list(self.references), "basis": self.basis,
            "symptom": self.symptom, "explained_by": self.explained_by,
        }


@dataclass
class Verdict:
    status: Literal["failed", "healthy", "inconclusive"]
    root_cause: str | None
    confidence: float
    headline: str

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "root_cause": self.root_cause,
                "confidence": round(float(self.confidence), 3), "headline": self.headline}


@dataclass
class DetectorOutcome:
    """What happened to one detector in one analysis: ran, skipped (missing input) or failed."""

    code: str
    name: str
    status: Literal["ran", "skipped", "failed"]
    reason: str | None = None
    findings: int = 0


@dataclass
class ChainStep:
    step: int | None
    text: str
    artifact: str
    where: str
    config: bool = False  # a setting (shown as "config"); a stepless event is shown by its line


@dataclass
class TimelineEntry:
    """One anomaly on the run's time axis (config facts at step 0; an event whose step is unknown has
    none and is placed after the stepped ones, shown by where it is)."""

    step: int | None
    code: str
    symptom: str | None
    role: Literal["cause", "explained", "unexplained", "context"]
    text: str
    artifact: str
    where: str
    config: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "code": self.code, "symptom": self.symptom, "role": self.role, "text": self.text,
                "artifact": self.artifact, "where": self.where, "config": self.config}


@dataclass
class Diagnosis:
    verdict: Verdict
    findings: list[Finding]
    chain: list[ChainStep] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    detectors: list[DetectorOutcome] = field(default_factory=list)


def _jsonable(v: Any) -> Any:
    """JSON-safe value: non-finite floats become strings ("NaN", "Infinity", "-Infinity")."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and callable(v.item):  # numpy scalars
        try:
            return _jsonable(v.item())
        except Exception:  # noqa: BLE001
            pass
    return str(v)


jsonable = _jsonable


def iter_rows(df: pd.DataFrame) -> Iterable[tuple[int, float, str, Any]]:
    """(step, value, source, line) tuples of a series frame, fast."""
    return zip(df["step"].tolist(), df["value"].tolist(), df["source"].tolist(), df["line"].tolist())

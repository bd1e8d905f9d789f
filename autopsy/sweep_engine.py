"""``autopsy sweep``: many runs at once, locally in worker processes or on a Dask cluster.

Why this shape: a sweep is embarrassingly parallel, one run per task, so the work unit is one
function, :func:`analyze_one`, that takes a run path and returns a small JSON-able row. Locally it
runs in a process pool; with ``--cluster`` the very same function goes to a Dask cluster through
``Client.map`` and ``as_completed``: no scheduler of our own. The function never raises (a run
that cannot be read is a row with ``status="error"``) and a worker that dies costs only its run,
so one bad run never stops the sweep.

Assumption on a cluster: the run paths (and the reports folder) are on storage every worker can
read at the same path (NFS, Lustre, a shared bucket mount). Paths are sent absolute.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopsy.discover import classify

if TYPE_CHECKING:
    import pandas as pd

#: file kinds that make a directory a run of its own (configs alone do not: a sweep root has them too)
RUN_KINDS = frozenset({"tfevents", "trainer_state", "text_log", "jsonl", "swift_jsonl", "llamafactory_jsonl",
                       "lightning_csv", "raytune_result", "raytune_progress", "safetensors", "torch", "results_json"})
#: how deep a sweep folder may nest runs (sweep/group/run)
MAX_NEST = 3
#: config keys that describe the outcome or the environment, not a hyper-parameter of the sweep
NOT_HPARAMS_PREFIXES = ("results.", "version.", "gpu.", "hparam.")  # hparam.*: Tune params, in the row already
NOT_HPARAMS = frozenset({"global_step", "best_metric", "best_model_checkpoint", "last_model_checkpoint",
                         "training_args.class", "architectures", "max_steps", "step_origin"})
#: Ray Tune's per-trial files (ray/tune/result.py: EXPR_PARAM_FILE, EXPR_RESULT_FILE, EXPR_PROGRESS_FILE)
TUNE_PARAMS, TUNE_RESULT, TUNE_PROGRESS = "params.json", "result.json", "progress.csv"
#: the knobs people sweep, shown first (the rest of the varying config keys follow alphabetically)
HPARAM_ORDER = ("learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "optim", "max_grad_norm",
                "per_device_train_batch_size", "gradient_accumulation_steps", "torch_dtype", "fp16", "bf16",
                "max_length", "max_seq_length", "loss_type", "beta", "lora.r", "lora.alpha", "seed")
ROW_FIELDS = ("run", "name", "status", "root_cause", "onset", "confidence", "headline", "findings", "error",
              "report", "seconds")


@dataclass
class RunSpec:
    path: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)  # Ray Tune params.json, flattened


# -- finding the runs --------------------------------------------------------------------------

def _is_tune_trial(d: Path) -> bool:
    return (d / TUNE_PARAMS).is_file() and ((d / TUNE_RESULT).is_file() or (d / TUNE_PROGRESS).is_file())


#: suffixes whose files classify() tells apart by reading their head (a log, a metrics table, a JSON lines file)
SNIFFED_SUFFIXES = frozenset({".log", ".txt", ".out", ".err", ".stdout", ".stderr", ".jsonl", ".csv", ".tsv", ".md"})


def _sniff_cost(e: os.DirEntry) -> int:
    """0 for a folder, 1 for a file that classify() names without reading it (trainer_state.json, tfevents,
    weights), 2 for one it must read (train.log): reading the head of every log costs ~1 ms a run in expand()."""
    try:
        if e.is_dir():
            return 0
    except OSError:
        return 2
    suffix = os.path.splitext(e.name)[1].lower()
    return 2 if not suffix or suffix in SNIFFED_SUFFIXES else 1


def _looks_like_run(d: Path) -> bool:
    try:
        entries = list(os.scandir(d))
    except OSError:
        return True  # let the analysis say why it cannot be read
    for e in sorted(entries, key=_sniff_cost):  # any one entry decides: the cheap ones first
        try:
            if e.is_file() and classify(Path(e.path), 0) in RUN_KINDS:
                return True
            if e.is_dir() and (e.name.startswith("checkpoint-") or e.name == "runs"):
                return True
        except OSError:
            continue
    return _is_tune_trial(d)


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(d) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(d, dict):
        return out
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, default=str)
    return out


def tune_params(trial: Path) -> dict[str, Any]:
    """A Ray Tune trial's sampled hyper-parameters (params.json), flattened with '/' like Tune's progress.csv."""
    try:
        with open(trial / TUNE_PARAMS, encoding="utf-8") as fh:
            return _flatten(json.load(fh))
    except (OSError, ValueError):
        return {}


def expand(paths: Iterable[str]) -> tuple[list[RunSpec], list[str]]:
    """Run folders (or log files) named by ``paths``: globs expanded, sweep folders opened one level at a time
    (up to :data:`MAX_NEST`), Ray Tune experiment folders read as one run per trial. Returns (runs, problems)."""
    runs: list[RunSpec] = []
    problems: list[str] = []
    seen: set[str] = set()

    def add(p: Path, params: dict[str, Any] | None = None) -> None:
        key = str(p.resolve())
        if key not in seen:
            seen.add(key)
            runs.append(RunSpec(key, p.name or key, params or {}))

    def visit(p: Path, depth: int) -> None:
        if p.is_file():
            add(p)
            return
        subs = _subdirs(p)
        trials = [s for s in subs if _is_tune_trial(s)]
        if trials and not _is_tune_trial(p):
            for t in trials:
                add(t, tune_params(t))
            return
        if _is_tune_trial(p):
            add(p, tune_params(p))
            return
        if _looks_like_run(p) or depth >= MAX_NEST:
            add(p)
            return
        before = len(runs)
        for s in subs:
            visit(s, depth + 1)
        if len(runs) == before:
            problems.append(f"{p}: no training run found in it (no logs, metrics, trainer_state.json or checkpoints)")

    for raw in paths:
        matches = [Path(raw)] if Path(raw).exists() else [Path(m) for m in sorted(glob.glob(raw))]
        if not matches:
            problems.append(f"{raw}: no such file or directory" + (" (the glob matched nothing)" if glob.has_magic(raw) else ""))
        for m in matches:
            visit(m, 0)
    return runs, problems


# -- one run (the task: the same function locally and on a cluster) ---------------------------

def _config_values(analysis: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in analysis.run.config.keys():
        if key in NOT_HPARAMS or key.startswith(NOT_HPARAMS_PREFIXES):
            continue
        v = analysis.run.config.get(key)
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[key] = v
        else:
            out[key] = json.dumps(v, default=str)[:200]
    return out


def report_name(path: str) -> str:
    """A stable, unique, file-system-safe report name for a run path."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in Path(path).name)[:60] or "run"
    return f"{stem}-{hashlib.sha1(path.encode()).hexdigest()[:8]}.html"


def analyze_one(path: str, reports_dir: str | None = None, params: dict[str, Any] | None = None,
                baseline: str | None = None) -> dict[str, Any]:
    """Analyse one run and return its sweep row. Never raises: a failure is a row with status ``error``."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"run": path, "name": Path(path).name, "status": "error", "root_cause": None, "onset": None,
                           "confidence": None, "headline": "", "findings": [], "error": None, "report": None,
                           "config": {}, "params": dict(params or {})}
    try:
        from autopsy.api import analyze
        from autopsy.errors import UserError
        from autopsy.render import view

        try:
            a = analyze(path, baseline=baseline, command=f"autopsy sweep {path}")
        except UserError as exc:
            row["error"] = str(exc)
            return row
        report = a.to_dict()
        v = a.verdict
        row.update(status=v.status, root_cause=v.root_cause, confidence=round(float(v.confidence), 3),
                   headline=v.headline, onset=view.onset_step(report),
                   findings=[f.code for f in a.findings if f.severity in ("critical", "error")],
                   config=_config_values(a))
        if reports_dir:
            from autopsy.render import html

            out = Path(reports_dir) / report_name(path)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
            tmp.write_text(html.render(report), encoding="utf-8")
            os.replace(tmp, out)
            row["report"] = str(out)
    except Exception as exc:  # noqa: BLE001 - one run's failure is that run's row, never the sweep's end
        row["status"] = "error"
        row["error"] = f"internal error: {type(exc).__name__}: {exc}"[:500]
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 4)
    return row


def _error_row(spec: RunSpec, message: str) -> dict[str, Any]:
    return {"run": spec.path, "name": spec.name, "status": "error", "root_cause": None, "onset": None,
            "confidence": None, "headline": "", "findings": [], "error": message, "report": None, "config": {},
            "params": dict(spec.params), "seconds": None}


# -- executing ---------------------------------------------------------------------------------

Progress = Callable[[dict[str, Any]], None]


def _task(path: str, reports_dir: str | None, params: dict[str, Any], marks: str) -> dict[str, Any]:
    """Worker side of :func:`run_local`: note which run this process is on (a file named by its pid), so that
    when a worker dies the parent knows which runs were in flight; then the same ``analyze_one``."""
    mark = os.path.join(marks, str(os.getpid()))
    with open(mark, "w", encoding="utf-8") as fh:
        fh.write(path)
    row = analyze_one(path, reports_dir, params)
    with open(mark, "w", encoding="utf-8") as fh:
        fh.write("")
    return row


def _in_flight(marks: str) -> set[str]:
    out = set()
    for name in os.listdir(marks):
        try:
            with open(os.path.join(marks, name), encoding="utf-8") as fh:
                path = fh.read()
        except OSError:
            continue
        if path:
            out.add(path)
    return out


def warm() -> None:
    """Import and build once, in the parent before it forks, what every run's analysis needs: the pipeline,
    the readers, the detectors, the known-issues base (30 YAML files parsed) and the compiled report template.
    Forked workers then start with all of it in shared pages instead of each building its own copy on its
    first runs (work that 2 workers would do twice and 1 worker once)."""
    from autopsy import api  # noqa: F401 - analyze_one's imports
    from autopsy.ingest import readers
    from autopsy.known_issues.schema import load_entries
    from autopsy.render import html, view  # noqa: F401

    readers()
    import detectors  # noqa: F401

    load_entries()
    html.environment().get_template(html.TEMPLATE)


def run_local(specs: list[RunSpec], workers: int, reports_dir: str | None, on_row: Progress) -> list[dict[str, Any]]:
    """Worker processes (fork: they inherit the imported pipeline), ``concurrent.futures`` style.

    A worker that dies (a native crash, the OOM killer) breaks the pool: the runs that were in flight become
    suspects and are retried each in a pool of its own, so only the run that kills its worker again gets an
    error row; the runs not yet started go on in a fresh pool, untouched.
    """
    import gc
    import multiprocessing as mp
    import tempfile

    warm()
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    rows: list[dict[str, Any]] = []

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        on_row(row)

    pending = list(specs)
    # what warm() built goes to GC's permanent generation: the workers' collections never walk it, so they do
    # not write to (and copy) the pages they share with the parent; undone after the sweep
    gc.freeze()
    try:
        with tempfile.TemporaryDirectory(prefix="autopsy-sweep-") as marks:
            while pending:
                suspects: list[RunSpec] = []
                unfinished: list[RunSpec] = []
                with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=ctx) as pool:
                    futs = {pool.submit(_task, s.path, reports_dir, s.params, marks): s for s in pending}
                    for fut in as_completed(futs):
                        spec = futs[fut]
                        try:
                            done(fut.result())
                        except BrokenProcessPool:
                            unfinished.append(spec)
                        except Exception as exc:  # noqa: BLE001
                            done(_error_row(spec, f"worker error: {type(exc).__name__}: {exc}"[:500]))
                if unfinished:
                    flying = _in_flight(marks)
                    suspects = [s for s in unfinished if s.path in flying]
                    pending = [s for s in unfinished if s.path not in flying]
                    for name in os.listdir(marks):
                        os.unlink(os.path.join(marks, name))
                    if not suspects:  # should not happen; never loop forever
                        suspects, pending = pending, []
                else:
                    pending = []
                for spec in suspects:  # each alone: a second death is the run's own doing
                    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                        try:
                            done(pool.submit(_task, spec.path, reports_dir, spec.params, marks).result())
                        except BrokenProcessPool:
                            done(_error_row(spec, "the worker process died while analysing this run (twice: once "
                                                  "in the pool, once alone); it is the run's own doing"))
                        except Exception as exc:  # noqa: BLE001
                            done(_error_row(spec, f"worker error: {type(exc).__name__}: {exc}"[:500]))
    finally:
        gc.unfreeze()
    return rows


def run_dask(specs: list[RunSpec], cluster: Any, reports_dir: str | None, on_row: Progress) -> list[dict[str, Any]]:
    """The same :func:`analyze_one` on a Dask cluster: ``Client.map`` + ``as_completed``. ``cluster`` is a
    scheduler address or an existing ``distributed.Client``."""
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError as exc:
        from autopsy.errors import UserError

        raise UserError(f"--cluster needs Dask distributed ({exc})",
                        "install the extra: pip install 'autopsy-ml[cluster]'") from None
    own = not isinstance(cluster, Client)
    client = Client(cluster, timeout="30s") if own else cluster
    rows: list[dict[str, Any]] = []
    try:
        futs = client.map(analyze_one, [s.path for s in specs], [reports_dir] * len(specs), [s.params for s in specs],
                          pure=False, key=[f"autopsy-{i}-{report_name(s.path)}" for i, s in enumerate(specs)])
        by_key = {f.key: s for f, s in zip(futs, specs)}
        for fut in dask_completed(futs):
            spec = by_key[fut.key]
            try:
                row = fut.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, lost connection: that run's row
                row = _error_row(spec, f"cluster task failed: {type(exc).__name__}: {exc}"[:500])
            rows.append(row)
            on_row(row)
            fut.release()
    finally:
        if own:
            client.close()
    return rows


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    workers: str = ""

    def varying(self) -> list[str]:
        """Hyper-parameter columns whose value is not the same in every run (Tune params first, then config)."""
        keys: dict[str, set[str]] = {}
        for r in self.rows:
            if r["status"] == "error":
                continue
            for k, v in list(r.get("params", {}).items()) + list(r.get("config", {}).items()):
                keys.setdefault(k, set()).add(json.dumps(v, default=str, sort_keys=True))
        out = [k for k, vals in keys.items() if len(vals) > 1]  # a key only some runs have is not "varying"
        tune = [k for k in out if any(k in r.get("params", {}) for r in self.rows)]
        rank = {k: i for i, k in enumerate(HPARAM_ORDER)}
        return tune + sorted((k for k in out if k not in tune), key=lambda k: (rank.get(k, len(rank)), k))

    def table(self) -> list[dict[str, Any]]:
        """Rows for output: fixed fields, then ``hp.<key>`` for each varying hyper-parameter; sorted by cause."""
        hp = self.varying()
        out = []
        for r in sorted(self.rows, key=_order):
            row = {k: r.get(k) for k in ROW_FIELDS}
            row["findings"] = " ".join(r.get("findings") or [])
            for k in hp:
                row[f"hp.{k}"] = r.get("params", {}).get(k, r.get("config", {}).get(k))
            out.append(row)
        return out

    def groups(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Rows grouped by cause: failures by root cause (largest group first), then inconclusive, healthy, errors."""
        by: dict[str, list[dict[str, Any]]] = {}
        for r in self.table():
            by.setdefault(_group_name(r), []).append(r)
        return sorted(by.items(), key=lambda kv: (_group_rank(kv[0]), -len(kv[1]), kv[0]))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.table(), columns=list(ROW_FIELDS) + [f"hp.{k}" for k in self.varying()])

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out


def _group_name(r: dict[str, Any]) -> str:
    if r["status"] == "failed":
        return str(r.get("root_cause") or "unknown")
    return str(r["status"])


def _group_rank(name: str) -> int:
    return {"inconclusive": 1, "healthy": 2, "error": 3}.get(name, 0)


def _order(r: dict[str, Any]) -> tuple:
    return (_group_rank(_group_name(r)), _group_name(r), r.get("name") or "", r.get("run") or "")


def run_sweep(paths: list[str], workers: int = 0, cluster: Any = None, reports_dir: Path | None = None,
              on_row: Progress | None = None, on_start: Callable[[int], None] | None = None) -> SweepResult:
    """Find the runs, analyse each (locally or on ``cluster``), collect the rows. ``workers`` 0 = one per core."""
    from autopsy.errors import UserError

    t0 = time.perf_counter()
    specs, problems = expand(paths)
    if not specs:
        raise UserError("; ".join(problems) or "no runs to analyse", "give run folders, a folder of runs, a glob or a "
                        "Ray Tune experiment folder")
    if on_start is not None:
        on_start(len(specs))
    cb = on_row or (lambda row: None)
    rd = str(reports_dir.resolve()) if reports_dir is not None else None
    if cluster is not None:
        rows = run_dask(specs, cluster, rd, cb)
        how = f"dask {cluster if isinstance(cluster, str) else 'client'}"
    else:
        n = workers if workers > 0 else (os.cpu_count() or 1)
        n = max(1, min(n, len(specs)))
        rows = run_local(specs, n, rd, cb)
        how = f"{n} local worker process(es)"
    return SweepResult(rows, problems, time.perf_counter() - t0, how)

"""PATH -> Run -> findings -> Diagnosis. Every stage is fault-isolated."""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from autopsy.discover import Discovery, discover
from autopsy.errors import UserError, debug_enabled
from autopsy.ingest.base import RunBuilder
from autopsy.model import DetectorOutcome, Diagnosis, Finding, Run

#: kinds read by the checkpoint stage, not by a reader module
CHECKPOINT_KINDS = {"safetensors", "torch"}


@dataclass
class Analysis:
    run: Run
    diagnosis: Diagnosis
    discovery: Discovery | None = None
    timings: dict[str, float] = field(default_factory=dict)


def read_run(path: Path, debug: bool | None = None, with_checkpoints: bool = True) -> tuple[Run, Discovery]:
    debug = debug_enabled() if debug is None else debug
    from autopsy._memory import tune_allocator

    tune_allocator()
    if not path.exists():
        raise UserError(f"{path}: no such file or directory",
                        "give the run's output directory (the one with checkpoint-*/ or trainer_state.json) or a log file")
    root = path if path.is_dir() else path.parent
    builder = RunBuilder(path if path.is_dir() else path)
    builder.root = root
    builder.run.root = root
    disc = discover(path)
    from autopsy.ingest import readers

    broken: dict[str, str] = {}
    # a run of checkpoints only needs no reader: importing them all (their regexes compiled) is ~0.35 s
    table = readers(broken) if any(f.kind not in CHECKPOINT_KINDS and f.kind != "ignored" for f in disc.files) else {}
    for found in disc.files:
        art = builder.artifact(found.path, found.kind, size=found.size)
        if found.kind == "ignored":
            art.status = "ignored"
            continue
        reader = table.get(found.kind)
        if reader is None:
            if broken and found.kind not in CHECKPOINT_KINDS:
                why = "; ".join(f"{m}: {r}" for m, r in broken.items())
                builder.problem(found.path, found.kind, f"not read: the reader failed to load ({why}); "
                                "report this as an autopsy bug, with AUTOPSY_DEBUG=1 output")
            continue  # checkpoint files: read by the checkpoint stage below
        if not os.access(found.path, os.R_OK):
            builder.problem(found.path, found.kind, "permission denied: the file is not readable; fix its permissions (chmod +r) to include it")
            continue
        try:
            reader(found, builder)
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            if debug:
                raise
            builder.problem(found.path, found.kind, f"reader failed: {type(exc).__name__}: {exc}"[:500])
    for p, reason in disc.skipped:
        builder.artifact(p, "skipped", status="ignored", problem=reason)
    if with_checkpoints:
        try:
            from autopsy.checkpoints import collect

            collect(builder, disc)
        except ImportError:
            pass
        except Exception as exc:  # noqa: BLE001
            if debug:
                raise
            builder.problem(builder.rel(root), "checkpoints", f"checkpoint analysis failed: {type(exc).__name__}: {exc}"[:500], "partial")
    from autopsy.ingest.advice import add_advice

    add_advice(builder.run.artifacts)  # every problem message says what to do
    return builder.finish(), disc


def run_detectors(run: Run, debug: bool | None = None) -> tuple[list[Finding], list[DetectorOutcome]]:
    debug = debug_enabled() if debug is None else debug
    from detectors import ALL
    from detectors.base import missing_inputs

    findings: list[Finding] = []
    outcomes: list[DetectorOutcome] = []
    for module in ALL:
        missing = missing_inputs(module, run)
        if missing:
            outcomes.append(DetectorOutcome(module.CODE, module.SLUG, "skipped", f"no {', '.join(missing)} in the artifacts read"))
            continue
        try:
            got = list(module.detect(run))
        except Exception as exc:  # noqa: BLE001
            if debug:
                raise
            tb = traceback.extract_tb(exc.__traceback__)
            at = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
            outcomes.append(DetectorOutcome(module.CODE, module.SLUG, "failed", f"{type(exc).__name__}: {exc}{at}"[:500]))
            continue
        findings.extend(got)
        outcomes.append(DetectorOutcome(module.CODE, module.SLUG, "ran", None, len(got)))
    return findings, outcomes


def analyze(path: Path, debug: bool | None = None) -> Analysis:
    t0 = time.perf_counter()
    run, disc = read_run(path, debug=debug)
    t1 = time.perf_counter()
    usable = [a for a in run.artifacts if a.status in ("read", "partial") and a.kind not in ("ignored", "skipped")]
    if not usable and not run.checkpoints:
        unreadable = [a for a in run.artifacts if a.status == "unreadable"]
        if unreadable:
            a = unreadable[0]
            raise UserError(f"{a.path}: {a.problem}", "nothing else in the path could be read")
        raise UserError(f"{path}: no training artifacts found (no logs, trainer_state.json, TensorBoard events, configs or checkpoints)",
                        "point autopsy at the run's output directory or at a saved stdout log")
    findings, outcomes = run_detectors(run, debug=debug)
    t2 = time.perf_counter()
    from autopsy.diagnosis import diagnose

    diagnosis = diagnose(findings, outcomes, run)
    return Analysis(run, diagnosis, disc, {"read": t1 - t0, "detect": t2 - t1})

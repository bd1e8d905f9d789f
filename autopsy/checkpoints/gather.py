"""Feeding the Run: scan every checkpoint file of a run, summarise each checkpoint, analyse across them.

The schema of what this produces is in the package docstring (autopsy/checkpoints/__init__.py).
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from autopsy.checkpoints import scan_file
from autopsy.checkpoints.analysis import analyze, save_order
from autopsy.checkpoints.layout import Group, group_files, role_of
from autopsy.checkpoints.scanfile import FileScan, auto_workers
from autopsy.checkpoints.summaries import (
    deepspeed_model_summary,
    deepspeed_optim_summary,
    find_optimizers,
    map_param_names,
    optimizer_summary,
    resume_summary,
    scaler_summary,
    scheduler_summary,
)
from autopsy.discover import Found
from autopsy.model import Checkpoint, CheckpointFile

#: small JSON side files (trainer_state.json, adapter_config.json) larger than this are not re-read
MAX_SIDE_JSON = 50 * 1024 * 1024


def collect(builder: Any, discovery: Any) -> None:
    groups = group_files(discovery.files)
    todo = [f for g in groups for f in g.files]
    # digests only serve the comparison of consecutive checkpoints (analysis "unchanged"): with a single
    # checkpoint there is nothing to compare, and the digest is a pass over every byte (and a string per
    # tensor: ~0.3 s of a 100k-tensor file)
    digest = len(groups) > 1
    rr = sys.modules.get("autopsy.checkpoints.remote_run")
    if len(todo) <= 1 or (rr is not None and rr.PLACEHOLDERS):  # one file, or remote ones (each read by
        # parallel range requests already; one at a time keeps the memory to one reader's blocks): no thread
        scans = {f.path: _scan(f, digest) for f in todo}
    else:
        with ThreadPoolExecutor(max_workers=auto_workers()) as pool:
            scans = dict(zip((f.path for f in todo), pool.map(lambda f: _scan(f, digest), todo)))
    checkpoints = []
    for g in groups:
        ck = build_checkpoint(g, [scans[f.path] for f in g.files], builder.rel)
        for f in g.files:
            _register(builder, f, scans[f.path])
        _check_index(builder, g, scans)
        checkpoints.append(ck)
    checkpoints.sort(key=save_order)
    builder.run.checkpoints = checkpoints
    builder.run.checkpoint_analysis = analyze(checkpoints)


def _scan(f: Found, digest: bool = True) -> FileScan:
    """A local file, or (``autopsy run URL``) the remote safetensors object a placeholder stands for."""
    rr = sys.modules.get("autopsy.checkpoints.remote_run")  # loaded only by a remote run
    remote = rr.PLACEHOLDERS.get(str(f.path)) if rr is not None else None
    if remote is None:
        return scan_file(f.path, f.kind, digest=digest)
    from autopsy.checkpoints.remote import scan_remote_file

    scan = scan_remote_file(remote[0], digest=digest, size=remote[1], source=remote[2])
    if scan.problems:  # the report shows the placeholder's relative path: the URL goes into the message
        scan.problems = [(st, f"{remote[0]}: {m}") for st, m in scan.problems]
    scan.path = f.path
    return scan


def _register(builder: Any, found: Found, scan: FileScan) -> None:
    worst = scan.status
    msg = "; ".join(m for _, m in scan.problems) or None
    builder.artifact(found.path, found.kind, status=worst, problem=msg, size=found.size or scan.bytes)
    if worst == "read" and msg:
        for a in builder.run.artifacts:
            if a.path == builder.rel(found.path) and not a.problem:
                a.problem = msg


def _check_index(builder: Any, g: Group, scans: dict[Path, FileScan]) -> None:
    for f in g.files:
        s = scans[f.path]
        wm = s.metadata.get("weight_map") if s.format == "index" else None
        if not wm:
            continue
        present = {x.path.name: scans[x.path] for x in g.files}
        missing = {v for v in wm.values() if v not in present}  # reported by the index reader (config_readers)
        names = {t.name for sc in present.values() for t in sc.tensors}
        absent = [k for k, v in wm.items() if v not in missing and k not in names]
        if absent:
            builder.problem(f.path, f.kind, f"{len(absent)} tensors in the index are not in their shard "
                            f"(e.g. {absent[0]!r})", "partial")


def _side_json(path: Path) -> Any:
    try:
        if path.is_file() and path.stat().st_size <= MAX_SIDE_JSON:
            return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):  # RecursionError: 100,000-deep nesting
        return None
    return None


def build_checkpoint(g: Group, scans: list[FileScan], rel: Any = str) -> Checkpoint:
    """One model.Checkpoint from a group's file scans, with optimizer/scaler/DeepSpeed summaries."""
    ck = Checkpoint(path=rel(g.path), step=g.step, kind=g.kind)
    weights_ordered: list = []
    ordered = True
    # the weights in file order are only needed to name an optimizer's parameters: 100k-tensor
    # checkpoints without an optimizer state skip the copy
    has_optimizer = any(s.obj is not None and role_of(s.path.name) in ("optimizer", "resume") for s in scans)
    for scan in scans:
        ck.files.append(CheckpointFile(path=rel(scan.path), format=scan.format, bytes=scan.bytes,
                                       seconds=round(scan.seconds, 6), tensors=scan.tensors,
                                       problem="; ".join(m for _, m in scan.problems) or None))
        role = role_of(scan.path.name)
        if role in ("weights", "deepspeed_model", "resume"):
            if has_optimizer:
                weights_ordered.extend(t for t in scan.tensors if not t.name.startswith(("optimizer", "loops", "callbacks")))
            ordered = ordered and scan.format != "safetensors"
    for scan in scans:
        role = role_of(scan.path.name)
        obj = scan.obj
        if role in ("optimizer", "resume", "deepspeed_optim") and obj is not None:
            opts = find_optimizers(obj)
            if opts:
                stats = {t.name: t for t in scan.tensors}
                prefix, opt = opts[0]
                mapping = map_param_names(opt, weights_ordered, ordered and bool(weights_ordered)) if role != "deepspeed_optim" else None
                summary = optimizer_summary(prefix, opt, stats, mapping)
                if mapping:
                    summary["param_names"] = list(mapping.values())
                if len(opts) > 1:
                    summary["n_optimizers"] = len(opts)
                ck.optimizer = summary
        if obj is not None and scaler_summary(obj):  # by content: scaler.pt under any name
            ck.scaler = scaler_summary(obj)
        if role == "resume" and isinstance(obj, dict):
            ck.extra["resume"] = resume_summary(obj)
            sc = obj.get("scaler")
            if isinstance(sc, dict):
                ck.scaler = scaler_summary(sc)
            r = ck.extra["resume"] or {}
            if ck.step is None and g.kind == "lightning" and isinstance(r.get("global_step"), int):
                ck.step = r["global_step"]
            if g.kind == "lightning" and isinstance(r.get("global_step"), int):
                ck.extra["trainer_global_step"] = r["global_step"]
        if obj is not None and scheduler_summary(obj):
            ck.extra["scheduler"] = scheduler_summary(obj)
        if role == "deepspeed_model" and obj is not None:
            ds = deepspeed_model_summary(obj, scan.tensors)
            if ds:
                frozen = obj.get("frozen_param_shapes") if isinstance(obj, dict) else None
                ds["frozen_params"] = sorted(str(k) for k in frozen) if isinstance(frozen, dict) else []
                ck.deepspeed = {**(ck.deepspeed or {}), **ds}
                if ck.step is None and isinstance(ds.get("global_steps"), int):
                    ck.step = ds["global_steps"]
        if role == "deepspeed_optim" and obj is not None:
            dso = deepspeed_optim_summary(obj)
            if dso:
                ck.deepspeed = {**(ck.deepspeed or {}), "optimizer": dso}
    if g.path.is_dir():
        state = _side_json(g.path / "trainer_state.json")
        if isinstance(state, dict) and isinstance(state.get("global_step"), int):
            ck.extra["trainer_global_step"] = state["global_step"]
            if ck.step is None:  # a final save (save_model + save_state): its step is the state's global_step
                ck.step = state["global_step"]
        adapter = _side_json(g.path / "adapter_config.json")
        if isinstance(adapter, dict):
            ck.adapter = adapter
    return ck

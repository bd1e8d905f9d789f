"""``autopsy scan`` and ``autopsy diff`` (wired in autopsy/cli.py).

scan exit codes: 0 all tensors finite; 1 a non-finite tensor, or a pickle that references code;
2 a missing path or an unreadable file (2 wins: the check could not be completed).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from autopsy.checkpoints.layout import CHECKPOINT_KINDS
from autopsy.checkpoints.scanfile import FileScan

#: show a progress bar (on a TTY) when the scan covers at least this many bytes
PROGRESS_MIN_BYTES = 1 << 30


def _err(msg: str) -> None:
    sys.stderr.write(f"autopsy: error: {msg}\n")


def _files_of(paths: Iterable[Path]) -> tuple[list[tuple[Path, str | None]], str | None]:
    from autopsy.discover import discover

    out: list[tuple[Path, str | None]] = []
    for p in paths:
        if not p.exists():
            return out, f"{p}: no such file or directory"
        if p.is_file():
            out.append((p, None))
            continue
        found = [(f.path, f.kind) for f in discover(p).files if f.kind in CHECKPOINT_KINDS and f.kind != "weights_index"]
        if not found:
            return out, f"{p}: no checkpoint files (*.safetensors, *.bin, *.pt, *.pth, *.ckpt) found"
        out.extend(found)
    return out, None


def _scan_all(files: list[tuple[Path, str | None]], workers: int, digest: bool = False) -> list[FileScan]:
    """Scan every file, ``workers`` at a time, in input order.

    More than one worker means forked worker *processes*, not threads: mapping and faulting in
    page-cache pages serialises threads of one process on the kernel's per-process memory-map lock,
    so two threads were slower than one here while two processes took ~1.8x less time (see
    benchmarks/bench_scan.py). A big safetensors file is split into byte ranges scanned by several
    workers (see :func:`_parts`). A worker returns its result as JSON text (built from our own
    dataclasses, never from checkpoint bytes); a worker that dies (e.g. SIGBUS because a file was
    truncated while it was mapped) costs only its files, reported unreadable.
    """
    sizes = []
    for p, _ in files:
        try:
            sizes.append(p.stat().st_size)
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    show = sys.stderr.isatty() and total >= PROGRESS_MIN_BYTES
    tasks = [(i, part) for i, ((p, k), size) in enumerate(zip(files, sizes))
             for part in _parts(p, k, size, workers, len(files))]
    with _pool(min(workers, len(tasks))) as pool:
        futures: dict[int, list[Future]] = {}
        for i, part in tasks:
            p, k = files[i]
            fn = _scan_one if isinstance(pool, ProcessPoolExecutor) else _scan_here
            futures.setdefault(i, []).append(pool.submit(fn, str(p), k, digest, part))
        results = (_merged(files[i][0], futures.get(i, [])) for i in range(len(files)))
        if not show:
            return list(results)
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                      console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task("scanning", total=total)
            out = []
            for r in results:
                prog.advance(task, r.bytes)
                out.append(r)
            return out


#: a safetensors file is split across workers only into parts of at least this many bytes
MIN_PART_BYTES = 512 * 1024 * 1024


def _parts(path: Path, kind: str | None, size: int, workers: int, n_files: int) -> list[tuple[int, int]]:
    """How many workers share one file: only safetensors, only when files are fewer than workers."""
    from autopsy.checkpoints import file_kind

    if workers <= 1 or n_files >= workers or file_kind(path, kind) != "safetensors":
        return [(0, 1)]
    k = max(1, min(workers, size // MIN_PART_BYTES))
    return [(i, k) for i in range(k)]


def _merged(path: Path, futs: list[Future]) -> FileScan:
    from autopsy.checkpoints.safetensors_file import merge_parts

    return merge_parts([_result(path, f) for f in futs])


def _pool(workers: int) -> Executor:
    if workers > 1:
        import multiprocessing

        if "fork" in multiprocessing.get_all_start_methods():
            import autopsy.checkpoints.safetensors_file  # noqa: F401  (loaded once, before the fork)

            return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    return ThreadPoolExecutor(max_workers=1)


def _scan_one(path: str, kind: str | None, digest: bool, part: tuple[int, int]) -> str:
    """One file (or part of one) scanned, as JSON text: what a worker process sends back."""
    from autopsy.checkpoints import scan_file

    return _to_wire(scan_file(Path(path), kind, digest, part))


def _scan_here(path: str, kind: str | None, digest: bool, part: tuple[int, int]) -> FileScan:
    """In this process (one worker): the FileScan itself, no JSON round trip."""
    from autopsy.checkpoints import scan_file

    return scan_file(Path(path), kind, digest, part)


def _result(path: Path, fut: Future) -> FileScan:
    try:
        got = fut.result()
        if isinstance(got, FileScan):
            return got
    except BrokenExecutor as exc:
        scan = FileScan(path, "unknown")
        scan.problem(f"not scanned: a worker process died during the scan ({type(exc).__name__}), e.g. a file was "
                     "truncated while it was read; rerun with --workers 1 to see which file fails", "unreadable")
        return scan
    return _from_wire(got)


def _to_wire(scan: FileScan) -> str:
    """What ``scan`` reports, as JSON (the inert pickle tree and id-keyed names stay behind); a tensor is
    a list in TensorStat field order (~10x cheaper than ``dataclasses.asdict``)."""
    return json.dumps({"path": str(scan.path), "format": scan.format, "bytes": scan.bytes, "seconds": scan.seconds,
                       "problems": scan.problems,
                       "tensors": [[t.name, t.dtype, t.shape, t.numel, t.nan, t.posinf, t.neginf, t.max_abs, t.zeros,
                                    t.digest] for t in scan.tensors],
                       "metadata": scan.metadata, "globals_seen": scan.globals_seen}, default=str)


def _from_wire(text: str) -> FileScan:
    from autopsy.model import TensorStat

    d = json.loads(text)
    return FileScan(Path(d["path"]), d["format"], bytes=d["bytes"], seconds=d["seconds"],
                    tensors=[TensorStat(*t) for t in d["tensors"]], problems=[(s, m) for s, m in d["problems"]],
                    metadata=d["metadata"], globals_seen=d["globals_seen"])


def _dangerous(scan: FileScan) -> bool:
    return any(s == "partial" and "was NOT executed" in m for s, m in scan.problems)


def _fmt_float(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isinf(x) or math.isnan(x):
        return str(x)
    return f"{x:.4g}"


def _emit(text: str, output: str | None) -> None:
    if output and output != "-":
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _emit_json(scans: list[FileScan], summary: dict[str, Any], output: str | None) -> None:
    from autopsy.checkpoints.scan_output import write_json

    if output and output != "-":
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        with open(output, "w", encoding="utf-8") as fh:
            write_json(fh, scans, summary)
    else:
        write_json(sys.stdout, scans, summary)
        sys.stdout.flush()


def _remote_files(urls: list[str]) -> tuple[list[tuple[str, int | None]], str | None]:
    from autopsy.checkpoints.remote import remote_files

    out: list[tuple[str, int | None]] = []
    for u in urls:
        got, error = remote_files(u)
        if error:
            return out, error
        out.extend(got)
    return out, None


def _scan_remote(remote: list[tuple[str, int | None]], digest: bool) -> list[FileScan]:
    """Remote files one after another (each is read by parallel range requests); a progress bar
    with bytes/s on a terminal."""
    if not remote:
        return []
    from autopsy.checkpoints.remote import scan_remote_file

    if not sys.stderr.isatty():
        return [scan_remote_file(u, digest, size=size) for u, size in remote]
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    out = []
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        for u, size in remote:
            task = prog.add_task(u.rsplit("/", 1)[-1][:40], total=size)
            out.append(scan_remote_file(u, digest, progress=lambda n, t=task: prog.advance(t, n), size=size))
            prog.update(task, total=out[-1].bytes or None)
    return out


def scan_command(paths: list[Path] | list[str], fmt: str = "table", workers: int = 1, output: str | None = None,
                 digest: bool = False, show_all: bool = False) -> int:
    """``digest``: also hash each tensor's bytes (the JSON's ``digest``, null otherwise; one more pass per chunk).
    ``show_all``: the table lists every tensor, not only the problem ones."""
    if fmt not in ("table", "json"):
        _err(f"unknown --format {fmt!r} (use table or json)")
        return 2
    from autopsy.checkpoints.remote import is_url

    urls = [str(p) for p in paths if is_url(str(p))]
    files, error = _files_of([Path(p) for p in paths if not is_url(str(p))])
    if error:
        _err(error)
        return 2
    remote, error = _remote_files(urls)
    if error:
        _err(error)
        return 2
    scans = _scan_all(files, workers, digest) + _scan_remote(remote, digest)
    unreadable = [s for s in scans if s.status == "unreadable"]
    nonfinite = sum(1 for s in scans for t in s.tensors if t.nonfinite)
    code = 2 if unreadable else 1 if nonfinite or any(_dangerous(s) for s in scans) else 0
    if fmt == "json":
        summary = {"files": len(scans), "tensors": sum(len(s.tensors) for s in scans), "nonfinite_tensors": nonfinite,
                   "unreadable_files": [str(s.path) for s in unreadable], "bytes": sum(s.bytes for s in scans),
                   "exit_code": code}
        _emit_json(scans, summary, output)
    else:
        from autopsy.checkpoints.scan_output import render_table

        to_terminal = (not output or output == "-") and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        _emit(render_table(scans, styles=to_terminal, show_all=show_all), output)
    for s in unreadable:
        _err(f"{s.path}: {'; '.join(m for st, m in s.problems if st == 'unreadable')}")
    return code


def diff_command(a: Path, b: Path, fmt: str = "table", output: str | None = None) -> int:
    from autopsy.checkpoints.diff import diff

    if fmt not in ("table", "json"):
        _err(f"unknown --format {fmt!r} (use table or json)")
        return 2
    for p in (a, b):
        if not p.exists():
            _err(f"{p}: no such file or directory")
            return 2
    res = diff(a, b)
    if fmt == "json":
        from autopsy.model import jsonable

        _emit(json.dumps(jsonable(res.to_json()), indent=1) + "\n", output)
    else:
        lines = [f"{a}  ->  {b}",
                 f"{len(res.changed)} changed, {len(res.identical)} identical (bitwise), "
                 f"{len(res.only_a)} only in A, {len(res.only_b)} only in B"]
        for d in res.changed:
            detail = " ".join(x for x in (f"rel_l2 {_fmt_float(d.rel_l2)}  max|delta| {_fmt_float(d.max_abs_delta)}"
                                          if d.rel_l2 is not None else "", d.note or "") if x)
            lines.append(f"  changed    {d.name}  {d.dtype}{d.shape}  {detail}")
        lines += [f"  identical  {n}" for n in res.identical]
        lines += [f"  only in A  {n}" for n in res.only_a]
        lines += [f"  only in B  {n}" for n in res.only_b]
        lines += [f"  problem: {p}" for p in res.problems]
        _emit("\n".join(lines) + "\n", output)
    if res.unreadable:
        _err("; ".join(res.problems) or "unreadable input")
        return 2
    return 0

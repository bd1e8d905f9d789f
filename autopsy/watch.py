"""``autopsy watch PATH``: follow a running run and say so the moment it fails.

Polls the run (logs, trainer_state.json, TensorBoard events, the flight record) every
``--interval`` seconds; when any file changed (size or mtime), re-reads the run and runs the
detectors, and prints each failure signature (detector code, root cause, onset step) the first time
it appears. On the first finding at or above ``--fail-on`` it reads on for ``GRACE`` seconds (what is
written with a failure is printed with it), runs ``--on-failure CMD`` if given, and exits 1.
Ctrl-C (or SIGTERM) stops it cleanly with exit 0.

Why re-read instead of tailing: every reader already handles partial and growing files, and a run
directory gains new files (checkpoints, event files) while it trains. The cost is bounded by
backing off: the next poll waits at least twice as long as the last analysis took. Checkpoint
tensors are not scanned unless ``--checkpoints`` (they can be gigabytes).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from autopsy.model import SEVERITY_RANK

#: files stat'ed per poll at most (a run dir holding a dataset must not make each poll slow)
MAX_STAT = 20_000
#: wait at least this multiple of the last analysis time before the next one
BACKOFF = 2.0
#: after the first failure, keep reading this long so what is written with it (the flight record's
#: localisation line follows the non-finite step's line) is printed before acting
GRACE = 2.0
_SKIP = {".git", "__pycache__", "node_modules", ".cache", "wandb"}


def fingerprint(path: Path) -> tuple[int, int, int]:
    """(files, total bytes, newest mtime_ns) of what the run holds; changes when anything is written."""
    if path.is_file():
        st = path.stat()
        return 1, st.st_size, st.st_mtime_ns
    n = size = newest = 0
    stack = [path]
    while stack and n < MAX_STAT:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in _SKIP:
                        stack.append(Path(e.path))
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            n += 1
            size += st.st_size
            newest = max(newest, st.st_mtime_ns)
    return n, size, newest


def signature(f: object) -> str:
    """A failure signature stays the same while its finding's numbers grow with the run."""
    return f"{f.code}|{f.root_cause}|{f.first_step}"  # type: ignore[attr-defined]


def _run_hook(cmd: str, shell: bool) -> int:
    args: str | list[str] = cmd if shell else shlex.split(cmd)
    try:
        done = subprocess.run(args, shell=shell, check=False)  # noqa: S602 - a shell only when asked for
    except OSError as exc:
        typer.echo(f"autopsy watch: --on-failure command could not start: {exc.strerror or exc}", err=True)
        return 127
    return done.returncode


def watch(path: Path, interval: float = 1.0, on_failure: str | None = None, shell: bool = False,
          fail_on: str = "error", timeout: float | None = None, checkpoints: bool = False) -> int:
    """The loop; returns the exit code."""
    from autopsy.errors import UserError
    from autopsy.pipeline import read_run, run_detectors

    threshold = SEVERITY_RANK[fail_on]
    seen: set[str] = set()
    last: tuple[int, int, int] | None = None
    started = time.monotonic()
    waited = False
    typer.echo(f"autopsy watch: following {path} (every {interval:g} s; Ctrl-C to stop)")
    failed = None
    act_at = 0.0
    while True:
        if failed is not None and time.monotonic() >= act_at:
            if on_failure:
                typer.echo(f"autopsy watch: running --on-failure: {on_failure}")
                rc = _run_hook(on_failure, shell)
                typer.echo(f"autopsy watch: --on-failure exited {rc}")
            typer.echo(f"autopsy watch: {failed.code} at or above {fail_on}; "
                       f"run `autopsy run {shlex.quote(str(path))}` "
                       "for the full report")
            return 1
        if failed is None and timeout is not None and time.monotonic() - started > timeout:
            typer.echo(f"autopsy watch: no finding at or above {fail_on} within {timeout:g} s")
            return 0
        if not path.exists():
            if not waited:
                typer.echo(f"autopsy watch: waiting for {path} to appear")
                waited = True
            time.sleep(interval)
            continue
        fp = fingerprint(path)
        if fp == last:
            time.sleep(min(interval, max(0.05, act_at - time.monotonic())) if failed else interval)
            continue
        last = fp
        t0 = time.monotonic()
        try:
            run, _ = read_run(path, with_checkpoints=checkpoints)
            findings, _ = run_detectors(run)
        except UserError:
            time.sleep(interval)
            continue
        cost = time.monotonic() - t0
        findings.sort(key=lambda f: (-SEVERITY_RANK.get(f.severity, 0),
                                     f.first_step if f.first_step is not None else 0))
        for f in findings:
            sig = signature(f)
            if sig in seen:
                continue
            seen.add(sig)
            step = f" step {f.first_step}" if f.first_step is not None else ""
            typer.echo(f"[{time.strftime('%H:%M:%S')}] {f.severity:<8} {f.code}{step}: {f.title}")
            if SEVERITY_RANK.get(f.severity, 0) >= threshold and failed is None:
                failed = f
                act_at = time.monotonic() + GRACE
        if failed is None:
            time.sleep(max(interval, BACKOFF * cost))


def watch_cmd(
    path: Annotated[Path, typer.Argument(help="Run output directory (or a log file) of a run in progress.")],
    interval: Annotated[float, typer.Option("--interval", "-n", help="Seconds between polls.")] = 1.0,
    on_failure: Annotated[str | None, typer.Option("--on-failure", help="Command run on the first failure (no shell "
                                                   "unless --shell), e.g. 'scancel 123'.")] = None,
    shell: Annotated[bool, typer.Option("--shell", help="Run --on-failure through /bin/sh.")] = False,
    fail_on: Annotated[str, typer.Option("--fail-on", help="critical, error, warning or info.")] = "error",
    timeout: Annotated[float | None, typer.Option("--timeout", help="Stop after this many seconds (exit 0).")] = None,
    checkpoints: Annotated[bool, typer.Option("--checkpoints",
                                              help="Also scan checkpoint tensors on each change.")] = False,
) -> None:
    """Follow a running run; print each new failure signature; exit 1 on the first error (or --fail-on)."""
    if fail_on not in SEVERITY_RANK:
        typer.echo(f"autopsy: error: --fail-on must be one of {', '.join(SEVERITY_RANK)} (hint: the default is error)",
                   err=True)
        raise typer.Exit(2)
    if interval <= 0:
        typer.echo("autopsy: error: --interval must be positive", err=True)
        raise typer.Exit(2)

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, _term)
    except ValueError:  # not the main thread (tests): Ctrl-C still works
        pass
    try:
        code = watch(path, interval, on_failure, shell, fail_on, timeout, checkpoints)
    except KeyboardInterrupt:
        typer.echo("autopsy watch: stopped", err=True)
        sys.stdout.flush()
        code = 0
    raise typer.Exit(code)

"""``autopsy compare FAILED GOOD``, ``autopsy sweep PATH...`` and the CI formats of ``autopsy run``.

Registered on the main typer app by ``autopsy/cli.py``; kept here so the shared CLI module stays
small. Every command is built on the Python API (``autopsy.api``).
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from autopsy.cli import FailOn, Format, _command_line, _write, app, default_output, exit_code, fail, render
from autopsy.errors import UserError, debug_enabled


def analyze_or_fail(path: Path, baseline: Path | None, command: str) -> Any:
    """``autopsy.api.analyze`` with the CLI's error contract: a user's mistake is one line, exit 2."""
    from autopsy.api import analyze

    try:
        return analyze(path, baseline=baseline, command=command)
    except UserError as exc:
        fail(str(exc), exc.hint)
    except Exception as exc:  # noqa: BLE001
        if debug_enabled():
            raise
        fail(f"internal error while analysing {path}: {type(exc).__name__}: {exc}", "set AUTOPSY_DEBUG=1 for the traceback")
    return None


def ci_output(report: dict[str, Any], fmt: Format, output: str | None, path: Path, fail_on: FailOn) -> int:
    """``--format github``: annotations on stdout (or --output) and the Markdown report appended to
    $GITHUB_STEP_SUMMARY; ``--format sarif``: the SARIF log to --output (default autopsy-<run>.sarif)."""
    from autopsy.render import ci

    if fmt.value == "github":
        text = ci.github(report)
        if output in (None, "-"):
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            _write(text, Path(output))
        try:
            ci.append_step_summary(report)
        except OSError as exc:
            typer.echo(f"autopsy: warning: cannot append to GITHUB_STEP_SUMMARY: {exc.strerror or exc}", err=True)
    else:
        text = ci.render_sarif(report)
        if output == "-":
            sys.stdout.write(text)
        else:
            out = Path(output) if output else default_output(path, Format.json).with_suffix(".sarif")
            try:
                _write(text, out)
            except OSError as exc:
                fail(f"cannot write the report to {out}: {exc.strerror or exc}", "pass --output with a writable path")
            typer.echo(f"SARIF written to {out}", err=True)
    return exit_code(report, fail_on)


def emit(report: dict[str, Any], fmt: Format, output: str | None, path: Path, fail_on: FailOn, quiet: bool) -> int:
    """Write the report like ``autopsy run`` does, then the comparison lines on stderr."""
    if fmt.value in ("github", "sarif"):
        return ci_output(report, fmt, output, path, fail_on)
    text = render(report, fmt)
    out_path: Path | None = None
    if output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out_path = Path(output) if output else default_output(path, fmt)
        try:
            _write(text, out_path)
        except OSError as exc:
            fail(f"cannot write the report to {out_path}: {exc.strerror or exc}", "pass --output with a writable path")
    if not quiet and not (output == "-" and fmt is not Format.text):
        from autopsy.render import comparison, terminal

        if not (output == "-" and fmt is Format.text):
            terminal.print_summary(report, out_path)
        for line in comparison.lines(report):
            typer.echo(terminal.clean(line), err=True)
    return exit_code(report, fail_on)


@app.command("compare")
def compare_cmd(
    failed: Annotated[Path, typer.Argument(help="The run that failed (output directory or log file).")],
    good: Annotated[Path, typer.Argument(help="A run that worked, to compare against (the baseline).")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Report format.")] = Format.html,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Report file; '-' for stdout.")] = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity.")] = FailOn.error,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No terminal summary.")] = False,
) -> None:
    """Compare a failed run with a good one: what changed, where the curves part, what that says."""
    analysis = analyze_or_fail(failed, good, _command_line())
    raise typer.Exit(emit(analysis.to_dict(), fmt, output, failed, fail_on, quiet))


class SweepFormat(str, Enum):
    html = "html"
    md = "md"
    json = "json"
    csv = "csv"
    text = "text"


@app.command("sweep")
def sweep_cmd(
    paths: Annotated[list[str], typer.Argument(help="Run folders, folders of runs, globs, or Ray Tune experiment folders.")],
    fmt: Annotated[SweepFormat, typer.Option("--format", "-f", help="Table format.")] = SweepFormat.html,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Table file; '-' for stdout. Default: autopsy-sweep.<ext>.")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", help="Local worker processes (0 = one per CPU core).")] = 0,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address (tcp://host:8786): analyse on that cluster; the runs must be readable there at the same paths.")] = None,
    reports: Annotated[Path | None, typer.Option("--reports", help="Folder for each run's HTML report. Default: autopsy-sweep-reports/ beside the table.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Analyse many runs in parallel: one row per run, grouped by cause, each run's report linked."""
    from autopsy.render import sweep_out
    from autopsy.sweep_engine import run_sweep

    ext = {"html": "html", "md": "md", "json": "json", "csv": "csv", "text": "txt"}[fmt.value]
    out_path = None if output == "-" else Path(output or f"autopsy-sweep.{ext}")
    reports_dir = reports or ((out_path.parent if out_path else Path.cwd()) / "autopsy-sweep-reports")
    bar = _progress(quiet)
    try:
        result = run_sweep(paths, workers=workers, cluster=cluster, reports_dir=reports_dir,
                           on_row=bar.advance, on_start=bar.start)
    except UserError as exc:
        bar.stop()
        fail(str(exc), exc.hint)
        return
    except Exception as exc:  # noqa: BLE001 - e.g. the cluster address does not answer
        bar.stop()
        if debug_enabled():
            raise
        fail(f"sweep failed: {type(exc).__name__}: {exc}", "check --cluster's address, or set AUTOPSY_DEBUG=1")
        return
    bar.stop()
    text = sweep_out.render(result, fmt.value, out_path.parent if out_path else None)
    if out_path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            _write(text, out_path)
        except OSError as exc:
            fail(f"cannot write the table to {out_path}: {exc.strerror or exc}", "pass --output with a writable path")
    if not quiet:
        for p in result.problems:
            typer.echo(f"autopsy: warning: {p}", err=True)
        typer.echo(sweep_out.summary_line(result, out_path), err=True)
    raise typer.Exit(1 if any(r["status"] == "failed" for r in result.rows) else 0)


class _Bar:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task: Any = None

    def start(self, total: int) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("analysing runs"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                                 TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("runs", total=total, failed=0)
        self.failed = 0

    def advance(self, row: dict[str, Any]) -> None:
        if self.progress is not None:
            self.failed += row["status"] == "failed"
            self.progress.update(self.task, advance=1, failed=self.failed)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _progress(quiet: bool) -> _Bar:
    return _Bar(not quiet and sys.stderr.isatty() and "AUTOPSY_NO_PROGRESS" not in os.environ)

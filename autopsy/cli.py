"""Command line: ``autopsy run``, ``scan``, ``diff``, ``detectors``, ``explain``, ``known-issues``, ``preflight``, ``watch``.

Exit codes: 0 healthy / nothing at or above ``--fail-on``; 1 failure diagnosed (or, for ``scan``,
a non-finite tensor); 2 usage or tool error. A user's mistake is one line with a hint; set
``AUTOPSY_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from autopsy import __version__
from autopsy.errors import UserError, debug_enabled
from autopsy.model import SEVERITY_RANK


class PlainHelpCommand(typer.core.TyperCommand):
    """Help text without rich-markup escapes: with rich installed, typer escapes ``[default: x]`` as
    ``\\[default: x]`` for HTML export even when rich markup is off (``rich_markup_mode=None``), and the
    backslash reaches the terminal."""

    def get_help(self, ctx: typer.Context) -> str:  # type: ignore[override]
        return super().get_help(ctx).replace("\\[", "[")


app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Post-mortem analysis of failed deep-learning and LLM fine-tuning runs.")


class Format(str, Enum):
    html = "html"
    md = "md"
    json = "json"
    text = "text"
    github = "github"  # GitHub Actions annotations + $GITHUB_STEP_SUMMARY (autopsy/render/ci.py)
    sarif = "sarif"  # SARIF 2.1.0 for code scanning (autopsy/render/ci.py)


class FailOn(str, Enum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"autopsy {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")] = False) -> None:
    """Post-mortem analysis of failed deep-learning and LLM fine-tuning runs."""


def fail(message: str, hint: str | None = None, code: int = 2) -> None:
    typer.echo(f"autopsy: error: {message}" + (f" (hint: {hint})" if hint else ""), err=True)
    raise typer.Exit(code)


def _command_line() -> str:
    return "autopsy " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def default_output(path: Path, fmt: Format) -> Path:
    """Where the report goes when --output is not given: the current directory, never the run dir."""
    ext = {"html": "html", "md": "md", "json": "json", "text": "txt"}[fmt.value]
    name = (path.resolve().name if path.is_dir() else path.stem) or "run"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]
    out_dir = Path.cwd()
    run_dir = path.resolve() if path.is_dir() else path.resolve().parent
    try:
        out_dir.resolve().relative_to(run_dir)
        inside = True
    except ValueError:
        inside = False
    if inside:
        out_dir = Path(tempfile.gettempdir())
    return out_dir / f"autopsy-{safe}.{ext}"


def render(report: dict, fmt: Format) -> str:
    if fmt is Format.json:
        from autopsy.render import json_out
        return json_out.render(report)
    if fmt is Format.md:
        from autopsy.render import markdown
        return markdown.render(report)
    if fmt is Format.html:
        from autopsy.render import html
        return html.render(report)
    from autopsy.render import terminal
    return terminal.render_text(report)


def _write(text: str, output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, output)


@app.command("run", cls=PlainHelpCommand)
def run_cmd(
    path: Annotated[str, typer.Argument(help="Run output directory, or a single log file; or a URL (s3://, gs://, hf://, "
                                             "https://) of a safetensors file, its index or a remote run folder.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Report format.")] = Format.html,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Report file; '-' for stdout.")] = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity.")] = FailOn.error,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No terminal summary.")] = False,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="A run that worked: compare against it (as autopsy compare).")] = None,
) -> None:
    """Analyse a run: read what it left behind, diagnose, write a report. PATH '-' reads a log from stdin."""
    if path == "-":
        _run_stdin(fmt, output, fail_on, quiet, baseline)
        return
    if "://" in path and not path.lower().startswith("file://"):
        _run_remote(path, fmt, output, fail_on, quiet, baseline)
        return
    _run(Path(path), fmt, output, fail_on, quiet, baseline=baseline)


def _run_remote(url: str, fmt: Format, output: str | None, fail_on: FailOn, quiet: bool, baseline: Path | None) -> None:
    """A run at a URL: its checkpoints scanned where they are, its small side files fetched (autopsy/checkpoints/remote_run.py)."""
    from autopsy.checkpoints.remote_run import RemoteRunError, stage

    try:
        with stage(url) as (root, notes):
            _run(root, fmt, output, fail_on, quiet, notes, baseline=baseline, note_kind="remote", shown=url)
    except RemoteRunError as exc:
        fail(str(exc), "check the URL and the credentials (AWS_*, HF_TOKEN); s3://, gs:// and hf:// need 'autopsy-ml[remote]'")


def _run_stdin(fmt: Format, output: str | None, fail_on: FailOn, quiet: bool, baseline: Path | None = None) -> None:
    """Spool stdin to a private ``<stdin>`` file, analyse it, remove it."""
    import shutil

    from autopsy.spool import STDIN_NAME, cut_message, spool_stdin

    if sys.stdin is None or sys.stdin.isatty():
        fail("'-' reads a log from stdin, but stdin is a terminal", "pipe a log in: cat train.log | autopsy run -")
        return
    tmp = Path(tempfile.mkdtemp(prefix="autopsy-stdin-"))
    try:
        path, kept, cut = spool_stdin(sys.stdin.buffer, tmp)
        if not kept:
            fail("stdin was empty: nothing to analyse", "pipe a log in: cat train.log | autopsy run -")
            return
        notes = [(STDIN_NAME, cut_message())] if cut else []
        _run(path, fmt, output, fail_on, quiet, notes, report_name=str(tmp / "stdin"), baseline=baseline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(path: Path, fmt: Format, output: str | None, fail_on: FailOn, quiet: bool,
         notes: list[tuple[str, str]] | None = None, report_name: str | None = None,
         baseline: Path | None = None, note_kind: str = "text_log", shown: str | None = None) -> None:
    """``notes``: [(artifact path, problem)] added to the report as ``note_kind`` artifacts; ``shown``: the run's
    root as the report names it (a URL), when ``path`` only stands for it."""
    from autopsy.api import analyze

    try:
        analysis = analyze(path, baseline=baseline, command=_command_line())
    except UserError as exc:
        fail(str(exc), exc.hint)
        return
    except Exception as exc:  # noqa: BLE001
        if debug_enabled():
            raise
        fail(f"internal error while analysing {path}: {type(exc).__name__}: {exc}", "set AUTOPSY_DEBUG=1 for the traceback")
        return
    for where, message in notes or ():
        analysis.run.problem(where, note_kind, message, "partial")
    if shown is not None:
        from autopsy.checkpoints.remote import Url

        analysis.run.root = Url(shown)  # type: ignore[assignment]
    report = analysis.to_dict()
    if fmt in (Format.github, Format.sarif):
        from autopsy.many_cli import ci_output
        raise typer.Exit(ci_output(report, fmt, output, path, fail_on))
    text = render(report, fmt)
    to_stdout = output == "-"
    out_path: Path | None = None
    if to_stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out_path = Path(output) if output else default_output(Path(report_name) if report_name else path, fmt)
        try:
            _write(text, out_path)
        except OSError as exc:
            fail(f"cannot write the report to {out_path}: {exc.strerror or exc}", "pass --output with a writable path")
    if not quiet and not (to_stdout and fmt is not Format.text):
        from autopsy.render import terminal
        if not (to_stdout and fmt is Format.text):
            terminal.print_summary(report, out_path)
        if baseline is not None:
            from autopsy.render.comparison import lines
            typer.echo("\n".join(terminal.clean(x) for x in lines(report)), err=True)
    raise typer.Exit(exit_code(report, fail_on))


def exit_code(report: dict, fail_on: FailOn) -> int:
    if fail_on is FailOn.never:
        return 0
    threshold = SEVERITY_RANK[fail_on.value]
    worst = max((SEVERITY_RANK.get(f["severity"], 0) for f in report["findings"]), default=-1)
    return 1 if worst >= threshold else 0


@app.command("detectors", cls=PlainHelpCommand)
def detectors_cmd() -> None:
    """List the detector catalogue."""
    from detectors import ALL
    from detectors.base import doc_sections

    for m in ALL:
        summary = doc_sections(m).get("summary", "").splitlines()
        typer.echo(f"{m.CODE}  {m.SLUG:<34} {summary[0] if summary else ''}")


@app.command("explain", cls=PlainHelpCommand)
def explain_cmd(code: Annotated[str, typer.Argument(help="Detector code (NUM001) or slug.")]) -> None:
    """Print a detector's documentation."""
    from detectors import by_code
    from detectors.base import DOC_HEADINGS, doc_sections

    m = by_code(code)
    if m is None:
        fail(f"no detector with code or slug {code!r}", "list them with: autopsy detectors")
        return
    secs = doc_sections(m)
    typer.echo(f"{m.CODE} {m.SLUG}" + (f"  (root cause: {m.ROOT_CAUSE})" if m.ROOT_CAUSE else ""))
    typer.echo(secs.get("summary", ""))
    for h in DOC_HEADINGS:
        typer.echo(f"\n{h}:")
        typer.echo(_indent(secs.get(h, "")))


def _indent(text: str) -> str:
    import textwrap
    return textwrap.indent(textwrap.dedent(text).strip(), "    ")


@app.command("scan", cls=PlainHelpCommand)
def scan_cmd(
    paths: Annotated[list[str], typer.Argument(help="Checkpoint files, checkpoint dirs or a whole output dir; or "
                                                     "URLs (hf://, s3://, gs://, https://; s3, gs and hf folders need autopsy-ml[remote]).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    workers: Annotated[int, typer.Option("--workers", "-j", help="Files scanned at once, as worker processes (0 = one per CPU core, at most 2).")] = 0,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Write to a file instead of stdout.")] = None,
    digest: Annotated[bool, typer.Option("--digest", help="Also hash each tensor's bytes (JSON 'digest'; null without it).")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="Table: list every tensor, not only the problem ones.")] = False,
) -> None:
    """Check checkpoints for NaN/Inf tensors (exit 1 if any, 2 if unreadable)."""
    from autopsy.checkpoints.cli import scan_command
    from autopsy.checkpoints.scanfile import auto_workers

    if workers <= 0:
        workers = auto_workers()
    raise typer.Exit(scan_command(paths, fmt=fmt, workers=workers, output=output, digest=digest, show_all=show_all))


@app.command("diff", cls=PlainHelpCommand)
def diff_cmd(
    a: Annotated[Path, typer.Argument(help="First checkpoint (file or dir).")],
    b: Annotated[Path, typer.Argument(help="Second checkpoint (file or dir).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    output: Annotated[str | None, typer.Option("--output", "-o")] = None,
) -> None:
    """Which tensors changed between two checkpoints, and by how much."""
    from autopsy.checkpoints.cli import diff_command

    raise typer.Exit(diff_command(a, b, fmt=fmt, output=output))


@app.command("known-issues")
def known_issues_cmd(
    package: Annotated[str | None, typer.Option("--package", "-p", help="Only entries affecting this package (pip name).")] = None,
    match: Annotated[Path | None, typer.Option("--match", "-m", help="A run dir or log: show the entries that match it and why.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json (json carries every field).")] = "text",
) -> None:
    """The known framework bugs (knowledge base), or which of them match a run."""
    from autopsy.known_issues.cli import known_issues_command

    raise typer.Exit(known_issues_command(package, match, fmt))


@app.command("preflight")
def preflight_cmd(
    configs: Annotated[list[Path] | None, typer.Argument(help="Config files: TrainingArguments/TRL JSON or YAML, LLaMA-Factory YAML, "
                                                        "ms-swift args.json, DeepSpeed JSON, adapter_config.json, model config.json.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
    no_env: Annotated[bool, typer.Option("--no-env", help="Ignore this environment's installed versions and GPU "
                                                          "(check a config meant for another machine).")] = False,
) -> None:
    """Check a run's config and this environment before training: known defects and known bugs (exit 0 clean, 1 defect, 2 usage)."""
    from autopsy.known_issues.cli import preflight_command

    raise typer.Exit(preflight_command(configs or [], fmt=fmt, use_env=not no_env))


from autopsy.watch import watch_cmd  # noqa: E402 - registered here, defined in its own module

app.command("watch")(watch_cmd)


from autopsy import many_cli  # noqa: E402,F401 - registers compare and sweep (autopsy/many_cli.py)

#: exit status after SIGTERM (128 + the signal's number, as shells report it)
TERM_EXIT = 128 + 15


def _exit_on_term(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, a CI job cancelled, ``kill``) unwinds like Ctrl-C, so ``finally`` blocks run and
    the private folders archives and stdin were unpacked into are removed instead of left in the temp dir."""
    raise SystemExit(TERM_EXIT)


def _handle_term() -> None:
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # never replace a handler the embedder chose
        signal.signal(signal.SIGTERM, _exit_on_term)


def main() -> None:
    from autopsy._memory import tune_allocator, tune_gc

    tune_allocator()
    tune_gc()
    _handle_term()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("autopsy: interrupted", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()

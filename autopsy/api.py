"""The Python API: ``autopsy.analyze(path, baseline=None)`` and ``autopsy.sweep(paths)``.

Why a layer over ``autopsy.pipeline``: notebooks want the verdict, the findings and the long scalars
frame as attributes, and the report in any format from the same object, without knowing the report
dict. The CLI (``autopsy run``, ``compare``, ``sweep``) is built on these same calls, so a notebook
and a terminal give the same verdict. Documented with a worked example in ``docs/api.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopsy import pipeline
from autopsy.model import Checkpoint, Config, DetectorOutcome, Event, Finding, Verdict

if TYPE_CHECKING:
    import pandas as pd

    from autopsy.compare import Comparison

#: series of the baseline carried into a compared report, for the overlay charts
OVERLAY_METRICS = ("loss", "eval_loss", "grad_norm", "learning_rate")


@dataclass
class Analysis(pipeline.Analysis):
    """One analysed run (and, with a baseline, its comparison). Built by :func:`analyze`."""

    baseline: pipeline.Analysis | None = None
    comparison: Comparison | None = None
    command: str | None = None
    _report: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def verdict(self) -> Verdict:
        return self.diagnosis.verdict

    @property
    def findings(self) -> list[Finding]:
        return self.diagnosis.findings

    @property
    def scalars(self) -> pd.DataFrame:
        """The long frame: one row per (source, step, metric) point; columns step, metric, value, source, line, key."""
        return self.run.scalars

    @property
    def events(self) -> list[Event]:
        return self.run.events

    @property
    def config(self) -> Config:
        return self.run.config

    @property
    def checkpoints(self) -> list[Checkpoint]:
        return self.run.checkpoints

    def to_dict(self) -> dict[str, Any]:
        """The canonical report dict (schema: autopsy/schema/report.schema.json)."""
        if self._report is None:
            from autopsy.report import build_report, chart_series

            report = build_report(self, self.command)
            if self.comparison is not None and self.baseline is not None:
                cmp = self.comparison.to_json()
                series = chart_series(self.baseline.run)
                cmp["baseline_series"] = {k: v for k, v in series.items() if k in OVERLAY_METRICS}
                report["comparison"] = cmp
            self._report = report
        return self._report

    def to_json(self, indent: int | None = 2) -> str:
        from autopsy.render import json_out

        return json_out.render(self.to_dict()) if indent == 2 else json.dumps(self.to_dict(), indent=indent)

    def to_html(self) -> str:
        from autopsy.render import html

        return html.render(self.to_dict())

    def to_markdown(self) -> str:
        from autopsy.render import markdown

        return markdown.render(self.to_dict())

    def to_text(self) -> str:
        from autopsy.render import terminal

        return terminal.render_text(self.to_dict())


def analyze(path: str | Path, baseline: str | Path | None = None, *, command: str | None = None,
            debug: bool | None = None) -> Analysis:
    """Analyse the run at ``path``; with ``baseline`` (a run that worked), compare the two and let the
    differences count as evidence in the diagnosis. Raises ``autopsy.errors.UserError`` when the path has
    nothing to read."""
    base = pipeline.analyze(Path(path), debug=debug)
    out = Analysis(base.run, base.diagnosis, base.discovery, dict(base.timings), command=command)
    if baseline is None:
        return out
    from autopsy.compare import compare_runs
    from autopsy.diagnosis import diagnose

    good = pipeline.analyze(Path(baseline), debug=debug)
    cmp = compare_runs(base.run, good.run, good.diagnosis.verdict.to_json())
    outcomes = list(base.diagnosis.detectors) + [
        DetectorOutcome("CMP", "compare-with-baseline", "ran", None, len(cmp.findings))]
    out.diagnosis = diagnose(list(base.diagnosis.findings) + cmp.findings, outcomes, base.run)
    out.baseline, out.comparison = good, cmp
    return out


def sweep(paths: str | Path | Iterable[str | Path], workers: int = 0, cluster: str | None = None,
          reports: str | Path | None = None) -> pd.DataFrame:
    """One row per run found under ``paths`` (directories, globs, Ray Tune experiment folders).

    Columns: run, status, root_cause, onset, confidence, headline, findings, error, report, then one
    ``hp.<key>`` column per hyper-parameter whose value varies across the runs. A run that cannot be
    analysed is a row with status ``error`` and the reason in ``error``; it never stops the sweep.
    ``cluster`` is a Dask scheduler address (``tcp://host:8786``) or a ``distributed.Client``.
    """
    from autopsy.sweep_engine import run_sweep

    if isinstance(paths, (str, Path)):
        paths = [paths]
    result = run_sweep([str(p) for p in paths], workers=workers, cluster=cluster,
                       reports_dir=Path(reports) if reports is not None else None)
    return result.frame()


__all__: Sequence[str] = ("Analysis", "analyze", "sweep")

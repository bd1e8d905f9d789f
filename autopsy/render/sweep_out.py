"""The sweep table (``autopsy sweep``) as HTML, Markdown, JSON, CSV or text.

Rows come grouped by cause (failures by root cause, largest group first, then inconclusive,
healthy and runs that could not be analysed), with the hyper-parameters that vary across the sweep
as columns and a link to each run's own report. Run names and values come from the runs' files,
so HTML escapes them (jinja2-free: markupsafe), Markdown goes through ``markdown.md``, CSV cells
that a spreadsheet would run as a formula are prefixed with a quote (OWASP CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import escape

from autopsy.model import ROOT_CAUSES, jsonable
from autopsy.sweep_engine import ROW_FIELDS, SweepResult

#: hyper-parameter columns shown in the HTML/Markdown/text tables (JSON and CSV carry all)
MAX_HP_COLUMNS = 12
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _link(report: str | None, base: Path | None) -> str | None:
    if not report:
        return None
    if base is None:
        return Path(report).as_uri()
    try:
        return quote(Path(os.path.relpath(report, base.resolve())).as_posix())
    except ValueError:
        return Path(report).as_uri()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def to_json(result: SweepResult) -> str:
    return json.dumps(jsonable({"runs": result.table(), "varying": result.varying(), "counts": result.counts(),
                                "groups": {name: len(rows) for name, rows in result.groups()},
                                "problems": result.problems, "seconds": round(result.seconds, 3),
                                "executor": result.workers}), indent=2) + "\n"


def to_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    cols = list(ROW_FIELDS) + [f"hp.{k}" for k in result.varying()]
    w = csv.writer(buf)
    w.writerow(cols)
    for r in result.table():
        w.writerow([_safe_csv(_cell(r.get(c))) for c in cols])
    return buf.getvalue()


def _safe_csv(s: str) -> str:
    return "'" + s if s.startswith(_FORMULA_START) else s


def _hp(result: SweepResult) -> list[str]:
    return result.varying()[:MAX_HP_COLUMNS]


def to_markdown(result: SweepResult, base: Path | None) -> str:
    from autopsy.render.markdown import md, table

    hp = _hp(result)
    c = result.counts()
    out = [f"## autopsy sweep: {len(result.rows)} runs",
           ", ".join(f"{n} {k}" for k, n in sorted(c.items())) + f"; varying: {md(', '.join(result.varying()) or 'nothing')}"]
    for name, rows in result.groups():
        out.append(f"### {md(name)} ({len(rows)})" + (f"\n\n{md(ROOT_CAUSES[name])}" if name in ROOT_CAUSES else ""))
        body = []
        for r in rows:
            link = _link(r["report"], base)
            run = f"[{md(r['name'])}]({link})" if link else md(r["name"])
            body.append([run, md(r["status"]), md(r["root_cause"] or ""), md(_cell(r["onset"])),
                         md(_cell(r["confidence"])), md(r["error"] or r["headline"], 160)]
                        + [md(_cell(r.get(f"hp.{k}"))) for k in hp])
        out.append(table(["run", "verdict", "root cause", "onset", "confidence", "headline"] + [md(k) for k in hp], body))
    return "\n\n".join(out) + "\n"


def to_html(result: SweepResult, base: Path | None) -> str:
    from autopsy.render.html import CSP

    hp = _hp(result)
    c = result.counts()
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>autopsy sweep</title>",
             "<style>body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#0f172a}table{border-collapse:collapse;"
             "margin:.5rem 0 1.5rem}th,td{border:1px solid #cbd5e1;padding:.25rem .5rem;text-align:left;vertical-align:top}"
             "th{background:#f1f5f9}.failed{color:#b91c1c;font-weight:600}.healthy{color:#047857}.error{color:#92400e}"
             ".inconclusive{color:#a16207}.muted{color:#64748b}.scroll{overflow-x:auto}td.h{min-width:22em}"
             "</style></head><body>",
             f"<h1>autopsy sweep: {len(result.rows)} runs</h1>",
             f"<p>{escape(', '.join(f'{n} {k}' for k, n in sorted(c.items())))}. Varying hyper-parameters: "
             f"{escape(', '.join(result.varying()) or 'none')}</p>"]
    for p in result.problems:
        parts.append(f'<p class="error">{escape(p)}</p>')
    for name, rows in result.groups():
        gid = "g-" + "".join(ch if ch.isalnum() else "-" for ch in name)
        parts.append(f'<h2 id="{escape(gid)}">{escape(name)} ({len(rows)})</h2>')
        if name in ROOT_CAUSES:
            parts.append(f'<p class="muted">{escape(ROOT_CAUSES[name])}</p>')
        parts.append('<div class="scroll"><table><thead><tr><th>run</th><th>verdict</th><th>root cause</th><th>onset</th><th>confidence</th>'
                     '<th>headline</th>' + "".join(f"<th>{escape(k)}</th>" for k in hp) + "</tr></thead><tbody>")
        for r in rows:
            link = _link(r["report"], base)
            run = (f'<a href="{escape(link)}" title="{escape(r["run"])}">{escape(r["name"])}</a>' if link
                   else f'<span title="{escape(r["run"])}">{escape(r["name"])}</span>')
            parts.append(f"<tr><td>{run}</td><td class=\"{escape(r['status'])}\">{escape(r['status'])}</td>"
                         f"<td>{escape(r['root_cause'] or '')}</td><td>{escape(_cell(r['onset']))}</td>"
                         f"<td>{escape(_cell(r['confidence']))}</td><td class=\"h\">{escape(r['error'] or r['headline'])}</td>"
                         + "".join(f"<td>{escape(_cell(r.get(f'hp.{k}')))}</td>" for k in hp) + "</tr>")
        parts.append("</tbody></table></div>")
    parts.append(f'<p class="muted">{escape(result.workers)}, {result.seconds:.1f} s</p></body></html>\n')
    return "".join(parts)


def to_text(result: SweepResult) -> str:
    from autopsy.render.terminal import clean

    lines = []
    for name, rows in result.groups():
        lines.append(f"{name} ({len(rows)})")
        for r in rows:
            extra = " ".join(f"{k}={_cell(r.get(f'hp.{k}')) or '-'}" for k in _hp(result)[:4])
            onset = f" onset {r['onset']}" if r["onset"] is not None else ""
            conf = f" {r['confidence']:.0%}" if isinstance(r["confidence"], (int, float)) else ""
            lines.append(clean(f"  {r['name']:<32} {r['status']:<12}{conf}{onset}  {extra}".rstrip()))
            if r["error"]:
                lines.append(clean(f"    {r['error'][:200]}"))
    return "\n".join(lines) + "\n"


def render(result: SweepResult, fmt: str, base: Path | None) -> str:
    if fmt == "json":
        return to_json(result)
    if fmt == "csv":
        return to_csv(result)
    if fmt == "md":
        return to_markdown(result, base)
    if fmt == "text":
        return to_text(result)
    return to_html(result, base)


def summary_line(result: SweepResult, out: Path | None) -> str:
    c = result.counts()
    groups = ", ".join(f"{name} {len(rows)}" for name, rows in result.groups())
    return (f"{len(result.rows)} runs in {result.seconds:.1f} s ({result.workers}): {groups}"
            + (f"\ntable: {out}" if out is not None else "") + ("" if not c.get("error") else
                                                               f"\n{c['error']} run(s) could not be analysed (see the error column)"))

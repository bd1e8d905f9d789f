"""The "compared with a baseline" part of a report: text lines, a Markdown block and an HTML section.

It reads only ``report["comparison"]`` (written by ``autopsy.api.Analysis.to_dict`` from
``autopsy.compare.Comparison``) and is defensive like ``view``: a missing key renders nothing. The
HTML overlays the baseline's curves on the run's (same SVG panels as the main charts, no script),
with the step where the curves part marked; every string from the runs is escaped.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

from autopsy.render import charts, view

#: panels overlaid: the run's metric and the baseline's, same axis
OVERLAY = ("loss", "grad_norm", "learning_rate", "eval_loss")
RUN_COLOR, BASE_COLOR = "#dc2626", "#64748b"
#: configuration rows shown (all differing keys are in the JSON)
MAX_ROWS = 40


def _v(x: Any) -> str:
    if isinstance(x, float):
        return charts.fmt(x)
    return "(not set)" if x is None else view.value_text(x)


def _cmp(report: dict[str, Any]) -> dict[str, Any]:
    return view.d(report.get("comparison"))


def _curve(cmp: dict[str, Any], metric: str) -> dict[str, Any]:
    return next((view.d(c) for c in view.lst(cmp.get("curves")) if view.d(c).get("metric") == metric), {})


def lines(report: dict[str, Any]) -> list[str]:
    """Plain lines for the terminal: baseline verdict, loss gaps, parting step, differing keys, checkpoints."""
    cmp = _cmp(report)
    if not cmp:
        return []
    out = [f"compared with baseline {view.text(cmp.get('b'))}"
           + (f" ({view.text(view.d(cmp.get('baseline_verdict')).get('status'))})" if cmp.get("baseline_verdict") else "")]
    loss = _curve(cmp, "loss")
    if loss:
        s, f = view.lst(loss.get("start")), view.lst(loss.get("final"))
        if len(s) == 2:
            out.append(f"  start loss {_v(s[0])} vs {_v(s[1])} (gap {_v(loss.get('start_gap'))})")
        if len(f) == 2:
            out.append(f"  final loss {_v(f[0])} vs {_v(f[1])} (gap {_v(loss.get('final_gap'))})")
        part = view.as_int(loss.get("part_step"))
        pv, nz = view.lst(loss.get("part_values")), view.lst(loss.get("noise"))
        if part is not None and len(pv) == 2 and len(nz) == 2:
            out.append(f"  curves part at step {part}: loss {_v(pv[0])} vs {_v(pv[1])} (noise {_v(nz[0])} / {_v(nz[1])})")
        elif loss:
            out.append(f"  loss curves do not part beyond their noise over {view.as_int(loss.get('common_steps')) or 0} common steps")
    rows = [view.d(r) for r in view.lst(cmp.get("config")) + view.lst(cmp.get("versions"))]
    if rows:
        out.append(f"  {len(rows)} config key(s) differ: " + ", ".join(
            f"{view.text(r.get('key'))} {_v(r.get('a'))} vs {_v(r.get('b'))}" for r in rows[:8]))
    else:
        out.append("  no configuration or version differences")
    for c in view.lst(cmp.get("checkpoints")):
        c = view.d(c)
        bad = view.lst(c.get("nonfinite_only_a"))
        out.append(f"  step {view.text(c.get('step'))}: {view.text(c.get('changed'))} tensors differ, "
                   f"{view.text(c.get('identical'))} identical" + (f", {len(bad)} non-finite only here" if bad else ""))
    return out


def markdown_block(report: dict[str, Any]) -> str:
    from autopsy.render.markdown import md, table

    cmp = _cmp(report)
    if not cmp:
        return ""
    parts = [f"### Compared with the baseline\n\nBaseline: `{md(cmp.get('b'))}`"]
    curves = [view.d(c) for c in view.lst(cmp.get("curves"))]
    if curves:
        rows = []
        for c in curves:
            s, f = view.lst(c.get("start")) + [None, None], view.lst(c.get("final")) + [None, None]
            rows.append([md(c.get("metric")), f"{_v(s[0])} / {_v(s[1])}", f"{_v(f[0])} / {_v(f[1])}",
                         md(c.get("part_step")) if c.get("part_step") is not None else "does not part"])
        parts.append(table(["metric", "start (run / baseline)", "last finite (run / baseline)", "curves part at step"], rows))
    diff = [view.d(r) for r in view.lst(cmp.get("config")) + view.lst(cmp.get("versions"))]
    if diff:
        parts.append(table(["key", "run", "baseline"], [[md(r.get("key")), md(_v(r.get("a"))), md(_v(r.get("b")))]
                                                         for r in diff[:MAX_ROWS]]))
    else:
        parts.append("No configuration or version differences.")
    cks = [view.d(c) for c in view.lst(cmp.get("checkpoints"))]
    if cks:
        parts.append(table(["step", "tensors differing", "identical", "non-finite only in the run", "largest change"],
                           [[md(c.get("step")), md(c.get("changed")), md(c.get("identical")),
                             md(len(view.lst(c.get("nonfinite_only_a")))), _largest(c)] for c in cks]))
    return "\n\n".join(parts)


def _largest(c: dict[str, Any]) -> str:
    from autopsy.render.markdown import md

    top = [view.d(t) for t in view.lst(c.get("top"))]
    if not top:
        return ""
    t = top[0]
    rel = t.get("rel_l2")
    return md(f"{view.text(t.get('name'))} (rel. L2 {_v(rel) if isinstance(rel, (int, float)) else 'n/a'})")


def overlay_panels(report: dict[str, Any]) -> list[charts.Panel]:
    """One SVG panel per metric both runs logged: the run in red, the baseline in grey, the parting step marked."""
    cmp = _cmp(report)
    mine = view.d(view.d(report.get("run")).get("series"))
    theirs = view.d(cmp.get("baseline_series"))
    panels = []
    for metric in OVERLAY:
        a = charts.load_series(mine.get(metric), f"{metric} (this run)")
        b = charts.load_series(theirs.get(metric), f"{metric} (baseline)")
        if a is None or b is None:
            continue
        lo = min(a.steps[0], b.steps[0])
        hi = max(a.steps[-1], b.steps[-1])
        markers = []
        part = view.as_int(_curve(cmp, metric).get("part_step"))
        if part is not None:
            markers.append(charts.Marker(part, f"curves part at step {part}", "onset"))
        panels.append(charts.draw_panel(f"{metric}: run vs baseline", [b, a], (lo, hi), markers,
                                        {a.name: RUN_COLOR, b.name: BASE_COLOR}))
    return panels


def html_section(report: dict[str, Any]) -> Markup:
    cmp = _cmp(report)
    if not cmp:
        return Markup("")
    parts = ['<section id="comparison"><h2>Compared with the baseline</h2>',
             f'<p>Baseline: <code>{escape(view.text(cmp.get("b")))}</code>']
    bv = view.d(cmp.get("baseline_verdict"))
    if bv:
        parts.append(f" ({escape(view.text(bv.get('status')))}: {escape(view.text(bv.get('headline')))})")
    parts.append("</p><ul>")
    for line in lines(report)[1:]:
        parts.append(f"<li>{escape(line.strip())}</li>")
    parts.append("</ul>")
    panels = overlay_panels(report)
    if panels:
        parts.append('<div class="keyrow"><span><span class="sw" style="background:' + RUN_COLOR + '"></span>this run</span>'
                     '<span><span class="sw" style="background:' + BASE_COLOR + '"></span>baseline</span>'
                     '<span>red dashed line: where the curves part</span></div>')
        parts.append('<div class="chartbox">' + "".join(str(p.svg) for p in panels) + "</div>")
    diff = [view.d(r) for r in view.lst(cmp.get("config")) + view.lst(cmp.get("versions"))]
    if diff:
        parts.append('<div class="scroll"><table><thead><tr><th>key</th><th>this run</th><th>baseline</th><th>source (run)</th></tr></thead><tbody>')
        for r in diff[:MAX_ROWS]:
            parts.append(f"<tr><td><code>{escape(view.text(r.get('key')))}</code></td><td>{escape(_v(r.get('a')))}</td>"
                         f"<td>{escape(_v(r.get('b')))}</td><td>{escape(view.text(r.get('a_source')))}</td></tr>")
        parts.append("</tbody></table></div>")
    cks = [view.d(c) for c in view.lst(cmp.get("checkpoints"))]
    if cks:
        parts.append('<div class="scroll"><table><thead><tr><th>step</th><th>tensors differing</th><th>identical</th>'
                     '<th>non-finite only in this run</th><th>largest changes (rel. L2)</th></tr></thead><tbody>')
        for c in cks:
            top = ", ".join(f"{view.text(view.d(t).get('name'))} {_rel(view.d(t).get('rel_l2'), view.d(t).get('note'))}"
                            for t in view.lst(c.get("top"))[:3])
            parts.append(f"<tr><td>{escape(view.text(c.get('step')))}</td><td>{escape(view.text(c.get('changed')))}</td>"
                         f"<td>{escape(view.text(c.get('identical')))}</td>"
                         f"<td>{len(view.lst(c.get('nonfinite_only_a')))}</td><td>{escape(top)}</td></tr>")
        parts.append("</tbody></table></div>")
    parts.append("</section>")
    return Markup("".join(parts))


def _rel(x: Any, note: Any = None) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return charts.fmt(float(x))
    return "(non-finite values)" if note and "non-finite" in str(note) else "n/a"

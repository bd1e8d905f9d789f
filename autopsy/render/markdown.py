"""Markdown report for pasting into a GitHub issue (``autopsy run --format md``).

Why it looks like this: an issue reader wants the verdict and what to do first, then the
evidence; everything else goes in ``<details>`` blocks. GitHub limits a comment to 65,536
characters, so the text stays under :data:`MAX_CHARS`, dropping the least useful blocks first.
Text from logs is escaped for where it lands, and only where a character would change the
rendering, so the raw text pasted into a ticket or read in a CI log stays readable
(``empty_response``, ``lr >= 1e-3``): Markdown text gets a backslash before ``< * ` | ~`` (no
HTML, autolink, emphasis, code span, table-cell break or strikethrough can form), before ``_``
at a word edge, before ``[`` when a link could form, before an entity-like ``&``, before the
``:`` of a URL scheme and the ``.`` of ``www.`` (no autolink), and before a leading ``# > - + =``
or ``1.`` (no heading, quote or list); ``@name`` gets ``&#64;`` (no one is pinged). Text inside raw
HTML (``<summary>``) gets HTML escaping only; fenced blocks use a fence longer than any backtick run.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

from autopsy.metrics import stand_in_losses
from autopsy.render import charts, comparison, view

#: GitHub rejects comments over 65,536 characters; keep a margin for the user's own words
MAX_CHARS = 60_000
#: one text field (message, evidence detail, log line) is cut here
MAX_FIELD = 600
MAX_FINDINGS = 30
MAX_EVIDENCE_ROWS = 12
MAX_TABLE_ROWS = 60
#: columns of the text sparkline of the loss curve
SPARK_WIDTH = 60
SPARK_LEVELS = "▁▂▃▄▅▆▇█"
NONFINITE_MARK = "✗"
SPARK_METRICS = ("loss", "eval_loss", "ppl", "eval_ppl", "grad_norm", "learning_rate", "loss_scale")
#: a backslash that would escape the next character (else it renders as itself and is left alone)
_MD_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
#: characters that change the rendering wherever they stand
_MD_ALWAYS = re.compile(r"([`*|~<])")
#: ``_`` opens or closes emphasis only at a word edge; ``snake_case`` renders as written
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_MD_ENTITY = re.compile(r"&(?=#?\w{1,32};)")
_MD_LINK_CLOSE = re.compile(r"\][(\[:]")
_MD_AUTOLINK = re.compile(r"(?i)(\b(?:https?|ftp))(:)(?=//)|(\bwww)(\.)")
_MD_MENTION = re.compile(r"@(?=\w)")
#: constructs that only a field starting a line can form: heading, quote, list item, setext line
_MD_LEADING = re.compile(r"^(\s*)([#>+=-]|\d{1,9}(?=[.)](?:\s|$)))")  # "0.01" is a number, "1. x" a list item
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def md(s: Any, limit: int = MAX_FIELD) -> str:
    """Inline Markdown text: renders as the literal characters, also inside a table cell."""
    t = _CONTROL.sub(" ", view.text(s)).replace("\r", " ").replace("\n", " ")
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return md_escape(t)


def md_escape(t: str) -> str:
    """Backslash-escape only the characters of one line of text that would change its rendering."""
    t = _MD_BACKSLASH.sub(r"\\\\", t)
    t = _MD_ALWAYS.sub(r"\\\1", t)
    t = _MD_UNDERSCORE.sub(r"\\_", t)
    t = _MD_ENTITY.sub(r"\\&", t)
    if "[" in t and (t.lstrip().startswith("[") or _MD_LINK_CLOSE.search(t)):
        t = t.replace("[", "\\[")
    t = _MD_AUTOLINK.sub(lambda m: (m[1] or m[3]) + "\\" + (m[2] or m[4]), t)
    m = _MD_LEADING.match(t)
    if m is not None:
        if m[2][0].isdigit():  # "1." / "1)" starts an ordered list: escape the dot
            end = m.end()
            t = t[:end] + "\\" + t[end:]
        else:
            t = t[:m.start(2)] + "\\" + t[m.start(2):]
    return _MD_MENTION.sub("&#64;", t)


def h(s: Any, limit: int = MAX_FIELD) -> str:
    """Text inside raw HTML (a ``<summary>``), where Markdown escapes are not processed."""
    t = _CONTROL.sub(" ", view.text(s)).replace("\n", " ")
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return html.escape(t, quote=True).replace("@", "&#64;")


def fence(body: str, info: str = "text") -> str:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    f = "`" * max(3, longest + 1)
    return f"{f}{info}\n{body}\n{f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows[:MAX_TABLE_ROWS]]
    if len(rows) > MAX_TABLE_ROWS:
        lines.append(f"| … {len(rows) - MAX_TABLE_ROWS} more rows in the HTML/JSON report |" + " |" * (len(header) - 1))
    return "\n".join(lines)


def sparkline(series: charts.Series, lo_step: int, hi_step: int, width: int = SPARK_WIDTH) -> tuple[str, str]:
    """One character per step bucket: the bucket's max (spikes survive), ✗ where any point is non-finite."""
    finite = [v for v in series.values if math.isfinite(v)]
    scale = charts.Scale(finite, 0.0, 1.0)
    buckets: list[list[float]] = [[] for _ in range(width)]
    span = max(hi_step - lo_step, 1)
    for s, v in zip(series.steps, series.values):
        buckets[min(width - 1, int((s - lo_step) / span * width))].append(v)
    out = []
    for b in buckets:
        if not b:
            out.append(" ")
        elif any(not math.isfinite(v) for v in b):
            out.append(NONFINITE_MARK)
        else:
            frac = 1.0 - scale.y(max(b))  # y() maps to [0, 1] top-down
            out.append(SPARK_LEVELS[min(len(SPARK_LEVELS) - 1, max(0, int(frac * len(SPARK_LEVELS))))])
    rng = f"{charts.fmt(min(finite))} .. {charts.fmt(max(finite))}" if finite else "no finite value"
    note = f"{scale.kind}, {rng}" + (f", {sum(1 for v in series.values if not math.isfinite(v))} non-finite" if len(finite) < len(series.values) else "")
    return "".join(out), note


def curves(report: dict[str, Any], onset: int | None) -> str:
    raw = view.d(view.d(report.get("run")).get("series"))
    loaded = [s for m in SPARK_METRICS if (s := charts.load_series(raw.get(m), m)) is not None]
    # a run logging no loss by that name: its own loss terms (faceswap's loss_A/loss_B) lead instead
    terms = {str(k): len(v.get("steps") or ()) for k, v in raw.items() if isinstance(v, dict)}
    loaded[:0] = [s for m in stand_in_losses(terms) if (s := charts.load_series(raw.get(m), m)) is not None]
    if not loaded:
        return ""
    lo = min(s.steps[0] for s in loaded)
    hi = max(s.steps[-1] for s in loaded)
    pad = max([13] + [len(s.name) for s in loaded])  # a stand-in loss name may be longer than the usual ones
    lines = []
    for s in loaded:
        spark, note = sparkline(s, lo, hi)
        lines.append(f"{s.name:<{pad}} {spark}  {note}")
    axis = [" "] * SPARK_WIDTH
    if onset is not None and lo <= onset <= hi:
        axis[min(SPARK_WIDTH - 1, int((onset - lo) / max(hi - lo, 1) * SPARK_WIDTH))] = "^"
    lines.append(f"{'':<{pad}} {''.join(axis)}")
    lines.append(f"{'':<{pad}} step {lo} .. {hi}" + (f"; ^ onset at step {onset}" if onset is not None else "")
                 + f"; {NONFINITE_MARK} = NaN/Inf in that stretch")
    return "### Curves\n\n" + fence("\n".join(lines))


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def finding_block(f: dict[str, Any]) -> str:
    summary = (f"<b>{h(f['severity'].upper())}</b> {h(f['code'])} {h(f['title'], 200)}"
               f" (confidence {h(charts.fmt(float(f['confidence'])))})")
    parts = [md(f["message"])]
    meta = [f"detector {md(f['name'])}"]
    if f["root_cause"]:
        meta.append(f"root cause {md(f['root_cause'])}")
    if f["first_step"] is not None:
        meta.append(f"from step {f['first_step']}")
    if f["basis"]:
        meta.append(f"basis {md(f['basis'])}")
    parts.append("*" + " · ".join(meta) + "*")
    if f["evidence"]:
        rows = [[md(e["artifact"], 200), md(e["where"], 120), md(e["detail"])] for e in f["evidence"][:MAX_EVIDENCE_ROWS]]
        parts.append(table(["artifact", "where", "what it says"], rows))
    if f["remedies"]:
        parts.append("**Remedies**\n\n" + "\n".join(f"- {md(r)}" for r in f["remedies"]))
    if f["references"]:
        refs = [f"- <{r['href']}>" if r["href"] else f"- {md(r['text'], 300)}" for r in f["references"]]
        parts.append("**References**\n\n" + "\n".join(refs))
    return _details(summary, "\n\n".join(parts))


def checkpoints_block(report: dict[str, Any]) -> str:
    ck = view.checkpoints(report)
    if not ck["rows"]:
        return ""
    rows = []
    for r in ck["rows"]:
        worst = max(r["cells"].items(), key=lambda kv: kv[1]["share"], default=None)
        rows.append([md(r["label"], 200) + (" **(last clean)**" if r["last_clean"] else ""),
                     str(r["step"]) if r["step"] is not None else "?", str(r["tensors"]), str(r["nonfinite_tensors"]),
                     str(r["nonfinite_values"]), "" if r["unchanged"] is None else str(r["unchanged"]),
                     md(worst[0], 120) + f" {worst[1]['share'] * 100:.3g}%" if worst else ""])
    head = f"Checkpoints ({len(rows)}; last clean: {h(ck['last_clean_label'] or 'none')})"
    return _details(head, table(["checkpoint", "step", "tensors", "non-finite tensors", "non-finite values",
                                 "unchanged vs previous", "worst layer"], rows))


def config_block(report: dict[str, Any]) -> str:
    cfg = view.config(report)
    rows = []
    for c in cfg["facts"] + cfg["versions"]:
        others = "; ".join(f"{md(view.value_text(o['value']), 80)} in {md(o['source'], 120)}" for o in c["others"])
        rows.append([md(c["key"], 120) + (" (cited)" if c["used"] else ""), md(view.value_text(c["value"]), 200),
                     md(c["source"], 200) + (f" {md(c['where'], 80)}" if c["where"] else ""), others])
    if not rows:
        return ""
    return _details(f"Configuration facts ({len(rows)})", table(["key", "value", "source", "disagreeing sources"], rows))


def inputs_block(report: dict[str, Any]) -> str:
    arts = [view.d(a) for a in view.lst(report.get("artifacts"))]
    dets = [view.d(x) for x in view.lst(report.get("detectors"))]
    parts = []
    problems = [a for a in arts if a.get("status") in ("unreadable", "partial")]
    if problems:
        parts.append(table(["artifact", "status", "problem"],
                           [[md(a.get("path"), 200), md(a.get("status")), md(a.get("problem"))] for a in problems]))
    notran = [x for x in dets if x.get("status") != "ran"]
    if notran:
        parts.append(table(["detector", "status", "why"],
                           [[md(f"{view.text(x.get('code'))} {view.text(x.get('name'))}"), md(x.get("status")),
                             md(x.get("reason"))] for x in notran]))
    read = sum(1 for a in arts if a.get("status") == "read")
    summary = (f"Inputs: {read} read, {len(problems)} unreadable or partial; detectors: "
               f"{sum(1 for x in dets if x.get('status') == 'ran')} ran, {len(notran)} skipped or failed")
    return _details(h(summary), "\n\n".join(parts) or "Everything found was read; every detector ran.")


def render(report: dict[str, Any]) -> str:
    v = view.verdict(report)
    onset = view.onset_step(report)
    head = [f"## autopsy: {v['status_word'].upper()}: {md(v['root_cause_text'], 300)}",
            f"Root cause **{md(v['root_cause'], 80)}** · confidence **{v['confidence_pct']}**"
            + (f" · onset at step **{onset}**" if onset is not None else "")]
    if v["headline"]:
        head.append(f"> {md(v['headline'])}")
    remedies = view.top_remedies(report)
    if remedies:
        head.append("### What to do\n\n" + "\n".join(f"{i}. {md(r)}" for i, r in enumerate(remedies, 1)))
    chain = [view.d(c) for c in view.lst(report.get("chain"))]
    if chain:
        rows = [[view.when(c, ""),
                 md(c.get("text")), md(c.get("artifact"), 200), md(c.get("where"), 120)] for c in chain]
        head.append("### Evidence\n\n" + table(["step", "what", "artifact", "where"], rows))
    timeline = [view.d(t) for t in view.lst(report.get("timeline"))]
    if timeline:
        rows = [[view.when(t, "", "?", "?"),
                 md(t.get("role"), 40), md(t.get("text")), md(t.get("symptom"), 60), md(t.get("artifact"), 200)]
                for t in timeline]
        head.append("### Anomalies in time order\n\n" + table(["step", "role", "anomaly", "observed", "artifact"], rows))
    blocks = [comparison.markdown_block(report), curves(report, onset)]  # comparison: only with a baseline
    fs = view.findings(report)
    if fs:
        blocks.append(f"### Findings ({len(fs)})\n\n" + "\n\n".join(finding_block(f) for f in fs[:MAX_FINDINGS])
                      + (f"\n\n{len(fs) - MAX_FINDINGS} more findings in the HTML/JSON report." if len(fs) > MAX_FINDINGS else ""))
    blocks += [checkpoints_block(report), config_block(report), inputs_block(report)]
    tool = view.d(report.get("tool"))
    foot = ("<sub>Produced by " + h(view.text(report.get("command")) or "autopsy", 1000) +
            f" · {h(tool.get('name') or 'autopsy')} {h(tool.get('version'))}</sub>")
    return assemble(head, [b for b in blocks if b], foot)


def assemble(head: list[str], blocks: list[str], foot: str) -> str:
    """Head always; then blocks in order while they fit under MAX_CHARS; a note says what was left out."""
    out = "\n\n".join(head)
    if len(out) > MAX_CHARS - 2000:
        out = out[: MAX_CHARS - 2000].rsplit("\n", 1)[0]
    dropped = 0
    for b in blocks:
        if len(out) + len(b) + len(foot) + 300 < MAX_CHARS:
            out += "\n\n" + b
        else:
            dropped += 1
    if dropped:
        out += f"\n\n*{dropped} section(s) left out to stay under {MAX_CHARS} characters: see the HTML or JSON report.*"
    return out + "\n\n" + foot + "\n"

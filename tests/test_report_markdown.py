"""Markdown report: verdict and remedies first, escaped for GitHub, under the size limit."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from report_factory import failing_report, healthy_report
from test_report_html import parse

from autopsy.render import markdown


def to_html(text: str) -> str:
    # CommonMark + GFM tables with raw HTML on, as GitHub renders issues (before its sanitizer)
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def test_order_verdict_remedies_evidence_details():
    md = markdown.render(failing_report())
    assert md.startswith("## autopsy: FAILED: fp16 range overflow")
    i_todo, i_ev, i_curve, i_det = (md.index("### What to do"), md.index("### Evidence"), md.index("### Curves"),
                                    md.index("<details>"))
    assert i_todo < i_ev < i_curve < i_det
    assert "1. set torch_dtype=auto or bf16; resume from checkpoint-200" in md
    assert "onset at step **300**" in md and "confidence **90%**" in md


def test_curve_sparkline_marks_nonfinite_where_it_happened():
    md = markdown.render(failing_report())
    block = re.search(r"```text\n(.*?)\n```", md, re.DOTALL).group(1).splitlines()
    loss = next(ln for ln in block if ln.startswith("loss "))
    spark = loss[14: 14 + markdown.SPARK_WIDTH]
    # steps 1..400 over 60 columns: NaN loss at 305, 306 -> column 45, 307 -> 46; the 1.19e34 spike at 300 -> 44
    assert [i for i, c in enumerate(spark) if c == markdown.NONFINITE_MARK] == [45, 46]
    assert spark[44] == "█" and "symlog" in loss
    grad = next(ln for ln in block if ln.startswith("grad_norm "))[14: 14 + markdown.SPARK_WIDTH]
    assert grad[:44].count(markdown.NONFINITE_MARK) == 0 and set(grad[45:]) == {markdown.NONFINITE_MARK}
    assert "^ onset at step 300" in block[-1]
    healthy = markdown.render(healthy_report())
    assert markdown.NONFINITE_MARK + " " not in re.search(r"```text\n(.*?)```", healthy, re.DOTALL).group(1).split("step")[0]


def test_hostile_text_stays_text_in_rendered_markdown():
    md = markdown.render(failing_report(hostile=True))
    out = parse(to_html(md))
    names = {t for t, _ in out.tags}
    assert not names & {"script", "img", "iframe", "style"}
    assert not any(k.startswith("on") for _, a in out.tags for k in a)
    hrefs = [a.get("href") for t, a in out.tags if t == "a"]
    assert hrefs and all(h == "https://github.com/hiyouga/LlamaFactory/issues/4202" for h in hrefs)
    text = "".join(out.text)
    assert "<script>document.body.setAttribute('data-pwned','1')</script>" in text
    assert "[click](javascript:alert(1))" in text and "**bold**" in text and "{{ 7*7 }}" in text
    assert "@octocat" not in md  # nobody gets pinged


def test_pipes_and_backticks_do_not_break_tables():
    md = markdown.render(failing_report(hostile=True))
    rendered = to_html(md)
    # every row of every table keeps its column count despite | and ` in the cells
    for table in re.findall(r"<table>(.*?)</table>", rendered, re.DOTALL):
        widths = {len(re.findall(r"<t[hd]>", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)}
        assert len(widths) == 1, widths


def test_size_limit_with_a_huge_report():
    report = failing_report(n_steps=5000, onset=4000, n_findings=4)
    long = "x" * 5000
    report["findings"] = [dict(report["findings"][0], message=long, code=f"C{i}",
                               evidence=report["findings"][0]["evidence"] * 20) for i in range(200)]
    report["artifacts"] = [{"path": f"f{i}/" + "y" * 300, "kind": "k", "status": "unreadable", "problem": long}
                           for i in range(500)]
    md = markdown.render(report)
    assert len(md) < markdown.MAX_CHARS
    assert md.startswith("## autopsy: FAILED") and "### What to do" in md and "### Curves" in md
    assert "left out to stay under" in md or "more findings in the HTML/JSON report" in md


def test_fence_is_longer_than_any_backtick_run():
    assert markdown.fence("a ```` b").startswith("`````text\n")

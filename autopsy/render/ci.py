"""CI outputs: GitHub Actions annotations (``--format github``) and SARIF 2.1.0 (``--format sarif``).

Why both: annotations show a failed training job's findings inline on the workflow run page with no
upload step, and the Markdown report lands in the job summary; SARIF is what code-scanning
dashboards (``github/codeql-action/upload-sarif``) and other SARIF viewers ingest, with stable rule
ids (detector codes) and fingerprints so the same finding is tracked across runs.

Both render the canonical report dict only. Locations are the artifact files the evidence cites
(a log line when the evidence names one), relative to the current directory (the checkout) when
the run is inside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from autopsy.render import view

SARIF_VERSION = "2.1.0"
#: the OASIS errata01 schema, the one kept in tests/fixtures and validated against
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
GITHUB_LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "notice"}
SARIF_LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "note"}
#: "line 123" in an evidence's ``where`` (text logs, jsonl) is the location's line
_LINE = re.compile(r"\bline (\d+)\b")
#: GitHub truncates an annotation message; keep ours short and complete
MAX_ANNOTATION = 1500


def _escape_data(s: str) -> str:
    """Workflow-command data escaping (actions/toolkit, core/src/command.ts: escapeData)."""
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    """Workflow-command property escaping (actions/toolkit escapeProperty): also ':' and ','."""
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _location(report: dict[str, Any], finding: dict[str, Any]) -> tuple[str | None, int | None]:
    """(path for the CI, line) of the first evidence that names a file of the run."""
    root = Path(view.text(view.d(report.get("run")).get("root")) or ".")
    for e in finding["evidence"]:
        art = e["artifact"]
        if not art or art.startswith("("):
            continue
        m = _LINE.search(e["where"])
        return _ci_path(root / art if not Path(art).is_absolute() else Path(art)), int(m.group(1)) if m else None
    return (_ci_path(root), None) if str(root) else (None, None)


def _ci_path(p: Path) -> str:
    """Relative to the working directory (the checkout) when inside it, else absolute; posix separators."""
    try:
        return Path(os.path.relpath(p.resolve(), Path.cwd().resolve())).as_posix() if _inside(p) else p.resolve().as_posix()
    except (OSError, ValueError):
        return p.as_posix()


def _inside(p: Path) -> bool:
    try:
        p.resolve().relative_to(Path.cwd().resolve())
        return True
    except (ValueError, OSError):
        return False


def github(report: dict[str, Any]) -> str:
    """One ``::error``/``::warning``/``::notice`` workflow command per finding, then one for the verdict."""
    lines = []
    for f in view.findings(report):
        path, line = _location(report, f)
        props = ["title=" + _escape_property(f"{f['code']} {f['name']}")]
        if path:
            props.insert(0, f"file={_escape_property(path)}")
            if line:
                props.insert(1, f"line={line}")
        msg = f["title"] + (f": {f['message']}" if f["message"] else "")
        if f["remedies"]:
            msg += f"\nFix: {f['remedies'][0]}"
        lines.append(f"::{GITHUB_LEVEL[f['severity']]} {','.join(props)}::{_escape_data(msg[:MAX_ANNOTATION])}")
    v = view.verdict(report)
    level = {"failed": "error", "inconclusive": "warning"}.get(v["status"], "notice")
    lines.append(f"::{level} title={_escape_property('autopsy verdict')}::"
                 + _escape_data(f"{v['status_word']}: {v['root_cause']} ({v['confidence_pct']}). {v['headline']}"))
    return "\n".join(lines) + "\n"


def append_step_summary(report: dict[str, Any], env: dict[str, str] | None = None) -> Path | None:
    """Append the Markdown report to ``$GITHUB_STEP_SUMMARY`` when set; returns the file written."""
    target = (env if env is not None else os.environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    from autopsy.render import markdown

    with open(target, "a", encoding="utf-8") as fh:
        fh.write(markdown.render(report) + "\n")
    return Path(target)


def _rule(code: str, f: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = {"id": code, "name": f["name"] or code,
                            "shortDescription": {"text": f["title"] or code},
                            "defaultConfiguration": {"level": SARIF_LEVEL[f["severity"]]},
                            "properties": {"tags": ["training-failure"] + ([f["root_cause"]] if f["root_cause"] else [])}}
    try:
        from detectors import by_code
        from detectors.base import doc_sections

        m = by_code(code)
    except Exception:  # noqa: BLE001 - rule docs are a nicety; the result stands without them
        m = None
    if m is not None:
        secs = doc_sections(m)
        if secs.get("summary"):
            rule["fullDescription"] = {"text": " ".join(secs["summary"].split())}
        help_text = "\n\n".join(f"{h}:\n{secs[h].strip()}" for h in secs if h != "summary" and secs.get(h))
        if help_text:
            rule["help"] = {"text": help_text}
    return rule


def sarif(report: dict[str, Any]) -> dict[str, Any]:
    """The SARIF 2.1.0 log: one run, one rule per detector code seen, one result per finding."""
    tool = view.d(report.get("tool"))
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results = []
    for f in view.findings(report):
        code = f["code"] or "AUTOPSY"
        if code not in index:
            index[code] = len(rules)
            rules.append(_rule(code, f))
        path, line = _location(report, f)
        phys: dict[str, Any] = {"artifactLocation": {"uri": _uri(path or ".")}}
        if line:
            phys["region"] = {"startLine": line}
        text = f["title"] + (f": {f['message']}" if f["message"] else "")
        if f["remedies"]:
            text += " Fix: " + f["remedies"][0]
        ev = "|".join(f"{e['artifact']}@{e['where']}" for e in f["evidence"][:3])
        results.append({
            "ruleId": code, "ruleIndex": index[code], "level": SARIF_LEVEL[f["severity"]], "message": {"text": text},
            "locations": [{"physicalLocation": phys}],
            "partialFingerprints": {"autopsyFinding/v1": hashlib.sha256(f"{code}|{ev}".encode()).hexdigest()[:32]},
            "properties": {"root_cause": f["root_cause"] or None, "confidence": f["confidence"],
                           "first_step": f["first_step"], "basis": f["basis"] or None,
                           "evidence": [f"{e['artifact']} {e['where']}: {e['detail']}" for e in f["evidence"][:10]]},
        })
    v = view.verdict(report)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "autopsy", "version": view.text(tool.get("version")) or "0",
                            "semanticVersion": view.text(tool.get("version")) or "0", "rules": rules}},
        "results": results,
        "invocations": [{"executionSuccessful": True,
                         **({"commandLine": report["command"]} if isinstance(report.get("command"), str) else {})}],
        "properties": {"verdict": {"status": v["status"], "root_cause": v["root_cause"],
                                   "confidence": v["confidence"], "headline": v["headline"]}},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _uri(path: str) -> str:
    """A relative path as a URI reference (percent-encoded), an absolute one as a file: URI."""
    from urllib.parse import quote

    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(path, safe="/._-~")


def render_sarif(report: dict[str, Any]) -> str:
    return json.dumps(sarif(report), indent=2, ensure_ascii=False) + "\n"

"""``autopsy known-issues`` and ``autopsy preflight`` (registered in autopsy/cli.py).

known-issues: list the knowledge base (one line per entry: id, summary, packages and ranges), or with
``--match PATH`` read a run and show which entries match it and why. Exit 0 listed / nothing matched,
1 a direct or candidate match, 2 usage error.

preflight: before a run starts, read its config files and this environment (installed versions via
importlib.metadata, the GPU torch sees) and report the config-certain defects the detectors already
know plus the known bugs this stack is exposed to. Exit 0 clean, 1 a defect, 2 usage error
(a missing or unreadable config).

``python -m autopsy.known_issues.cli --write-docs`` regenerates the entry list in docs/known-issues.md.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autopsy.known_issues.match import Match, match_run
from autopsy.known_issues.schema import Entry, load_entries, version_fact_key
from autopsy.model import Finding, Run

#: distributions whose installed version preflight records (pip names; the fact is version.<name>)
ENV_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "flash-attn", "bitsandbytes",
                "vllm", "verl", "ms-swift", "llamafactory", "megatron-core", "liger-kernel", "datasets")
#: the detectors whose config-only part preflight runs (each is a pure function of the Run, so a Run that
#: holds only config facts gets exactly the findings a full analysis would give for the config)
PREFLIGHT_DETECTORS = ("empty_response", "padding_free", "lora_task_type", "bf16_hardware", "fp16_hardware")
DOCS_BEGIN, DOCS_END = "<!-- BEGIN GENERATED LIST -->\n", "<!-- END GENERATED LIST -->"


def _err(msg: str) -> None:
    sys.stderr.write(f"autopsy: error: {msg}\n")


# -- known-issues --------------------------------------------------------------------------------

def entry_line(e: Entry) -> str:
    return f"{e.id:<22} {e.summary}  [{e.ranges_text()}]"


def known_issues_command(package: str | None = None, match: Path | None = None, fmt: str = "text") -> int:
    if fmt not in ("text", "json"):
        _err(f"unknown format {fmt!r} (use text or json)")
        return 2
    res = load_entries()
    entries = res.entries
    if package:
        want = package.strip().lower().replace("_", "-")
        entries = [e for e in entries if any(a.package.lower().replace("_", "-") == want for a in e.affected)]
        if not entries:
            known = sorted({a.package for e in res.entries for a in e.affected})
            _err(f"no entry for package {package!r} (packages: {', '.join(known)})")
            return 2
    for name, why in res.problems:
        sys.stderr.write(f"autopsy: warning: skipped {name}: {why}\n")
    if match is None:
        if fmt == "json":
            sys.stdout.write(json.dumps({"entries": [e.to_json() for e in entries]}, indent=2) + "\n")
        else:
            for e in entries:
                sys.stdout.write(entry_line(e) + "\n")
            sys.stdout.write(f"{len(entries)} entries\n")
        return 0
    if not match.exists():
        _err(f"{match}: no such file or directory")
        return 2
    from autopsy.pipeline import read_run

    run, _ = read_run(match, with_checkpoints=False)
    found = match_run(run, entries)
    if fmt == "json":
        sys.stdout.write(json.dumps({"path": str(match), "matches": [m.to_json() for m in found]}, indent=2) + "\n")
    else:
        if not found:
            sys.stdout.write(f"{match}: no known issue matches\n")
        for m in found:
            sys.stdout.write(_match_text(m))
    return 1 if any(m.level in ("direct", "candidate") for m in found) else 0


def _match_text(m: Match) -> str:
    e = m.entry
    lines = [f"{m.level.upper():<9} {e.id}: {e.summary}"]
    lines += [f"          - {w}" for w in m.why()]
    for v in m.to_check():
        lines.append(f"          check: installed {v.affected.package} "
                     f"({'affected ' + v.affected.ranges if v.affected.ranges else 'any version'})")
    for c in m.unknown:
        lines.append(f"          check: {c.describe()}")
    lines.append(f"          fixed in: {e.fixed_in}")
    lines.append(f"          remedy: {e.remedy}")
    lines.append(f"          refs: {', '.join(e.reference_urls())}")
    return "\n".join(lines) + "\n"


# -- preflight -----------------------------------------------------------------------------------

def installed_versions(packages: Sequence[str] = ENV_PACKAGES) -> dict[str, str]:
    """pip name -> installed version, for the packages present in this environment."""
    from importlib import metadata

    out: dict[str, str] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken dist-info must not stop the check
            continue
    return out


def gpu_name() -> str | None:
    """The first GPU torch sees (None without torch or without a GPU). Imports torch: only preflight calls it."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - torch missing or broken: no GPU facts
        return None
    try:
        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:  # noqa: BLE001
        return None
    return None


def preflight_run(configs: Sequence[Path], use_env: bool = True) -> tuple[Run, list[str]]:
    """A Run holding only config facts: this environment's versions and GPU first (what will actually
    run), then every fact of the given config files (and of a DeepSpeed JSON they name). Returns the
    Run and the problems met reading the configs."""
    from autopsy.pipeline import read_run

    run = Run(root=Path.cwd())
    problems: list[str] = []
    if use_env:
        for pkg, ver in installed_versions().items():
            run.config.add(version_fact_key(pkg), ver, "environment", "importlib.metadata", pkg)
        gpu = gpu_name()
        if gpu:
            run.config.add("gpu.name", gpu, "environment", "torch.cuda.get_device_name(0)", "gpu")
    queue = list(configs)
    seen: set[Path] = set()
    while queue:
        path = queue.pop(0)
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        sub, _ = read_run(path, with_checkpoints=False)
        for f in sub.config:
            source = str(path) if path.is_file() else str(path / f.source)
            run.config.add(f.key, f.value, source, f.where, f.original_key)
        for a in sub.problems:
            problems.append(f"{path if path.is_file() else path / a.path}: {a.problem}")
        for fw in sub.frameworks:
            run.add_framework(fw)
        for f in sub.config.facts("deepspeed"):  # LLaMA-Factory / HF args name the DeepSpeed JSON
            if isinstance(f.value, str) and f.value.endswith(".json"):
                base = path.parent if path.is_file() else path
                for cand in (base / f.value, Path(f.value)):
                    if cand.is_file():
                        queue.append(cand)
                        break
    return run, problems


def preflight_findings(run: Run) -> tuple[list[Finding], list[Match]]:
    """Config-certain defects from the config detectors, and the knowledge-base entries this stack is exposed to."""
    import importlib

    findings: list[Finding] = []
    for name in PREFLIGHT_DETECTORS:
        mod = importlib.import_module(f"detectors.{name}")
        findings.extend(f for f in mod.detect(run) if f.severity in ("warning", "error", "critical"))
    matches = [m for m in match_run(run) if m.level in ("info", "candidate", "direct")]
    return findings, matches


def preflight_command(configs: Sequence[Path], fmt: str = "text", use_env: bool = True) -> int:
    if fmt not in ("text", "json"):
        _err(f"unknown format {fmt!r} (use text or json)")
        return 2
    missing = [p for p in configs if not p.exists()]
    if missing:
        _err(f"{missing[0]}: no such file or directory (give the run's config files: TrainingArguments/TRL "
             "JSON or YAML, LLaMA-Factory YAML, ms-swift args.json, DeepSpeed JSON, adapter_config.json)")
        return 2
    run, problems = preflight_run(configs, use_env=use_env)
    if configs and problems and not [f for f in run.config if f.source != "environment"]:
        for p in problems:
            _err(p)
        return 2
    findings, matches = preflight_findings(run)
    ok = not findings and not matches
    if fmt == "json":
        doc: dict[str, Any] = {
            "status": "clean" if ok else "defects",
            "configs": [str(p) for p in configs], "problems": problems,
            "environment": {f.original_key: f.value for f in run.config if f.source == "environment"},
            "defects": [f.to_json() for f in findings],
            "known_issues": [m.to_json() for m in matches],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0 if ok else 1
    env = [f"{f.original_key} {f.value}" for f in run.config if f.source == "environment"]
    if env:
        sys.stdout.write("environment: " + ", ".join(env) + "\n")
    for p in problems:
        sys.stdout.write(f"warning: {p}\n")
    for f in findings:
        sys.stdout.write(f"{f.severity.upper():<8} {f.code} {f.title}\n         {f.message}\n")
        for ev in f.evidence[:4]:
            sys.stdout.write(f"         - {ev.artifact} ({ev.where}): {ev.detail}\n")
        for r in f.remedies[:2]:
            sys.stdout.write(f"         fix: {r}\n")
    for m in matches:
        e = m.entry
        sys.stdout.write(f"KNOWN    {e.id} {e.summary}\n")
        for w in m.why()[:4]:
            sys.stdout.write(f"         - {w}\n")
        sys.stdout.write(f"         fixed in: {e.fixed_in}\n         fix: {e.remedy}\n")
    sys.stdout.write("preflight: clean\n" if ok else
                     f"preflight: {len(findings)} config defect(s), {len(matches)} known issue(s)\n")
    return 0 if ok else 1


# -- docs ----------------------------------------------------------------------------------------

def generated_list(entries: Sequence[Entry]) -> str:
    """The Markdown table of docs/known-issues.md (checked against the entries by a test)."""
    rows = ["| id | summary | affected | fixed in |", "|---|---|---|---|"]
    for e in entries:
        cell = lambda s: re.sub(r"\s+", " ", s).replace("|", "\\|")  # noqa: E731
        rows.append(f"| {e.id} | {cell(e.summary)} | {cell(e.ranges_text())} | {cell(e.fixed_in)} |")
    return "\n".join(rows) + "\n"


def write_docs(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    end = text.index(DOCS_END)
    path.write_text(text[:start] + generated_list(load_entries().entries) + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-docs"]:
        write_docs(Path(__file__).resolve().parents[2] / "docs" / "known-issues.md")
    else:
        sys.stderr.write("usage: python -m autopsy.known_issues.cli --write-docs\n")
        sys.exit(2)

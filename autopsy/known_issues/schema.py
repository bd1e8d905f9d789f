"""Known-issue entries: one YAML file per framework bug, read and validated into :class:`Entry`.

Field names follow OSV advisories where they fit (``id``, ``summary``, ``details``, ``affected``
with a package and its version ranges, ``references`` with ``type``/``url``,
``database_specific``) so an entry reads like a pip-audit advisory; the fields OSV has no word for
(``conditions`` on config facts, ``signatures`` in logs and curves, ``fixed_in``, ``remedy``) are
ours. Ranges are PEP 440 specifier sets (``">=0.12.4,<0.14.2"``), checked with
:mod:`packaging.specifiers`.

Validation is strict and total: :func:`validate` returns every problem of an entry as a sentence,
so a test can fail on a bad file and the runtime can skip it with a recorded reason instead of
crashing (:func:`load_entries`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

#: ``KI-<PACKAGE>-<NNN>``: stable, short, names the package whose bug it is
ID_RE = re.compile(r"KI-[A-Z][A-Z0-9]*-\d{3}")
#: OSV reference types (https://ossf.github.io/osv-schema/#references-field)
REFERENCE_TYPES = ("REPORT", "FIX", "ARTICLE", "WEB", "DISCUSSION", "PACKAGE", "EVIDENCE", "INTRODUCED")
#: comparison operators a condition may use on a config fact
CONDITION_OPS = ("equals", "in", "not_in", "regex", "gt", "gte", "lt", "lte")
TOP_FIELDS = {"id", "summary", "details", "affected", "fixed_in", "conditions", "signatures", "remedy",
              "references", "database_specific", "aliases", "published"}
REQUIRED = ("id", "summary", "details", "affected", "fixed_in", "signatures", "remedy", "references")
CANDIDATE_SEVERITIES = ("error", "warning")


@dataclass(frozen=True)
class Affected:
    """One package and the versions that have the bug (PEP 440; empty = every version)."""

    package: str  # distribution name as pip spells it: deepspeed, transformers, torch, ms-swift
    ranges: str  # PEP 440 specifier set; "" = all versions known to have it (no fixed release)
    ecosystem: str = "PyPI"

    @property
    def fact_key(self) -> str:
        """The config fact holding this package's version: ``version.ms_swift`` for ``ms-swift``."""
        return version_fact_key(self.package)


@dataclass(frozen=True)
class Condition:
    """A requirement on one config fact (``deepspeed.zero_stage`` in [2]).

    ``optional`` conditions do not block a candidate when the fact is unknown; a known fact that
    fails any condition rules the entry out.
    """

    fact: str
    op: str
    value: Any
    optional: bool = False

    def describe(self) -> str:
        word = {"equals": "=", "in": "in", "not_in": "not in", "regex": "matches", "gt": ">", "gte": ">=",
                "lt": "<", "lte": "<="}[self.op]
        return f"{self.fact} {word} {self.value}"


@dataclass(frozen=True)
class Signatures:
    events: tuple[str, ...] = ()  # regexes over event messages (any event kind)
    shapes: tuple[str, ...] = ()  # names from autopsy.known_issues.shapes.SHAPES
    #: "any": one event or one shape is the signature; "all": an event AND a shape (a message that
    #: healthy runs print too, e.g. Megatron's "number of nan iterations: 0", needs its shape)
    match: str = "any"


@dataclass(frozen=True)
class Entry:
    id: str
    summary: str
    details: str
    affected: tuple[Affected, ...]
    fixed_in: str
    remedy: str
    references: tuple[tuple[str, str], ...]  # (type, url)
    signatures: Signatures
    conditions: tuple[Condition, ...] = ()
    aliases: tuple[str, ...] = ()
    #: severity of a candidate (signature + conditions, versions unknown); None = by signature kind
    candidate_severity: str | None = None
    #: a detector that already reports this pattern on runs (FW001 then stays silent on runs;
    #: preflight and ``known-issues --match`` still name the entry)
    covered_by: str | None = None
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def packages(self) -> list[str]:
        return [a.package for a in self.affected]

    def ranges_text(self) -> str:
        return "; ".join(f"{a.package} {a.ranges or '(all versions)'}" for a in self.affected)

    def reference_urls(self) -> list[str]:
        return [u for _, u in self.references]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "summary": self.summary, "details": self.details, "aliases": list(self.aliases),
            "affected": [{"package": {"ecosystem": a.ecosystem, "name": a.package}, "ranges": a.ranges,
                          "fact": a.fact_key} for a in self.affected],
            "fixed_in": self.fixed_in,
            "conditions": [{"fact": c.fact, c.op: c.value, "optional": c.optional} for c in self.conditions],
            "signatures": {"events": list(self.signatures.events), "shapes": list(self.signatures.shapes),
                           "match": self.signatures.match},
            "remedy": self.remedy, "references": [{"type": t, "url": u} for t, u in self.references],
            "database_specific": {k: v for k, v in (("candidate_severity", self.candidate_severity),
                                                    ("covered_by", self.covered_by)) if v},
            "path": self.path,
        }


def version_fact_key(package: str) -> str:
    """``flash-attn`` -> ``version.flash_attn``; ``ms-swift`` -> ``version.ms_swift`` (lower-case, ``-``/``.`` -> ``_``)."""
    return "version." + re.sub(r"[-.]", "_", package.strip().lower())


# -- validation --------------------------------------------------------------------------------

def validate(doc: Any, where: str = "entry") -> list[str]:
    """Every problem of one parsed entry document, as sentences (empty = valid)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from autopsy.known_issues.shapes import SHAPES

    if not isinstance(doc, dict):
        return [f"{where}: top level is a {type(doc).__name__}, expected a mapping"]
    errs: list[str] = []
    for k in REQUIRED:
        if k not in doc or doc[k] in (None, "", [], {}):
            errs.append(f"{where}: missing required field {k!r}")
    for k in doc:
        if k not in TOP_FIELDS:
            errs.append(f"{where}: unknown field {k!r} (known: {', '.join(sorted(TOP_FIELDS))})")
    eid = doc.get("id")
    if eid is not None and (not isinstance(eid, str) or not ID_RE.fullmatch(eid)):
        errs.append(f"{where}: id {eid!r} is not of the form KI-<PACKAGE>-<NNN>")
    for k in ("summary", "details", "remedy", "fixed_in"):
        if k in doc and not isinstance(doc[k], str):
            errs.append(f"{where}: {k} must be a string")
    aff = doc.get("affected")
    if aff is not None:
        if not isinstance(aff, list) or not aff:
            errs.append(f"{where}: affected must be a non-empty list")
        else:
            for i, a in enumerate(aff):
                if not isinstance(a, dict) or not isinstance(a.get("package"), str) or not a["package"].strip():
                    errs.append(f"{where}: affected[{i}] needs a package name")
                    continue
                rng = a.get("ranges", "")
                if not isinstance(rng, str):
                    errs.append(f"{where}: affected[{i}].ranges must be a PEP 440 specifier string")
                    continue
                try:
                    SpecifierSet(rng)
                except InvalidSpecifier as exc:
                    errs.append(f"{where}: affected[{i}].ranges {rng!r} is not a PEP 440 specifier set ({exc})")
                for k in a:
                    if k not in ("package", "ranges", "ecosystem"):
                        errs.append(f"{where}: affected[{i}] has unknown field {k!r}")
    conds = doc.get("conditions", [])
    if conds is not None and not isinstance(conds, list):
        errs.append(f"{where}: conditions must be a list")
    else:
        for i, c in enumerate(conds or []):
            if not isinstance(c, dict) or not isinstance(c.get("fact"), str):
                errs.append(f"{where}: conditions[{i}] needs a fact name")
                continue
            ops = [k for k in c if k in CONDITION_OPS]
            extra = [k for k in c if k not in CONDITION_OPS and k not in ("fact", "optional")]
            if len(ops) != 1:
                errs.append(f"{where}: conditions[{i}] ({c['fact']}) needs exactly one of {', '.join(CONDITION_OPS)}")
            if extra:
                errs.append(f"{where}: conditions[{i}] has unknown field(s) {extra}")
            for op in ops:
                v = c[op]
                if op in ("in", "not_in") and not isinstance(v, list):
                    errs.append(f"{where}: conditions[{i}].{op} must be a list")
                if op in ("gt", "gte", "lt", "lte") and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    errs.append(f"{where}: conditions[{i}].{op} must be a number")
                if op == "regex":
                    errs.extend(_regex_problem(v, f"{where}: conditions[{i}].regex"))
    sig = doc.get("signatures")
    if sig is not None:
        if not isinstance(sig, dict):
            errs.append(f"{where}: signatures must be a mapping with events and/or shapes")
        else:
            for k in sig:
                if k not in ("events", "shapes", "match"):
                    errs.append(f"{where}: signatures has unknown field {k!r}")
            events, shapes = sig.get("events") or [], sig.get("shapes") or []
            if not events and not shapes:
                errs.append(f"{where}: signatures needs at least one event regex or metric shape")
            if sig.get("match", "any") not in ("any", "all"):
                errs.append(f"{where}: signatures.match must be 'any' or 'all'")
            elif sig.get("match") == "all" and not (events and shapes):
                errs.append(f"{where}: signatures.match 'all' needs both events and shapes")
            for j, rx in enumerate(events if isinstance(events, list) else [None]):
                errs.extend(_regex_problem(rx, f"{where}: signatures.events[{j}]"))
            for s in shapes if isinstance(shapes, list) else [None]:
                if s not in SHAPES:
                    errs.append(f"{where}: unknown metric shape {s!r} (known: {', '.join(sorted(SHAPES))})")
    refs = doc.get("references")
    if refs is not None:
        if not isinstance(refs, list) or not refs:
            errs.append(f"{where}: references must be a non-empty list")
        else:
            for i, r in enumerate(refs):
                if not isinstance(r, dict) or r.get("type") not in REFERENCE_TYPES or \
                        not isinstance(r.get("url"), str) or not r["url"].startswith("https://"):
                    errs.append(f"{where}: references[{i}] needs type in {REFERENCE_TYPES} and an https url")
    ds = doc.get("database_specific")
    if ds is not None:
        if not isinstance(ds, dict):
            errs.append(f"{where}: database_specific must be a mapping")
        else:
            sev = ds.get("candidate_severity")
            if sev is not None and sev not in CANDIDATE_SEVERITIES:
                errs.append(f"{where}: database_specific.candidate_severity must be one of {CANDIDATE_SEVERITIES}")
            cov = ds.get("covered_by")
            if cov is not None and (not isinstance(cov, str) or not re.fullmatch(r"[A-Z]+\d{3}", cov)):
                errs.append(f"{where}: database_specific.covered_by must be a detector code like PACK001")
    return errs


def _regex_problem(rx: Any, where: str) -> list[str]:
    if not isinstance(rx, str) or not rx:
        return [f"{where}: must be a non-empty regex string"]
    try:
        re.compile(rx)
    except re.error as exc:
        return [f"{where}: invalid regex {rx!r} ({exc})"]
    return []


def build(doc: dict[str, Any], path: str = "") -> Entry:
    """An :class:`Entry` from a document that :func:`validate` accepted."""
    conds = []
    for c in doc.get("conditions") or []:
        op = next(k for k in c if k in CONDITION_OPS)
        conds.append(Condition(c["fact"], op, c[op], bool(c.get("optional", False))))
    sig = doc["signatures"]
    ds = doc.get("database_specific") or {}
    return Entry(
        id=doc["id"], summary=doc["summary"].strip(), details=doc["details"].strip(),
        affected=tuple(Affected(a["package"].strip(), a.get("ranges", "") or "", a.get("ecosystem", "PyPI"))
                       for a in doc["affected"]),
        fixed_in=doc["fixed_in"].strip(), remedy=doc["remedy"].strip(),
        references=tuple((r["type"], r["url"]) for r in doc["references"]),
        signatures=Signatures(tuple(sig.get("events") or ()), tuple(sig.get("shapes") or ()), sig.get("match", "any")),
        conditions=tuple(conds), aliases=tuple(doc.get("aliases") or ()),
        candidate_severity=ds.get("candidate_severity"), covered_by=ds.get("covered_by"), path=path,
        extra={k: v for k, v in ds.items() if k not in ("candidate_severity", "covered_by")},
    )


@dataclass
class LoadResult:
    entries: list[Entry]
    problems: list[tuple[str, str]]  # (file, why it was skipped)


def entries_dir() -> Path:
    return Path(str(resources.files("autopsy.known_issues") / "entries"))


def load_file(path: Path) -> tuple[Entry | None, list[str]]:
    """One entry file: (entry, []) or (None, its problems). Never raises."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path.name}: unreadable ({exc})"]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [f"{path.name}: invalid YAML ({str(exc).splitlines()[0]})"]
    errs = validate(doc, path.name)
    if not errs and doc["id"] != path.stem:
        errs.append(f"{path.name}: the file name must be the entry id ({doc['id']}.yaml)")
    if errs:
        return None, errs
    return build(doc, path.name), []


_CACHE: dict[str, LoadResult] = {}


def load_entries(directory: Path | None = None) -> LoadResult:
    """Every valid entry of the knowledge base (sorted by id), and the files skipped with why.

    A bad entry never takes the analysis down: it is skipped and named in ``problems``
    (the test suite fails on any problem, so a shipped knowledge base has none).
    """
    d = directory or entries_dir()
    key = str(d)
    if key in _CACHE:
        return _CACHE[key]
    entries: list[Entry] = []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    files = sorted(d.glob("*.yaml")) if d.is_dir() else []
    for p in files:
        entry, errs = load_file(p)
        if entry is None:
            problems.extend((p.name, e) for e in errs)
        elif entry.id in seen:
            problems.append((p.name, f"duplicate id {entry.id}"))
        else:
            seen.add(entry.id)
            entries.append(entry)
    res = LoadResult(sorted(entries, key=lambda e: e.id), problems)
    _CACHE[key] = res
    return res

"""Matching known-issue entries against a Run: measure what holds, then grade it.

Three grades (the issue's contract):

* ``direct``: a version of an affected package is known and in range, and the signature (an event
  regex or a metric shape) is in the run. The bug is named with its fix.
* ``candidate``: the signature and the entry's conditions hold but the versions are unknown; the
  finding says which versions to check. Also: a curve-shape signature on an affected version whose
  required setup is not recorded (a warning that names the setup to check).

A signature that is only a curve shape (NaN after healthy steps...) counts, at either grade, only when
the entry's required conditions are known and met - otherwise every NaN run on a recent stack would
"match" every entry; an event regex (the bug's own message) is specific enough on its own.
* ``info``: versions in range (and the required conditions met) without the signature: the run is
  exposed to the bug but shows no sign of it. Only for silent bugs (a metric-shape signature) with a real
  version range: a crash prints its own message, and an entry for every version says nothing.

A known version outside every range, or a known config fact that fails a condition, rules the
entry out (that is how a fixed release or a different setup stays silent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from autopsy.known_issues.schema import Affected, Condition, Entry
from autopsy.known_issues.shapes import ShapeHit, measure
from autopsy.model import ConfigFact, Evidence, Run

Level = Literal["direct", "candidate", "info"]
LEVEL_RANK = {"info": 0, "candidate": 1, "direct": 2}

#: facts whose values name the model (a ``model`` condition looks at all of them)
#: pseudo-facts a condition may name besides config keys: ``model`` (any of MODEL_FACTS), ``precision``
#: (bf16/fp16 from any precision setting), ``metrics`` (the logged metric names, space-joined), ``framework``
MODEL_FACTS = ("model_type", "architectures", "model.name_or_path", "model_name_or_path",
               "lora.base_model_name_or_path")


@dataclass
class VersionCheck:
    affected: Affected
    version: str | None
    in_range: bool | None  # None: version unknown (or unparsable)
    fact: ConfigFact | None


@dataclass
class Match:
    entry: Entry
    level: Level
    versions: list[VersionCheck]
    met: list[tuple[Condition, ConfigFact | None, Any]] = field(default_factory=list)
    unknown: list[Condition] = field(default_factory=list)
    events: list[Evidence] = field(default_factory=list)
    shapes: list[ShapeHit] = field(default_factory=list)

    @property
    def specific(self) -> bool:
        """An event regex matched: the log says it, not only a curve's shape."""
        return bool(self.events)

    @property
    def first_step(self) -> int | None:
        steps = [s.step for s in self.shapes if s.step is not None] + [e.step for e in self.events if e.step is not None]
        return min(steps) if steps else None

    def in_range(self) -> list[VersionCheck]:
        return [v for v in self.versions if v.in_range]

    def to_check(self) -> list[VersionCheck]:
        return [v for v in self.versions if v.in_range is None]

    def why(self) -> list[str]:
        """One line per fact that made the match, for ``known-issues --match`` and the finding."""
        out = [f"{v.affected.package} {v.version} is in {v.affected.ranges or 'the affected versions'}"
               for v in self.in_range()]
        for c, _f, val in self.met:
            if c.fact == "metrics":  # the value is every logged metric name: cite the one that matched
                hit = re.search(c.value, str(val), re.IGNORECASE)
                out.append(f"logged metric {hit.group(0).strip() if hit else c.value}")
            else:
                out.append(f"{c.describe()} ({val})")
        out += [e.detail for e in self.events]
        out += [s.evidence.detail for s in self.shapes]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.entry.id, "level": self.level, "summary": self.entry.summary,
            "versions": [{"package": v.affected.package, "ranges": v.affected.ranges, "version": v.version,
                          "in_range": v.in_range} for v in self.versions],
            "conditions_met": [c.describe() for c, _f, _v in self.met],
            "conditions_unknown": [c.describe() for c in self.unknown],
            "signature": [{"artifact": e.artifact, "where": e.where, "detail": e.detail} for e in self.events]
                         + [{"shape": s.name, "artifact": s.evidence.artifact, "where": s.evidence.where,
                             "detail": s.evidence.detail} for s in self.shapes],
            "fixed_in": self.entry.fixed_in, "remedy": self.entry.remedy,
            "references": self.entry.reference_urls(),
        }


# -- facts ---------------------------------------------------------------------------------------

def _facts(run: Run, key: str) -> list[tuple[ConfigFact | None, Any]]:
    if key == "model":
        return [(f, f.value) for k in MODEL_FACTS for f in run.config.facts(k) if f.value not in (None, "")]
    if key == "precision":
        return _precision(run)
    if key == "metrics":  # the logged metric names say which trainer wrote the log (actor/kl_loss: verl)
        names = run.metrics()
        return [(None, " ".join(names))] if names else []
    if key == "framework":
        return [(None, fw) for fw in run.frameworks]
    return [(f, f.value) for f in run.config.facts(key) if f.value is not None]


def _precision(run: Run) -> list[tuple[ConfigFact | None, Any]]:
    from detectors._facts import as_bool

    out: list[tuple[ConfigFact | None, Any]] = []
    for key, name in (("bf16", "bf16"), ("deepspeed.bf16.enabled", "bf16"), ("fp16", "fp16"),
                      ("deepspeed.fp16.enabled", "fp16")):
        for f in run.config.facts(key):
            if as_bool(f.value):
                out.append((f, name))
    for f in run.config.facts("torch_dtype"):
        v = str(f.value).lower().replace("torch.", "")
        if v in ("bfloat16", "bf16"):
            out.append((f, "bf16"))
        elif v in ("float16", "fp16", "half"):
            out.append((f, "fp16"))
    return out


def _norm(v: Any) -> Any:
    from detectors._facts import as_bool, as_number

    if isinstance(v, bool):
        return v
    n = as_number(v)
    if n is not None:
        return n
    b = as_bool(v) if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no") else None
    if b is not None:
        return b
    return str(v).strip().lower()


def _holds(c: Condition, value: Any) -> bool:
    from detectors._facts import as_number

    if c.op == "regex":
        text = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        return re.search(c.value, text, re.IGNORECASE) is not None
    if c.op in ("gt", "gte", "lt", "lte"):
        x = as_number(value)
        if x is None:
            return False
        return {"gt": x > c.value, "gte": x >= c.value, "lt": x < c.value, "lte": x <= c.value}[c.op]
    v = _norm(value)
    if c.op == "equals":
        return v == _norm(c.value)
    wanted = [_norm(x) for x in c.value]
    return (v in wanted) if c.op == "in" else (v not in wanted)


def check_condition(run: Run, c: Condition) -> tuple[bool | None, ConfigFact | None, Any]:
    """(True, fact, value) met / (False, fact, value) contradicted / (None, None, None) unknown."""
    facts = _facts(run, c.fact)
    if not facts:
        return None, None, None
    for f, v in facts:
        if _holds(c, v):
            return True, f, v
    return False, facts[0][0], facts[0][1]


@lru_cache(maxsize=512)
def _spec(ranges: str):  # noqa: ANN202 - packaging.specifiers.SpecifierSet
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(ranges)


def parse_version(raw: Any):  # noqa: ANN201 - packaging.version.Version | None
    """PEP 440 version of a fact value: '2.5.0+cu124', 'v0.14.0', '4.46.0.dev0'; junk -> None."""
    from packaging.version import InvalidVersion, Version

    s = str(raw).strip().lstrip("vV")
    try:
        return Version(s)
    except InvalidVersion:
        m = re.match(r"\d+(?:\.\d+){0,3}", s)
        if not m:
            return None
        try:
            return Version(m.group(0))
        except InvalidVersion:
            return None


def check_version(run: Run, a: Affected) -> VersionCheck:
    for f in run.config.facts(a.fact_key):
        v = parse_version(f.value)
        if v is None:
            continue
        ok = _spec(a.ranges).contains(v, prereleases=True) if a.ranges else True
        return VersionCheck(a, str(f.value), ok, f)
    return VersionCheck(a, None, None, None)


# -- signatures ----------------------------------------------------------------------------------

@lru_cache(maxsize=1024)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def event_hits(run: Run, patterns: tuple[str, ...]) -> list[Evidence]:
    from detectors._facts import event_evidence

    out: list[Evidence] = []
    for ev in run.events:
        text = ev.message + (" " + " ".join(str(v) for v in ev.data.values()) if ev.data else "")
        for p in patterns:
            if _rx(p).search(text):
                out.append(event_evidence(ev))
                break
        if len(out) >= 3:
            break
    return out


# -- grading -------------------------------------------------------------------------------------

def match_entry(run: Run, entry: Entry, shape_cache: dict[str, ShapeHit | None] | None = None) -> Match | None:
    versions = [check_version(run, a) for a in entry.affected]
    if any(v.in_range is False for v in versions):
        return None  # a known version outside the affected ranges: fixed, or never had it
    met: list[tuple[Condition, ConfigFact | None, Any]] = []
    unknown: list[Condition] = []
    for c in entry.conditions:
        ok, f, val = check_condition(run, c)
        if ok is False:
            return None
        if ok:
            met.append((c, f, val))
        else:
            unknown.append(c)
    events = event_hits(run, entry.signatures.events) if entry.signatures.events else []
    shapes: list[ShapeHit] = []
    cache = shape_cache if shape_cache is not None else {}
    for name in entry.signatures.shapes:
        if name not in cache:
            cache[name] = measure(run, name)
        hit = cache[name]
        if hit is not None:
            shapes.append(hit)
    signature = bool(events and shapes) if entry.signatures.match == "all" else bool(events or shapes)
    in_range = any(v.in_range for v in versions)
    #: "exposed" needs a real range: an entry for every version (an environment or usage problem) says nothing
    #: about a run that shows no sign of it
    ranged = any(v.in_range and v.affected.ranges for v in versions)
    #: and a silent failure: a bug whose only signature is its own error message (an API removed, an import
    #: broken) cannot go unnoticed, so "exposed" adds nothing there
    silent = bool(entry.signatures.shapes) and not (entry.signatures.match == "all" and entry.signatures.events)
    # (a bug whose signature needs its own message too, match: all, prints that message: not a silent one either)
    required_unknown = [c for c in unknown if not c.optional]
    m = Match(entry, "info", versions, met, unknown, events, shapes)
    # an event is the bug's own message; a curve shape is shared by many causes, so it counts only where the
    # entry's required setup (ZeRO stage, model family, attention kernel...) is known to be the bug's
    attributable = bool(events) or bool(entry.conditions and not required_unknown)
    if signature and attributable:
        m.level = "direct" if in_range else "candidate"
    elif signature and ranged and silent and not any(c.fact in ("model", "framework", "metrics") for c in required_unknown):
        # the bug's curve shape on an affected version, its setup (ZeRO stage, kernel...) not recorded: worth naming
        # as a candidate to check, never as the cause (the same shape has other causes). Not when the unknown is the
        # model family or the trainer: that would name every model's bug on every NaN run
        m.level = "candidate"
    elif ranged and silent and not signature and not required_unknown:
        m.level = "info"
    else:
        return None
    return m


def match_run(run: Run, entries: list[Entry] | None = None) -> list[Match]:
    """Every entry that matches the run, strongest first (direct, candidate, info; then by id)."""
    if entries is None:
        from autopsy.known_issues.schema import load_entries

        entries = load_entries().entries
    cache: dict[str, ShapeHit | None] = {}
    out = [m for e in entries if (m := match_entry(run, e, cache)) is not None]
    out.sort(key=lambda m: (-LEVEL_RANK[m.level], not m.specific, m.entry.id))
    return out

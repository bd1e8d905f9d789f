"""Known framework bugs: the run matches an entry of the knowledge base (autopsy/known_issues).

What it detects:
    Runs that show the signature of a known bug of DeepSpeed, transformers, torch, TRL, PEFT,
    accelerate, flash-attn, bitsandbytes, vLLM, verl, ms-swift, LLaMA-Factory or Megatron: an
    event the bug prints (a regex) or a metric shape from a fixed vocabulary (grad_norm
    non-finite from the first step, loss 0 with a non-finite grad_norm, loss scaled by
    gradient_accumulation_steps, NaN after healthy steps, rollout/policy mismatch, ...), under the
    configuration the bug needs (ZeRO stage, overlap_comm, attention kernel, model family,
    precision...). Each entry is one file (``autopsy known-issues`` lists them).
    Versions known and in range + signature: a direct cause naming the entry. Signature and
    conditions without versions: a candidate that names the versions to check. Versions in range
    without the signature: info only.

Why it matters:
    These failures look like user errors (bad LR, bad data) but no hyperparameter change fixes
    them; an upgrade or one config flag does. Users ask exactly this in threads that often close
    with no answer.

Evidence used:
    Config facts ``version.<package>`` (``version.deepspeed``, ``version.transformers``,
    ``version.torch``, ``version.trl``...), ``cuda.version``, ``gpu.name`` and the facts each entry's
    conditions name (``deepspeed.zero_stage``, ``deepspeed.overlap_comm``, ``attn_implementation``,
    ``model_type``/model name, precision...); event messages; the loss/grad_norm/KL/rollout series.

Remedies:
    The entry's remedy and fixed_in version (e.g. ZeRO-2: ``"overlap_comm": false``; torch 2.5.0:
    upgrade to >= 2.5.1 or disable cuDNN SDPA; transformers 4.46: upgrade to >= 4.47.1), with the
    thread and fix references.
"""

from __future__ import annotations

from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run

CODE = "FW001"
SLUG = "framework-bug"
ROOT_CAUSE = "framework_bug"
NEEDS = ("config", "events", "scalars")
NEEDS_ANY = True

#: a version in range and the bug's own message: as sure as a log can make it
CONF_DIRECT_EVENT = 0.9
#: a version in range and the bug's curve shape
CONF_DIRECT_SHAPE = 0.85
#: the bug's own message, versions not recorded
CONF_CANDIDATE_EVENT = 0.65
#: the curve shape and every required condition known and met, versions not recorded
CONF_CANDIDATE_SHAPE = 0.55
#: exposed (versions in range) but no sign of the bug
CONF_INFO = 0.3
#: info findings shown at most (a run on an old stack is exposed to many bugs)
MAX_INFO = 3


def detect(run: Run) -> Iterable[Finding]:
    from autopsy.known_issues import match_run

    n_info = 0
    named = False
    for m in match_run(run):
        if m.entry.covered_by:
            continue  # that detector reports the pattern on runs, with its own evidence
        if m.level == "info":
            if n_info >= MAX_INFO:
                continue
            n_info += 1
        else:
            named = True
        yield finding(m)
    dev = None if named else _prerelease(run)  # a known bug already names the version to change
    if dev is not None:
        yield dev


#: a development or pre-release build of a library the training loop runs on, in a failing run: a candidate
CONF_PRERELEASE = 0.4
_TRAINING_PACKAGES = ("torch", "transformers", "accelerate", "deepspeed", "peft", "trl", "bitsandbytes", "flash_attn",
                      "flash-attn", "vllm", "verl", "megatron-core", "lightning", "pytorch-lightning", "xformers")


def _prerelease(run: Run) -> Finding | None:
    """``accelerate 0.22.0.dev0``, ``transformers 4.46.0.dev0``, ``torch 2.6.0a0+git...``, an ``rc``: main-branch builds
    carry regressions no release has. Only in a run that failed (non-finite values, or a loss exactly 0 at every log):
    a healthy run on a dev build is just a run."""
    from autopsy.known_issues.match import parse_version
    from detectors._common import nonfinite_onset, points
    from detectors._facts import fact_evidence

    loss = points(run, "loss")
    zero = len(loss) >= 2 and bool((loss.values == 0.0).all())
    if not zero and nonfinite_onset(run) is None:
        return None
    for pkg in _TRAINING_PACKAGES:
        fact = run.config.fact(f"version.{pkg}")
        v = parse_version(fact.value) if fact is not None else None
        if v is None or not v.is_prerelease:
            continue
        return Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning", confidence=CONF_PRERELEASE,
            title=f"{pkg} {fact.value} is a development build",
            message=(f"The run failed on {pkg} {fact.value}, a pre-release build: regressions on the main branch are a "
                     "common cause of failures no setting explains. Rerun on the last release to rule it out."),
            evidence=[fact_evidence(fact, f"{pkg} {fact.value}: a pre-release (dev/alpha/beta/rc) version")],
            remedies=[f"Pin {pkg} to its latest release (pip install '{pkg}<{v.base_version}') and rerun; if the failure "
                      "goes away, report it upstream with this log."],
            basis="inferred", symptom="known_bug_signature",
        )
    return None


def entry_evidence(m) -> Evidence:  # noqa: ANN001 - autopsy.known_issues.Match
    e = m.entry
    return Evidence("known-issues", f"entry {e.id}", f"{e.id}: affected {e.ranges_text()}; fixed in {e.fixed_in}")


def finding(m) -> Finding:  # noqa: ANN001 - autopsy.known_issues.Match
    """One FW001 finding for a knowledge-base match (also used by ``autopsy preflight``)."""
    from detectors._facts import fact_evidence

    e = m.entry
    evidence: list[Evidence] = []
    for v in m.in_range():
        evidence.append(fact_evidence(v.fact, f"{v.affected.package} {v.version} is in the affected range "
                                              f"{v.affected.ranges or '(all versions)'}"))
    for c, f, val in m.met:
        if f is not None:
            evidence.append(fact_evidence(f, f"{c.fact} = {val}"))
    evidence.extend(m.events)
    evidence.extend(s.evidence for s in m.shapes)
    evidence.append(entry_evidence(m))
    check = [f"{v.affected.package} ({'affected ' + v.affected.ranges if v.affected.ranges else 'all versions'})"
             for v in m.to_check()]
    unknown = [c.describe() for c in m.unknown]
    seen = "; ".join(m.why()[:4])
    if m.level == "direct":
        severity, basis = "error", "direct"
        confidence = CONF_DIRECT_EVENT if m.specific else CONF_DIRECT_SHAPE
        title = f"{e.id}: {e.summary}"
        message = f"Known bug {e.id} ({e.ranges_text()}): {seen}. Fixed in {e.fixed_in}."
    elif m.level == "candidate":
        severity = e.candidate_severity or ("error" if m.specific else "warning")
        basis = "inferred"
        confidence = CONF_CANDIDATE_EVENT if m.specific else CONF_CANDIDATE_SHAPE
        title = f"{e.id} ({'check versions' if check or not unknown else 'check the setup'}): {e.summary}"
        todo = [f"the installed {', '.join(check)}" if check else "", f"that {', '.join(unknown)}" if unknown else ""]
        message = (f"Matches known bug {e.id}: {seen}. Check " + (" and ".join(t for t in todo if t) or "the versions")
                   + f": fixed in {e.fixed_in}.")
    else:
        severity, basis, confidence = "info", "inferred", CONF_INFO
        title = f"{e.id} (exposed, no sign of it): {e.summary}"
        message = (f"This stack is in the affected range of {e.id} ({seen}) but the run shows none of its "
                   f"signature. Fixed in {e.fixed_in}.")
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=confidence,
        title=title, message=message, first_step=m.first_step, evidence=evidence,
        remedies=[e.remedy] + ([f"Fixed in {e.fixed_in}."] if e.fixed_in else []),
        references=e.reference_urls(), basis=basis, symptom="known_bug_signature",
    )

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
    Also, where no entry matches: a failed run on a development build of a training library, and a
    language-model run whose first loss is above 2 x ln(vocab), which no mean token cross-entropy
    reaches (a summed loss: the gradient-accumulation normalisation bugs; or far-off logits).

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
    off = None if named else _loss_off_scale(run)
    if off is not None:
        yield off
    empty = _adapter_not_saved(run)
    if empty is not None:
        yield empty


CONF_ADAPTER_NOT_SAVED = 0.55


def _adapter_not_saved(run: Run) -> Finding | None:
    """The HF Trainer reloaded a checkpoint (the best model at the end, or a resume) whose LoRA weights were missing: the
    adapter saved during training is empty, so the model after training is the base model with fresh adapters. The
    well-known way: alpaca-lora-style scripts override ``model.state_dict`` with ``get_peft_model_state_dict``, which
    newer PEFT's ``save_pretrained`` applies again: the keys lose their adapter name, the filter keeps none, and a
    443-byte adapter_model.bin is written (alpaca-lora#334, #539). Under ZeRO-3 the saved LoRA tensors are empty instead
    (ZERO001's to name)."""
    from detectors._common import count_of
    from detectors._facts import event_evidence, fact_number

    evs = [e for e in run.events_of("missing_keys") if e.data.get("adapter_keys")]
    if not evs:
        return None
    zero = fact_number(run, "deepspeed.zero_stage")
    if zero is not None and zero[0] == 3:
        return None
    e = evs[0]
    n = e.data["adapter_keys"]
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=CONF_ADAPTER_NOT_SAVED,
        title=f"The reloaded checkpoint has no LoRA weights ({n} adapter keys missing)",
        message=(f"Reloading a checkpoint reported {count_of(n, 'missing LoRA key')} (first: "
                 f"{e.data.get('first_adapter_key')}): the adapter the run saved is empty, so the model it ends with "
                 "has untrained adapters. The usual cause is a training script that overrides model.state_dict with "
                 "get_peft_model_state_dict (alpaca-lora's finetune.py): PEFT >= 0.3's save_pretrained applies it again "
                 "and writes an adapter_model.bin of a few hundred bytes."),
        first_step=e.step, evidence=[event_evidence(e, f"{e.data.get('keys')} missing keys, {n} of them LoRA weights")],
        remedies=["Remove the model.state_dict override from the training script (PEFT's save_pretrained saves only the "
                  "adapter already), or pin the PEFT version the script was written for; check that adapter_model.* in "
                  "each checkpoint is megabytes, not bytes.",
                  "Retrain, or reload a checkpoint whose adapter file holds the lora_A/lora_B weights."],
        basis="direct", symptom="frozen_weights",
    )


#: a first loss above this many times ln(vocab) in a token LM is no mean cross-entropy (uniform guessing gives 1x);
#: 2x leaves room for a from-scratch model's first logits and for base-2 losses (fairseq logs log2: 1.44x)
OFF_SCALE = 2.0
CONF_OFF_SCALE = 0.5
#: finite logs needed, and the last at most this fraction of the first: the curve of a run that trains
OFF_SCALE_LOGS = 3
FALLS_TO = 0.8
#: the same in a run that later went non-finite (its overflow may explain the huge values)
CONF_OFF_SCALE_SIDE = 0.35


def _loss_off_scale(run: Run) -> Finding | None:
    """A token-LM run whose first logged loss is above twice ln(vocab): per-token cross-entropy cannot be that
    high (uniform guessing over 262k tokens gives 12.5), so the loss is summed rather than averaged (the gradient-
    accumulation normalisation bugs of transformers 4.46-4.47.0 and of Unsloth's Gemma-4 path, #4982: every value
    16x the fixed run's), or the logits are far off (wrong or mismatched weights, an overflowed dtype). Without
    gradient_accumulation_steps and versions KI-TRANSFORMERS-001 cannot match; this names the symptom and the checks."""
    from autopsy.known_issues.shapes import uniform_bound
    from detectors._common import is_policy_gradient_run, is_token_lm_run, nonfinite_onset
    from detectors._facts import fact_evidence, fact_number

    if not is_token_lm_run(run) or is_policy_gradient_run(run):
        return None
    got = uniform_bound(run)
    if got is None:
        return None
    pos, v, bound, vocab = got
    p = pos[0]
    if p.value <= OFF_SCALE * bound:
        return None
    # a scaled loss still trains: it falls as a normal curve does (unsloth#4982: 185.9 -> 92.86 over 4 logs). One that
    # does not fall, or two logs, may be an explosion (OpenNMT-py#869, lr 2: xent 6776 at step 50), DIV001's to read
    if len(pos) < OFF_SCALE_LOGS or not pos[len(pos) - 1].value < FALLS_TO * p.value:
        return None
    label = (f"ln(vocab_size {v}) = {bound:.2f}" if vocab else
             f"ln({v:,}) = {bound:.2f}, uniform guessing over the largest common vocabulary")
    evidence = [p.evidence(f"first loss {p.value:.4g} = {p.value / bound:.1f}x {label}")]
    if vocab:
        evidence.append(fact_evidence(vocab[1], f"vocab_size = {v}"))
    ga = fact_number(run, "gradient_accumulation_steps")
    if ga is not None and ga[0] > 1:
        evidence.append(fact_evidence(ga[1], f"gradient_accumulation_steps = {int(ga[0])}: the first loss / "
                                             f"{int(ga[0])} = {p.value / ga[0]:.4g}"))
    # a run that went on to overflow has its own cause for huge values (fp16, the LR): then this is a side note
    blew_up = nonfinite_onset(run) is not None
    last = pos[len(pos) - 1]
    if len(pos) > 1:
        evidence.append(last.evidence(f"loss {last.value:.4g} at the last finite log"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="warning" if blew_up else "error",
        confidence=CONF_OFF_SCALE_SIDE if blew_up else CONF_OFF_SCALE,
        title=f"Loss {p.value:.4g} at the first log is no per-token cross-entropy",
        message=(f"The first logged loss, {p.value:.4g} at step {p.step}, is {p.value / bound:.1f}x {label}: a mean "
                 "token cross-entropy does not start there, even untrained. The logged loss is summed instead of "
                 "averaged (over the gradient-accumulation window or the tokens: transformers 4.46-4.47.0 logged "
                 "gradient_accumulation_steps x the loss, Unsloth's Gemma-4 path logged 16x, unsloth#4982), or the "
                 "logits are far off (wrong or mismatched pretrained weights, an overflowed dtype)."),
        first_step=p.step, evidence=evidence,
        remedies=["Divide the logged loss by gradient_accumulation_steps: if it then reads like a normal loss (1-4 for "
                  "a pretrained model), upgrade the trainer (transformers >= 4.47.1; the latest Unsloth) and retrain, "
                  "or run once with gradient_accumulation_steps=1 to compare.",
                  "A custom compute_loss or loss function: use reduction='mean' over the supervised tokens.",
                  "Otherwise check the loaded weights and dtype: evaluate the base model on a few samples before "
                  "training; its loss should be a few units."],
        basis="inferred", symptom="high_start_loss",
    )


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

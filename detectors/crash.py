"""Crash: the run died from an exception (out of memory, or another error named here).

What it detects:
    The fatal exception of the run: CUDA/CPU out-of-memory (``torch.OutOfMemoryError``,
    "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED") becomes root cause ``out_of_memory``;
    any other traceback becomes ``crash`` with the exception type and message, the step the run
    died at and the last checkpoint with finite weights to resume from. ``KeyboardInterrupt`` is
    a user stop, reported as info.

Why it matters:
    A crash ends the run whatever else happened; the step and the last usable checkpoint say how
    much is lost. Exceptions that other detectors explain more precisely (bf16 on old GPUs,
    missing gradients, loss-scale minimum, vocabulary overflow) get their own, more confident
    finding; this one stays as the generic explanation with a lower confidence.

Evidence used:
    Events ``oom``, ``traceback`` (exc_type, exc_message, frame) and ``error``; checkpoint
    tensor stats for the resume point.

Remedies:
    OOM: lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the
    effective batch), enable gradient checkpointing, shorten max_length, use ZeRO-2/3 or
    offload, bf16 instead of fp32. Other exceptions: fix the named error, then resume from the
    last good checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Event, Evidence, Finding, Run
from detectors._common import checkpoint_state, event_evidence, nonfinite_onset, step_near

CODE = "CRASH001"
SLUG = "crash"
ROOT_CAUSE = "crash"
NEEDS = ("events",)

OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|Tried to allocate|"
                 r"DefaultCPUAllocator: can't allocate memory|MemoryError", re.IGNORECASE)
#: a generic exception is the verdict only when nothing more specific explains the run
GENERIC_CONFIDENCE = 0.6
#: after a NaN onset, a later exception is usually its consequence
AFTER_NAN_CONFIDENCE = 0.4
#: exceptions another detector explains with its own, more specific cause: the crash is then
#: reported as info (the run died here) and does not compete with that cause as a second error.
EXPLAINED = re.compile(
    r"doesn't support bf16|does not support bf16|requires_grad|does not require grad|has no gradients|"
    r"loss scale already at minimum|index out of range in self|srcIndex < srcSelectDimSize|"
    r"prepare_inputs_for_generation|tokenization mismatch",
    re.IGNORECASE)


def _exc(ev: Event) -> tuple[str, str]:
    t = str(ev.data.get("exc_type") or "").strip()
    m = str(ev.data.get("exc_message") or "").strip()
    if not t:
        mm = re.match(r"\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\s*:?\s*(.*)", ev.message)
        if mm:
            t, m = mm.group(1), m or mm.group(2)
    return t or "Exception", m or ev.message.strip()


def detect(run: Run) -> Iterable[Finding]:
    ooms = run.events_of("oom") + [e for e in run.events_of("traceback", "error") if OOM.search(f"{e.message} {e.data.get('exc_message', '')}")]
    tracebacks = [e for e in run.events_of("traceback") if e not in ooms]
    fatal = ooms[-1] if ooms else (tracebacks[-1] if tracebacks else None)
    if fatal is None:
        return
    exc_type, exc_msg = _exc(fatal)
    step = fatal.step if fatal.step is not None else step_near(run, fatal)
    last_clean, _ = checkpoint_state(run, step + 1 if step is not None else None)
    at = f" at step {step}" if step is not None else ""
    resume = f"resume from {last_clean.path}, the last checkpoint with finite weights" if last_clean else None
    evidence = [event_evidence(fatal, f"{exc_type}: {exc_msg[:240]}")]
    frame = fatal.data.get("frame")
    if frame:
        evidence.append(event_evidence(fatal, f"raised in {str(frame)[:200]}"))
    if last_clean is not None:
        evidence.append(Evidence(last_clean.path, "checkpoint", f"last good checkpoint: {last_clean.path}", last_clean.step))
    if exc_type.endswith("KeyboardInterrupt") and not ooms:
        yield Finding(code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9,
                      title=f"Stopped by the user (KeyboardInterrupt){at}", message="The run was interrupted by hand.",
                      first_step=step, evidence=evidence, remedies=[resume[0].upper() + resume[1:] + "."] if resume else [],
                      basis="direct")
        return
    onset = nonfinite_onset(run)
    after_nan = onset is not None and onset.step is not None and step is not None and onset.step <= step
    if ooms:
        remedies = ["Lower per_device_train_batch_size and raise gradient_accumulation_steps to keep the effective batch.",
                    "Enable gradient checkpointing, shorten max_length/cutoff_len, use bf16, or ZeRO-2/3 with offload."]
        if resume:
            remedies.append(resume[0].upper() + resume[1:] + ".")
        yield Finding(code=CODE, name=SLUG, root_cause="out_of_memory", severity="critical", confidence=0.95,
                      title=f"Out of memory{at}", message=f"The run died{at}: {exc_type}: {exc_msg[:200]}",
                      first_step=step, evidence=evidence, remedies=remedies, basis="direct", symptom="oom")
        return
    remedies = [f"Fix the {exc_type} named in the traceback (see the frame it was raised in)."]
    if resume:
        remedies.append(resume[0].upper() + resume[1:] + ".")
    if EXPLAINED.search(f"{exc_msg} {fatal.message}"):
        yield Finding(code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9,
                      title=f"The run died{at} with {exc_type}",
                      message=f"The run died{at}: {exc_type}: {exc_msg[:300]} (the cause is named by the other findings).",
                      first_step=step, evidence=evidence, remedies=remedies[1:], basis="direct")
        return
    yield Finding(code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error",
                  confidence=AFTER_NAN_CONFIDENCE if after_nan else GENERIC_CONFIDENCE,
                  title=f"Crashed with {exc_type}{at}", message=f"The run died{at}: {exc_type}: {exc_msg[:300]}",
                  first_step=step, evidence=evidence, remedies=remedies, basis="direct", symptom="crash")

"""fp16 mixed precision on a GPU whose half-precision kernels give NaN (GTX 16xx, Quadro T400-T2000, Tesla K40m).

What it detects:
    fp16 training (``fp16``/``use_amp``/``amp``, ultralytics' "AMP: checks passed", DeepSpeed fp16) while the GPU named
    in the artifacts is a Turing TU116/TU117 GeForce GTX 16 card (1630, 1650, 1660 and their Ti/Super), a Quadro
    T400/T550/T600/T1000/T1200/T2000 or a Tesla K40m, in a run whose losses went non-finite or were not logged at all.

Why it matters:
    These cards pass small AMP self-checks yet produce NaN losses under fp16 autocast (ultralytics hard-codes them out
    of AMP since PR #17977, "Hardcode failing GPUs in AMP checks", after issues #17812, #14757, #16302; Stable Diffusion
    front ends force full precision on them for the same reason). No learning rate or data fix helps: the kernels do.

Evidence used:
    Config facts ``gpu.name``, ``fp16``, ``deepspeed.fp16.enabled``; the loss series (a run whose losses stay finite
    on such a card trains fine, and is left alone).

Remedies:
    Train in fp32 on these cards (``amp=False``, ``fp16=False``, no autocast); they have no bf16 either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run
from detectors._common import loss_like, nonfinite_onset
from detectors._facts import fact_bool, fact_evidence, fact_str

CODE = "HW002"
SLUG = "fp16-broken-hardware"
ROOT_CAUSE = "fp16_unsupported_hardware"
NEEDS = ("config",)

#: the parts ultralytics PR #17977 lists (GTX 16 series, Quadro T series, Tesla K40m)
FP16_BROKEN_RE = re.compile(r"\b(?:GTX ?16[356]0(?: ?Ti| ?Super)?|Quadro ?T(?:400|550|600|1000|1200|2000)|"
                            r"T(?:400|550|600|1000|1200|2000)(?= |$)|Tesla ?K40m?)\b", re.IGNORECASE)
REFS = ["https://github.com/ultralytics/ultralytics/pull/17977", "https://github.com/ultralytics/ultralytics/issues/17812"]
REMEDIES = ["Train in fp32 on this card: amp=False (ultralytics), fp16=False (HF TrainingArguments), no autocast/"
            "GradScaler in a hand-written loop; it has no bf16 either.",
            "Or move to a card whose fp16 works (RTX 20xx or newer, T4, V100, A-series)."]


def _fp16(run: Run) -> Evidence | None:
    for key in ("fp16", "deepspeed.fp16.enabled"):
        got = fact_bool(run, key)
        if got and got[0]:
            return fact_evidence(got[1], f"{key} = true")
    return None


def _nonfinite_losses(run: Run) -> Evidence | None:
    """The run's non-finite onset as NUM001 sees it: grad_norm blips the loss scaler skipped are not one."""
    onset = nonfinite_onset(run)
    return onset.evidence if onset is not None else None


def detect(run: Run) -> Iterable[Finding]:
    gpu = fact_str(run, "gpu.name")
    if not gpu or not FP16_BROKEN_RE.search(gpu[0]):
        return
    fp16 = _fp16(run)
    if fp16 is None:
        return
    bad = _nonfinite_losses(run)
    logged = any(loss_like(m) for m in run.metrics())
    if bad is None and logged:
        return  # finite losses on this card: its fp16 works for this model
    evidence = [fact_evidence(gpu[1], f"GPU: {gpu[0]} (fp16 kernels known to give NaN)"), fp16]
    if bad is not None:
        evidence.append(bad)
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.8 if bad is not None else 0.6,
        title=f"fp16 on {gpu[0]}, whose half precision gives NaN",
        message=(f"fp16 mixed precision is on ({fp16.detail}) on {gpu[0]}: GTX 16xx / Quadro T-series cards pass AMP "
                 "self-checks but produce NaN losses in fp16"
                 + ("; the losses here went non-finite." if bad is not None else "; no loss was logged to confirm it.")),
        first_step=bad.step if bad is not None else None, evidence=evidence, remedies=list(REMEDIES),
        references=list(REFS), basis="direct" if bad is not None else "inferred",
        symptom="nonfinite_loss" if bad is not None else "config_defect",
    )

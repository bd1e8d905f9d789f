"""Known framework bugs, keyed on versions and configuration, confirmed by the run's symptoms.

What it detects:
    * DeepSpeed ZeRO-2 with ``overlap_comm: true`` (DeepSpeed >= 0.12.4; still reported on
      0.16.x): grad_norm NaN and loss 0 (or NaN) although the model and data are fine
      (deepspeedai/DeepSpeed#5242, #5347; turning ``overlap_comm`` off fixes it).
    * torch 2.5.0 cuDNN SDPA backward: "cuDNN SDPA backward got grad_output.strides() !=
      output.strides()" and grad_norm turning NaN for good while the loss looked healthy
      (pytorch/pytorch#138581, #139298; torch 2.5.1 disables cuDNN SDPA by default).
    * transformers 4.46.x / 4.47.0 gradient accumulation: the logged loss is inflated roughly by
      ``gradient_accumulation_steps`` (huggingface/transformers#34263, fixed in 4.47.1 by #35207).
    Version-only matches without a symptom are at most a warning.

Why it matters:
    These failures look like user errors (bad LR, bad data) but no hyperparameter change fixes
    them; an upgrade or one config flag does.

Evidence used:
    Config facts ``version.*``, ``deepspeed.zero_stage``, ``deepspeed.overlap_comm``,
    ``gradient_accumulation_steps``, ``vocab_size``; events ``cudnn_sdpa_warning``; the
    ``loss``/``grad_norm`` series.

Remedies:
    ZeRO-2: set ``"overlap_comm": false`` (or raise ``reduce_bucket_size``), or use ZeRO-1/3.
    torch 2.5.0: upgrade to >= 2.5.1, or ``torch.backends.cuda.enable_cudnn_sdp(False)``, or
    ``attn_implementation="eager"``/``flash_attention_2``. transformers 4.46: upgrade to >= 4.47.1
    and do not compare losses across versions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run
from detectors._common import (
    config_evidence,
    event_evidence,
    fmt,
    hidden_zero_steps,
    nonfinite_onset,
    num,
    points,
    truthy,
    version_tuple,
)

CODE = "FW001"
SLUG = "framework-bug"
ROOT_CAUSE = "framework_bug"
NEEDS = ("config", "events")
NEEDS_ANY = True

#: first DeepSpeed release with the ZeRO-2 overlap_comm gradient corruption (DeepSpeed#5242 bisect)
DS_OVERLAP_FIRST = (0, 12, 4)
#: transformers releases with the grad-accumulation loss scaling bug: [4.46.0, 4.47.1)
HF_GA_BAD = ((4, 46, 0), (4, 47, 1))
#: a causal-LM loss this many times above ln(vocab) (uniform guessing) is not a real mean CE
ABOVE_UNIFORM = 1.5


def detect(run: Run) -> Iterable[Finding]:
    for f in (_zero2_overlap(run), _cudnn_sdpa(run), _ga_loss(run)):
        if f is not None:
            yield f


def _nan_symptom(run: Run) -> Evidence | None:
    onset = nonfinite_onset(run)
    if onset is not None:
        return onset.evidence
    hz = hidden_zero_steps(run)
    return hz[0].evidence("loss 0.0 with NaN grad_norm") if len(hz) else None


def _zero2_overlap(run: Run) -> Finding | None:
    cfg = run.config
    if str(cfg.get("deepspeed.zero_stage", "")).strip() != "2" or not truthy(cfg.get("deepspeed.overlap_comm")):
        return None
    ver = version_tuple(cfg.get("version.deepspeed"))
    if ver is not None and ver < DS_OVERLAP_FIRST:
        return None
    symptom = _nan_symptom(run)
    gn = points(run, "grad_norm")
    if symptom is None:
        return None
    evidence = [config_evidence(run, "deepspeed.zero_stage", "DeepSpeed ZeRO stage 2"),
                config_evidence(run, "deepspeed.overlap_comm", "overlap_comm = true"), symptom]
    if ver is not None:
        evidence.append(config_evidence(run, "version.deepspeed", f"deepspeed {cfg.get('version.deepspeed')}"))
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.6 if ver else 0.5,
        title="DeepSpeed ZeRO-2 overlap_comm bug: NaN grad_norm / zero loss",
        message="ZeRO-2 with overlap_comm=true" + (f" on deepspeed {cfg.get('version.deepspeed')}" if ver else "")
                + f" and {symptom.detail}: a known gradient corruption (DeepSpeed#5242, #5347)"
                + (f"; grad_norm non-finite at {int((~gn.finite).sum())} logs" if len(gn) else "") + ".",
        first_step=symptom.step, evidence=evidence, basis="inferred", symptom="known_bug_signature",
        references=["https://github.com/deepspeedai/DeepSpeed/issues/5347",
                    "https://github.com/deepspeedai/DeepSpeed/issues/5242"],
        remedies=[("Set \"overlap_comm\": false in the DeepSpeed zero_optimization block (or raise reduce_bucket_size), "
                  "or use ZeRO-1/ZeRO-3; rerun from the last clean checkpoint.")],
    )


def _cudnn_sdpa(run: Run) -> Finding | None:
    warns = run.events_of("cudnn_sdpa_warning")
    ver_s = run.config.get("version.torch")
    ver = version_tuple(ver_s)
    affected = ver is not None and ver[:3] == (2, 5, 0)
    if not warns and not affected:
        return None
    symptom = _nan_symptom(run)
    if symptom is None:
        return None
    evidence = [symptom]
    if warns:
        evidence.insert(0, event_evidence(warns[0], "\"cuDNN SDPA backward got grad_output.strides() != output.strides()\""))
    if ver is not None:
        evidence.insert(0, config_evidence(run, "version.torch", f"torch {ver_s}"))
    direct = bool(warns) and (affected or ver is None)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error",
        confidence=0.8 if direct else (0.55 if affected else 0.45),
        title="cuDNN SDPA backward NaN (torch 2.5.0)",
        message=("torch 2.5.0 " if affected else "") + ("warned about cuDNN SDPA backward strides " if warns else "")
                + f"and {symptom.detail}: the cuDNN attention backward produces NaN gradients (pytorch#138581, #139298).",
        first_step=symptom.step, evidence=evidence, basis="direct" if direct else "inferred", symptom="known_bug_signature",
        references=["https://github.com/pytorch/pytorch/issues/139298"],
        remedies=[("Upgrade torch to >= 2.5.1, or call torch.backends.cuda.enable_cudnn_sdp(False) before training, "
                  "or use attn_implementation=\"eager\" / \"flash_attention_2\".")],
    )


def _ga_loss(run: Run) -> Finding | None:
    cfg = run.config
    ver_s = cfg.get("version.transformers")
    ver = version_tuple(ver_s)
    ga = num(cfg.get("gradient_accumulation_steps"))
    if ver is None or not (HF_GA_BAD[0] <= ver < HF_GA_BAD[1]) or not ga or ga <= 1:
        return None
    loss = points(run, "loss")
    loss = loss.select(loss.finite & (loss.values > 0))
    vocab = num(cfg.get("vocab_size"))
    inflated = None
    if len(loss) and vocab and vocab > 1 and loss[0].value > ABOVE_UNIFORM * math.log(vocab):
        inflated = loss[0].evidence(f"first loss {fmt(loss[0].value)} is above ln(vocab_size={int(vocab)}) = "
                                    f"{math.log(vocab):.2f}, the loss of uniform guessing")
    evidence = [config_evidence(run, "version.transformers", f"transformers {ver_s}"),
                config_evidence(run, "gradient_accumulation_steps", f"gradient_accumulation_steps = {int(ga)}")]
    if inflated:
        evidence.append(inflated)
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error" if inflated else "warning",
        confidence=0.7 if inflated else 0.5,
        title=f"transformers {ver_s}: logged loss inflated ~{int(ga)}x by gradient accumulation",
        message=f"transformers {ver_s} with gradient_accumulation_steps={int(ga)} scales the logged loss (and, for models "
                "without loss_kwargs, the gradients) by the accumulation steps (transformers#34263, fixed in 4.47.1).",
        first_step=loss[0].step if len(loss) else None, evidence=evidence, basis="direct" if inflated else "inferred", symptom="known_bug_signature",
        references=["https://github.com/huggingface/transformers/issues/34263"],
        remedies=["Upgrade transformers to >= 4.47.1 (or pin 4.45) and retrain; do not compare losses across versions."],
    )

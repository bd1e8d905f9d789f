"""Padding-free / packed batches on an attention kernel that ignores the sample boundaries.

What it detects:
    ``padding_free`` (or TRL >= 0.19 ``packing``, which flattens batches the same way) with an
    attention implementation that is not FlashAttention in a transformers version whose
    SDPA/eager/flex path cannot see the boundaries; TRL's warning "Padding-free training is
    enabled, but the attention implementation is not set to 'flash_attention_2'" (or "... a
    supported flash attention variant") and FlashAttention fallback warnings, which prove the
    model actually loaded is not FlashAttention even when the script asked for it; a first loss
    far above the usual fine-tuning level as the symptom.

Why it matters:
    A padding-free batch is one long row whose sample boundaries live only in ``position_ids``.
    Only FlashAttention's varlen kernels used them before transformers 4.54; every other kernel
    attends across samples, so each sample is conditioned on unrelated text: the loss starts
    far too high (worse with larger batches) and the model learns from contaminated context.

Evidence used:
    Config ``padding_free``, ``packing``, ``attn_implementation``, ``version.transformers``,
    ``version.trl``; events ``padding_free_warning``, ``flash_attn_warning``; series ``loss``.

Remedies:
    Load the model with ``attn_implementation="flash_attention_2"`` (TRL: through
    ``model_init_kwargs`` / ``--attn_implementation``, not only in your own config), or upgrade
    to transformers >= 4.54 where SDPA/eager build the block-diagonal mask from position_ids,
    or turn padding-free off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Evidence, Finding, Run
from detectors._facts import (
    event_evidence,
    fact_bool,
    fact_evidence,
    fmt,
    matching_events,
    scalar_evidence,
    values,
    version_tuple,
)

CODE = "PACK001"
SLUG = "padding-free-without-flash-attn"
ROOT_CAUSE = "padding_free_without_flash_attn"
NEEDS = ("config", "events")
NEEDS_ANY = True

# Version table (which setups attend across samples). Sources:
# - transformers#31629 (v4.44): FlashAttention-2 uses position_ids of a padding-free batch (varlen kernel).
# - transformers#39194 (merged 2025-07-03, first released in v4.54.0): sdpa/eager/flex build a block-diagonal
#   causal mask from position_ids when no attention_mask is passed. TRL's padding-free collator passes none, so
#   from 4.54 padding-free is correct on those kernels too. transformers#46333 (padding-free docs) notes the caveat:
#   an explicit 2-D attention_mask disables the detection (transformers#46634).
# - trl#3526 (v0.19): packing became boundary-aware (position_ids) and implies padding-free; before 0.19 packing
#   was the wrapped ConstantLengthDataset, cross-sample by design for every kernel, which is not this failure.
# - trl#5316: TRL's own warning named only FlashAttention variants even after transformers handled sdpa/eager.
FIXED_TRANSFORMERS = (4, 54, 0)
TRL_PACKING_IS_PADDING_FREE = (0, 19, 0)
#: a pretrained LM fine-tuned on in-domain text starts around 0.5-3 nats; a first loss above this with a
#: padding-free batch is the cross-sample attention signature reported in trl#2834
HIGH_START_LOSS = 4.0
PF_WARNING_RE = re.compile(r"Padding-free training is enabled, but the attention implementation"
                           r"|You are using packing, but the attention implementation is not set", re.IGNORECASE)
FA_FALLBACK_RE = re.compile(r"flash.?attention.?2?.*(?:not (?:be )?installed|cannot be used|not available|fall(?:ing)? ?back)"
                            r"|flash_attn.*(?:not installed|is not available)", re.IGNORECASE)
REFS = ["https://github.com/huggingface/trl/issues/2834", "https://github.com/huggingface/trl/pull/3526",
        "https://github.com/huggingface/transformers/pull/39194", "https://github.com/huggingface/transformers/pull/46333",
        "https://github.com/hiyouga/LlamaFactory/pull/4224"]


def _is_flash(name: str) -> bool:
    n = name.lower()
    return "flash" in n or n in ("fa2", "fa3", "fa4")


def _attention(run: Run) -> tuple[str | None, list[Evidence]]:
    """'flash' / 'other' / None (unknown) for the attention the model actually ran with."""
    facts = [f for f in run.config.facts("attn_implementation") if f.value not in (None, "", "auto")]
    ev: list[Evidence] = []
    non_flash = [f for f in facts if not _is_flash(str(f.value))]
    if non_flash:
        f = non_flash[0]
        ev.append(fact_evidence(f, f"attn_implementation = {f.value}"))
        return "other", ev
    if facts:
        return "flash", [fact_evidence(facts[0], f"attn_implementation = {facts[0].value}")]
    return None, ev


def detect(run: Run) -> Iterable[Finding]:
    pf = fact_bool(run, "padding_free")
    packing = fact_bool(run, "packing")
    trl_v = version_tuple(run.config.get("version.trl"))
    tf_v = version_tuple(run.config.get("version.transformers"))
    # the reader files every warning that mentions padding-free under this kind (e.g. TRL's batch-size-1 hint):
    # only the attention warning says the kernel ignores sample boundaries
    warned = [e for e in matching_events(run, "padding_free_warning", PF_WARNING_RE) if PF_WARNING_RE.search(e.message)]
    fallback = [e for e in matching_events(run, "flash_attn_warning", FA_FALLBACK_RE) if FA_FALLBACK_RE.search(e.message)]

    evidence: list[Evidence] = []
    if pf and pf[0]:
        evidence.append(fact_evidence(pf[1], "padding_free = true"))
    elif packing and packing[0] and (trl_v is None or trl_v >= TRL_PACKING_IS_PADDING_FREE) and not warned:
        if trl_v is None:
            return  # packing without a TRL version may be the wrapped (boundary-free by design) kind
        evidence.append(fact_evidence(packing[1], f"packing = true (TRL {run.config.get('version.trl')} packs padding-free)"))
    elif not warned:
        return

    attn, attn_ev = _attention(run)
    if warned or fallback:
        attn = "other"  # the library looked at the model actually loaded
    if attn == "flash":
        return
    if tf_v is not None and tf_v >= FIXED_TRANSFORMERS:
        return  # sdpa/eager/flex mask packed rows from position_ids there (transformers#39194)

    loss = values(run, "loss")
    high_start = bool(loss) and loss[0][1] >= HIGH_START_LOSS
    if attn is None and tf_v is None and not high_start:
        return  # nothing says which kernel ran nor which transformers: too speculative to report

    evidence.extend(attn_ev)
    evidence.extend(event_evidence(e) for e in (warned + fallback)[:3])
    reasons = []
    if warned:
        reasons.append("the trainer warned that padding-free runs without FlashAttention")
    if fallback:
        reasons.append("FlashAttention could not be used, the model fell back to another kernel")
    if attn_ev:
        reasons.append(f"attn_implementation is {attn_ev[0].detail.split('= ', 1)[-1]}")
    if tf_v is not None:
        tf = run.config.fact("version.transformers")
        assert tf is not None
        evidence.append(fact_evidence(tf, f"transformers {tf.value} < 4.54: only FlashAttention honours the sample "
                                          "boundaries of a padding-free batch"))
        reasons.append(f"transformers {tf.value} predates boundary-aware SDPA/eager masks (4.54)")
    elif attn is None:
        reasons.append("no attention implementation is recorded, so the default kernel (sdpa) was likely used")

    if high_start:
        later = sorted(r[1] for r in loss[len(loss) // 2:])
        median_later = later[len(later) // 2] if later else float("nan")
        evidence.append(scalar_evidence("loss", loss[0], f"first logged loss = {fmt(loss[0][1])} (fine-tuning usually "
                                                         f"starts below {HIGH_START_LOSS}); later median "
                                                         f"{fmt(median_later)}"))
        reasons.append(f"the first loss is {fmt(loss[0][1])}")

    guaranteed = tf_v is not None and attn == "other"
    if guaranteed or (high_start and (warned or fallback or attn == "other")):
        severity, confidence = "error", 0.85 if guaranteed else 0.7
    else:
        severity, confidence = "warning", 0.5 if (warned or attn == "other") else 0.35
    yield Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity=severity, confidence=confidence,
        title="Padding-free batches without FlashAttention attend across samples",
        message="Padding-free/packed training " + "; ".join(reasons) + ".",
        first_step=loss[0][0] if high_start else None, evidence=evidence,
        remedies=[("Load the model with attn_implementation='flash_attention_2' (TRL: pass it through "
                  "model_init_kwargs / --attn_implementation so the trainer's own from_pretrained uses it)."),
                  ("Or upgrade to transformers >= 4.54, where sdpa/eager/flex build the block-diagonal mask from "
                  "position_ids (do not pass an attention_mask with padding-free batches)."),
                  "Or set padding_free=False; compare the first losses with a padded baseline to confirm."],
        references=list(REFS), basis="direct" if (warned or fallback or guaranteed) else "inferred",
        symptom="config_defect" if (warned or fallback or guaranteed) else "high_start_loss",
    )

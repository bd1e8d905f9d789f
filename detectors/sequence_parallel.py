"""Sequence-parallel labels: with sequence_parallel_size > 1 a shard holds no supervised token.

What it detects:
    ``sequence_parallel_size > 1`` together with NaN confined to the NLL/SFT term (``nll_loss``,
    ``sft_loss``: the RPO/SFT regulariser of DPO) while the main loss stays finite; also an
    ``IndexError`` raised under sequence parallelism (the channel-loss/label-shift bug).

Why it matters:
    Sequence parallelism splits (and shifts) the labels across ranks. In affected versions a
    rank's shard can end up with every label -100, and the mean over zero tokens is NaN: the
    regulariser silently contributes nothing (or NaN gradients) while the preference loss looks
    normal. Removing sequence parallelism makes it go away, which is how it was found.

Evidence used:
    Config ``sequence_parallel_size``; series ``nll_loss`` and ``loss``; ``traceback`` events.

Remedies:
    Run with ``sequence_parallel_size 1`` (or upgrade ms-swift to a release with the label fix)
    and compare with the SP=1 baseline; check that every sample keeps a non-empty assistant part.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import points
from detectors._facts import event_evidence, fact_evidence, fact_number, fmt, scalar_evidence

CODE = "SP001"
SLUG = "sequence-parallel-labels"
ROOT_CAUSE = "sequence_parallel_labels"
NEEDS = ("config",)

#: NaN in at least this share of the NLL points counts as "the term is broken", not a blip
NAN_SHARE = 0.5
#: the main loss must be finite at at least this share of the same steps for NaN to be "confined"
FINITE_SHARE = 0.9
REFS = ["https://github.com/modelscope/ms-swift/pull/9977", "https://github.com/modelscope/ms-swift/pull/10185",
        "https://github.com/modelscope/ms-swift/issues/4753"]


def detect(run: Run) -> Iterable[Finding]:
    sp = fact_number(run, "sequence_parallel_size")
    if sp is None or sp[0] <= 1:
        return
    size, fact = int(sp[0]), sp[1]
    evidence: list[Evidence] = [fact_evidence(fact, f"sequence_parallel_size = {size}")]

    nll = points(run, "nll_loss")
    loss = points(run, "loss")
    bad_idx = np.flatnonzero(~nll.finite)
    if len(nll) and bad_idx.size / len(nll) >= NAN_SHARE:
        bad_steps = nll.steps[bad_idx]
        # the loss logged at each bad step (the last one at that step, as a {step: row} dict keeps)
        at = np.searchsorted(loss.steps, bad_steps, side="right") - 1
        present = ((at >= 0) & (loss.steps[np.clip(at, 0, None)] == bad_steps) if len(loss)
                   else np.zeros(len(at), dtype=bool))
        shared = at[present]
        finite = shared[np.isfinite(loss.values[shared]) & (loss.values[shared] != 0.0)]
        if shared.size and finite.size / shared.size >= FINITE_SHARE:
            bad0, fin0 = nll.row(int(bad_idx[0])), loss.row(int(finite[0]))
            evidence.append(scalar_evidence("nll_loss", bad0, f"nll_loss = {fmt(bad0[1])} from step {bad0[0]}; "
                                                              f"{bad_idx.size} of {len(nll)} logged points non-finite"))
            evidence.append(scalar_evidence("loss", fin0, f"loss = {fmt(fin0[1])} finite at the same steps "
                                                          f"({finite.size} of {shared.size})"))
            yield Finding(
                code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.85,
                title=f"NLL term NaN under sequence parallelism (sequence_parallel_size={size})",
                message=(f"nll_loss is NaN at {bad_idx.size} of {len(nll)} logged steps (from step {bad0[0]}) while the "
                         f"main loss stays finite, with sequence_parallel_size = {size}: the label shards of a rank "
                         "hold no supervised token, so the NLL mean is 0/0."),
                first_step=bad0[0], evidence=evidence,
                remedies=[("Rerun with sequence_parallel_size 1 (or upgrade ms-swift to a release with the sequence-"
                          "parallel label fix) and compare the loss with that SP=1 baseline."),
                          "Check the data: every sample must keep a non-empty assistant response after truncation.",
                          "Until fixed, set rpo_alpha to 0 (drop the NLL term) rather than train on a NaN regulariser."],
                references=list(REFS), basis="inferred", symptom="nonfinite_aux",
            )
            return

    crashes = [e for e in run.events_of("traceback")
               if (str(e.data.get("exc_type", "")).endswith("IndexError") or "IndexError" in e.message[:200])
               and "out of range in self" not in e.message]  # that one is the embedding: VOCAB001
    if crashes:
        e = crashes[0]
        evidence.append(event_evidence(e))
        yield Finding(
            code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.55,
            title=f"IndexError under sequence parallelism (sequence_parallel_size={size})",
            message=(f"The run raised IndexError with sequence_parallel_size = {size}; label/loss indexing under "
                     "sequence parallelism is a known source of this (label shift applied twice, local vs gathered "
                     "labels). Rerun with SP=1 to confirm."),
            first_step=e.step, evidence=evidence,
            remedies=["Rerun with sequence_parallel_size 1 to confirm, then upgrade ms-swift.",
                      "If it only fails with SP>1, report it with the traceback and versions."],
            references=list(REFS), basis="inferred", symptom="nonfinite_aux",
        )

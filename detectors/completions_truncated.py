"""Completions truncated: in GRPO/PPO-style training, (almost) every sampled completion hits the length cap.

What it detects:
    A policy-gradient run whose completion metrics say the generations never end: TRL GRPO's
    ``completions/clipped_ratio`` (share of completions without EOS, grpo_trainer.py) at or above
    ``CLIPPED_SHARE`` in at least ``RUN_SHARE`` of the logs, or its
    ``completions/mean_terminated_length`` exactly 0 (TRL logs 0 when no completion terminated);
    verl's ``response_length/clip_ratio`` likewise. The cap (``max_completion_length``,
    ``data.max_response_length``) is cited when the config has it.

Why it matters:
    A truncated completion has no final answer and usually fails the format reward, so rewards are
    flat (often 0 with ``reward_std`` 0: zero advantage, no gradient); the run spends its budget
    learning nothing, with no NaN anywhere.

Evidence used:
    ``completions/clipped_ratio``, ``completions/mean_terminated_length``, ``response_length/clip_ratio``,
    ``reward``/``reward_std``; config ``max_completion_length``.

Remedies:
    Raise ``max_completion_length`` (reasoning models need thousands of tokens), or shorten the expected
    output (prompt for concise answers, a length penalty), check that the chat template's EOS token is the
    tokenizer's and that generation stops on it; filter prompts whose answers cannot fit.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from autopsy.model import Evidence, Finding, Run
from detectors._common import config_evidence, fmt, points

CODE = "GEN001"
SLUG = "completions-truncated"
ROOT_CAUSE = "completions_truncated"
NEEDS = ("scalars",)

#: a log where at least this share of completions hit the cap
CLIPPED_SHARE = 0.9
#: ... in at least this share of the logs: the run, not a phase
RUN_SHARE = 0.8
MIN_LOGS = 3
#: TRL/ms-swift, verl; the bare name where a user tabulated TRL's metrics without their prefix
CLIP_METRICS = ("completions/clipped_ratio", "response_length/clip_ratio", "clipped_ratio")
#: mean completion length (TRL, verl, bare) and the config keys of the cap it may sit at
MEAN_LENGTH_METRICS = ("completions/mean_length", "response_length/mean", "mean_length", "completion_length")
CAP_KEYS = ("max_completion_length", "max_response_length", "max_new_tokens")
#: a mean length within this share of the cap: every completion ran to the cap
AT_CAP = 0.98


def detect(run: Run) -> Iterable[Finding]:
    yield from _truncated(run, MIN_LOGS) or _truncated(run, 1, few=True)


def _truncated(run: Run, min_logs: int, few: bool = False) -> list[Finding]:
    """``few``: fewer than MIN_LOGS logs (a pasted summary line): only when two length signals agree and the rewards
    have no variance, which is the failure itself (no advantage, no gradient), not a phase of the run."""
    evidence: list[Evidence] = []
    first_step = None
    for metric in CLIP_METRICS:
        pts = points(run, metric).finite_only()
        if len(pts) < min_logs:
            continue
        high = pts.values >= CLIPPED_SHARE
        if high.mean() >= RUN_SHARE:
            i = int(np.flatnonzero(high)[0])
            first_step = pts[i].step
            evidence.append(pts[i].evidence(f"{metric} = {fmt(pts[i].value)} at step {pts[i].step}; >= {CLIPPED_SHARE:g} "
                                            f"at {int(high.sum())} of {len(pts)} logs"))
    term = points(run, "completions/mean_terminated_length").finite_only()
    if len(term) >= min_logs:
        zero = term.values == 0.0
        if zero.mean() >= RUN_SHARE:
            i = int(np.flatnonzero(zero)[0])
            first_step = first_step if first_step is not None else term[i].step
            evidence.append(term[i].evidence(f"completions/mean_terminated_length = 0 at {int(zero.sum())} of {len(term)} "
                                             "logs: no completion ended with EOS"))
    cap_key = next((k for k in CAP_KEYS if isinstance(run.config.get(k), (int, float))
                    and not isinstance(run.config.get(k), bool) and run.config.get(k) > 0), None)
    if cap_key is not None:
        cap = float(run.config.get(cap_key))
        for metric in MEAN_LENGTH_METRICS:
            pts = points(run, metric).finite_only()
            if len(pts) < min_logs:
                continue
            at_cap = pts.values >= AT_CAP * cap
            if at_cap.mean() >= RUN_SHARE:
                i = int(np.flatnonzero(at_cap)[0])
                first_step = first_step if first_step is not None else pts[i].step
                evidence.append(pts[i].evidence(f"{metric} = {fmt(pts[i].value)} at step {pts[i].step}, the cap "
                                                f"{cap_key} = {fmt(cap)}, at {int(at_cap.sum())} of {len(pts)} logs"))
                break
    if not evidence:
        return []
    length_signals = len(evidence)
    for key in CAP_KEYS:
        if run.config.fact(key) is not None:
            evidence.append(config_evidence(run, key, f"{key} = {run.config.get(key)}: the cap every completion hits"))
            break
    rstd = points(run, "reward_std").finite_only()
    flat = bool(len(rstd)) and float(np.mean(rstd.values == 0.0)) >= RUN_SHARE
    if flat:
        evidence.append(rstd[-1].evidence("reward_std = 0 at most logs: equal rewards, zero advantage, no gradient"))
    if few and (length_signals < 2 or not flat):
        return []
    return [Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.7 if few else 0.85,
        title="Completions truncated: nearly every generation hits the length cap",
        message="; ".join(e.detail for e in evidence) + ".", first_step=first_step, evidence=evidence,
        remedies=["Raise max_completion_length (reasoning models need thousands of tokens) or ask for shorter answers.",
                  "Check that generation stops on the tokenizer's EOS (chat template, generation_config eos_token_id).",
                  "Filter prompts whose answers cannot fit the budget."],
        basis="direct", symptom="truncated_completions",
    )]

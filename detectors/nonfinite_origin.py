"""Where the first NaN/Inf came from, as measured during training by autopsy's flight recorder.

What it detects:
    The first non-finite loss or gradient in an ``autopsy-record/record.jsonl`` (written by
    ``autopsy.record``: the HF ``AutopsyCallback``, the Lightning callback or the plain-loop
    ``Recorder``), with where it started: the first module whose forward output went non-finite
    (found by replaying that step's forward with hooks under its saved RNG state), or, when the
    forward was finite, the first parameter whose gradient went non-finite in backward order.
    Also cites the offending batch (saved as safetensors) with its lengths, and the per-layer
    gradient norms over the steps before the onset.

Why it matters:
    Logs say *that* the loss went NaN; the record says *where* and on *which batch*. A NaN born in
    a module's forward is an activation overflow or a bad input in that module; one born in backward
    spreads to every layer before it, so the first bad layer in model order (usually the
    embedding) is the wrong place to look: the recorder names the first in backward order.

Evidence used:
    The record's non-finite event (step, module or parameter, direction, how it was found), its
    step lines (per-layer gradient norms, loss, token counts), the saved batch file, and the
    checkpoint lines (which saves were taken before any non-finite step reached the weights).

Remedies:
    Load the saved batch (``safetensors.torch.load_file``) and re-run it alone; inspect the named
    module (an overflowing activation: compute it in fp32 or bf16, scale or clamp its input; a
    custom backward: check it); keep training safe with ``on_nonfinite="skip"`` or ``"stop"``,
    which never let the NaN reach the weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from autopsy.model import Evidence, Finding, Run
from detectors._common import fmt

CODE = "REC001"
SLUG = "nonfinite-origin"
ROOT_CAUSE = None
NEEDS = ("scalars",)

#: layers cited by name in the gradient-norm evidence (the largest before the onset)
TOP_LAYERS = 3
#: a layer whose norm grew by this factor over the steps before the onset is called growing
GROWTH = 3.0


def detect(run: Run) -> Iterable[Finding]:
    onsets = [(rec, rec["onset"]) for rec in run.flight_records if rec.get("onset")]
    # under DeepSpeed ZeRO or FSDP each rank sees its own gradient shards: a rank that stopped or skipped for another
    # rank's non-finite fragment ("other_rank") adds nothing where that rank's own record is there
    own = {ev.get("step") for _, ev in onsets if not ev.get("other_rank")}
    for rec, onset in onsets:
        if not (onset.get("other_rank") and onset.get("step") in own):
            yield _finding(rec, onset)


def _where(rec: dict[str, Any], line: Any, step: Any) -> str:
    return f"line {line}" if isinstance(line, int) else f"step {step}"


def _finding(rec: dict[str, Any], ev: dict[str, Any]) -> Finding:
    src = rec["source"]
    step = ev.get("step")
    direction = ev.get("direction")
    module = ev.get("module")
    what = "loss" if ev.get("what") == "loss" else "gradient"
    how = str(ev.get("how") or "")
    evidence = [Evidence(src, _where(rec, ev.get("line"), step), _event_text(ev), step)]
    root_cause = None
    if direction == "forward" and module == "(input batch)":
        title = f"Non-finite values in the input batch at step {step}"
        root_cause = "nan_in_data"
        message = "The batch fed to the model already held NaN/Inf at step {step}."
    elif direction == "forward" and module:
        kind = f" ({ev['type']})" if ev.get("type") else ""
        title = f"NaN/Inf first appeared in the forward output of {module}{kind} at step {step}"
        message = (f"Replaying step {step}'s forward pass with hooks under its saved RNG state, {module} was the "
                   f"first module whose output was non-finite" +
                   (" while its inputs were finite" if ev.get("input_finite") else "") + ".")
        if ev.get("note"):
            message += f" {ev['note']}."
    elif direction == "forward":
        title = f"Loss went non-finite at step {step} outside the model's modules"
        message = f"Every module output was finite at step {step} but the loss was not: {ev.get('note', '')}."
    elif direction == "backward":
        param = ev.get("param")
        title = f"First non-finite gradient at {param} (backward) at step {step}"
        message = (f"The forward pass of step {step} was finite; in backward order the first parameter whose gradient "
                   f"was non-finite is {param} (layer {ev.get('group')}). The NaN spreads from there to every layer "
                   "before it")
        first_model = ev.get("first_in_model_order")
        if first_model and first_model != param:
            message += f", so the first bad parameter in model order ({first_model}) is not where it started"
        message += "." if "backward-order" in how else f" (located by {how})."
    elif ev.get("other_rank"):
        title = f"Non-finite gradient on another rank at step {step}"
        message = (f"This rank's gradient fragments were finite at step {step}, another rank's were not (DeepSpeed ZeRO and "
                   "FSDP shard the gradients); that rank's record (record.rank<N>.jsonl) says where it started.")
    else:
        title = f"Non-finite {what} at step {step}"
        message = f"The {what} went non-finite at step {step}; the recorder could not localise it ({how or 'no data'})."
    n_bad, n_all = ev.get("nonfinite_params"), ev.get("params")
    if isinstance(n_bad, int) and isinstance(n_all, int):
        message += f" {n_bad} of {n_all} parameters had non-finite gradients at that step."
    batch_txt = _batch_text(ev)
    if batch_txt:
        message += f" Batch: {batch_txt}."
        evidence.append(Evidence(ev.get("batch") or src, "batch", batch_txt, step))
    deep = ev.get("deep")
    if isinstance(deep, dict) and (deep.get("first_nonfinite_output") or deep.get("first_nonfinite_grad")):
        evidence.append(Evidence(src, _where(rec, ev.get("line"), step),
                                 f"deep mode: first non-finite module output {deep.get('first_nonfinite_output')}, "
                                 f"first non-finite output gradient {deep.get('first_nonfinite_grad')}", step))
    gn = _gradnorm_text(rec, step)
    if gn:
        evidence.append(Evidence(src, f"steps {gn[0]}-{gn[1]}", gn[2], step))
    action = ev.get("action")
    if action == "record":
        message += (" The step was recorded and let through (on_nonfinite='record'): the weights may be corrupt "
                    "from here.")
    elif action in ("skip", "stop"):
        message += (f" The recorder dropped that step's gradients (on_nonfinite='{action}'), so the NaN never reached "
                    "the weights" + ("; training stopped" if action == "stop" else "") + ".")
    clean = [c for c in rec.get("checkpoints", []) if c.get("clean") and c.get("path")]
    remedies = _remedies(ev, module, direction)
    if clean:
        c = clean[-1]
        evidence.append(Evidence(src, _where(rec, c.get("line"), c.get("step")),
                                 f"checkpoint {c['path']} at step {c.get('step')} saved before any non-finite step "
                                 "reached "
                                 "the weights", c.get("step")))
        remedies.insert(0, f"Resume from {c['path']} (step {c.get('step')}), saved with finite weights.")
    return Finding(code=CODE, name=SLUG, root_cause=root_cause, severity="error", confidence=0.9, title=title,
                   message=message, first_step=step if isinstance(step, int) else None, evidence=evidence,
                   remedies=remedies, basis="direct" if root_cause else "symptom",
                   symptom="nonfinite_grad_norm" if direction == "backward" else "nonfinite_loss")


def _event_text(ev: dict[str, Any]) -> str:
    bits = [f"non-finite {ev.get('what', '?')} at step {ev.get('step')}"]
    if ev.get("loss") is not None:
        bits.append(f"loss {fmt(_f(ev.get('loss')))}")
    for k in ("direction", "module", "param", "how"):
        if ev.get(k):
            bits.append(f"{k} {ev[k]}")
    return "; ".join(bits)


def _f(v: Any) -> float | None:
    from autopsy.record.format import num

    return num(v)


def _batch_text(ev: dict[str, Any]) -> str:
    parts = []
    if ev.get("batch"):
        parts.append(f"saved as {ev['batch']}")
    lengths = ev.get("lengths")
    if isinstance(lengths, list) and lengths:
        parts.append(f"{len(lengths)} rows, lengths {_list(lengths)}")
    sup = ev.get("sup_per_row")
    if isinstance(sup, list) and sup:
        parts.append(f"supervised tokens per row {_list(sup)}" + (" (a row with none)" if 0 in sup else ""))
    return ", ".join(parts)


def _list(xs: list[Any], n: int = 8) -> str:
    return "[" + ", ".join(str(x) for x in xs[:n]) + (", ..." if len(xs) > n else "") + "]"


def _gradnorm_text(rec: dict[str, Any], onset: Any) -> tuple[int, int, str] | None:
    """The largest per-layer gradient norms on the last finite step before the onset, and their growth."""
    heat = rec.get("heat") or {}
    steps, rows, groups = heat.get("steps") or [], heat.get("values") or [], rec.get("groups") or []
    pairs = [(s, r) for s, r in zip(steps, rows)
             if isinstance(s, int) and (not isinstance(onset, int) or s < onset) and r
             and all(v is not None and math.isfinite(v) for v in r)]
    if not pairs or len(groups) != len(pairs[-1][1]):
        return None
    (s0, r0), (s1, r1) = pairs[0], pairs[-1]
    top = sorted(range(len(groups)), key=lambda i: -r1[i])[:TOP_LAYERS]
    parts = []
    for i in top:
        grow = r1[i] / r0[i] if r0[i] > 0 else math.inf
        parts.append(f"{groups[i]} {fmt(r0[i])} -> {fmt(r1[i])}" + (" (growing)" if grow >= GROWTH else ""))
    text = (f"per-layer gradient norms over the {len(pairs)} finite step(s) before the onset, largest at step {s1}: "
            + "; ".join(parts))
    return s0, s1, text


def _remedies(ev: dict[str, Any], module: Any, direction: Any) -> list[str]:
    out = []
    if ev.get("batch"):
        out.append(f"Re-run the saved batch alone: safetensors.torch.load_file('{ev['batch']}'), then check its inputs "
                   "and labels (empty rows, extreme lengths, unseen token ids).")
    if direction == "forward" and module and module != "(input batch)":
        out.append(f"Inspect {module}: an activation overflowing its dtype is the usual cause; compute it in "
                   "fp32/bf16, "
                   "scale or clamp its input, or lower the learning rate if its weights grew.")
    elif direction == "backward":
        out.append(f"Inspect the backward of {ev.get('module') or ev.get('param')} (a custom autograd function, "
                   "a sqrt/log/"
                   "division at 0, or a loss term whose gradient is infinite).")
    out.append("Train with on_nonfinite='skip' or 'stop' so a non-finite step never reaches the weights.")
    return out

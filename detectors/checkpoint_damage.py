"""Checkpoint damage: saved weights that hold NaN/Inf, are empty ([0]-shaped) or are all zero.

What it detects:
    The saved artifacts themselves, whatever the logs say: (1) any non-finite value in any
    weight tensor of any checkpoint or exported model (one value in one tensor is enough), naming
    the first bad checkpoint, its tensor and counts; (2) weight tensors of shape ``[0]`` (a ZeRO-3
    save whose partitioned parameters were never gathered), or a load that says so ("copying a
    param with shape torch.Size([0]) from checkpoint", "vocab size of the LoRA weight 0");
    (3) a final model or adapter whose every float weight is exactly zero.

Why it matters:
    These are the damage itself: a model with NaN weights produces NaN for every input, a
    ``[0]``-shaped adapter cannot be loaded or merged, and an all-zero export is no model at all. A
    run that saved such weights is never healthy, even when every logged loss looks fine (a NaN
    that reached the weights after the last log, a bad save, a corrupted transfer).

Evidence used:
    ``Run.checkpoints`` tensor statistics and ``Run.checkpoint_analysis`` (first bad checkpoint,
    ZeRO-3 empty partitions), and ``empty_tensor_load`` log events.

Remedies:
    NaN/Inf: resume from the last checkpoint with finite weights (named in the evidence), after
    fixing the cause; never publish or merge the bad one (``autopsy scan`` in CI). Empty tensors:
    save with ``stage3_gather_16bit_weights_on_model_save: true`` (DeepSpeed ZeRO-3) or recover
    the full weights with ``zero_to_fp32.py`` from the ``global_step*`` folder; with PEFT, save the
    adapter from rank 0 after gathering (``accelerator.get_state_dict`` / ``deepspeed.zero.GatheredParameters``).
    All zero: check the export path (a state dict taken before loading, or from a wrapper).
"""

from __future__ import annotations

from collections.abc import Iterable

from autopsy.model import Checkpoint, Evidence, Finding, Run, TensorStat
from detectors._common import (
    checkpoint_evidence,
    checkpoints_sorted,
    ck_label,
    ck_step,
    count_of,
    event_evidence,
    step_near,
)

CODE = "CKPT001"
SLUG = "checkpoint-damage"
ROOT_CAUSE = None
NEEDS = ("checkpoints", "events")
NEEDS_ANY = True

#: float dtypes of trained weights (integer buffers such as position ids are legitimately zero or empty)
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}
#: an export is "all zero" only when it has at least this many float values: a tiny bias file is not a model
MIN_VALUES_ALL_ZERO = 1024
REFS = ["https://github.com/huggingface/transformers/issues/20082", "https://github.com/huggingface/peft/issues/1328",
        "https://github.com/OpenRLHF/OpenRLHF/issues/651"]


def detect(run: Run) -> Iterable[Finding]:
    yield from _nonfinite(run)
    yield from _empty(run)
    yield from _zero3_partitioned(run)
    yield from _all_zero(run)


def _zero3_partitioned(run: Run) -> Iterable[Finding]:
    """A DeepSpeed ZeRO-3 checkpoint as DeepSpeed writes it: [0]-shaped placeholders in the model states (by design)
    and the weights as fp32 partitions in every rank's optimizer state file. Not damage, but nothing loads it as a
    model: said as information, with the way to the weights (the HF Trainer warns "Saving the full checkpoint
    instead, use zero_to_fp32.py to recover weights" when stage3_gather_16bit_weights_on_model_save is off)."""
    rows = [r for r in (run.checkpoint_analysis or {}).get("zero3_partitioned") or [] if isinstance(r, dict)]
    if not rows:
        return
    first = rows[0]
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9,
        title=f"DeepSpeed ZeRO-3 checkpoint{'s' if len(rows) > 1 else ''}: the weights are in the optimizer partitions",
        message=(f"{ck_label(first.get('checkpoint'))}" + (f" and {len(rows) - 1} more" if len(rows) > 1 else "")
                 + f" hold{'s' if len(rows) == 1 else ''} the module's {first.get('n')} parameters as [0]-shaped placeholders, "
                 "as ZeRO-3 saves them, and the weights as fp32 partitions in each rank's optimizer state file: the "
                 "checkpoint is whole for resuming, but no model loader reads it as weights."),
        first_step=ck_step(run, first.get("step")),
        evidence=[Evidence(str(r.get("checkpoint")), "checkpoint", f"{ck_label(r.get('checkpoint'))}: {r.get('n')} "
                           "placeholders of shape [0]; fp32 partitions in every rank's optimizer state file",
                           ck_step(run, r.get("step"))) for r in rows[:3]],
        remedies=["Rebuild the weights with the checkpoint's zero_to_fp32.py (python zero_to_fp32.py <checkpoint> <out>), "
                  "or save gathered weights next time (DeepSpeed `stage3_gather_16bit_weights_on_model_save: true`)."],
        references=["https://github.com/huggingface/transformers/issues/20082"], basis="direct",
    )


def _bad_state(c: Checkpoint) -> list[tuple[str, TensorStat]]:
    """Non-finite weights (in model order) and optimizer state (not callback or scheduler scalars:
    Lightning's kth_value is legitimately inf). The weights are filtered before they are ordered:
    sorting every name of a 100k-tensor checkpoint costs more than the rest of this detector."""
    from autopsy.checkpoints.analysis import model_order, optimizer_tensors, weight_tensors

    bad_w = model_order(c, [(p, t) for p, t in weight_tensors(c, ordered=False) if t.nonfinite])
    return bad_w + [(p, t) for p, t in optimizer_tensors(c) if t.nonfinite]


def _nonfinite(run: Run) -> Iterable[Finding]:
    bad = [c for c in run.checkpoints if _bad_state(c)]
    if not bad:
        return
    first = _first(bad)
    tensors = [t for _, t in _bad_state(first)]
    n_values = sum(t.nonfinite for t in tensors)
    evidence, resume = checkpoint_evidence(run, first.step)
    if not evidence:
        t = tensors[0]
        evidence = [Evidence(_file_of(first, t), f"tensor {t.name}", f"{t.name}: {t.nan} NaN, {t.posinf + t.neginf} Inf "
                             f"of {t.numel} values ({t.dtype}, shape {t.shape})", ck_step(run, first.step))]
    named = {(e.artifact, e.where) for e in evidence}  # the first-bad line already names one tensor
    for t in [t for t in tensors if (_file_of(first, t), f"tensor {t.name}") not in named][:3]:
        evidence.append(Evidence(_file_of(first, t), f"tensor {t.name}", f"{t.name}: {t.nan} NaN, {t.posinf} +Inf, "
                                 f"{t.neginf} -Inf of {t.numel} values ({t.dtype})", ck_step(run, first.step)))
    later = [c for c in bad if c is not first]
    where = f"{ck_label(first.path)}" + (f" (step {first.step})" if first.step is not None else "")
    yield Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.99,
        title=f"Saved weights hold NaN/Inf: {where}, {len(tensors)} tensor(s)",
        message=(f"{where} holds {n_values} non-finite value(s) in {len(tensors)} tensor(s), first {tensors[0].name}"
                 + (f"; {len(later)} later checkpoint(s) too" if later else "") + ". These weights are unusable."),
        first_step=ck_step(run, first.step), evidence=evidence,
        remedies=[(resume[0].upper() + resume[1:] + ", after fixing the cause.") if resume else
                  "No checkpoint with finite weights was found: restart from the base model after fixing the cause.",
                  "Run `autopsy scan` on checkpoints before publishing or merging them (exit 1 on any NaN/Inf)."],
        basis="symptom", symptom="nonfinite_weights",
    )


def _empty(run: Run) -> Iterable[Finding]:
    evidence: list[Evidence] = []
    step: int | None = None
    n_empty = 0
    from autopsy.checkpoints.analysis import zero3_partitions_saved

    for c in _in_save_order(run):
        # a ZeRO-3 checkpoint written by DeepSpeed keeps its module's placeholders empty by design when each rank's
        # optimizer state file holds the fp32 partitions (zero_to_fp32.py rebuilds the weights): not damage
        whole = c.deepspeed is not None and zero3_partitions_saved(c)
        empty = [(f.path, t) for f in c.files for t in f.tensors if t.numel == 0 and 0 in t.shape
                 and t.dtype in FLOAT_DTYPES and not (whole and f.path.endswith("_model_states.pt"))]
        if empty and len(empty) * 2 >= sum(1 for f in c.files for t in f.tensors if t.dtype in FLOAT_DTYPES):
            path, t = empty[0]
            n_empty += len(empty)
            evidence.append(Evidence(path, f"tensor {t.name}", f"{ck_label(c.path)}: {len(empty)} weight tensor(s) of "
                                     f"shape {t.shape} (first {t.name}): partitions saved without gathering",
                                     ck_step(run, c.step)))
            step = step if step is not None else ck_step(run, c.step)
    for row in (run.checkpoint_analysis or {}).get("zero3_empty") or []:
        if isinstance(row, dict):
            n_empty += int(row.get("n") or 0)
            evidence.append(Evidence(str(row.get("checkpoint")), "checkpoint", f"{row.get('n')} ZeRO-3 parameters saved "
                                     f"empty in {ck_label(row.get('checkpoint'))}", ck_step(run, row.get("step"))))
    events = run.events_of("empty_tensor_load") + [
        e for e in run.events_of("error") if e.data.get("variant") == "state_dict_size_mismatch"
        and e.data.get("checkpoint_shape") == [0] and e.data.get("model_shape") not in (None, [0], [])]
    for ev in events[:3]:
        evidence.append(event_evidence(ev, f"loading the saved weights found empty tensors: \"{ev.message.strip()[:160]}\""))
    if not evidence:
        return
    ev_steps = [s for s in (ev.step if ev.step is not None else step_near(run, ev) for ev in events) if s is not None]
    zero3 = _zero_stage(run) == 3
    if zero3:
        evidence.append(Evidence(run.config.fact("deepspeed.zero_stage").source, "key deepspeed.zero_stage",
                                 "DeepSpeed ZeRO stage 3: parameters are partitioned across ranks"))
    n_ev = sum(e.count for e in events)
    yield Finding(
        code=CODE, name=SLUG, root_cause="zero3_empty_tensors", severity="error",
        confidence=0.9 if (n_empty or zero3) else 0.8,
        title="Checkpoint holds empty [0]-shaped tensors: ZeRO-3 partitions saved without gathering",
        message=(f"{count_of(n_empty, 'saved weight tensor')} {'has' if n_empty == 1 else 'have'} shape [0]" if n_empty else
                 f"{count_of(n_ev, 'load message')} {'says' if n_ev == 1 else 'say'} the saved tensors have shape [0]")
                + "; the trained weights are not in the checkpoint.",
        first_step=step if step is not None else (min(ev_steps) if ev_steps else None), evidence=evidence[:8],
        remedies=["Save with DeepSpeed `stage3_gather_16bit_weights_on_model_save: true` (HF: it is read from the "
                  "DeepSpeed config), or rebuild the full weights with `zero_to_fp32.py` from the global_step folder.",
                  "With PEFT under ZeRO-3, gather before saving (trainer.save_model / accelerator.get_state_dict), "
                  "on rank 0 only; then re-run the merge."],
        references=list(REFS), basis="direct", symptom="empty_tensors",
    )


def _all_zero(run: Run) -> Iterable[Finding]:
    for c in reversed(_in_save_order(run)):
        floats = [(f.path, t) for f in c.files for t in f.tensors if t.dtype in FLOAT_DTYPES and t.numel > 0]
        # the all-zero test first: it stops at the first tensor with a nonzero value (at once, in a trained model)
        if floats and all(t.all_zero for _, t in floats) and (total := sum(t.numel for _, t in floats)) >= MIN_VALUES_ALL_ZERO:
            path, t = floats[0]
            yield Finding(
                code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.9,
                title=f"Saved weights are all zero: {ck_label(c.path)}",
                message=f"every one of the {len(floats)} float tensors ({total} values) in {ck_label(c.path)} is exactly 0.",
                first_step=ck_step(run, c.step),
                evidence=[Evidence(path, f"tensor {t.name}", f"{ck_label(c.path)}: all {len(floats)} float tensors "
                                   f"({total} values) are exactly zero", ck_step(run, c.step))],
                remedies=["Check how the model was exported: a state dict taken from a wrapper, before loading, or "
                          "from a ZeRO-3 partition is empty or zero; re-export from the last good checkpoint."],
                basis="symptom", symptom="zero_weights",
            )
            return


def _in_save_order(run: Run) -> list[Checkpoint]:
    """Checkpoints by step, then those without one (a final save or a single weights file)."""
    return checkpoints_sorted(run) + [c for c in run.checkpoints if c.step is None]


def _first(cks: list[Checkpoint]) -> Checkpoint:
    with_step = [c for c in cks if c.step is not None]
    return min(with_step, key=lambda c: c.step or 0) if with_step else cks[0]


def _file_of(c: Checkpoint, t: TensorStat) -> str:
    for f in c.files:
        if any(x is t for x in f.tensors):
            return f.path
    return c.path


def _zero_stage(run: Run) -> int | None:
    v = run.config.get("deepspeed.zero_stage")
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None

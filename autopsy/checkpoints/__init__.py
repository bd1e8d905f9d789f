"""Checkpoint forensics: per-tensor health of every saved checkpoint, and what changed across them.

``collect(builder, discovery)`` (called by the pipeline) groups the discovered weight files into
checkpoints (:mod:`.layout`), scans every file with bounded memory (:mod:`.safetensors_file`,
:mod:`.torch_file`; nothing from an artifact is executed), registers each file as an artifact with
its status/problem, fills ``run.checkpoints`` (ordered by step, the final model last) and
``run.checkpoint_analysis``.

``run.checkpoint_analysis`` schema (stable keys; ``checkpoint`` = path relative to the run root,
``step`` = int or None for a final/unnumbered save; lists are capped at 200 entries, ``n_*`` exact):

- ``checkpoints``: [{checkpoint, step, kind, tensors, nonfinite_tensors, nonfinite_optimizer_tensors}] in order
- ``first_bad``: None or {checkpoint, step, n_tensors, n_weight_tensors, tensors: [{name, file, dtype, numel,
  nan, posinf, neginf}] (first 50 in model order), layers: [layer prefixes in model order],
  n_optimizer_tensors, optimizer_tensors: [same shape]}: the first checkpoint with a non-finite weight
  or optimizer-state tensor
- ``last_clean``: None or {checkpoint, step}: the last checkpoint before ``first_bad`` (or the last one
  when none is bad) whose tensors are all finite: the one to resume from
- ``unchanged``: {pairs: [{from, to, from_step, to_step, identical, compared}], frozen_by_design: [names],
  trainable_unchanged: [names], unknown: [names], n_frozen_by_design, n_trainable_unchanged, n_unknown}:
  tensors bitwise identical in every consecutive pair (non-finite tensors excluded); trainable = in the
  optimizer (names mapped, or every float weight when the counts match) or a LoRA/modules_to_save tensor
  of an adapter; ``unknown`` when neither says
- ``lora_b_all_zero``: None or {checkpoint, step, n_lora_b, n_all_zero, tensors: [names]} (latest
  checkpoint holding LoRA B tensors)
- ``optimizer``: None or {checkpoint, step, trainer_global_step, skipped_steps, path, n_groups, n_params,
  n_with_state, params_without_state: [{index, group[, name]}], n_params_without_state,
  exp_avg_sq_all_zero: [...], n_exp_avg_sq_all_zero, nonfinite_state: [{index, group, field, nan, posinf,
  neginf}], step_min, step_max, lr: [per group], initial_lr, weight_decay, names_mapped, stateless (SGD with
  momentum 0: no per-parameter state by design), family ("adam" | "sgd" | None, from the group keys)}
  (latest checkpoint)
- ``skipped_steps``: [{checkpoint, step, source: "deepspeed"|"optimizer", skipped, global_steps[, optimizer_step]}]
- ``scaler``: None or {checkpoint, step, scale, growth_factor, backoff_factor, growth_interval, growth_tracker}
- ``zero3_empty``: [{checkpoint, step, n, tensors}]: ZeRO-3 module placeholders of shape [0]
- ``fp16_near_limit``: [{checkpoint, step, tensor, max_abs, posinf, neginf}]: F16 weights with
  max |x| >= 32752 (half of 65504) or holding Inf
- ``fp16_overflow_on_cast``: [{checkpoint, step, tensor, dtype, max_abs}]: F32/BF16/F64 weights above 65504
  (they become Inf when cast to fp16, e.g. minimind's ``.half()`` save)

Per checkpoint (model.Checkpoint): ``optimizer`` (summary above, plus ``param_names`` when mapped),
``scaler``, ``deepspeed`` ({skipped_steps, global_steps, global_samples, ds_version, zero_stage,
dp_world_size, fp16, bf16, zero3_empty, n_zero3_empty, frozen_params, optimizer: {zero_stage, overflow,
dynamic_loss_scale, partition_count, loss_scaler, cur_scale, ...}}), ``adapter`` (adapter_config.json),
``extra`` ({trainer_global_step, scheduler, resume}).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autopsy.checkpoints.scanfile import FileScan

__all__ = ["analyze", "build_checkpoint", "collect", "scan_file"]


def file_kind(path: Path, kind: str | None = None) -> str:
    """discover's kind for a checkpoint file, or one guessed from its name."""
    name = path.name.lower()
    return kind or ("weights_index" if name.endswith(".index.json") else
                    "safetensors" if name.endswith(".safetensors") else "torch")


def scan_file(path: Path, kind: str | None = None, digest: bool = True, part: tuple[int, int] = (0, 1)) -> FileScan:
    """Scan one file by its kind (see :func:`file_kind`).

    ``digest=False`` skips the per-tensor digest (bitwise-unchanged detection needs it; ``scan`` does not).
    ``part=(i, k)``: the i-th of k slices of a safetensors file (see ``scan_safetensors``); only
    safetensors files are split.
    """
    from autopsy.checkpoints.safetensors_file import read_index, scan_safetensors

    kind = file_kind(path, kind)
    if kind == "weights_index":
        return read_index(path)
    if kind == "safetensors":
        return scan_safetensors(path, digest=digest, part=part)
    from autopsy.checkpoints.torch_file import scan_torch

    return scan_torch(path, digest=digest)


def __getattr__(name: str) -> Any:
    """``collect``/``build_checkpoint``/``analyze`` load on first use, so ``autopsy scan`` does not import them."""
    if name in ("collect", "build_checkpoint"):
        from autopsy.checkpoints import gather

        return getattr(gather, name)
    if name == "analyze":
        from autopsy.checkpoints.analysis import analyze

        return analyze
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The detector catalogue. Registration is this explicit list, not import side effects."""

from __future__ import annotations

from types import ModuleType

from detectors import (  # config/event detectors
    all_labels_masked,
    bf16_hardware,
    checkpoint_damage,
    completions_truncated,
    crash,
    degenerate_labels,
    empty_eval,
    empty_response,
    error_rate_pinned,
    fp16_hardware,
    fp16_overflow,
    framework_bug,
    gradientless_params,
    lora_task_type,
    loss_divergence,
    loss_flat,
    loss_shape,
    lr_stalled,
    lr_too_high,
    masked_batches,
    nan_in_data,
    nonfinite_onset,
    nonfinite_origin,
    overfitting,
    overflow_then_zero,
    padding_free,
    pretrained_not_loaded,
    sequence_parallel,
    vocab_mismatch,
)

ALL: list[ModuleType] = [
    nonfinite_onset,
    checkpoint_damage,
    nonfinite_origin,
    overflow_then_zero,
    fp16_overflow,
    lr_too_high,
    loss_divergence,
    lr_stalled,
    masked_batches,
    empty_eval,
    gradientless_params,
    nan_in_data,
    crash,
    framework_bug,
    empty_response,
    completions_truncated,
    all_labels_masked,
    degenerate_labels,
    sequence_parallel,
    padding_free,
    lora_task_type,
    bf16_hardware,
    fp16_hardware,
    vocab_mismatch,
    loss_flat,
    loss_shape,
    pretrained_not_loaded,
    error_rate_pinned,
    overfitting,
]


def by_code(code: str) -> ModuleType | None:
    code = code.strip().lower()
    for m in ALL:
        if m.CODE.lower() == code or m.SLUG.lower() == code:
            return m
    return None

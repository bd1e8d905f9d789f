"""Which causes explain which symptoms: the causal model of the diagnosis, as data.

A detector reports what it *observed* (``Finding.symptom``, one id of :data:`SYMPTOMS`) and,
when it can, the cause it proposes (``Finding.root_cause``). The diagnosis puts every observation
on one time axis and asks, for each proposed cause, how much of what was observed it explains:
:data:`EXPLAINS` is that relation. It is kept here, beside the causes, and not as ``if``s spread
through the detectors, so that it can be read, documented (docs/diagnosis.md) and tested
(tests/test_causes.py) in one place.

Reading the table: ``EXPLAINS["lr_too_high"]`` holds ``frozen_weights`` because once a too-high
LR has driven the weights to NaN, the optimizer keeps writing NaN (or the scaler skips every
step) and the tensors stop changing; "weights never moved" observed *after* the divergence is a
consequence of the LR, not a rival cause.

:data:`PRIOR` is how often a cause is the right answer when its evidence is of equal strength;
it is only the last tie-breaker (after coverage of the observed failure and directness).
"""

from __future__ import annotations

#: what a detector can observe (the symptom vocabulary)
SYMPTOMS: dict[str, str] = {
    "nonfinite_loss": ("the training loss went NaN/Inf (also hidden as 0.0 by HF's logging_nan_inf_filter: with a non-finite"
                       " grad_norm beside it, or, where no grad_norm is logged, exact zeros two or more logs in a row right "
                       "after a 10x spike; a perplexity that is NaN; where no loss is named at all, any series other than "
                       "rates, scores and rewards that goes from finite to NaN)"),
    "nonfinite_grad_norm": "the gradient norm went NaN/Inf and stayed so (every step skipped or NaN applied)",
    "nonfinite_aux": "NaN/Inf confined to an auxiliary or length-normalised term (nll_loss, logps/*, rewards/*, kl)",
    "eval_nonfinite": "the evaluation loss is NaN/Inf while the training loss is finite",
    "overflow_then_zero": "an absurd loss (>= 1e4 x its level, e.g. 1.19e+34) followed by exact 0.0",
    "skipped_steps": "optimizer steps skipped by the fp16 loss scaler (overflow messages, non-finite grad_norm)",
    "loss_scale_collapse": "the dynamic loss scale fell to its minimum",
    "loss_divergence": "the loss rose far above its early best and stayed there",
    "loss_spike": "isolated loss spikes far above the run's level after warmup",
    "loss_oscillation": "the loss (or validation loss) keeps swinging 3x up and down instead of descending",
    "eval_collapse": "the evaluation loss is many times the training loss and its accuracy near zero while training fits",
    "eval_rise": "the evaluation loss rose well above its best and stayed there while the training loss kept falling",
    "grad_norm_growth": "the gradient norm grew by orders of magnitude",
    "lr_near_zero": "the learning rate stayed near zero for the whole run",
    "loss_flat": "the loss never moved from its starting value",
    "high_start_loss": "the starting loss is far above what the model and task normally give",
    "zero_loss": "the loss is exactly 0 (with grad_norm 0 or NaN): no supervised token in the batch",
    "loss_ln2": "a preference loss stuck at ln 2 (0.693): chosen and rejected indistinguishable",
    "frozen_weights": "trainable tensors identical across checkpoints, or LoRA B still all zero",
    "no_grad": "a message that parameters or inputs have no gradient",
    "zero_grad_norm": "the gradient norm is exactly 0: nothing flows back",
    "nonfinite_weights": "NaN/Inf values in saved weights",
    "zero_weights": "a saved model or adapter whose trained tensors are all zero",
    "empty_tensors": "tensors of shape [0] in a saved checkpoint (partitioned parameters saved ungathered)",
    "rank_disagreement": "ranks of one run report different values or states",
    "degenerate_output": "generations collapse to one token (e.g. '!!!!')",
    "truncated_completions": "nearly every sampled completion hit the length cap (no EOS)",
    "trivial_task": "the training accuracy is perfect on every batch from the first logs and the loss ~0",
    "stopped_early": "training stopped before its planned steps without an error (the input ran out)",
    "crash": "the run died with an exception",
    "oom": "out of memory",
    "config_defect": "a configuration that is wrong by itself, whatever the curves show",
    "known_bug_signature": "the signature of a known framework bug",
}

_NONFINITE = {"nonfinite_loss", "nonfinite_grad_norm", "nonfinite_weights", "eval_nonfinite", "overflow_then_zero"}
#: what follows once NaN has reached the weights, whatever put it there
_AFTER_NAN = {"frozen_weights", "nonfinite_weights", "eval_nonfinite", "degenerate_output", "zero_loss", "nonfinite_aux"}

#: cause -> the symptoms it explains (the causal model; docs/diagnosis.md renders this table)
EXPLAINS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "lr_too_high": _NONFINITE | _AFTER_NAN | {"loss_divergence", "loss_spike", "loss_oscillation", "eval_collapse",
                                             "grad_norm_growth", "skipped_steps", "loss_scale_collapse", "crash"},
    "fp16_overflow": _NONFINITE | _AFTER_NAN | {"skipped_steps", "loss_scale_collapse", "lr_near_zero", "loss_flat",
                                               "loss_spike", "grad_norm_growth", "crash"},
    "loss_scale_collapse": _NONFINITE | _AFTER_NAN | {"skipped_steps", "loss_scale_collapse", "lr_near_zero",
                                                     "loss_flat", "crash"},
    "bf16_unsupported_hardware": {"crash", "nonfinite_loss", "nonfinite_grad_norm", "config_defect"},
    "fp16_unsupported_hardware": _NONFINITE | _AFTER_NAN | {"config_defect", "skipped_steps"},
    "empty_response": {"nonfinite_aux", "nonfinite_loss", "nonfinite_grad_norm", "eval_nonfinite", "zero_loss",
                       "loss_ln2", "loss_flat", "frozen_weights", "config_defect", "nonfinite_weights", "zero_grad_norm"},
    "all_labels_masked": {"zero_loss", "nonfinite_loss", "nonfinite_grad_norm", "eval_nonfinite", "loss_flat",
                          "frozen_weights", "nonfinite_aux", "config_defect", "nonfinite_weights", "zero_grad_norm"},
    "sequence_parallel_labels": {"nonfinite_aux", "nonfinite_loss", "zero_loss", "config_defect"},
    "padding_free_without_flash_attn": {"high_start_loss", "loss_spike", "grad_norm_growth", "config_defect"},
    "gradientless_params": {"frozen_weights", "loss_flat", "no_grad", "zero_weights", "zero_grad_norm", "crash"},
    "lora_task_type_mismatch": {"frozen_weights", "zero_weights", "loss_flat", "config_defect"},
    "nan_in_data": _NONFINITE | _AFTER_NAN,
    "vocab_mismatch": {"crash", "nonfinite_loss"},
    "framework_bug": _NONFINITE | _AFTER_NAN | {"skipped_steps", "loss_flat", "rank_disagreement", "crash",
                                               "known_bug_signature", "empty_tensors", "high_start_loss",
                                               "loss_divergence", "lr_near_zero"},
    "out_of_memory": {"oom", "crash"},
    "zero3_empty_tensors": {"empty_tensors", "crash", "zero_weights"},
    "kl_estimator_overflow": _NONFINITE | _AFTER_NAN,
    "ctc_output_longer_than_input": _NONFINITE | _AFTER_NAN | {"loss_divergence", "loss_spike", "crash"},
    "lr_schedule_stalled": {"lr_near_zero", "loss_flat", "frozen_weights"},
    "degenerate_labels": {"trivial_task", "zero_loss"},
    "completions_truncated": {"truncated_completions", "loss_flat", "zero_grad_norm"},
    "zero_advantage_groups": {"frozen_weights", "zero_grad_norm", "zero_loss", "loss_flat"},
    "data_exhausted": {"stopped_early", "eval_nonfinite"},
    "loss_shape_mismatch": {"config_defect", "loss_flat", "nonfinite_loss", "nonfinite_grad_norm", "zero_loss", "crash"},
    "pretrained_weights_not_loaded": {"config_defect", "loss_flat", "high_start_loss", "loss_divergence", "crash"},
    "crash": {"crash"},
}.items()}

#: how often each cause is right when the evidence is otherwise equal (last tie-breaker; rough
#: shares of the failure kinds in public issue threads, see shared/failure-catalog.md)
PRIOR: dict[str, float] = {
    "lr_too_high": 0.16, "fp16_overflow": 0.14, "loss_scale_collapse": 0.08, "all_labels_masked": 0.09,
    "framework_bug": 0.10, "gradientless_params": 0.07, "empty_response": 0.05, "out_of_memory": 0.06,
    "nan_in_data": 0.05, "bf16_unsupported_hardware": 0.03, "padding_free_without_flash_attn": 0.02,
    "lora_task_type_mismatch": 0.02, "sequence_parallel_labels": 0.02, "vocab_mismatch": 0.02,
    "zero3_empty_tensors": 0.02, "kl_estimator_overflow": 0.02, "lr_schedule_stalled": 0.02,
    "completions_truncated": 0.02, "zero_advantage_groups": 0.02, "data_exhausted": 0.02, "fp16_unsupported_hardware": 0.02, "ctc_output_longer_than_input": 0.02,
    "degenerate_labels": 0.02, "loss_shape_mismatch": 0.02, "pretrained_weights_not_loaded": 0.02, "crash": 0.01,
}

#: symptoms that make a run failed by themselves (even with no cause named): the damage is done
DAMAGE = frozenset({"nonfinite_weights", "empty_tensors", "zero_weights"})


def explains(cause: str | None, symptom: str | None) -> bool:
    return bool(cause) and bool(symptom) and symptom in EXPLAINS.get(cause or "", frozenset())


def markdown_table() -> str:
    """The explains table as Markdown (docs/diagnosis.md carries it verbatim; a test checks they agree)."""
    rows = ["| cause | explains | prior |", "|---|---|---|"]
    for cause in sorted(EXPLAINS):
        rows.append(f"| `{cause}` | {', '.join(f'`{s}`' for s in sorted(EXPLAINS[cause]))} | {PRIOR.get(cause, 0.0):.2f} |")
    return "\n".join(rows) + "\n"


def symptoms_table() -> str:
    rows = ["| symptom | what was observed |", "|---|---|"]
    rows += [f"| `{k}` | {v} |" for k, v in SYMPTOMS.items()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m autopsy.causes: the two tables for docs/diagnosis.md
    print(symptoms_table())
    print(markdown_table())

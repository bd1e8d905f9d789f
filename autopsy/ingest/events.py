"""Log events: what a line *says* (overflow, OOM, traceback, warning), as stable kinds.

Each known message text maps to one kind of ``EVENT_KINDS`` with its parsed fields. The texts
are the ones the libraries really print (DeepSpeed loss_scaler.py, torch checkpoint.py /
grad_scaler.py, transformers trainer.py / training_args.py / modeling_gemma*.py, TRL
sft/cpo/orpo trainers, LLaVA/FastChat preprocess, MAE/DeiT engines, axolotl callbacks).

:class:`EventSink` stores them with bounded memory: identical repeats are folded
(``Event.count``) and each kind keeps its first ``HEAD_PER_KIND`` and last ``TAIL_PER_KIND``
events, so a log with a million overflow lines still shows how the sequence started and ended.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from autopsy.ingest.text_metrics import NON_LETTERS, has, letters_have, line_spans
from autopsy.model import Event

#: stable event kinds (docs/ARCHITECTURE.md)
EVENT_KINDS = (
    "traceback", "overflow", "loss_scale_min", "lr_before_step", "no_grad_inputs", "no_grad_fn",
    "tokenization_mismatch", "response_key_missing", "padding_free_warning", "flash_attn_warning",
    "nan_stop", "oom", "bf16_unsupported", "prompt_fills_max_length", "index_out_of_range",
    "cudnn_sdpa_warning", "ddp_unused_params", "unscale_fp16", "gemma_eager_warning", "loss_watchdog",
    "empty_tensor_load", "nan_input", "labels_masked", "no_trainable_params", "native_abort", "input_exhausted",
    "collective_timeout", "empty_reduction", "zero_plan", "loss_rejected", "ctc_no_alignment", "ctc_lengths", "vae_nan", "missing_keys", "grad_skip",
    "no_labels_found", "loss_diverged", "resumed", "loss_shape_mismatch", "checkpoint_not_found", "darknet_region", "step_skipped",
    "nonfinite_logged", "killed", "sequence_too_long", "weights_newly_initialized", "early_stop", "warning", "error",
)

#: events kept per kind from the start of the log: enough to show how a sequence began
HEAD_PER_KIND = 150
#: events kept per kind from the end of the log: how it ended (the collapse, the crash)
TAIL_PER_KIND = 50
#: distinct folded warning/error messages kept per kind (repeats only bump the count)
MAX_DISTINCT_MESSAGES = 500


def _f(x: str) -> float:
    return float(x)


def _pow2(x: float) -> float:
    """2**x, 0.0 when it underflows and inf when it overflows (a log2 loss scale of -16200 is a scale of 0)."""
    try:
        return 2.0 ** x
    except OverflowError:
        return float("inf")


#: the per-sample lengths a CTC loss takes, as a loop names them when it prints them
_IN_LENS = r"\b(?:input|inputs|feat|feats|feature|frame|frames|x|xs|src|enc|encoder_out|output|logit|logits|hyp)_(?:lengths?|lens)\b"
_LABEL_LENS = r"\b(?:label|labels|target|targets|tgt|y|ys|text|token|tokens|transcript)_(?:lengths?|lens)\b"
_LEN_LIST = r"[\s:=,]{0,4}(?:tensor\()?\[([\d,\s]{1,4000})\]"


_ADAPTER_KEY = re.compile(r"'([^']*\.(?:lora_[AB]|lora_embedding_[AB]|lora_magnitude_vector)\b[^']*)'")


def _missing(keys: str) -> dict[str, Any]:
    lora = _ADAPTER_KEY.findall(keys)
    return {"keys": keys.count("'") // 2, "adapter_keys": len(lora), "first_adapter_key": lora[0] if lora else None}


def _lengths(inputs: str, labels: str) -> dict[str, Any]:
    a, b = _shape(inputs), _shape(labels)
    return {"inputs": a, "labels": b} if a and len(a) == len(b) else {}


def _shape(dims: str) -> list[int]:
    return [int(d) for d in dims.replace(" ", "").split(",") if d]


# (kind, compiled regex, data builder). Order matters: the first match wins for a line.
_NUM = r"(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
#: the exception in front of a CheckNumerics message ("...InvalidArgumentError: ", "... (see above for traceback): ")
_CHECK_PREFIX = re.compile(r"^.*?(?:Error|Exception)\b(?: \(see above for traceback\))?:\s*")
_PATTERNS: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]]] = [
    ("overflow", re.compile(r"Attempted loss scale: " + _NUM + r", but hysteresis is (\d+)\. Reducing hysteresis to (\d+)"),
     lambda m: {"attempted": _f(m[1]), "new": _f(m[1]), "hysteresis": int(m[2]), "new_hysteresis": int(m[3])}),
    ("overflow", re.compile(r"(?:OVERFLOW!|overflow!|Overflow detected)[^\n]*?Attempted loss scale: " + _NUM + r", reducing to " + _NUM),
     lambda m: {"attempted": _f(m[1]), "new": _f(m[2])}),
    ("overflow", re.compile(r"Grad overflow on iteration:? (\d+)"), lambda m: {"iteration": int(m[1])}),
    ("overflow", re.compile(r"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to " + _NUM),
     lambda m: {"new": _f(m[1])}),  # apex amp
    ("overflow", re.compile(r"OVERFLOW! Rank \d+ Skipping step|Gradient overflow\.\s+Skipping step"), lambda m: {}),
    # fairseq trainer.py (and forks): "NOTE: [gradient ]overflow detected, [ignoring gradient, ]setting loss scale to: X"
    ("overflow", re.compile(r"[Oo]verflow detected,(?: ignoring gradient,)? setting loss scale to:? " + _NUM),
     lambda m: {"new": _f(m[1])}),
    # OpenAI improved-/guided-diffusion's fp16 trainer (fp16_util.py, train_util.py): a non-finite gradient lowers
    # log2 of the loss scale by 1 and skips the step: "Found NaN, decreased lg_loss_scale to {lg_loss_scale}"
    ("overflow", re.compile(r"Found NaN, decreased lg_loss_scale to (-?\d+(?:\.\d+)?)"),
     lambda m: {"new": _pow2(float(m[1])), "lg_new": float(m[1])}),
    # PaddlePaddle's dygraph AmpScaler (verbose; PaddleOCR, PaddleDetection): "Found inf or nan, current scale is:
    # 2.842170943040401e-14, decrease to: 2.842170943040401e-14*0.5" (the new scale is the product)
    # NVIDIA DeepLearningExamples (BERT, ...) log the scaler's new scale through DLLogger when an overflow skips the
    # step (run_pretraining.py: dllogger.log(step="PARAMETER", data={"loss_scale": scaler.loss_scale()})):
    # "DLL 2020-05-30 07:49:15.964050 - PARAMETER loss_scale : 5.684341886080802e-14"
    ("overflow", re.compile(r"PARAMETER loss_scale : " + _NUM), lambda m: {"new": float(m[1])}),
    ("overflow", re.compile(r"Found inf or nan, current scale is: " + _NUM + r", decrease to: " + _NUM + r"\*" + _NUM),
     lambda m: {"attempted": _f(m[1]), "new": (_f(m[2]) or 0.0) * (_f(m[3]) or 0.0)}),
    ("loss_scale_min", re.compile(r"Current loss scale already at minimum"), lambda m: {}),
    # fairseq DynamicLossScaler: FloatingPointError("Minimum loss scale reached (0.0001). Your loss is probably exploding...")
    ("loss_scale_min", re.compile(r"Minimum loss scale reached \(?" + _NUM + r"?"), lambda m: {"min_scale": _f(m[1]) if m[1] else None}),
    # k2/icefall-style recipes (and forks) abort when the AMP GradScaler's scale halves below a floor:
    # RuntimeError(f"grad_scale is too small, exiting: {cur_grad_scale}")
    ("loss_scale_min", re.compile(r"grad[_ ]scale is too small(?:, exiting)?:? ?" + _NUM + r"?"),
     lambda m: {"min_scale": _f(m[1]) if m[1] else None}),
    # a data pipeline or a loop's own check saying the *input* is non-finite (not the loss): the cause named directly
    ("nan_input", re.compile(r"(?i)\b(?:input|inputs|input_ids|batch|sample|samples|example|examples|data|dataset|feature|"
                             r"features|label|labels|target|targets|pixel_values|embeddings?)\b[^\n]{0,40}?\b(?:contains?|has|have|"
                             r"with|found|got)\s+(?:\d+\s+)?(?:NaN|nan|Inf|inf|non-finite)(?!, infinity or a value too large)"), lambda m: {}),
    ("lr_before_step", re.compile(r"tried to get lr value before scheduler/optimizer started stepping"), lambda m: {}),
    ("no_grad_inputs", re.compile(r"None of the inputs have requires_grad=True"), lambda m: {}),
    ("no_grad_fn", re.compile(r"element (\d+) of tensors does not require grad"), lambda m: {"element": int(m[1])}),
    ("no_grad_fn", re.compile(r"does not require grad and does not have a grad_fn"), lambda m: {}),
    ("no_grad_fn", re.compile(r"parameter has no gradients?"), lambda m: {"variant": "parameter_has_no_gradients"}),
    # nothing to train: PEFT print_trainable_parameters "trainable params: 0 || all params: 7,655,986,688 || ...",
    # Keras model.summary() "Trainable params: 0" (not its "Non-trainable params: 0"), Lightning's ModelSummary
    # "0         Trainable params"; torch GradScaler.step's "No inf checks were recorded for this optimizer" (no
    # parameter of the optimizer had a gradient)
    ("no_trainable_params", re.compile(r"(?<![Nn]on-)\b[Tt]rainable params:\s*0(?![\d.,])(?:[^\n]*?\|\|\s*all params:\s*"
                                       r"([\d,]+))?"),
     lambda m: {"all_params": int(m[1].replace(",", "")) if m[1] else None}),
    ("no_trainable_params", re.compile(r"^\s*0\s+Trainable params\b"), lambda m: {"all_params": None}),
    ("no_trainable_params", re.compile(r"No inf checks were recorded for this optimizer"),
     lambda m: {"variant": "grad_scaler_no_inf_checks"}),
    ("tokenization_mismatch", re.compile(r"tokenization mismatch: (\d+) vs\.? (\d+)"), lambda m: {"a": int(m[1]), "b": int(m[2])}),
    # TRL DataCollatorForCompletionOnlyLM: "Could not find response key `...` in the following instance: <the decoded
    # instance, often many lines>. This instance will be ignored in loss calculation." (a paste may keep only the tail)
    ("response_key_missing", re.compile(r"Could not find response key|This instance will be ignored in loss calculation"),
     lambda m: {}),
    # the YOLO family's label cache (yolov3/YOLOv5 assert, ultralytics' warning): no image of the training set has a
    # label file: "No labels found in <cache>, can not start training." / "WARNING ⚠️ No labels found in <cache>.", and
    # YOLOv5's wording before 2022, kept by YOLOv7: "No labels in <cache>. Can not train without labels." (the
    # validation set's "no labels found in val set" is left out, and so is the assert's source line that a traceback
    # prints above the message: "No labels found in {cache_path}")
    ("no_labels_found", re.compile(r"No labels found in (?!(?:val|test) set)(?!\{)(\S[^\n]{0,300})"
                                   r"|No labels in (?!\{)(\S[^\n]{0,300}?)\. Can not train without labels"),
     lambda m: {"where": m[1] or m[2]}),
    # unsloth's dataset check (>= 90% of sampled rows fully masked), printed or raised as ZeroDivisionError
    ("labels_masked", re.compile(r"(Most|All) labels in your dataset are -100"), lambda m: {"share": m[1].lower()}),
    # transformers' tokenizer (tokenization_utils_base._eventual_warn_about_too_long_sequence) encoding a text longer
    # than model_max_length: "Token indices sequence length is longer than the specified maximum sequence length for this
    # model (1024 > 512). Running this sequence through the model will result in indexing errors" (harmless when the
    # texts are chunked afterwards, as run_clm does)
    ("sequence_too_long", re.compile(r"Token indices sequence length is longer than the specified maximum\s+sequence "
                                     r"length for this (?:\w+ )?model \((\d+) > (\d+)\)"),
     lambda m: {"length": int(m[1]), "max": int(m[2])}),
    ("prompt_fills_max_length", re.compile(
        r"prompt alone fills `?max_length|prompts to be truncated or completely removed|"
        r"prompt[^\n]{0,60}(?:longer than|exceeds|fills)[^\n]{0,30}max_(?:prompt_)?length"), lambda m: {}),
    ("padding_free_warning", re.compile(r"[Pp]adding[-_ ]free|padding_free=True"), lambda m: {}),
    ("cudnn_sdpa_warning", re.compile(r"cuDNN SDPA backward got grad_output\.strides\(\)"), lambda m: {}),
    ("gemma_eager_warning", re.compile(r"strongly recommended to train Gemma\d* models with the `?eager`? attention"), lambda m: {}),
    ("flash_attn_warning", re.compile(r"Flash ?Attention|flash_attn|flash_attention_[23]|FlashAttention"), lambda m: {}),
    ("nan_stop", re.compile(r"Loss is (nan|inf|-inf|NaN|Inf)\b[^\n]{0,20}stopping training"), lambda m: {"value": m[1]}),
    # Calamari's (and other loops') own check: "Error: Loss is not finite! Trying to restart from last checkpoint."
    ("nan_stop", re.compile(r"\b[Ll]oss is not finite\b"), lambda m: {}),
    # a trainer's own check saying so in words (AutoGluon's fastai callback: "WARNING: NaN loss encountered in epoch 0!");
    # not a guard that skips the batch and trains on: "NaN loss detected, skipping batch" is a skip, not a stop
    ("nan_stop", re.compile(r"(?:\b(?:NaN|nan|NAN|Inf|inf) loss (?:encountered|detected)\b|\b(?:[Dd]etected|[Ee]ncountered) "
                            r"(?:a )?(?:NaN|nan|Inf|inf) loss\b)(?![^\n]{0,80}(?i:skip|ignor))"), lambda m: {}),
    # a trainer skipping one update because the gradient norm is not finite (float32 too, no loss scaler): ESPnet2
    # Trainer "The grad norm is nan. Skipping updating the model.", ESPnet1 "grad norm is nan. Do not update model."
    ("grad_skip", re.compile(r"(?i)\bgrad(?:ient)? norm is (nan|inf|-inf)\b[.!,]?\s*(?:skipping updat|do not update)"),
     lambda m: {"value": m[1].lower()}),
    # a trainer's own finiteness check stopping the run: detectron2 SimpleTrainer._detect_anomaly (and forks)
    # "FloatingPointError: Loss became infinite or NaN at iteration=27!"; Keras TerminateOnNaN "Batch 3: Invalid loss,
    # terminating training" (MindSpore's LossMonitor raises the same words); Lightning EarlyStopping(check_finite)
    # "Monitored metric val_loss = nan is not finite"; ESPnet2 Trainer "The gradients at all steps are invalid in this
    # epoch"; TF Estimator's NanTensorHook NanLossDuringTrainingError
    ("nan_stop", re.compile(r"Loss became infinite or NaN at iteration\s*=?\s*(\d+)"), lambda m: {"iteration": int(m[1])}),
    ("nan_stop", re.compile(r"(?:Batch (\d+): )?Invalid loss, terminating training"),
     lambda m: {"batch": int(m[1]) if m[1] else None}),
    ("nan_stop", re.compile(r"Monitored metric (\S+) = (nan|inf|-inf|tensor\(nan[^)]*\)) is not finite"),
     lambda m: {"metric": m[1]}),
    ("nan_stop", re.compile(r"The gradients at all steps are invalid in this epoch"), lambda m: {}),
    ("nan_stop", re.compile(r"NanLossDuringTrainingError"), lambda m: {}),
    # ... whose message is logged first (tf.estimator basic_session_run_hooks.NanTensorHook: logging.error(failure_message)
    # before the raise, logging.warning when fail_on_nan_loss is off): "Model diverged with loss = NaN."
    ("nan_stop", re.compile(r"Model diverged with loss = NaN"), lambda m: {}),
    # tensorboardX (x2num.check_nan) warns when a value it is asked to log is non-finite; it does not say which one
    # ("WARNING:root:NaN or Inf found in input tensor.")
    ("nonfinite_logged", re.compile(r"NaN or Inf found in input tensor"), lambda m: {}),
    # torch.distributions validating a policy's output: a Real() constraint (logits, a Normal's loc) fails only on NaN
    # ("Expected parameter logits (Tensor of shape (280, 13)) of distribution Categorical(...) to satisfy the constraint
    # IndependentConstraint(Real(), 1), but found invalid values:", then the tensor of nan)
    ("nan_stop", re.compile(r"Expected parameter (\w+) \(Tensor of shape [^\n]{0,160}? to satisfy the constraint "
                            r"(?:IndependentConstraint\()?Real\(\)[^\n]{0,40}?, but found invalid values"),
     lambda m: {"tensor": m[1], "what": "distribution"}),
    # torch.multinomial refusing the probabilities it is to sample from (generate() with do_sample, an RL rollout): a
    # softmax gives no negative, so they held NaN or Inf, i.e. the model's logits did ("RuntimeError: probability tensor
    # contains either `inf`, `nan` or element < 0", aten/src/ATen/native/Distributions.cpp)
    ("nan_stop", re.compile(r"probability tensor contains either `?inf`?, `?nan`? or element < 0"),
     lambda m: {"tensor": "sampling probabilities", "what": "sampling"}),
    # TF writes a histogram summary of each variable: a NaN weight fails it ("Nan in summary histogram for: fc8/weights")
    ("nan_stop", re.compile(r"Nan in summary histogram for:?\s*(\S+)"), lambda m: {"tensor": m[1], "what": "weights"}),
    # ... the same error with its tensor cut off (a paste ending there: "InvalidArgumentError: Nan in summary hist")
    ("nan_stop", re.compile(r"Nan in summary hist(?:ogram)?\s*$"), lambda m: {"tensor": "(cut off)", "what": "weights"}),
    # TensorFlow's CheckNumerics op (tf.debugging.check_numerics, tf.clip_by_global_norm's own check) failing:
    # check_numerics_op.cc raises "<message> : Tensor had NaN values" ("Inf", "Inf and NaN"); clip_by_global_norm's
    # message is "Found Inf or NaN global norm.", i.e. the gradients ("InvalidArgumentError:  Found Inf or NaN global
    # norm. : Tensor had NaN values")
    ("nan_stop", re.compile(r"^([^\n]{0,240}?)\s*:\s+Tensor had (?:NaN|Inf|Inf and NaN) values"),
     lambda m: {"tensor": _CHECK_PREFIX.sub("", m[1]).strip().rstrip(".") or "(unnamed)", "what": "check_numerics"}),
    # torch.autograd.detect_anomaly() (or set_detect_anomaly(True)) raising in backward: "Function 'LogSigmoidBackward0'
    # returned nan values in its 0th output." (torch/csrc/autograd/engine.cpp): the first backward op that made a NaN
    ("nan_stop", re.compile(r"Function '(\w+)' returned nan values in its (\d+)\w* output"),
     lambda m: {"tensor": m[1], "what": "gradient", "anomaly": True}),
    # a loop's own finiteness check raising in words of its own: RecBole Trainer._check_nan "ValueError: Training loss
    # is nan"; AllenNLP's and OLMo's trainers "ValueError: nan loss encountered"; GluonTS "GluonTSUserError: Got NaN in
    # first epoch. Try reducing initial learning rate."; tf.debugging.check_numerics(loss, "Loss is NaN or Inf")
    # "InvalidArgumentError: Loss is NaN or Inf : Tensor had NaN values". Only on an exception's line, and only when
    # the message ties the NaN to the loss or to the training loop ("ValueError: Input contains NaN" is about inputs)
    ("nan_stop", re.compile(r"\b\w*(?:Error|Exception)\b:\s[^\n]{0,80}?(?:\b(?:[Ll]oss|LOSS)\b[^\n]{0,40}?"
                            r"\b(nan|NaN|NAN|inf|Inf|INF|infinite|Infinity)\b|\b(nan|NaN|NAN)\b[^\n]{0,25}?"
                            r"(?:\b[Ll]oss\b|\bin (?:the )?(?:first )?(?:epoch|iteration|step|batch)\b))"),
     lambda m: {"value": (m[1] or m[2]).lower()}),
    # a loop's own check saying so in plain words and going on (or breaking out of its loop): NeMo 0.x "WARNING: Loss
    # is NaN", hand-written loops' print("loss is nan") / "Loss became NaN"; not a condition spelled out ("if the loss
    # is NaN, lower the LR"), which is advice, nor the source line of a traceback (``raise X("loss is nan")``), nor a
    # guard that skips the batch and trains on ("Loss is NaN, skipping this batch")
    ("nan_stop", re.compile(r"^(?![^\n]*(?:\b(?:[Ii]f|[Ww]hether|[Ww]hen|[Cc]heck|[Aa]void|[Pp]revent|raise|assert)\b|"
                            r"\b(?:print|warn|warning|info|error|log)\()[^\n]*[Ll]oss\s+(?:is|was|bec))"
                            r"[^\n]*?\b[Ll]oss\s+(?:is|was|became|has become|went|turned)\s+(?:a\s+)?"
                            r"(nan|NaN|NAN|inf|Inf|INF|infinite|Infinity|-inf)(?![\w-])(?![^\n]{0,80}(?i:skip|ignor))"),
     lambda m: {"value": m[1].lower(), "warned": True}),
    # ... or a line that is only those words: the SILog loss of AdaBins/ZoeDepth/Depth-Anything and their copies prints
    # "Nan SILog loss" (then the inputs' shapes and ranges) when torch.isnan(loss); "NaN loss!" alone
    ("nan_stop", re.compile(r"^\W{0,3}(nan|NaN|Nan|NAN|inf|Inf)\s+(?:[A-Za-z][\w-]{0,20}\s+)?loss\W{0,3}$"),
     lambda m: {"value": m[1].lower(), "warned": True}),
    # NumPy warning that a reduction had nothing to reduce or divided 0 by 0 (numpy/_core/_methods.py "Mean of empty
    # slice."; the ufunc's "invalid value encountered in divide", "... in scalar divide" (NumPy 2), "... in
    # double_scalars" / "true_divide" (NumPy 1)): an average over zero batches or zero tokens is NaN this way
    ("empty_reduction", re.compile(r"RuntimeWarning: (?:(Mean of empty slice)|invalid value encountered in "
                                   r"(?:scalar divide|divide|true_divide|double_scalars|scalar true_divide))"),
     lambda m: {"what": "empty" if m[1] else "0/0"}),
    # a training plan of nothing, printed in the start-up banner: the HF Trainer's and the accelerate/diffusers example
    # scripts' "  Num examples = 0" / "  Total optimization steps = 0", kohya sd-scripts' "num batches per epoch /
    # 1epochのバッチ数: 0", "num epochs / epoch数: 0", "total optimization steps / 学習ステップ数: 0"
    # ... and sd-scripts' own refusal, printed before it returns without training: "No data found. Please verify
    # arguments (train_data_dir must be the parent of folders with images)"
    ("zero_plan", re.compile(r"No data found\. Please verify arguments(?: \([^)\n]{0,120}\))?"),
     lambda m: {"what": "examples", "said": m[0]}),
    ("zero_plan", re.compile(r"\b(Num examples|[Nn]um batches per epoch|[Nn]um [Ee]pochs|[Tt]otal optimization steps)"
                             r"(?: / [^\n:=]{1,30})?\s*[:=]\s*0(?![\d.,])"),
     lambda m: {"what": {"num examples": "examples", "num batches per epoch": "batches",
                         "num epochs": "epochs"}.get(m[1].lower(), "steps"), "said": m[0]}),
    # JAX with jax_debug_nans (or debug_infs) on: the first jitted computation that produced a NaN raises ("FloatingPointError:
    # invalid value (nan) encountered in jit(train_step)"; "divide by zero (inf)" for debug_infs); NumPy's own words
    # have no "(nan)"
    ("nan_stop", re.compile(r"\b(?:invalid value \(nan\)|divide by zero \(inf\)) encountered in (?:jit\()?([\w.<>-]+)"),
     lambda m: {"tensor": m[1], "what": "jax_debug"}),
    ("loss_watchdog", re.compile(r"Loss is too high, stopping training"), lambda m: {}),
    # ESPnet1's E2E models (espnet/nets/pytorch_backend/e2e_*.py): a batch loss that is NaN or >= CTC_LOSS_THRESHOLD
    # (1e4) is left out of the reporter (so out of the log) with only this warning; its backward still runs
    ("loss_rejected", re.compile(r"\bloss \(=(-?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))\) is not correct"),
     lambda m: {"value": float(m[1])}),
    # TensorFlow's CTC loss (tensorflow/core/util/ctc/ctc_loss_calculator.cc, also under Keras' ctc_batch_cost):
    # "W tensorflow/core/util/ctc/ctc_loss_calculator.cc:144] No valid path found." for a sample whose labels cannot
    # be aligned to its frames (that sample's loss is inf); the phrase alone is too common outside CTC
    ("ctc_no_alignment", re.compile(r"(?i:ctc)[^\n]*No valid path found"), lambda m: {}),
    # TensorFlow's ctc_loss_calculator with ignore_longer_outputs_than_inputs=False: an InvalidArgumentError, the step fails
    ("ctc_no_alignment", re.compile(r"Not enough time for target transition sequence \(required: (\d+), available: (\d+)\)"),
     lambda m: {"required": int(m[1]), "available": int(m[2]), "fatal": True}),
    # the HF Trainer reloading a checkpoint (load_best_model_at_end, resume: Trainer._issue_warnings_after_load): "There
    # were missing keys in the checkpoint model loaded: [...]"; tied embeddings listed there are harmless, LoRA weights are not
    ("missing_keys", re.compile(r"There were missing keys in the checkpoint model loaded: \[([^\n]*)"), lambda m: _missing(m[1])),
    # kohya-ss sd-scripts' latent caching (train_util.cache_batch_latents): the VAE encoded an image to NaN, "RuntimeError:
    # NaN detected in latents: <image path>"; loading a cached .npz with NaN prints "NaN detected in latents: <npz>" (older
    # "NaN found in latents, replacing with zeros")
    ("vae_nan", re.compile(r"NaN (?:detected|found) in (?:flipped )?latents(?:[:,]\s*(\S[^\n]*?))?\s*$"),
     lambda m: {"path": m[1]} if m[1] and not m[1].startswith("replacing") else {}),
    # a CTC loop printing the loss's own length arguments (torch.nn.CTCLoss(log_probs, targets, input_lengths,
    # target_lengths)) on one line: "input_lengths tensor([133, 131, ...]), label_lengths tensor([121, 124, ...])"
    ("ctc_lengths", re.compile(_IN_LENS + _LEN_LIST + r".{0,300}?" + _LABEL_LENS + _LEN_LIST), lambda m: _lengths(m[1], m[2])),
    ("ctc_lengths", re.compile(_LABEL_LENS + _LEN_LIST + r".{0,300}?" + _IN_LENS + _LEN_LIST), lambda m: _lengths(m[2], m[1])),
    # an early-stopping callback ending the run on purpose: Lightning's EarlyStopping (its reason, rank-zero info:
    # "Monitored metric val_loss did not improve in the last 3 records. Best score: 1.325. Signaling Trainer to stop.")
    # and Keras' EarlyStopping.on_train_end ("Epoch 12: early stopping"; "Epoch 00012: early stopping" before TF 2.6)
    ("early_stop", re.compile(r"Monitored metric (\S+) did not improve in the last (\d+) records\. Best score: "
                              r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\. Signaling Trainer to stop"),
     lambda m: {"trainer": "lightning", "metric": m[1], "records": int(m[2]), "best": float(m[3])}),
    ("early_stop", re.compile(r"\bEpoch (\d+): early stopping\b"), lambda m: {"trainer": "keras", "epoch": int(m[1])}),
    # tf.keras / Keras 3 fit(): a dataset or generator that yields fewer than steps_per_epoch * epochs batches ends
    # training with only this warning ("... at least `steps_per_epoch * epochs` batches (in this case, 100000 batches)")
    ("input_exhausted", re.compile(r"Your input ran out of data; interrupting training"
                                   r"(?:[^\n]*?\(in this case, (\d+) batches\))?"),
     lambda m: {"planned_batches": int(m[1]) if m[1] else None}),
    # the HF Trainer (and PaddleNLP's copy) when an epoch's iterator yields no batch at all: an IterableDataset shorter
    # than max_steps, or a resume whose batch skipping ran a stream dry (transformers#26413); both spellings occur
    # ("seems to be not a single sample", "seems not to be a single sample")
    ("input_exhausted", re.compile(r"There seems (?:to be not|not to be) a single sample in your epoch_iterator, stopping "
                                   r"training at step (\d+)!?(?:[^\n]*?num_steps \((\d+)\))?"),
     lambda m: {"trainer": "hf", "stopped_at": int(m[1]), "planned_steps": int(m[2]) if m[2] else None}),
    # torch.nn.functional's regression / BCE losses (mse_loss, l1_loss, smooth_l1_loss, huber_loss warn; binary_cross_entropy
    # raises): "Using a target size (torch.Size([64])) that is different to the input size (torch.Size([64, 1]))"
    # binary_cross_entropy raises it as a ValueError, and binary_cross_entropy_with_logits raises "Target size
    # (torch.Size([16])) must be the same as input size (torch.Size([16, 1]))": no broadcast happened, the run died
    ("loss_shape_mismatch", re.compile(r"Using a target size \(torch\.Size\(\[([\d, ]*)\]\)\) that is different to the "
                                       r"input size \(torch\.Size\(\[([\d, ]*)\]\)\)"),
     lambda m: {"target": _shape(m[1]), "input": _shape(m[2]), "raised": "Error" in m.string[:m.start()]}),
    ("loss_shape_mismatch", re.compile(r"Target size \(torch\.Size\(\[([\d, ]*)\]\)\) must be the same as input size "
                                       r"\(torch\.Size\(\[([\d, ]*)\]\)\)"),
     lambda m: {"target": _shape(m[1]), "input": _shape(m[2]), "raised": True}),
    # the labels in another form than the loss takes: Keras' categorical cross-entropy given integer labels ("ValueError:
    # Shapes (None, 1) and (None, 10) are incompatible"), TF's softmax_cross_entropy_with_logits ("logits and labels must
    # be broadcastable: logits_size=[32,10] labels_size=[32,5]"), torch's cross_entropy given [N, L, C] logits ("Expected
    # target size [16, 10], got [16, 128]") or [N, C] / [N, 1] targets ("0D or 1D target tensor expected, multi-target
    # not supported")
    ("loss_shape_mismatch", re.compile(r"Shapes \((?:None|\d+), (\d+)\) and \((?:None|\d+), (\d+)\) are incompatible"),
     lambda m: {"form": "keras", "a": int(m[1]), "b": int(m[2])}),
    ("loss_shape_mismatch", re.compile(r"logits and labels must be broadcastable: logits_size=\[(\d+),(\d+)\] "
                                       r"labels_size=\[(\d+),(\d+)\]"),
     lambda m: {"form": "tf_logits", "a": int(m[2]), "b": int(m[4])}),
    ("loss_shape_mismatch", re.compile(r"Expected target size \[([\d, ]+)\], got \[([\d, ]+)\]"),
     lambda m: {"form": "torch_seq", "expected": _shape(m[1]), "got": _shape(m[2])}),
    ("loss_shape_mismatch", re.compile(r"(?:0D or 1D target tensor expected, )?multi-target not supported"),
     lambda m: {"form": "torch_multi"}),
    # nll_loss/cross_entropy's row check (torch.nn.functional, aten LossNLL): "ValueError: Expected input batch_size (60)
    # to match target batch_size (10)." - the prediction has another number of rows than the target
    ("loss_shape_mismatch", re.compile(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)"),
     lambda m: {"batch_input": int(m[1]), "batch_target": int(m[2])}),
    # a darknet YOLO layer's statistics of one iteration (pjreddie "Region 82 Avg IOU: -nan, Class: -nan, Obj: -nan, No
    # Obj: 0.504497, .5R: -nan, .75R: -nan,  count: 0"; AlexeyAB "v3 (mse loss, ...) Region 82 Avg (IOU: -nan, GIOU: -nan),
    # ..., count: 0"): count is the ground-truth objects the layer matched in the batch; its averages are 0/0 = -nan
    # when count is 0
    ("darknet_region", re.compile(r"\bRegion (\d+) Avg\b[^\n]*?\bcount: (\d+)"),
     lambda m: {"layer": int(m[1]), "count": int(m[2]), "nan": "nan" in m[0].lower()}),
    # a trainer's own gradient guard skipping the update (minFM's DiT trainer: "Step 1557: detected nan/inf/spiky gradient
    # (norm=2.1966569423675537); skipping optimizer step."): the norm it judged, when the line gives one
    ("step_skipped", re.compile(r"(?i)(?:\bnorm\s*[=:]\s*([-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|nan|inf))[^\n]{0,80}?)?"
                                r"\bskipp(?:ing|ed) (?:the )?optimi[sz]er (?:step|update)"),
     lambda m: {"norm": float(m[1]) if m[1] else None}),
    # transformers' from_pretrained naming the weights the checkpoint did not hold (modeling_utils: "Some weights of
    # {cls} were not initialized from the model checkpoint at {path} and are newly initialized: [...]", also "... newly
    # initialized because the shapes did not match:"): a new head is expected; backbone weights in the list are not
    ("weights_newly_initialized", re.compile(r"Some weights of (\w+) were not initialized from the model checkpoint at "
                                             r"(\S+?) and are newly initialized(?: because the shapes did not match)?: "
                                             r"\[([^\]\n]*)\]?"),
     lambda m: {"model": m[1], "path": m[2], "names": re.findall(r"'([^'\s]{1,300})'", m[3])[:200],
                "n": m[3].count("'") // 2}),
    # a checkpoint to start from that is not there, so the run starts from its initial weights: fairseq's
    # checkpoint_utils.load_checkpoint ("| no existing checkpoint found pretrained/roberta.large/model.pt", later
    # "No existing checkpoint found ..."), pytorch/examples' imagenet --resume ("=> no checkpoint found at 'x.pth'")
    ("checkpoint_not_found", re.compile(r"\b[Nn]o existing checkpoint found[ :]+([^\s,;]+)|=> no checkpoint found at '([^'\n]+)'"),
     lambda m: {"path": m[1] or m[2], "form": "fairseq" if m[1] else "resume"}),
    # the HF Trainer resuming (Trainer._inner_training_loop's notices): "Continuing training from checkpoint, will skip to
    # saved global_step", "Continuing training from global step 77000"
    ("resumed", re.compile(r"Continuing training from (?:checkpoint|global step (\d+))"),
     lambda m: {"global_step": int(m[1]) if m[1] else None}),
    # a trainer's own divergence check raising (NVIDIA retinanet-examples train.py: "RuntimeError: Loss is
    # diverging!\nTry lowering the learning rate."): the loss grew past the check's bound, no NaN needed. Not a
    # message naming NaN/Inf (detectron2's "FloatingPointError: Predicted boxes or scores contain Inf/NaN. Training has
    # diverged." is a finiteness check), and the loss must be its subject
    ("loss_diverged", re.compile(r"\b\w*(?:Error|Exception)\b:\s(?![^\n]*\b(?:nan|NaN|NAN|inf|Inf|INF|infinite)\b)"
                                 r"[^\n]{0,60}?\b(?:[Ll]oss|LOSS)\b[^\n]{0,20}?\b(?:is |has |have )?(?:diverg|explod)\w*"),
     lambda m: {}),
    # the messages themselves, not prose about them ("--half, needed to avoid CUDA out of memory)"): torch's
    # "CUDA out of memory. Tried to allocate", TF's "OOM when allocating tensor", XLA's RESOURCE_EXHAUSTED
    ("oom", re.compile(r"CUDA out of memory(?=\s*[.;:,]|\s+Tried|\s*$)|OutOfMemoryError|torch\.cuda\.OutOfMemory|"
                       r"(?:HIP|MPS backend|NPU|XPU) out of memory(?=\s*[.;:,]|\s+Tried|\s*$)|"
                       # torch's RuntimeError, and C++ allocators' cuGetErrorString form (vLLM's cumem allocator:
                       # "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62")
                       r"(?:CUDA|Cuda) [Ee]rror: out of memory|CUBLAS_STATUS_ALLOC_FAILED|Cannot allocate memory|"
                       # PaddlePaddle's allocators (cuda_allocator.cc, auto_growth/virtual memory): "Out of memory error
                       # on GPU 0. Cannot allocate 18.062744MB memory on GPU 0, available memory is only 17.537501MB."
                       r"Out of memory error on GPU\b|"
                       # (a paste cut mid-word keeps the phrase: "Error: OOM when allocating tenso", DeepFaceLab#263)
                       r"OOM when allocating\b|ResourceExhaustedError|RESOURCE_EXHAUSTED: Out of memory|"
                       r"CUDA_ERROR_OUT_OF_MEMORY|DefaultCPUAllocator: can't allocate memory|"
                       # MLX on Apple silicon: its allocator ("[malloc_or_wait] Unable to allocate N bytes.", newer
                       # "[metal::malloc] ...") and Metal's own "Insufficient Memory (...OutOfMemory)"
                       r"\[malloc_or_wait\] Unable to allocate|\[metal::malloc\]|"
                       r"kIOGPUCommandBufferCallbackErrorOutOfMemory|Command buffer execution failed: Insufficient Memory"),
     lambda m: {}),
    # the process was killed with SIGKILL (signal 9), on Linux nearly always the kernel's OOM killer once host RAM ran out:
    # torchrun's "failed (exitcode: -9)" and "exitcode  : -9 (pid: N)" / "Signal 9 (SIGKILL) received by PID N",
    # subprocess's "died with <Signals.SIGKILL: 9>.", DeepSpeed's launcher "exits with return code = -9", an IDE's "exit
    # code 137 (interrupted by signal 9: SIGKILL)", the shell's bare "Killed" line or "N Killed  python train.py"
    # (a launcher sending SIGKILL to others after a failure, "Sending process N closing signal", is not this)
    # (and a container's "exit code 137" / "Exit code: 137" / "exited with code 137", Kubernetes' OOMKilled; a shell
    # script's "./train.sh: line 18:    36 Killed   python3 ...", a Markdown paste's "**Killed**")
    ("killed", re.compile(r"failed \(exitcode: -9\)|\bexitcode\s*: -9\b|Signal 9 \(SIGKILL\) received|"
                          r"died with <Signals\.SIGKILL: 9>|return code = -9\b|"
                          r"\b(?:exit|error|status|return) code:? \(?137\)?(?!\d)|exited with (?:exit )?code 137\b|"
                          r"interrupted by signal 9|\bOOMKilled\b|OOM-killed|^\W*Killed\W*$|(?:^|:\s+)\d+ Killed\s+\S|"
                          r"^zsh: killed\s+\S", re.M),
     lambda m: {}),
    # a process killed from native code, with no Python traceback: an uncaught C++ exception (libc++ on macOS,
    # libstdc++ on Linux: "terminate called after throwing an instance of 'c10::Error'"), a segfault, an abort
    ("native_abort", re.compile(r"libc\+\+abi: terminating due to uncaught exception of type ([\w:<>]+)(?::\s*(.*))?|"
                                r"terminate called after throwing an instance of '([^']+)'|"
                                r"(Segmentation fault|Aborted|Bus error|Illegal instruction) \(core dumped\)|"
                                r"Fatal Python error: (Segmentation fault|Aborted|Bus error)"),
     lambda m: {"exc_type": m[1] or m[3] or m[4] or m[5], "exc_message": (m[2] or "").strip()}),
    # darknet's file_error() (src/utils.c): prints this and exits, e.g. when the backup/ folder for the weights is missing
    ("native_abort", re.compile(r"^\s*Couldn't open file: (\S[^\n]{0,300})"),
     lambda m: {"exc_type": "file_error", "exc_message": f"Couldn't open file: {m[1].strip()}"}),
    # accelerate (Accelerator.__init__ / launch): "bf16 mixed precision requires PyTorch >= 1.10 and a supported device."
    # torch.amp.autocast: "Current CUDA Device does not support bfloat16. Please switch dtype to float16." (raised);
    # a script that falls back ("... does not support bfloat16, falling back to fp32") is no failure
    ("bf16_unsupported", re.compile(r"(?:doesn't|does not|don't|not) support (?:bf16|bfloat16)"
                                    r"(?![^\n]{0,80}(?:[Ff]all(?:ing)? ?back|[Dd]isabling|[Oo]verriding))|bf16/gpu|"
                                    r"bf16 mixed precision requires PyTorch|"
                                    # torchtune get_dtype: "bf16 precision was requested but not available on this hardware"
                                    r"bf16 precision was requested but not available|"
                                    r"[Bb](?:f|float)16 is (?:only|not) supported|bf16 is not supported"), lambda m: {}),
    # transformers' CTC heads: "ValueError: Label values must be <= vocab_size: 29" (a label id beyond the head)
    ("index_out_of_range", re.compile(r"Label values must be <= vocab_size: (\d+)"), lambda m: {"vocab_size": int(m[1])}),
    # a class label beyond the classifier's outputs, caught by the NLL/cross-entropy range check: "IndexError: Target 5
    # is out of bounds." (aten LossNLL.cpp), "Target 100 out of bounds at ...ClassNLLCriterion.c" (torch < 1.0), the
    # CUDA kernels' "Assertion `t >= 0 && t < n_classes` failed." / "Assertion `cur_target >= 0 && cur_target <
    # n_classes` failed." (TH printed ' for the closing quote; a Markdown paste may drop or double the backticks)
    # TensorFlow's sparse softmax cross-entropy: "Received a label value of 10 which is outside the valid range of [0, 10)"
    ("index_out_of_range", re.compile(r"\b(?:Target|Received a label value of) (-?\d+) (?:(?:is )?out of bounds|which is "
                                      r"outside the valid range)|"
                                      r"Assertion \W{0,2}(?:cur_target|t) >= 0 && (?:cur_target|t) < n_classes\W{0,2} failed"),
     lambda m: {"target": int(m[1])} if m[1] else {}),
    # TensorFlow's gather (an embedding lookup's GatherV2/ResourceGather): "indices[5,3] = 30522 is not in [0, 30522)"
    ("index_out_of_range", re.compile(r"\bindices\[[\d,]+\] = (-?\d+) is not in \[0, (\d+)\)"),
     lambda m: {"index": int(m[1]), "size": int(m[2])}),
    ("index_out_of_range", re.compile(r"index out of range in self|device-side assert triggered|"
                                      r"srcIndex < srcSelectDimSize|indexSelect\w*Kernel"), lambda m: {}),
    ("ddp_unused_params", re.compile(r"Expected to have finished reduction in the prior iteration"), lambda m: {}),
    # torch ProcessGroupNCCL's watchdog (torch >= 1.12: "[Rank 3] Watchdog caught collective operation timeout:
    # WorkNCCL(SeqNum=12345, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800226 milliseconds
    # before timing out."; older "[Rank 0] Caught collective operation timeout: WorkNCCL(OpType=BROADCAST, ...)"): one
    # rank waited for a collective the others never joined, and the watchdog takes the process down
    ("collective_timeout", re.compile(r"(?:\[Rank (\d+)\] )?(?:Watchdog caught|Caught) collective operation timeout: "
                                      r"WorkNCCL\((?:SeqNum=(\d+), )?OpType=(\w+)[^)]*?Timeout\(ms\)=(\d+)\) ran for (\d+) "
                                      r"milliseconds"),
     lambda m: {"watchdog_rank": int(m[1]) if m[1] else None, "seq": int(m[2]) if m[2] else None, "op": m[3],
                "timeout_ms": int(m[4]), "ran_ms": int(m[5])}),
    ("unscale_fp16", re.compile(r"Attempting to unscale FP16 gradients"), lambda m: {}),
    # torch load_state_dict / PEFT merge of a ZeRO-3 save whose partitions were never gathered
    # (a [0]-shaped param in a size mismatch is the "error" event below, variant state_dict_size_mismatch)
    ("empty_tensor_load", re.compile(r"vocab size of the LoRA weight 0\b"), lambda m: {}),
    # torch load_state_dict's RuntimeError body, often pasted without its first line
    ("error", re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                         r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)"),
     lambda m: {"variant": "state_dict_size_mismatch", "param": m[1], "checkpoint_shape": _shape(m[2]),
                "model_shape": _shape(m[3])}),
    ("error", re.compile(r"failed \(exitcode: (-?\d+)\)"), lambda m: {"exitcode": int(m[1]), "elastic": True}),
]

#: kinds that are warnings/notices about the setup: worth one event per distinct text
_WARNINGISH = {"no_trainable_params", "padding_free_warning", "flash_attn_warning", "gemma_eager_warning", "cudnn_sdpa_warning",
               "lr_before_step", "no_grad_inputs", "response_key_missing", "labels_masked", "prompt_fills_max_length",
               "unscale_fp16", "sequence_too_long", "warning", "error"}

#: a line that is a warning when it carries one of these markers
_WARNING_LINE = re.compile(r"\bWARNING\b|\bWARN\b|\w*Warning\b|^\s*W\d{4} |\[W(?:ARNING)?[\]\s|]|\bwarn\(")
#: a line that is an error when it carries one of these markers (conservative: prose "error" is not)
_ERROR_LINE = re.compile(r"\bERROR\b|\bCRITICAL\b|\bFATAL\b|^\s*E\d{4} |\[E(?:RROR)?[\]\s|]")
_LOOKS_FLASH_RELATED = ("flash", "Flash")

#: trigger literals: a line without any of these holds no event (a fast C pre-scan on bytes).
#: Mostly capitalised words: the bulk of a big log (tqdm bars, metric dicts) is lower-case, so the
#: scan rejects almost every position on its first byte.
TRIGGERS = (
    "Traceback", "Error", "Exception", "OVERFLOW", "Overflow", "WARN", "Warn", "ERROR", "CRITICAL", "FATAL",
    "Interrupt", 'File "', "Minimum loss scale", "size mismatch for", "Gemma", "Loss is", "CUDA", "None of the", "Padding", "Flash", "Could not find",
    "cuDNN", "Expected to have", "Attempting", "Current loss scale", "Your setup", "Cannot allocate", "CUBLAS",
    # lower-case lines that are printed without a level or exception name in front of them
    "overflow", "tried to get lr", "exitcode", "prompt alone", "padding-free", "padding_free",
    "copying a param", "vocab size of the LoRA", "Minimum loss scale", "contain", "found NaN", "found nan",
    "labels in your dataset", "OOM when", "RESOURCE_EXHAUSTED", "srcIndex", "Assertion", "index out of range",
    "indexSelect", "device-side assert", "can't allocate", "grad_scale is too small", "grad scale is too small",
    "Loss became", "Invalid loss", "Monitored metric", "The gradients at all", "Nan in summary",
    "ignored in loss calculation", "rainable params", "No inf checks", "mixed precision requires", "precision was requested",
    "malloc_or_wait", "metal::malloc", "Insufficient Memory", "kIOGPU", "libc++abi", "terminate called",
    "core dumped", "Fatal Python error", "returned nan values", "Your input ran out", "collective operation timeout",
    "early stopping",
    "Found NaN", "No valid path", "StopIteration", "No labels found", "Couldn't open file",
    "Not enough time for target", "Out of memory error", "Model diverged with", "PARAMETER loss_scale", "OutOfMemory", "_len", "NaN detected in", "NaN found in", "There were missing keys",
    "epoch_iterator", "Continuing training from", "Using a target size", "checkpoint found", "Region ", "optimizer step", "optimiser step", "Found inf or nan", "NaN or Inf found", "Expected parameter", "NaN loss", "nan loss", "Inf loss", "inf loss",
    "probability tensor contains", "SILog loss", "No data found", "Received a label value", "indices[", "are incompatible", "must be broadcastable",
    "Expected target size", "multi-target not supported", "FloatingPointError", "invalid value (nan)",
    "divide by zero (inf)", "Num examples", "um batches per epoch", "um epochs", "um Epochs",
    "otal optimization steps", "out of bounds", "Expected input batch", "Target size", "Killed", "killed", "SIGKILL", "code 137", "code: 137",
    "code (137)", "return code = -9", "Tensor had", "Token indices sequence length", "Some weights of",
    "Loss was", "Loss went", "Loss turned", "Loss has become", "loss is nan", "loss is NaN", "loss is inf", "loss is Inf",
    "loss became", "loss was nan", "loss was NaN", "loss was inf", "loss went", "loss turned", "loss has become",
)
_UPPER = tuple(t for t in TRIGGERS if t[0].isupper())
#: lower-case-led triggers are checked with a plain substring test first (cheap), and only the
#: ones present in a chunk join the regex scan: a lower-case first byte matches almost everywhere
LOWER_TRIGGERS = tuple(t.encode() for t in TRIGGERS if not t[0].isupper())
TRIGGER_RE = re.compile(b"|".join(re.escape(t.encode()) for t in _UPPER))


@lru_cache(maxsize=256)
def trigger_re(present: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """The trigger regex for a chunk: upper-case triggers plus the lower-case ones it contains."""
    if not present:
        return TRIGGER_RE
    return re.compile(b"|".join([re.escape(t.encode()) for t in _UPPER] + [re.escape(t) for t in present]))


#: bytes that are not ASCII letters: deleting them gives a chunk's "letters" (see ``letters_of``)
_NON_LETTERS = NON_LETTERS
_LOWER_LETTERS = tuple((t, t.translate(None, _NON_LETTERS)) for t in LOWER_TRIGGERS)


def letters_of(data: bytes) -> bytes:
    """The ASCII letters of ``data`` in order (one C pass, a fraction of the size of a tqdm-heavy chunk).

    A literal can occur in ``data`` only if its letters occur in this string, so presence checks
    run here first: cheap, and exact in the negative (the only answer a big log usually gives).
    """
    return data.translate(None, _NON_LETTERS)


def chunk_trigger_re(data: bytes, letters: bytes | None = None) -> re.Pattern[bytes] | None:
    """The trigger regex for a chunk, or None when ``letters`` proves no trigger can occur in it."""
    return chunk_triggers(data, letters)[0]


def chunk_triggers(data: bytes, letters: bytes | None = None) -> tuple[re.Pattern[bytes] | None, tuple[bytes, ...]]:
    """:func:`chunk_trigger_re` and the lower-case triggers that occur in the chunk (in its regex)."""
    if letters is None:
        letters = letters_of(data)
    present = tuple(t for t, lt in _LOWER_LETTERS if letters_have(letters, lt) and has(data, t))
    if not present and (not letters or letters.islower()):
        return None, present  # every upper-case-led trigger needs a capital letter, and there is none
    return trigger_re(present), present


#: candidate lines above which the whole-chunk scan is cheaper than one search per line
MAX_TRIGGER_LINES = 3000


def first_triggers(data: bytes, trigger: re.Pattern[bytes], present: tuple[bytes, ...]) -> Iterator[re.Match[bytes]]:
    """The first ``trigger`` match of every line (``\\n`` or ``\\r``) holding one, in order: what a reader
    that skips the rest of a line after a match takes from ``trigger.finditer(data)``.

    No trigger spans a line break, and an upper-case-led one starts at a capital letter: only lines
    with a capital or a lower-case trigger are searched. A tqdm/metric-dict chunk has a few hundred
    such lines among ~50k, and the whole-chunk alternation scan (~20 ms a 4 MB chunk: it tests every
    byte) becomes a numpy pass and a search per candidate line. Chunks with capitals on most lines
    (every line a logger's ``INFO``) keep the whole-chunk scan.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    cand = np.flatnonzero((arr >= 65) & (arr <= 90))  # A-Z
    if len(cand) > MAX_TRIGGER_LINES * 8:
        yield from _first_per_line(data, trigger.finditer(data))
        return
    if present:
        cand = np.concatenate([cand, *(np.fromiter((m.start() for m in _literal(t).finditer(data)), dtype=np.int64)
                                       for t in present)])
    if not len(cand):
        return
    starts, ends = line_spans(data, cand)
    if len(starts) > MAX_TRIGGER_LINES:
        yield from _first_per_line(data, trigger.finditer(data))
        return
    search = trigger.search
    for ls, le in zip(starts.tolist(), ends.tolist()):
        m = search(data, ls, le)
        if m is not None:
            yield m


def _first_per_line(data: bytes, matches: Iterator[re.Match[bytes]]) -> Iterator[re.Match[bytes]]:
    done_to = -1
    for m in matches:
        if m.start() < done_to:
            continue
        ends = [i for i in (data.find(b"\n", m.start()), data.find(b"\r", m.start())) if i >= 0]
        done_to = min(ends) if ends else len(data)
        yield m


@lru_cache(maxsize=64)
def _literal(t: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(t))


#: leading noise that makes identical messages differ: timestamps, log levels, rank prefixes
_PREFIX = re.compile(
    r"^(?:\s*\[rank\d+\]:\s?|\s*\[[^\]\n]{0,40}\d\d:\d\d[^\]\n]{0,20}\]\s*|\s*\d{4}-\d\d-\d\d[ T][\d:,.]+\s*(?:-\s*)?|"
    r"\s*[WEIF]\d{4} [\d:.]+ +\d+ |\s*\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\]\s*)+")


#: a tqdm bar (with its description) that a message was printed right after, on the same line
_BAR_IN_FRONT = re.compile(r"^\s*(?:[^\n|%]{0,80}?:?\s*)?\d{1,3}%\|[^|\n]{0,400}\|\s*[\d.]+[kMGT]?/[\d.?]+[kMGT]?"
                           r"\s*(?:\[[^\]\n]{0,200}\])?")


def strip_bar(message: str) -> str:
    """The message without the progress bar(s) glued in front of it
    (``Map:   0%|   | 0/256 [00:00<?, ? examples/s][RANK 0] The prompt alone fills ...``)."""
    for _ in range(8):  # a few redraws may precede the message
        m = _BAR_IN_FRONT.match(message)
        if m is None or m.end() == 0:
            break
        message = message[m.end():]
    return message


def strip_prefix(line: str) -> str:
    """The message without timestamps / levels / rank markers (for folding and display)."""
    return _PREFIX.sub("", line, count=1).strip()


def classify(line: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, data) for one log line, or None when it says nothing we recognise."""
    for kind, rx, build in _PATTERNS:
        m = rx.search(line)
        if m is None:
            continue
        if kind in ("padding_free_warning", "flash_attn_warning") and not (
                _WARNING_LINE.search(line) or _ERROR_LINE.search(line) or "Error" in line):
            continue  # a mere mention (an arg dump, a path) is not a warning
        try:
            return kind, build(m)
        except (ValueError, IndexError):
            return kind, {}
    if _WARNING_LINE.search(line):
        return "warning", {}
    if _ERROR_LINE.search(line):
        return "error", {}
    return None


@dataclass
class _KindStore:
    head: list[Event] = field(default_factory=list)
    tail: deque[Event] = field(default_factory=lambda: deque(maxlen=TAIL_PER_KIND))
    dropped: int = 0
    total: int = 0


class EventSink:
    """Bounded, folding event store for one log file; ``flush`` hands the events to the builder."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._kinds: dict[str, _KindStore] = {}
        self._by_message: dict[tuple[str, str], Event] = {}
        self._last: dict[str, Event] = {}
        self._order = 0

    def add(self, kind: str, message: str, line: int | None, step: int | None, data: dict[str, Any],
            rank: int | None = None) -> None:
        msg = strip_bar(message.strip()).strip()[:2000] or message.strip()[:2000]
        if kind in _WARNINGISH:
            key = (kind, strip_prefix(msg))
            prev = self._by_message.get(key)
            if prev is not None:
                prev.count += 1
                prev.data["last_line"], prev.data["last_step"] = line, step
                return
        else:
            prev = self._last.get(kind)
            if prev is not None and prev.data.get("_norm") == strip_prefix(msg):
                prev.count += 1
                prev.data["last_line"], prev.data["last_step"] = line, step
                return
        ev = Event(kind=kind, message=msg, source=self.source, line=line, step=step, data=dict(data), rank=rank)
        store = self._kinds.setdefault(kind, _KindStore())
        store.total += 1
        if kind in _WARNINGISH:
            if len(self._by_message) < MAX_DISTINCT_MESSAGES * 4 and store.total <= MAX_DISTINCT_MESSAGES:
                self._by_message[key] = ev
            else:
                store.dropped += 1
                return
        else:
            ev.data["_norm"] = strip_prefix(msg)
            self._last[kind] = ev
        if len(store.head) < HEAD_PER_KIND:
            store.head.append(ev)
        else:
            if len(store.tail) == store.tail.maxlen:
                store.dropped += 1
            store.tail.append(ev)

    def flush(self, builder: Any) -> list[Event]:
        """Append the stored events (in line order) to ``builder.run.events``; returns them."""
        out: list[Event] = []
        for store in self._kinds.values():
            tail = list(store.tail)
            if store.dropped:
                target = tail[0] if tail else (store.head[-1] if store.head else None)
                if target is not None:
                    target.data["omitted_before"] = store.dropped
            out.extend(store.head)
            out.extend(tail)
        for ev in out:
            ev.data.pop("_norm", None)
        out.sort(key=lambda e: (e.line or 0))
        builder.run.events.extend(out)
        return out


# -- Python tracebacks ----------------------------------------------------------------------

_TB_HEAD = re.compile(r"Traceback \(most recent call last\):")
#: IPython's/Jupyter's header, the exception's type first: ``RuntimeError                              Traceback (most
#: recent call last)`` (no colon); its frames are ``/path/file.py in f(...)`` / ``---> 76 ...`` lines
_JUPYTER_HEAD = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))\s{2,}Traceback \(most recent call "
                           r"last\)\s*$")
_TB_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
#: the final line of a traceback: ``pkg.mod.SomeError: message`` (or a bare known exception name)
#: (TensorFlow 1.x repeats the exception after the graph's op trace: "InvalidArgumentError (see above for traceback):
#: Labels length is zero in batch 27")
_EXC_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)|Exception|StopIteration|"
    r"AssertionError|KeyboardInterrupt|SystemExit)(?:(?: \(see above for traceback\))?:\s?(.*))?$")


def exception_line(text: str) -> tuple[str, str] | None:
    """(exc_type, exc_message) when ``text`` is the last line of a traceback, else None."""
    s = re.sub(r"^\s*\[rank\d+\]:\s?", "", text).rstrip()
    if not s or s[0].isspace():
        return None
    m = _EXC_LINE.match(s)
    if m is None:
        return None
    return m[1], (m[2] or "").strip()


_RANK_PREFIX = re.compile(r"^\s*\[(?:rank|RANK|Rank|default|trainer)[ _]?\d{1,5}(?:\|\d{1,5})?\]:\s?")


#: the code line of a traceback's last frame that raised: ``raise ValueError("Attempting to unscale FP16 gradients.")``
_TB_RAISE = re.compile(r"""^\s*raise\s+([A-Z]\w*(?:Error|Exception|Exit|Interrupt))\b(?:\(\s*(?:f?(["'])(.*?)\2)?)?""")


#: DeepSpeed's fp16 ``DynamicLossScaler.update_scale`` (``runtime/fp16/loss_scaler.py``) raises one exception only:
#: ``Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.``; a paste cut inside it (or in
#: the optimizer's ``_update_scale`` calling it: ZeRO 1/2/3, the fp16 optimizers) is that abort
_DS_SCALER_FILE = re.compile(r"deepspeed[/\\]runtime[/\\]")
_DS_SCALER_CALL = re.compile(r"loss_scaler\.update_scale\(")


class TracebackTracker:
    """Collects ``Traceback (most recent call last):`` blocks and bare ``XError: msg`` lines.

    A pasted fragment often lacks the header (dev cases dolly11, peft137): the exception line
    alone, maybe after a few ``File "..."`` frames, still makes a traceback event.
    """

    #: frame lines remembered before a bare exception line (a pasted fragment's frames)
    MAX_FRAMES = 64
    #: a block longer than this is not a traceback any more (a log went on without an exception line)
    MAX_BLOCK_LINES = 400

    def __init__(self) -> None:
        self.open = False
        self.start_line: int | None = None
        self.n = 0
        #: the width of a launcher's or logger's prefix before ``Traceback`` (Metaflow ``<ts> [177/train/578 (pid
        #: 28936)] [<uuid>] ``, Ray ``(pid=123) ``): the block's own lines carry one as wide
        self.prefix = 0
        self.frame: dict[str, Any] | None = None
        self.lines: list[str] = []
        self.last_frame_line: int | None = None
        #: the exception type an IPython header named (its message comes at the block's end, when the paste has it)
        self.named: str | None = None

    def cut_off(self) -> tuple[int, str, dict[str, Any]] | None:
        """At the end of the log: a traceback block still open after at least one frame is a crash whose exception
        line was cut from the paste. The exception is read from the last frame's ``raise XError("...")`` when it shows
        one; otherwise the event names only the frame."""
        if not self.open or (self.frame is None and self.named is None):
            return None
        if any(exception_line(ln.strip()) is not None for ln in self.lines[1:]):
            return None  # its exception line is there, indented (torchrun's failure summary quotes the child's)
        if self.frame is None:  # an IPython block: its header named the exception
            exc_type, line = self.named, self.start_line or 0
            self.open, self.named, self.lines = False, None, []
            return line, f"{exc_type} (the paste stops before the exception line)", {
                "exc_type": exc_type, "exc_message": "", "frame": None, "header": True, "start_line": line, "cut": True}
        exc_type, exc_msg = None, ""
        for ln in reversed(self.lines):
            r = _TB_RAISE.search(ln)
            if r is not None:
                exc_type, exc_msg = r[1], (r[3] or "")
                break
        frame = self.frame
        where = f'File "{frame["file"]}", line {frame["line"]}, in {frame["function"]}'
        tail = self.lines[-1].strip() if self.lines else ""
        message = (f"{exc_type}: {exc_msg}" if exc_type else f"traceback ending at {where}") + \
            " (the paste stops before the exception line)"
        data = {"exc_type": exc_type or "", "exc_message": exc_msg[:1000], "frame": frame, "header": True,
                "start_line": self.start_line, "cut": True}
        if exc_type is None and _DS_SCALER_FILE.search(frame["file"]) and (
                frame["function"] == "update_scale" or _DS_SCALER_CALL.search(tail)):
            data["implies"] = "loss_scale_min"
        line = self.last_frame_line if self.last_frame_line is not None else self.start_line
        self.open, self.frame, self.last_frame_line, self.lines = False, None, None, []
        return (line or 0), message, data

    def feed(self, line_no: int, text: str) -> tuple[int, str, dict[str, Any]] | None:
        """Feed one line; returns (line, message, data) when a traceback event is complete."""
        body = _RANK_PREFIX.sub("", text)  # torchrun's [rank3]: / [default3]: / [trainer3|3]: tee prefixes
        head = _TB_HEAD.search(body)
        if head:
            self.open, self.start_line, self.n, self.frame, self.lines = True, line_no, 0, None, [body.strip()]
            self.prefix = head.start() if body[:head.start()].strip() else 0
            self.named = None
            return None
        jupyter = _JUPYTER_HEAD.match(body) if "Traceback (most" in body else None
        if jupyter:
            self.open, self.start_line, self.n, self.frame, self.lines = True, line_no, 0, None, [body.strip()]
            self.prefix, self.named = 0, jupyter[1]
            return None
        if self.prefix and (self.open or self.last_frame_line is not None) and len(body) > self.prefix:
            rest = body[self.prefix:]  # a frame or the exception line behind the block's prefix
            if _TB_FRAME.match(rest) or exception_line(rest) is not None:
                body = rest
        fm = _TB_FRAME.match(body)
        if fm:
            self.frame = {"file": fm[1], "line": int(fm[2]), "function": fm[3]}
            self.last_frame_line = line_no
            if self.open:
                self.n += 1
                if len(self.lines) < 60:
                    self.lines.append(body.rstrip())
            return None
        exc = exception_line(body)
        if exc is not None and exc[0].endswith("Warning") and not self.open:
            exc = None  # a bare ``UserWarning: ...`` line is a warning, not a crash
        if exc is not None:
            frame = self.frame if (self.open or (self.last_frame_line is not None
                                                 and line_no - self.last_frame_line <= self.MAX_FRAMES)) else None
            data = {"exc_type": exc[0], "exc_message": exc[1][:1000], "frame": frame,
                    "header": self.open, "start_line": self.start_line if self.open else None}
            self.open, self.frame, self.last_frame_line, self.lines, self.prefix = False, None, None, [], 0
            self.named = None
            return line_no, body.strip(), data
        if self.open:
            self.n += 1
            if len(self.lines) < 60:
                self.lines.append(body.rstrip())
            if self.n > self.MAX_BLOCK_LINES:
                self.open = False
        return None

"""Crash: the run died from an exception (out of memory, or another error named here).

What it detects:
    The fatal exception of the run: CUDA/CPU out-of-memory (``torch.OutOfMemoryError``,
    "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED") becomes root cause ``out_of_memory``;
    any other traceback becomes ``crash`` with the exception type and message, the step the run
    died at and the last checkpoint with finite weights to resume from. ``KeyboardInterrupt`` is
    a user stop, reported as info. Keras ending ``fit()`` because the input ran out of data (a warning, no
    exception) becomes ``data_exhausted``: the run stopped short of its plan; so do a bare StopIteration
    (the loop asked for one batch more than the data held) and a ZeroDivisionError before any loss was
    logged (the epoch's batch count it divides by is 0: the loader yielded no batch), and an exception saying the
    dataset is empty (torch's "num_samples=0", Lightning's "Dataloader returned 0 length").

Why it matters:
    A crash ends the run whatever else happened; the step and the last usable checkpoint say how
    much is lost. Exceptions that other detectors explain more precisely (bf16 on old GPUs,
    missing gradients, loss-scale minimum, vocabulary overflow) get their own, more confident
    finding; this one stays as the generic explanation with a lower confidence.

Evidence used:
    Events ``oom``, ``traceback`` (exc_type, exc_message, frame), ``native_abort`` (an uncaught C++ exception,
    a segfault) and ``error``; checkpoint
    tensor stats for the resume point.

Remedies:
    OOM: lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the
    effective batch), enable gradient checkpointing, shorten max_length, use ZeRO-2/3 or
    offload, bf16 instead of fp32. Other exceptions: fix the named error, then resume from the
    last good checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from autopsy.model import Event, Evidence, Finding, Run
from detectors._common import (
    CLASS_LABEL_RE,
    TF_GATHER_RE,
    checkpoint_state,
    event_evidence,
    evidence_line,
    loss_like,
    nonfinite_onset,
    step_near,
)
from detectors.knobs import knob, sentence

CODE = "CRASH001"
SLUG = "crash"
ROOT_CAUSE = "crash"
NEEDS = ("events",)

OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|Tried to allocate|"
                 r"DefaultCPUAllocator: can't allocate memory|MemoryError", re.IGNORECASE)
#: a generic exception is the verdict only when nothing more specific explains the run
GENERIC_CONFIDENCE = 0.6
#: after a NaN onset, a later exception is usually its consequence
AFTER_NAN_CONFIDENCE = 0.4
#: exceptions another detector explains with its own, more specific cause: the crash is then
#: reported as info (the run died here) and does not compete with that cause as a second error.
EXPLAINED = re.compile(
    r"doesn't support bf16|does not support bf16|requires_grad|does not require grad|has no gradients|"
    r"loss scale already at minimum|index out of range in self|srcIndex < srcSelectDimSize|"
    r"prepare_inputs_for_generation|tokenization mismatch|No labels found in|" + CLASS_LABEL_RE.pattern + "|"
    + TF_GATHER_RE.pattern,
    re.IGNORECASE)
#: event kinds whose own line is the exception's: a trainer's finiteness check raising (the non-finite value is the
#: failure, not the raise), GradScaler finding no gradients, a library refusing bf16 - named where they are read
EXPLAINING_KINDS = ("nan_stop", "no_trainable_params", "bf16_unsupported", "vae_nan", "loss_diverged",
                    "loss_shape_mismatch")
#: lines after an exception's line that may still be its message (TF prints the op's error on the next lines)
MESSAGE_LINES = 2
#: the events the detectors that explain EXPLAINED's messages read (gradientless params, bf16, loss scale, vocab,
#: masked labels): one of them must be in the run for an EXPLAINED message to be left to them
CORROBORATING_KINDS = ("no_grad_fn", "no_grad_inputs", "no_trainable_params", "bf16_unsupported", "loss_scale_min",
                       "index_out_of_range", "tokenization_mismatch", "labels_masked", "ddp_unused_params",
                       "no_labels_found")


#: libraries whose *internal* failures (an assertion or runtime check in their own code) point at the library,
#: not at the user's input; torch itself is left out: its RuntimeErrors are mostly about the caller's tensors
FAULT_LIBRARIES = ("deepspeed", "accelerate", "peft", "trl", "vllm", "verl", "flash_attn", "bitsandbytes", "megatron",
                   "swift", "llamafactory", "openrlhf", "xformers", "apex")
#: exception types of an internal check failing (ValueError/TypeError/KeyError/OSError usually name a bad argument)
INTERNAL_EXC = ("AssertionError", "RuntimeError", "IndexError", "ZeroDivisionError", "NotImplementedError")
#: messages that are about the caller even when raised in a library
_CALLER_FAULT = re.compile(r"same device|size mismatch|out of memory|does not exist|not found|No such file|"
                           r"expected .* got|must be|should be|invalid|unsupported|not supported", re.IGNORECASE)
LIBRARY_FAULT_CONFIDENCE = 0.5


def _sentence(text: str) -> str:
    """The exception message as a sentence: a closing period unless it already ends in punctuation."""
    text = text.rstrip()
    return text if not text or text[-1] in ".!?:;)]}'\"" else text + "."


def _frame_text(frame: object) -> str:
    """A traceback frame as a reader would quote it: ``main/train.py:30 in main``."""
    if not isinstance(frame, dict):
        return str(frame)
    where = str(frame.get("file") or "?") + (f":{frame['line']}" if frame.get("line") is not None else "")
    return where + (f" in {frame['function']}" if frame.get("function") else "")


def _library_fault(exc_type: str, exc_msg: str, frame: object) -> tuple[str, str] | None:
    """(library, path) when the innermost frame is in a framework's own code and the exception is an internal check."""
    if not isinstance(frame, dict) or exc_type.rsplit(".", 1)[-1] not in INTERNAL_EXC or _CALLER_FAULT.search(exc_msg):
        return None
    path = str(frame.get("file") or "").replace("\\", "/")
    m = re.search(r"(?:site-packages|dist-packages)/([A-Za-z_][\w]*)/", path)
    if m and m.group(1).lower() in FAULT_LIBRARIES:
        return m.group(1).lower(), path[m.start(1):]
    return None


DEVICE_ASSERT = re.compile(r"device-side assert triggered|CUDA error: an illegal memory access")


def _exc(ev: Event) -> tuple[str, str]:
    t = str(ev.data.get("exc_type") or "").strip()
    m = str(ev.data.get("exc_message") or "").strip()
    if not t:
        mm = re.match(r"\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\s*:?\s*(.*)", ev.message)
        cuda = re.search(r"\b(CUDA error):\s*(.*)", ev.message)
        if mm:
            t, m = mm.group(1), m or mm.group(2)
        elif cuda:
            t, m = cuda.group(1), m or cuda.group(2)
    return t or "Exception", m or ev.message.strip()


def _epoch_iterator_empty(run: Run, ev: Event) -> Finding:
    """The HF Trainer's "not a single sample in your epoch_iterator, stopping training at step N": the run ends there,
    short of max_steps, reported as finished."""
    step, planned = ev.data.get("stopped_at"), ev.data.get("planned_steps")
    resumed = bool(run.events_of("resumed"))
    short = f" of the {planned:,} planned (max_steps)" if planned else ""
    return Finding(
        code=CODE, name=SLUG, root_cause="data_exhausted", severity="error", confidence=0.8,
        title=f"Training stopped early at step {step:,}{short}: the epoch iterator yielded no batch",
        message=(f"The Trainer found not a single batch in its epoch iterator and stopped at step {step:,}{short}: the "
                 "run ends as if finished. An IterableDataset (a streaming dataset) holds fewer samples than max_steps "
                 "needs" + ("; here the run resumed from a checkpoint, and skipping the batches already seen runs a "
                            "stream dry before training starts again (transformers#26413)" if resumed else "") + "."),
        # the steps the messages name, not the ones the log's position gave the events
        first_step=step, evidence=[replace(event_evidence(ev, f"\"{ev.message.strip()[:200]}\""), step=step),
                                   *(replace(event_evidence(r, f"resumed: \"{r.message.strip()[:120]}\""),
                                             step=r.data.get("global_step")) for r in run.events_of("resumed")[:1])],
        remedies=["Set max_steps to what the data holds, or make the iterable dataset repeat (e.g. itertools.cycle, "
                  "datasets' IterableDataset repeated per epoch).",
                  "Resuming with a streaming dataset: pass ignore_data_skip=True (the data order then differs from an "
                  "uninterrupted run) or upgrade to a transformers release whose skip does not exhaust the stream."],
        basis="direct", symptom="stopped_early")


def _input_exhausted(run: Run) -> Finding | None:
    """Keras stopping fit() because the data ran out: no exception, the run just ends short of its plan."""
    evs = run.events_of("input_exhausted")
    if not evs:
        return None
    ev = evs[0]
    if ev.data.get("trainer") == "hf":
        return _epoch_iterator_empty(run, ev)
    planned = ev.data.get("planned_batches")
    step, at = _when(run, ev)
    return Finding(
        code=CODE, name=SLUG, root_cause="data_exhausted", severity="error", confidence=0.85,
        title=f"Training stopped early{at}: the input ran out of data",
        message=(f"fit() interrupted training{at} because the dataset or generator ran out of batches"
                 + (f" before the {planned:,} planned (steps_per_epoch * epochs)" if planned else "")
                 + ": the run ends as if finished, having trained only part of its plan."),
        first_step=step, evidence=[event_evidence(ev, f"\"{ev.message.strip()[:200]}\"")],
        remedies=["Repeat the dataset (tf.data: dataset.repeat(); a Python generator: loop forever) so it yields "
                  "steps_per_epoch * epochs batches, or set steps_per_epoch = number of samples // batch_size "
                  "(or leave it unset for a finite dataset).",
                  "For validation data, set validation_steps the same way."],
        basis="direct", symptom="stopped_early")


def _nothing_planned(run: Run) -> Finding | None:
    """A start-up banner that planned no training: no example, no batch, no epoch or no optimization step. The run then
    "finishes" at once and saves the model it loaded; with no example or batch the data is the cause."""
    evs = run.events_of("zero_plan")
    if not evs or any(loss_like(m) for m in run.metrics()):
        return None  # losses were logged: something trained (a banner of another phase, a resumed run)
    def said_by(e: Event) -> str:
        return str(e.data.get("said") or e.message.strip())[:160]

    data = [e for e in evs if e.data.get("what") in ("examples", "batches")]
    ev = (data or evs)[0]
    said = said_by(ev)
    evidence = [event_evidence(e, f"at start-up: \"{said_by(e)}\"") for e in (data + [e for e in evs if e not in data])[:3]]
    if data:
        return Finding(
            code=CODE, name=SLUG, root_cause="data_exhausted", severity="error", confidence=0.8,
            title=f"No training happened: the data held no {'example' if ev.data.get('what') == 'examples' else 'batch'}",
            message=(f"At start-up the trainer printed \"{said}\": the training set it received is empty (its path, "
                     "file layout or filters left nothing), or smaller than one batch with the last one dropped, so no "
                     "optimization step ran and whatever was saved is the model as loaded."),
            first_step=None, evidence=evidence,
            remedies=["Print len(dataset) after loading and after every filter/tokenization step; check the data path "
                      "and the format the loader expects.",
                      "With few examples, lower the batch size (and gradient accumulation) below the number of examples."],
            basis="direct", symptom="stopped_early")
    return Finding(
        code=CODE, name=SLUG, root_cause=None, severity="error", confidence=0.7,
        title="No training happened: the run planned zero optimization steps",
        message=(f"At start-up the trainer printed \"{said}\": with no epoch or step planned the loop ends at once and the "
                 "saved model (or adapter) is the one loaded, untouched. The epochs or steps the trainer received are "
                 "not the ones intended."),
        first_step=None, evidence=evidence,
        remedies=["Check num_train_epochs / max_steps / max_train_steps as the trainer received them (printed args, "
                  "the saved config): a value of 0, or one computed from a dataset length, repeats or a GUI's setting "
                  "that came out as 0.",
                  "Set max_steps (or epochs) explicitly and rerun; a save right after start-up is no trained model."],
        basis="direct", symptom="stopped_early")


#: exceptions whose message alone names the mistake: (pattern, short label, what it means, remedies). The verdict stays ``crash``
#: (the run died of it) but the finding says what the message means instead of "fix the exception"
KNOWN_MESSAGES: tuple[tuple[re.Pattern[str], str, str, tuple[str, ...]], ...] = (
    # vLLM's input check (vllm/engine/llm_engine.py _validate_model_input: f"The {prompt_type} prompt (length {n}) is
    # longer than the maximum model length of {max_prompt_len}. {suggestion}"; the V1 engine's processor: f"Prompt length
    # of {n} is longer than the maximum model length of {max_model_len}."), hit by GRPO/online-RL rollouts whose prompts
    # are not truncated to the engine's length (open-r1#672, trl#3569), or whose images expand into thousands of tokens
    (re.compile(r"(?:The (?:decoder|encoder) prompt \(length \d+\)|Prompt length of \d+) is longer than the maximum "
                r"model length of \d+"),
     "a prompt longer than the vLLM engine's max_model_len",
     "a prompt handed to vLLM for generation has more tokens than the engine was started with (max_model_len): the "
     "prompts are not truncated to that length, or a vision-language model's images expand into more tokens than "
     "planned",
     ("Start the engine with max_model_len >= the longest prompt + max_completion_length (TRL: vllm_max_model_length), "
      "or truncate/filter prompts to max_prompt_length before generation.",
      "For images, cap their resolution (max_pixels / image_max_pixels) so each image stays within a token budget.")),
    # a library older or newer than the code: the name moved or was removed ("cannot import name
    # 'is_torch_xla_available' from 'transformers.utils'")
    (re.compile(r"ImportError: cannot import name '[\w.]+' from '[\w.]+'"),
     "a library version that does not match the code",
     "the code imports a name the installed library does not have: it was added in a newer release, or renamed or "
     "removed in the installed one (the two packages' versions do not go together)",
     ("Install the versions the code was written for (its requirements.txt / setup.py pins, or the release whose notes "
      "mention the name); upgrading one package of a stack (transformers, peft, trl, accelerate) alone often breaks "
      "another.",)),
    # failure-catalog #15 (diffusers#6442, LLaVA#363, transformers#30559)
    (re.compile(r"Attempting to unscale FP16 gradients"), "trainable weights in float16 under fp16 AMP",
     "the GradScaler of fp16 mixed precision refuses float16 gradients: the trainable parameters are stored in "
     "float16 (a model loaded with torch_dtype=float16, .half(), or LoRA weights created in half precision)",
     ("Keep trainable weights in float32 under fp16 AMP: load with torch_dtype=torch.float32 (or 'auto' without a half "
      "cast), or cast only the trainable ones: for p in model.parameters(): if p.requires_grad: p.data = p.data.float().",
      "Or train in bf16 (bf16=True with torch_dtype=torch.bfloat16) on hardware that supports it, which needs no scaler.")),
    # and the convolutions' form, one side on CUDA and the other not: "Input type (torch.cuda.FloatTensor) and weight
    # type (torch.FloatTensor) should be the same" (LiqudNet#7; tokenlearner-pytorch#4: submodules kept in a plain list)
    # (Apple's MPS backend says it its own way: "Placeholder storage has not been allocated on MPS device!", an input
    # left on the CPU beside a model on "mps")
    (re.compile(r"Expected all tensors to be on the same device|Placeholder storage has not been allocated on MPS device|"
                r"Input type \(torch\.cuda\.\w+\) and weight type "
                r"\(torch\.(?!cuda)\w+\)|Input type \(torch\.(?!cuda)\w+\) and weight type \(torch\.cuda\.\w+\)"),
     "tensors on different devices",
     "an operation received tensors on different devices (a batch left on the CPU, a module not moved, or a model split "
     "across GPUs by device_map while the loop moves inputs to one of them)",
     ("Move the batch with the model (batch = {k: v.to(model.device) ...}) or let the Trainer/accelerate place it; with "
      "device_map='auto', do not call model.to(device) afterwards; submodules kept in a plain Python list are not moved "
      "by model.to(): hold them in nn.ModuleList.",)),
    (re.compile(r"(?:Input type \(\S*Half\S*\) and weight type \(\S*Float|expected scalar type (?:Half|Float|BFloat16) "
                r"but found (?:Float|Half|BFloat16)|expected mat1 and mat2 to have the same dtype)"),
     "half and float32 tensors mixed outside autocast",
     "an operation mixed float16/bfloat16 and float32 tensors (inputs in one dtype, weights in another) outside autocast",
     ("Run the forward pass under torch.autocast (or the Trainer's fp16/bf16 flags) instead of casting the model by hand, "
      "or cast the inputs to the weights' dtype.",)),
    # F.linear: "mat1 and mat2 shapes cannot be multiplied (4x356352 and 344064x512)": 356352 features arrive at a layer
    # built for 344064 (LO-Net-pytorch#1)
    (re.compile(r"mat1 and mat2 shapes cannot be multiplied \(\d+x\d+ and \d+x\d+\)"),
     "a Linear layer fed another number of features than it was built for",
     "a Linear layer received inputs whose last dimension (the second number) differs from its in_features (the third): "
     "the input resolution, sequence or feature size is not the one the model, its config or its checkpoint was built "
     "for, or a flatten before it kept the wrong dimensions",
     ("Print the input's shape right before that layer: feed the input size the model was designed for (image size, "
      "crop, the feature dimension in the config), or set the layer's in_features to the flattened size (nn.LazyLinear "
      "infers it); a checkpoint loads only with the config it was trained with.",)),
    # cuDNN without a kernel for the call (CUDNN_STATUS_NOT_SUPPORTED; torch adds "This error may appear if you passed in
    # a non-contiguous input."): an input past cuDNN's 32-bit indexing (a huge batch or 3D volume), a non-contiguous one,
    # or a version pair whose cuDNN lacks the kernel (pytorch#11065: a 1024x3x224x224 conv; pytorch#1664: a 3D transposed
    # conv; NeuronBlocks#26: batch 128 fails, smaller runs; Greedy_InfoMax PR#4: .contiguous() after permute)
    (re.compile(r"CUDNN_STATUS_NOT_SUPPORTED"), "cuDNN has no kernel for this call",
     "cuDNN refused the convolution/RNN call as given: its tensor is too large for cuDNN's 32-bit indexing (a very large "
     "batch, sequence or 3D volume), not contiguous, or in a dtype/layout this GPU's cuDNN does not implement",
     ("Halve the batch (or the input size) to see whether size is the cause, and call .contiguous() on the input; "
      "torch.backends.cudnn.enabled = False runs the native kernels to confirm it is cuDNN; upgrading torch (its bundled "
      "cuDNN) adds kernels for large inputs.",)),
    # cuDNN failing inside (CUDNN_STATUS_INTERNAL_ERROR / EXECUTION_FAILED / MAPPING_ERROR / ALLOC_FAILED): its workspace
    # could not be allocated (the GPU nearly full: an OOM in disguise), an earlier asynchronous CUDA error surfaced at
    # this call, or the cuDNN build does not fit the GPU/driver
    (re.compile(r"CUDNN_STATUS_(?:INTERNAL_ERROR|EXECUTION_FAILED|MAPPING_ERROR|ALLOC_FAILED)"), "cuDNN failed inside a call",
     "cuDNN failed while running a call: most often the GPU memory was nearly exhausted when cuDNN allocated its "
     "workspace (an out-of-memory in disguise), or an earlier CUDA error (an out-of-range index, an illegal access) was "
     "only reported here, or the installed cuDNN does not match the GPU or the driver",
     ("Rerun with a smaller batch: a failure that goes away was memory; CUDA_LAUNCH_BLOCKING=1 reports an earlier CUDA "
      "error at its own line (check label and token ids against the class count and vocabulary); "
      "torch.backends.cudnn.benchmark = False avoids large benchmark workspaces; reinstall a torch built for this "
      "GPU and driver.",)),
    # one side of that mismatch empty (0): a weight with no elements, the [0]-shaped placeholder ZeRO-3 leaves of each
    # partitioned parameter (weights saved by stage 3 without gathering, then loaded; a parameter used outside its
    # gathered forward), or an empty batch or target (LLaMA-Factory#513: DPO from a ZeRO-3-saved LoRA, "The size of
    # tensor a (0) must match the size of tensor b (5120) at non-singleton dimension 1")
    (re.compile(r"The size of tensor a \((?:0\) must match the size of tensor b \(\d+|\d+\) must match the size of "
                r"tensor b \(0)\) at non-singleton dimension \d+"),
     "an empty (0-element) tensor met a full one",
     "an elementwise operation met a tensor with no elements on one dimension: most often a weight that is DeepSpeed "
     "ZeRO-3's empty [0]-shaped placeholder of a partitioned parameter (weights saved under stage 3 without being "
     "gathered, then loaded; or a parameter read outside the forward that gathers it), else an empty batch or target",
     ("If the weights came from a ZeRO-3 run, check the saved tensors' shapes (autopsy scan CHECKPOINT): [0]-shaped "
      "ones were saved without gathering: save with stage3_gather_16bit_weights_on_model_save: true, or rebuild them "
      "with zero_to_fp32.py from the global_step folder, and load the full weights.",
      "Otherwise print the shapes at the failing line: a batch or target with 0 rows was filtered empty upstream.")),
    # an elementwise op given tensors of other sizes ("The size of tensor a (4096) must match the size of tensor b (2048)
    # at non-singleton dimension 3"): a sequence past a buffer built for the model's maximum (a causal mask, rotary
    # cache, position table), or a mask/label of another shape than the output
    (re.compile(r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension \d+"),
     "tensors of different sizes in one operation",
     "an elementwise operation met two tensors whose sizes differ on one dimension (the two numbers): a sequence longer "
     "than a buffer built for the model's maximum length (a causal mask, rotary or position table), an attention mask "
     "or labels of another shape than the outputs, or a batch or feature size the model was not built for",
     ("Print the shapes of the inputs, masks and labels at the failing line; when one number is the model's maximum "
      "length (max_position_embeddings, block_size, n_ctx), truncate inputs to it (max_length / truncation=True) or "
      "raise it in the config the model was built with.",)),
    # torchrun's summary when a worker died (torch/distributed/elastic/multiprocessing/errors): the worker's own error is
    # its traceback above or the exit code in the "Root Cause (first observed failure)" table
    (re.compile(r"ChildFailedError"), "a torchrun worker died",
     "torchrun reports that a worker process failed; this is its summary, not the error itself: the failing rank's "
     "own traceback is printed above it (or in that rank's log), and the 'Root Cause (first observed failure)' table "
     "gives its exit code: -9 the process was killed (the host ran out of RAM), -11/-6 a segfault or abort in native "
     "code, 1 a Python exception",
     ("Read the first failing rank's traceback (above, or its log: torchrun --log-dir / --tee 3) and fix that error; "
      "exitcode -9 with no traceback is the host's RAM: fewer dataloader workers, a smaller eval/preprocessing "
      "footprint, or more memory.",)),
    # an operator Apple's MPS backend lacks (aten/src/ATen/mps: "The operator 'aten::...' is not currently implemented
    # for the MPS device. If you want this op to be added in priority during the prototype phase of this feature,
    # please comment on https://github.com/pytorch/pytorch/issues/77764")
    (re.compile(r"is not currently implemented for the MPS device"), "an operator the MPS backend lacks",
     "the run uses Apple's MPS backend, which has no kernel for one operator of the model or the loss",
     ("Set PYTORCH_ENABLE_MPS_FALLBACK=1 (before starting Python) to run that operator on the CPU, upgrade torch "
      "(MPS gains operators each release), or train on the CPU/another device.",)),
    # scikit-learn's finiteness check (sklearn/utils/validation.py _assert_all_finite): "Input contains NaN, infinity or a
    # value too large for dtype('float64')." (before 1.0), "Input contains NaN." / "Input X contains infinity or a value
    # too large for dtype('float64')." / "Input y contains NaN." (1.0 on); raised where a metric or a preprocessing step
    # is handed the array (MOTCat#8: sksurv's concordance_index_censored given the model's NaN risk estimates)
    (re.compile(r"Input (?:[Xy] )?contains (?:NaN|infinity)"), "NaN/Inf handed to a scikit-learn function",
     "a scikit-learn function refused an array holding NaN or Inf: in an evaluation metric (compute_metrics, a "
     "validation score) the model's own outputs went non-finite, the training having gone NaN or the inputs of that "
     "batch holding NaN; in preprocessing or a classical estimator's fit, the data itself holds NaN/Inf",
     ("Read the traceback's frames: a metric (sklearn.metrics, a score or compute_metrics) was given the model's "
      "predictions, so find where those went NaN (the training loss, the inputs of the evaluated batch: "
      "np.isfinite(x).all() per feature); a scaler, imputer or fit was given the data, so clean it first "
      "(df.isna().sum(), np.isinf), impute or drop the rows.",)),
    # torch.nn.functional.batch_norm in training mode (scvi-tools#2314: the last batch held one observation; mmseg#272:
    # batch size 1 with a head pooled to 1x1)
    (re.compile(r"Expected more than 1 value per channel when training"), "BatchNorm given a batch of one",
     "a BatchNorm layer in training mode received one value per channel, a batch of one sample (most often the epoch's "
     "last batch holding a single sample) or one sample pooled to 1x1, and cannot compute a batch variance",
     ("Drop the incomplete last batch (DataLoader(..., drop_last=True)) or pick a batch size that does not leave one "
      "sample over; a batch of 1 per GPU cannot train BatchNorm: use 2 or more (samples_per_gpu), SyncBN/GroupNorm, or "
      "keep the BatchNorm layers in eval mode.",)),
    # the HF Trainer's compute_loss when the model's output holds no loss: without labels among the inputs the collator
    # or remove_unused_columns dropped them (philschmid sagemaker-huggingface-llama-2-samples#22, baize-chatbot#62); with
    # labels there the model class has no loss head (transformers#34392: labels of the wrong type; unsloth#1899)
    (re.compile(r"The model did not return a loss from the inputs, only the following keys: [\w,]+\. For reference, the "
                r"inputs it received are (?:(?!labels)[\w,])+\."),
     "the batches reach the model without labels",
     "the model returns a loss only when the batch holds labels, and the inputs it received list none: the dataset has "
     "no 'labels' column, the data collator does not build them, or the Trainer's remove_unused_columns dropped a column "
     "whose name the model's forward() does not take",
     ("Give the model its labels: a 'labels' column in the tokenized dataset (for causal LM, "
      "DataCollatorForLanguageModeling(tokenizer, mlm=False) copies input_ids), or label_names=[...] in TrainingArguments "
      "for another name; with a custom column set remove_unused_columns=False and pass it in the collator.",)),
    (re.compile(r"The model did not return a loss from the inputs"), "the model returned no loss",
     "the Trainer found no loss in the model's output: the labels did not reach it (see the inputs listed in the "
     "message), or the model class has no loss (a base AutoModel without a head, a custom forward that does not return "
     "one, labels of a type the head cannot use)",
     ("Check the inputs the message lists: without 'labels', add them to the dataset or collator (label_names for another "
      "name); with them, load the task class (AutoModelForCausalLM, ...ForSequenceClassification with int labels) or "
      "return {'loss': ...} from a custom forward / override compute_loss.",)),
    # nll_loss/cross_entropy taking class indices of another dtype than int64: "Expected object of scalar type Long but got
    # scalar type Int for argument #2 'target'" (torch < 1.7, MAML-Pytorch#45), "expected scalar type Long but found Int"
    # (pytorch-video-recognition#71), the CUDA kernel's "not implemented for 'Int'"
    (re.compile(r"Expected object of scalar type Long but got scalar type \w+ for argument #\d+ 'target'|"
                r"expected scalar type Long but found (?:Int|Float|Double|Short|Byte)\b|"
                r"\"nll_loss\w*\" not implemented for '(?:Int|Float|Double|Short|Byte)'"),
     "class targets that are not int64",
     "the classification loss takes class indices as int64 (torch.long) and received another dtype: labels built as "
     "int32 (numpy on Windows), floats (read from a CSV or an image mask), or class probabilities on a torch too old "
     "to take them",
     ("Cast the class indices before the loss (target = target.long()), or build them as int64 in the dataset (np.int64, "
      "torch.tensor(..., dtype=torch.long)); soft labels (probabilities) need torch >= 1.10 and a float target of the "
      "prediction's shape.",)),
    # autograd's version check (pytorch#39141: a GAN's discriminator stepped before the generator's backward, which torch
    # >= 1.5 refuses; GAN-tutorial#1: inplace=True activations; BPPNet#6: the fix was the update order)
    (re.compile(r"one of the variables needed for gradient computation has been modified by an inplace operation"),
     "a tensor the backward needs was changed in place",
     "a tensor autograd saved for the backward pass was modified before that backward ran: most often an optimizer.step() "
     "between a forward and a later backward through the same weights (a GAN's discriminator updated before the "
     "generator's loss is backpropagated, refused since torch 1.5), or an in-place op (inplace=True activations, x += y) "
     "on a saved tensor",
     ("Update each network only after every backward that goes through its weights: backpropagate the generator's loss "
      "before the discriminator's optimizer.step(), or recompute the discriminator's output after the step; replace "
      "in-place ops (nn.ReLU(inplace=True), x += y) with out-of-place ones; torch.autograd.set_detect_anomaly(True) names "
      "the forward op.",)),
    (re.compile(r"Couldn't open file: "), "a file it needs cannot be opened (darknet exits)",
     "darknet's file_error() stops the process when a file cannot be opened: the weights backup folder (backup= in the "
     ".data file) that does not exist, or a .cfg/.data/.names/list path that is wrong",
     ("Create the folder it names (mkdir -p backup, or the backup= path of the .data file) and check every path in the "
      ".data file exists and is writable where weights are saved; darknet writes the first weights at iteration 100.",)),
    # ENOSPC raised while writing a checkpoint (torch.save's zip writer, safetensors, save_pretrained, a shutil copy):
    # the output disk filled, not /dev/shm (dolly#139: torch/serialization.py _save)
    (re.compile(r"(?:No space left on device|\[Errno 28\])(?=.*\bframe: .*(?:serializ|save|checkpoint|safetensors|"
                r"shutil|pickle))", re.S),
     "the disk filled while saving a checkpoint",
     "a checkpoint write failed with ENOSPC (no space left on device): the filesystem of the output directory is full; "
     "the checkpoint being written is incomplete",
     ("Free space on the output disk or point output_dir at a larger one; keep fewer checkpoints (save_total_limit in "
      "the HF Trainer, save_top_k in Lightning) or save less often; resume from the last complete checkpoint.",)),
    # transformers' tokenizer.pad() (trl#466, FastChat#718, LongChat#31): GPT-2/Llama tokenizers ship without a pad token
    (re.compile(r"Asking to pad but the tokenizer does not have a padding token|attempting to pad samples but the "
                r"tokenizer you are using \(\w+\) does not have one|tokenizer is not configured with a padding token"),
     "the tokenizer has no padding token",
     "batches are padded to one length, and this tokenizer defines no pad token (GPT-2, Llama and many base models "
     "ship without one)",
     ("Set one before building the trainer: tokenizer.pad_token = tokenizer.eos_token (and model.config.pad_token_id to "
      "match), or add a dedicated '[PAD]' token and call model.resize_token_embeddings(len(tokenizer)); with pad = eos, "
      "make sure the collator does not mask the real EOS of each example out of the labels.",)),
    # torch DDP's reducer (qlora#223, peft#313, trl#835; the workaround in accelerate#389): reentrant activation
    # checkpointing runs the checkpointed blocks' backward again, so DDP's hooks fire twice for the same parameters
    (re.compile(r"Expected to mark a variable ready only once"),
     "DDP saw a parameter's gradient twice (reentrant gradient checkpointing)",
     "DistributedDataParallel marked a parameter ready twice in one backward: with gradient checkpointing in its "
     "reentrant form (torch.utils.checkpoint's default when use_reentrant is not passed, and what "
     "gradient_checkpointing_enable() has used) "
     "the checkpointed blocks' backward reruns their forward, and DDP's per-parameter hooks fire again; a parameter "
     "used outside forward(), or shared between two modules, does the same",
     ("Use the non-reentrant checkpoint: gradient_checkpointing_kwargs={'use_reentrant': False} in TrainingArguments "
      "(or model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})); or, when the "
      "graph is the same every step, ddp_find_unused_parameters=False / model._set_static_graph(). "
      "TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameter.",)),
    # transformers' BatchEncoding.convert_to_tensors: the collator could not make one tensor of the features
    (re.compile(r"Unable to create tensor, you should probably activate truncation and/or padding"),
     "the collator got features of unequal length or nesting",
     "the data collator tried to stack the examples' features into one tensor and they differ in length (no padding "
     "was applied to that field) or are nested lists where ints are expected (often 'labels' built as a list of lists, "
     "or a text column left in the dataset)",
     ("Pad every field the collator stacks (DataCollatorWithPadding / DataCollatorForSeq2Seq pads labels too), remove the "
      "raw text columns after tokenization (remove_columns=...), and make 'labels' a flat list of ints per example.",)),
    # PEFT's inject_adapter: the LoRA target names match no module of the model
    (re.compile(r"Target modules? \{?[^\n]{0,300}?\}? not found in the base model"),
     "LoRA target modules that the model does not have",
     "the LoRA config names target modules (q_proj, v_proj, ...) that match no module of this model: module names "
     "differ between architectures (GPT-2's c_attn, Falcon's query_key_value, Baichuan's W_pack); an empty list ('[]') "
     "means the script's own search for Linear layers found none (a quantized model's layers are another class)",
     ("Print the model's Linear module names ([n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]) "
      "and set target_modules to names from it, or target_modules='all-linear' (PEFT >= 0.8).",)),
    # a CPU kernel without a float16 version (peft#267, alpaca-lora#308, LlamaFactory#3434, cloneofsimo/lora#92): the
    # half-precision model (or the LoRA merge) runs on the CPU
    (re.compile(r"\"\w*(?:cpu|Cpu|CPU)\w*\" not implemented for '(?:Half|BFloat16)'|"
                r"\"(?:LayerNormKernelImpl|addmm_impl_cpu|baddbmm_with_gemm)\w*\" not implemented for 'Half'"),
     "a float16 model running on the CPU",
     "a CPU kernel has no float16 version: the model (or the part of it being merged or offloaded) was loaded in "
     "torch.float16 but runs on the CPU, because no GPU was used (CUDA not visible, a CPU-only torch), device_map "
     "offloaded it, or the LoRA merge runs on the CPU",
     ("Run it on the GPU (check torch.cuda.is_available(), move model and inputs with .to('cuda')), or load in "
      "torch.float32 (bfloat16 on recent torch) for CPU work such as merging LoRA weights.",)),
    # torch autograd: the graph's saved tensors are freed after the first backward
    (re.compile(r"Trying to backward through the graph a second time"),
     "a second backward through a freed graph",
     "backward() ran twice through the same part of the graph: a tensor computed in an earlier step (a hidden state "
     "carried across batches, a running loss total kept with its graph, a cached output) is reused in this step's loss",
     ("Detach what is carried between steps (hidden = hidden.detach(); total += loss.item()); recompute the shared part "
      "per step; retain_graph=True only when two losses must really backpropagate through one graph.",)),
    # torch's default_collate: the dataset's items differ in shape (a grayscale image among RGB ones, unpadded sequences)
    (re.compile(r"stack expects each tensor to be equal size, but got \[[\d, ]*\] at entry \d+ and \[[\d, ]*\] at entry"),
     "dataset items of different shapes in one batch",
     "the default collate function stacks the batch's items and two have different shapes: images of other sizes or "
     "channels (a grayscale or RGBA file among RGB ones) or sequences of different lengths without padding",
     ("Make the items one shape in the dataset: convert('RGB') and resize/crop images to a fixed size; pad sequences in "
      "a collate_fn (pad_sequence) or tokenize with padding; the two shapes in the message name the odd item's.",)),
    # a module whose weights were never materialized (init_empty_weights / device_map / low_cpu_mem_usage) moved or copied
    (re.compile(r"Cannot copy out of meta tensor; no data!"),
     "weights still on the meta device",
     "some weights were never loaded: the model was created on the meta device (device_map, low_cpu_mem_usage, "
     "init_empty_weights) and a later .to()/copy found no data there, often because offloaded or unmatched weights "
     "were left empty",
     ("Do not move a model loaded with device_map (let accelerate place it), or load without device_map and move it "
      "yourself; use model.to_empty(device=...) then load the state dict when building from meta on purpose.",)),
    # torch's CUDA lazy init in a CPU-only build
    (re.compile(r"Torch not compiled with CUDA enabled"),
     "a CPU-only build of PyTorch",
     "the installed torch is a CPU-only build (the default wheel on some platforms, or one pulled in by another "
     "package), so any .cuda()/device='cuda' fails",
     ("Install the CUDA build that matches the driver (pip install torch --index-url "
      "https://download.pytorch.org/whl/cu121, or the conda pytorch-cuda package) and check torch.version.cuda.",)),
    # a convolution fed another channel count than it was built for (grayscale into an RGB backbone, RGBA, channels-last)
    (re.compile(r"Given groups=\d+, weight of size \[\d+, (\d+)[\d, ]*\], expected input\[[\d, ]*\] to have \d+ "
                r"channels, but got \d+ channels instead"),
     "a convolution fed another number of channels",
     "a convolution built for one number of input channels received another: grayscale (1) or RGBA (4) images into an "
     "RGB (3) network, channels in the last dimension instead of the second, or a checkpoint built for other inputs",
     ("Convert the images to the channel count the model expects (Image.convert('RGB')), permute NHWC to NCHW, or "
      "build the first layer with in_channels for your data.",)),
    # an embedding given float ids (torch < 2 wording; newer: "Expected tensor for argument #1 'indices' to have one of
    # the following scalar types: Long, Int; but got torch.FloatTensor instead")
    (re.compile(r"Expected tensor for argument #1 'indices' to have (?:one of the following )?scalar types?:? Long"),
     "token ids of a float type into an embedding",
     "an embedding layer received indices of a floating type: token ids (or class ids) were converted to float "
     "somewhere in the data pipeline (a float tensor built from them, a NaN-holding column, a default dtype)",
     ("Keep ids as int64 end to end: torch.tensor(ids, dtype=torch.long) in the dataset or collate_fn; check the "
      "columns that feed input_ids.",)),
    # an asynchronous CUDA fault: the failing kernel is somewhere before the line that reports it
    (re.compile(r"CUDA error: an illegal memory access was encountered"),
     "an illegal memory access on the GPU",
     "a CUDA kernel read or wrote outside its memory: an out-of-range index into a tensor or an embedding, a custom "
     "or compiled kernel's bug, or a library/driver mismatch; CUDA reports it asynchronously, so the traceback's "
     "line is not where it happened",
     ("Rerun with CUDA_LAUNCH_BLOCKING=1 (or one step on the CPU) to get the failing operation; check token and label "
      "ids against the vocabulary and class count; update the driver, or rebuild custom kernels for this GPU.",)),
    # a loss that takes float targets (BCE, MSE, BCEWithLogits) given integer or double ones: "RuntimeError: Found dtype
    # Long but expected Float" (dcgan-mnist PR#2, "Make the labels float solves the problem"; pytorch#45373, the DCGAN
    # tutorial's labels), "Found dtype Double but expected Float" (sentence-transformers#770: float64 labels), older
    # torch's "expected dtype Float but got dtype Long", BCEWithLogits' "result type Float can't be cast to the desired
    # output type Long"
    (re.compile(r"Found dtype (?:Long|Int|Double|Half|BFloat16) but expected Float|expected dtype Float but got dtype "
                r"(?:Long|Double)|result type Float can't be cast to the desired output type Long"),
     "float-target loss given integer or double targets",
     "a loss that compares against real-valued targets (binary cross-entropy, MSE, BCEWithLogits; transformers' "
     "regression head with num_labels=1 and its multi-label problem_type) received labels of another dtype: integer "
     "class ids (a LongTensor) or float64 values (a NumPy array turned into a tensor)",
     ("Cast the targets to the prediction's dtype before the loss (labels.float(); torch.tensor(y, dtype=torch.float32) in "
      "the dataset); for single-label classification use CrossEntropyLoss with int64 labels (transformers: num_labels "
      "= the number of classes, not 1).",)),
    # DDP's reducer finding parameters that got no gradient in the previous iteration (torch/csrc/distributed/c10d/
    # reducer.cpp: "Expected to have finished reduction in the prior iteration before starting a new one. This error
    # indicates that your module has parameters that were not used in producing loss.")
    (re.compile(r"Expected to have finished reduction in the prior iteration"),
     "parameters unused in the loss under DDP",
     "DistributedDataParallel expects a gradient for every parameter that requires one, every iteration: some "
     "parameters took no part in the loss (an output or head the loss does not use, a branch taken only sometimes, "
     "a frozen part left with requires_grad=True, modules of a multi-task model unused by this batch)",
     ("Set find_unused_parameters=True (ddp_find_unused_parameters=True in HF TrainingArguments, "
      "strategy='ddp_find_unused_parameters_true' in Lightning), or make every output take part in the loss and set "
      "requires_grad=False on what is not trained; TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters.",)),
    # a CUDA library a compiled package links against is missing ("OSError: libcudart.so.11.0: cannot open shared object
    # file: No such file or directory"): the package was built for another CUDA version than the one installed (dgl#5547,
    # solved by the matching PyTorch+CUDA build; pytorch#10910, a cudatoolkit of another version)
    (re.compile(r"lib(?:cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusparse|cusolver|nvrtc|nccl|nvToolsExt|nvJitLink)"
                r"\S*?\.so(?:\.[\d.]+)?: cannot open shared object file"),
     "a CUDA library the installed packages were built against is missing",
     "a compiled package (torch itself, or an extension: bitsandbytes, flash-attn, torch-scatter, dgl, mamba-ssm, "
     "TensorFlow) links against a CUDA runtime library of a version that is not installed or not on the library path: "
     "packages built for different CUDA versions are mixed in one environment",
     ("Install every CUDA-built package for one CUDA version: check torch.version.cuda, then install the failing "
      "package's wheel built for that version (or torch built for the CUDA the package needs); otherwise install the "
      "missing runtime (the version in the .so name) and put it on LD_LIBRARY_PATH.",)),
    # cuBLAS failing to run a GEMM ("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`"):
    # cuBLAS' own doc says only "the GPU program failed to execute"; in training threads it is an earlier asynchronous
    # fault surfacing at the next matrix multiply (dInfer#22: a vocabulary larger than the model's), a half-precision
    # GEMM the GPU cannot run (DeepSpeed#294: fp16 on a P100), or the driver/toolkit
    (re.compile(r"CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR)"),
     "a cuBLAS matrix multiply that failed to run",
     "a cuBLAS GEMM kernel failed on the GPU: most often an earlier asynchronous CUDA fault reported at the next matrix "
     "multiply (an out-of-range token or label id: ids at or above the embedding's vocabulary size, e.g. tokens added "
     "to the tokenizer without resizing the model's embeddings), else a half-precision GEMM this GPU or cuBLAS build "
     "cannot run, GPU memory nearly exhausted, or a driver/CUDA mismatch",
     ("Rerun with CUDA_LAUNCH_BLOCKING=1 (or one step on the CPU) to get the failing operation; check max(input_ids) "
      "against the model's vocabulary (model.resize_token_embeddings(len(tokenizer)) after adding tokens) and label "
      "ids against the class count; then try fp32 or a smaller batch, and check the torch CUDA build against the "
      "driver.",)),
    # cuBLAS unable to create its handle ("CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"): the
    # first GEMM's allocation failing (lm-evaluation-harness#1689: memory, or a tokenizer larger than the embeddings)
    (re.compile(r"CUBLAS_STATUS_NOT_INITIALIZED"),
     "cuBLAS could not initialise",
     "cuBLAS failed to create its handle at the first matrix multiply: usually the GPU's memory was already full when "
     "it tried to allocate its workspace (an out-of-memory in another name), else an earlier out-of-range index fault "
     "or a torch build whose CUDA does not match the driver",
     ("Check free GPU memory at that point (other processes, a larger batch or sequence length) and retry with a "
      "smaller batch; rerun with CUDA_LAUNCH_BLOCKING=1 to rule out an out-of-range token or label id; check the "
      "torch CUDA build against the driver.",)),
    # NCCL failing a collective (not its watchdog timeout, which is CRASH001's collective-timeout finding)
    (re.compile(r"NCCL error in: [^\n]{0,200}?(?:unhandled system error|unhandled cuda error|invalid usage|internal "
                r"error|remote process exited or there was a network error)"),
     "an NCCL communication error",
     "NCCL, which carries the gradients between GPUs, failed a collective: its transport (shared memory, P2P, "
     "sockets, InfiniBand) is not usable as configured, one rank died, or the ranks disagree on the collective",
     ("Rerun with NCCL_DEBUG=INFO to see the failing transport; in Docker give /dev/shm room (--shm-size, --ipc=host); "
      "on consumer GPUs try NCCL_P2P_DISABLE=1; set NCCL_SOCKET_IFNAME to the right network interface; look for a rank "
      "that died first.",)),
    # a weights file that is not the weights: a Git LFS pointer (its text starts "version https://git-lfs...", hence
    # pickle's "invalid load key, 'v'." and safetensors' "HeaderTooLarge"), an HTML error page, a truncated download or
    # an interrupted save (torch.load's "PytorchStreamReader failed reading zip archive: failed finding central
    # directory")
    (re.compile(r"invalid load key, '[v<\\x]|HeaderTooLarge|Error while deserializing header|PytorchStreamReader "
                r"failed reading (?:zip archive|file)|failed finding central directory|unexpected EOF, expected \d+ more "
                r"bytes|Ran out of input(?=.*frame: .*(?:load|torch|pickle|serializ))"),
     "a checkpoint file that is not a complete checkpoint",
     "a weights file could not be read as one: it is a Git LFS pointer (a few hundred bytes of text starting 'version "
     "https://git-lfs', cloned without git lfs), an HTML error page saved in its place, or a file cut short by an "
     "interrupted download or save",
     ("Check the file's size against the expected one (ls -l; 'head -c 200 file' shows an LFS pointer's text); run "
      "'git lfs pull' or download it again (huggingface_hub, hf download); for a run's own checkpoint, resume from the "
      "previous one (autopsy scan checks every file's header and tensors).",)),
    # a state dict of another shape: most often an embedding resized for added tokens on one side only
    (re.compile(r"size mismatch for [\w.]+: copying a param with shape torch\.Size\(\[[\d, ]+\]\) from checkpoint, the "
                r"shape in current model is torch\.Size\(\[[\d, ]+\]\)"),
     "a checkpoint whose tensor shapes differ from the model's",
     "the state dict was saved from a model of another shape: a vocabulary resized for added tokens (embed_tokens / "
     "lm_head rows differ by the tokens added), another number of classes in a head, or another model size or config",
     ("Build the model the way the checkpoint was: call model.resize_token_embeddings(len(tokenizer)) with the "
      "tokenizer saved beside it before loading (for an embedding or lm_head mismatch), pass the same num_labels, or "
      "load with ignore_mismatched_sizes=True to re-initialise a head on purpose.",)),
    # the GPU stack below torch: no driver, an old driver, a card held by another process
    (re.compile(r"Found no NVIDIA driver on your system|The NVIDIA driver on your system is too old|CUDA driver version "
                r"is insufficient for CUDA runtime version|CUDA-capable device\(s\) is/are busy or unavailable|"
                r"no CUDA-capable device is detected"),
     "the GPU or its driver is not usable",
     "torch could not use the GPU: no NVIDIA driver is loaded, the driver is older than the CUDA runtime torch was built "
     "with, or the card is held by another process (exclusive compute mode) or not passed into the container",
     ("Check nvidia-smi on the machine (and in the container: --gpus all); update the driver, or install the torch "
      "build for the CUDA version the driver supports (torch.version.cuda vs nvidia-smi's 'CUDA Version'); free or "
      "pick another GPU (CUDA_VISIBLE_DEVICES).",)),
    # bitsandbytes failing to load its CUDA library
    (re.compile(r"CUDA Setup failed despite GPU being available"),
     "bitsandbytes could not load its CUDA library",
     "bitsandbytes found a GPU but not a CUDA runtime library it was built for (an old bitsandbytes with a new CUDA, "
     "a CPU-only wheel, or libcudart missing from the library path)",
     ("Run python -m bitsandbytes for its diagnosis; install a bitsandbytes release that supports this CUDA version "
      "(recent releases ship one wheel for all), and check LD_LIBRARY_PATH / BNB_CUDA_VERSION.",)),
    # a distributed call with no process group: the script was started without a launcher
    (re.compile(r"Default process group has not been initialized"),
     "a distributed call without a process group",
     "the code uses torch.distributed (a DDP wrapper, a collective, a DeepSpeed/FSDP setup) but no process group was "
     "created: the script was started with plain python instead of its launcher, or init_process_group was never "
     "called",
     ("Start it with its launcher (torchrun --nproc_per_node N, accelerate launch, deepspeed), or call "
      "torch.distributed.init_process_group() first; for one GPU, turn the distributed options off.",)),
    # the DataLoader's workers share tensors through file descriptors
    (re.compile(r"Too many open files"),
     "too many open files",
     "the process ran out of file descriptors: DataLoader workers pass each shared tensor through one (the default "
     "'file_descriptor' sharing strategy), or the dataset keeps files open",
     ("Raise the limit (ulimit -n 65535), or torch.multiprocessing.set_sharing_strategy('file_system'); fewer "
      "num_workers; close files the dataset opens per item.",)),
    # TensorFlow's CTC loss refusing a sample without a label (an empty transcription; torch's CTC returns inf instead)
    (re.compile(r"Labels length is zero in batch (\d+)"),
     "a sample with an empty label sequence (CTC)",
     "the CTC loss got a sample whose label sequence is empty: an empty transcription or text line in the data (a "
     "blank line in the label file, a text made only of characters the dictionary drops)",
     ("Drop samples whose encoded label is empty before batching (and count them); check the label file for blank "
      "lines and the character dictionary for the characters those texts hold.",)),
    # DeepSpeed's config check (runtime/config.py _batch_assertion; codealpaca#14, LlamaFactory#2574)
    (re.compile(r"Check batch related parameters\.\s+train_batch_size is not\s+equal to micro_batch_per_gpu \*\s+"
                r"gradient_acc_step \*\s+world_size"),
     "DeepSpeed's batch sizes do not multiply up",
     "DeepSpeed requires train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size, "
     "and the values it got do not: a fixed train_batch_size in the DeepSpeed JSON written for another number of GPUs, "
     "or a world size other than the launcher's (processes started without the launcher, CUDA_VISIBLE_DEVICES)",
     ("Set the batch fields of the DeepSpeed config to \"auto\" when training through the HF Trainer / accelerate (they "
      "are filled from the TrainingArguments), or recompute train_batch_size for this number of GPUs; start the run "
      "with the launcher so world_size is the real one.",)),
    # torch's rendezvous (c10d TCPStore): the master port is held, or a rank cannot reach the master
    (re.compile(r"The server socket has failed to listen on any local network address|"
                r"failed to bind to [^\n]{0,40}\(errno: 98 - Address already in use\)"),
     "the distributed master port is already in use",
     "the rendezvous server could not bind its port: another run (or a leftover process of an earlier one) holds "
     "MASTER_PORT (29500 by default)",
     ("Start with another port (torchrun --master_port 29501, MASTER_PORT=..., accelerate launch --main_process_port) "
      "or kill the leftover processes (ps aux | grep python).",)),
    (re.compile(r"The client socket has timed out after \d+\w* while trying to connect to"),
     "a rank could not reach the distributed master",
     "a worker could not connect to the rendezvous master in time: MASTER_ADDR or the port is wrong or blocked "
     "(firewall, another network interface), or the master process never started (it crashed first)",
     ("Check MASTER_ADDR/MASTER_PORT on every node and that the port is open between them; read the master's own log "
      "for an earlier crash; set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the interface the nodes share.",)),
    # a rank waiting in the key-value store for what rank 0 publishes (its NCCL id) past the store's timeout
    # (SpongebBob/Finetune-ChatGLM2-6B#13: rank 0 tokenizing 2.3M samples while the others waited)
    (re.compile(r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store[^\n]{0,120}?(?:Socket Timeout|timed out|"
                r"Timeout)"),
     "ranks waiting for rank 0 timed out",
     "the other ranks reached the first collective and waited for rank 0 to publish its NCCL id, longer than the "
     "store's timeout: rank 0 was still busy with something only it runs before that point (tokenizing or caching a "
     "large dataset, a download, a slow filesystem) or it had died",
     ("Raise the distributed timeout (init_process_group(timeout=timedelta(hours=2)); HF TrainingArguments ddp_timeout; "
      "deepspeed.init_distributed(timeout=...)), or do the slow step before the processes start (preprocess and cache "
      "the dataset once, then launch), or under main_process_first so every rank waits at a barrier; read rank 0's own "
      "log for an earlier error.",)),
    # safetensors refusing tied weights on save (transformers save_pretrained / a checkpoint save)
    (re.compile(r"Some tensors share memory, this will lead to duplicate memory on disk"),
     "tied weights refused by safetensors on save",
     "the model has weights that share memory (tied embeddings and lm_head, or a module held twice) and safetensors "
     "refuses to save them as separate tensors: the save, not the training, failed",
     ("Save through model.save_pretrained()/trainer.save_model(), which drop the tied copy, or pass "
      "safe_serialization=False; with a custom save, call safetensors' save_model() instead of save_file().",)),
    # transformers' Trainer refusing a quantized model without adapters
    (re.compile(r"You cannot perform fine-tuning on purely quantized models"),
     "a quantized model without trainable adapters",
     "a 4-bit or 8-bit model cannot be trained itself; the Trainer found no adapter (LoRA) attached to train",
     ("Attach adapters before training: model = prepare_model_for_kbit_training(model); model = get_peft_model(model, "
      "LoraConfig(...)) (or pass peft_config= to TRL's trainers); check that the PEFT wrapping ran.",)),
    # torch.utils.cpp_extension compiling a DeepSpeed op (fused_adam, cpu_adam, ...) at first use
    (re.compile(r"Error building extension '(\w+)'"),
     "a CUDA extension failed to compile",
     "an op built just in time (a DeepSpeed fused optimizer, a custom kernel) did not compile: the CUDA toolkit (nvcc) "
     "differs from the one torch was built with, or a compiler or ninja is missing",
     ("Run ds_report (DeepSpeed) to see which ops build; install the CUDA toolkit matching torch.version.cuda (or set "
      "CUDA_HOME to it), or pick an optimizer that needs no build (e.g. optim adamw_torch, DS_BUILD_OPS=0 with "
      "prebuilt ops).",)),
    # a kernel killed by the display driver's watchdog (Windows TDR): the GPU also drives a screen
    (re.compile(r"CUDA error: the launch timed out and was terminated"),
     "a kernel stopped by the display watchdog",
     "a CUDA kernel ran longer than the display driver allows (Windows TDR, about 2 s, or X's watchdog on Linux) on a "
     "GPU that also drives a screen, and the driver killed it",
     ("Train on a GPU without a display, raise the TDR delay (Windows registry TdrDelay), or make each kernel shorter "
      "(smaller batch or sequence length).",)),
    # SIGKILL (not SIGBUS, the shared memory's): the kernel's OOM killer took a worker, the host RAM ran out
    # (DCPDN#12: 16 GB of RAM, fixed with num_workers=0)
    (re.compile(r"DataLoader worker \(pid\(?s?\)? ?[\d, ]*\)? is killed by signal: Killed"),
     "a DataLoader worker killed for the host's memory",
     "the kernel's OOM killer ended a DataLoader worker (SIGKILL): the host RAM ran out, each worker holding its own "
     "copy of the dataset's Python objects and its prefetched batches",
     ("Lower num_workers (0 to confirm) and prefetch_factor; keep the dataset in numpy arrays or memory-mapped files "
      "instead of Python lists (workers copy what they touch); check dmesg for 'Out of memory: Killed process'; "
      "add RAM or swap.",)),
    # (also torch's worker signal handler: "ERROR: Unexpected bus error encountered in worker. This might be caused by
    # insufficient shared memory (shm).")
    (re.compile(r"DataLoader worker \(pid\(?s?\)? ?[\d, ]*\)? (?:is killed by signal|exited unexpectedly)|"
                r"unable to write to file </torch_|No space left on device|bus error encountered in worker"),
     "a DataLoader worker died (shared memory)",
     "a DataLoader worker process died: usually the shared memory (/dev/shm, 64 MB by default in Docker) or the host RAM "
     "ran out while workers passed batches",
     ("Give the container more shared memory (docker run --shm-size=16g, or ipc=host) or lower num_workers "
      "(num_workers=0 to confirm).",)),
)


def _when(run: Run, ev: Event) -> tuple[int | None, str]:
    """An event's step (its own, else the nearest logged one) and the words " at step N" for a title."""
    step = ev.step if ev.step is not None else step_near(run, ev)
    return step, f" at step {step}" if step is not None else ""


#: NCCL's result name, which torch prints on the line after an NCCL error's message ("ncclSystemError: System call
#: (socket, malloc, munmap, etc) failed."): the detail of that exception, not another one
_NCCL_RESULT = re.compile(r"nccl[A-Z]\w*(?:Error|Usage)$")


def _nccl_detail(last: Event, prev: Event) -> bool:
    return (bool(_NCCL_RESULT.match(_exc(last)[0])) and last.source == prev.source and last.line is not None
            and prev.line is not None and 0 < last.line - prev.line <= 2)


def _continuation(run: Run, fatal: Event) -> str:
    """The lines printed right after an exception's line that other events took: the rest of a multi-line message
    (torch's "Error(s) in loading state_dict for X:" then one "size mismatch for ..." line per tensor)."""
    if fatal.line is None:
        return ""
    return " ".join(e.message for e in run.events if e.source == fatal.source and e.line is not None
                    and 0 < e.line - fatal.line <= 3 and e.kind != "traceback")


def _known_message(text: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(short label, what it means, remedies) of the first known message in ``text``."""
    for rx, label, meaning, remedies in KNOWN_MESSAGES:
        if rx.search(text):
            return label, meaning, remedies
    return None


def _collective_timeout(run: Run) -> Finding | None:
    """A rank's NCCL watchdog firing: the ranks stopped meeting at one collective, and the process was taken down."""
    evs = run.events_of("collective_timeout")
    if not evs:
        return None
    ev = evs[0]
    d = ev.data
    step, at = _when(run, ev)
    def rank_of(e: Any) -> int | None:
        return e.data.get("watchdog_rank") if e.data.get("watchdog_rank") is not None else e.rank

    who = f" on rank {rank_of(ev)}" if rank_of(ev) is not None else ""
    ranks = sorted({r for e in evs if (r := rank_of(e)) is not None})
    # each rank's newest collective: a rank whose count is far behind the others' stopped calling them first
    seqs: dict[int, int] = {}
    for e in evs:
        r, q = rank_of(e), e.data.get("seq")
        if r is not None and q is not None:
            seqs[r] = max(seqs.get(r, q), q)
    behind = ""
    if len(set(seqs.values())) > 1:
        low = min(seqs, key=lambda r: seqs[r])
        behind = (f" Rank {low} is behind: its newest collective is #{seqs[low]:,}, the others' reach "
                  f"#{max(seqs.values()):,}; start from what rank {low} was doing.")
    waited = f"{d['ran_ms'] / 1000:,.0f} s" if d.get("ran_ms") else "its timeout"
    seq = f" (collective #{d['seq']})" if d.get("seq") is not None else ""
    return Finding(
        code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error", confidence=0.8,
        title=f"A collective timed out{who}{at}: {d.get('op', 'a collective')} waited {waited}",
        message=(f"The NCCL watchdog{who} gave up on {d.get('op', 'a collective')}{seq} after {waited} (timeout "
                 f"{d.get('timeout_ms', 0) / 1000:,.0f} s) and took the process down"
                 + (f"; ranks reporting it: {', '.join(map(str, ranks))}" if len(ranks) > 1 else "")
                 + ". The ranks stopped calling the same collectives: one rank was still busy (work done on rank 0 "
                 "only: evaluation, saving, tokenizing), took another branch (a data-dependent condition, an uneven "
                 "last batch), or had died." + behind),
        first_step=step, evidence=[event_evidence(e, e.message.strip()[:240]) for e in evs[:3]],
        remedies=["Find the rank that did not reach the collective: rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL and "
                  "NCCL_DEBUG=INFO, and read every rank's log around this step (the missing rank often crashed or is "
                  "still in eval/checkpointing).",
                  "If rank 0 does long work alone (preprocessing, evaluation, saving a large checkpoint), raise the "
                  "timeout: Trainer ddp_timeout=7200, accelerate InitProcessGroupKwargs(timeout=timedelta(hours=2)), "
                  "or init_process_group(timeout=...).",
                  "Make every rank run the same collectives: drop_last=True / even shards, no rank-dependent branches "
                  "around forward/backward or metric all_gathers."],
        basis="direct", symptom="crash")


def _iterator_ran_dry(fatal: Event, step: int | None, at: str, evidence: list[Evidence], resume: str | None) -> Finding:
    """A StopIteration that reached the top of the script: the loop called ``next()`` on its batch iterator once more
    than it had batches (Megatron's ``next(data_iterator)``, ``next(iter(loader))`` loops): the data ran out first."""
    frame = fatal.data.get("frame") or {}
    loader = bool(re.search(r"dataloader|data_loader|iterator|batch", f"{frame.get('file', '')} {frame.get('function', '')}",
                            re.I))
    remedies = ["Count the batches the data really holds (after filtering, packing and the train/valid/test split) "
                "against the iterations planned (train_iters / max_steps x global batch, eval_iters for the "
                "validation set), and plan from the count.",
                "Or make the iterator cycle (a repeating sampler, itertools.cycle over the loader) where running past "
                "the data is intended."]
    if resume:
        remedies.append(resume[0].upper() + resume[1:] + ".")
    return Finding(
        code=CODE, name=SLUG, root_cause="data_exhausted", severity="error", confidence=0.75 if loader else 0.65,
        title=f"The data iterator ran out{at} (StopIteration)",
        message=(f"The run died{at} with a bare StopIteration: the loop asked its batch iterator for one more batch "
                 "than it held (next() on an exhausted iterator"
                 + (f", in {frame.get('function')}" if frame.get("function") else "")
                 + "). The dataset yields fewer batches than the iterations the run planned."),
        first_step=step, evidence=evidence, remedies=remedies, basis="inferred", symptom="stopped_early")


#: exceptions whose message names a cause of their own, raised before the first batch or at load time:
#: (pattern, root cause, confidence, symptom, title, what it means, remedies); ``{at}`` and ``{said}`` are filled in
NAMED_CAUSES: tuple[tuple[re.Pattern[str], str, float, str, str, str, tuple[str, ...]], ...] = (
    # a Python constant beyond float16's range written into a half tensor (c10/util/TypeCast.h / Half.h: "value cannot
    # be converted to type at::Half without overflow: -1e+09"): masked_fill(mask, -1e9) under apex/AMP (NVIDIA/apex#1052,
    # #1105: -1e10), a logits processor's float(2**30) on a float16 model (QwenLM/Qwen#32: bf16 or the fixed code)
    (re.compile(r"value cannot be converted to type (?:at::|c10::)?Half without overflow"),
     "fp16_overflow", 0.75, "crash",
     "A constant beyond float16's range was written into a float16 tensor{at}",
     "The run died: \"{said}\". A value past float16's range (|x| > 65504), most often the -1e9 or -1e10 of "
     "masked_fill(mask, -1e9) in attention code or a large scale factor, was cast into a half-precision tensor: under "
     ".half() or fp16 autocast the model's masking constants no longer fit.",
     ("Use the dtype's own limit instead of a literal: masked_fill(mask, torch.finfo(scores.dtype).min), or a value "
      "inside float16's range (-65504); in a model's remote code, update it (the authors' fix).",
      "Or train in bf16 or fp32, whose range holds the constant.")),
    # the training set is empty: torch's RandomSampler ("integeral" in torch < 1.2), Lightning's check of the train
    # loader's length (the YOLO family's "No labels found" is LBL001's)
    (re.compile(r"num_samples should be a positive integer(?:al)? value, but got num_samples=0\b"
                r"|`?Dataloader`? returned 0 length"),
     "data_exhausted", 0.8, "crash", "The training set is empty{at}: the data loader had no sample to draw",
     "The run died before its first batch: \"{said}\". The dataset handed to the loader holds no sample: its path "
     "points at no files, the files have another extension or layout than the dataset class expects, or a filter "
     "(length, labels, split) removed every row.",
     ("Print len(dataset) right after building it and check the data path: the folder layout and file extensions the "
      "dataset class looks for, the split file names, and any filter that drops rows.",
      "Run again once len(dataset) is at least one batch.")),
    # transformers' check after device_map="auto" placed a quantized model (bitsandbytes 4/8-bit): some modules went to
    # the CPU or the disk, because the GPU had no room for them (or no GPU was used at all)
    (re.compile(r"Some modules are dispatched on the CPU or the disk\. Make sure you have enough GPU RAM to fit the "
                r"quantized model"),
     "out_of_memory", 0.7, "oom",
     "The model does not fit in the GPU's memory{at}: modules were dispatched to the CPU or the disk",
     "Loading stopped: \"{said}\". device_map placed part of the quantized model off the GPU because it had no room "
     "left for it (the model, or other processes already on the card), or because no GPU was visible to torch at all "
     "(then everything goes to the CPU).",
     ("Check torch.cuda.is_available() and nvidia-smi first: with no GPU visible (a CPU-only torch, "
      "CUDA_VISIBLE_DEVICES) every module is dispatched to the CPU.",
      "Otherwise the card is too small for this model at this precision: load it in 4-bit instead of 8-bit, pick a "
      "smaller model or a larger GPU, free the GPU of other processes, or pass max_memory={0: '...'} / a device_map "
      "with llm_int8_enable_fp32_cpu_offload=True to offload on purpose.")),
    # vLLM sizing its KV cache from the GPU memory left to it (a rollout engine in RL fine-tuning, an evaluation or serving
    # process): "The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV
    # cache (7344)" (vllm#2418, OpenRLHF#336)
    (re.compile(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache "
                r"\((\d+)\)"),
     "out_of_memory", 0.65, "oom",
     "The vLLM engine's KV cache cannot hold one sequence of the model's max length{at}",
     "vLLM refused to start: \"{said}\". The GPU memory left to the engine (its gpu_memory_utilization share, minus the "
     "weights and any trainer colocated on the card) holds fewer KV-cache tokens than one sequence of max_model_len.",
     ("Lower the engine's max_model_len to what the run needs (prompt + response length), or raise its "
      "gpu_memory_utilization (OpenRLHF, verl, TRL: the rollout engine's own option), or spread it over more GPUs "
      "(tensor parallel size); with a trainer on the same GPUs, give the engine a larger share or let it sleep while "
      "the trainer steps.",)),
)


def _named_cause(fatal: Event, at: str, evidence: list[Evidence], text: str) -> Finding | None:
    """The finding of the first NAMED_CAUSES message in ``text``, or None."""
    for rx, cause, confidence, symptom, title, meaning, remedies in NAMED_CAUSES:
        m = rx.search(text)
        if m is not None:
            return Finding(code=CODE, name=SLUG, root_cause=cause, severity="error", confidence=confidence,
                           title=title.format(at=at), message=meaning.format(said=m[0][:160]),
                           first_step=fatal.step, evidence=evidence, remedies=list(remedies),
                           basis="direct", symptom=symptom)
    return None


#: an OOM raised in a rollout engine's own memory (vLLM's KV cache, its sleep/wake-up allocator) beside the trainer
_VLLM = re.compile(r"vllm|cumem_allocator|LLMRayActor", re.IGNORECASE)
VLLM_OOM_REMEDY = ("The memory ran out in the vLLM rollout engine (its KV cache, or mapping its memory back at wake-up "
                   "beside the trainer's): give it a smaller share of the GPU (OpenRLHF, TRL, ms-swift: "
                   "--vllm_gpu_memory_utilization; verl: actor_rollout_ref.rollout.gpu_memory_utilization), or a "
                   "shorter max model length; with colocated models, let the engine sleep while the trainer steps "
                   "(OpenRLHF --vllm_enable_sleep).")


def _in_vllm(run: Run, ooms: list[Event]) -> bool:
    """The OOM line, or the traceback it ended, runs through vLLM's code."""
    for e in ooms + run.events_of("traceback"):
        frame = e.data.get("frame") or {}
        if _VLLM.search(e.message) or _VLLM.search(str(frame.get("file", "") if isinstance(frame, dict) else frame)):
            return True
    return False


def _printed_before(ev: Evidence, fatal: Event) -> bool:
    """A step-less non-finite message printed above the fatal exception in the same file ("NaN loss encountered in
    epoch 0!" and then the traceback): the NaN came first."""
    line = evidence_line(ev)
    return (line is not None and ev.step is None and fatal.line is not None and line < fatal.line
            and ev.artifact == fatal.source)


def _no_batches(fatal: Event, at: str, evidence: list[Evidence]) -> Finding:
    """A division by zero before any loss was logged: the usual divisor is the number of batches an epoch yielded (the
    epoch's mean loss, steps per epoch, a scheduler's total steps), zero when the loader yields nothing."""
    return Finding(
        code=CODE, name=SLUG, root_cause="data_exhausted", severity="error", confidence=GENERIC_CONFIDENCE,
        title=f"ZeroDivisionError{at} before any loss was logged: the data loader most likely yielded no batch",
        message=("The run died with a division by zero before it logged a single loss. What a training script divides by "
                 "at that point is a count of batches (the epoch's mean loss, steps per epoch, the scheduler's total "
                 "steps), and it is 0 when the loader yields nothing: an empty or wrongly pointed dataset, or fewer "
                 "samples than one batch with drop_last=True."),
        first_step=fatal.step, evidence=evidence,
        remedies=["Print len(dataset) and len(dataloader) before training: make the batch size at most the number of "
                  "samples (or drop_last=False), and check that the data path holds the files the loader expects.",
                  "If both are non-zero, the divisor is elsewhere: fix the ZeroDivisionError at the frame named in the "
                  "traceback (a warmup or total-step count of 0)."],
        basis="inferred", symptom="crash")


#: exceptions that only report a child process's death (the launcher's, a subprocess call's)
WRAPPER_EXC = re.compile(r"ChildFailedError|CalledProcessError|SubprocessError|ProcessExitedException")


def _reports_a_child(e: Event) -> bool:
    """A launcher's or a subprocess call's exception: the report of a child's death, not the child's own error."""
    return WRAPPER_EXC.search(str(e.data.get("exc_type") or e.message)) is not None


def _killed(run: Run, killed: list[Event]) -> Finding:
    """The process was killed with SIGKILL and printed no exception of its own: on Linux the kernel's OOM killer once the
    host's RAM (not the GPU's) ran out, far more often than a scheduler's hard kill."""
    ev = killed[0]
    step, at = _when(run, ev)
    return Finding(
        code=CODE, name=SLUG, root_cause="out_of_memory", severity="critical", confidence=0.7,
        title=f"Killed by SIGKILL (signal 9){at}: most likely the host ran out of RAM",
        message=(f"The process was killed{at} with signal 9 and printed no exception of its own: \"{ev.message.strip()[:160]}\". "
                 "On Linux that is nearly always the kernel's OOM killer ending the process that used the most host "
                 "memory (CPU RAM, not the GPU's), e.g. while loading or converting a model, caching a dataset in RAM, or "
                 "with many DataLoader workers; a job scheduler's hard kill (time or memory limit) is the other cause."),
        first_step=step, evidence=[event_evidence(e) for e in killed[:2]], basis="inferred", symptom="oom",
        remedies=["Confirm with `dmesg -T | grep -i -E 'killed process|out of memory'` (or the scheduler's job record) and "
                  "watch the host memory while the run starts.",
                  "Load the model without a full copy in RAM (from_pretrained(..., low_cpu_mem_usage=True, "
                  "torch_dtype=torch.bfloat16) or device_map), use fewer DataLoader workers, stream or memory-map the "
                  "dataset instead of loading it whole, with DeepSpeed offload give the host more RAM or offload less; "
                  "or add RAM/swap, or ask the scheduler for more memory."])


def detect(run: Run) -> Iterable[Finding]:
    short = _input_exhausted(run)
    if short is not None:
        yield short
    nothing = _nothing_planned(run)
    if nothing is not None:
        yield nothing
        return  # what follows a plan of no step (a save of the untouched model, a division by zero) is its consequence
    ooms = run.events_of("oom") + [e for e in run.events_of("traceback", "error") if OOM.search(f"{e.message} {e.data.get('exc_message', '')}")]
    killed = run.events_of("killed")
    if killed and not ooms:
        # SIGKILL: the launcher's or the wrapper's traceback that follows (ChildFailedError, CalledProcessError) is
        # its report, not a second failure; another exception raised before it is left to the paths below
        before = [e for e in run.events_of("traceback") if e.line is not None and killed[0].line is not None
                  and e.source == killed[0].source and e.line < killed[0].line and not _reports_a_child(e)]
        if not before:
            yield _killed(run, killed)
            return
    # a native abort (uncaught C++ exception, segfault) ends the run like a traceback, without printing one
    tracebacks = [e for e in run.events_of("traceback", "native_abort") if e not in ooms]
    # a CUDA device-side assert kills the process (the CUDA context is unusable after it) even when the paste holds no
    # traceback: "step 2: CUDA error: device-side assert triggered"
    asserts = [e for e in run.events_of("index_out_of_range") if DEVICE_ASSERT.search(e.message)]
    if len(tracebacks) > 1 and _nccl_detail(tracebacks[-1], tracebacks[-2]):
        tracebacks = tracebacks[:-1]
    # the launcher's summary of a dead worker (torchrun's ChildFailedError, a CalledProcessError) after the worker's own
    # exception: the worker's is the error
    if len(tracebacks) > 1 and _reports_a_child(tracebacks[-1]):
        own = [e for e in tracebacks if not _reports_a_child(e)]
        tracebacks = own or tracebacks
    fatal = ooms[-1] if ooms else (tracebacks[-1] if tracebacks else (asserts[-1] if asserts else None))
    timeout = _collective_timeout(run) if not ooms else None
    if timeout is not None:
        yield timeout
        return  # the DistBackendError traceback that follows a watchdog timeout is its consequence
    if fatal is None:
        return
    exc_type, exc_msg = _exc(fatal)
    step = fatal.step if fatal.step is not None else step_near(run, fatal)
    last_clean, _ = checkpoint_state(run, step + 1 if step is not None else None)
    at = f" at step {step}" if step is not None else ""
    resume = f"resume from {last_clean.path}, the last checkpoint with finite weights" if last_clean else None
    evidence = [event_evidence(fatal, f"{exc_type}: {exc_msg[:240]}")]
    frame = fatal.data.get("frame")
    if frame:
        evidence.append(event_evidence(fatal, f"raised in {_frame_text(frame)[:200]}"))
    if last_clean is not None:
        evidence.append(Evidence(last_clean.path, "checkpoint", f"last good checkpoint: {last_clean.path}", last_clean.step))
    if exc_type.endswith("KeyboardInterrupt") and not ooms:
        yield Finding(code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9,
                      title=f"Stopped by the user (KeyboardInterrupt){at}", message="The run was interrupted by hand.",
                      first_step=step, evidence=evidence, remedies=[resume[0].upper() + resume[1:] + "."] if resume else [],
                      basis="direct")
        return
    onset = nonfinite_onset(run)
    after_nan = onset is not None and (onset.step is not None and step is not None and onset.step <= step
                                       or _printed_before(onset.evidence, fatal))
    if ooms:
        remedies = [sentence(knob(run, "batch")),
                    knob(run, "memory")]
        if _in_vllm(run, ooms):
            remedies.insert(0, VLLM_OOM_REMEDY)
        if resume:
            remedies.append(resume[0].upper() + resume[1:] + ".")
        yield Finding(code=CODE, name=SLUG, root_cause="out_of_memory", severity="critical", confidence=0.95,
                      title=f"Out of memory{at}", message=f"The run died{at}: {exc_type}: {exc_msg[:200]}",
                      first_step=step, evidence=evidence, remedies=remedies, basis="direct", symptom="oom")
        return
    if exc_type == "StopIteration" and not after_nan:
        yield _iterator_ran_dry(fatal, step, at, evidence, resume)
        return
    if exc_type.endswith("ZeroDivisionError") and not after_nan and not any(loss_like(m) for m in run.metrics()):
        yield _no_batches(fatal, at, evidence)
        return
    named = None if after_nan else _named_cause(fatal, at, evidence, f"{exc_msg} {fatal.message}")
    if named is not None:
        yield named
        return
    known = _known_message(f"{exc_msg} {fatal.message} {_continuation(run, fatal)}"
                           + (f" frame: {_frame_text(frame)}" if frame else ""))
    remedies = list(known[2]) if known else [f"Fix the {exc_type} named in the traceback (see the frame it was raised in)."]
    if resume:
        remedies.append(resume[0].upper() + resume[1:] + ".")
    # (an exception line ending in a colon continues on the next lines, where a NaN check's words may be: TF's
    # "InvalidArgumentError: From /job:worker/replica:0/task:0:" then "Gradient for .../gamma:0 is NaN : Tensor had NaN
    # values")
    continued = fatal.message.rstrip().endswith(":")
    named_here = any(e.kind in EXPLAINING_KINDS and e.source == fatal.source and e.line is not None
                     and fatal.line is not None
                     and (e.line == fatal.line or (continued and e.kind == "nan_stop"
                                                   and 0 < e.line - fatal.line <= MESSAGE_LINES))
                     for e in run.events)
    # a message of the kinds another detector explains counts only where that detector has its event to go on:
    # "`FlatParameter` requires uniform `requires_grad`" (FSDP, flan-alpaca#10) names requires_grad and no
    # detector explains it; demoted to info it left a dead run "healthy"
    explained = EXPLAINED.search(f"{exc_msg} {fatal.message}") is not None and (
        any(e.kind in CORROBORATING_KINDS for e in run.events) or "prepare_inputs_for_generation" in exc_msg)
    # "CUDA error: device-side assert triggered" names no assert; the kernel's own line printed before it does
    # ("Assertion `t >= 0 && t < n_classes` failed", "srcIndex < srcSelectDimSize"), and its detector explains it
    explained = explained or (DEVICE_ASSERT.search(f"{exc_msg} {fatal.message}") is not None and any(
        e.kind == "index_out_of_range" and EXPLAINED.search(e.message) for e in run.events))
    if named_here or explained:
        yield Finding(code=CODE, name=SLUG, root_cause=None, severity="info", confidence=0.9,
                      title=f"The run died{at} with {exc_type}",
                      message=f"The run died{at}: {exc_type}: {exc_msg[:300]} (the cause is named by the other findings).",
                      first_step=step, evidence=evidence, remedies=remedies[1:], basis="direct")
        return
    inside = None if after_nan else _library_fault(exc_type, exc_msg, frame)
    if inside is not None:
        lib, path = inside
        ver = run.config.get(f"version.{lib}")
        yield Finding(code=CODE, name=SLUG, root_cause="framework_bug", severity="error", confidence=LIBRARY_FAULT_CONFIDENCE,
                      title=f"{exc_type} raised inside {lib}{f' {ver}' if ver else ''}{at}",
                      message=(f"The run died{at} with {exc_type} raised by {lib}'s own code ({path}): an internal check "
                               "or state of the library failed, not an input the user passed; check `autopsy known-issues "
                               f"--package {lib}` and the library's tracker for this message"
                               + (f" (installed {lib} {ver})" if ver else f"; the {lib} version is not in the artifacts")
                               + "."),
                      first_step=step, evidence=evidence,
                      remedies=[f"Search {lib}'s issue tracker for \"{exc_msg[:80]}\"; try the latest {lib} release.",
                                "Rerun with the component that raised it changed (e.g. another ZeRO stage or no offload) "
                                "to confirm it is the library."] + remedies[1:],
                      basis="inferred", symptom="crash")
    yield Finding(code=CODE, name=SLUG, root_cause=ROOT_CAUSE, severity="error",
                  confidence=AFTER_NAN_CONFIDENCE if after_nan else GENERIC_CONFIDENCE,
                  title=f"Crashed with {exc_type}{at}" + (f": {known[0]}" if known else ""),
                  message=f"The run died{at}: {exc_type}: {_sentence(exc_msg[:300])}" + (f" This means {known[1]}." if known else "")
                  + (f" {onset.metric} was already non-finite before it: the exception may be that NaN's consequence (a "
                     "sampling or a check on NaN values), so the NaN's cause comes first." if after_nan else ""),
                  # after a non-finite onset the exception is a candidate, not the run's established cause: inferred, so
                  # below the failure confidence it leaves the run inconclusive instead of "crash"
                  first_step=step, evidence=evidence, remedies=remedies, basis="inferred" if after_nan else "direct",
                  symptom="crash")

"""The settings a remedy names, in the run's own framework.

A remedy that says ``max_grad_norm=1.0`` helps an HF Trainer user and no one else: a YOLO, mmdetection or
fairseq run changes the same thing under another name (or cannot change it at all). ``knob(run, what)`` gives
the phrase for the framework the run was read as (``run.frameworks``, the config keys it left); a run of
unknown origin gets the plain-PyTorch way with the HF name beside it.

Names checked in each framework's own sources and docs: HF ``TrainingArguments``; Lightning ``Trainer``
(``gradient_clip_val``, ``accumulate_grad_batches``, ``precision="bf16-mixed"``); mmengine ``optim_wrapper``
(``clip_grad``, ``accumulative_counts``, ``AmpOptimWrapper(dtype=...)``) and mmcv 1.x ``optimizer_config.grad_clip``;
detectron2 ``SOLVER.CLIP_GRADIENTS`` / ``SOLVER.WARMUP_ITERS`` / ``SOLVER.IMS_PER_BATCH`` / ``SOLVER.AMP``;
fairseq ``--clip-norm`` / ``--update-freq`` / ``--warmup-updates`` / ``--bf16``; Megatron ``--clip-grad`` /
``--lr-warmup-iters``; DeepSpeed ``gradient_clipping`` / ``train_micro_batch_size_per_gpu`` / ``WarmupLR``;
ultralytics ``batch``, ``warmup_epochs``, ``amp`` (its trainer clips at max_norm 10 itself); Keras ``clipnorm``
and ``CosineDecay(warmup_steps=...)``; ESPnet/WeNet ``grad_clip``, ``accum_grad``; optax
``clip_by_global_norm``; Caffe's solver ``clip_gradients`` and ``iter_size``; darknet's ``burn_in``; PaddlePaddle
``grad_clip=paddle.nn.ClipGradByGlobalNorm``, ``paddle.optimizer.lr.LinearWarmup``, ``paddle.amp.auto_cast(level=,
dtype=)``, PaddleOCR's ``Optimizer.clip_norm`` / ``Optimizer.lr.warmup_epoch`` / ``Global.use_amp``, ``amp_level``,
``amp_dtype``, ``scale_loss`` (tools/program.py, ppocr/optimizer), PaddleDetection's ``OptimizerBuilder.clip_grad_by_norm``
and ``!LinearWarmup``; fairseq's ``--memory-efficient-fp16`` (no fp32 master copy) and ``--min-loss-scale``.
"""

from __future__ import annotations

from typing import Any

#: HF Trainer and the trainers built on it (their logs and configs use TrainingArguments' names)
HF_FRAMEWORKS = {"hf_trainer", "trl", "ms_swift", "llamafactory", "axolotl", "llama_recipes"}
#: TrainingArguments keys: a config that has them is an HF run even when the log printed no banner
#: (not gradient_accumulation_steps: DeepSpeed's config has that name too)
_HF_KEYS = ("per_device_train_batch_size", "warmup_ratio", "max_grad_norm")

_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lightning", ("lightning", "lightning_csv")),
    ("mmengine", ("mmengine",)),
    ("detectron2", ("detectron2",)),
    ("fairseq", ("fairseq",)),
    ("megatron", ("megatron", "megatron_lm", "megatron_core")),
    ("ultralytics", ("ultralytics", "yolo_cols")),
    ("keras", ("keras", "keras_epoch")),
    ("espnet", ("espnet", "wenet")),
    ("jax", ("jax", "jaxlib")),
    ("caffe", ("caffe",)),
    ("darknet", ("darknet",)),
    ("deepspeed", ("deepspeed", "deepspeed_config", "deepspeed_info", "deepspeed_model", "deepspeed_optim")),
)
#: PaddlePaddle runs (PaddleOCR, PaddleDetection, PaddleNLP): PaddleNLP's trainer prints the HF banner and takes
#: TrainingArguments' names, but its knobs are Paddle's, so this family is looked at before "hf"
PADDLE = "paddle"

_KNOBS: dict[str, dict[str, str]] = {
    "clip": {
        "paddle": ("clip gradients (grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0) on the optimizer; PaddleOCR "
                   "Optimizer.clip_norm, PaddleDetection OptimizerBuilder.clip_grad_by_norm, PaddleNLP --max_grad_norm)"),
        "hf": "clip gradients (max_grad_norm=1.0)",
        "lightning": "clip gradients (Trainer(gradient_clip_val=1.0))",
        "mmengine": ("clip gradients (optim_wrapper=dict(clip_grad=dict(max_norm=35, norm_type=2)); mmcv 1.x: "
                     "optimizer_config=dict(grad_clip=dict(max_norm=35, norm_type=2)))"),
        "detectron2": "clip gradients (SOLVER.CLIP_GRADIENTS.ENABLED True, CLIP_TYPE \"norm\", CLIP_VALUE 1.0)",
        "fairseq": "clip gradients (--clip-norm 1.0)",
        "megatron": "clip gradients (--clip-grad 1.0)",
        "ultralytics": "the trainer already clips gradients (max_norm 10): lower lr0",
        "keras": "clip gradients (clipnorm=1.0 on the optimizer)",
        "espnet": "clip gradients (grad_clip: 1.0-5.0 in the training config)",
        "jax": "clip gradients (optax.chain(optax.clip_by_global_norm(1.0), <optimizer>))",
        "caffe": "clip gradients (clip_gradients: 10 in solver.prototxt)",
        "darknet": "lower learning_rate in the [net] section (darknet has no gradient clipping)",
        "deepspeed": "clip gradients (\"gradient_clipping\": 1.0 in the DeepSpeed config)",
        "": ("clip gradients (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) before optimizer.step(); "
             "max_grad_norm=1.0 in HF TrainingArguments)"),
    },
    "warmup": {
        "paddle": ("add warmup (paddle.optimizer.lr.LinearWarmup around the schedule; PaddleOCR Optimizer.lr.warmup_epoch, "
                   "PaddleDetection a !LinearWarmup entry in LearningRate.schedulers, PaddleNLP --warmup_steps)"),
        "hf": "add warmup (warmup_ratio 0.03-0.1, or warmup_steps)",
        "lightning": "add warmup (a LinearLR warmup chained before the decay in configure_optimizers)",
        "mmengine": ("add warmup (a LinearLR entry at the head of param_scheduler; mmcv 1.x: lr_config warmup='linear', "
                     "warmup_iters=500)"),
        "detectron2": "add warmup (SOLVER.WARMUP_ITERS, a small share of SOLVER.MAX_ITER)",
        "fairseq": "add warmup (--warmup-updates, e.g. 4000, with --lr-scheduler inverse_sqrt)",
        "megatron": "add warmup (--lr-warmup-iters or --lr-warmup-fraction)",
        "ultralytics": "lengthen the warmup (warmup_epochs, default 3)",
        "keras": "add warmup (keras.optimizers.schedules.CosineDecay(..., warmup_target=<peak>, warmup_steps=N))",
        "espnet": "add warmup (warmup_steps in scheduler_conf, e.g. 25000 with warmuplr)",
        "jax": "add warmup (optax.warmup_cosine_decay_schedule)",
        "caffe": "lower base_lr for the first iterations (Caffe's solver has no warmup: restart from a snapshot)",
        "darknet": "lengthen burn_in in the [net] section",
        "deepspeed": "add warmup (a WarmupLR/WarmupDecayLR scheduler with warmup_num_steps)",
        "": "add a linear warmup (a few hundred steps, 3-10% of the run; warmup_ratio in HF TrainingArguments)",
    },
    "batch": {
        "paddle": ("lower the per-card batch size (PaddleOCR Train.loader.batch_size_per_card, PaddleDetection "
                   "TrainReader.batch_size; PaddleNLP --per_device_train_batch_size with more --gradient_accumulation_steps "
                   "to keep the effective batch)"),
        "hf": "lower per_device_train_batch_size and raise gradient_accumulation_steps to keep the effective batch",
        "lightning": "lower the DataLoader batch_size and set Trainer(accumulate_grad_batches=N) to keep the effective batch",
        "mmengine": ("lower train_dataloader's batch_size (mmcv 1.x: data.samples_per_gpu) and set "
                     "optim_wrapper=dict(accumulative_counts=N) to keep the effective batch"),
        "detectron2": "lower SOLVER.IMS_PER_BATCH (and SOLVER.BASE_LR in proportion)",
        "fairseq": "lower --max-tokens (or --batch-size) and raise --update-freq to keep the effective batch",
        "megatron": "lower --micro-batch-size (the global batch is kept by more accumulation steps)",
        "ultralytics": ("lower the batch size (batch=, or batch=-1 to let ultralytics pick one that fits; --batch-size in "
                        "YOLOv5's train.py) or the image size"),
        "keras": "lower batch_size in fit()",
        "espnet": "lower batch_bins (or batch_size) and raise accum_grad (accum-grad in ESPnet1) to keep the effective batch",
        "jax": "lower the per-device batch size and accumulate gradients (optax.MultiSteps) to keep the effective batch",
        "caffe": "lower batch_size in the data layer and raise iter_size in the solver to keep the effective batch",
        "darknet": "raise subdivisions in the [net] section (the same batch in smaller pieces)",
        "deepspeed": ("lower train_micro_batch_size_per_gpu and raise gradient_accumulation_steps in the DeepSpeed config "
                      "to keep the effective batch"),
        "": ("lower the batch size and accumulate gradients over several steps to keep the effective batch "
             "(per_device_train_batch_size / gradient_accumulation_steps in HF TrainingArguments)"),
    },
    "memory": {
        "paddle": ("Lower the input size (image shape, maximum sequence length), train with AMP (PaddleOCR Global.use_amp; "
                   "PaddleNLP --fp16/--bf16) and recompute activations (PaddleNLP --recompute)."),
        "hf": "Enable gradient checkpointing, shorten max_length/cutoff_len, use bf16, or ZeRO-2/3 with offload.",
        "lightning": ("Shorten the longest inputs, train in Trainer(precision=\"bf16-mixed\") (or \"16-mixed\"), or shard "
                      "with strategy=\"fsdp\" / \"deepspeed_stage_2\"."),
        "mmengine": ("Lower the image scale in the train pipeline (Resize scale=...) and cap the boxes per image; train "
                     "with AmpOptimWrapper."),
        "detectron2": ("Lower INPUT.MIN_SIZE_TRAIN / INPUT.MAX_SIZE_TRAIN and MODEL.RPN.POST_NMS_TOPK_TRAIN; "
                       "SOLVER.AMP.ENABLED True."),
        "fairseq": ("Drop over-long samples (--max-positions, --skip-invalid-size-inputs-valid-test), train with "
                    "--fp16/--bf16 and --checkpoint-activations."),
        "megatron": ("Recompute activations (--recompute-activations), shard the optimizer (--use-distributed-optimizer) "
                     "or raise the tensor/pipeline parallel size."),
        "ultralytics": "Lower imgsz=; if host RAM ran out, cache=False and fewer workers=.",
        "keras": ("Lower the input size; use mixed precision (mixed_float16 / mixed_bfloat16); "
                  "tf.config.experimental.set_memory_growth when the GPU is shared."),
        "espnet": ("Filter out the longest utterances (ESPnet1 --maxlen-in/--maxlen-out; a smaller batch_bins bounds "
                   "the frames per batch) and train with AMP."),
        "jax": ("Lower the per-device batch or sequence length, rematerialise activations (jax.checkpoint), or shard "
                "the parameters across devices."),
        "caffe": "Lower batch_size in the data layer (raise the solver's iter_size to keep the effective batch) or the input size.",
        "darknet": "Raise subdivisions or lower width/height in the [net] section.",
        "deepspeed": "Raise the ZeRO stage (2/3) with offload_optimizer/offload_param, and checkpoint activations.",
        "": ("Enable gradient checkpointing, shorten the longest inputs (sequence length, image size, audio duration), "
             "use mixed precision (bf16/fp16), or shard the model (ZeRO/FSDP)."),
    },
    "bf16": {
        "paddle": ("paddle.amp.auto_cast(dtype=\"bfloat16\") (PaddleOCR Global.amp_dtype: bfloat16, "
                   "PaddleNLP --bf16)"),
        "hf": "bf16=True with torch_dtype=torch.bfloat16",
        "lightning": "Trainer(precision=\"bf16-mixed\")",
        "mmengine": "optim_wrapper=dict(type='AmpOptimWrapper', dtype='bfloat16')",
        "detectron2": "bf16 autocast (SOLVER.AMP.ENABLED is fp16 there: turn it off for fp32)",
        "fairseq": "--bf16 instead of --fp16",
        "megatron": "--bf16 instead of --fp16",
        "ultralytics": "amp=False (ultralytics' AMP is fp16 only)",
        "keras": "keras.mixed_precision.set_global_policy(\"mixed_bfloat16\")",
        "espnet": "bf16 autocast or use_amp false (fp32)",
        "jax": "bfloat16 params/compute dtypes",
        "caffe": "fp32 (Caffe's half-precision builds have no bf16)",
        "darknet": "fp32 (darknet's half precision has no bf16)",
        "deepspeed": "\"bf16\": {\"enabled\": true} instead of the \"fp16\" section",
        "": "torch.autocast(\"cuda\", dtype=torch.bfloat16), or bf16=True in HF TrainingArguments",
    },
    # fp16 weights: keep a float32 master copy (PREC001); "" = no such remedy in that framework
    "master": {
        "hf": ("Do not load weights as torch_dtype=float16/half for training: use torch_dtype=auto with AMP (fp16=True) "
               "so the master weights and optimizer state stay fp32."),
        "fairseq": ("Train with --fp16 (an fp32 master copy of the weights), not --memory-efficient-fp16, which keeps the "
                    "weights and optimizer state in fp16."),
        "keras": ("Do not set the float type to float16 (keras.backend.set_floatx(\"float16\")): the mixed_float16 policy "
                  "keeps the variables in float32 and scales the loss."),
        "jax": "Keep the parameters in float32 and compute in half precision (param dtype float32, compute dtype bfloat16).",
        "paddle": ("Keep the weights in fp32: AMP level O1 (PaddleOCR Global.amp_level: O1; paddle.amp.auto_cast(level="
                   "\"O1\")) casts per operation, where O2 casts the model itself to fp16."),
        "caffe": "",
        "darknet": "",
        "": ("Keep the master weights in fp32: do not .half() the model (or load it as torch_dtype=float16) for training; "
             "AMP (torch.autocast with a GradScaler) casts per operation and keeps the weights and optimizer state fp32."),
    },
    # a collapsing dynamic loss scale: moving the scaler's floor only postpones the abort (PREC001)
    "scale_floor": {
        "hf": "Lowering min_loss_scale (DeepSpeed fp16 block) only postpones the abort",
        "deepspeed": "Lowering min_loss_scale (DeepSpeed fp16 block) only postpones the abort",
        "fairseq": "Lowering --min-loss-scale only postpones the abort",
        "megatron": "Lowering --min-loss-scale only postpones the abort",
        "paddle": ("Another initial loss scale (PaddleOCR Global.scale_loss, paddle.amp.GradScaler(init_loss_scaling=...)) "
                   "only postpones the collapse"),
        "": "Lowering the loss scaler's minimum (min_loss_scale in DeepSpeed's fp16 block) only postpones the abort",
    },
}


def family(run: Any) -> str:
    """``hf``, one of ``_FAMILIES``' names, or ``""`` (not known)."""
    fws = set(getattr(run, "frameworks", None) or ())
    if PADDLE in fws:
        return PADDLE
    if fws & HF_FRAMEWORKS:
        return "hf"
    config = getattr(run, "config", None)
    fact = getattr(config, "fact", None)
    if fact is not None and any(_own_name(fact(k), k) for k in _HF_KEYS):
        return "hf"
    for name, labels in _FAMILIES:
        if fws.intersection(labels):
            return name
    return ""


def _own_name(f: Any, key: str) -> bool:
    """A fact set under TrainingArguments' own name (a config, an args dump), not mapped from another tool's
    (DeepSpeed's train_micro_batch_size_per_gpu / gradient_clipping, Megatron's micro_batch_size / clip_grad, a
    banner's "Instantaneous batch size per device"): only the former says the run is an HF one."""
    if f is None:
        return False
    original = getattr(f, "original_key", None)
    return original is None or str(original).lower().lstrip("-").split(".")[-1] == key


def knob(run: Any, what: str) -> str:
    """The phrase for ``what`` (``clip``, ``warmup``, ``batch``, ``memory``, ``bf16``, ``master``, ``scale_floor``) in
    the run's framework ("" where the framework has no such knob: the caller leaves the remedy out)."""
    table = _KNOBS[what]
    return table.get(family(run), table[""])


def sentence(text: str) -> str:
    """``text`` as a sentence: capital first letter, one full stop."""
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."

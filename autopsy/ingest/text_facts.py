"""Configuration facts printed in text: versions, GPU model, and key=value assignments.

Logs and pasted snippets carry the settings that explain a failure (``fp16=True`` on a V100,
``task_type="SEQ_2_SEQ_LM"``, ``--bf16 true``, a DeepSpeed ``"fp16": {...}`` block). Each is
mapped to a canonical key (docs/ARCHITECTURE.md) and recorded with its line. Only the head of a
log is scanned (``FACT_SCAN_BYTES``): that is where argument dumps, version banners and
``nvidia-smi`` tables are printed, and a gigabyte of progress lines holds no configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from autopsy.ingest.config_facts import precision_flag
from autopsy.ingest.env_facts import EnvScanner

#: bytes at the start of a log scanned for configuration facts
FACT_SCAN_BYTES = 4 * 1024 * 1024
#: how many lines after ``LoraConfig(`` a bare ``r=`` still belongs to it
LORA_CONTEXT_LINES = 20

KEYMAP: dict[str, str] = {
    "fp16": "fp16", "bf16": "bf16", "torch_dtype": "torch_dtype", "dtype": "torch_dtype",
    "learning_rate": "learning_rate", "lr_scheduler_type": "lr_scheduler_type", "warmup_steps": "warmup_steps",
    "warmup_ratio": "warmup_ratio", "max_grad_norm": "max_grad_norm",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "per_device_train_batch_size": "per_device_train_batch_size", "max_length": "max_length",
    "max_prompt_length": "max_prompt_length", "max_seq_length": "max_seq_length", "max_seq_len": "max_seq_length",
    "cutoff_len": "cutoff_len", "padding_free": "padding_free", "packing": "packing",
    "attn_implementation": "attn_implementation", "sequence_parallel_size": "sequence_parallel_size",
    "logging_nan_inf_filter": "logging_nan_inf_filter", "gradient_checkpointing": "gradient_checkpointing",
    "optim": "optim", "loss_type": "loss_type", "rpo_alpha": "rpo_alpha", "beta": "beta",
    "model_type": "model_type", "vocab_size": "vocab_size", "task_type": "lora.task_type",
    "lora_task_type": "lora.task_type", "target_modules": "lora.target_modules",
    "lora_target_modules": "lora.target_modules", "lora_target": "lora.target_modules",
    "modules_to_save": "lora.modules_to_save", "lora_r": "lora.r", "lora_rank": "lora.r",
    "zero_stage": "deepspeed.zero_stage", "min_loss_scale": "deepspeed.fp16.min_loss_scale",
    "initial_scale_power": "deepspeed.fp16.initial_scale_power", "overlap_comm": "deepspeed.overlap_comm",
    "model_name_or_path": "model.name_or_path",
    "max_completion_length": "max_completion_length", "max_response_length": "max_response_length",
    "max_new_tokens": "max_new_tokens", "num_generations": "num_generations",
    "rlhf_type": "trainer.type", "adv_estimator": "trainer.type",
    "precision": "precision", "mixed_precision": "precision",
    # torch.cuda.amp autocast + GradScaler, float16 by default (ESPnet2 --use_amp, many research loops' use_amp)
    "use_amp": "fp16",
    # HF TrainingArguments: evaluation with the whole model cast to float16 (no autocast, no float32 copy)
    "fp16_full_eval": "fp16_full_eval",
    # schedule lengths under other trainers' names: detectron2 SOLVER.WARMUP_ITERS/MAX_ITER, mmcv warmup_iters/
    # max_iters, Megatron --lr-warmup-iters/--train-iters (dashes read as underscores)
    "max_steps": "max_steps", "max_iter": "max_steps", "max_iters": "max_steps", "train_iters": "max_steps",
    "warmup_iters": "warmup_steps", "lr_warmup_iters": "warmup_steps", "lr_warmup_steps": "warmup_steps",
}
#: keys read from the last part of a dotted assignment (``cfg.SOLVER.MAX_ITER = 300``)
_DOTTED_OK = {"max_iter", "max_iters", "warmup_iters", "base_lr", "warmup_steps", "max_steps", "learning_rate", "fp16",
              "bf16", "precision"}
#: keys that read as CLI flags alone (``--bf16`` means True)
_BOOL_FLAGS = {"fp16", "bf16", "gradient_checkpointing", "packing", "padding_free", "use_amp", "fp16_full_eval"}
#: DeepSpeed JSON paths (inside a pasted ds_config) -> canonical key
DS_PATHS: dict[tuple[str, ...], str] = {
    ("fp16", "enabled"): "deepspeed.fp16.enabled", ("bf16", "enabled"): "deepspeed.bf16.enabled",
    ("fp16", "initial_scale_power"): "deepspeed.fp16.initial_scale_power",
    ("fp16", "min_loss_scale"): "deepspeed.fp16.min_loss_scale",
    ("zero_optimization", "stage"): "deepspeed.zero_stage",
    ("zero_optimization", "overlap_comm"): "deepspeed.overlap_comm",
}

_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|\[[^\]\n]*\]|[\w.+\-/]+)"
_ASSIGN = re.compile(r"(?:^|[\s,(])(--)?([A-Za-z_][\w.]*)\s*(=|:)\s*" + _VALUE)
_CLI_SPACE = re.compile(r"(?:^|\s)--([A-Za-z_][\w.]*)(?:\s+(?!--)" + _VALUE + r")?(?=\s|$|\\)")
_BARE_SPACE = re.compile(r"(?:^|\s)([a-z]+_[a-z_]+)\s+(\d+(?:\.\d+)?(?:e-?\d+)?|True|False|true|false)(?=\s|$|,)")
_JSON_KEY = re.compile(r'^\s*"([\w.]+)"\s*:\s*(\{|"[^"]*"|[\w.+\-]+)')
_DS_INFO = re.compile(r"(?i)DeepSpeed info: version=(\d[\w.+\-]*)")
#: the model a pasted ``AutoModel...from_pretrained("org/name", ...)`` loads (a hub id: one slash)
_FROM_PRETRAINED = re.compile(r"(?:Model\w*|Pipeline|AutoPeftModel\w*)\.from_pretrained\(\s*[\"']([\w.\-]+/[\w.\-]+)[\"']")
_HUB_ID_LINE = re.compile(r"\s*[\"']([\w.\-]+/[\w.\-]+)[\"']\s*[,)]?\s*$")
#: a saved adapter loaded with PEFT: ``PeftModel.from_pretrained(model, id, ...)`` / ``AutoPeftModelFor...``; PEFT's
#: ``is_trainable`` defaults to False, which loads the adapter frozen (for inference)
_PEFT_LOAD = re.compile(r"\b(?:PeftModel\w*|AutoPeftModel\w*)\.from_pretrained\(")
_IS_TRAINABLE = re.compile(r"\bis_trainable\s*=\s*(\w+)")
#: lines a ``PeftModel.from_pretrained(`` call may span before its closing parenthesis
PEFT_CALL_LINES = 8
#: an OpenMMLab experiment (config) name with an ``amp`` part: ``mae_vit-base-p16_8xb512-amp-coslr-1600e_in1k``
_MMCV_FP16 = re.compile(r"\s*fp16\s*=\s*dict\(")
_MM_EXP_AMP = re.compile(r"Exp name: (\S*?(?<![^\s:_-])amp(?:[-_]\S*)?)(?:\s|$)")
#: a TRL trainer or config class in pasted code (``GRPOTrainer(``, ``DPOConfig(``): the kind of training
#: the "***** Running training *****" banner of the HF Trainer (``Trainer._inner_training_loop``), of accelerate's and
#: diffusers' example scripts and of their forks (``  Gradient Accumulation steps = 8``, ``  Total optimization steps =
#: 1,000``: thousands commas since transformers 4.3x), after a logger's prefix or none, and Unsloth's banner that
#: replaces it (``O^O/ \_/ \    Batch size per device = 2 | Gradient accumulation steps = 4``, ``... | Total steps =
#: 60``): its words name the settings
_BANNER = re.compile(r"(?:^|[\s|])(Gradient [Aa]ccumulation steps|Instantaneous(?: train)? batch size per device|"
                     r"Batch size per device|Total optimization steps|Total steps|Num Epochs)\s*=\s*"
                     r"(\d{1,3}(?:,\d{3})+|\d+)[ \t]*(?=\||\r?$)")
_BANNER_KEYS = {"gradient accumulation steps": "gradient_accumulation_steps", "total optimization steps": "max_steps",
                "total steps": "max_steps", "instantaneous batch size per device": "per_device_train_batch_size",
                "instantaneous train batch size per device": "per_device_train_batch_size",
                "batch size per device": "per_device_train_batch_size", "num epochs": "num_train_epochs"}
#: a dotted argument dump, one setting a line (``"  {} {} {}".format(arg, dots, value)``): DeepSpeed's
#: ``DeepSpeedEngine configuration:`` (``  fp16_enabled ................. True``; dots to column 29, none for a longer
#: name of 29 letters or more: ``  train_micro_batch_size_per_gpu  4``) and Megatron-LM's ``arguments`` (dots to column 48,
#: ``  lr ....... 0.0003``); a shorter name always has its dots, so "lr  0.001" at a line's end is no row
_DOTTED = re.compile(r"(?:^|\s)([a-z][a-z0-9_]{1,60}) (?:\.{1,60} |(?<=[a-z0-9_]{29} ) )([\w.+\-]{1,40})[ \t]*\r?$")
#: the settings of those dumps by their own names (others through KEYMAP: gradient_accumulation_steps, fp16, ...)
_DOTTED_KEYS = {"fp16_enabled": "fp16", "bfloat16_enabled": "bf16", "zero_optimization_stage": "deepspeed.zero_stage",
                "train_micro_batch_size_per_gpu": "per_device_train_batch_size", "gradient_clipping": "max_grad_norm",
                "lr": "learning_rate", "micro_batch_size": "per_device_train_batch_size", "clip_grad": "max_grad_norm"}
#: PyTorch Lightning's precision line (lightning/pytorch/trainer/connectors/accelerator_connector.py: f"Using {'16bit' if
#: self._precision_flag == '16-mixed' else 'bfloat16'} Automatic Mixed Precision (AMP)"; 1.6-1.9 "Using 16bit native
#: Automatic Mixed Precision (AMP)", 1.2-1.5 "Using native 16bit precision.")
_LIGHTNING_AMP = re.compile(r"\bUsing (?:(16bit|bfloat16) (?:native )?Automatic Mixed Precision \(AMP\)|native (16bit) precision)")
#: accelerate's ``AcceleratorState.__repr__`` (printed by the example scripts and diffusers' trainers:
#: ``logger.info(accelerator.state)``): ``Mixed precision type: fp16`` / ``bf16`` / ``no``
_ACCEL_PRECISION = re.compile(r"\bMixed precision type: (\w+)")
#: LLaMA-Factory's start-up summary (hparams/parser.py get_train_args: "Process rank: 0, world size: 1, device: cuda:0,
#: distributed training: False, compute dtype: torch.float16"): torch.bfloat16 when bf16 or pure_bf16, torch.float16 when
#: fp16, None otherwise
_LF_COMPUTE = re.compile(r"\bcompute dtype: torch\.(float16|bfloat16)\b")
_TRAINER_CLASS = re.compile(r"\b(GRPO|PPO|RLOO|DPO|OnlineDPO|KTO|ORPO|CPO|SFT|Reward|GKD|Nash|XPO|BCO)(?:Trainer|Config)\s*\(")
#: a model named in an environment block or a launch line ("- Model: `google/gemma-4-E4B-it`", "--model Qwen/Qwen3-8B")
_MODEL = re.compile(r"(?i)(?:^|[\s(])(?:[-*]\s*)?(?:model(?:_name_or_path|_id)?\s*[:=]|--model(?:_id|_name_or_path)?[\s=])"
                    r"\s*`?((?:\.{0,2}/)?[A-Za-z0-9][\w.\-]*(?:/[\w.\-]+)*)`?(?![\w.(\-/])")
_GPU = re.compile(
    r"\b((?:NVIDIA|Tesla|GeForce|Quadro)(?:\s+(?:Tesla|GeForce|RTX|Quadro))?\s+(?:RTX\s)?[A-Z]{1,4}\s?\d{1,4}[\w-]*"
    r"|(?:A100|A800|H100|H800|H200|H20|V100|P100|A6000|L40S?|B200|GB200)(?:-[\w-]+)?)")



def parse_value(raw: str) -> tuple[bool, Any]:
    """(ok, value) of a printed/pasted value; expressions (``args.fp16``) are not values."""
    r = raw.strip().rstrip(",")
    if not r:
        return False, None
    if r[0] in "\"'":
        return True, r[1:-1] if len(r) > 1 and r[-1] == r[0] else r[1:]
    if r[0] == "[":
        try:
            return True, json.loads(r.replace("'", '"'))
        except ValueError:
            return True, [x.strip(" \"'") for x in r[1:-1].split(",") if x.strip()]
    low = r.lower()
    if low in ("true", "false"):
        return True, low == "true"
    if low in ("none", "null"):
        return True, None
    for conv in (int, float):
        try:
            return True, conv(r)
        except ValueError:
            pass
    if r.startswith("torch."):
        return True, r[6:]
    if r.startswith(("TaskType.", "OptimizerNames.", "SchedulerType.")):
        return True, r.split(".", 1)[1]
    if "." in r or "(" in r or "/" in r:
        return False, None
    return True, r


#: a bare tqdm redraw (``  3%|▎         | 62/2000 [01:02<32:10,  1.00it/s]``, the ASCII bar's ``#`` and digits
#: too; tqdm.std.format_meter: ``{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]``):
#: no description, no postfix, no letter but those of ``it/s``. No pattern of this module or of
#: env_facts can match such a line (they need a letter-led name before ``=``/``:``, ``--``, a quote, a
#: brace, ``version``, a GPU or model name), so :meth:`FactScanner.filler` stands for
#: :meth:`FactScanner.line` on it; the head of a log holds ~45k of them a 4 MB block
FILLER_LINE = re.compile(rb"[ \t]*\d{1,3}%\|(?:[ #0-9]|\xe2\x96[\x88-\x8f])*\|[ \t]*\d+/\d+[ \t]*"
                         rb"\[[0-9:<?., ]*(?:it/s|s/it)?\][ \t]*")


class FactScanner:
    """Feeds lines; calls ``emit(key, value, line, original_key)`` for each fact found."""

    def __init__(self, emit: Callable[[str, Any, int, str], None]) -> None:
        self.emit = emit
        self.lora_line: int | None = None
        self.pretrained_line: int | None = None  # a from_pretrained( whose model id is on the next line
        self.peft_call: tuple[int, int, str] | None = None  # (line, open parentheses, what) of a PeftModel load
        self.json_path: list[str] = []
        #: versions, CUDA, GPUs (pip/conda lists, env reports, nvidia-smi): autopsy/ingest/env_facts.py
        self.env = EnvScanner(emit)

    def line(self, no: int, text: str) -> None:
        if "LoraConfig(" in text:
            self.lora_line = no
        in_lora = self.lora_line is not None and no - self.lora_line <= LORA_CONTEXT_LINES
        gpu_seen = self.env.line(no, text)
        for m in _DS_INFO.finditer(text):
            self.emit("version.deepspeed", m[1], no, "deepspeed info")
        if not gpu_seen:
            for m in _GPU.finditer(text):
                self.emit("gpu.name", m[1].strip(), no, "gpu")
        for m in _MODEL.finditer(text):
            self.emit("model.name_or_path", m[1], no, "model")
        if "AMP: checks " in text:
            # ultralytics check_amp(): float16 autocast + GradScaler on when its check passes, off when it fails
            if "checks passed" in text:
                self.emit("fp16", True, no, "AMP: checks passed")
            elif "checks failed" in text:
                self.emit("fp16", False, no, "AMP: checks failed")
        if "mixed_float16" in text or "mixed_bfloat16" in text:
            # Keras' dtype policy (mixed_precision.set_global_policy('mixed_float16'), TF 2.1-2.3's
            # experimental.set_policy; TF logs "Mixed precision compatibility check (mixed_float16): OK"): float16
            # compute with a LossScaleOptimizer; 'mixed_bfloat16' computes in bfloat16
            self.emit("fp16" if "mixed_float16" in text else "bf16", True, no, "Keras mixed precision policy")
        if "compute dtype: torch." in text:
            m = _LF_COMPUTE.search(text)
            if m is not None:
                self.emit("fp16" if m[1] == "float16" else "bf16", True, no, "compute dtype")
        if "Mixed precision type: " in text:
            m = _ACCEL_PRECISION.search(text)
            if m is not None:
                self._out("precision", m[1], no, "Mixed precision type")
        if "Precision (AMP)" in text or "16bit precision" in text:
            m = _LIGHTNING_AMP.search(text)
            if m is not None:
                self.emit("bf16" if m[1] == "bfloat16" else "fp16", True, no, m[0])
        if "Fp16 Grad Scale:" in text:
            # InsightFace arcface_torch's progress line prints its torch.cuda.amp.GradScaler's scale only under fp16
            self.emit("fp16", True, no, "Fp16 Grad Scale")
        if "AmpOptimWrapper" in text and "bfloat16" not in text:
            # mmengine's AMP wrapper: autocast in float16 with a dynamic loss scale unless dtype='bfloat16'
            self.emit("fp16", True, no, "AmpOptimWrapper")
        if "fp16" in text and _MMCV_FP16.match(text):
            # mmcv 1.x configs (mmdet/mmseg/mmdet3d 2.x and their forks): a top-level ``fp16 = dict(loss_scale=...)``
            # turns on Fp16OptimizerHook, fp16 weights with a loss scale
            self.emit("fp16", True, no, "mmcv fp16 = dict(...)")
        if "Exp name:" in text:
            m = _MM_EXP_AMP.search(text)
            if m is not None:  # OpenMMLab config names mark fp16 mixed precision with an "amp" part
                self.emit("fp16", True, no, f"config name {m[1]}")
        if self.peft_call is not None or "eftModel" in text:
            self._peft_load(no, text)
        if "from_pretrained" in text:
            found = False
            for m in _FROM_PRETRAINED.finditer(text):
                self.emit("model.name_or_path", m[1], no, "from_pretrained")
                found = True
            self.pretrained_line = None if found else no
        elif self.pretrained_line is not None and no - self.pretrained_line <= 2:
            m = _HUB_ID_LINE.match(text)
            if m is not None:
                self.emit("model.name_or_path", m[1], no, "from_pretrained")
                self.pretrained_line = None
        if "Trainer" in text or "Config" in text:
            for m in _TRAINER_CLASS.finditer(text):
                self.emit("trainer.type", m[1].lower(), no, m[0].rstrip("( "))
        if " = " in text and ("steps = " in text or "per device = " in text or "Num Epochs" in text):
            found = False  # after a logger's prefix ("... - INFO - __main__ -   Num Epochs = 3"), or cells of one line
            for m in _BANNER.finditer(text):
                self._out(_BANNER_KEYS[m[1].lower()], int(m[2].replace(",", "")), no, m[1])
                found = True
            if found:
                return
        if " ." in text or "_per_gpu  " in text:
            m = _DOTTED.search(text)
            canon = (_DOTTED_KEYS.get(m[1]) or KEYMAP.get(m[1])) if m is not None else None
            if canon is not None:
                ok, value = parse_value(m[2])
                if ok and value is not None:
                    self._out(canon, value, no, m[1])
                return
        if self._json(no, text):
            return
        for m in _ASSIGN.finditer(text):
            key = m[2].lower()
            if key == "r" and in_lora:
                canon = "lora.r"
            else:
                last = key.split(".")[-1]
                canon = KEYMAP.get(key) or (KEYMAP.get(last) if m[1] or last in _DOTTED_OK else None)
                if canon is None and last == "base_lr" and "." in key:
                    canon = "learning_rate"
            if canon is None:
                continue
            ok, value = parse_value(m[4])
            if ok:
                self._out(canon, value, no, m[2])
        if "--" in text:
            for m in _CLI_SPACE.finditer(text):
                key = m[1].lower()
                canon = KEYMAP.get(key) or ("learning_rate" if key == "lr" else None)
                if canon is None:
                    continue
                if m[2] is None:
                    if key in _BOOL_FLAGS:
                        self._out(canon, True, no, m[1])
                    continue
                ok, value = parse_value(m[2])
                if ok:
                    self._out(canon, value, no, m[1])
        for m in _BARE_SPACE.finditer(text):
            canon = KEYMAP.get(m[1])
            if canon is not None:
                self._out(canon, parse_value(m[2])[1], no, m[1])

    def _peft_load(self, no: int, text: str) -> None:
        """``peft.is_trainable`` for each PeftModel load: its own ``is_trainable=`` (over the lines of the call), else
        False, PEFT's default."""
        if self.peft_call is not None and no - self.peft_call[0] > PEFT_CALL_LINES:
            self._peft_default()  # the call ended on lines not handed here (a bare closing parenthesis)
        if self.peft_call is None:
            m = _PEFT_LOAD.search(text)
            if m is None:
                return
            self.peft_call, text = (no, 0, m[0].rstrip("(")), text[m.end() - 1:]
        start, depth, what = self.peft_call
        t = _IS_TRAINABLE.search(text)
        if t is not None:
            self.emit("peft.is_trainable", t[1].lower() == "true", no, f"{what}(is_trainable=...)")
            self.peft_call = None
            return
        depth += text.count("(") - text.count(")")
        self.peft_call = (start, depth, what)
        if depth <= 0:
            self._peft_default()

    def _peft_default(self) -> None:
        if self.peft_call is not None:
            start, _, what = self.peft_call
            self.emit("peft.is_trainable", False, start, f"{what}() without is_trainable (default False)")
            self.peft_call = None

    def filler(self, count: int = 1) -> None:
        """``count`` :data:`FILLER_LINE` lines in a row: the same effect as :meth:`line` on each (only the
        line-based state of the environment scanner moves), without decoding them or running the patterns."""
        self.env.filler(count)

    def _out(self, canon: str, value: Any, no: int, original: str) -> None:
        """Emit one fact; a Lightning/Fabric ``precision`` ("16-true", "16-mixed", "bf16-mixed") or an Accelerate
        ``mixed_precision`` ("fp16") becomes the fp16/bf16 fact the detectors read."""
        if canon != "precision":
            self.emit(canon, value, no, original)
            return
        flag = precision_flag(value)
        if flag is not None:
            self.emit(flag, True, no, original)

    def finish(self) -> None:
        """End of the text: facts that need the whole of a table (the GPU count), a PeftModel load still open."""
        self.env.finish()
        self._peft_default()

    def _json(self, no: int, text: str) -> bool:
        """Track ``"key": {`` nesting of a pasted JSON config; True when the line was JSON."""
        s = text.strip()
        if s.startswith("}"):
            if self.json_path:
                self.json_path.pop()
            return True
        m = _JSON_KEY.match(text)
        if m is None:
            return False
        key, raw = m[1], m[2]
        if raw == "{":
            self.json_path.append(key)
            return True
        path = tuple(self.json_path[-1:]) + (key,)
        canon = DS_PATHS.get(path) or (KEYMAP.get(key.lower()) if not self.json_path else None)
        if canon is not None:
            ok, value = parse_value(raw)
            if ok:
                self._out(canon, value, no, ".".join(path))
        return True


#: framework banners: literal found in the log head -> framework id
BANNERS: dict[str, str] = {
    "deepspeed": "deepspeed", "DeepSpeed": "deepspeed", "llamafactory": "llamafactory",
    "LLaMA-Factory": "llamafactory", "axolotl": "axolotl", "[INFO:swift]": "ms_swift", "ms-swift": "ms_swift",
    "lightning": "lightning", "Lightning": "lightning", "mmengine": "mmengine", "mmcv": "mmengine",
    "mmdet": "mmengine", "mmocr": "mmengine", "***** Running training *****": "hf_trainer",
    "site-packages/transformers/": "hf_trainer", "site-packages/trl/": "trl", "minimind": "minimind",
    # ultralytics' start line: "Ultralytics YOLOv8.0.20 🚀 Python-3.10.9 torch-1.13.1" / "Ultralytics 8.3.2 🚀 ..."
    "Ultralytics YOLO": "ultralytics", "Ultralytics 8.": "ultralytics",
    # PaddlePaddle: PaddleOCR's logger ("[2022/07/11 09:16:39] ppocr INFO: train with paddle 2.3.1 and device ..."),
    # PaddleDetection's ("ppdet.engine INFO: Epoch: [0] ..."), PaddleNLP, the framework's own C++ frames and messages
    "ppocr INFO": "paddle", "ppocr WARNING": "paddle", "ppocr ERROR": "paddle", "ppdet.": "paddle",
    "paddlenlp": "paddle", "PaddleNLP": "paddle", "PaddlePaddle": "paddle", "paddle/fluid/": "paddle",
    "paddle\\fluid\\": "paddle", "paddle.fluid": "paddle", "site-packages/paddle/": "paddle", "train with paddle ": "paddle",
}


def banner_frameworks(text: str) -> set[str]:
    return {fw for lit, fw in BANNERS.items() if lit in text}

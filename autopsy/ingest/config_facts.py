"""Configuration facts: framework config dumps -> canonical keys (see docs/ARCHITECTURE.md).

Detectors ask one question ("was fp16 on?", "is padding_free on without FlashAttention?") no
matter whether the answer sits in a HF ``training_args.bin``, a TRL ``DPOConfig``, an ms-swift
``args.json``, a LLaMA-Factory ``training_args.yaml``, a DeepSpeed json, a model ``config.json``
or an ``adapter_config.json``. This module only maps keys and normalises a few value spellings;
it never reads files. Key names were checked against the sources of transformers/TRL
(TrainingArguments, DPOConfig...), ms-swift (``swift/llm/argument``: ``attn_impl``,
``train_type``, ``rlhf_type``, ``sequence_parallel_size``, ``lora_rank``), LLaMA-Factory
(``hparams/*``: ``cutoff_len``, ``flash_attn`` = auto|disabled|sdpa|fa2|fa3, ``pref_beta``,
``pref_loss``, ``pref_ftx``, ``lora_target``) and DeepSpeed (``runtime/config.py``: ``fp16`` /
``bf16`` | ``bfloat16`` sections, ``zero_optimization``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: a yaml/json config with more nodes than this is not a config (or is an alias bomb); the walk stops.
MAX_NODES = 20_000


@dataclass(frozen=True)
class Fact:
    key: str  # canonical key
    value: Any
    where: str  # key path inside the artifact
    original_key: str


#: spellings of attention implementations -> transformers' names (detectors compare to these)
ATTN_NORMAL: dict[str, str] = {
    "flash_attn": "flash_attention_2", "flash_attn2": "flash_attention_2", "fa2": "flash_attention_2",
    "flash_attention_2": "flash_attention_2", "flash_attention": "flash_attention_2",
    "fa3": "flash_attention_3", "flash_attn3": "flash_attention_3", "flash_attention_3": "flash_attention_3",
    "disabled": "eager", "eager": "eager", "sdpa": "sdpa", "auto": "auto",
}
#: spellings of dtypes -> torch names
DTYPE_NORMAL: dict[str, str] = {
    "half": "float16", "fp16": "float16", "float16": "float16", "torch.float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16",
    "float": "float32", "fp32": "float32", "float32": "float32", "torch.float32": "float32",
    "auto": "auto",
}

#: keys of argument dumps (HF TrainingArguments & TRL configs, ms-swift args.json, LLaMA-Factory
#: yaml) -> canonical key. One table: the frameworks do not use a key for different things.
ARG_KEYS: dict[str, str] = {
    # HF TrainingArguments
    "learning_rate": "learning_rate", "fp16": "fp16", "bf16": "bf16", "lr_scheduler_type": "lr_scheduler_type",
    "warmup_steps": "warmup_steps", "warmup_ratio": "warmup_ratio", "max_grad_norm": "max_grad_norm",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "per_device_train_batch_size": "per_device_train_batch_size",
    "logging_nan_inf_filter": "logging_nan_inf_filter", "gradient_checkpointing": "gradient_checkpointing",
    "optim": "optim", "num_train_epochs": "num_train_epochs", "max_steps": "max_steps",
    "logging_steps": "logging_steps", "save_steps": "save_steps", "weight_decay": "weight_decay",
    "seed": "seed", "half_precision_backend": "half_precision_backend", "tf32": "tf32",
    "fp16_full_eval": "fp16_full_eval",
    # TRL configs
    "max_length": "max_length", "max_prompt_length": "max_prompt_length", "max_seq_length": "max_seq_length",
    "max_completion_length": "max_completion_length", "padding_free": "padding_free", "packing": "packing",
    "loss_type": "loss_type", "beta": "beta", "rpo_alpha": "rpo_alpha",
    "completion_only_loss": "completion_only_loss", "assistant_only_loss": "assistant_only_loss",
    "num_generations": "num_generations",
    # ms-swift
    "attn_impl": "attn_implementation", "attn_implementation": "attn_implementation",
    "torch_dtype": "torch_dtype", "sequence_parallel_size": "sequence_parallel_size",
    "rlhf_type": "rlhf_type", "train_type": "train_type", "lora_rank": "lora.r", "lora_alpha": "lora.alpha",
    "target_modules": "lora.target_modules", "modules_to_save": "lora.modules_to_save", "lora_dtype": "lora.dtype",
    "model_type": "model_type", "model": "model.name_or_path", "model_name_or_path": "model.name_or_path",
    # LLaMA-Factory
    "cutoff_len": "cutoff_len", "flash_attn": "attn_implementation", "neat_packing": "neat_packing",
    "stage": "stage", "finetuning_type": "finetuning_type", "pure_bf16": "pure_bf16",
    "lora_target": "lora.target_modules", "additional_target": "lora.modules_to_save",
    "pref_beta": "beta", "pref_loss": "loss_type", "pref_ftx": "rpo_alpha",
    "disable_gradient_checkpointing": "disable_gradient_checkpointing", "template": "template",
}

MODEL_CONFIG_KEYS: dict[str, str] = {
    "torch_dtype": "torch_dtype", "dtype": "torch_dtype", "model_type": "model_type", "vocab_size": "vocab_size",
    "attn_implementation": "attn_implementation", "_attn_implementation": "attn_implementation",
    "architectures": "architectures", "transformers_version": "version.transformers",
}
#: multimodal configs keep the language model's settings in a sub-config
SUB_CONFIGS = ("text_config", "llm_config", "language_config", "thinker_config")

ADAPTER_KEYS: dict[str, str] = {
    "task_type": "lora.task_type", "target_modules": "lora.target_modules", "modules_to_save": "lora.modules_to_save",
    "r": "lora.r", "lora_alpha": "lora.alpha", "peft_version": "version.peft", "peft_type": "lora.peft_type",
    "base_model_name_or_path": "lora.base_model_name_or_path", "use_dora": "lora.use_dora",
}

#: DeepSpeed config key paths -> canonical keys
DEEPSPEED_KEYS: dict[tuple[str, ...], str] = {
    ("zero_optimization", "stage"): "deepspeed.zero_stage",
    ("zero_optimization", "overlap_comm"): "deepspeed.overlap_comm",
    ("zero_optimization", "offload_optimizer", "device"): "deepspeed.offload_optimizer",
    ("zero_optimization", "offload_param", "device"): "deepspeed.offload_param",
    ("zero_optimization", "stage3_gather_16bit_weights_on_model_save"): "deepspeed.stage3_gather_16bit_weights_on_model_save",
    ("fp16", "enabled"): "deepspeed.fp16.enabled",
    ("fp16", "loss_scale"): "deepspeed.fp16.loss_scale",
    ("fp16", "initial_scale_power"): "deepspeed.fp16.initial_scale_power",
    ("fp16", "min_loss_scale"): "deepspeed.fp16.min_loss_scale",
    ("fp16", "hysteresis"): "deepspeed.fp16.hysteresis",
    ("fp16", "loss_scale_window"): "deepspeed.fp16.loss_scale_window",
    ("bf16", "enabled"): "deepspeed.bf16.enabled",
    ("bfloat16", "enabled"): "deepspeed.bf16.enabled",
    ("train_micro_batch_size_per_gpu",): "deepspeed.train_micro_batch_size_per_gpu",
    ("gradient_accumulation_steps",): "deepspeed.gradient_accumulation_steps",
    ("gradient_clipping",): "deepspeed.gradient_clipping",
}

#: accelerate config (``accelerate config`` yaml)
ACCELERATE_KEYS: dict[tuple[str, ...], str] = {
    ("mixed_precision",): "mixed_precision",
    ("deepspeed_config", "zero_stage"): "deepspeed.zero_stage",
    ("deepspeed_config", "offload_optimizer_device"): "deepspeed.offload_optimizer",
    ("deepspeed_config", "offload_param_device"): "deepspeed.offload_param",
}

SWIFT_MARKERS = {"train_type", "rlhf_type", "attn_impl", "tuner_backend", "template_backend", "swift_version"}
LLAMAFACTORY_MARKERS = {"cutoff_len", "finetuning_type", "stage", "lora_target", "pref_beta", "flash_attn"}
TRL_MARKERS = {"max_prompt_length", "rpo_alpha", "padding_free", "num_generations", "completion_only_loss",
               "assistant_only_loss", "model_init_kwargs", "dataset_text_field"}
HF_ARGS_MARKERS = {"per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate",
                   "lr_scheduler_type", "logging_steps", "output_dir"}
ACCELERATE_MARKERS = {"compute_environment", "distributed_type", "mixed_precision"}


def _get(d: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    cur: Any = d
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _clean(v: Any) -> Any:
    """Keep scalars and short lists of scalars; anything else becomes a short string."""
    if is_scalar(v):
        return v
    if isinstance(v, (list, tuple, set, frozenset)):
        items = list(v)[:200]
        if all(is_scalar(x) for x in items):
            return sorted(items, key=str) if isinstance(v, (set, frozenset)) else items
    return str(v)[:200]


def normal_attn(v: Any) -> Any:
    return ATTN_NORMAL.get(v.strip().lower(), v) if isinstance(v, str) else v


def normal_dtype(v: Any) -> Any:
    return DTYPE_NORMAL.get(v.strip().lower(), v) if isinstance(v, str) else v


def _normal(key: str, v: Any) -> Any:
    if key == "attn_implementation":
        return normal_attn(v)
    if key == "torch_dtype":
        return normal_dtype(v)
    return _clean(v)


def is_deepspeed_config(d: Mapping[str, Any]) -> bool:
    if "zero_optimization" in d or "train_micro_batch_size_per_gpu" in d or "zero_allow_untested_optimizer" in d:
        return True
    return any(isinstance(d.get(k), Mapping) and "enabled" in d[k] for k in ("fp16", "bf16", "bfloat16"))


def flavor(d: Mapping[str, Any]) -> str | None:
    """What kind of config this mapping is: deepspeed, ms_swift, llamafactory, accelerate, hf_args."""
    keys = set(d)
    if is_deepspeed_config(d):
        return "deepspeed"
    if keys & SWIFT_MARKERS:
        return "ms_swift"
    if len(keys & LLAMAFACTORY_MARKERS) >= 2:
        return "llamafactory"
    if len(keys & ACCELERATE_MARKERS) >= 2:
        return "accelerate"
    if len(keys & HF_ARGS_MARKERS) >= 2 or keys & TRL_MARKERS:
        return "hf_args"
    return None


def deepspeed_facts(d: Mapping[str, Any], prefix: str = "") -> list[Fact]:
    out: list[Fact] = []
    for path, key in DEEPSPEED_KEYS.items():
        found, v = _get(d, path)
        if found and is_scalar(v):
            out.append(Fact(key, v, prefix + ".".join(path), path[-1]))
    return out


def precision_flag(value: Any) -> str | None:
    """``fp16``/``bf16`` from a precision setting: Lightning/Fabric ``16``, ``16-mixed``, ``16-true``, ``bf16-mixed``;
    Accelerate ``fp16``/``bf16``; None for 32/64/fp8/"no"."""
    p = str(value).lower().strip("'\"")
    if p.startswith(("16", "fp16")):
        return "fp16"
    return "bf16" if p.startswith("bf16") else None


def accelerate_facts(d: Mapping[str, Any]) -> list[Fact]:
    out: list[Fact] = []
    for path, key in ACCELERATE_KEYS.items():
        found, v = _get(d, path)
        if found and is_scalar(v):
            out.append(Fact(key, v, ".".join(path), path[-1]))
    mp = d.get("mixed_precision")
    flag = precision_flag(mp) if isinstance(mp, str) else None
    if flag is not None:
        out.append(Fact(flag, True, "mixed_precision", "mixed_precision"))
    return out


def args_facts(d: Mapping[str, Any], prefix: str = "") -> list[Fact]:
    """Facts of a training-arguments dump (HF/TRL/ms-swift/LLaMA-Factory, any mix)."""
    out: list[Fact] = []
    for orig, key in ARG_KEYS.items():
        if orig not in d:
            continue
        v = d[orig]
        if v is None:
            continue
        out.append(Fact(key, _normal(key, v), prefix + orig, orig))
    # transformers 5.x renamed gradient_checkpointing to activation_checkpointing (both are dumped)
    if d.get("activation_checkpointing") is True and d.get("gradient_checkpointing") is not True:
        out = [f for f in out if f.key != "gradient_checkpointing"]
        out.append(Fact("gradient_checkpointing", True, prefix + "activation_checkpointing", "activation_checkpointing"))
    ds = d.get("deepspeed")
    if isinstance(ds, Mapping):
        out.append(Fact("deepspeed", True, prefix + "deepspeed", "deepspeed"))
        out.extend(deepspeed_facts(ds, prefix + "deepspeed."))
    elif isinstance(ds, str) and ds:
        out.append(Fact("deepspeed", ds, prefix + "deepspeed", "deepspeed"))
    mik = d.get("model_init_kwargs")
    if isinstance(mik, Mapping):
        for orig in ("attn_implementation", "torch_dtype", "dtype"):
            if mik.get(orig) is not None:
                key = "attn_implementation" if orig == "attn_implementation" else "torch_dtype"
                out.append(Fact(key, _normal(key, mik[orig]), f"{prefix}model_init_kwargs.{orig}", orig))
    return out


def model_config_facts(d: Mapping[str, Any]) -> list[Fact]:
    out: list[Fact] = []
    seen: set[str] = set()
    for orig, key in MODEL_CONFIG_KEYS.items():
        if d.get(orig) is not None and key not in seen:
            seen.add(key)
            out.append(Fact(key, _normal(key, d[orig]), orig, orig))
    for sub in SUB_CONFIGS:
        sd = d.get(sub)
        if not isinstance(sd, Mapping):
            continue
        for orig, key in MODEL_CONFIG_KEYS.items():
            if sd.get(orig) is not None and key not in seen and key != "version.transformers":
                seen.add(key)
                out.append(Fact(key, _normal(key, sd[orig]), f"{sub}.{orig}", orig))
    return out


def adapter_facts(d: Mapping[str, Any]) -> list[Fact]:
    out = []
    for orig, key in ADAPTER_KEYS.items():
        v = d.get(orig)
        if v is not None:
            out.append(Fact(key, _clean(v), orig, orig))
    return out


def count_nodes(obj: Any, limit: int = MAX_NODES) -> int:
    """Nodes in a parsed document, stopping at ``limit`` (YAML aliases can make a tiny file
    expand into an exponential tree when walked)."""
    n = 0
    stack = [obj]
    while stack and n < limit:
        cur = stack.pop()
        n += 1
        if isinstance(cur, Mapping):
            stack.extend(cur.values())
        elif isinstance(cur, (list, tuple)):
            stack.extend(cur)
    return n

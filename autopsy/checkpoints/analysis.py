"""Cross-checkpoint analysis: the results detectors read from ``Run.checkpoint_analysis``.

The schema is documented in :mod:`autopsy.checkpoints`; keys are stable.
"""

from __future__ import annotations

import functools
import re
import weakref
from typing import Any

from autopsy.checkpoints.layout import role_of
from autopsy.checkpoints.scan_output import _PAD
from autopsy.model import Checkpoint, TensorStat, save_order_key

#: largest finite fp16 value
FP16_MAX = 65504.0
#: a fp16 weight this large is one doubling (one update or loss-scale step) away from Inf
FP16_NEAR_LIMIT = FP16_MAX / 2
MAX_LISTED = 200
#: tensors named in a first-bad entry (the count is exact)
MAX_FIRST_BAD = 50
_LORA_B = re.compile(r"(lora_B|\.lora\.B\.|lora_b\b)")
_LAYER = re.compile(r"^(.*?\b(?:layers|layer|h|blocks|block|encoder\.layer|decoder\.layers)\.\d+)\.")
_EMBED = re.compile(r"embed|wte|wpe|tok_embeddings|word_embeddings", re.IGNORECASE)
_HEAD = re.compile(r"lm_head|score\.|classifier|(^|\.)head\.|(^|\.)output\.weight$", re.IGNORECASE)
_SPLIT = re.compile(r"(\d+)").split
_NON_WEIGHT_PREFIX = ("optimizer", "optimizer_states", "lr_schedulers", "scaler", "callbacks", "loops",
                      "scheduler", "lr_scheduler")


def model_order_key(name: str) -> str:
    """Forward-pass order, approximated from the name: embeddings, layers by number, final norm, head.

    One flat string (the rank as its first character, then :func:`scan_output.natural_key`): the name
    is split once and a sort compares strings, not tuples."""
    parts = _SPLIT(name)  # text and digit runs alternate
    rank = _rank("0".join(parts[0::2]))  # the name with every number made 0: the rank ignores numbers
    parts[1::2] = map(_PAD, parts[1::2])
    return _RANK_CHAR[rank] + "".join(parts)


_RANK_CHAR = "0123"


@functools.lru_cache(maxsize=4096)
def _rank(name: str) -> int:
    """0 embeddings, 1 layers, 2 the rest, 3 head. Cached on the numberless name: a 100k-tensor MoE
    checkpoint has a few dozen distinct ones, so the three regexes run a few dozen times, not 100k."""
    in_layer = _LAYER.match(name) is not None
    if _EMBED.search(name) and not in_layer:
        return 0
    if in_layer:
        return 1
    if _HEAD.search(name):
        return 3
    return 2


def layer_of(name: str) -> str:
    m = _LAYER.match(name)
    return m.group(1) if m else name.rsplit(".", 1)[0] if "." in name else name


#: id(checkpoint) -> (weak reference to it, what its files held, its weights in model order); see weight_tensors
_ORDERED: dict[int, tuple[Any, tuple, list[tuple[str, TensorStat]]]] = {}


def weight_tensors(ck: Checkpoint, ordered: bool = True) -> list[tuple[str, TensorStat]]:
    """(file, tensor) of model weights in model order: pickle order for torch files, else by name.

    ``ordered=False``: the same pairs in the files' order, without the sort. Why: sorting a
    100k-tensor MoE checkpoint by name costs ~0.4 s, while most callers keep a handful of tensors
    (the non-finite ones, LoRA B, fp16 risks): they filter this list and put what they keep in model
    order with :func:`model_order` (the same order as filtering the sorted list: the sort is stable).
    The full order is computed once per checkpoint and remembered while the checkpoint object lives
    and its files' tensor lists are the same objects of the same lengths."""
    if ordered:
        sig = tuple((f.path, id(f.tensors), len(f.tensors)) for f in ck.files)
        hit = _ORDERED.get(id(ck))
        if hit is not None and hit[0]() is ck and hit[1] == sig:
            return list(hit[2])
    out, needs_sort = _file_order(ck)
    if not ordered or not needs_sort:
        return out
    out = model_order(ck, out)
    key = id(ck)
    _ORDERED[key] = (weakref.ref(ck, lambda _ref, k=key: _ORDERED.pop(k, None)), sig, out)
    return list(out)


def _file_order(ck: Checkpoint) -> tuple[list[tuple[str, TensorStat]], bool]:
    """The weights in the files' order, and whether model order needs a sort (:func:`_needs_sort`)."""
    out: list[tuple[str, TensorStat]] = []
    for f in ck.files:
        role = role_of(f.path.rsplit("/", 1)[-1])
        if role in ("weights", "deepspeed_model"):
            out.extend((f.path, t) for t in f.tensors)
        elif role == "resume":
            out.extend((f.path, t) for t in f.tensors if not t.name.startswith(_NON_WEIGHT_PREFIX))
    return out, _needs_sort(ck)


def model_order(ck: Checkpoint, pairs: list[tuple[str, TensorStat]]) -> list[tuple[str, TensorStat]]:
    """``pairs`` taken from ``weight_tensors(ck, ordered=False)`` (in that order), in model order."""
    if len(pairs) < 2 or not _needs_sort(ck):
        return list(pairs)
    keys = [model_order_key(t.name) for _, t in pairs]
    order = sorted(range(len(pairs)), key=keys.__getitem__)
    return [pairs[i] for i in order]


def _needs_sort(ck: Checkpoint) -> bool:
    """Whether the files' order is not model order: safetensors files keep none (tensors are stored by
    dtype and name), nor does a checkpoint whose weights come from more than one file."""
    ordered = True
    sources = 0
    for f in ck.files:
        role = role_of(f.path.rsplit("/", 1)[-1])
        if role in ("weights", "deepspeed_model"):
            ordered = ordered and f.format != "safetensors"
            sources += bool(f.tensors)
        elif role == "resume":
            sources += any(not t.name.startswith(_NON_WEIGHT_PREFIX) for t in f.tensors)
    return not ordered or sources > 1


#: the fp32 weights of a ZeRO-3 checkpoint: each data-parallel rank's optimizer state file holds its partitions
#: under these names (``optimizer_state_dict.fp32_flat_groups.<i>``; zero_to_fp32.py reads ``fp32_flat_groups``)
ZERO3_FP32_PARTITIONS = "optimizer_state_dict.fp32_flat_groups."


def zero3_partitions_saved(ck: Checkpoint) -> bool:
    """Whether a ZeRO-3 checkpoint whose model states hold [0]-shaped placeholders is whole anyway: DeepSpeed's own
    ``save_checkpoint`` (the HF Trainer's, without ``stage3_gather_16bit_weights_on_model_save``) writes the module
    with partitioned parameters, which are empty placeholders by design, and keeps the weights as fp32 partitions in
    one optimizer state file per data-parallel rank (``zero_to_fp32.py`` assembles them). Whole when every rank's
    file is there (``dp_world_size`` of the model states) and each holds non-empty partitions."""
    optim = [f for f in ck.files if role_of(f.path.rsplit("/", 1)[-1]) == "deepspeed_optim"]
    world = (ck.deepspeed or {}).get("dp_world_size") or 1
    return len(optim) >= world and all(
        any(t.name.startswith(ZERO3_FP32_PARTITIONS) and t.numel > 0 for t in f.tensors) for f in optim)


def optimizer_tensors(ck: Checkpoint) -> list[tuple[str, TensorStat]]:
    out = []
    for f in ck.files:
        role = role_of(f.path.rsplit("/", 1)[-1])
        if role in ("optimizer", "deepspeed_optim"):
            out.extend((f.path, t) for t in f.tensors)
        elif role == "resume":
            out.extend((f.path, t) for t in f.tensors if t.name.startswith(("optimizer", "optimizer_states")))
    return out


def save_order(c: Checkpoint) -> tuple:
    return save_order_key(c.step, c.path)


def _order(cks: list[Checkpoint]) -> list[Checkpoint]:
    return sorted(cks, key=save_order)


def _tensor_entry(path: str, t: TensorStat) -> dict[str, Any]:
    return {"name": t.name, "file": path, "dtype": t.dtype, "numel": t.numel, "nan": t.nan,
            "posinf": t.posinf, "neginf": t.neginf}


def analyze(checkpoints: list[Checkpoint]) -> dict[str, Any]:
    cks = _order(checkpoints)
    out: dict[str, Any] = {"checkpoints": [], "first_bad": None, "last_clean": None}
    # file order: every use below keeps a few tensors (or counts) and orders only those
    weights = {c.path: weight_tensors(c, ordered=False) for c in cks}
    for c in cks:
        w = weights[c.path]
        bad_w = model_order(c, [(p, t) for p, t in w if t.nonfinite])
        bad_o = [(p, t) for p, t in optimizer_tensors(c) if t.nonfinite]
        out["checkpoints"].append({"checkpoint": c.path, "step": c.step, "kind": c.kind, "tensors": len(w),
                                   "nonfinite_tensors": len(bad_w), "nonfinite_optimizer_tensors": len(bad_o)})
        if (bad_w or bad_o) and out["first_bad"] is None:
            layers: list[str] = []
            for _, t in bad_w:
                lay = layer_of(t.name)
                if lay not in layers:
                    layers.append(lay)
            out["first_bad"] = {
                "checkpoint": c.path, "step": c.step, "n_tensors": len(bad_w), "n_weight_tensors": len(w),
                "tensors": [_tensor_entry(p, t) for p, t in bad_w[:MAX_FIRST_BAD]],
                "layers": layers[:MAX_FIRST_BAD],
                "n_optimizer_tensors": len(bad_o),
                "optimizer_tensors": [_tensor_entry(p, t) for p, t in bad_o[:MAX_FIRST_BAD]],
            }
        if out["first_bad"] is None and w:
            out["last_clean"] = {"checkpoint": c.path, "step": c.step}
    out["unchanged"] = _unchanged(cks, weights)
    out["lora_b_all_zero"] = _lora_b(cks, weights)
    out["optimizer"] = _latest_optimizer(cks)
    out["skipped_steps"] = _skipped(cks)
    out["scaler"] = next(({"checkpoint": c.path, "step": c.step, **c.scaler} for c in reversed(cks) if c.scaler), None)
    out["zero3_empty"], out["zero3_partitioned"] = [], []
    for c in cks:
        if c.deepspeed and c.deepspeed.get("n_zero3_empty"):
            row = {"checkpoint": c.path, "step": c.step, "n": c.deepspeed["n_zero3_empty"]}
            if zero3_partitions_saved(c):
                out["zero3_partitioned"].append(row)
            else:
                out["zero3_empty"].append({**row, "tensors": c.deepspeed["zero3_empty"][:20]})
    near, cast = [], []
    for c in cks:
        risky = [(p, t) for p, t in weights[c.path] if (t.max_abs or 0) > FP16_MAX or (t.dtype == "F16" and (
                 (t.max_abs or 0) >= FP16_NEAR_LIMIT or t.posinf or t.neginf))]
        for _p, t in model_order(c, risky):
            if t.dtype == "F16" and ((t.max_abs or 0) >= FP16_NEAR_LIMIT or t.posinf or t.neginf):
                near.append({"checkpoint": c.path, "step": c.step, "tensor": t.name, "max_abs": t.max_abs,
                             "posinf": t.posinf, "neginf": t.neginf})
            elif t.dtype in ("F32", "BF16", "F64") and (t.max_abs or 0) > FP16_MAX:
                cast.append({"checkpoint": c.path, "step": c.step, "tensor": t.name, "dtype": t.dtype, "max_abs": t.max_abs})
    out["fp16_near_limit"] = near[:MAX_LISTED]
    out["fp16_overflow_on_cast"] = cast[:MAX_LISTED]
    return out


def _trainable(c: Checkpoint, names: list[str]) -> tuple[set[str] | None, set[str]]:
    """(trainable names or None if unknown, frozen-by-design names) for one checkpoint."""
    frozen: set[str] = set()
    if c.deepspeed and c.deepspeed.get("frozen_params"):
        frozen |= set(c.deepspeed["frozen_params"])
    if c.adapter is not None:
        train = {n for n in names if "lora_" in n or ".lora." in n or "modules_to_save" in n}
        return train, set(names) - train
    opt = c.optimizer
    if opt:
        mapped = opt.get("param_names")
        if mapped:
            train = set(mapped)
            return train, (set(names) - train) | frozen
        floats = [n for n in names]
        if opt.get("n_params") == len(floats):
            return set(floats), frozen
    if frozen:
        return set(names) - frozen, frozen
    return None, frozen


def _unchanged(cks: list[Checkpoint], weights: dict[str, list[tuple[str, TensorStat]]]) -> dict[str, Any]:
    pairs = []
    never_changed: dict[str, bool] = {}
    last_b: Checkpoint | None = None
    seq = [c for c in cks if weights[c.path]]
    # only saves of one series (same parent directory) are consecutive: never compare two runs
    for a, b in zip(seq, seq[1:]):
        if _parent(a.path) != _parent(b.path):
            continue
        da = {t.name: t for _, t in weights[a.path]}
        identical = compared = 0
        for _, t in weights[b.path]:
            ta = da.get(t.name)
            if ta is None or not t.digest or ta.numel == 0 or ta.nonfinite or t.nonfinite:
                continue
            compared += 1
            same = ta.digest == t.digest and ta.dtype == t.dtype and ta.shape == t.shape
            identical += same
            never_changed[t.name] = never_changed.get(t.name, True) and same
        pairs.append({"from": a.path, "to": b.path, "from_step": a.step, "to_step": b.step,
                      "identical": identical, "compared": compared})
        last_b = b
    stuck = sorted((n for n, same in never_changed.items() if same), key=model_order_key)
    frozen, trainable, unknown = [], [], []
    if last_b is not None:
        train, frz = _trainable(last_b, [t.name for _, t in weights[last_b.path]])
        for n in stuck:
            if n in frz:
                frozen.append(n)
            elif train is None:
                unknown.append(n)
            elif n in train:
                trainable.append(n)
            else:
                frozen.append(n)
    return {"pairs": pairs, "frozen_by_design": frozen[:MAX_LISTED], "trainable_unchanged": trainable[:MAX_LISTED],
            "unknown": unknown[:MAX_LISTED], "n_frozen_by_design": len(frozen), "n_trainable_unchanged": len(trainable),
            "n_unknown": len(unknown)}


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _lora_b(cks: list[Checkpoint], weights: dict[str, list[tuple[str, TensorStat]]]) -> dict[str, Any] | None:
    for c in reversed(cks):
        lb = [t for _, t in model_order(c, [(p, t) for p, t in weights[c.path] if _LORA_B.search(t.name)])]
        if lb:
            zero = [t.name for t in lb if t.all_zero]
            return {"checkpoint": c.path, "step": c.step, "n_lora_b": len(lb), "n_all_zero": len(zero),
                    "tensors": zero[:MAX_LISTED]}
    return None


def _latest_optimizer(cks: list[Checkpoint]) -> dict[str, Any] | None:
    for c in reversed(cks):
        if c.optimizer:
            opt = {k: v for k, v in c.optimizer.items() if k != "param_names"}
            gs = c.extra.get("trainer_global_step")
            smax = opt.get("step_max")
            skipped = int(gs - smax) if isinstance(gs, int) and isinstance(smax, (int, float)) and gs > smax else 0
            return {"checkpoint": c.path, "step": c.step, "trainer_global_step": gs, "skipped_steps": skipped, **opt}
    return None


def _skipped(cks: list[Checkpoint]) -> list[dict[str, Any]]:
    out = []
    for c in cks:
        if c.deepspeed and isinstance(c.deepspeed.get("skipped_steps"), int):
            out.append({"checkpoint": c.path, "step": c.step, "source": "deepspeed",
                        "skipped": c.deepspeed["skipped_steps"], "global_steps": c.deepspeed.get("global_steps")})
        opt = c.optimizer or {}
        gs = c.extra.get("trainer_global_step")
        smax = opt.get("step_max")
        if isinstance(gs, int) and isinstance(smax, (int, float)) and gs > smax:
            out.append({"checkpoint": c.path, "step": c.step, "source": "optimizer", "skipped": int(gs - smax),
                        "global_steps": gs, "optimizer_step": smax})
    return out

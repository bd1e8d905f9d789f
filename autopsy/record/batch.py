"""What the recorder reads from a batch (token counts, shape, sample ids, lengths) and how it saves
the batch of a non-finite step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopsy.record.format import FORMAT, RECORD_DIR

#: label value ignored by the loss (HF, PyTorch cross_entropy default)
IGNORE_INDEX = -100
_ID_KEYS = ("id", "ids", "idx", "index", "sample_id", "sample_ids", "sample_idx")
_ID_KEY_SET = frozenset(_ID_KEYS)


def save_batch(directory: Path, step: int, batch: Any, calls: list[Any], rank: int = 0) -> dict[str, Any]:
    """The offending batch as safetensors (token ids, masks, labels; every micro-batch). Each rank saves its own
    batch: rank N > 0 to ``batch-stepS.rankN.safetensors`` (ranks that stop together never write one file)."""
    tensors: dict[str, Any] = {}
    sources = [batch] if len(calls) <= 1 else [(c.kwargs or list(c.args)) for c in calls]
    for k, src in enumerate(sources):
        prefix = f"micro{k}." if len(sources) > 1 else ""
        for name, t in named_tensors(src):
            tensors[(prefix + name)[:200]] = t.detach().to("cpu").contiguous().clone()
    out: dict[str, Any] = {}
    lengths = row_lengths(batch)
    if lengths is not None:
        out["lengths"] = lengths
    sup = sup_per_row(batch)
    if sup is not None:
        out["sup_per_row"] = sup
    if not tensors:
        return out
    name = f"batch-step{step:07d}" + (f".rank{rank}" if rank else "") + ".safetensors"
    try:
        from safetensors.torch import save_file

        save_file(tensors, str(directory / name), metadata={"step": str(step), "format": FORMAT})
        out["batch"] = f"{RECORD_DIR}/{name}"
    except Exception as exc:  # noqa: BLE001 - a batch that cannot be saved must not stop training
        out["batch_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def named_tensors(batch: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    import torch

    if isinstance(batch, torch.Tensor):
        return [(prefix or "input", batch)]
    if depth > 3:
        return []
    out: list[tuple[str, Any]] = []
    if isinstance(batch, dict):
        for k, v in batch.items():
            out += named_tensors(v, f"{prefix}{k}" if not prefix else f"{prefix}.{k}", depth + 1)
    elif isinstance(batch, (list, tuple)):
        for i, v in enumerate(batch):
            out += named_tensors(v, f"{prefix}{i}" if not prefix else f"{prefix}.{i}", depth + 1)
    return out


def get_tensor(batch: Any, key: str) -> Any:
    import torch

    if isinstance(batch, dict):
        v = batch.get(key)
        return v if isinstance(v, torch.Tensor) else None
    return None


def ids_tensor(batch: Any) -> Any:
    t = get_tensor(batch, "input_ids")
    if t is not None:
        return t
    named = named_tensors(batch)
    ints = [t for _, t in named if not t.is_floating_point() and t.dim() == 2]
    if ints:
        return ints[0]
    return named[0][1] if named else None


def batch_shape(batch: Any) -> list[int] | None:
    t = ids_tensor(batch)
    return list(t.shape) if t is not None else None


def batch_facts(batch: Any) -> tuple[Any, Any, list[int] | None]:
    """:func:`token_parts` and :func:`batch_shape` with one look for the token ids (once per step)."""
    ids = ids_tensor(batch)
    if ids is None:
        return None, None, None
    tokens, sup = _counts(batch, ids)
    return tokens, sup, list(ids.shape)


def token_parts(batch: Any) -> tuple[Any, Any]:
    """(tokens, supervised tokens): Python ints where the batch gives them without compute, else 0-d
    tensors to read with the step's one host sync; (None, None) without token ids; sup None without
    integer labels."""
    ids = ids_tensor(batch)
    if ids is None:
        return None, None
    return _counts(batch, ids)


def _counts(batch: Any, ids: Any) -> tuple[Any, Any]:
    mask = get_tensor(batch, "attention_mask")
    tokens = mask.sum() if mask is not None else ids.numel()
    labels = get_tensor(batch, "labels")
    sup = (labels != IGNORE_INDEX).sum() if labels is not None and not labels.is_floating_point() else None
    return tokens, sup


def row_lengths(batch: Any) -> list[int] | None:
    mask = get_tensor(batch, "attention_mask")
    if mask is not None and mask.dim() >= 2:
        return [int(x) for x in mask.reshape(mask.shape[0], -1).sum(-1).tolist()]
    ids = ids_tensor(batch)
    if ids is not None and ids.dim() >= 2:
        return [int(ids.shape[1])] * int(ids.shape[0])
    return None


def sup_per_row(batch: Any) -> list[int] | None:
    labels = get_tensor(batch, "labels")
    if labels is None or labels.is_floating_point() or labels.dim() < 2:
        return None
    return [int(x) for x in (labels != IGNORE_INDEX).reshape(labels.shape[0], -1).sum(-1).tolist()]


def sample_ids(batch: Any) -> list[Any] | None:
    import torch

    if not isinstance(batch, dict) or batch.keys().isdisjoint(_ID_KEY_SET):
        return None
    for k in _ID_KEYS:
        v = batch.get(k)
        if isinstance(v, torch.Tensor) and not v.is_floating_point() and v.dim() <= 1:
            return v.reshape(-1)[:256].tolist()
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, str)) for x in v[:256]):
            return list(v[:256])
    return None

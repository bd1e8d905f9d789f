"""DeepSpeed ZeRO: where a parameter's gradient is between ``engine.backward()`` and ``engine.step()``.

ZeRO keeps gradients out of ``param.grad`` (it is None on every parameter):

* stages 1 and 2 reduce them into flat partition buffers; each rank owns a fragment of each
  parameter's gradient, reached through ``param._hp_mapping.get_lp_grad_fragment(index)`` (what
  ``deepspeed.utils.safe_get_full_grad`` reads before it all-reduces the fragments); a parameter
  with no fragment on this rank has ``_hp_mapping = None``;
* stage 3 partitions the parameters too (``param.ds_id``; the local slice ``param.ds_tensor``) and
  hands the local gradient partition to ``deepspeed.utils.safe_get_local_grad``.

The recorder reads each rank's own fragments: no collective per parameter (``safe_get_full_grad``
all-reduces every one), norms and finiteness of what this rank holds, one record file per rank. A
non-finite element lands in the fragment of the rank that owns it, so the ranks can disagree: the
skip/stop decision is then agreed with one all-reduce of a flag (``agree``), because a rank that
skips a step the others take would leave the collectives out of step.

Checked against DeepSpeed 0.19.8 (``utils/tensor_fragment.py``, ``runtime/zero/stage_1_and_2.py``,
``runtime/zero/stage3.py``) and exercised on CPU (gloo) with stages 1-3 in tests/test_record_deepspeed.py.
No DeepSpeed import happens unless a parameter carries these attributes.
"""

from __future__ import annotations

from typing import Any

ZERO3 = "zero3"
ZERO12 = "zero"  # stages 1 and 2 (and DeepSpeed's bf16 optimizer, which maps fragments the same way)


def zero_kind(params: list[Any]) -> str | None:
    """``ZERO3``, ``ZERO12`` or None: how DeepSpeed manages these parameters' gradients, if it does."""
    for p in params:
        if getattr(p, "ds_id", None) is not None and hasattr(p, "_z3_optimizer"):
            return ZERO3
        if getattr(p, "_hp_mapping", None) is not None:
            return ZERO12
    return None


def local_grads(params: list[Any], grads: list[Any], kind: str) -> list[Any]:
    """``grads`` with each missing gradient replaced by this rank's fragment of it (None where the rank
    holds none, or where DeepSpeed has none: after ``engine.step()``, or before the accumulation boundary)."""
    out = list(grads)
    if kind == ZERO3:
        from deepspeed.utils import safe_get_local_grad

        for i, (p, g) in enumerate(zip(params, grads)):
            if g is None and getattr(p, "ds_id", None) is not None:
                try:
                    out[i] = safe_get_local_grad(p)
                except Exception:  # noqa: BLE001 - no gradient partition yet: treated as absent
                    out[i] = None
        return out
    for i, (p, g) in enumerate(zip(params, grads)):
        m = getattr(p, "_hp_mapping", None)
        if g is None and m is not None:
            try:
                out[i] = m.get_lp_grad_fragment(p._index_in_param_group)
            except Exception:  # noqa: BLE001 - "Gradients are only available immediately after backward"
                out[i] = None
    return out


def zero_local_grads(params: list[Any], kind: str) -> None:
    """Zero this rank's gradient fragments in place (where ``safe_set_full_grad`` / ``safe_set_local_grad``
    write), so that an ``engine.step()`` after a skipped step applies no gradient."""
    import torch

    grads = local_grads(params, [None] * len(params), kind)
    if kind == ZERO3:
        from deepspeed.utils import safe_set_local_grad

        for p, g in zip(params, grads):
            if g is not None:
                safe_set_local_grad(p, torch.zeros_like(g))
        return
    for g in grads:
        if g is not None:
            g.data.zero_()


def local_weight(p: Any) -> Any:
    """The part of a weight this rank holds: ZeRO-3's local slice (the parameter itself is an empty
    placeholder outside the forward pass), else the parameter."""
    if getattr(p, "ds_id", None) is not None and getattr(p, "ds_tensor", None) is not None:
        return p.ds_tensor
    return p


def numel(p: Any) -> int:
    """Elements of the whole parameter (ZeRO-3's placeholder has none; ``ds_numel`` is the real count)."""
    n = getattr(p, "ds_numel", None)
    return int(n) if n is not None else int(p.numel())


def sharded(model: Any, params: list[Any]) -> bool:
    """Whether each rank holds only part of the gradients, so that the ranks may see different ones: DeepSpeed ZeRO
    (``zero_kind``), FSDP2 (``fully_shard``: the parameters are DTensors) or FSDP1 (a FullyShardedDataParallel
    wrapper). There the ranks agree on a non-finite step (``agree``), and all of them replay its forward pass
    (which gathers the shards: a collective). Under DDP every rank holds the same all-reduced gradients."""
    if zero_kind(params):
        return True
    if any(type(p).__name__ == "DTensor" or type(getattr(p, "data", None)).__name__ == "DTensor" for p in params[:64]):
        return True
    return any(type(m).__name__ == "FullyShardedDataParallel" for m in model.modules())


def agree(bad: bool, device: Any) -> bool:
    """Whether any rank saw a non-finite step (one all-reduce of a flag when several ranks run), so all
    ranks skip or stop together. On one rank, or without torch.distributed, ``bad`` itself."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return bad
    flag = torch.tensor([1.0 if bad else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())

"""The step's outermost module calls, kept by reference with their RNG state, and their replay
with a forward hook on every module: the first module whose output is non-finite is the origin."""

from __future__ import annotations

from typing import Any


def tensors(obj: Any, depth: int = 0) -> list[Any]:
    """Tensors inside a module output / input (tuples, lists, dicts, ModelOutput), shallowly."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth > 3:
        return []
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v, depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors(v, depth + 1)]
    return []


def has_nonfinite(obj: Any) -> bool:
    import torch

    return any(t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()) for t in tensors(obj))


def rng_state() -> tuple[Any, Any]:
    import torch

    # is_initialized() alone: CUDA that is not available is never initialized, and it skips a driver query
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def set_rng(state: tuple[Any, Any]) -> None:
    import torch

    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


class Call:
    __slots__ = ("module", "args", "kwargs", "rng")

    def __init__(self, module: Any, args: Any, kwargs: Any, rng: Any) -> None:
        self.module, self.args, self.kwargs, self.rng = module, args, kwargs, rng


def replay_forward(model: Any, calls: list[Call]) -> dict[str, Any] | None:
    """Re-run the step's outermost module calls on their saved inputs under their saved RNG state,
    with a forward hook on every module: the first whose output is non-finite is the origin
    (hooks fire when a module returns, so children before parents, in execution order)."""
    import torch

    names = {m: n for n, m in model.named_modules()}
    found: dict[str, Any] = {}

    def hook(module: Any, args: Any, kwargs: Any, out: Any) -> None:
        if found or not has_nonfinite(out):
            return
        name = names.get(module) or type(module).__name__
        inputs_ok = not has_nonfinite((args, kwargs))
        found.update(module=name, type=type(module).__name__, input_finite=inputs_ok)
        if not inputs_ok and name and "." in name:
            # this module got non-finite input: the origin is code in its parent between children
            found["module"] = name.rsplit(".", 1)[0]
            found["note"] = f"{name} received a non-finite input computed in its parent's own code"

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    saved_rng = rng_state()
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        with torch.no_grad():
            for call in calls:
                if has_nonfinite((call.args, call.kwargs)):
                    return {"module": "(input batch)", "how": "replay", "input_finite": False}
                if call.rng is not None:
                    set_rng(call.rng)
                out = call.module(*call.args, **call.kwargs)
                if found:
                    break
                if has_nonfinite(out):
                    found.update(module=names.get(call.module) or type(call.module).__name__,
                                 type=type(call.module).__name__, input_finite=True)
                    break
    except Exception as exc:  # noqa: BLE001 - a replay that fails says so; training goes on
        return {"how": "replay failed", "replay_error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        for h in handles:
            h.remove()
        set_rng(saved_rng)
        with torch.no_grad():
            for b, v in buffers:
                b.copy_(v)
    if found:
        found["how"] = "replay"
        return found
    return {"how": "replay"}

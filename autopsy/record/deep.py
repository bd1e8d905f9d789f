"""Deep mode: every module's forward output and output gradient, as abs-max, every step.

Cost model: per module call one ``aminmax`` (a single reduction, no host sync) on its first floating
output and, in backward, one on that output's gradient (a pre-hook on the autograd node that made it);
a module that returns its last child's output unchanged (same tensor, same version) reuses the child's
values instead of reducing again. Each ``aminmax`` writes its (min, max) into the next row of a
preallocated buffer (one per dtype and device, ``out=``: no tensor is allocated per call), and the step
reads each buffer with one ``tolist()``: one host transfer for hundreds of values instead of one
``item()`` per value. The ring keeps each step's per-call values;
the per-module ``fwd_amax`` / ``bwd_amax`` are folded and rounded only when the ring is written.
"""

from __future__ import annotations

import math
from typing import Any

#: rows preallocated per module (a module called twice per step, or two micro-batches, fit without
#: growing); the buffer doubles when a step makes more calls (gradient accumulation)
ROWS_PER_MODULE = 2


def _amax(pair: list[float]) -> float:
    """abs-max from [min, max]; NaN stays NaN (aminmax gives NaN for both), -inf gives inf."""
    mn, mx = pair
    return mx if mx >= -mn else -mn


def per_module(n: int, order: list[int], vals: list[float]) -> list[float | None]:
    """Each module's value over its calls of the step (max; a non-finite value wins), None if not called."""
    per: list[float | None] = [None] * n
    isfinite = math.isfinite
    for i, v in zip(order, vals):
        p = per[i]
        per[i] = v if p is None or not isfinite(v) or v > p else p
    return per


class Slots:
    """(min, max) rows of one dtype on one device, written by ``aminmax(out=...)`` and read at once."""

    __slots__ = ("buf", "rows", "n", "vals")

    def __init__(self, like: Any, capacity: int) -> None:
        self.n = 0
        self.vals: list[list[float]] = []
        self._alloc(like, max(1, capacity))

    def _alloc(self, like: Any, capacity: int) -> None:
        import torch

        self.buf = torch.zeros((capacity, 2), dtype=like.dtype, device=like.device)
        # 0-d views made once: indexing the buffer per call would cost more than the reduction
        self.rows = [tuple(r.unbind()) for r in self.buf.unbind()]

    def grow(self) -> None:
        """Double the rows (a step with more module calls than foreseen, e.g. gradient accumulation)."""
        old, k = self.buf, self.n
        self._alloc(old, 2 * len(self.rows))
        self.buf[:k].copy_(old[:k])

    def read(self) -> None:
        """Every row as [min, max], in one ``tolist()`` (rows past ``n`` are stale and never looked at;
        the whole buffer costs less than slicing it first, an extra torch call)."""
        self.vals = self.buf.tolist() if self.n else []

    def reset(self) -> None:
        self.n = 0
        self.vals = []


class Loose:
    """The fallback for a tensor whose (min, max) cannot be written into a plain buffer (a tensor
    subclass such as a DTensor): the pair as computed, read value by value."""

    __slots__ = ("pairs", "vals", "n")

    def __init__(self) -> None:
        self.pairs: list[Any] = []
        self.vals: list[list[float]] = []
        self.n = 0

    def add(self, pair: Any) -> int:
        self.pairs.append(pair)
        self.n += 1
        return self.n - 1

    def read(self) -> None:
        vals = []
        for mn, mx in self.pairs:
            try:
                vals.append([float(mn.item()), float(mx.item())])
            except Exception:  # noqa: BLE001 - unreadable: shown as non-finite rather than dropped
                vals.append([math.nan, math.nan])
        self.vals = vals

    def reset(self) -> None:
        self.pairs, self.vals, self.n = [], [], 0


class DeepHooks:
    def __init__(self, model: Any, groups: list[str], group_of: Any) -> None:
        mods = [(n, m) for n, m in model.named_modules() if n]
        self.names = [n for n, _ in mods]
        gindex = {g: k for k, g in enumerate(groups)}
        #: each module's group index (None: a module outside every parameter group)
        self.module_group = [gindex.get(group_of(n + ".x")) for n in self.names]
        self.n_groups = len(groups)
        self.paused = False
        self._rows = ROWS_PER_MODULE * max(1, len(mods))
        self._slots: dict[Any, Slots | Loose] = {"loose": Loose()}  # (dtype, device) -> its buffer
        self._fwd: list[int] = []  # module index per forward call with a floating output
        self._fref: list[tuple[Slots | Loose, int]] = []  # where that call's (min, max) is
        self._bwd: list[int] = []  # module index per output gradient seen in backward
        self._bref: list[tuple[Slots | Loose, int]] = []
        self._last: Any = None  # (tensor, version, ref, module indices its gradient reports)
        self.handles = [m.register_forward_hook(self._hook(idx)) for idx, (_, m) in enumerate(mods)]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _hook(self, idx: int) -> Any:
        import torch

        from autopsy.record.replay import tensors

        Tensor = torch.Tensor
        aminmax, grad_enabled, set_grad = torch.aminmax, torch.is_grad_enabled, torch._C._set_grad_enabled
        fwd, fref, bwd, bref, slots = self._fwd, self._fref, self._bwd, self._bref, self._slots

        loose = slots["loose"]

        def put(t: Any, grad_on: bool) -> tuple[Slots | Loose, int] | None:
            """Write t's (min, max) into the next row of its dtype's buffer (grad mode off meanwhile:
            ``out=`` refuses autograd, and switching the mode costs less than a ``detach()``)."""
            key = (t.dtype, t.device)
            s = slots.get(key)
            if s is None:
                s = slots[key] = Slots(t, self._rows)
            k = s.n
            if k == len(s.rows):
                s.grow()
            if grad_on:
                set_grad(False)
            try:
                aminmax(t, out=s.rows[k])
            except Exception:  # noqa: BLE001 - a tensor subclass: the pair as computed
                try:
                    return loose, loose.add(aminmax(t))
                except Exception:  # noqa: BLE001 - a dtype without aminmax (e.g. float8): not recorded
                    return None
            finally:
                if grad_on:
                    set_grad(True)
            s.n = k + 1
            return s, k

        def hook(module: Any, args: Any, out: Any) -> None:
            if self.paused:
                return
            if isinstance(out, Tensor):
                t = out if out.is_floating_point() and out.numel() else None
            else:
                t = next((x for x in tensors(out) if x.is_floating_point() and x.numel()), None)
            if t is None:
                return
            last = self._last
            if last is not None and last[0] is t and last[1] is not None and last[1] == t._version:
                # a parent returning its last child's output: same values, and the same gradient
                fwd.append(idx)
                fref.append(last[2])
                last[3].append(idx)
                return
            grad_on = grad_enabled()
            ref = put(t, grad_on)
            if ref is None:
                return
            fwd.append(idx)
            fref.append(ref)
            idxs = [idx]
            # inference tensors (e.g. Lightning's validation) keep no version counter: never reused
            self._last = (t, None if t.is_inference() else t._version, ref, idxs)
            if grad_on and t.requires_grad:
                node = t.grad_fn
                if node is None:  # a leaf: a tensor hook
                    t.register_hook(lambda g: grad(g, idxs))
                else:
                    nr = t.output_nr
                    node.register_prehook(lambda gouts: grad(gouts[nr], idxs))

        def grad(g: Any, idxs: list[int]) -> None:
            if g is not None and g.is_floating_point() and g.numel():
                ref = put(g, grad_enabled())
                if ref is None:
                    return
                for i in idxs:
                    bwd.append(i)
                    bref.append(ref)
        return hook

    def entry(self) -> dict[str, Any] | None:
        """The step's deep fields, read with one ``tolist()`` per buffer: the first non-finite module
        output and gradient, each group's forward abs-max, and the per-call values (order, values) that
        :func:`per_module` turns into ``fwd_amax`` / ``bwd_amax`` only when the ring is written."""
        self._last = None
        if not self._fwd and not self._bwd:
            return None
        for s in self._slots.values():
            s.read()
        fwd = [_amax(s.vals[k]) for s, k in self._fref]
        bwd = [_amax(s.vals[k]) for s, k in self._bref]
        names, isfinite = self.names, math.isfinite
        # abs-max values are >= 0: their sum is finite exactly when every one is (or all are huge)
        fwd_ok = isfinite(sum(fwd))
        first_f = None if fwd_ok else next((names[i] for i, v in zip(self._fwd, fwd) if not isfinite(v)), None)
        first_b = None if isfinite(sum(bwd)) else next(
            (names[i] for i, v in zip(self._bwd, bwd) if not isfinite(v)), None)
        gmax: list[float | None] = [None] * self.n_groups
        mg = self.module_group
        if fwd_ok:  # every value finite: a group's value is the max over its modules' calls
            for i, v in zip(self._fwd, fwd):
                g = mg[i]
                if g is not None:
                    p = gmax[g]
                    if p is None or v > p:
                        gmax[g] = v
        else:  # which non-finite value a group shows follows the per-module fold, in module order
            for g, v in zip(mg, per_module(len(names), self._fwd, fwd)):
                if v is None or g is None:
                    continue
                p = gmax[g]
                gmax[g] = v if p is None or not isfinite(v) or v > p else p
        return {"fwd_calls": (list(self._fwd), fwd), "bwd_calls": (list(self._bwd), bwd),
                "first_nonfinite_output": first_f, "first_nonfinite_grad": first_b, "group_amax": gmax}

    def reset(self) -> None:
        self._fwd.clear()
        self._fref.clear()
        self._bwd.clear()
        self._bref.clear()
        for s in self._slots.values():
            s.reset()
        self._last = None

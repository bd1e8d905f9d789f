"""Deep mode: every module's forward output and output gradient, as abs-max, every step.

Cost model: per module call one ``aminmax`` (a single reduction, no host sync) on its first floating
output and, in backward, one on that output's gradient (a pre-hook on the autograd node that made it);
a module that returns its last child's output unchanged (same tensor, same version) reuses the child's
values instead of reducing again. The (min, max) pairs are read with the step's one host transfer;
``fwd_amax`` / ``bwd_amax`` stay Python floats in the ring and are rounded only when the ring is written.
"""

from __future__ import annotations

import math
from typing import Any


def _amax(mn: float, mx: float) -> float:
    """abs-max from (min, max); NaN stays NaN (aminmax gives NaN for both), -inf gives inf."""
    return mx if mx >= -mn else -mn


class DeepHooks:
    def __init__(self, model: Any, groups: list[str], group_of: Any) -> None:
        mods = [(n, m) for n, m in model.named_modules() if n]
        self.names = [n for n, _ in mods]
        gindex = {g: k for k, g in enumerate(groups)}
        #: each module's group index (None: a module outside every parameter group)
        self.module_group = [gindex.get(group_of(n + ".x")) for n in self.names]
        self.n_groups = len(groups)
        self.paused = False
        self._fwd: list[int] = []  # module index per forward call with a floating output
        self._bwd: list[int] = []  # module index per output gradient seen in backward
        self._vals: list[Any] = []  # (min, max) 0-d tensor pairs, forward calls first, in call order
        self._bvals: list[Any] = []
        self._last: Any = None  # (tensor, version, (min, max), module indices its gradient reports)
        self.handles = [m.register_forward_hook(self._hook(idx)) for idx, (_, m) in enumerate(mods)]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _hook(self, idx: int) -> Any:
        import torch

        from autopsy.record.replay import tensors

        Tensor = torch.Tensor
        bwd, bvals = self._bwd, self._bvals

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
                self._fwd.append(idx)
                self._vals += last[2]
                last[3].append(idx)
                return
            pair = torch.aminmax(t.detach())
            self._fwd.append(idx)
            self._vals += pair
            idxs = [idx]
            # inference tensors (e.g. Lightning's validation) keep no version counter: never reused
            self._last = (t, None if t.is_inference() else t._version, pair, idxs)
            if t.requires_grad and torch.is_grad_enabled():
                node = t.grad_fn
                if node is None:  # a leaf: a tensor hook
                    t.register_hook(lambda g: grad(g, idxs))
                else:
                    nr = t.output_nr
                    node.register_prehook(lambda gouts: grad(gouts[nr], idxs))

        def grad(g: Any, idxs: list[int]) -> None:
            if g is not None and g.is_floating_point() and g.numel():
                pair = torch.aminmax(g.detach())
                for i in idxs:
                    bwd.append(i)
                    bvals.extend(pair)
        return hook

    def tensors(self) -> list[Any]:
        """This step's 0-d results, to read with the step's one host transfer."""
        self._last = None
        return self._vals + self._bvals

    def entry(self, vals: list[float]) -> dict[str, Any] | None:
        """The step's deep fields from the values of :meth:`tensors` (fwd_amax, bwd_amax unrounded)."""
        if not self._fwd and not self._bwd:
            return None
        n = len(self.names)
        nf = len(self._fwd)
        fwd = [_amax(vals[2 * k], vals[2 * k + 1]) for k in range(nf)]
        bwd = [_amax(vals[2 * k], vals[2 * k + 1]) for k in range(nf, nf + len(self._bwd))]
        per_f: list[float | None] = [None] * n
        per_b: list[float | None] = [None] * n
        first_f = next((self.names[i] for i, v in zip(self._fwd, fwd) if not math.isfinite(v)), None)
        first_b = next((self.names[i] for i, v in zip(self._bwd, bwd) if not math.isfinite(v)), None)
        for per, order, got in ((per_f, self._fwd, fwd), (per_b, self._bwd, bwd)):
            for i, v in zip(order, got):
                p = per[i]
                per[i] = v if p is None or not math.isfinite(v) or v > p else p
        gmax: list[float | None] = [None] * self.n_groups
        for g, v in zip(self.module_group, per_f):
            if v is None or g is None:
                continue
            p = gmax[g]
            gmax[g] = v if not math.isfinite(v) or v > (-1.0 if p is None else p) else p
        return {"fwd_amax": per_f, "bwd_amax": per_b, "first_nonfinite_output": first_f,
                "first_nonfinite_grad": first_b, "group_amax": gmax}

    def reset(self) -> None:
        self._fwd.clear()
        self._bwd.clear()
        self._vals.clear()
        self._bvals.clear()
        self._last = None

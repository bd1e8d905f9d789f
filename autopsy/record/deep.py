"""Deep mode: every module's forward output and output gradient, as abs-max, every step.

Cost model: a module call costs torch's hook dispatch, a forward hook that only appends its first
floating output to a pending list, and (when the output needs a gradient) a way to see that gradient.
For a CPU output, while the outputs held this step stay under ``RETAIN_ELEMENTS`` elements, that is
``retain_grad()`` (a C++ hook: ~2 us, against ~8 us to register a Python pre-hook and ~4 us for
autograd to call it; tiny Llama on this CPU: deep mode +25.7-27.1% -> +23.9-24.3%): the held outputs'
gradients are read after backward (when the model is next called, or when the step reads its values)
and put in the order autograd produced them (descending sequence number: the engine runs the ready
node created last first), and their ``.grad`` is cleared. Otherwise (a GPU output, or past the bound:
a large model, whose steps hide the hooks' cost anyway) a pre-hook on the autograd node that made the
output appends the gradient to the pending list as it arrives, so no more than the bound is ever
held. On a GPU the retained gradient is a clone, one more kernel launch per output, and retaining
measured no gain (H200, two rounds against the pre-hooks: +2255/+2639 us per step against
+2242/+2370 us).

The pending tensors are reduced together: when the model's own forward returns, when the pending list reaches ``PENDING_TENSORS``
tensors or ``PENDING_ELEMENTS`` elements (so the references held stay bounded, in backward too), and
when the step reads its values. One ``aminmax`` per tensor, written with ``out=`` into the next row of
a buffer preallocated per dtype and device, under one grad-mode switch per batch; each buffer is read
with one ``tolist()`` per step. Reducing in a tight loop costs about a third of what the same
reduction cost inside each hook (measured on the benchmark's tiny Llama: ~2 vs ~7 us per tensor), and
``aminmax`` stays the reduction: on CPU ``torch._foreach_norm(ord=inf)`` and ``abs().max()`` are
several times slower. A module that returns its last child's output unchanged (same tensor, same
version) reuses the child's value instead of reducing again. A forward output changed in place
before its batch was reduced (an in-place activation, ``x += ...`` in the parent) is read as it is
then and flagged stale: it is not named as the first non-finite output (the replay is, exactly).
The ring keeps each step's per-call values; the per-module ``fwd_amax`` / ``bwd_amax`` are folded
and rounded only when the ring is written.
"""

from __future__ import annotations

import math
from typing import Any

#: rows preallocated per module (a module called twice per step, or two micro-batches, fit without
#: growing); the buffer doubles when a step makes more calls (gradient accumulation)
ROWS_PER_MODULE = 2
#: pending tensors are reduced when this many wait (bounds the references held in forward and backward)
PENDING_TENSORS = 128
#: or when they hold this many elements (64 MiB of float32): a large model reduces almost at once
PENDING_ELEMENTS = 16 * 1024 * 1024
#: outputs whose gradient is read after backward (``retain_grad``) hold at most this many elements per
#: step (with their gradients: 32 MiB in float32); later outputs of the step get a pre-hook instead
RETAIN_ELEMENTS = 4 * 1024 * 1024


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
        self._fk: list[int] = []  # that call's reduction (index into _red)
        self._bwd: list[int] = []  # module index per output gradient seen in backward
        self._bk: list[int] = []
        self._bseq: list[int] = []  # the sequence number of the autograd node that made each
        self._seg = 0  # where the gradients of the backward not yet ordered start
        #: per reduction: where its (min, max) is once reduced (None: not reducible, e.g. float8)
        self._red: list[tuple[Slots | Loose, int] | None] = []
        self._stale: set[int] = set()  # forward outputs changed in place before they were reduced
        self._pend: list[tuple[int, Any, int | None]] = []  # (reduction, tensor, version) not reduced yet
        self._pend_numel = 0
        self._last: Any = None  # (tensor, version, reduction, module indices its gradient reports)
        #: outputs whose gradient autograd retains, and the same by the tensor's id
        self._held: list[_Held] = []
        self._held_at: dict[int, _Held] = {}
        self._held_numel = 0
        self.handles = [m.register_forward_hook(self._hook(idx)) for idx, (_, m) in enumerate(mods)]
        # the model called again (the next micro-batch, or an evaluation): the last backward is over
        self.handles.append(model.register_forward_pre_hook(lambda module, args: self._drain()))
        # the model's own forward returning: its outputs are reduced before backward starts
        self.handles.append(model.register_forward_hook(lambda module, args, out: self.flush()))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _put(self, t: Any) -> tuple[Slots | Loose, int] | None:
        """Write t's (min, max) into the next row of its dtype's buffer (grad mode is off: ``out=``
        refuses autograd)."""
        import torch

        key = (t.dtype, t.device)
        s = self._slots.get(key)
        if s is None:
            s = self._slots[key] = Slots(t, self._rows)
        k = s.n
        if k == len(s.rows):
            s.grow()
        try:
            torch.aminmax(t, out=s.rows[k])
        except Exception:  # noqa: BLE001 - a tensor subclass: the pair as computed
            loose = self._slots["loose"]
            try:
                return loose, loose.add(torch.aminmax(t))  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - a dtype without aminmax (e.g. float8): not recorded
                return None
        s.n = k + 1
        return s, k

    def flush(self) -> None:
        """Reduce every pending tensor (one grad-mode switch for the batch), then drop the references."""
        import torch

        pend = self._pend
        if not pend or self.paused:
            return
        self._pend, self._pend_numel = [], 0
        red, put = self._red, self._put
        grad_on = torch.is_grad_enabled()
        if grad_on:
            torch._C._set_grad_enabled(False)
        try:
            for k, t, version in pend:
                if version is not None and t._version != version:
                    self._stale.add(k)
                red[k] = put(t)
        finally:
            if grad_on:
                torch._C._set_grad_enabled(True)

    def _hook(self, idx: int) -> Any:
        import torch

        from autopsy.record.replay import tensors

        Tensor = torch.Tensor
        grad_enabled = torch.is_grad_enabled
        fwd, fk = self._fwd, self._fk

        def hook(module: Any, args: Any, out: Any) -> None:
            if self.paused:
                return
            if type(out) is Tensor or isinstance(out, Tensor):
                if not out.is_floating_point():
                    return
                t = out
            else:
                t = next((x for x in tensors(out) if x.is_floating_point()), None)
                if t is None:
                    return
            last = self._last
            if last is not None and last[0] is t and last[1] == t._version and last[1] is not None:
                # a parent returning its last child's output: same values, and the same gradient
                fwd.append(idx)
                fk.append(last[2])
                last[3].append(idx)
                return
            n = t.numel()
            if not n:
                return
            # inference tensors (e.g. Lightning's validation) keep no version counter: never reused
            version = None if t.is_inference() else t._version
            k = queue(t, n, version)
            fwd.append(idx)
            fk.append(k)
            idxs = [idx]
            self._last = (t, version, k, idxs)
            if t.requires_grad and grad_enabled():
                node = t.grad_fn
                if node is None:  # a leaf: a tensor hook (its gradient comes after its users': last)
                    t.register_hook(lambda g: grad(g, idxs, -1))
                    return
                held_at = self._held_at
                if held_at:
                    seen = held_at.get(id(t))
                    if seen is not None and seen.t is t and seen.version != version:
                        # an output held earlier, changed in place since (an in-place activation, ``x +=``):
                        # its retained gradient would be the new version's; hook its own node instead
                        self._unhold(seen)
                seq = node._sequence_nr()
                if t.is_cpu and self._held_numel + n <= RETAIN_ELEMENTS:
                    t.retain_grad()  # read after backward (_drain)
                    item = _Held(seq, t, idxs, version, node, t.output_nr, n)
                    self._held.append(item)
                    held_at[id(t)] = item
                    self._held_numel += n
                else:
                    self._prehook(node, t.output_nr, idxs, seq)

        grad, queue = self._grad, self._queue
        return hook

    def _queue(self, t: Any, n: int, version: int | None) -> int:
        """A new reduction for ``t`` (``n`` elements), pending until the next flush (at once when the pending
        tensors reach their bound); its index into ``_red``."""
        red, pend = self._red, self._pend
        k = len(red)
        red.append(None)
        pend.append((k, t, version))
        self._pend_numel += n
        if len(pend) >= PENDING_TENSORS or self._pend_numel >= PENDING_ELEMENTS:
            self.flush()
        return k

    def _prehook(self, node: Any, nr: int, idxs: list[int], seq: int) -> None:
        """A pre-hook on the autograd node that made an output: its gradient is queued as it arrives."""
        grad = self._grad

        def pre(gouts: Any) -> None:
            grad(gouts[nr], idxs, seq)
        node.register_prehook(pre)

    def _unhold(self, item: _Held) -> None:
        """Stop retaining one held output's gradient: a pre-hook on the node that made it reads it instead."""
        del self._held_at[id(item.t)]
        self._held.remove(item)  # _Held compares by identity
        self._held_numel -= item.n
        self._prehook(item.node, item.nr, item.idxs, item.seq)

    def _drain(self) -> None:
        """Read the retained output gradients (backward is over), in the order autograd made them, then
        clear them and drop the outputs. An output whose backward did not run (an evaluation with grad
        on) has none and is only dropped."""
        held = self._held
        if held:
            self._held, self._held_numel = [], 0
            self._held_at.clear()
            grads = [item.t.grad for item in held]  # all read before any is cleared: an output may be held twice
            for item in held:
                item.t.grad = None
            if not self.paused:
                grad = self._grad
                # in the order autograd made them, so a gradient handed on unchanged (a residual sum's) is
                # seen twice in a row and reduced once
                for item, g in sorted(zip(held, grads), key=_seq_of, reverse=True):
                    if g is not None:
                        grad(g, item.idxs, item.seq)
        # this backward's gradients in the order autograd made them: the engine runs the ready node
        # created last first (descending sequence number); the pre-hooked ones arrived in that order,
        # the retained ones are read now
        start = self._seg
        bseq = self._bseq
        if len(bseq) - start > 1:
            seg = sorted(range(start, len(bseq)), key=bseq.__getitem__, reverse=True)
            bwd, bk = self._bwd, self._bk
            bwd[start:] = [bwd[k] for k in seg]
            bk[start:] = [bk[k] for k in seg]
            bseq[start:] = [bseq[k] for k in seg]
        self._seg = len(bseq)

    def _grad(self, g: Any, idxs: list[int], seq: int) -> None:
        """An output gradient of the modules ``idxs``, queued for reduction (the same tensor as the last
        one queued is reduced once)."""
        if g is None or self.paused:
            return
        bwd, bk, bseq = self._bwd, self._bk, self._bseq
        pend = self._pend
        if pend and pend[-1][1] is g:
            # the same gradient tensor as the last one (a sum passes its gradient on unchanged to
            # each addend: a residual block's output and its last branch): the same value
            k = pend[-1][0]
        else:
            if not g.is_floating_point():
                return
            n = g.numel()
            if not n:
                return
            k = self._queue(g, n, None)  # autograd does not change a gradient it handed out
        for i in idxs:
            bwd.append(i)
            bk.append(k)
            bseq.append(seq)

    def entry(self) -> dict[str, Any] | None:
        """The step's deep fields, read with one ``tolist()`` per buffer: the first non-finite module
        output and gradient, each group's forward abs-max, and the per-call values (order, values) that
        :func:`per_module` turns into ``fwd_amax`` / ``bwd_amax`` only when the ring is written."""
        self._drain()
        self.flush()
        self._last = None
        if not self._fwd and not self._bwd:
            return None
        for s in self._slots.values():
            s.read()
        vals = [_amax(r[0].vals[r[1]]) if r is not None else None for r in self._red]
        fwd_i, fwd = _known(self._fwd, self._fk, vals)
        bwd_i, bwd = _known(self._bwd, self._bk, vals)
        names, isfinite = self.names, math.isfinite
        # abs-max values are >= 0: their sum is finite exactly when every one is (or all are huge)
        fwd_ok = isfinite(sum(fwd))
        first_f = None
        if not fwd_ok:
            stale = self._stale
            fk = [k for k in self._fk if vals[k] is not None] if stale else None
            first_f = next((names[i] for n, (i, v) in enumerate(zip(fwd_i, fwd))
                            if not isfinite(v) and (fk is None or fk[n] not in stale)), None)
        first_b = None if isfinite(sum(bwd)) else next(
            (names[i] for i, v in zip(bwd_i, bwd) if not isfinite(v)), None)
        gmax: list[float | None] = [None] * self.n_groups
        mg = self.module_group
        if fwd_ok:  # every value finite: a group's value is the max over its modules' calls
            for i, v in zip(fwd_i, fwd):
                g = mg[i]
                if g is not None:
                    p = gmax[g]
                    if p is None or v > p:
                        gmax[g] = v
        else:  # which non-finite value a group shows follows the per-module fold, in module order
            for g, v in zip(mg, per_module(len(names), fwd_i, fwd)):
                if v is None or g is None:
                    continue
                p = gmax[g]
                gmax[g] = v if p is None or not isfinite(v) or v > p else p
        return {"fwd_calls": (fwd_i, fwd), "bwd_calls": (bwd_i, bwd),
                "first_nonfinite_output": first_f, "first_nonfinite_grad": first_b, "group_amax": gmax}

    def reset(self) -> None:
        self._fwd.clear()
        self._fk.clear()
        self._bwd.clear()
        self._bk.clear()
        self._bseq.clear()
        self._seg = 0
        self._red.clear()
        self._stale.clear()
        self._pend, self._pend_numel = [], 0
        for item in self._held:  # a step that ended without reading them: no gradient left behind
            item.t.grad = None
        self._held, self._held_numel = [], 0
        self._held_at.clear()
        for s in self._slots.values():
            s.reset()
        self._last = None


class _Held:
    """An output whose gradient autograd retains: the sequence number of the node that made it, the tensor, the
    modules it reports, its version when held, that node and the tensor's output number on it, its elements.
    Compared by identity (the default ``__eq__``): it holds tensors."""

    __slots__ = ("seq", "t", "idxs", "version", "node", "nr", "n")

    def __init__(self, seq: int, t: Any, idxs: list[int], version: int | None, node: Any, nr: int, n: int) -> None:
        self.seq, self.t, self.idxs, self.version, self.node, self.nr, self.n = seq, t, idxs, version, node, nr, n


def _seq_of(pair: tuple[_Held, Any]) -> int:
    return pair[0].seq


def _known(order: list[int], keys: list[int], vals: list[float | None]) -> tuple[list[int], list[float]]:
    """(module indices, values) of the calls whose value was reduced (a dtype without aminmax is left out)."""
    got = [vals[k] for k in keys]
    if None not in got:
        return list(order), got  # type: ignore[return-value]
    pairs = [(i, v) for i, v in zip(order, got) if v is not None]
    return [i for i, _ in pairs], [v for _, v in pairs]  # type: ignore[misc]

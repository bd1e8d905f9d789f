"""The recorder itself, shared by the HF, Lightning and plain-loop front ends.

Cost model (why it stays cheap): per step, one fused ``torch._foreach_norm`` over the gradients
that exist anyway; the norms, the loss and the token counts are read on the host at once when they
are on the CPU (``item()`` each: cheaper than stacking), else with one ``stack`` + ``tolist()``, the
step's only sync; per-layer sums in Python from precomputed parameter groups; the step line is kept
as a dict and serialized with the next flush of the writer (``writer.py``: at most a second later,
rounding included). The inputs of the step's outermost module calls are kept by reference (no copy)
with the RNG state, so a non-finite step can be replayed with hooks afterwards (``replay.py``)
instead of hooking every module on every step; the hooks that keep them sit on the model, and on
its direct children only until a step shows that the loop calls the model itself. Deep mode
(``deep.py``) adds a forward hook per module and a pre-hook per output gradient that only collect
the tensors; they are reduced in bounded batches (one ``aminmax`` each, into a preallocated buffer)
and read with one ``tolist()`` per step.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from autopsy.record.batch import batch_facts, sample_ids, save_batch
from autopsy.record.deep import DeepHooks, per_module
from autopsy.record.format import FORMAT, RECORD_DIR, RECORD_FILE, VERSION
from autopsy.record.replay import Call, replay_forward, rng_state
from autopsy.record.writer import RecordWriter
from autopsy.record.zero import ZERO3, agree, local_grads, local_weight, numel, sharded, zero_kind, zero_local_grads

ACTIONS = ("record", "skip", "stop")
#: steps kept in memory and dumped on the first non-finite step
RING_SIZE = 64
#: the update/weight ratio is sampled every this many steps (it needs a copy of a weight sample)
UPDATE_EVERY = 50
#: elements per parameter in that sample: bounded memory whatever the model size
UPDATE_SAMPLE = 4096
#: outermost module calls kept per step for the replay (gradient accumulation makes several)
MAX_CALLS = 64
#: non-finite steps localised in full (replay, batch saved); later ones are only recorded
MAX_LOCALISE = 3
#: significant digits of per-layer numbers: a 30-layer step line stays far below 2 KB
SIG = 4


def group_of(name: str) -> str:
    """The layer a parameter belongs to: the name up to its first numeric component
    (``model.layers.3``), else its module (``model.embed_tokens``, ``lm_head``)."""
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:-1]) or name


def _r(x: float) -> float:
    return float(f"{x:.{SIG}g}") if math.isfinite(x) else x


def check_action(on_nonfinite: str) -> None:
    """Refuse an unknown ``on_nonfinite`` when the recorder or a callback is built, not at the first NaN."""
    if on_nonfinite not in ACTIONS:
        raise ValueError(f"on_nonfinite must be one of {', '.join(ACTIONS)}, not {on_nonfinite!r}")


def callback_options(on_nonfinite: str, deep: bool, ring_size: int, update_every: int, save_batch: bool,
                     replay: bool) -> dict[str, Any]:
    """A framework callback's arguments, checked, as the keyword arguments of the :class:`Core` it builds later."""
    check_action(on_nonfinite)
    return {"on_nonfinite": on_nonfinite, "deep": deep, "ring_size": ring_size, "update_every": update_every,
            "save_batch": save_batch, "replay": replay}


class Core:
    """Ring buffer + append-only record + non-finite localisation for one model."""

    def __init__(self, output_dir: str | os.PathLike[str], framework: str, on_nonfinite: str = "record",
                 deep: bool = False, ring_size: int = RING_SIZE, update_every: int = UPDATE_EVERY,
                 save_batch: bool = True, replay: bool = True, overflow_is_normal: bool = False,
                 early_norms: bool = False) -> None:
        check_action(on_nonfinite)
        self.dir = Path(output_dir) / RECORD_DIR
        self.rank = rank = int(os.environ.get("RANK", "0") or 0)
        self.path = self.dir / (RECORD_FILE if rank == 0 else f"record.rank{rank}.jsonl")
        self.framework, self.on_nonfinite, self.deep = framework, on_nonfinite, deep
        self.update_every, self.save_batch, self.replay = update_every, save_batch, replay
        #: with fp16 loss scaling a non-finite gradient is an overflow the scaler skips, not a failure
        self.overflow_is_normal = overflow_is_normal
        #: compute gradient norms when backward ends (HF clips before its pre-optimizer hook)
        self.early_norms = early_norms
        self.ring: deque[dict[str, Any]] = deque(maxlen=ring_size)
        self.model: Any = None
        self.names: list[str] = []
        self.params: list[Any] = []
        self.groups: list[str] = []
        self.modules: list[str] = []
        self.nonfinite_steps = 0
        self.stopped = False
        self.dirty = False  # a non-finite step was let through: weights may be corrupt
        self.last_step = 0
        self._out: RecordWriter | None = None
        self._hooks: list[Any] = []
        self._child_hooks: list[Any] = []  # on the model's children, while they may be called directly
        self._order_hooks: list[Any] = []
        self._order: list[int] = []
        self._order_seen: set[int] = set()
        self._order_done = False
        self._end_hook: Any = None
        self._pending: Any = None
        self._calls: list[Call] = []
        self._losses: list[Any] = []
        self._depth = 0
        self._replaying = False
        self._deep: DeepHooks | None = None
        self._snap: tuple[int, list[Any], list[int]] | None = None
        self._gpos: list[int] = []  # each parameter's group index
        self._all: list[int] = []  # every parameter's index (the usual "present" list)
        self._gpos_cache: dict[tuple[int, ...], list[int]] = {}
        #: DeepSpeed ZeRO keeps the gradients (zero.py): None, "zero" (stages 1-2) or "zero3"; looked for
        #: at attach and, when DeepSpeed wraps the model after that, once more at the first step without grads
        self._zero: str | None = None
        self._zero_looked = False
        #: the ranks hold different parts of the gradients (ZeRO, FSDP): they agree on a non-finite step
        self._sharded = False

    # -- set-up ------------------------------------------------------------------------------
    def attach(self, model: Any) -> None:
        """Hook the model (idempotent) and write the header."""

        if model is self.model:
            return
        self.remove_hooks()
        self.model = model
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        index: dict[str, int] = {}
        gidx = []
        for n in self.names:
            g = group_of(n)
            gidx.append(index.setdefault(g, len(index)))
        self.groups = list(index)
        self._gpos, self._all, self._gpos_cache = gidx, list(range(len(self.params))), {}
        self._zero = zero_kind(self.params)
        self._sharded = sharded(model, self.params)
        self._hook_calls([model])
        self._hook_children()
        self._order_hooks = [p.register_post_accumulate_grad_hook(self._order_hook(i))
                             for i, p in enumerate(self.params)]
        if self.deep:
            self._deep = DeepHooks(model, self.groups, group_of)
            self.modules = self._deep.names
        self._open(model)

    def _open(self, model: Any) -> None:
        import torch

        self._out = RecordWriter(self.path, prepare=_round_step)
        header = {"t": "header", "format": FORMAT, "version": VERSION, "framework": self.framework,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "mode": "deep" if self.deep else "cheap",
                  "on_nonfinite": self.on_nonfinite, "model": type(model).__name__, "params": len(self.params),
                  "numel": sum(numel(p) for p in self.params), "groups": self.groups,
                  "torch": torch.__version__, "ring": self.ring.maxlen, "update_every": self.update_every}
        if self.deep:
            header["modules"] = self.modules
        if self._zero:
            header["grads"] = f"deepspeed-{self._zero}: norms of this rank's gradient fragments"
        self.write(header)

    def _hook_calls(self, modules: list[Any], into: list[Any] | None = None) -> None:
        """Pre- and post-forward hooks that keep the step's outermost calls (inputs, RNG state) and losses."""
        got = self._hooks if into is None else into
        for m in modules:
            got.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            got.append(m.register_forward_hook(self._post))

    def _hook_children(self) -> None:
        """The model's direct children too: a loop may call one of them instead of the model (a
        LightningModule's ``training_step`` calling ``self.model``)."""
        if not self._child_hooks and self.model is not None:
            self._hook_calls(list(self.model.children()), self._child_hooks)

    def _unhook_children(self) -> None:
        for h in self._child_hooks:
            h.remove()
        self._child_hooks = []

    def remove_hooks(self) -> None:
        self._unhook_children()
        for h in self._hooks + self._order_hooks:
            h.remove()
        if self._deep is not None:
            self._deep.remove()
            self._deep = None
        self._hooks, self._order_hooks = [], []
        if self._end_hook is not None:
            self._end_hook.remove()
            self._end_hook = None

    # -- the record ----------------------------------------------------------------------------
    def write(self, obj: dict[str, Any], sync: bool = False) -> None:
        """One line, one write(2): a killed process leaves whole lines (and at most one cut last line)."""
        if self._out is not None:
            self._out.write(obj, sync)

    def defer(self, obj: dict[str, Any]) -> None:
        """A step or update line, written with the writer's next flush (at most a second later)."""
        if self._out is not None:
            self._out.defer(obj)

    def close(self, status: str = "finished") -> None:
        if self._out is None:
            return
        self.write({"t": "end", "step": self.last_step, "status": "stopped" if self.stopped else status,
                    "nonfinite_steps": self.nonfinite_steps}, sync=True)
        self._out.close()
        self._out = None
        self.remove_hooks()

    def checkpoint(self, step: int, path: str, reason: str = "save") -> None:
        line = {"t": "checkpoint", "step": step, "path": path, "reason": reason, "clean": not self.dirty}
        self.write(line, sync=True)

    # -- hooks ---------------------------------------------------------------------------------
    def _pre(self, module: Any, args: Any, kwargs: Any) -> None:
        if self._replaying:
            return
        if self._depth == 0 and len(self._calls) < MAX_CALLS:
            self._calls.append(Call(module, args, kwargs, rng_state() if self.replay else None))
        self._depth += 1

    def _post(self, module: Any, args: Any, out: Any) -> None:
        if self._replaying:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            # detached (a forward without backward, e.g. evaluation with grad on, must not keep its
            # graph alive until the next step), checked and reshaped only if the step has no loss of its own
            loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
            if loss is not None:
                self._losses.append(loss.detach() if getattr(loss, "requires_grad", False) else loss)

    def _order_hook(self, i: int) -> Any:
        def hook(param: Any) -> None:
            if self._order_done or self._replaying:
                return
            if i not in self._order_seen:
                self._order_seen.add(i)
                self._order.append(i)
            if self.early_norms and len(self._order) == len(self.params) and i == self._order[-1]:
                self._pending = self._norms()  # every gradient of the first step is in
        return hook

    def _finish_order(self) -> None:
        """After the first backward the order in which gradients arrived is known: stop recording it,
        and (HF) hook the last parameter so norms are taken before gradient clipping."""
        if self._order_done or not self._order:
            return
        self._order_done = True
        for h in self._order_hooks:
            h.remove()
        self._order_hooks = []
        if self.early_norms and self.params:
            last = self.params[self._order[-1]]
            if hasattr(last, "register_post_accumulate_grad_hook"):
                self._end_hook = last.register_post_accumulate_grad_hook(self._backward_end)

    def _backward_end(self, param: Any) -> None:
        if not self._replaying:
            self._pending = self._norms()

    def add_loss(self, loss: Any) -> None:
        import torch

        if isinstance(loss, torch.Tensor):
            t = loss.detach()
            self._losses.append(t if t.dim() == 0 else t.reshape(-1)[:1].reshape(()))
        elif isinstance(loss, (int, float)):
            self._losses.append(torch.tensor(float(loss)))

    # -- per step ------------------------------------------------------------------------------
    def _norms(self) -> tuple[list[Any], list[int], bool] | None:
        """Each present gradient's L2 norm (one fused op): as Python floats when the gradients are on
        the CPU (read at once: there is no device to wait for), else as float32 0-d tensors on their
        device, read later with the step's one ``tolist()``. Third item: whether they are floats."""
        import torch

        grads = [p.grad for p in self.params]
        present = self._all
        if any(g is None for g in grads):
            if self._zero is None and not self._zero_looked:
                self._zero_looked = True
                self._zero = zero_kind(self.params)
                self._sharded = self._sharded or bool(self._zero)
            if self._zero:
                grads = local_grads(self.params, grads, self._zero)
            present = [i for i, g in enumerate(grads) if g is not None]
            if not present:
                return None
            grads = [grads[i] for i in present]
        # no no_grad(): gradients do not require grad (with create_graph=True the small graph of the
        # norms is dropped with them), and entering the context costs as much as a few norms
        try:  # float32 norms of float16/bfloat16 gradients: no overflow of the norm itself
            norms = torch._foreach_norm(grads, 2, dtype=torch.float32)
        except RuntimeError:  # float64 or complex gradients beside low-precision ones
            norms = [n.detach().float() for n in torch._foreach_norm(grads)]
        if grads[0].is_cpu:
            try:
                return [n.item() for n in norms], present, True
            except RuntimeError:  # a norm on another device (a model split across devices)
                pass
        return [n.float() for n in norms], present, False

    def _groups_of(self, present: list[int]) -> list[int]:
        """Each present parameter's group index (cached: the same parameters have gradients every step)."""
        if present is self._all:
            return self._gpos
        key = tuple(present)
        got = self._gpos_cache.get(key)
        if got is None:
            got = self._gpos_cache[key] = [self._gpos[i] for i in present]
        return got

    def pre_step(self, step: int, loss: Any = None, optimizer: Any = None, batch: Any = None,
                 scaler: Any = None) -> bool:
        """Record one step (gradients computed, optimizer not yet stepped). Returns whether the
        optimizer step may go on; on a non-finite step it localises, saves the batch and acts.

        Per step: one fused norm over the gradients, one host read of those norms with the loss and
        the token counts (on a device: one ``stack`` and one ``tolist``, the only sync); group sums
        in Python; the line is queued, serialized and rounded with the writer's next flush."""
        self.last_step = step
        step_calls = self._calls
        if not self._order_done:
            self._finish_order()
        got = self._pending if self._pending is not None else self._norms()
        self._pending = None
        if batch is None:
            batch = self._batch_from_calls()
        tokens, sup, shape = batch_facts(batch)
        # what is still on a device is read with one stack + tolist (the step's only sync); what is
        # on the CPU was read directly (norms, a CPU loss, counts of a CPU batch: no device to wait for)
        dev: list[Any] = []
        host_norms = got is not None and got[2]
        if got is not None and not host_norms:
            dev.extend(got[0])
        loss_v, loss_t = _loss_read([loss] if loss is not None else [x for x in self._losses if _is_loss(x)])
        loss_at = tok_at = sup_at = -1
        if loss_t is not None:
            loss_at = len(dev)
            dev.append(loss_t)
        if tokens is not None and not isinstance(tokens, int):
            tok_at = len(dev)
            dev.append(tokens)
        if sup is not None and not isinstance(sup, int):
            sup_at = len(dev)
            dev.append(sup)
        values = _host_values(dev) if dev else dev
        if loss_at >= 0:
            loss_v = values[loss_at]
        if tok_at >= 0:
            tokens = int(values[tok_at])
        if sup_at >= 0:
            sup = int(values[sup_at])
        pnorms: list[float] | None = None
        gnorm = math.nan
        entry: dict[str, Any] = {"t": "step", "step": step, "loss": loss_v, "lr": _lr(optimizer)}
        if scaler is not None:
            try:
                entry["scale"] = float(scaler.get_scale())
            except Exception:  # noqa: BLE001 - a scaler without get_scale: no scale recorded
                pass
        elif self.overflow_is_normal and getattr(optimizer, "dynamic_loss_scale", False) is True:
            try:  # DeepSpeed's ZeRO optimizers: loss_scale is a property over their loss scaler
                entry["scale"] = float(optimizer.loss_scale)
            except Exception:  # noqa: BLE001
                pass
        if got is not None:
            pnorms = got[0] if host_norms else values[:len(got[0])]
            gsq = [0.0] * len(self.groups)
            for g, v in zip(self._groups_of(got[1]), pnorms):
                gsq[g] += v * v
            gnorm = math.sqrt(sum(gsq))
            # unrounded here: _round_step rounds them when the line is written
            entry["gn"], entry["g"] = gnorm, [math.sqrt(x) for x in gsq]
        else:
            entry["gn"] = entry["g"] = None
        if tokens is not None:
            entry["tokens"], entry["sup"] = tokens, sup
        if shape:
            entry["shape"] = shape
        ids = sample_ids(batch)
        if ids is not None:
            entry["ids"] = ids
        if len(self._calls) > 1:
            entry["micro"] = len(self._calls)
        deep = self._deep.entry() if self._deep is not None else None
        if deep is not None:
            entry["a"] = deep.pop("group_amax")
            ring_entry = dict(entry, **deep)
        else:
            ring_entry = dict(entry)
        self.ring.append(ring_entry)
        bad_grad = got is not None and not math.isfinite(gnorm)
        bad_loss = loss_v is not None and not math.isfinite(loss_v)
        if self._sharded and agree(bad_grad or bad_loss, self.params[0].device) and not (bad_grad or bad_loss):
            # another rank's gradient shard was non-finite: this rank skips or stops with it (and, under ZeRO-3 or
            # FSDP, replays with it: the replayed forward gathers parameters, a collective every rank joins)
            bad_grad = True
            entry["other_rank"] = 1
        if bad_grad or bad_loss:
            entry["nf"] = 1
        self.defer(entry)
        if self.update_every and (self._snap is not None or step % self.update_every == 0 or step == 1):
            self._update_ratio(step)
        proceed = True
        if bad_grad or bad_loss:
            if self.overflow_is_normal and not bad_loss:
                self.write({"t": "overflow", "step": step, "gn": gnorm})
            else:
                proceed = self._nonfinite(step, entry, ring_entry, pnorms, got[1] if got else [], bad_loss, batch,
                                          optimizer)
        if self._child_hooks:
            # the first step called the model itself (the usual loop): its children's hooks only cost
            if step_calls and all(c.module is self.model for c in step_calls):
                self._unhook_children()
        elif not step_calls and self.replay:
            self._hook_children()  # the model was not called this step: watch its children again
        self._calls, self._losses, self._depth = [], [], 0
        if self._deep is not None:
            self._deep.reset()
        return proceed

    def _update_ratio(self, step: int) -> None:
        """|update| / |weight| per layer on a fixed sample of each parameter, every k steps."""
        import torch

        if not self.update_every or not self.params:
            return
        if self._snap is not None:
            at, snap, idx = self._snap
            self._snap = None
            with torch.no_grad():
                cur = [local_weight(self.params[i]).reshape(-1)[:UPDATE_SAMPLE].float() for i in idx]
                d = torch._foreach_norm(torch._foreach_sub(cur, snap))
                w = torch._foreach_norm(snap)
            vals = _host_values([*d, *w])
            G = len(self.groups)
            dsq, wsq = [0.0] * G, [0.0] * G
            for k, i in enumerate(idx):
                g = self._gpos[i]
                dsq[g] += vals[k] * vals[k]
                wsq[g] += vals[len(idx) + k] * vals[len(idx) + k]
            ratios = [math.sqrt(x / max(y, 1e-30)) for x, y in zip(dsq, wsq)]
            total = math.sqrt(sum(dsq) / max(sum(wsq), 1e-30))
            self.defer({"t": "update", "step": at, "ratio": _r(total), "g": [_r(v) for v in ratios]})
        if step % self.update_every == 0 or step == 1:
            local = [local_weight(p) for p in self.params]
            idx = [i for i, w in enumerate(local) if w.is_contiguous() and w.numel()]
            with torch.no_grad():
                self._snap = (step, [local[i].reshape(-1)[:UPDATE_SAMPLE].to(torch.float32, copy=True)
                                     for i in idx], idx)

    # -- the non-finite step ---------------------------------------------------------------------
    def _nonfinite(self, step: int, entry: dict[str, Any], ring_entry: dict[str, Any], pnorms: list[float] | None,
                   present: list[int], bad_loss: bool, batch: Any, optimizer: Any) -> bool:
        self.nonfinite_steps += 1
        first = self.nonfinite_steps == 1
        event: dict[str, Any] = {"t": "nonfinite", "step": step, "what": "loss" if bad_loss else "grad",
                                 "loss": entry.get("loss"), "gn": _rn(entry.get("gn"))}
        if entry.get("other_rank"):
            event["other_rank"] = 1  # this rank's fragments were finite: the owner's record says where it started
        if self.nonfinite_steps <= MAX_LOCALISE:
            event.update(self._localise(pnorms, present, bad_loss, ring_entry))
            if self.save_batch:
                event.update(save_batch(self.dir, step, batch, self._calls, self.rank))
        if first:
            n = len(self.modules) if self.deep else None
            self.write({"t": "ring", "step": step, "steps": [_rounded(e, n) for e in self.ring]})
        event["action"] = self.on_nonfinite
        if self.on_nonfinite == "record":
            self.dirty = True
        else:
            self.drop_grads(optimizer)
        if self.on_nonfinite == "stop":
            self.stopped = True
        self.write(event, sync=True)
        return self.on_nonfinite == "record"

    def drop_grads(self, optimizer: Any = None) -> None:
        """Set every gradient to None: optimizers skip parameters without a gradient, so neither the
        weights nor the optimizer state take this step (zeroing would still move them by momentum)."""
        for p in self.params:
            p.grad = None
        if self._zero:  # DeepSpeed's own buffers: zeroed, so an engine.step() after it applies no gradient
            zero_local_grads(self.params, self._zero)
        if optimizer is not None:
            for g in getattr(optimizer, "param_groups", []):
                for p in g.get("params", []):
                    p.grad = None

    def _localise(self, pnorms: list[float] | None, present: list[int], bad_loss: bool,
                  ring_entry: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        bad: list[int] = []
        if pnorms is not None:
            bad = [present[k] for k, v in enumerate(pnorms) if not math.isfinite(v)]
        out["nonfinite_params"] = len(bad)
        out["params"] = len(self.params)
        out["nonfinite_groups"] = len({group_of(self.names[i]) for i in bad})
        if bad:
            out["first_in_model_order"] = self.names[bad[0]]
        fwd = self._replay_forward() if (self.replay and self._calls) else None
        if fwd is None and ring_entry.get("first_nonfinite_output"):
            fwd = {"module": ring_entry["first_nonfinite_output"], "how": "deep"}
        if self.deep:
            out["deep"] = {"first_nonfinite_output": ring_entry.get("first_nonfinite_output"),
                           "first_nonfinite_grad": ring_entry.get("first_nonfinite_grad")}
        if fwd is not None and fwd.get("module"):
            out.update(direction="forward", **fwd)
            out["group"] = group_of(fwd["module"] + ".x") if fwd["module"] != "(input batch)" else None
            return out
        if bad_loss:
            out.update(direction="forward", module=None, how=(fwd or {}).get("how", "loss"),
                       note="every module output was finite: the loss computation itself went non-finite"
                       if fwd is not None else "the loss was non-finite; no replay was possible")
            return out
        if bad:
            if self._order_done:
                pos = {i: k for k, i in enumerate(self._order)}
                first = min(bad, key=lambda i: pos.get(i, len(pos)))
                how = "backward-order"
            else:
                first, how = bad[-1], "model-order (the backward order was not known yet)"
            name = self.names[first]
            out.update(direction="backward", param=name, module=name.rsplit(".", 1)[0], group=group_of(name), how=how)
            if fwd is not None:
                out["replay"] = "forward finite"
        return out

    def _replay_forward(self) -> dict[str, Any] | None:
        self._replaying = True
        if self._deep is not None:
            self._deep.paused = True
        try:
            return replay_forward(self.model, self._calls)
        finally:
            self._replaying = False
            if self._deep is not None:
                self._deep.paused = False

    def _batch_from_calls(self) -> Any:
        if not self._calls:
            return None
        c = self._calls[0]
        if c.kwargs:
            return c.kwargs
        return c.args[0] if len(c.args) == 1 else list(c.args)

def _rn(x: float | None) -> float | None:
    return _r(x) if x is not None else None


def _rl(xs: list[float | None] | None) -> list[float | None] | None:
    return [_r(v) if v is not None else None for v in xs] if xs is not None else None


def _round_step(entry: dict[str, Any]) -> None:
    """Round a step line's per-layer numbers in place, when the writer serializes it (idempotent)."""
    if entry.get("t") != "step":
        return
    entry["gn"] = _rn(entry.get("gn"))
    entry["g"] = _rl(entry.get("g"))
    if "a" in entry:
        entry["a"] = _rl(entry["a"])


def _rounded(entry: dict[str, Any], n_modules: int | None = None) -> dict[str, Any]:
    """A ring entry as written: per-layer and (deep mode) per-module values rounded like the rest."""
    out = dict(entry)
    _round_step(out)
    for k in ("fwd", "bwd"):
        calls = out.pop(f"{k}_calls", None)
        if calls is not None and n_modules is not None:
            out[f"{k}_amax"] = _rl(per_module(n_modules, *calls))
    return out


def _is_loss(x: Any) -> bool:
    """A loss taken from a model's output: a one-element floating tensor (an output's per-sample losses are not)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() == 1 and x.is_floating_point()
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _loss_read(losses: list[Any]) -> tuple[float | None, Any]:
    """The step's loss (the mean of its micro-batches' losses) as (a Python float, None) when it is on
    the CPU or a number, else (None, a float32 0-d tensor on its device, read with the step's sync)."""
    import torch

    if not losses:
        return None, None
    if len(losses) > 1:
        t = _mean([x.detach() if isinstance(x, torch.Tensor) else torch.tensor(float(x)) for x in losses])
    else:
        t = losses[0]
        if isinstance(t, (int, float)):
            return float(t), None
        if not isinstance(t, torch.Tensor):
            return None, None
    if t.numel() != 1:
        t = t.detach().reshape(-1)[:1]
    if t.is_cpu:
        return float(t.item()), None
    return None, t.detach().reshape(()).float()


def _mean(losses: list[Any]) -> Any:
    import torch

    return torch.stack([x.to(losses[0].device).float() for x in losses]).mean()


def _host_values(parts: list[Any], cpu: bool | None = None) -> list[float]:
    """0-d tensors as Python numbers in one host transfer: stacked as float32 on the first one's device
    (a tensor on another device, e.g. a pipeline's loss, is moved there first); on CPU (``cpu``: the
    caller knows the model is there; None: checked here), read one by one, cheaper than a stack."""
    import torch

    if not parts:
        return []
    if cpu if cpu is not None else all(t.is_cpu for t in parts):
        try:
            return [t.item() for t in parts]
        except RuntimeError:  # a tensor the caller did not expect (e.g. a meta loss): the general path
            pass
    try:
        return torch.stack(parts).float().tolist()
    except RuntimeError:  # tensors on several devices
        dev = parts[0].device
        return torch.stack([t.to(dev) for t in parts]).float().tolist()


def _save_weights(model: Any, path: Path, metadata: dict[str, str]) -> None:
    """``safetensors.torch.save_model``; where it refuses views into a larger storage (DeepSpeed ZeRO-1/2 keep
    the weights as views of one flat buffer: "None is covering the entire storage"), each tensor is copied out
    first (tied weights are then written once per name)."""
    from safetensors.torch import save_file, save_model

    try:
        save_model(model, str(path), metadata=metadata)
    except RuntimeError:
        state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
        save_file(state, str(path), metadata=metadata)


def _lr(optimizer: Any) -> float | None:
    try:
        lr = optimizer.param_groups[0]["lr"]
        return float(lr)
    except Exception:  # noqa: BLE001 - no optimizer, or one without param_groups
        return None


class Recorder:
    """Flight recorder for hand-written loops (plain PyTorch, Accelerate, DeepSpeed)::

        rec = Recorder(output_dir, model=model, on_nonfinite="skip")
        for batch in loader:
            loss = model(**batch).loss; loss.backward()
            if rec.step(loss=loss, optimizer=opt, batch=batch):
                opt.step()
            opt.zero_grad()
            if rec.stopped: break
        rec.close()

    Pass ``model`` at construction so the first step's forward is captured too (needed to replay it).
    ``step()`` returns whether the optimizer step may go on. With ``on_nonfinite="stop"`` the model's
    last clean weights are written to ``<output_dir>/autopsy-record/last-clean/model.safetensors``.
    """

    def __init__(self, output_dir: str | os.PathLike[str], model: Any = None, on_nonfinite: str = "record",
                 deep: bool = False, ring_size: int = RING_SIZE, update_every: int = UPDATE_EVERY,
                 save_batch: bool = True, replay: bool = True, overflow_is_normal: bool = False) -> None:
        self.core = Core(output_dir, "loop", on_nonfinite, deep, ring_size, update_every, save_batch, replay,
                         overflow_is_normal)
        self._step = 0
        self._saved = False
        if model is not None:
            self.core.attach(model)

    @property
    def stopped(self) -> bool:
        return self.core.stopped

    @property
    def path(self) -> Path:
        return self.core.path

    def step(self, loss: Any = None, model: Any = None, optimizer: Any = None, batch: Any = None,
             scaler: Any = None, step: int | None = None) -> bool:
        """Call after ``backward()`` and before ``optimizer.step()``. Returns whether the step may go on."""
        if model is not None:
            self.core.attach(model)
        if self.core.model is None:
            raise ValueError("Recorder.step needs the model (pass model= here or to Recorder())")
        self._step = step if step is not None else self._step + 1
        if scaler is not None or getattr(optimizer, "dynamic_loss_scale", False) is True:
            # a GradScaler, or DeepSpeed's fp16 optimizer with a dynamic loss scale, skips inf-gradient steps itself
            self.core.overflow_is_normal = True
        ok = self.core.pre_step(self._step, loss=loss, optimizer=optimizer, batch=batch, scaler=scaler)
        if self.core.stopped and not self._saved:
            self._saved = True
            self._save_clean()
        return ok

    def _save_clean(self) -> None:
        """The weights as they were before the non-finite step (it was not taken), written by rank 0 only; under
        ZeRO-3 every rank first gathers the parameters with the others (each holds a slice; the placeholders are empty)."""
        target = self.core.dir / "last-clean"
        try:
            import contextlib

            gather: Any = contextlib.nullcontext()
            if self.core._zero == ZERO3:
                import deepspeed

                gather = deepspeed.zero.GatheredParameters(list(self.core.model.parameters()), modifier_rank=None)
            with gather:
                if self.core.rank != 0:
                    return
                target.mkdir(parents=True, exist_ok=True)
                _save_weights(self.core.model, target / "model.safetensors", {"step": str(self._step - 1)})
            self.core.checkpoint(self._step - 1, f"{RECORD_DIR}/last-clean/model.safetensors", "stop")
        except Exception as exc:  # noqa: BLE001
            self.core.write({"t": "checkpoint", "step": self._step - 1, "error": f"{type(exc).__name__}: {exc}"[:300]})

    def close(self) -> None:
        self.core.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.core.close("crashed" if exc[0] is not None else "finished")

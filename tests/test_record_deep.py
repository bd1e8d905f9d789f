"""Deep mode's value buffers: every call's (min, max) lands where its module reads it, whatever the
dtype mix, the number of calls per step (buffer growth), or a tensor subclass that refuses ``out=``."""

from __future__ import annotations

import math

import torch
from torch import nn

from autopsy.record.core import group_of
from autopsy.record.deep import DeepHooks, per_module


class Refuses(torch.Tensor):
    """A tensor subclass whose aminmax refuses out= (as a DTensor mixing with a plain buffer does)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.aminmax and "out" in kwargs:
            raise RuntimeError("aminmax(out=) not supported for this subclass")
        return super().__torch_function__(func, types, args, kwargs)


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _expected(net: nn.Module, x: torch.Tensor) -> list[float]:
    outs = []
    h = x
    for m in net:
        h = m(h)
        outs.append(float(h.detach().abs().max()))
    return outs


def test_values_match_direct_reductions_across_growth_and_dtypes():
    net = _net()
    deep = DeepHooks(net, ["0", "2"], group_of)
    xs = [torch.randn(3, 4) for _ in range(5)]  # 5 calls per module: past the 2 preallocated rows
    for x in xs:
        net(x).sum().backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bfloat16 outputs: a second buffer
        net(torch.randn(3, 4)).float().sum().backward()
    got = deep.entry()
    order, vals = got["fwd_calls"]
    assert order[:3] == [0, 1, 2] and len(order) == 18
    for k, x in enumerate(xs):
        want = _expected(net, x)
        assert [round(v, 4) for v in vals[3 * k: 3 * k + 3]] == [round(v, 4) for v in want]
    per = per_module(3, order, vals)
    assert per[2] == max(vals[2::3])
    border, bvals = got["bwd_calls"]
    assert len(border) == 18 and all(math.isfinite(v) for v in bvals)
    assert got["first_nonfinite_output"] is None and got["first_nonfinite_grad"] is None
    assert len(deep._slots) == 3  # float32, bfloat16, and the (unused) fallback
    deep.reset()
    assert deep.entry() is None


def test_a_subclass_that_refuses_out_is_still_recorded_and_nan_is_named():
    net = _net()
    deep = DeepHooks(net, ["0", "2"], group_of)
    with torch.no_grad():
        net[0].bias[0] = float("nan")
    x = torch.randn(3, 4).as_subclass(Refuses)
    net(x)
    got = deep.entry()
    order, vals = got["fwd_calls"]
    assert order == [0, 1, 2] and all(math.isnan(v) for v in vals)
    assert got["first_nonfinite_output"] == "0"
    assert deep._slots["loose"].n == 3


def test_bounded_batches_give_the_same_values(monkeypatch):
    """Reducing every few tensors (what a large model does) gives the values of one batch per step."""
    import autopsy.record.deep as deep_mod

    def run() -> dict:
        net = _net()
        deep = DeepHooks(net, ["0", "2"], group_of)
        torch.manual_seed(1)
        net(torch.randn(3, 4)).sum().backward()
        got = deep.entry()
        deep.remove()
        return got

    whole = run()
    monkeypatch.setattr(deep_mod, "PENDING_TENSORS", 2)
    assert run() == whole
    monkeypatch.setattr(deep_mod, "PENDING_ELEMENTS", 1)
    assert run() == whole


class _InPlaceParent(nn.Module):
    """A parent whose own code overwrites its child's output in place (``x.mul_`` after the child
    returned): the child's output was finite when it returned."""

    def __init__(self) -> None:
        super().__init__()
        self.child = nn.Linear(4, 4)
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.child(x)
        h.mul_(self.scale)
        return h


def test_output_changed_in_place_is_not_named_first():
    net = nn.Sequential(_InPlaceParent(), nn.Linear(4, 2))
    deep = DeepHooks(net, ["0", "1"], group_of)
    net[0].scale = float("nan")
    with torch.no_grad():
        net(torch.randn(3, 4))
    got = deep.entry()
    # the child returned finite values; its parent's code made them NaN: the parent is named
    assert got["first_nonfinite_output"] == "0"
    assert deep._stale  # the child's value was read after the in-place change, and flagged


class _Block(nn.Module):
    """A residual block with two branches and an in-place activation: gradients are summed, shared by
    addends and handed on unchanged, as in real models."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.act, self.out = nn.Linear(6, 6), nn.Linear(6, 6), nn.ReLU(inplace=True), nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(self.act(self.a(x)) * self.b(x))


def _deep_run(nan_grad: bool) -> dict:
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(4, 6), _Block(), _Block(), nn.Linear(6, 2))
    deep = DeepHooks(net, ["0", "1", "2", "3"], group_of)
    for micro in range(2):  # two micro-batches in one step: the model is called again after a backward
        out = net(torch.randn(5, 4))
        if nan_grad and micro == 1:
            out.register_hook(lambda g: g * float("nan"))  # the loss's gradient goes NaN from the output on
        out.pow(2).sum().backward()
    got = deep.entry()
    deep.reset()
    deep.remove()
    return got


def _canon(x):
    """NaN as a string, so two results compare equal when they agree (nan != nan)."""
    if isinstance(x, float):
        return "nan" if math.isnan(x) else x
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items()}
    return x


def test_retained_and_hooked_gradients_agree(monkeypatch):
    """Output gradients read after backward (retain_grad, the small-model path), caught by pre-hooks as
    they arrive (past RETAIN_ELEMENTS) or a mix of both give the same values in the same (backward) order."""
    import autopsy.record.deep as deep_mod

    for nan_grad in (False, True):
        monkeypatch.setattr(deep_mod, "RETAIN_ELEMENTS", 0)  # every output hooked
        hooked = _canon(_deep_run(nan_grad))
        assert len(hooked["bwd_calls"][0]) >= 16
        for bound in (10**9, 60):  # every output retained; the first few per micro-batch retained, the rest hooked
            monkeypatch.setattr(deep_mod, "RETAIN_ELEMENTS", bound)
            assert _canon(_deep_run(nan_grad)) == hooked, (nan_grad, bound)
        if nan_grad:
            # the NaN enters at the output: the last module is the first whose gradient is non-finite
            assert hooked["first_nonfinite_grad"] == "3"


def test_retained_gradients_leave_nothing_behind():
    """An evaluation forward with grad on (no backward) holds nothing past the next call, and the
    outputs' .grad is cleared after it is read."""
    net = _net()
    deep = DeepHooks(net, ["0", "2"], group_of)
    out = net(torch.randn(3, 4))  # no backward: nothing to read
    assert deep._held
    kept = net(torch.randn(3, 4))
    assert len(deep._held) == 3  # only the second call's outputs
    kept.sum().backward()
    held = [item.t for item in deep._held]
    got = deep.entry()
    assert len(got["bwd_calls"][0]) == 3 and not deep._held
    assert all(t.grad is None for t in held) and out.grad is None

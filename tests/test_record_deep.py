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

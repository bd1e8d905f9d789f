"""Inline SVG charts of the report's series: no script, no font, no request.

Why SVG built here rather than a JS chart library: the report must open offline, under a CSP
that forbids scripts, and print. Every text that comes from data (metric names, labels) goes
through ``markupsafe.escape``; numbers are formatted here. Axes switch to log (all values > 0)
or symlog (zeros or negatives present) when the finite values span orders of magnitude, so a
1e34 spike does not flatten a loss of 2.0 into a line on the floor. Lines break at non-finite
points, which are drawn as markers in a strip above the plot, at the step where they occurred.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from autopsy.metrics import stand_in_losses

#: panels: title metric -> metrics drawn in it (eval loss overlaid on the training loss)
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("loss", ("loss", "eval_loss")),
    ("ppl", ("ppl", "eval_ppl")),  # what a trainer that logs perplexity instead of the loss gives (the Lua OpenNMT)
    ("grad_norm", ("grad_norm",)),
    ("learning_rate", ("learning_rate",)),
    ("loss_scale", ("loss_scale",)),
)
#: other series get a panel only when they hold non-finite points (e.g. logps/chosen in SimPO), at most this many
MAX_EXTRA_PANELS = 3
COLORS = {"loss": "#2563eb", "eval_loss": "#ea580c", "ppl": "#1d4ed8", "eval_ppl": "#c2410c", "grad_norm": "#7c3aed",
          "learning_rate": "#059669", "loss_scale": "#0e7490"}
EXTRA_COLOR = "#475569"
#: stand-in losses (:func:`autopsy.metrics.stand_in_losses`) take the loss panel's colours, in order
STAND_IN_COLORS = ("#2563eb", "#ea580c")
#: finite values whose max/min(|v| > 0) ratio exceeds this are drawn on a log or symlog axis
LOG_SPAN = 1e3
WIDTH, HEIGHT = 800, 190
LEFT, RIGHT, TOP, BOTTOM = 62, 12, 30, 24
#: height of the strip above the plot where non-finite points are marked
NF_STRIP = 10
#: a polyline keeps at most min+max per pixel column: more points cannot be seen, only downloaded
MAX_LABELLED_CHECKPOINTS = 12
#: symlog's linear threshold is the smallest |value| divided by this
SYMLOG_HEADROOM = 10.0
#: y tick labels closer than this (px) would overlap; the later one is dropped
MIN_TICK_GAP = 12
#: on a linear axis whose minimum is below this share of the maximum, start the axis at 0
LINEAR_ZERO_SNAP = 0.2
NONFINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def to_float(v: Any) -> float | None:
    """A chart value: a number, or a non-finite marker string; anything else is not a point."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return NONFINITE_STRINGS.get(v)
    return None


def fmt(v: float) -> str:
    """Short human number: 0, 0.25, 1234, 1.19e+34, 2e-05."""
    if v == 0:
        return "0"
    if not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Inf" if v > 0 else "-Inf")
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.3g}".replace("e+0", "e+").replace("e-0", "e-")
    return f"{v:.4g}"


@dataclass
class Series:
    name: str
    steps: list[int]
    values: list[float]
    total: int

    @property
    def finite(self) -> list[tuple[int, float]]:
        return [(s, v) for s, v in zip(self.steps, self.values) if math.isfinite(v)]


def load_series(raw: Any, name: str) -> Series | None:
    """Defensive read of ``run.series[name]``: mismatched lengths and junk values are dropped."""
    if not isinstance(raw, dict):
        return None
    steps, values = raw.get("steps"), raw.get("values")
    if not isinstance(steps, list) or not isinstance(values, list):
        return None
    pts = []
    for s, v in zip(steps, values):
        f = to_float(v)
        if isinstance(s, bool) or not isinstance(s, (int, float)) or f is None or not math.isfinite(s):
            continue
        pts.append((int(s), f))
    if not pts:
        return None
    pts.sort(key=lambda p: p[0])
    total = raw.get("total")
    return Series(name, [p[0] for p in pts], [p[1] for p in pts], total if isinstance(total, int) else len(pts))


class Scale:
    """y -> pixel. kind: linear | log | symlog."""

    def __init__(self, finite_values: list[float], top: float, bottom: float) -> None:
        self.top, self.bottom = top, bottom
        nonzero = [abs(v) for v in finite_values if v != 0]
        self.kind = "linear"
        self.c = 1.0
        if finite_values and nonzero and max(nonzero) / min(nonzero) > LOG_SPAN:
            self.kind = "log" if min(finite_values) > 0 else "symlog"
            # symlog is linear below c: a decade under the smallest value keeps those values off the floor
            self.c = min(nonzero) / SYMLOG_HEADROOM
        tv = [self.t(v) for v in finite_values] or [0.0, 1.0]
        lo, hi = min(tv), max(tv)
        if self.kind == "linear" and 0 <= lo < hi * LINEAR_ZERO_SNAP:
            lo = 0.0  # a floor close to zero reads better from zero
        if hi - lo < 1e-12:
            pad = abs(hi) * 0.1 or 1.0
            lo, hi = lo - pad, hi + pad
        pad = (hi - lo) * 0.05
        self.lo, self.hi = lo - (pad if lo != 0 else 0), hi + pad

    def t(self, v: float) -> float:
        if self.kind == "log":
            return math.log10(v)
        if self.kind == "symlog":
            return math.copysign(math.log10(1 + abs(v) / self.c), v)
        return v

    def y(self, v: float) -> float:
        frac = (self.t(v) - self.lo) / (self.hi - self.lo)
        return self.bottom - frac * (self.bottom - self.top)

    def ticks(self) -> list[float]:
        if self.kind == "linear":
            return nice_ticks(self.lo, self.hi)
        if self.kind == "log":
            e0, e1 = math.floor(self.lo), math.ceil(self.hi)
            stride = max(1, math.ceil((e1 - e0) / 5))
            return [10.0 ** e for e in range(e0, e1 + 1, stride) if self.lo <= e <= self.hi]
        # symlog: 0 and +-powers of ten at or above the linear threshold
        base = math.floor(math.log10(self.c))
        out = [0.0] if self.lo <= 0 <= self.hi else []
        mags = []
        for sign in (1, -1):
            for e in range(base, min(base + 400, 308)):
                v = sign * 10.0 ** e
                tv = self.t(v)
                if tv > self.hi or tv < self.lo:
                    break
                mags.append(v)
        stride = max(1, math.ceil(len(mags) / 5))
        return out + sorted(mags, key=abs)[::stride]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0 or not math.isfinite(span):
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


@dataclass
class Marker:
    step: int
    label: str
    kind: str  # onset | ckpt-clean | ckpt-bad | ckpt-last-clean | ckpt


@dataclass
class Panel:
    title: str
    svg: Markup
    scale: str
    points: int
    totals: dict[str, int] = field(default_factory=dict)
    nonfinite: int = 0


def _decimate_px(pts: list[tuple[float, float, int, float]]) -> list[tuple[float, float]]:
    """Min and max y per pixel column (in step order): what a viewer could ever see."""
    out: list[tuple[float, float]] = []
    col: list[tuple[float, float, int, float]] = []

    def flush() -> None:
        if len(col) <= 2:
            out.extend((c[0], c[1]) for c in col)
        else:
            ends = {min(col, key=lambda c: c[1]), max(col, key=lambda c: c[1])}
            out.extend((c[0], c[1]) for c in sorted(ends, key=lambda c: c[2]))

    for p in pts:
        if col and int(p[0]) != int(col[0][0]):
            flush()
            col = []
        col.append(p)
    if col:
        flush()
    return out


def _polylines(s: Series, x, scale: Scale) -> tuple[list[list[tuple[float, float]]], list[tuple[float, str, int]]]:
    """Line segments broken at non-finite points; non-finite marks (x, kind, count) deduped per pixel."""
    segments: list[list[tuple[float, float]]] = []
    cur: list[tuple[float, float, int, float]] = []
    marks: dict[tuple[int, str], int] = {}
    for i, (st, v) in enumerate(zip(s.steps, s.values)):
        px = x(st)
        if math.isfinite(v):
            cur.append((px, scale.y(v), i, v))
        else:
            kind = "nan" if math.isnan(v) else ("posinf" if v > 0 else "neginf")
            marks[(int(px), kind)] = marks.get((int(px), kind), 0) + 1
            if cur:
                segments.append(_decimate_px(cur))
                cur = []
    if cur:
        segments.append(_decimate_px(cur))
    return segments, [(float(k[0]), k[1], n) for k, n in marks.items()]


def _text(x: float, y: float, s: str, cls: str, anchor: str = "start") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}">{escape(s)}</text>'


def draw_panel(title: str, series: list[Series], x_domain: tuple[int, int], markers: list[Marker],
               color_of: dict[str, str]) -> Panel:
    x0, x1 = x_domain
    if x1 <= x0:
        x1 = x0 + 1
    plot_top, plot_bottom = TOP + NF_STRIP + 2, HEIGHT - BOTTOM

    def x(step: float) -> float:
        return LEFT + (step - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    finite = [v for s in series for _, v in s.finite]
    scale = Scale(finite, plot_top, plot_bottom)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" class="chart" role="img" '
              f'aria-label="{escape(title)} over steps">')]
    # grid and y ticks
    last_y = math.inf
    for tv in sorted(scale.ticks()):
        y = scale.y(tv)
        if plot_top - 0.5 <= y <= plot_bottom + 0.5 and last_y - y >= MIN_TICK_GAP:
            last_y = y
            parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
            parts.append(_text(LEFT - 4, y + 3.5, fmt(tv), "tick", "end"))
    for tx in nice_ticks(x0, x1, 8):
        if x0 <= tx <= x1:
            parts.append(_text(x(tx), HEIGHT - 8, fmt(round(tx)), "tick", "middle"))
    parts.append(f'<rect x="{LEFT}" y="{plot_top}" width="{WIDTH - LEFT - RIGHT}" height="{plot_bottom - plot_top}" class="frame"/>')
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{NF_STRIP}" class="nfstrip"/>')
    # markers: checkpoints and onset, under the lines
    labelled = sum(1 for m in markers if m.kind.startswith("ckpt")) <= MAX_LABELLED_CHECKPOINTS
    for m in markers:
        if not x0 <= m.step <= x1:
            continue
        mx = x(m.step)
        parts.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{plot_bottom}" class="mk {m.kind}">'
                     f'<title>{escape(m.label)}</title></line>')
        if m.kind == "onset":
            parts.append(_text(mx + 3, plot_top + 11, m.label, "mklabel onset"))
        elif labelled:
            parts.append(_text(mx - 2, plot_bottom - 4, m.label, f"mklabel {m.kind}", "end"))
    nonfinite = 0
    for s in series:
        color = color_of.get(s.name, EXTRA_COLOR)
        segments, marks = _polylines(s, x, scale)
        for seg in segments:
            if len(seg) == 1:
                px, py = seg[0]
                parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2" fill="{color}"/>')
                continue
            pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in seg)
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.4" '
                         f'class="series" data-metric="{escape(s.name)}"/>')
        for px, kind, n in marks:
            nonfinite += n
            label = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf"}[kind]
            parts.append(f'<rect x="{px - 1:.1f}" y="{TOP + 1}" width="2.4" height="{NF_STRIP - 2}" class="nf {kind}">'
                         f'<title>{escape(s.name)}: {label} x{n}</title></rect>')
    # title and legend
    legend_x = LEFT
    parts.append(_text(legend_x, 14, title, "ctitle"))
    legend_x += 9 + 7.5 * len(title)
    for s in series:
        color = color_of.get(s.name, EXTRA_COLOR)
        parts.append(f'<rect x="{legend_x:.1f}" y="7" width="12" height="4" fill="{color}"/>')
        label = s.name if s.total == len(s.steps) else f"{s.name} ({len(s.steps)} of {s.total} points)"
        parts.append(_text(legend_x + 16, 14, label, "legend"))
        legend_x += 24 + 6.5 * len(label)
    if scale.kind != "linear":
        parts.append(_text(WIDTH - RIGHT, 14, f"{scale.kind} scale", "scalenote", "end"))
    parts.append("</svg>")
    return Panel(title, Markup("".join(parts)), scale.kind, sum(len(s.steps) for s in series),
                 {s.name: s.total for s in series}, nonfinite)


def build_panels(series_raw: Any, markers: Iterable[Marker]) -> list[Panel]:
    """All panels on one shared step axis (the union of every charted series and marker)."""
    if not isinstance(series_raw, dict):
        return []
    loaded = {str(k): s for k, v in series_raw.items() if (s := load_series(v, str(k))) is not None}
    groups: list[tuple[str, list[Series]]] = []
    used: set[str] = set()
    colors = COLORS
    # a run logging no loss by that name (per-model or per-term losses only): those lead, in the loss panel's colours
    stand_ins = stand_in_losses({n: len(s.steps) for n, s in loaded.items()})
    if stand_ins:
        groups.append(("loss", [loaded[n] for n in stand_ins]))
        used.update(stand_ins)
        colors = {**COLORS, **dict(zip(stand_ins, STAND_IN_COLORS))}
    for title, names in PANELS:
        got = [loaded[n] for n in names if n in loaded]
        if got:
            groups.append((title, got))
            used.update(names)
    extra = [s for n, s in sorted(loaded.items())
             if n not in used and any(not math.isfinite(v) for v in s.values)]
    groups += [(s.name, [s]) for s in extra[:MAX_EXTRA_PANELS]]
    if not groups:
        return []
    markers = list(markers)
    steps = [st for _, ss in groups for s in ss for st in (s.steps[0], s.steps[-1])]
    lo, hi = min(steps), max(steps)
    lo = min([lo] + [m.step for m in markers if m.kind == "onset"])
    return [draw_panel(t, ss, (lo, hi), markers, colors) for t, ss in groups]

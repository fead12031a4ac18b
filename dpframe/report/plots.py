"""The charts of a whole analysis (``dpframe report`` on a file of many queries), built on the
small SVG builder (:mod:`dpframe.report.svg`): each kind of released table drawn as it is read.

* :func:`edge_bars` — a histogram: one bar over each bin's public edges on the column's axis,
  its height the noisy count, a whisker over the count's interval;
* :func:`count_bars` — counts by one key: one horizontal bar per key, whiskers over intervals;
* :func:`heatmap` — a statistic by two keys: a grid of cells shaded by value, each with its
  value and interval written in it;
* :func:`dot_chart` — statistics per group (means, sums, …): a dot at the value and a whisker
  over the interval, on an axis fitted to what is drawn (the declared bounds are stated in the
  legend, not forced on the axis where they would squeeze the intervals to a point);
* :func:`axis_marks` — quantiles: marks on the column's axis, drawn at its declared bounds;
* :func:`matrix` — a correlation matrix: cells shaded from −1 (red) to 1 (blue), each with its
  value and interval.

Values are public (released); nothing here reads data. A missing value (None) draws no mark
and is written ``-``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dpframe.report.svg import AXIS, INTERVAL, ON_BOUND, VALUE, el, esc, fmt, svg

__all__ = ["Bar", "axis_marks", "count_bars", "dot_chart", "edge_bars", "heatmap", "matrix",
           "short", "ticks"]

WHISKER = "#333"
_FONT = "sans-serif"


@dataclass(frozen=True)
class Bar:
    """One released value with its label and interval (None where none was released)."""

    label: str
    value: float | None
    lower: float | None = None
    upper: float | None = None

    def numbers(self) -> list[float]:
        return [x for x in (self.value, self.lower, self.upper)
                if x is not None and math.isfinite(x)]

    def tip(self) -> str:
        interval = (f" [{fmt(self.lower)}, {fmt(self.upper)}]"
                    if self.lower is not None and self.upper is not None else "")
        return f"{self.label}: {fmt(self.value)}{interval}"


def short(x: float | None) -> str:
    """A number for a chart: 4 significant digits, integers from 1,000 up with thousands
    separators (``51,506``), ``-`` for None."""
    if x is None or not math.isfinite(x):
        return fmt(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _value_text(b: Bar) -> str:
    if b.lower is None or b.upper is None:
        return short(b.value)
    return f"{short(b.value)}  [{short(b.lower)}, {short(b.upper)}]"


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11,
          fill: str = AXIS, weight: str | None = None) -> str:
    return el("text", {"x": x, "y": y, "font-size": size, "text-anchor": anchor, "fill": fill,
                       "font-family": _FONT, "font-weight": weight}, esc(text))


def ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round numbers (1, 2 or 5 × 10^k apart) within ``[lo, hi]``, at most ``most`` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(hi - lo)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9) * step
    count = math.floor((hi - first) / step + 1e-9) + 1
    return [round(first + i * step, 12) for i in range(max(count, 0))]


def _padded(numbers: Sequence[float], zero: bool) -> tuple[float, float]:
    """An axis over ``numbers`` with 5 % room each side (from 0 for bars)."""
    lo = min([*numbers, *([0.0] if zero else [])], default=0.0)
    hi = max([*numbers, *([0.0] if zero else [])], default=1.0)
    if hi <= lo:
        lo, hi = lo - max(abs(lo) * 0.1, 0.5), hi + max(abs(hi) * 0.1, 0.5)
    pad = (hi - lo) * 0.05
    return (lo if zero and lo == 0 else lo - pad), hi + pad


def _scale(lo: float, hi: float, a: float, b: float) -> Callable[[float], float]:
    def at(v: float) -> float:
        return a + (min(max(v, lo), hi) - lo) / (hi - lo) * (b - a)
    return at


def _x_axis(x: Callable[[float], float], lo: float, hi: float, y: float, top: float,
            most: int = 6) -> list[str]:
    """A horizontal axis at ``y`` with round ticks and faint grid lines up to ``top``."""
    parts = [el("line", {"x1": x(lo), "y1": y, "x2": x(hi), "y2": y, "stroke": AXIS})]
    for t in ticks(lo, hi, most):
        parts.append(el("line", {"x1": x(t), "y1": top, "x2": x(t), "y2": y,
                                 "stroke": "#e4e4e4"}))
        parts.append(_text(x(t), y + 13, short(t), "middle", size=10))
    return parts


def _whisker_h(x: Callable[[float], float], b: Bar, y: float, half: float = 4.0) -> list[str]:
    if b.lower is None or b.upper is None or not (math.isfinite(b.lower)
                                                  and math.isfinite(b.upper)):
        return []
    a, c = x(b.lower), x(b.upper)
    return [el("line", {"x1": a, "y1": y, "x2": c, "y2": y, "stroke": WHISKER,
                        "stroke-width": 1.5, "class": "dpf-whisker"}),
            el("line", {"x1": a, "y1": y - half, "x2": a, "y2": y + half, "stroke": WHISKER,
                        "stroke-width": 1.5}),
            el("line", {"x1": c, "y1": y - half, "x2": c, "y2": y + half, "stroke": WHISKER,
                        "stroke-width": 1.5})]


def _value_width(bars: Sequence[Bar]) -> int:
    """Room for the values written right of a chart (about 6.5 px a character)."""
    return max(190, min(240, 10 + int(6.5 * max([len(_value_text(b)) for b in bars] or [1]))))


def count_bars(bars: Sequence[Bar], *, label: str, width: int = 620) -> str:
    """One horizontal bar per key from 0 to its count, a whisker over its interval."""
    label_w = min(160, 14 + 7 * max([len(b.label[:24]) for b in bars] or [1]))
    value_w = _value_width(bars)
    x0, x1, row_h, top = label_w + 8, width - value_w - 16, 24, 8
    lo, hi = _padded([v for b in bars for v in b.numbers()], zero=True)
    x = _scale(lo, hi, x0, x1)
    height = top + row_h * len(bars) + 26
    axis_y = top + row_h * len(bars) + 4
    parts = _x_axis(x, lo, hi, axis_y, top)
    for i, b in enumerate(bars):
        y = top + i * row_h + row_h / 2
        mark = [] if b.value is None else [
            el("rect", {"x": x(min(0.0, b.value)), "y": y - 8,
                        "width": max(abs(x(b.value) - x(0.0)), 1.0), "height": 16.0,
                        "fill": INTERVAL if b.lower is not None else VALUE,
                        "class": "dpf-bar-value"})]
        parts.append(el("g", {"class": "dpf-row"}, el("title", None, esc(b.tip())),
                        _text(label_w, y + 4, b.label[:24], "end", fill="#222"), *mark,
                        *_whisker_h(x, b, y),
                        _text(x1 + 14, y + 4, _value_text(b), fill="#222")))
    parts.append(el("line", {"x1": x0, "y1": top, "x2": x0, "y2": axis_y, "stroke": AXIS}))
    return svg(width, height, label, *parts)


def edge_bars(bins: Sequence[tuple[float, float, Bar]], *, label: str, column: str,
              width: int = 620, height: int = 230, top: float | None = None) -> str:
    """A histogram: one bar over each ``(lower edge, upper edge, count)`` on the column's
    axis, a whisker over the count's interval; the edges are the axis' ticks. ``top``: the
    count axis' end (shared by the panels of a histogram per group)."""
    left, right, margin, bottom = 48, 14, 10, 36
    edges = sorted({e for lo, hi, _ in bins for e in (lo, hi) if math.isfinite(e)})
    if len(edges) < 2:
        edges = [0.0, 1.0]
    x = _scale(edges[0], edges[-1], left, width - right)
    vlo, vhi = _padded([v for _, _, b in bins for v in b.numbers()] + (
        [top] if top is not None and math.isfinite(top) else []), zero=True)
    y = _scale(vlo, vhi, height - bottom, margin)
    parts: list[str] = []
    for t in ticks(vlo, vhi, 5):
        parts.append(el("line", {"x1": left, "y1": y(t), "x2": width - right, "y2": y(t),
                                 "stroke": "#e4e4e4"}))
        parts.append(_text(left - 4, y(t) + 3, short(t), "end", size=10))
    for lo, hi, b in bins:
        if b.value is None or not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        a, c = x(lo), x(hi)
        mid = (a + c) / 2
        whisker = [] if b.lower is None or b.upper is None else [
            el("line", {"x1": mid, "y1": y(b.lower), "x2": mid, "y2": y(b.upper),
                        "stroke": WHISKER, "stroke-width": 1.5, "class": "dpf-whisker"}),
            el("line", {"x1": mid - 5, "y1": y(b.lower), "x2": mid + 5, "y2": y(b.lower),
                        "stroke": WHISKER, "stroke-width": 1.5}),
            el("line", {"x1": mid - 5, "y1": y(b.upper), "x2": mid + 5, "y2": y(b.upper),
                        "stroke": WHISKER, "stroke-width": 1.5})]
        parts.append(el("g", {"class": "dpf-row"}, el("title", None, esc(b.tip())),
                        el("rect", {"x": a + 0.5, "y": y(max(b.value, 0.0)),
                                    "width": max(c - a - 1.0, 1.0),
                                    "height": max(abs(y(0.0) - y(b.value)), 1.0),
                                    "fill": INTERVAL, "stroke": VALUE, "class": "dpf-bin"}),
                        *whisker))
    base = height - bottom
    parts.append(el("line", {"x1": left, "y1": base, "x2": width - right, "y2": base,
                             "stroke": AXIS}))
    for e in edges:
        parts.append(el("line", {"x1": x(e), "y1": base, "x2": x(e), "y2": base + 4,
                                 "stroke": AXIS}))
        parts.append(_text(x(e), base + 15, short(e), "middle", size=10))
    parts.append(_text((left + width - right) / 2, height - 4, column, "middle", size=11,
                       fill="#222"))
    return svg(width, height, label, *parts)


def dot_chart(bars: Sequence[Bar], *, label: str, width: int = 620,
              bounds: tuple[float, float] | None = None, label_width: int | None = None) -> str:
    """A dot at each value and a whisker over its interval, on one axis fitted to what is
    drawn; a value exactly on a declared bound (``bounds``) in red. ``label_width``: room for
    the row labels (fitted to them when None)."""
    label_w = label_width or min(160, 14 + 7 * max([len(b.label[:24]) for b in bars] or [1]))
    value_w = _value_width(bars)
    x0, x1, row_h, top = label_w + 12, width - value_w - 16, 24, 8
    lo, hi = _padded([v for b in bars for v in b.numbers()], zero=False)
    x = _scale(lo, hi, x0, x1)
    axis_y = top + row_h * len(bars) + 4
    parts = _x_axis(x, lo, hi, axis_y, top, most=6)
    for i, b in enumerate(bars):
        y = top + i * row_h + row_h / 2
        on_bound = bounds is not None and b.value is not None and b.value in bounds
        dot = [] if b.value is None else [el("circle", {
            "cx": x(b.value), "cy": y, "r": 4.5, "fill": ON_BOUND if on_bound else VALUE,
            "class": "dpf-value"})]
        parts.append(el("g", {"class": "dpf-row" + (" dpf-on-bound" if on_bound else "")},
                        el("title", None, esc(b.tip() + ("  (on a declared bound)"
                                                         if on_bound else ""))),
                        _text(label_w, y + 4, b.label[:24], "end", fill="#222"),
                        *_whisker_h(x, b, y), *dot,
                        _text(x1 + 14, y + 4, _value_text(b), fill=ON_BOUND if on_bound
                              else "#222")))
    return svg(width, axis_y + 22, label, *parts)


def axis_marks(marks: Sequence[Bar], *, label: str, column: str,
               bounds: tuple[float, float] | None, width: int = 620) -> str:
    """Quantiles on the column's axis: the axis runs over the declared ``bounds`` (else over
    what is drawn); each mark a tick labelled with its level above and its value below."""
    nums = [v for b in marks for v in b.numbers()]
    lo, hi = bounds if bounds is not None and bounds[1] > bounds[0] else _padded(nums, False)
    left, right = 24, 24
    x = _scale(lo, hi, left, width - right)
    axis_y, height = 58, 96
    parts = [el("rect", {"x": left, "y": axis_y - 6, "width": width - left - right,
                         "height": 12.0, "fill": "#eef2f7"})]
    parts += _x_axis(x, lo, hi, axis_y + 6, axis_y - 6)
    for i, b in enumerate(marks):
        if b.value is None:
            continue
        cx = x(b.value)
        lift = 14 * (i % 2)  # neighbouring labels alternate heights so close marks stay legible
        parts.append(el("g", {"class": "dpf-row"}, el("title", None, esc(b.tip())),
                        *_whisker_h(x, b, axis_y, half=6),
                        el("line", {"x1": cx, "y1": axis_y - 10, "x2": cx, "y2": axis_y + 10,
                                    "stroke": VALUE, "stroke-width": 3, "class": "dpf-value"}),
                        _text(cx, axis_y - 16 - lift, f"{b.label}: {short(b.value)}", "middle",
                              fill="#222")))
    parts.append(_text(width / 2, height - 2, column, "middle", fill="#222"))
    return svg(width, height, label, *parts)


def _blend(c1: str, c2: str, t: float) -> str:
    a = [int(c1[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(c2[i:i + 2], 16) for i in (1, 3, 5)]
    t = min(max(t, 0.0), 1.0)
    return "#" + "".join(f"{round(p + (q - p) * t):02x}" for p, q in zip(a, b, strict=True))


def _dark(colour: str) -> bool:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 140


def _grid(rows: Sequence[str], cols: Sequence[str], cells: dict[tuple[str, str], Bar],
          shade: Callable[[float], str], label: str, width: int) -> str:
    row_w = min(150, 16 + 7 * max([len(r[:22]) for r in rows] or [1]))
    cell_w = max(min((width - row_w - 8) / max(len(cols), 1), 170.0), 60.0)
    fits = int(cell_w / 6.5)  # characters of a column label that fit over its cell
    crowded = any(len(c) > fits for c in cols)
    cell_h, top = 44, 36 if crowded else 22
    width = int(row_w + cell_w * len(cols) + 8)
    # crowded labels alternate between two lines, each up to two cells wide
    parts = [el("g", None, el("title", None, esc(c)), _text(
        row_w + (j + 0.5) * cell_w, top - 8 - (14 if crowded and j % 2 else 0),
        c if len(c) <= (2 * fits if crowded else fits) else c[:2 * fits - 1] + "…",
        "middle", fill="#222")) for j, c in enumerate(cols)]
    for i, r in enumerate(rows):
        y = top + i * cell_h
        parts.append(_text(row_w - 6, y + cell_h / 2 + 4, r[:22], "end", fill="#222"))
        for j, c in enumerate(cols):
            b = cells.get((r, c))
            fill = "#f4f4f4" if b is None or b.value is None else shade(b.value)
            ink = "#fff" if _dark(fill) else "#222"
            both = b is not None and b.lower is not None and b.upper is not None
            text = [] if b is None else [
                _text(row_w + (j + 0.5) * cell_w, y + (19 if both else 25), short(b.value),
                      "middle", size=12, fill=ink, weight="600")]
            if b is not None and both:
                text.append(_text(row_w + (j + 0.5) * cell_w, y + 34,
                                  f"[{short(b.lower)}, {short(b.upper)}]", "middle", size=10,
                                  fill=ink))
            parts.append(el("g", {"class": "dpf-cell"},
                            el("title", None, esc(b.tip() if b else f"{r}, {c}: -")),
                            el("rect", {"x": row_w + j * cell_w, "y": y,
                                        "width": cell_w - 2, "height": float(cell_h - 2),
                                        "fill": fill}), *text))
    return svg(width, top + cell_h * len(rows) + 4, label, *parts)


def heatmap(rows: Sequence[str], cols: Sequence[str], cells: dict[tuple[str, str], Bar], *,
            label: str, width: int = 620) -> str:
    """A statistic by two keys: rows are the first key's values, columns the second's; each
    cell shaded from light (0, or the smallest value when one is negative) to dark blue (the
    largest) with its value and interval."""
    nums = [b.value for b in cells.values() if b.value is not None and math.isfinite(b.value)]
    lo, hi = (min([0.0, *nums]), max(nums)) if nums else (0.0, 1.0)

    def shade(v: float) -> str:
        return _blend("#f2f7fc", VALUE, (v - lo) / (hi - lo) if hi > lo else 0.5)

    return _grid(rows, cols, cells, shade, label, width)


def matrix(rows: Sequence[str], cols: Sequence[str], cells: dict[tuple[str, str], Bar], *,
           label: str, width: int = 620) -> str:
    """A correlation matrix: cells shaded red (−1) through white (0) to blue (1), each with
    its value and interval."""
    def shade(v: float) -> str:
        return _blend("#ffffff", VALUE if v >= 0 else ON_BOUND, min(abs(v), 1.0) * 0.85)

    return _grid(rows, cols, cells, shade, label, width)

"""A tiny SVG builder for dpframe's pictures (notebook views and the steward's report page).

Every picture is inline markup for an HTML page (no ``xmlns``: HTML places ``<svg>`` in the SVG
namespace itself): no script, no stylesheet or font from elsewhere, no URL, so a
page renders offline and a saved page stays complete. Text and attribute values are
HTML-escaped here, once (names of columns and keys come from users); numbers are written with
at most 6 significant digits.

Two pictures: :func:`interval_chart` (one row per released value: a dot at the value, a bar
over its confidence interval where one was released, the axis drawn at the declared bounds,
a value on a bound marked) and :func:`bar_chart` (one bar per label against a total, e.g. ε
spent per release against the budget).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["IntervalRow", "bar_chart", "el", "esc", "fmt", "interval_chart", "svg"]

#: colours: value, interval, a value on a bound, axis and text
VALUE, INTERVAL, ON_BOUND, AXIS = "#1f5fa8", "#9cc3ea", "#c0392b", "#555"


def esc(text: object) -> str:
    """``text`` as HTML/SVG text or attribute value (``& < > " '`` escaped)."""
    return escape(str(text), quote=True)


def fmt(x: float | None) -> str:
    """A number for a label: 6 significant digits, ``-`` for None, ``±∞`` spelled out."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g}"


def el(name: str, attrs: Mapping[str, object] | None = None, *children: str) -> str:
    """One element; attribute values escaped (floats rounded to 0.01 px), children are
    markup already built (escape text with :func:`esc`)."""
    parts = [name]
    for k, v in (attrs or {}).items():
        if v is None:
            continue
        value = f"{v:.2f}".rstrip("0").rstrip(".") if isinstance(v, float) else v
        parts.append(f'{k}="{esc(value)}"')
    head = " ".join(parts)
    return f"<{head}>{''.join(children)}</{name}>" if children else f"<{head}/>"


def svg(width: float, height: float, label: str, *children: str) -> str:
    """The root element: fixed size, ``role="img"`` and ``label`` for screen readers."""
    return el("svg", {"width": width, "height": height,
                      "viewBox": f"0 0 {width:g} {height:g}", "role": "img",
                      "aria-label": label, "class": "dpf-chart"},
              el("title", None, esc(label)), *children)


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11,
          fill: str = AXIS, cls: str | None = None) -> str:
    return el("text", {"x": x, "y": y, "font-size": size, "text-anchor": anchor, "fill": fill,
                       "font-family": "sans-serif", "class": cls}, esc(text))


@dataclass(frozen=True)
class IntervalRow:
    """One released value: its label (a group key, a bin), value, and interval (None where
    no interval was released)."""

    label: str
    value: float
    lower: float | None = None
    upper: float | None = None


def _span(rows: Sequence[IntervalRow], bounds: tuple[float, float] | None
          ) -> tuple[float, float]:
    """The axis: the declared bounds when given, else 0 to the largest number drawn."""
    if bounds is not None and all(map(math.isfinite, bounds)) and bounds[1] > bounds[0]:
        return float(bounds[0]), float(bounds[1])
    nums = [x for r in rows for x in (r.value, r.lower, r.upper)
            if x is not None and math.isfinite(x)]
    lo, hi = min([0.0, *nums]), max([0.0, *nums])
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def interval_chart(rows: Sequence[IntervalRow], *, bounds: tuple[float, float] | None,
                   label: str, width: int = 560, label_width: int = 120) -> str:
    """One row per value on a common axis: a dot at the value, a bar over the interval, and
    the axis' ends labelled; with ``bounds`` (the statistic's declared range) the axis is
    the range and a value exactly on an end is drawn in red with "on bound"."""
    lo, hi = _span(rows, bounds)
    label_w, value_w, row_h = label_width, 150, 22
    x0, x1 = label_w + 8, width - value_w - 8

    def x(v: float) -> float:
        return x0 + (min(max(v, lo), hi) - lo) / (hi - lo) * (x1 - x0)

    height = 28 + row_h * len(rows)
    parts = [el("line", {"x1": x0, "y1": 8, "x2": x0, "y2": height - 18, "stroke": AXIS}),
             el("line", {"x1": x1, "y1": 8, "x2": x1, "y2": height - 18, "stroke": AXIS}),
             _text(x0, height - 4, fmt(lo), "middle", cls="dpf-axis-lo"),
             _text(x1, height - 4, fmt(hi), "middle", cls="dpf-axis-hi")]
    for i, r in enumerate(rows):
        y = 16 + i * row_h
        on_bound = bounds is not None and r.value in (lo, hi)
        tip = f"{r.label}: {fmt(r.value)}" + (
            f" [{fmt(r.lower)}, {fmt(r.upper)}]" if r.lower is not None else "")
        parts.append(el("g", {"class": "dpf-row" + (" dpf-on-bound" if on_bound else "")},
                        el("title", None, esc(tip)),
                        _text(label_w, y + 4, r.label[:22], "end"),
                        *_interval(r, x, y),
                        el("circle", {"cx": x(r.value), "cy": y, "r": 4.5,
                                      "fill": ON_BOUND if on_bound else VALUE,
                                      "class": "dpf-value"}),
                        _text(x1 + 10, y + 4, fmt(r.value) + ("  on bound" if on_bound else ""),
                              fill=ON_BOUND if on_bound else "#222")))
    return svg(width, height, label, *parts)


def _interval(r: IntervalRow, x: object, y: float) -> list[str]:
    if r.lower is None or r.upper is None or not (math.isfinite(r.lower)
                                                  and math.isfinite(r.upper)):
        return []
    a, b = x(r.lower), x(r.upper)  # type: ignore[operator]
    return [el("rect", {"x": a, "y": y - 3.5, "width": max(b - a, 1.0), "height": 7.0,
                        "rx": 3, "fill": INTERVAL, "class": "dpf-interval"})]


def bar_chart(items: Sequence[tuple[str, float]], *, total: float | None, label: str,
              width: int = 560, label_width: int = 120) -> str:
    """One bar per ``(label, amount)``; the axis runs to ``total`` when given (a budget) and
    to the largest amount otherwise."""
    top = max([total or 0.0, *[a for _, a in items], 1e-300])
    label_w, value_w, row_h = label_width, 110, 20
    x0, x1 = label_w + 8, width - value_w - 8
    height = 24 + row_h * len(items)
    parts = [el("line", {"x1": x0, "y1": 4, "x2": x0, "y2": height - 16, "stroke": AXIS}),
             _text(x1, height - 2, fmt(top) + (" (budget)" if total else ""), "middle")]
    if total:
        parts.append(el("line", {"x1": x1, "y1": 4, "x2": x1, "y2": height - 16,
                                 "stroke": AXIS, "stroke-dasharray": "3 3"}))
    for i, (name, amount) in enumerate(items):
        y = 6 + i * row_h
        w = max(0.0, min(amount, top)) / top * (x1 - x0)
        parts.append(el("g", {"class": "dpf-bar"},
                        _text(label_w, y + 11, name[:label_w // 6], "end"),
                        el("rect", {"x": x0, "y": y + 2, "width": max(w, 1.0), "height": 12.0,
                                    "fill": VALUE}),
                        _text(x0 + w + 6, y + 12, fmt(amount))))
    return svg(width, height, label, *parts)

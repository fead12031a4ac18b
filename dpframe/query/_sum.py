"""The sum of a bounded column (``dpf.sum(col)``, ``frame.dp.sum``): :class:`Sum`."""

from __future__ import annotations

import math

import numpy as np

from dpframe.query._aggregates import Agg
from dpframe.query._exact import (
    frac,
    interval_sensitivity,
    round_down,
    round_up,
    width,
)
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    require_bounds,
    scaled,
    single_interval,
)

__all__ = ["Sum", "sum"]


class Sum(Query):
    r"""Sum of a bounded column.

    *Public size.* Write Σx = n·l + Σ(x − l). ``n·l`` is public, and ``Σ(x − l)`` lies in
    ``[0, n·w]``; replacing one row changes one term ``x − l ∈ [0, w]`` by at most ``w``, so
    Δ = w = u − l. The sum is released in these shifted coordinates (exact in floating point:
    a fixed-point integer times a power of two below 2⁵³) and ``n·l`` is added afterwards, which
    is post-processing. Domain of the answer ``[n·l, n·u]``.

    *Private size.* An add or remove changes Σx by one value, at most ``max(|l|, |u|)``; a
    replace by at most ``w``. Δ = max(w, |l|, |u|). (The add/remove-only figure
    ``max(|l|, |u|)`` is too small when ``l < 0 < u``: a replacement from ``l`` to ``u`` moves
    the sum by ``w``.) Domain ``[0, ∞)`` when ``l ≥ 0``, ``(−∞, 0]`` when ``u ≤ 0``, else the
    real line.

    *Add/remove neighbours* (``dpf.protect(..., neighbours="add_remove")``): the data sets
    differ by one row added or removed, never replaced, so Δ = max(|l|, |u|) (the added or
    removed value, clamped to ``[l, u]``). Its magnitude bound is the declared ``max_rows``
    times the same, never ``n``.
    """

    kind = "sum"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = require_bounds(ctx, "sum")
        w = width((lo, hi))
        n = ctx.n
        if ctx.size_public and not ctx.grouped:
            up = round_up(n * w)
            agg = Agg("sum", self.column, ctx.fixed_point(lo, False))
            m = Measurement("sum", scaled(agg), interval_sensitivity(w, 0.0, up), 0.0, up,
                            1.0, (agg,))
            base_lo, base_hi = round_down(n * frac(lo)), round_up(n * frac(hi))
            offset = n * frac(lo)

            def fin(v: dict[str, np.ndarray]) -> np.ndarray:
                return np.clip(float(offset) + v["sum"], base_lo, base_hi)

            return Plan("sum", self.column, (m,), fin, "shifted sum Σ(x−l) + n·l (public n)",
                        public_size=True,
                        interval=single_interval("sum", base_lo, base_hi, offset=float(offset)))
        extreme = max(abs(frac(lo)), abs(frac(hi)))
        delta = extreme if ctx.add_remove else max(w, extreme)
        d_lo = 0.0 if lo >= 0 else -math.inf
        d_hi = 0.0 if hi <= 0 else math.inf
        mag = round_up(n * max(abs(frac(lo)), abs(frac(hi))))
        agg = Agg("sum", self.column, ctx.fixed_point(0.0, False))
        m = Measurement("sum", scaled(agg), round_up(delta), d_lo, d_hi, 1.0, (agg,), mag)
        return Plan("sum", self.column, (m,), lambda v: np.clip(v["sum"], d_lo, d_hi),
                    "direct sum, add/remove sensitivity max(|l|, |u|) (add/remove neighbours)"
                    if ctx.add_remove else
                    "direct sum, add/remove/replace sensitivity (private size)",
                    interval=single_interval("sum", d_lo, d_hi))


def sum(column: str) -> Sum:
    """Query builder: sum of ``column``."""
    return Sum(column)

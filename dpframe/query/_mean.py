"""The mean of a bounded column (``dpf.mean(col)``, ``frame.dp.mean``): :class:`Mean`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dpframe.query._aggregates import Agg
from dpframe.query._exact import (
    center,
    frac,
    quotient_sensitivity,
    round_up,
    width,
)
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    clip_one,
    composed,
    require_bounds,
    rows_of,
    scaled,
    single_interval,
)

__all__ = ["Mean", "mean"]


class Mean(Query):
    r"""Mean of a bounded column.

    *Public size.* mean = l + Σ(x − l)/n; the second term lies in ``[0, w]`` and one
    replacement moves it by at most ``w/n``. Released in these shifted coordinates with
    Δ = w/n + 2⁻⁵²·w (the rounding slack of the quotient, see module docstring), then ``l`` is
    added and the answer kept in ``[l, u]`` (post-processing).

    *Private size.* Size-free formulation: a noisy count N (Δ = 1, ε/2) and a noisy centred sum
    S = Σ(x − c), c = (l + u)/2 (ε/2). Each centred term lies in ``[−w/2, w/2]``: add/remove
    moves S by ≤ w/2, replace by ≤ w, so Δ = w; domain the real line (a bounded domain as wide
    as ``n·w`` would double the bounded mechanism's scale, Holohan Fig. 3). The answer
    c + S/max(N, 1), clamped to ``[l, u]``, is post-processing of two ε/2 releases.
    Centring makes the sum's sensitivity w instead of max(|l|, |u|), which matters for bounds
    far from zero.

    *Add/remove neighbours* (``dpf.protect(..., neighbours="add_remove")``): no row is ever
    replaced, so S moves by at most one centred term: Δ_S = w/2 (rounded up), Δ_N = 1; the
    size-free formulation above, with the declared ``max_rows`` for the grid.
    """

    kind = "mean"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = require_bounds(ctx, "mean")
        w = width((lo, hi))
        if ctx.size_public and not ctx.grouped:
            n = ctx.n
            wf = round_up(w)
            agg = Agg("sum", self.column, ctx.fixed_point(lo, False))
            q_num, q_den = agg.scale.as_integer_ratio()

            def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
                # k·q/n correctly rounded: Python's int / int rounds correctly (as
                # float(Fraction) does, by the same division)
                return np.array([int(k) * q_num / (q_den * n) for k in a[agg].tolist()])

            m = Measurement("mean", stat, quotient_sensitivity(w, n), 0.0, wf, 1.0, (agg,))

            def shifted(v: dict[str, np.ndarray]) -> np.ndarray:
                noisy = v["mean"]
                if noisy.shape == (1,):  # one value: np.clip's result without its wrappers
                    return np.array([clip_one(lo + float(noisy[0]), lo, hi)])
                return np.clip(lo + noisy, lo, hi)

            return Plan("mean", self.column, (m,), shifted, "shifted mean l + Σ(x−l)/n (public n)",
                        public_size=True, interval=single_interval("mean", lo, hi, offset=lo))
        c = center(lo, hi)
        count_upper = float(ctx.count_cap)
        half = max(frac(hi) - frac(c), frac(c) - frac(lo))
        rows = ctx.rows()
        agg = Agg("sum", self.column, ctx.fixed_point(c, False))
        cnt = Measurement("count", rows_of(rows), 1.0, 0.0, count_upper, 0.5, (rows,))
        s = Measurement("sum", scaled(agg), round_up(half if ctx.add_remove else w),
                        -math.inf, math.inf, 0.5, (agg,), round_up(ctx.n * half))

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 1.0)
            return np.clip(c + v["sum"] / n_hat, lo, hi)

        return Plan("mean", self.column, (cnt, s), fin,
                    "noisy centred sum / noisy count, ε split 1/2 + 1/2 (private size" + (
                        ", add/remove neighbours)" if ctx.add_remove else ")"),
                    interval=composed("mean", center=c, lower=lo, upper=hi))


def mean(column: str) -> Mean:
    """Query builder: mean of ``column``."""
    return Mean(column)

"""The sample variance and standard deviation (ddof=1) of a bounded column
(``dpf.variance(col)``, ``dpf.std(col)``): :class:`Variance`, :class:`Std`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

import numpy as np

from dpframe.errors import UnsupportedInputError
from dpframe.query._aggregates import Agg
from dpframe.query._exact import (
    FP_SLACK,
    center,
    frac,
    interval_sensitivity,
    round_up,
    width,
)
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    composed,
    require_bounds,
    rows_of,
    scaled,
    single_interval,
)

__all__ = ["Std", "Variance", "std", "variance"]


class Variance(Query):
    r"""Sample variance with ``ddof=1`` (pandas' default).

    *Public size, sensitivity.* Let ``m`` be the mean of the ``n − 1`` rows that stay and
    ``a`` the replaced value. The sum of squared deviations splits as
    ``SS = Σ_stay (x − m)² + (n−1)/n · (a − m)²`` (add one point to a set of ``n−1`` points with
    mean ``m``), so ``V = SS/(n−1) = Σ_stay(x − m)²/(n−1) + (a − m)²/n``. Replacing ``a`` by
    ``b`` changes only the last term: ``|V' − V| = |(b − m)² − (a − m)²|/n ≤ w²/n`` because
    ``a, b, m ∈ [l, u]``; equality at ``m = a = l``, ``b = u`` (all other rows at ``l``). So
    Δ = w²/n, confirming Liu's Table 1 for ddof = 1 (verified by brute force in the tests).

    *Domain.* ``SS ≤ n·w²/4`` (Popoviciu: the population variance of values in ``[l, u]`` is at
    most w²/4), so ``V ∈ [0, w²/4 · n/(n − 1)]``, Liu's bound. Needs ``n ≥ 2``.

    *Private size (and per group).* Size-free: noisy N (Δ = 1), S = Σ(x − c) (Δ = w, as for the
    mean), SS = Σ(x − c)² with ``(x − c)² ∈ [0, w²/4]`` (add/remove/replace all move it by at
    most w²/4; domain ``[0, ∞)``), ε/3 each. Post-processing: ``N' = max(N, 2)``,
    ``var = (SS − S²/N')/(N' − 1)`` clamped to ``[0, w²/4 · N'/(N' − 1)]``.

    *Add/remove neighbours*: the same three releases; S moves by one centred term, Δ_S = w/2,
    SS by one squared term, Δ_SS = w²/4, N by 1.
    """

    kind = "variance"

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = require_bounds(ctx, self.kind)
        w = width((lo, hi))
        c = center(lo, hi)
        if ctx.size_public and not ctx.grouped:
            n = ctx.n
            if n < 2:
                raise UnsupportedInputError(
                    f"{self.kind} with ddof=1 needs at least 2 rows; the protected frame has "
                    f"{n}. Protect a larger frame."
                )
            vmax = w * w / 4 * Fraction(n, n - 1)
            up = round_up(vmax)
            delta = w * w / n + Fraction(FP_SLACK) * vmax
            fp = ctx.fixed_point(c, True)
            k_sum, k_sq = Agg("sum", self.column, fp), Agg("sum_sq", self.column, fp)
            q2 = Fraction(fp.q) ** 2

            def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
                return np.array([
                    float(q2 * (n * int(ss) - int(s) * int(s)) / (n * (n - 1)))
                    for s, ss in zip(a[k_sum], a[k_sq], strict=True)
                ])

            m = Measurement("variance", stat, interval_sensitivity(delta, 0.0, up), 0.0, up,
                            1.0, (k_sum, k_sq))
            return Plan(self.kind, self.column, (m,), self._post(lambda v: np.clip(
                v["variance"], 0.0, up)), "bounded-domain variance, ddof=1 (public n)",
                public_size=True,
                interval=single_interval("variance", 0.0, up, sqrt=self.kind == "std"))
        count_upper = float(ctx.count_cap)
        third = 1.0 / 3.0
        half = max(frac(hi) - frac(c), frac(c) - frac(lo))  # ≈ w/2; exact for float c
        rows = ctx.rows()
        fp = ctx.fixed_point(c, True)
        k_sum, k_sq = Agg("sum", self.column, fp), Agg("sum_sq", self.column, fp)
        cnt = Measurement("count", rows_of(rows), 1.0, 0.0, count_upper, third, (rows,))
        s = Measurement("sum", scaled(k_sum), round_up(half if ctx.add_remove else w),
                        -math.inf, math.inf, third, (k_sum,), round_up(ctx.n * half))
        ss = Measurement("sum_sq", scaled(k_sq), round_up(half * half), 0.0, math.inf, third,
                         (k_sq,), round_up(ctx.n * half * half))
        w2 = float(w * w) / 4

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            n_hat = np.maximum(v["count"], 2.0)
            var = (v["sum_sq"] - v["sum"] ** 2 / n_hat) / (n_hat - 1)
            return np.clip(var, 0.0, w2 * n_hat / (n_hat - 1))

        return Plan(self.kind, self.column, (cnt, s, ss), self._post(fin),
                    "noisy count, centred sum and sum of squares, ε split in thirds "
                    "(private size)", interval=composed(self.kind, lower=lo, upper=hi))

    def _post(self, f: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[
            [dict[str, np.ndarray]], np.ndarray]:
        return f


class Std(Variance):
    """Sample standard deviation (ddof=1): the square root of the released variance
    (post-processing, no extra budget). Same measurements as :class:`Variance`."""

    kind = "std"

    def _post(self, f: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[
            [dict[str, np.ndarray]], np.ndarray]:
        return lambda v: np.sqrt(np.maximum(f(v), 0.0))


def variance(column: str) -> Variance:
    """Query builder: sample variance (ddof=1) of ``column``."""
    return Variance(column)


def std(column: str) -> Std:
    """Query builder: sample standard deviation (ddof=1) of ``column``."""
    return Std(column)

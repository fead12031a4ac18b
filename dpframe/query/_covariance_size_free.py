r"""The size-free covariance and correlation matrix (``dpf.cov``/``dpf.corr`` on a data set
protected with ``neighbours="add_remove"``, whose row count is private).

Liu's element-wise plan (:class:`~dpframe.query._covariance.Covariance`) divides by the public
``n``. Without it, release the moments and post-process, as the private-size variance does
(:class:`~dpframe.query._variance.Variance`): with ``c_j`` the centre of column ``j``'s bounds,
``h_j = max(u_j − c_j, c_j − l_j)`` (≈ w_j/2) and ``y_j = x_j − c_j ∈ [−h_j, h_j]``:

* ``N`` (row count): one added or removed row moves it by 1 — Δ = 1, domain ``[0, max_rows]``;
* ``S_j = Σ y_j``: by one term, Δ = h_j, the real line;
* ``Q_j = Σ y_j²``: by one term in ``[0, h_j²]``, Δ = h_j², domain ``[0, ∞)``;
* ``P_jk = Σ y_j y_k``: by one term in ``[−h_j h_k, h_j h_k]``, Δ = h_j h_k, the real line.

All ``1 + p + p(p+1)/2`` releases share ε equally (sequential composition), from exact integer
sums on the columns' fixed-point grids (sized by the declared ``max_rows``). Post-processing:
``N' = max(N, 2)``, ``var_j = (Q_j − S_j²/N')/(N' − 1)`` clamped to
``[0, h_j²·N'/(N' − 1)]``, ``cov_jk = (P_jk − S_j S_k/N')/(N' − 1)``; the nearest PSD matrix
with those variances on its diagonal (Higham), and correlations from it. The interval is the
range post-processing can reach (``[−1, 1]`` for a correlation, ``±h_j h_k·2`` for a
covariance, ``[0, 2h_j²]`` for a variance): it always holds, and is wide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from dpframe.errors import PrivateSizeError
from dpframe.mechanisms import matrices as analyses
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._aggregates import Agg, FixedPoint
from dpframe.query._exact import center, frac, round_up
from dpframe.query._plans import Measurement, Plan, PlanContext, rows_of, scaled

__all__ = ["size_free_plan"]


def size_free_plan(kind: str, cols: Sequence[str], ctx: PlanContext) -> Plan:
    """The plan above for ``cols`` (``kind`` "cov" or "corr")."""
    bounds = ctx.all_bounds
    p = len(cols)
    weight = 1.0 / (1 + p + p * (p + 1) // 2)
    centres = {c: center(*bounds[c]) for c in cols}
    half = {c: max(frac(bounds[c][1]) - frac(centres[c]), frac(centres[c]) - frac(bounds[c][0]))
            for c in cols}
    if ctx.drops:
        raise PrivateSizeError(
            f"dp.{kind} reads rows where every column is present, and {', '.join(cols)} "
            "include a column that drops missing values (missing='drop'): declare a public "
            "fill at protect, e.g. missing='lower'. Nothing was read or spent."
        )
    ctx.require_row_cap(f"dp.{kind}")
    grids = {c: FixedPoint.choose(bounds[c][0], bounds[c][1], centres[c], max(ctx.n, 1), True)
             for c in cols}
    sums = {c: Agg("sum", c, grids[c]) for c in cols}
    rows = Agg("rows")
    cap = float(ctx.count_cap)
    out = [Measurement("count", rows_of(rows), 1.0, 0.0, cap, weight, (rows,))]
    for c in cols:
        out.append(Measurement(f"sum[{c}]", scaled(sums[c]), round_up(half[c]), -math.inf,
                               math.inf, weight, (sums[c],), round_up(ctx.n * half[c])))
        sq = Agg("sum_sq", c, grids[c])
        out.append(Measurement(f"sum_sq[{c}]", scaled(sq), round_up(half[c] ** 2), 0.0,
                               math.inf, weight, (sq,), round_up(ctx.n * half[c] ** 2)))
    for j in range(p):
        for k in range(j + 1, p):
            a, b = cols[j], cols[k]
            prod = Agg("sum_prod", a, grids[a], b, grids[b])
            h = half[a] * half[b]
            out.append(Measurement(f"sum_prod[{a},{b}]", scaled(prod), round_up(h),
                                   -math.inf, math.inf, weight, (prod,), round_up(ctx.n * h)))
    h2 = np.array([float(half[c] ** 2) for c in cols])

    def fin(v: dict[str, np.ndarray]) -> np.ndarray:
        n_hat = max(float(v["count"][0]), 2.0)
        s = np.array([float(v[f"sum[{c}]"][0]) for c in cols])
        mat = np.zeros((p, p))
        for j in range(p):
            q = float(v[f"sum_sq[{cols[j]}]"][0])
            mat[j, j] = min(max((q - s[j] ** 2 / n_hat) / (n_hat - 1), 0.0),
                            h2[j] * n_hat / (n_hat - 1))
            for k in range(j + 1, p):
                pr = float(v[f"sum_prod[{cols[j]},{cols[k]}]"][0])
                mat[j, k] = mat[k, j] = (pr - s[j] * s[k] / n_hat) / (n_hat - 1)
        cov = analyses.nearest_psd(mat, diagonal=np.diag(mat))
        return cov if kind == "cov" else analyses.correlation_from_covariance(cov)

    def interval(_m: Mapping[str, Mechanism | None], _v: Mapping[str, np.ndarray],
                 _level: float) -> tuple[np.ndarray, np.ndarray]:
        if kind == "corr":
            return np.full((p, p), -1.0), np.full((p, p), 1.0)
        reach = 2.0 * np.sqrt(np.outer(h2, h2))
        low = -reach.copy()
        np.fill_diagonal(low, 0.0)
        return low, reach

    return Plan(kind, None, tuple(out), fin,
                "size-free moments (noisy count, centred sums, squares and products, ε split "
                f"equally over {len(out)}; add/remove neighbours), then nearest PSD",
                columns=tuple(cols), interval=interval)

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
with those variances on its diagonal (Higham), and correlations from it.

*Interval* (``ci=``), per cell, for the data's sample statistic (``n ≥ 2`` rows; a correlation
where both variances are positive). Cell ``(j, k)`` is a function of ``m`` of the parts: the
covariance of ``N, S_j, S_k, P_jk`` (``m = 4``), a variance of ``N, S_j, Q_j`` (3), a
correlation ``C_jk/√(V_j V_k)`` with ``C_jk = P_jk − S_j S_k/N``, ``V_j = Q_j − S_j²/N`` of
``N, S_j, S_k, Q_j, Q_k, P_jk`` (6). Every part's exact interval is computed once, at level
``1 − α/M`` with ``M`` the most parts a cell uses (4 for cov, 6 for corr)
(:func:`~dpframe.mechanisms.intervals.confidence_interval`, test inversion of its own
mechanism): it holds with probability ``≥ 1 − α/M`` whatever the data, so by the union bound
(Bonferroni) the ``m ≤ M`` a cell uses hold at once with probability ``≥ 1 − mα/M ≥ 1 − α``,
for every data set. On that
event the true parts lie in the box of intervals, narrowed by what every data set satisfies
(``2 ≤ N ≤ max_rows``, ``|S_j| ≤ N h_j``, ``0 ≤ Q_j ≤ N h_j²``, ``|P_jk| ≤ N h_j h_k``,
``V_j ≥ 0``), so the true statistic lies in the formula's range over the box. Interval
arithmetic (each operation's exact range over its operands' intervals; ``N − 1 > 0``) encloses
that range; it is intersected with the range post-processing can reach, which always holds
(``[−1, 1]`` for a correlation, ``±2 h_j h_k`` for a covariance, ``[0, 2h_j²]`` for a variance,
as ``n/(n − 1) ≤ 2``). The interval therefore covers the true value with probability ``≥ 1 − α``
for every data set. Where the box leaves the reachable set (the event failed) or a part is
missing, the interval is the reachable range, which always holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from dpframe.errors import PrivateSizeError
from dpframe.mechanisms import matrices as analyses
from dpframe.mechanisms.intervals import component_level, confidence_interval
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

    def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
        return _cell_intervals(kind, cols, [float(x) for x in h2], cap, mechs, noisy, level)

    return Plan(kind, None, tuple(out), fin,
                "size-free moments (noisy count, centred sums, squares and products, ε split "
                f"equally over {len(out)}; add/remove neighbours), then nearest PSD",
                columns=tuple(cols), interval=interval)


#: an interval ``(lower, upper)`` of reals
Box = tuple[float, float]
#: the most parts one cell uses (module doc): every part's interval is at ``1 − α/m`` with it
_MOST_PARTS = {"cov": 4, "corr": 6}


def _reachable(kind: str, h2: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The range post-processing can reach, which holds for every data set (module doc)."""
    p = len(h2)
    if kind == "corr":
        return np.full((p, p), -1.0), np.full((p, p), 1.0)
    reach = 2.0 * np.sqrt(np.outer(h2, h2))
    low = -reach.copy()
    np.fill_diagonal(low, 0.0)
    return low, reach


def _part(name: str, mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
          level: float) -> Box | None:
    """The exact interval of one part at ``level`` (None: no mechanism or no finite value)."""
    mech = mechs.get(name)
    value = float(np.asarray(noisy.get(name, [math.nan]), dtype=float).ravel()[0])
    if mech is None or not math.isfinite(value):
        return None
    lo, hi = confidence_interval(mech, value, level, integer=name == "count")
    return float(lo), float(hi)


def _meet(a: Box, lo: float, hi: float) -> Box:
    return max(a[0], lo), min(a[1], hi)


def _mul(a: Box, b: Box) -> Box:
    c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(c), max(c)


def _square(a: Box) -> Box:
    ends = (a[0] * a[0], a[1] * a[1])
    return (0.0 if a[0] <= 0.0 <= a[1] else min(ends)), max(ends)


def _over_positive(a: Box, d: Box) -> Box:
    """``a / d`` for ``d`` a positive interval."""
    c = (a[0] / d[0], a[0] / d[1], a[1] / d[0], a[1] / d[1])
    return min(c), max(c)


def _minus(a: Box, b: Box) -> Box:
    return a[0] - b[1], a[1] - b[0]


def _ratio(c: Box, d: Box) -> Box:
    """``c / d`` for ``d`` a non-negative interval (unbounded where ``d`` reaches 0)."""
    if d[0] <= 0.0:
        return -math.inf, math.inf
    return _over_positive(c, d)


def _names(kind: str, a: str, b: str, diagonal: bool) -> list[str]:
    """The parts cell ``(a, b)`` is a function of (module doc)."""
    if diagonal:
        return ["count", f"sum[{a}]", f"sum_sq[{a}]"]
    names = ["count", f"sum[{a}]", f"sum[{b}]", f"sum_prod[{a},{b}]"]
    return names + ([f"sum_sq[{a}]", f"sum_sq[{b}]"] if kind == "corr" else [])


def _centred_square(q: Box, s: Box, n: Box, h2: float) -> Box:
    """``V = Q − S²/N ≥ 0`` over the box (``0 ≤ Q ≤ N h²``, ``|S| ≤ N h``)."""
    s = _meet(s, -n[1] * math.sqrt(h2), n[1] * math.sqrt(h2))
    lo, hi = _minus(_meet(q, 0.0, n[1] * h2), _over_positive(_square(s), n))
    return max(lo, 0.0), hi


def _cell(kind: str, a: str, b: str, h2: tuple[float, float], cap: float,
          boxes: Mapping[str, Box]) -> Box | None:
    """Cell ``(a, b)``'s enclosure over the parts' ``boxes`` (module doc), or None where the
    box leaves what every data set satisfies."""
    n = _meet(boxes["count"], 2.0, cap)
    if n[0] > n[1]:
        return None
    if a == b:  # a variance (a correlation's diagonal is 1)
        v = _centred_square(boxes[f"sum_sq[{a}]"], boxes[f"sum[{a}]"], n, h2[0])
        return _over_positive(v, (n[0] - 1.0, n[1] - 1.0)) if kind == "cov" else (1.0, 1.0)
    ha, hb = math.sqrt(h2[0]), math.sqrt(h2[1])
    s_a = _meet(boxes[f"sum[{a}]"], -n[1] * ha, n[1] * ha)
    s_b = _meet(boxes[f"sum[{b}]"], -n[1] * hb, n[1] * hb)
    pr = _meet(boxes[f"sum_prod[{a},{b}]"], -n[1] * ha * hb, n[1] * ha * hb)
    if min(s_a[1] - s_a[0], s_b[1] - s_b[0], pr[1] - pr[0]) < 0.0:
        return None
    c = _minus(pr, _over_positive(_mul(s_a, s_b), n))  # C = P − S_a S_b / N
    if kind == "cov":
        return _over_positive(c, (n[0] - 1.0, n[1] - 1.0))
    v_a = _centred_square(boxes[f"sum_sq[{a}]"], boxes[f"sum[{a}]"], n, h2[0])
    v_b = _centred_square(boxes[f"sum_sq[{b}]"], boxes[f"sum[{b}]"], n, h2[1])
    if v_a[0] > v_a[1] or v_b[0] > v_b[1]:
        return None
    return _ratio(c, (math.sqrt(v_a[0] * v_b[0]), math.sqrt(v_a[1] * v_b[1])))


def _cell_intervals(kind: str, cols: Sequence[str], h2: Sequence[float], cap: float,
                    mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                    level: float) -> tuple[np.ndarray, np.ndarray]:
    """Every cell's enclosure met with the reachable range (module doc); the reachable
    range where the enclosure cannot be formed or misses it."""
    low, high = _reachable(kind, h2)
    p = len(cols)
    each = component_level(level, _MOST_PARTS[kind], "bonferroni")
    parts = {name: _part(name, mechs, noisy, each) for name in mechs}
    for j in range(p):
        for k in range(j, p):
            a, b = cols[j], cols[k]
            if kind == "corr" and j == k:  # exactly 1 (module doc)
                low[j, j] = high[j, j] = 1.0
                continue
            names = _names(kind, a, b, j == k)
            known = {name: parts[name] for name in names if parts.get(name) is not None}
            box = (None if len(known) < len(names) else
                   _cell(kind, a, b, (h2[j], h2[k]), cap, known))  # type: ignore[arg-type]
            if box is None:
                continue
            lo, hi = max(box[0], low[j, k]), min(box[1], high[j, k])
            if lo <= hi:
                low[j, k] = low[k, j] = lo
                high[j, k] = high[k, j] = hi
    return low, high

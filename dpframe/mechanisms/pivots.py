r"""Joint confidence regions for ratios of two noisy releases (a Fieller-type pivot), the
exact law of the pivot's noise, and the hull of the confidence set. Pure arithmetic on public
scales and released values: no ε, no data.

**The pivot.** Two releases come from exact continuous draws ``X_S = S + e_S`` and
``X_N = N + e_N`` with independent plain Laplace noises ``e_S ~ Lap(b_S)``, ``e_N ~ Lap(b_N)``
(the plain and clamped mechanisms draw on the real line before clamping; Liu §3.1 calls
the clamped one BIT). For a hypothesised ratio ``θ = S/N`` (whatever ``S`` and ``N``),

    T_θ = X_S − θ·X_N = e_S − θ·e_N,

so the law of ``T_θ`` depends on ``θ`` only, not on the nuisance ``N``: a pivot (Fieller's
construction for a ratio of normal means, here with Laplace noise). With
``q(θ)`` the ``1 − α`` quantile of ``|e_S − θ e_N|``, the set
``{θ : |X_S − θ X_N| ≤ q(θ)}`` holds the true ratio with probability exactly ``1 − α``: one
level for the whole ratio instead of two Šidák levels for a box.

**The law of ``|A + C|``** for independent ``A ~ Lap(a)``, ``C ~ Lap(c)``: the convolution of
the two densities is ``(a e^{−|z|/a} − c e^{−|z|/c}) / (2(a² − c²))``, whose two tails give

    P(|A + C| > t) = (a² e^{−t/a} − c² e^{−t/c}) / (a² − c²)
                   = e^{−t/A} [1 + C·t·φ(t(A − C)/(AC)) / (A(A + C))],   A = max(a, c), C = min,

with ``φ(x) = (1 − e^{−x})/x`` (``φ(0) = 1``): the second form has no cancellation, gives
``e^{−t/A}(1 + t/(2A))`` at ``a = c`` and ``e^{−t/a}`` at ``c = 0``.

**Monotone in |θ|.** ``e_S`` and ``e_N`` have symmetric unimodal densities, so for a symmetric
interval ``[−t, t]`` the probability ``P(|e_S + k·e_N| ≤ t)`` is non-increasing in ``|k|``
(Anderson's theorem on symmetric unimodal laws); hence ``q(θ)`` is non-decreasing in ``|θ|``.
We tabulate ``Q(r)``, the quantile for ``a = 1``, ``c = r``, on a fine grid of ``r`` and use
the next grid value above ``r`` as a certified upper bound (and ``Q(r) = r·Q(1/r)`` beyond the
grid).

**The hull** (:func:`hull`). The confidence set need not be an interval; we return its hull.
A cell ``[θ₁, θ₂]`` is *certainly rejected* when a lower bound of the distance over the cell
exceeds the upper bound ``q(max|θ|)``; a gallop from each end of the domain advances over
certainly rejected cells (doubling the step) and halves the step otherwise, so everything
outside the returned ends is rejected: the hull is a superset of the confidence set, and the
coverage is kept exactly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

__all__ = ["PairQuantiles", "correlation_hull", "hull", "laplace_pair_tail",
           "laplace_triple_tail", "pair_quantiles", "ratio_hull", "triple_quantile_table",
           "triple_upper", "variance_hull"]

#: relative slack on the tail probability (float error of the closed form ≈ 1e-15)
_RTOL = 1e-9
_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 1e4, 6001)])  # ratio 1.0031 per step
_GALLOP_STEPS = 400
_SECTIONS = 4


def _upper_index(grid: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Index of a grid value ``≥ r`` — the smallest or the one after it — (``grid.size`` past
    the end or at NaN) for ``grid = [0] ∪ geomspace(g₁, g_last)``: a logarithm rounded up,
    then one step up if rounding left it below ``r``."""
    g1, step = grid[1], math.log(grid[2] / grid[1])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        j = np.ceil(np.log(np.maximum(r, g1) / g1) / step) + 1.0
    j = np.where(np.isnan(r) | (r > grid[-1]), grid.size, np.where(r <= 0, 0, j))
    j = np.clip(j, 0, grid.size).astype(np.intp)
    return np.where((j < grid.size) & (grid[np.minimum(j, grid.size - 1)] < r), j + 1, j)


def laplace_pair_tail(t: np.ndarray | float, a: np.ndarray | float,
                      c: np.ndarray | float) -> np.ndarray:
    """``P(|A + C| > t)`` for independent ``A ~ Lap(a)``, ``C ~ Lap(c)``, ``a > 0``, ``c ≥ 0``,
    ``t ≥ 0`` (module docstring; vectorised)."""
    t = np.asarray(t, dtype=float)
    big = np.maximum(a, c)
    small = np.minimum(a, c)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        x = t * (big - small) / (big * small)
        phi = np.where(x > 0, -np.expm1(-x) / np.where(x > 0, x, 1.0), 1.0)
        extra = np.where(small > 0, small * t * phi / (big * (big + small)), 0.0)
        return np.exp(-t / big) * (1.0 + extra)


class PairQuantiles:
    """``Q(r)``: the ``1 − α`` quantile of ``|L₁ + r·L₂|`` for independent standard Laplace
    ``L₁, L₂``, tabulated on ``r ∈ {0} ∪ [10⁻⁴, 10⁴]`` (each entry an upper bound: the tail
    there is ``≤ α(1 − 10⁻⁹)``). :meth:`upper` bounds ``Q`` from above at any ``r ≥ 0``."""

    def __init__(self, alpha: float) -> None:
        self.alpha = float(alpha)
        r = _GRID
        big = np.maximum(1.0, r)
        target = self.alpha * (1.0 - _RTOL)
        lo = big * math.log(1.0 / self.alpha)  # the tail is ≥ e^{-t/A}: the quantile is above
        hi = (1.0 + r) * (math.log(1.0 / self.alpha) + 2.0)
        while (laplace_pair_tail(hi, 1.0, r) > target).any():
            hi = hi * 2.0
        for _ in range(200):
            mid = lo + (hi - lo) / 2
            above = laplace_pair_tail(mid, 1.0, r) > target
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
            if np.all(hi - lo <= 1e-13 * hi):
                break
        self.table = hi

    def upper(self, r: np.ndarray) -> np.ndarray:
        """An upper bound of ``Q(r)`` (``Q`` is non-decreasing in ``r``; ``Q(r) = r·Q(1/r)``)."""
        r = np.asarray(r, dtype=float)
        top = _GRID[-1]
        idx = _upper_index(_GRID, np.minimum(r, top))
        inside = self.table[np.minimum(idx, _GRID.size - 1)]
        beyond = r * self.table[1] * (1.0 + 1e-12)  # r > 10⁴: Q(1/r) ≤ Q(10⁻⁴)
        out = np.where(r > top, beyond, inside)
        return np.where(np.isnan(r), np.inf, out)


@functools.lru_cache(maxsize=32)
def pair_quantiles(alpha: float) -> PairQuantiles:
    """The :class:`PairQuantiles` table of level ``1 − alpha`` (cached)."""
    return PairQuantiles(alpha)


_SEPARATION = 1.02  # scales closer than this are pulled apart (upwards) before the closed form
_R_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 500)])  # ratio 1.033 per step


def laplace_triple_tail(t: np.ndarray, a: np.ndarray, b: np.ndarray,
                        c: np.ndarray) -> np.ndarray:
    """An upper bound (exact when the scales differ by 2 %) of ``P(|A + B + C| > t)`` for
    independent Laplace ``A, B, C`` with scales ``a, b, c ≥ 0`` (``max > 0``). By partial
    fractions of the characteristic function ``Π 1/(1 + s_i² u²)`` the density is
    ``Σ_i w_i e^{−|z|/s_i}/(2 s_i)`` with ``w_i = Π_{j≠i} s_i²/(s_i² − s_j²)``, so the tail is
    ``Σ_i w_i e^{−t/s_i}``. Scales closer than 2 % are first increased (the largest ones) until
    they are 2 % apart — a larger scale only makes ``|A + B + C|`` larger (Anderson), so the
    result bounds the tail from above — and a zero scale leaves :func:`laplace_pair_tail`."""
    t, a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (t, a, b, c)))
    stack = np.sort(np.stack([a, b, c]), axis=0)
    small, mid, big = stack[0], stack[1], stack[2]
    mid_s = np.maximum(mid, small * _SEPARATION)
    big_s = np.maximum(big, mid_s * _SEPARATION)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        out = np.zeros(t.shape)
        for s_i, o1, o2 in ((big_s, mid_s, small), (mid_s, big_s, small), (small, big_s, mid_s)):
            w = s_i * s_i / (s_i * s_i - o1 * o1) * (s_i * s_i / (s_i * s_i - o2 * o2))
            out = out + np.where(s_i > 0, w * np.exp(-t / np.where(s_i > 0, s_i, 1.0)), 0.0)
    return np.where(small > 0, out, laplace_pair_tail(t, big, mid))


def _triple_rows(r1: np.ndarray, alpha: float) -> np.ndarray:
    """Quantile rows (module docstring of :func:`triple_quantile_table`) for these ``r1``."""
    r1 = np.asarray(r1, dtype=float).reshape(-1, 1)
    r = _R_GRID.reshape(1, -1)
    one = np.ones_like(r1 * r)
    target = float(alpha) * (1.0 - _RTOL)
    lo = np.maximum(np.maximum(one, r1 * one), r * one) * math.log(1.0 / float(alpha))
    hi = (1.0 + r1 + r) * one * (math.log(1.0 / float(alpha)) + 3.0)
    while (laplace_triple_tail(hi, one, r1 * one, r * one) > target).any():
        hi = hi * 2.0
    for _ in range(100):
        mid = lo + (hi - lo) / 2
        above = laplace_triple_tail(mid, one, r1 * one, r * one) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
        if np.all(hi - lo <= 1e-7 * hi):
            break
    return hi


_ROWS: dict[tuple[float, int], np.ndarray] = {}  # (α, grid index of r1) -> quantile row
_MAX_ROWS = 4096


def triple_quantile_table(r1: np.ndarray, alpha: float) -> np.ndarray:
    """Rows of upper bounds of the ``1 − α`` quantile of ``|L₁ + r1·L₂ + r·L₃|`` (standard
    Laplace ``L_i``): one row per ``r1`` (taken at the next grid value above it — the quantile
    is non-decreasing in ``r1`` — and ``inf`` past the grid), one column per ``r`` of the grid
    ``_R_GRID``. Rows are cached per level and grid value."""
    r1 = np.asarray(r1, dtype=float).reshape(-1)
    idx = np.searchsorted(_R_GRID, r1, side="left")
    out = np.full((r1.size, _R_GRID.size), np.inf)
    wanted = [int(i) for i in np.unique(idx[(idx < _R_GRID.size) & ~np.isnan(r1)])]
    missing = [i for i in wanted if (float(alpha), i) not in _ROWS]
    if missing:
        if len(_ROWS) + len(missing) > _MAX_ROWS:
            _ROWS.clear()
        for i, row in zip(missing, _triple_rows(_R_GRID[missing], alpha), strict=True):
            _ROWS[(float(alpha), i)] = row
    for i in wanted:
        out[idx == i] = _ROWS[(float(alpha), i)]
    return out


def triple_upper(table: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Upper bound of a :func:`triple_quantile_table` row's quantile at ``r`` (each row at its
    own ``r``): the next grid value (the quantile is non-decreasing in ``r``); ``inf`` past
    the grid."""
    r = np.asarray(r, dtype=float)
    idx = _upper_index(_R_GRID, r)
    inside = idx < _R_GRID.size
    vals = table[np.arange(table.shape[0]), np.minimum(idx, _R_GRID.size - 1)]  # rows last
    return np.where(inside & ~np.isnan(r), vals, np.inf)


def _gallop(rejected: Callable[[np.ndarray, np.ndarray], np.ndarray], start: np.ndarray,
            stop: np.ndarray, tol: np.ndarray, upward: bool) -> np.ndarray:
    """From ``start`` towards ``stop``, the first point that is not inside a certainly
    rejected cell (``start`` itself if none is rejected; ``stop`` if every cell is).

    Each round tests ``_SECTIONS`` consecutive cells of width ``h`` from the current point at
    once, advances over the leading rejected ones, and then zooms into the first cell that
    is not rejected (``h`` divided by ``_SECTIONS``) or, if all were rejected, widens ``h``.
    Everything behind the current point is always certainly rejected."""
    x = start.copy()
    span = np.abs(stop - start)
    h = span / _SECTIONS
    live = h > 0
    j = np.arange(_SECTIONS, dtype=float).reshape(-1, 1)
    sign = 1.0 if upward else -1.0
    for _ in range(_GALLOP_STEPS):
        if not live.any():
            break
        room = np.abs(stop - x)
        near = np.minimum(j * h, room)
        far = np.minimum((j + 1.0) * h, room)
        a = np.where(near >= room, stop, x + sign * near)
        b = np.where(far >= room, stop, x + sign * far)
        rej = rejected(a, b) if upward else rejected(b, a)
        rej = rej | (near >= room)  # cells past the stop are empty
        lead = np.argmin(rej, axis=0)  # first cell not rejected (0 if the first is not)
        all_rej = rej.all(axis=0)
        step = np.where(all_rej, far[-1], np.take_along_axis(near, lead[None, :], 0)[0])
        x = np.where(live, np.where(step >= room, stop, x + sign * step), x)
        h = np.where(live, np.where(all_rej, h * _SECTIONS, h / _SECTIONS), h)
        live &= (h > tol) & (x != stop)
    return x


def hull(rejected: Callable[[np.ndarray, np.ndarray], np.ndarray], lower: np.ndarray,
         upper: np.ndarray, tol: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, empty)``: ends between which every value of ``[lower, upper]`` that is not
    certainly rejected lies (``rejected(θ₁, θ₂)`` is True only if no point of the cell is in
    the confidence set; one-dimensional ``lower``, one entry per group, and ``rejected``
    takes arrays of shape ``(cells, groups)``). ``empty``: every cell was rejected (the set
    is empty)."""
    lo = _gallop(rejected, lower, upper, tol, upward=True)
    empty = lo >= upper
    hi = _gallop(rejected, upper, np.where(empty, upper, lo), tol, upward=False)
    return lo, hi, empty


# -- the ratio (Fieller) ------------------------------------------------------------------------
Cell = tuple[np.ndarray, np.ndarray]


def _times(theta: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``θ·v`` with ``0·(±∞) = 0`` (an unbounded cell end, a zero factor)."""
    with np.errstate(invalid="ignore"):
        return np.where(theta == 0, 0.0, theta * v)


def ratio_hull(num_cell: Cell, den_cell: Cell, num_scale: float, den_scale: float,
               alpha: float, lower: float, upper: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hull of ``{θ ∈ [lower, upper] : min over the cells of |x_S − θ x_N| ≤ q(θ)}`` with
    ``q(θ)`` the ``1 − α`` quantile of ``|e_S − θ e_N|``, ``e_S ~ Lap(num_scale)``,
    ``e_N ~ Lap(den_scale)`` (Fieller's pivot, module docstring).

    ``num_cell = (s_S, t_S)``, ``den_cell = (s_N, t_N)``: public cells that hold the draws. A
    cell of ``θ`` values is rejected when a lower bound of the distance over it exceeds ``q`` at
    its largest ``|θ|``: the distance is ``max(0, ℓ(θ), −h(θ))`` with
    ``ℓ(θ) = s_S − max(θ s_N, θ t_N)`` and ``h(θ) = t_S − min(θ s_N, θ t_N)``; ``ℓ`` and ``−h``
    are concave in ``θ``, so their minimum over a cell is at an end. Returns
    ``(lo, hi, empty)`` (:func:`hull`).
    """
    s_s, t_s, s_n, t_n = np.broadcast_arrays(*(np.asarray(v, dtype=float)
                                               for v in (*num_cell, *den_cell)))
    shape = s_s.shape
    s_s, t_s, s_n, t_n = (v.reshape(-1) for v in (s_s, t_s, s_n, t_n))
    table = pair_quantiles(float(alpha))
    ratio = float(den_scale) / float(num_scale)

    def ends(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p1, p2 = _times(theta, s_n), _times(theta, t_n)
        with np.errstate(invalid="ignore"):
            return s_s - np.maximum(p1, p2), t_s - np.minimum(p1, p2)

    def rejected(t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
        lo1, hi1 = ends(t1)
        lo2, hi2 = ends(t2)
        dist = np.maximum(np.minimum(lo1, lo2), -np.maximum(hi1, hi2))
        q = float(num_scale) * table.upper(np.maximum(np.abs(t1), np.abs(t2)) * ratio)
        with np.errstate(invalid="ignore"):
            return dist > q  # NaN (∞ − ∞ at unbounded cells): not rejected

    lo, hi, empty = hull(rejected, np.full(s_s.shape, float(lower)),
                         np.full(s_s.shape, float(upper)),
                         np.full(s_s.shape, 1e-7 * (float(upper) - float(lower))))
    return lo.reshape(shape), hi.reshape(shape), empty.reshape(shape)


# -- the variance -------------------------------------------------------------------------------
def _convex_min(a: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``min over m ∈ [lo, hi] of a·m² − 2·b·m`` for ``a > 0`` (``+∞`` if ``lo > hi``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.clip(b / a, lo, hi)
        return np.where(lo <= hi, a * m * m - 2.0 * b * m, np.inf)


def _quadratic_range(s_s: np.ndarray, t_s: np.ndarray, s_n: np.ndarray, t_n: np.ndarray,
                     m1: np.ndarray, m2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``x_N·m² − 2·m·x_S`` over ``x_S ∈ [s_S, t_S]``, ``x_N ∈ [s_N, t_N]``,
    ``m ∈ [m1, m2]``. For fixed ``m`` it is linear in both cell variables, so its extremes are
    at cell corners: the least is ``s_N m² − 2 max(m s_S, m t_S)``, on each side of ``m = 0`` a
    quadratic minimised in closed form when ``s_N > 0`` (otherwise ``−∞``); the largest is
    ``t_N m² − 2 min(m s_S, m t_S)``, convex on each side, so at ``m1``, ``m2`` or ``0``."""
    zero = np.zeros_like(m1)
    pos = _convex_min(s_n, t_s, np.maximum(m1, 0.0), m2)
    neg = _convex_min(s_n, s_s, m1, np.minimum(m2, 0.0))
    low = np.where(s_n > 0, np.minimum(pos, neg), -np.inf)

    def top(m: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return _times(m * m, t_n) - 2.0 * np.minimum(_times(m, s_s), _times(m, t_s))

    straddle = (m1 <= 0) & (m2 >= 0)
    high = np.maximum(np.maximum(top(m1), top(m2)), np.where(straddle, top(zero), -np.inf))
    return low, high


def variance_hull(sq_cell: Cell, sum_cell: Cell, den_cell: Cell,
                  scales: tuple[float, float, float], means: Cell, alpha: float,
                  upper: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Hull of the ddof=1 variances ``v ∈ [0, upper]`` accepted by the pivot

        T(v, m) = X_Q − 2m·X_S + (m² − v)·X_N + v = e_Q − 2m·e_S + (m² − v)·e_N

    (``Q = Σ(x − c)²``, ``S = Σ(x − c)``, ``m = S/N`` the centred mean: ``Q − 2mS + m²N =
    Σ(x − c − m)² = (N − 1)v``) for some ``m`` in ``means`` (a Fieller interval for the centred
    mean, :func:`ratio_hull`). ``scales = (b_Q, b_S, b_N)``. ``|T|`` is compared with the exact
    ``1 − α`` quantile of ``|e_Q − 2m e_S + (m² − v) e_N|`` (:func:`laplace_triple_tail`),
    taken at the largest ``|m|`` of ``means`` and the largest ``|m² − v|`` of the cell (the
    quantile grows with each scale). A cell of ``v`` (with every ``m`` of ``means``) is
    rejected when a lower bound of ``|T|`` over it exceeds that; ``|T|`` is bounded by
    interval arithmetic on ``T = X_Q + v(1 − X_N) + (X_N m² − 2m X_S)``, the last term by
    :func:`_quadratic_range` (no loss from the dependence between ``m²`` and ``m``).
    """
    s_q, t_q, s_s, t_s, s_n, t_n, m1, m2 = np.broadcast_arrays(*(
        np.asarray(v, dtype=float) for v in (*sq_cell, *sum_cell, *den_cell, *means)))
    shape = s_q.shape
    s_q, t_q, s_s, t_s, s_n, t_n, m1, m2 = (v.reshape(-1) for v in (
        s_q, t_q, s_s, t_s, s_n, t_n, m1, m2))
    b_q, b_s, b_n = (float(b) for b in scales)
    h_lo, h_hi = _quadratic_range(s_s, t_s, s_n, t_n, m1, m2)
    m_abs = np.maximum(np.abs(m1), np.abs(m2))
    msq_min = np.where((m1 <= 0) & (m2 >= 0), 0.0, np.minimum(m1 * m1, m2 * m2))
    table = triple_quantile_table(2.0 * m_abs * b_s / b_q, alpha)

    def rejected(v1: np.ndarray, v2: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            corners = [_times(v, 1.0 - t) for v in (v1, v2) for t in (s_n, t_n)]
            low = s_q + np.minimum.reduce(corners) + h_lo
            high = t_q + np.maximum.reduce(corners) + h_hi
            dist = np.maximum(low, -high)
            k = np.maximum(np.maximum(m_abs * m_abs - v1, v2 - msq_min), 0.0)
            q = b_q * triple_upper(table, k * b_n / b_q)
            return dist > q  # NaN: not rejected

    lo, hi, empty = hull(rejected, np.zeros(s_q.shape), np.full(s_q.shape, float(upper)),
                         np.full(s_q.shape, 1e-7 * float(upper)))
    return lo.reshape(shape), hi.reshape(shape), empty.reshape(shape)


# -- the correlation ------------------------------------------------------------------------------
def _triple_quantiles(scales: tuple[np.ndarray, np.ndarray, np.ndarray],
                      alpha: float) -> np.ndarray:
    """Upper bounds (bisection, upper end kept) of the ``1 − α`` quantiles of
    ``|A + B + C|`` for Laplace scales given elementwise (:func:`laplace_triple_tail`)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(s, dtype=float) for s in scales))
    target = float(alpha) * (1.0 - _RTOL)
    lo = np.maximum(np.maximum(a, b), c) * math.log(1.0 / float(alpha))
    hi = (a + b + c) * (math.log(1.0 / float(alpha)) + 3.0)
    while (laplace_triple_tail(hi, a, b, c) > target).any():
        hi = hi * 2.0
    for _ in range(100):
        mid = lo + (hi - lo) / 2
        above = laplace_triple_tail(mid, a, b, c) > target
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        if np.all(hi - lo <= 1e-5 * hi):
            break
    return hi


_RHO_CELLS = 4000  # cells of width 1/2000 over [-1, 1]
_VARIANCE_SPREAD = 4.0  # the pivot needs V_H ≤ 4·V_L for both variances
_LAMBDA_CELLS = 4  # the range of λ is cut in 4 (geometric) for the quantile's bound
_Q_POINTS = 100  # quantiles at |ρ| = j/100 (the quantile grows with |ρ|: the next one bounds it)


def correlation_hull(cov_cell: tuple[float, float], var_cells: tuple[Cell, Cell],
                     var_boxes: tuple[tuple[float, float], tuple[float, float]],
                     scales: tuple[float, float, float], clip: float,
                     alpha: float) -> tuple[float, float] | None:
    r"""Hull of the correlations ``ρ ∈ [−1, 1]`` accepted by the tangent-plane pivot

        T(ρ) = X_C − clip(ρ·ŝ, ±clip),    ŝ = √(X_x X_y),

    given cells of the plain draws ``X_C`` (covariance, released on ``±clip``), ``X_x``,
    ``X_y`` (variances), boxes ``[V_L, V_H]`` that hold the true variances, and the noise
    ``scales = (b_C, b_x, b_y)`` (docs/privacy.md, I.7, Theorem 5). At the truth, with
    ``s = √(V_x V_y)``, ``λ = √(V_y/V_x)``, ``u = X_x/V_x``, ``w = X_y/V_y``:
    ``ŝ = s + (λ e_x + e_y/λ)/2 − R`` with ``R = s(√u − √w)²/2 ≥ 0`` (the tangent plane of the
    concave ``√(xy)``), and clipping is monotone and 1-Lipschitz, so
    ``T = [e_C − θρ(λe_x + e_y/λ)/2] + θρR`` for some ``θ ∈ [0, 1]``. The bracket is compared
    with the ``1 − α`` quantile of ``|e_C + (|ρ|/2)(λ b_x L₁ + b_y/λ L₂)|``, bounded over the
    ``λ`` the boxes allow (cut in 4 geometric cells, each at its largest two scales), ``θρR``
    with ``[min(0, ρR_max), max(0, ρR_max)]``.
    Returns ``None`` when a box or cell reaches 0, or a variance box spans more than a factor
    ``_VARIANCE_SPREAD`` (``λ`` barely bounded: the caller falls back to the box, a choice
    that reads the released variances only), ``(−1, 1)`` when nothing is accepted.
    """
    s_c, t_c = (float(v) for v in cov_cell)
    (s_x, t_x), (s_y, t_y) = ((float(np.asarray(a).reshape(-1)[0]),
                               float(np.asarray(b).reshape(-1)[0])) for a, b in var_cells)
    (vx_l, vx_h), (vy_l, vy_h) = var_boxes
    b_c, b_x, b_y = (float(b) for b in scales)
    if not (vx_l * _VARIANCE_SPREAD >= vx_h and vy_l * _VARIANCE_SPREAD >= vy_h
            and vx_l > 0 and vy_l > 0 and s_x > 0 and s_y > 0):
        return None
    lam_max, lam_min = math.sqrt(vy_h / vx_l), math.sqrt(vy_l / vx_h)
    ru = (math.sqrt(s_x / vx_h), math.sqrt(t_x / vx_l))
    rw = (math.sqrt(s_y / vy_h), math.sqrt(t_y / vy_l))
    gap = max(ru[1] - rw[0], rw[1] - ru[0], 0.0)
    r_max = math.sqrt(vx_h * vy_h) * gap * gap / 2.0
    s_lo, s_hi = math.sqrt(s_x * s_y), math.sqrt(t_x * t_y)
    half = _RHO_CELLS // 2
    size = (np.arange(_Q_POINTS + 1) / _Q_POINTS)[:, None]  # |ρ| on a coarser grid
    lam = np.geomspace(lam_min, lam_max, _LAMBDA_CELLS + 1)
    # the true λ lies in some [λ_j, λ_{j+1}]: its scales are at most (λ_{j+1} b_x, b_y/λ_j)
    q = _triple_quantiles((np.full((size.size, _LAMBDA_CELLS), b_c),
                           size / 2 * lam[1:] * b_x, size / 2 * b_y / lam[:-1]),
                          alpha).max(axis=1)
    k = np.arange(_RHO_CELLS)
    e1, e2 = (k - half) / half, (k + 1 - half) / half
    top = np.maximum(np.abs(k - half), np.abs(k + 1 - half))  # largest |ρ| of a cell, in cells
    q_cell = q[-(-top * _Q_POINTS // half)]  # the quantile grid point at or above it
    with np.errstate(invalid="ignore"):
        low = np.clip(np.minimum(e1 * s_lo, _times(e1, np.asarray(s_hi))), -clip, clip)
        high = np.clip(np.maximum(e2 * s_lo, _times(e2, np.asarray(s_hi))), -clip, clip)
        extra_lo = np.minimum(0.0, _times(e1, np.asarray(r_max)))
        extra_hi = np.maximum(0.0, _times(e2, np.asarray(r_max)))
        rejected = ((t_c - low < -q_cell + extra_lo) | (s_c - high > q_cell + extra_hi))
    kept = np.flatnonzero(~rejected)
    if kept.size == 0:
        return -1.0, 1.0
    return float(e1[kept[0]]), float(e2[kept[-1]])

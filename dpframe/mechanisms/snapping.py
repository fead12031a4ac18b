"""Snapping: rounding released values to a power-of-two grid, and what that costs in ε.

Floating point breaks the Laplace mechanism (Mironov 2012; Gazeau et al. §1, Example 1.1): the
set of doubles ``q + b·ln U`` can reach depends on ``q``. dpframe never releases raw float
arithmetic. Every sampler computes an approximation ``x̃`` of the exact draw ``x`` made from the
same uniforms, with a proven worst-case error ``|x̃ - x| ≤ δ_t`` (see ``docs/privacy.md`` §4), and
releases the *cell* of a public partition of the real line that ``x̃`` falls in, represented by
one value per cell. Cells are the rounding cells ``[jΛ - Λ/2, jΛ + Λ/2)`` of a power-of-two grid
``Λ``; at each finite end ``e`` of the feasible set the grid points closer than ``Λ`` to ``e`` are
dropped and their cells merged into one *end cell*, released as its midpoint (never ``e`` itself,
which would put a point mass on the boundary). Every cell inside the set has length in
``[w_min, w_max] = [Λ/2, 3Λ/2]`` (``[Λ, Λ]`` when the set has no finite end), and the released
values are exact multiples of ``Λ`` or the end-cell midpoints: public values that do not depend
on the true value.

**Cost (our replacement for Gazeau et al.'s Condition 5 / Thm 4.1).** Let ``p_q`` be the exact
density, with ``p_q(y) ≤ e^{ε₀} p_{q'}(y)`` pointwise for neighbours (certified ε₀) and
log-Lipschitz constant ``1/b`` inside each component (true for Laplace noise conditioned on a
set). For a cell ``A`` of length ``w`` with shrunk/grown versions ``A∓`` (by ``δ_t`` on each side),

    P[x̃_q ∈ A] ≤ P[x_q ∈ A+] ≤ e^{ε₀} P[x_{q'} ∈ A-] + 4δ_t · max_{A+} p_q
               ≤ e^{ε₀} P[x_{q'} ∈ A-] (1 + 4δ_t e^{(w + 2δ_t)/b} / (w - 2δ_t))
               ≤ e^{ε₀} P[x̃_{q'} ∈ A] (1 + 4δ_t e^{(w_max + 2δ_t)/b} / (w_min - 2δ_t)),

using ``max_{A+} p_q ≤ e^{(w+2δ_t)/b} min_{A-} p_q`` and
``min_{A-} p_q ≤ e^{ε₀} P[x_{q'}∈A-]/|A-|``.
Unbounded end cells ``[c, ∞)`` cost at most ``e^{2δ_t/b}``. Choosing one of several pieces of
the set with probabilities computed to relative accuracy ``ρ`` costs ``ln((1+ρ)/(1-ρ))`` per choice.
The mechanism calibrates its noise to ``ε - epsilon_overhead`` so that a release spends exactly
the ε it was given.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe.mechanisms.domains import FeasibleSet

__all__ = ["CLIP", "SnapPlan", "end_cell_values", "plan_snapping", "snap_to_cells"]

#: numpy's ``clip`` ufunc, the loop :func:`numpy.clip` itself ends in (``np.clip`` reaches it
#: through three Python wrappers, a few µs per call on a small array). For float arrays and
#: float bounds the two are the same function, bit for bit (NaN propagates, a tie between the
#: signed zeros keeps ``x``'s sign; ``np.minimum``/``np.maximum`` do not, and are not used):
#: ``tests/mechanisms/test_small_draw_paths.py`` checks it over signed zeros, NaN, ±inf and
#: subnormals. Integer bounds must lie in int64 (:func:`_int_bounds`).
_NUMPY_CORE: Any = getattr(np, "_core", None) or np.core  # (numpy 1 names it core)
CLIP: np.ufunc = _NUMPY_CORE.umath.clip
_INT64 = np.iinfo(np.int64)
#: :func:`snap_to_cells` clips ``offset/Λ`` to ``±2^52`` (see there why that changes no output).
_OFFSET_CELLS = 2.0**52

#: Error of the noise offset ``b·E`` before rounding, relative to ``min(b, L) + |offset|`` (``L``
#: the piece length); offsets larger than the window width are clamped (the computation is
#: monotone), so both terms are at most the window width ``W``: ``δ_t ≤ ρ_n (min(b, W) + W)``.
#: Measured worst case against 200-bit arithmetic: 2^-51.6 (tests/mechanisms/test_snapping.py).
NOISE_RTOL = 2.0**-48
#: Error of adding anchor and offset on the grid (two fractional parts), in units of ``Λ``.
GRID_ATOL = 2.0**-50
#: Relative error bound of a computed piece probability, plus a term per unit of ``span/b``.
PROB_RTOL = 2.0**-44
PROB_RTOL_PER_SPAN = 2.0**-50
#: Target: overhead at most this fraction of ε.
OVERHEAD_TARGET = 1e-6


@dataclass(frozen=True)
class SnapPlan:
    """Public snapping parameters of one mechanism (all independent of the data)."""

    grid: float  # Λ, a power of two
    window: tuple[float, float]  # outputs are clamped here (finite, contains the feasible set)
    delta_t: float  # proven bound on |x̃ - x| before rounding
    w_min: float
    w_max: float
    rounding_cost: float
    choice_cost: float

    @property
    def overhead(self) -> float:
        return self.rounding_cost + self.choice_cost

    def delta_t_at(self, scale: float) -> float:
        """The error bound at another scale (same grid and window)."""
        return delta_t(scale, self.window[1] - self.window[0], self.grid)


def delta_t(scale: float, window_width: float, grid: float) -> float:
    """Worst-case error of the pre-rounding value (docs/privacy.md §4.2)."""
    return NOISE_RTOL * (min(scale, window_width) + window_width) + GRID_ATOL * grid


def rounding_cost(dt: float, w_min: float, w_max: float, scale: float) -> float:
    if w_min <= 2 * dt:
        return math.inf
    ratio = 4.0 * dt * math.exp((w_max + 2 * dt) / scale) / (w_min - 2 * dt)
    return math.log1p(ratio) + 2 * dt / scale


def choice_cost(n_choices: int, rho: float) -> float:
    return max(n_choices - 1, 0) * (math.log1p(rho) - math.log1p(-rho))


def plan_snapping(
    scale: float,
    epsilon: float,
    sampling_set: FeasibleSet,
    window: tuple[float, float],
) -> SnapPlan:
    """Choose the smallest power-of-two grid whose ε overhead is ≤ 1e-6·ε (or the least costly).

    ``sampling_set`` is the set the noise is conditioned on (the real line for the plain and
    clamped mechanisms); ``window`` the finite public range outputs are clamped to.
    """
    w_lo, w_hi = window
    width = w_hi - w_lo
    magnitude = max(abs(w_lo), abs(w_hi), 1e-300)
    n_pieces = 2 * len(sampling_set.components)
    span = sampling_set.finite_span if len(sampling_set.components) > 1 else 0.0
    rho = PROB_RTOL + PROB_RTOL_PER_SPAN * span / scale
    c_choice = choice_cost(n_pieces, rho)
    has_ends = bool(sampling_set.finite_endpoints)
    # grid points must be exact doubles across the window: Λ ≥ 2^-50 · magnitude
    k_min = math.ceil(math.log2(magnitude)) - 50
    comps = sampling_set.components
    gaps = [comps[i + 1][0] - comps[i][1] for i in range(len(comps) - 1)]
    narrowest = min([sampling_set.min_component_width, *gaps])
    k_max = math.floor(math.log2(min(scale, narrowest / 4)))
    k_max = max(k_max, k_min)
    target = OVERHEAD_TARGET * epsilon
    best: SnapPlan | None = None
    for k in range(k_min, k_max + 1):
        lam = math.ldexp(1.0, k)
        w_min, w_max = (lam / 2, 1.5 * lam) if has_ends else (lam, lam)
        dt = delta_t(scale, width, lam)
        cost = rounding_cost(dt, w_min, w_max, scale)
        plan = SnapPlan(lam, window, dt, w_min, w_max, cost, c_choice)
        if best is None or plan.overhead < best.overhead:
            best = plan
        if cost + c_choice <= target:
            return plan
    assert best is not None
    return best


def snap_to_cells(
    anchor: np.ndarray,
    offset: np.ndarray,
    grid: float,
    comp_lo: np.ndarray | None,
    comp_hi: np.ndarray | None,
    window: tuple[float, float],
) -> np.ndarray:
    """Release the cell of ``anchor + offset``: an exact multiple of ``grid``, or, for the cell
    next to a finite end of a component, that cell's midpoint (:func:`end_cell_values`).

    The sum is never rounded: ``anchor/Λ`` and ``offset/Λ`` are split exactly into integer and
    fractional parts (Λ is a power of two), the integers add exactly, and only the two
    fractions (in [0, 1)) are added in floating point. ``comp_lo``/``comp_hi`` (the component
    of each draw) None: the sampling set is the real line (no end cells).

    *Why the integers add exactly in float64.* The anchors lie in the window (a true value
    validated into the feasible set, or a component's end), and :func:`plan_snapping` takes
    ``Λ ≥ 2^-50 · max(|w_lo|, |w_hi|)``, so ``|⌊anchor/Λ⌋| ≤ 2^50`` and both window indices
    of :func:`_int_bounds` lie in ``[-2^50, 2^50]``. ``offset/Λ`` is clipped to ``±2^52``, so
    ``|⌊offset/Λ⌋| ≤ 2^52``, and the rounding term ``⌊f_a + f_o + ½⌋`` is 0, 1 or 2: every
    partial sum is an integer of magnitude at most ``2^50 + 2^52 + 2 < 2^53``, which float64
    represents exactly, and the index times Λ is exact too. The clip changes no output: an
    offset beyond ``±2^52`` cells (an integer there, fractional part 0 before and after the
    clip) puts the index beyond ``±(2^52 − 2^50 − 1)``, outside the window's indices, with or
    without the clip, and the index is clipped to the same window end either way.
    """
    if not (type(anchor) is np.ndarray and type(offset) is np.ndarray  # (the usual case:
            and anchor.ndim and anchor.shape == offset.shape):  # arrays of one shape)
        if np.ndim(anchor) == 0 and np.ndim(offset) == 0:  # one value: the same steps, 1 row
            return snap_to_cells(np.reshape(anchor, 1), np.reshape(offset, 1), grid, comp_lo,
                                 comp_hi, window)[0]
        if np.shape(anchor) != np.shape(offset):
            anchor, offset = np.broadcast_arrays(anchor, offset)
    a = np.divide(anchor, grid)  # (the steps below reuse their arrays: no temporaries)
    o = np.divide(offset, grid)
    CLIP(o, -_OFFSET_CELLS, _OFFSET_CELLS, out=o)
    ka, ko = np.floor(a), np.floor(o)
    frac = np.add(np.subtract(a, ka, out=a), np.subtract(o, ko, out=o), out=a)  # (in a's place)
    frac += 0.5
    j = np.add(ka, ko, out=ka)  # integers below 2^53 in float64: every sum is exact
    j += np.floor(frac, out=frac)
    w_lo, w_hi = window
    CLIP(j, *_int_bounds(w_lo, w_hi, grid), out=j)
    out = np.multiply(j, grid, out=ko)  # exact: an integer below 2^53 times a power of two
    CLIP(out, w_lo, w_hi, out=out)
    if comp_lo is None or comp_hi is None or not (
            np.isfinite(comp_lo).any() or np.isfinite(comp_hi).any()):
        return out  # no finite end: no end cells (the sampling set is the real line)
    # merge the cells closer than Λ to a finite end into one end cell, released as its midpoint
    lo_edge, lo_rep, hi_edge, hi_rep = end_cells(comp_lo, comp_hi, grid)
    out = np.where(j < lo_edge, lo_rep, out)
    out = np.where(j > hi_edge, hi_rep, out)
    return CLIP(out, w_lo, w_hi, out=out)


@functools.lru_cache(maxsize=256)
def _int_bounds(w_lo: float, w_hi: float, grid: float) -> tuple[int, int]:
    """The window's first and last grid index, ``(⌊w_lo/Λ⌋, ⌈w_hi/Λ⌉)``, each moved into
    int64's range: :func:`numpy.clip` drops an integer bound beyond the array's type (the
    same as clipping at that type's end, which every int64 already is inside). Public
    constants of a mechanism's plan, so computed once per plan."""
    return (max(math.floor(w_lo / grid), int(_INT64.min)),
            min(math.ceil(w_hi / grid), int(_INT64.max)))


def end_cells(
    comp_lo: np.ndarray | float, comp_hi: np.ndarray | float, grid: float
) -> tuple[np.ndarray, ...]:
    """First/last grid index kept inside ``[lo, hi]`` and the released value of each end cell.

    The end cell at a finite lower end ``l`` is ``[l, j_lo·Λ − Λ/2)`` with
    ``j_lo = ceil(l/Λ) + 1``, of length in ``[Λ/2, 3Λ/2]``; it is released as its midpoint, a
    public constant strictly inside the set. Releasing ``l`` itself would put a point mass on
    the boundary, which the bounded mechanism exists to avoid (Holohan §1: singularities at
    the bounds). Likewise at a finite upper end.
    """
    lo = np.asarray(comp_lo, dtype=float)
    hi = np.asarray(comp_hi, dtype=float)
    with np.errstate(invalid="ignore"):
        j_lo = np.where(np.isfinite(lo), np.ceil(lo / grid) + 1, -np.inf)
        j_hi = np.where(np.isfinite(hi), np.floor(hi / grid) - 1, np.inf)
        lo_rep = lo + ((j_lo * grid - grid / 2) - lo) / 2
        hi_rep = hi - (hi - (j_hi * grid + grid / 2)) / 2
    return j_lo, lo_rep, j_hi, hi_rep


def end_cell_values(components: tuple[tuple[float, float], ...], grid: float) -> list[float]:
    """The public values released for end cells (beside the multiples of the grid)."""
    values = []
    for lo, hi in components:
        _, lo_rep, _, hi_rep = end_cells(lo, hi, grid)
        values += [float(v) for v in (lo_rep, hi_rep) if np.isfinite(v)]
    return values

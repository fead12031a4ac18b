"""One draw of the Laplace family without arrays: the scalar twin of the vectorised sampler.

A scalar query (a mean, a count, a sum of the whole frame) releases one value per
measurement, and on 1-element arrays the vectorised sampler (:mod:`.sampling`,
:mod:`.snapping`) spends nearly all its time allocating and indexing tiny arrays. This module
runs the same algorithm on Python floats:

* the same pieces, masses and stick-breaking decisions as :func:`.sampling.sample_offsets`,
* the same truncated exponential by inversion (:func:`.sampling.truncated_exponential`),
* the same snapping to cells (:func:`.snapping.snap_to_cells`),

and consumes the random words in the same order. Every transcendental function is numpy's
ufunc applied to a Python float (``np.log``, ``np.log1p``, ``np.expm1``, ``np.exp``,
``np.logaddexp``): numpy evaluates a 1-element input with the very loop it uses for arrays,
so a seeded source gives **bit-identical** releases on both paths (``math.log`` and friends
would differ from numpy's SIMD loops in the last ulp). The arithmetic in between is IEEE
double arithmetic, the same in Python and numpy. ``tests/mechanisms/test_scalar_sampling.py``
checks the identity on every mechanism and domain kind.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from dpframe.mechanisms.domains import LOG_HALF, FeasibleSet
from dpframe.mechanisms.randomness import RandomSource

if TYPE_CHECKING:
    from dpframe.mechanisms.snapping import SnapPlan

__all__ = ["draw_one", "project_one"]

_TWO_52 = 1 << 52
_TWO_M64 = 2.0**-64
_OFFSET_CAP = 2.0**60  # (snap_to_cells clips to ±2^52: past every window either way, same j)


def _log(x: float) -> float:
    return float(np.log(x))


def _uniform_one(source: RandomSource) -> tuple[float, float]:
    """One full-precision uniform and its log, as :meth:`RandomSource.uniform` draws it.

    A word of at least 2^52 holds the 53 significant bits of ``U·2^64``: truncate it to them
    (exact in a double). Any other word (probability 2^-12) takes the source's general path,
    which reads further words exactly as the vectorised path does."""
    lead = source.word()
    if lead >= _TWO_52:
        shift = lead.bit_length() - 53
        u = float(lead >> shift << shift) * _TWO_M64
        return u, _log(u)
    u_arr, log_arr = source._uniform_general(np.array([lead], dtype=np.uint64))
    return float(u_arr[0]), float(log_arr[0])


def _decide(u: float, log_take: float, log_rest: float, log_total: float) -> bool:
    """:func:`.sampling._decide` for one uniform: take with probability ``e^{take − total}``,
    comparing with the smaller of r and 1 − r."""
    take = float(np.exp(log_take - log_total))
    if take <= 0.5:
        return u < take
    return not u < float(np.exp(log_rest - log_total))


def _pieces(domain: FeasibleSet, q: float, b: float
            ) -> tuple[list[float], list[float], list[float]]:
    """Anchors, lengths and log-masses of the 2K pieces around ``q`` (:func:`.sampling._pieces`):
    column ``j < K`` is component ``j`` below ``q``, column ``K + j`` the part above."""
    comps = domain.components
    anchors = [min(hi, q) for _, hi in comps] + [max(lo, q) for lo, _ in comps]
    k = len(comps)
    lengths = [anchors[j] - comps[j][0] for j in range(k)] + [
        comps[j][1] - anchors[k + j] for j in range(k)]
    by_distance = bool(domain.finite_endpoints) and k > 1
    masses = []
    for anchor, length in zip(anchors, lengths, strict=True):
        if not length > 0:
            masses.append(-math.inf)
            continue
        # -expm1(-length/b) is 0 when length/b underflows (a subnormal length, b > 2): its
        # log is -inf, as the array path's np.log gives under errstate, without the warning
        share = -float(np.expm1(-length / b))
        mass = (float(np.log(share)) if share > 0.0 else -math.inf) + LOG_HALF
        if by_distance:
            mass -= abs(anchor - q) / b
        masses.append(mass)
    return anchors, lengths, masses


def _choose(masses: list[float], source: RandomSource) -> int:
    """The piece, chosen as :func:`.sampling.draw_pieces` chooses it (one uniform per
    decision, drawn even after the choice is made, so the words line up)."""
    live = [j for j, m in enumerate(masses) if math.isfinite(m)]
    if len(live) == 1:
        return live[0]
    lm = [masses[j] for j in live]
    if len(live) == 2:
        u = _uniform_one(source)[0]
        total = float(np.logaddexp(lm[0], lm[1]))
        return live[0] if _decide(u, lm[0], lm[1], total) else live[1]
    suffix = [0.0] * len(lm)
    suffix[-1] = lm[-1]
    for j in range(len(lm) - 2, -1, -1):
        suffix[j] = float(np.logaddexp(suffix[j + 1], lm[j]))
    chosen = len(lm) - 1
    for j in range(len(lm) - 1):
        u = _uniform_one(source)[0]
        if chosen == len(lm) - 1 and _decide(u, lm[j], suffix[j + 1], suffix[j]):
            chosen = j
    return live[chosen]


def _truncated_exponential(scaled_len: float, w: float, log_w: float) -> float:
    """:func:`.sampling.truncated_exponential` for one value."""
    if scaled_len < 1.0:
        e = -float(np.log1p((1.0 - w) * float(np.expm1(-scaled_len))))
    else:
        e = -float(np.logaddexp(log_w, -scaled_len + float(np.log1p(-w))))
    return min(max(e, 0.0), scaled_len)


def _end_cells(lo: float, hi: float, grid: float) -> tuple[float, float, float, float]:
    """:func:`.snapping.end_cells` for one component."""
    j_lo = math.ceil(lo / grid) + 1.0 if math.isfinite(lo) else -math.inf
    j_hi = math.floor(hi / grid) - 1.0 if math.isfinite(hi) else math.inf
    lo_rep = lo + ((j_lo * grid - grid / 2) - lo) / 2 if math.isfinite(lo) else math.nan
    hi_rep = hi - (hi - (j_hi * grid + grid / 2)) / 2 if math.isfinite(hi) else math.nan
    return j_lo, lo_rep, j_hi, hi_rep


@functools.lru_cache(maxsize=256)
def _cells(grid: float, w_lo: float, w_hi: float, lo: float, hi: float
           ) -> tuple[int, int, float, float, float, float]:
    """The public constants of :func:`_snap` (window indices, then :func:`_end_cells`), from
    the grid, the window and the component alone: computed once per mechanism."""
    return (math.floor(w_lo / grid), math.ceil(w_hi / grid), *_end_cells(lo, hi, grid))


def _snap(anchor: float, offset: float, plan: SnapPlan, lo: float, hi: float) -> float:
    """:func:`.snapping.snap_to_cells` for one value: integer parts added exactly (Python
    integers), only the two fractions added in floating point."""
    grid = plan.grid
    a = anchor / grid
    o = min(max(offset / grid, -_OFFSET_CAP), _OFFSET_CAP)
    ka, ko = math.floor(a), math.floor(o)
    frac = (a - ka) + (o - ko)
    j = ka + ko + math.floor(frac + 0.5)
    w_lo, w_hi = plan.window
    j_lo, j_hi, lo_edge, lo_rep, hi_edge, hi_rep = _cells(grid, w_lo, w_hi, lo, hi)
    j = min(max(j, j_lo), j_hi)
    out = min(max(float(j) * grid, w_lo), w_hi)
    if j < lo_edge:
        out = lo_rep
    if j > hi_edge:
        out = hi_rep
    return min(max(out, w_lo), w_hi)


def project_one(domain: FeasibleSet, x: float) -> float:
    """:meth:`FeasibleSet.project` for one value: the nearest point of the set (ties to the
    lower component)."""
    comps = domain.components
    out = min(max(x, comps[0][0]), comps[-1][1])
    if len(comps) == 1:  # (an interval: nothing between components)
        return out
    for (_, hi), (lo_next, _) in itertools.pairwise(comps):
        if hi < out < lo_next:
            out = hi if out <= hi + (lo_next - hi) / 2.0 else lo_next
    return out


#: The real line's one component, and the log-sum of its two pieces' masses (each is
#: ``log(-expm1(-∞)) + log ½ = log ½`` exactly), as :func:`_choose` computes it.
_REAL_LINE = ((-math.inf, math.inf),)
_REAL_LINE_TOTAL = float(np.logaddexp(LOG_HALF, LOG_HALF))


def draw_one(sampling_set: FeasibleSet, q: float, b: float, plan: SnapPlan | None,
             source: RandomSource) -> float:
    """Laplace(q, b) conditioned on ``sampling_set``, snapped by ``plan`` (if any): the
    release the vectorised sampler gives for a 1-element ``q`` with the same words."""
    if sampling_set.components == _REAL_LINE:  # (public: the mechanism's set)
        return _draw_real_line(q, b, plan, source)
    anchors, lengths, masses = _pieces(sampling_set, q, b)
    col = _choose(masses, source)
    k = len(sampling_set.components)
    w, log_w = _uniform_one(source)
    e = _truncated_exponential(lengths[col] / b, w, log_w)
    offset = (-1.0 if col < k else 1.0) * (b * e)
    if plan is None:
        return anchors[col] + offset
    lo, hi = sampling_set.components[col % k]
    return _snap(anchors[col], offset, plan, lo, hi)


def _draw_real_line(q: float, b: float, plan: SnapPlan | None, source: RandomSource) -> float:
    """:func:`draw_one` on the real line (the plain and truncated Laplace mechanisms), with
    the pieces' public constants filled in: both pieces are anchored at ``q`` (``min(∞, q)``,
    ``max(−∞, q)``), infinitely long, of log-mass ``log ½`` each (:func:`_pieces`), so
    :func:`_choose` makes its one decision against :data:`_REAL_LINE_TOTAL`. The same words
    in the same order, the same arithmetic: the same release."""
    below = _decide(_uniform_one(source)[0], LOG_HALF, LOG_HALF, _REAL_LINE_TOTAL)
    w, log_w = _uniform_one(source)
    e = _truncated_exponential(math.inf / b, w, log_w)
    offset = (-1.0 if below else 1.0) * (b * e)
    if plan is None:
        return q + offset
    return _snap(q, offset, plan, -math.inf, math.inf)

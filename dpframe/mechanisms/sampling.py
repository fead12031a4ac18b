"""Exact inverse-CDF sampling of Laplace noise conditioned on a feasible set.

One sampler serves every mechanism. For a centre ``q`` and scale ``b``, the feasible set ``D`` is
cut at ``q`` into *pieces*, each an interval with an *anchor* (its end nearest ``q``), a
direction (away from ``q``), a length ``L`` (possibly infinite) and a distance ``d`` from ``q``
to the anchor. On a piece the Laplace density is a decaying exponential, so

* the piece's probability mass is ``½ e^{-d/b} (1 - e^{-L/b})`` (computed in logs), and
* given the piece, ``Y = anchor ± b·E`` with ``E`` an Exp(1) variable truncated to ``[0, L/b]``,
  drawn by inversion: ``E = -ln(W + (1 - W) e^{-L/b})`` for a full-precision uniform ``W``,
  evaluated as ``-logaddexp(ln W, -L/b + log1p(-W))`` so that nothing underflows.

A piece is chosen by sequential ("stick-breaking") decisions, each comparing a full-precision
uniform with the smaller of ``r`` and ``1 - r`` (both computed as ratios of suffix sums), so each
decision's probability is exact up to relative error ``ρ``. There is no rejection loop: a narrow
domain with tiny ε costs exactly what a wide one costs. The plain Laplace mechanism is the
special case ``D = ℝ`` (two pieces of infinite length anchored at ``q``: the sign and ``-ln W``).
"""

from __future__ import annotations

import functools

import numpy as np

from dpframe.mechanisms.domains import LOG_HALF, FeasibleSet, real_line
from dpframe.mechanisms.randomness import RandomSource

__all__ = ["draw_pieces", "real_line_offsets", "sample_offsets", "truncated_exponential"]


def _pieces(domain: FeasibleSet, centre: np.ndarray, b: float) -> tuple[np.ndarray, ...]:
    """Per true value ``q`` in ``centre``: anchors, lengths and log-masses of the 2K pieces.

    Column ``j < K`` is the part of component ``j`` below ``q`` (anchored at ``min(u_j, q)``,
    going down); column ``K + j`` the part above ``q`` (anchored at ``max(l_j, q)``, going up).
    """
    lo = np.array([c[0] for c in domain.components])
    hi = np.array([c[1] for c in domain.components])
    col_centre = centre[:, None]
    anchors = np.concatenate([np.minimum(hi, col_centre), np.maximum(lo, col_centre)], axis=1)
    with np.errstate(invalid="ignore"):
        lengths = np.concatenate([anchors[:, : lo.size] - lo, hi - anchors[:, lo.size :]], axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_mass = np.log(-np.expm1(-lengths / b))  # 0 for infinite length, -inf for empty
        log_mass += LOG_HALF
        if domain.finite_endpoints and len(domain.components) > 1:
            log_mass -= np.abs(anchors - col_centre) / b
        log_mass[~(lengths > 0)] = -np.inf
    return anchors, lengths, log_mass


def draw_pieces(log_mass: np.ndarray, source: RandomSource) -> np.ndarray:
    """Choose one column per row with probability ∝ ``exp(log_mass)``."""
    n = log_mass.shape[0]
    live = np.flatnonzero(np.isfinite(np.fmax.reduce(log_mass, axis=0, initial=-np.inf)))
    if live.size == 1:
        return np.full(n, live[0])
    lm = log_mass if live.size == log_mass.shape[1] else log_mass[:, live]
    if live.size == 2:  # one decision, the suffix sums being (log(e^lm0 + e^lm1), lm1)
        pick = _decide(source.uniform_values(n), lm[:, 0], lm[:, 1],
                       np.logaddexp(lm[:, 0], lm[:, 1]))
        return live[np.where(pick, 0, 1)]
    # log of suffix sums: suffix[:, j] = log Σ_{k ≥ j} exp(lm[:, k])
    suffix = np.logaddexp.accumulate(lm[:, ::-1], axis=1)[:, ::-1]
    chosen = np.full(n, live.size - 1)
    undecided = np.ones(n, dtype=bool)
    for j in range(live.size - 1):
        pick = _decide(source.uniform_values(n), lm[:, j], suffix[:, j + 1], suffix[:, j])
        pick &= undecided
        chosen[pick] = j
        undecided &= ~pick
    return live[chosen]


def _decide(u: np.ndarray, log_take: np.ndarray, log_rest: np.ndarray, log_total: np.ndarray
            ) -> np.ndarray:
    """Take (True) with probability ``r = e^{log_take − log_total}``: ``u < r`` when r ≤ ½,
    else ``not u < 1 − r`` with ``1 − r = e^{log_rest − log_total}`` computed directly, so
    each decision is exact up to relative error ρ however close r is to 0 or 1."""
    take, skip = _ratios(log_take, log_rest, log_total)
    return np.where(take <= 0.5, u < take, ~(u < skip))


def _ratios(log_take: np.ndarray, log_rest: np.ndarray, log_total: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """``(r, 1 − r)`` of :func:`_decide`, each from its own suffix sum."""
    with np.errstate(invalid="ignore"):
        take = np.exp(log_take - log_total)  # r
        skip = np.exp(log_rest - log_total)  # 1 - r
    return take, skip


def truncated_exponential(scaled_len: np.ndarray, w: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Exp(1) truncated to ``[0, A]`` by inversion, ``E = -ln(W + (1 - W) e^{-A})``.

    Two algebraically equal forms keep the relative error at a few ulps of ``E`` everywhere:
    ``-log1p((1 - W)·expm1(-A))`` for ``A < 1`` (no cancellation when ``E`` is tiny), and
    ``-logaddexp(ln W, -A + log1p(-W))`` otherwise (no underflow when ``W`` or ``e^{-A}`` is
    far below the smallest double).
    """
    scaled_len, w, log_w = np.broadcast_arrays(np.asarray(scaled_len, dtype=np.float64), w, log_w)
    near = scaled_len < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        if near.all():
            e = np.asarray(-np.log1p((1.0 - w) * np.expm1(-scaled_len)))
        else:  # each form evaluated only where it is used (the long form is the usual one)
            e = np.asarray(-np.logaddexp(log_w, -scaled_len + np.log1p(-w)))
            if near.any():
                e[near] = -np.log1p((1.0 - w[near]) * np.expm1(-scaled_len[near]))
    return np.clip(e, 0.0, scaled_len, out=e)


def sample_offsets(
    domain: FeasibleSet, centre: np.ndarray, b: float, source: RandomSource
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``Y = anchor + offset`` from Laplace(q, b) conditioned on ``domain``, one draw per
    true value ``q`` in ``centre``.

    Returns ``(anchor, offset, component_index)``; ``anchor`` is an exact double (``q`` or an
    endpoint), so the caller can add the two on a grid without floating-point error.
    """
    if centre.size and domain.components == _REAL_LINE:
        return _real_line_offsets(domain, centre, b, source)
    return _piece_offsets(domain, centre, b, source)


def _piece_offsets(domain: FeasibleSet, centre: np.ndarray, b: float, source: RandomSource
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sample_offsets` on any feasible set: the pieces of every row, one chosen per
    row, then the truncated exponential on it."""
    anchors, lengths, log_mass = _pieces(domain, centre, b)
    col = draw_pieces(log_mass, source)
    rows = np.arange(centre.size)
    anchor = anchors[rows, col]
    n_comp = len(domain.components)
    direction = np.where(col < n_comp, -1.0, 1.0)
    scaled_len = lengths[rows, col] / b
    w, log_w = source.uniform(centre.size)
    e = truncated_exponential(scaled_len, w, log_w)
    return anchor, direction * (b * e), col % n_comp


_REAL_LINE = ((-np.inf, np.inf),)


@functools.lru_cache(maxsize=256)
def _real_line_ratios(b: float) -> tuple[np.float64, np.float64]:
    """``(r, 1 − r)`` of the real line's choice between its two half-lines at scale ``b``:
    the same functions on one row as :func:`_piece_offsets` runs, which do not depend on the
    centre (both pieces have infinite length and are anchored at it). Public (the domain and
    the scale), so computed once per scale."""
    _, _, log_mass = _pieces(real_line(), np.zeros(1), b)
    lm = log_mass[:, [0, 1]]
    take, skip = _ratios(lm[:, 0], lm[:, 1], np.logaddexp(lm[:, 0], lm[:, 1]))
    return take[0], skip[0]


def _real_line_offsets(domain: FeasibleSet, centre: np.ndarray, b: float, source: RandomSource
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sample_offsets` on the real line (the plain and clamped mechanisms), the same
    computation without its per-row arrays: the two pieces are the half-lines below and above
    ``q``, anchored at ``q``, of infinite length, so their log-masses are the same for every
    row. The choice compares the same uniforms with the same constants ``r`` and ``1 − r``
    (computed by the same functions on one row), and the truncated exponential
    ``−logaddexp(ln W, −∞ + log1p(−W))`` is ``−ln W`` bit for bit (``logaddexp(x, −∞) = x +
    log1p(0)``; the clip to ``[0, ∞]`` leaves it). A seeded source consumes the same words
    in the same order, so its draws are bit-identical; a secure one reads the ``2n``
    independent uniforms in one batch (:meth:`RandomSource.uniform_pair`)."""
    return centre.copy(), real_line_offsets(centre.size, b, source), np.zeros(centre.size,
                                                                              dtype=np.intp)


def real_line_offsets(n: int, b: float, source: RandomSource) -> np.ndarray:
    """The offsets of :func:`_real_line_offsets` alone (its anchors are the centres, its
    components all 0): ``n`` draws of Laplace(0, b) noise, the half-line chosen with the first
    ``n`` uniforms and ``b·E``, ``E = −ln W``, from the next ``n``."""
    take, skip = _real_line_ratios(b)
    u, _, log_w = source.uniform_pair(n)  # (seeded: the same two batches as before)
    below = u < take if take <= 0.5 else ~(u < skip)  # column 0: the lower half-line
    offset = np.multiply(log_w, -b)  # b·E with E = −ln W
    return np.negative(offset, out=offset, where=below)

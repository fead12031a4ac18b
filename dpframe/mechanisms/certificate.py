"""Numeric privacy-loss certificates for Laplace noise conditioned on a feasible set.

For the Laplace density with centre ``q`` and scale ``b`` conditioned on ``D``,
``p_q(x) = exp(-|x - q| / b) / (2 b C(q))`` with ``C(q) = P(Lap(q, b) ∈ D)``. For neighbouring
true answers ``q, q'`` (both in ``D``, ``|q - q'| ≤ Δ``) the largest log-density ratio over
outputs ``x ∈ D`` is attained at ``x = q`` (triangle inequality, equality at ``x = q ∈ D``):

    ε(q, q') = |q' - q| / b + |ln C(q') - ln C(q)|.                                  (1)

Since ``|C'(q)| ≤ C(q) / b`` (differentiate under the integral), both
``z/b + ln C(q+z)`` and ``z/b - ln C(q+z)`` are non-decreasing in ``z``: for a fixed ``q`` the
worst neighbour is the point of ``D`` farthest from ``q`` within ``Δ`` on either side. The
certificate is therefore a one-dimensional maximisation over ``q``, done here on a dense grid
(endpoints included, geometric refinement near every finite endpoint) followed by a bounded
local search. It never uses Holohan's closed form (Lemma 3.3), so it checks it independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from dpframe.mechanisms.domains import LOG_HALF, FeasibleSet

__all__ = ["LossCertificate", "log_mass", "log_normalizer", "worst_case_loss"]


def log_mass(centre: np.ndarray, b: float, lo: float, hi: float) -> np.ndarray:
    """``ln P(Lap(centre, b) ∈ [lo, hi])`` for true answers ``centre`` (vectorised), stable for
    any position of the centre."""
    centre = np.asarray(centre, dtype=float)
    width = hi - lo
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # centre left of the interval: ½ e^{-(lo-centre)/b} (1 - e^{-width/b})
        tail = np.log(-np.expm1(-width / b)) if math.isfinite(width) else 0.0
        left = LOG_HALF - (lo - centre) / b + tail
        right = LOG_HALF - (centre - hi) / b + tail
        # centre inside: 1 - ½ e^{-(centre-lo)/b} - ½ e^{-(hi-centre)/b}
        inner = np.log1p(-0.5 * (np.exp(-(centre - lo) / b) + np.exp(-(hi - centre) / b)))
    return np.where(centre < lo, left, np.where(centre > hi, right, inner))


def log_normalizer(domain: FeasibleSet, centre: np.ndarray, b: float) -> np.ndarray:
    """``ln C(centre)`` for the feasible set (log-sum over its components)."""
    parts = np.stack([log_mass(centre, b, lo, hi) for lo, hi in domain.components])
    return np.logaddexp.reduce(parts, axis=0)


@dataclass(frozen=True)
class LossCertificate:
    """The worst neighbouring pair found and its privacy loss (in nats)."""

    loss: float
    q: float
    q_prime: float


def _grid(domain: FeasibleSet, b: float, reach: float) -> np.ndarray:
    pts = []
    geo = np.geomspace(1e-12, 1.0, 60)
    for lo, hi in domain.components:
        a = lo if math.isfinite(lo) else hi - 60 * b - 2 * reach
        z = hi if math.isfinite(hi) else lo + 60 * b + 2 * reach
        if not math.isfinite(a):  # the real line: C = 1 everywhere
            a, z = -1.0, 1.0
        width = z - a
        pts.append(np.linspace(a, z, 401))
        for scale in (b, reach, width):
            pts.append(np.clip(a + scale * geo, a, z))
            pts.append(np.clip(z - scale * geo, a, z))
    return np.unique(np.concatenate(pts))


def _loss_at(
    domain: FeasibleSet, b: float, reach: float, answers: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (1) at each true answer ``q`` in ``answers`` against its worst neighbour, and that
    neighbour ``q'``."""
    ln_c = log_normalizer(domain, answers, b)
    best = np.full(answers.shape, -np.inf)
    partner = answers.copy()
    for direction in (1, -1):
        neighbour = domain.farthest_within(answers, reach, direction)
        shift = np.abs(neighbour - answers) / b
        loss = shift + np.abs(log_normalizer(domain, neighbour, b) - ln_c)
        better = loss > best
        best = np.where(better, loss, best)
        partner = np.where(better, neighbour, partner)
    return best, partner


def worst_case_loss(domain: FeasibleSet, b: float, sensitivity: float) -> LossCertificate:
    """Largest ``ε(q, q')`` of eq. (1) over neighbouring ``q, q' ∈ D`` at scale ``b``."""
    answers = _grid(domain, b, sensitivity)
    losses, partners = _loss_at(domain, b, sensitivity, answers)
    i = int(np.argmax(losses))
    best = LossCertificate(float(losses[i]), float(answers[i]), float(partners[i]))
    # local refinement between the grid neighbours of the best point
    lo_q, hi_q = answers[max(i - 1, 0)], answers[min(i + 1, answers.size - 1)]
    if hi_q > lo_q:
        res = minimize_scalar(
            lambda x: -_loss_at(domain, b, sensitivity, np.array([x]))[0][0],
            bounds=(lo_q, hi_q),
            method="bounded",
            options={"xatol": 1e-12 * max(1.0, abs(hi_q - lo_q))},
        )
        if -res.fun > best.loss:
            x = np.array([res.x])
            loss, partner = _loss_at(domain, b, sensitivity, x)
            best = LossCertificate(float(loss[0]), float(res.x), float(partner[0]))
    return best

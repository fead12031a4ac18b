"""Closed-form bias and mean squared error of the released value (Liu, Prop. 1–2).

Everything reduces to one primitive: the partial moments of Laplace(s, λ) over an interval,
``m_k = ∫_{x1}^{x2} (x - s)^k e^{-|x - s|/λ} / (2λ) dx`` for ``k = 0, 1, 2``. On the side
``x ≥ s`` with ``t = x - s ∈ [t1, t2]`` and ``g(t) = e^{-t/λ}/2``:

    m0 = g(t1) - g(t2)
    m1 = (t1 + λ) g(t1) - (t2 + λ) g(t2)
    m2 = (t1² + 2λt1 + 2λ²) g(t1) - (t2² + 2λt2 + 2λ²) g(t2)

(integration by parts), and the side ``x ≤ s`` follows by symmetry (``m1`` changes sign).

* Bounded (Laplace conditioned on D; Liu's "truncated", eq. 6): ``E[Y - s] = Σ m1 / Σ m0`` and
  ``E[(Y - s)²] = Σ m2 / Σ m0`` over the components of D.
* Truncated (clamped; Liu's BIT, eq. 7): inside D the same ``m1, m2``; the mass outside D sits on
  the nearest end ``e`` and contributes ``(e - s)^k`` times its probability.
* Laplace: bias 0, MSE ``2λ²``.

For an interval these reproduce Liu's eqs. (6)–(7) and Prop. 2 (tested); half-lines and unions
come from the same primitive. Snapping moves each release by at most Λ (a documented,
separate term), not included here.
"""

from __future__ import annotations

import math

import numpy as np

from dpframe.mechanisms.domains import FeasibleSet

__all__ = ["bounded_moments", "laplace_partial_moments", "truncated_moments"]


def _side(t1: np.ndarray, t2: np.ndarray, lam: float) -> tuple[np.ndarray, ...]:
    """Moments over t ∈ [t1, t2] ⊂ [0, ∞] of e^{-t/λ}/(2λ)."""
    with np.errstate(invalid="ignore", over="ignore"):
        g1 = 0.5 * np.exp(-t1 / lam)
        g2 = np.where(np.isinf(t2), 0.0, 0.5 * np.exp(-t2 / lam))
        t2f = np.where(np.isinf(t2), 0.0, t2)
        m0 = g1 - g2
        m1 = (t1 + lam) * g1 - (t2f + lam) * g2
        m2 = (t1 * t1 + 2 * lam * t1 + 2 * lam * lam) * g1 - (
            t2f * t2f + 2 * lam * t2f + 2 * lam * lam
        ) * g2
    return m0, m1, m2


def laplace_partial_moments(s: np.ndarray, lam: float, x1: float, x2: float) -> tuple:
    """``(m0, m1, m2)`` of ``x - s`` for Laplace(s, λ) over ``[x1, x2]`` (vectorised in s)."""
    s = np.asarray(s, dtype=float)
    up1 = np.maximum(x1 - s, 0.0)
    up2 = np.maximum(x2 - s, 0.0)
    dn1 = np.maximum(s - x2, 0.0)
    dn2 = np.maximum(s - x1, 0.0)
    u0, u1, u2 = _side(up1, up2, lam)
    d0, d1, d2 = _side(dn1, dn2, lam)
    return u0 + d0, u1 - d1, u2 + d2


def bounded_moments(s: np.ndarray, lam: float, domain: FeasibleSet) -> tuple:
    """``(E[Y - s], E[(Y - s)²])`` for Laplace(s, λ) conditioned on ``domain``."""
    tot = [0.0, 0.0, 0.0]
    for lo, hi in domain.components:
        parts = laplace_partial_moments(s, lam, lo, hi)
        tot = [a + p for a, p in zip(tot, parts, strict=True)]
    return tot[1] / tot[0], tot[2] / tot[0]


def truncated_moments(s: np.ndarray, lam: float, domain: FeasibleSet) -> tuple:
    """``(E[Y - s], E[(Y - s)²])`` for Laplace(s, λ) projected onto ``domain`` (clamping)."""
    s = np.asarray(s, dtype=float)
    m1 = np.zeros_like(s)
    m2 = np.zeros_like(s)
    comps = domain.components
    for i, (lo, hi) in enumerate(comps):
        _, a1, a2 = laplace_partial_moments(s, lam, lo, hi)
        m1, m2 = m1 + a1, m2 + a2
        # the region projected onto lo (below lo, down to the gap's midpoint) and onto hi
        below = -math.inf if i == 0 else comps[i - 1][1] + (lo - comps[i - 1][1]) / 2
        above = math.inf if i == len(comps) - 1 else hi + (comps[i + 1][0] - hi) / 2
        for end, x1, x2 in ((lo, below, lo), (hi, hi, above)):
            if math.isinf(end):
                continue
            p = laplace_partial_moments(s, lam, x1, x2)[0]
            m1 = m1 + p * (end - s)
            m2 = m2 + p * (end - s) ** 2
    return m1, m2

"""Negative controls and helpers shared by the audit tests.

The controls are deliberately broken mechanisms; they exist to show that the audit tools can
tell a broken mechanism from a correct one.
"""

from __future__ import annotations

import math

import numpy as np

from dpframe.mechanisms import (
    BoundedLaplace,
    FeasibleSet,
    Laplace,
    TruncatedLaplace,
    half_line,
    interval,
    union,
)

EPS = 1.0
SENS = 1.0

DOMAINS: dict[str, FeasibleSet] = {
    "interval": interval(0.0, 10.0),
    "half-line-lower": half_line(lower=0.0),
    "half-line-upper": half_line(upper=0.0),
    "union": union([(0.0, 3.0), (5.0, 10.0)]),
}

#: Neighbouring pairs per domain: (l, l + Δ), (u − Δ, u) (or far out on a half-line), a mid pair.
PAIRS: dict[str, list[tuple[float, float]]] = {
    "interval": [(0.0, 1.0), (9.0, 10.0), (4.5, 5.5)],
    "half-line-lower": [(0.0, 1.0), (4.5, 5.5), (40.0, 41.0)],
    "half-line-upper": [(-1.0, 0.0), (-5.5, -4.5), (-41.0, -40.0)],
    "union": [(0.0, 1.0), (9.0, 10.0), (2.0, 3.0), (5.0, 6.0)],
}

MECHANISMS = {"bounded": BoundedLaplace, "truncated": TruncatedLaplace, "laplace": Laplace}


class NaiveBounded(BoundedLaplace):
    """Bounded Laplace with the plain scale b0 = Δ/ε (Holohan §3: not ε-DP)."""

    def _continuous_scale(self, epsilon: float) -> float:
        return self.sensitivity / epsilon


def shrunk(cls: type) -> type:
    """A subclass of ``cls`` whose calibrated scale is divided by 1.5."""

    class Shrunk(cls):  # type: ignore[misc, valid-type]
        def _continuous_scale(self, epsilon: float) -> float:
            return super()._continuous_scale(epsilon) / 1.5

    Shrunk.__name__ = f"{cls.__name__}Div1_5"
    return Shrunk


def fixed_scale(cls: type, scale: float) -> type:
    """A subclass of ``cls`` whose noise scale is exactly ``scale`` (for floating-point tests)."""

    class Fixed(cls):  # type: ignore[misc, valid-type]
        def _continuous_scale(self, epsilon: float) -> float:
            return scale

    Fixed.__name__ = f"{cls.__name__}Scale{scale:g}"
    return Fixed


def truncate_normalise_sampler(domain: FeasibleSet, scale: float):
    """Truncation-then-normalisation by rejection at an *uncorrected* scale (a negative control:
    Laplace(q, Δ/ε) redrawn until it lands in the domain; Croft §3.2 without §4's scale)."""

    def sample(value: float, size: int, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(0)
        while out.size < size:
            x = rng.laplace(value, scale, size=2 * size)
            out = np.concatenate([out, x[domain.contains(x)]])
        return out[:size]

    return sample


def naive_laplace(scale: float):
    """The textbook float sampler ``q + b·ln(U)`` with a random sign, U = k·2^-53 (Mironov)."""

    def sample(value: float, size: int, rng: np.random.Generator) -> np.ndarray:
        k = rng.integers(1, 2**53, size=size)
        sign = np.where(rng.integers(0, 2, size=size) == 1, 1.0, -1.0)
        noise = sign * (scale * np.log(k.astype(np.float64) * 2.0**-53))
        return value + noise

    return sample


def naive_reachable(y: np.ndarray, centre: float, scale: float) -> np.ndarray:
    """Exact reachability of outputs ``y`` by :func:`naive_laplace` from ``centre``.

    For a sign ``s`` the map ``k ↦ fl(centre + s·fl(b·fl(ln(k·2^-53))))`` is monotone in ``k``
    (every rounding step is monotone), so a binary search over ``k ∈ [1, 2^53)`` finds the only
    candidates; a ±64 neighbourhood is checked as well, in case ``np.log`` is not monotone.
    """
    y = np.asarray(y, dtype=float)
    reach = np.zeros(y.shape, dtype=bool)

    def g(k: np.ndarray, sign: float) -> np.ndarray:
        return centre + sign * (scale * np.log(k.astype(np.float64) * 2.0**-53))

    for sign in (1.0, -1.0):
        lo = np.ones(y.shape, dtype=np.int64)
        hi = np.full(y.shape, 2**53 - 1, dtype=np.int64)
        # find the smallest k with g(k) ≥ y (sign +1, g increasing) or g(k) ≤ y (sign −1)
        for _ in range(60):
            mid = (lo + hi) // 2
            v = g(mid, sign)
            ok = v >= y if sign > 0 else v <= y
            hi = np.where(ok, mid, hi)
            lo = np.where(ok, lo, mid + 1)
        for d in range(-64, 65):
            k = np.clip(lo + d, 1, 2**53 - 1)
            reach |= g(k, sign) == y
    return reach


def rr_sampler(epsilon: float):
    """Randomised response on {0, 1}: exactly ε-DP and tight (for the false-alarm check)."""
    p = math.exp(epsilon) / (1.0 + math.exp(epsilon))

    def sample(value: float, size: int, rng: np.random.Generator) -> np.ndarray:
        keep = rng.random(size) < p
        return np.where(keep, value, 1.0 - value)

    return sample

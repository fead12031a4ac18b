"""Why the textbook floating-point Laplace sampler leaks (Mironov 2012), in numbers
(docs/audit.md, "Floating point").

The naive sampler draws ``q + s·b·ln(U)`` with a random sign ``s`` and ``U = k·2⁻⁵³``,
``k`` uniform in ``[1, 2⁵³)``. For 2 000 outputs drawn from ``q = 0`` it decides exactly
whether some ``k`` and sign produce the same double from ``q′ = 1``: for a fixed sign the map
``k ↦ fl(q′ + s·fl(b·fl(ln(k·2⁻⁵³))))`` is monotone (every rounding step is), so a binary search
over ``k`` finds the only candidates (a ±64 neighbourhood is checked as well). An output that
``q′`` cannot produce reveals the input. It also prints the share of 10⁵ outputs that are not
multiples of 2⁻⁵³, from ``q = 0`` and ``q = 1`` (a difference an observer can test). The test
suite asserts bounds on both (``tests/audit/test_floating_point.py``). Seeded; a few seconds.

Run: ``python examples/naive_sampler_shares.py``.
"""

from __future__ import annotations

import numpy as np

SCALES = (1.0, 0.125, 2.0**10, 1e6)
N_REACH = 2_000
N_GRID = 100_000


def naive(centre: float, scale: float, size: int, rng: np.random.Generator) -> np.ndarray:
    k = rng.integers(1, 2**53, size=size)
    sign = np.where(rng.integers(0, 2, size=size) == 1, 1.0, -1.0)
    return centre + sign * (scale * np.log(k.astype(np.float64) * 2.0**-53))


def reachable(y: np.ndarray, centre: float, scale: float) -> np.ndarray:
    """Whether each ``y`` is an output of :func:`naive` from ``centre`` (exact)."""
    hit = np.zeros(y.shape, dtype=bool)
    for sign in (1.0, -1.0):
        def out(k: np.ndarray, sign: float = sign) -> np.ndarray:
            return centre + sign * (scale * np.log(k.astype(np.float64) * 2.0**-53))

        lo = np.ones(y.shape, dtype=np.int64)
        hi = np.full(y.shape, 2**53 - 1, dtype=np.int64)
        for _ in range(60):  # smallest k whose output is at or past y in the sign's direction
            mid = (lo + hi) // 2
            v = out(mid)
            past = v >= y if sign > 0 else v <= y
            hi = np.where(past, mid, hi)
            lo = np.where(past, lo, mid + 1)
        for d in range(-64, 65):
            hit |= out(np.clip(lo + d, 1, 2**53 - 1)) == y
    return hit


def off_grid(y: np.ndarray) -> float:
    z = y * 2.0**53
    return float(np.mean(z != np.floor(z)))


def main() -> int:
    rng = np.random.default_rng(1)
    for scale in SCALES:
        y = naive(0.0, scale, N_REACH, rng)
        assert reachable(y, 0.0, scale).all()  # the checker accepts the true outputs
        share = 1.0 - float(reachable(y, 1.0, scale).mean())
        print(f"b = {scale:g}: {100 * share:.1f} % of {N_REACH} outputs from q = 0 "
              "cannot come from q' = 1")
    rng = np.random.default_rng(2)
    print(f"off the 2^-53 grid ({N_GRID:,} outputs, b = 1): "
          f"{100 * off_grid(naive(0.0, 1.0, N_GRID, rng)):.1f} % from q = 0, "
          f"{100 * off_grid(naive(1.0, 1.0, N_GRID, rng)):.1f} % from q = 1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

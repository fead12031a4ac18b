"""Coverage of dpframe's confidence intervals by seeded simulation (docs/privacy.md §I.6).

At level 0.95 and ε = Δ = 1, 10⁵ releases per true value x of the real sampling code
(``mechanism.sample``, snapping included) and the share whose interval
(:func:`dpframe.mechanisms.intervals.confidence_interval`) contains x, at the lower bound,
0.3 b inside it, the middle and the upper bound: for the bounded, truncated and plain
mechanisms on [0, 10] and the bounded one on [0, 2]. Inside, the coverage equals the level
(the intervals are tight there); at a bound it is about 1 − α/2, the side beyond the bound
missing nothing. Negative controls on [0, 100]: a Laplace interval at the nominal scale Δ/ε
(ignoring that conditioning needs the larger b*) at x = 50, and the upper end of the
unconditioned equal-tailed interval at the mechanism's own scale at x = u (its miss rate,
against α/2 = 0.025). The standard error of a coverage near 0.95 is about 0.0007.
Deterministic (fixed seeds); about 10 s.

Run: ``python examples/interval_coverage.py``.
"""

from __future__ import annotations

import math

import numpy as np

from dpframe.mechanisms import make_mechanism
from dpframe.mechanisms.intervals import confidence_interval

LEVEL = 0.95
DRAWS = 100_000
CASES = (("bounded", 10.0), ("truncated", 10.0), ("laplace", 10.0), ("bounded", 2.0))


def coverage(mechanism: object, x: float, seed: int) -> float:
    y = mechanism.sample(np.full(DRAWS, x), random_state=seed)  # type: ignore[attr-defined]
    lo, hi = confidence_interval(mechanism, y, LEVEL)
    return float(np.mean((lo <= x) & (x <= hi)))


def main() -> int:
    print(f"coverage at level {LEVEL}, ε = Δ = 1, {DRAWS:,} releases per true value x")
    for name, upper in CASES:
        m = make_mechanism(name, epsilon=1.0, sensitivity=1.0, lower=0.0, upper=upper)
        points = (0.0, 0.3 * m.scale, upper / 2, upper)
        cells = [f"{coverage(m, x, seed=101 + i):.4f} (x = {x:.3g})" for i, x in enumerate(points)]
        print(f"  {name} [0, {upper:g}]: " + ", ".join(cells))
    m = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0.0, upper=100.0)
    y = m.sample(np.full(DRAWS, 50.0), random_state=201)
    h = (m.sensitivity / m.epsilon) * math.log(1 / (1 - LEVEL))
    print(f"  control, nominal-scale interval at x = 50 on [0, 100]: covers "
          f"{np.mean((y - h <= 50.0) & (y + h >= 50.0)):.3f}")
    y = m.sample(np.full(DRAWS, 100.0), random_state=202)
    miss = np.mean(y + m.scale * math.log(1 / (1 - LEVEL)) < 100.0)
    print(f"  control, unconditioned upper end at x = u = 100: misses {miss:.3f} "
          f"(α/2 = {(1 - LEVEL) / 2:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The mechanism figures of ``python -m benchmarks`` (``docs/privacy.md`` §6): a cold interval
scale solve (the bisection, :func:`dpframe.mechanisms.scales.holohan_scale` unwrapped) paired
with 20 cached ones (``lru_cache`` hits: both sides run about as long), and 1 M vectorised
draws with the secure source paired with numpy's (not secure) ``Generator.laplace`` of the
same size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.figures_core import Sizes, warm

DOMAIN = (0.0, 10.0)
SENSITIVITY = 1.0
SOLVES = 200
#: Cached solves per cold one on the reference side (so both sides run about as long).
CACHED_PER_COLD = 20


def _solve(s: Sizes) -> dict[str, Any]:
    from dpframe.mechanisms.scales import holohan_scale

    width = DOMAIN[1] - DOMAIN[0]
    cold = holohan_scale.__wrapped__
    out = warm({"dp": lambda: [cold(1.0, 0.0, SENSITIVITY, width) for _ in range(SOLVES)],
                "native": lambda: [holohan_scale(1.0, 0.0, SENSITIVITY, width)
                                   for _ in range(SOLVES * CACHED_PER_COLD)]}, s.rounds)
    return out | {"per_solve_us": round(out["dp_ms"] * 1e3 / SOLVES, 1)}


def _sample(kind: str) -> Callable[[Sizes], dict[str, Any]]:
    def measure(s: Sizes) -> dict[str, Any]:
        import numpy as np

        from dpframe.mechanisms import BoundedLaplace, Laplace

        draws = 1_000_000 if s.large >= 1_000_000 else 10_000
        cls = BoundedLaplace if kind == "bounded" else Laplace
        m = cls(1.0, SENSITIVITY, lower=DOMAIN[0], upper=DOMAIN[1])
        rng = np.random.default_rng()
        out = warm({"dp": lambda: m.sample(5.0, size=draws),
                    "native": lambda: rng.laplace(5.0, 1.0, draws)}, s.rounds)
        return out | {"draws": draws, "draws_per_s": round(draws / out["dp_ms"] * 1e3)}
    return measure


def figures() -> dict[str, tuple[str, Callable[[Sizes], dict[str, Any]]]]:
    return {
        "mech.solve.cold": (f"{SOLVES} cold interval scale solves / "
                            f"{SOLVES * CACHED_PER_COLD:,} cached ones",
                            _solve),
        "mech.sample.bounded": ("1 M secure bounded-Laplace draws / numpy Generator.laplace",
                                _sample("bounded")),
        "mech.sample.laplace": ("1 M secure Laplace draws / numpy Generator.laplace",
                                _sample("laplace")),
    }

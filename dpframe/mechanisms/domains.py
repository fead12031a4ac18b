"""Feasible output sets: intervals, half-lines and finite unions of disjoint intervals.

A mechanism's output must lie in a public *feasible set* ``D``. Croft et al. describe ``D`` by its
complement (their "constraints"); we store ``D`` itself as sorted, disjoint, closed components
``[l_0, u_0] ∪ ... ∪ [l_k, u_k]`` where only ``l_0`` may be ``-inf`` and only ``u_k`` may be
``+inf``. Everything here is public: nothing depends on data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from dpframe.errors import ParameterError

__all__ = ["FeasibleSet", "half_line", "interval", "real_line", "union"]

LOG_HALF = -math.log(2.0)


def _as_endpoint(x: object, what: str) -> float:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a number, got {x!r}") from None
    if math.isnan(v):
        raise ParameterError(f"{what} is NaN; give a real number")
    return v


@dataclass(frozen=True)
class FeasibleSet:
    """Sorted, disjoint, closed components ``((l_0, u_0), ..., (l_k, u_k))``.

    Build with :func:`interval`, :func:`half_line`, :func:`union` or :func:`real_line`;
    the constructor validates: every component has ``l < u``, components are sorted and separated
    by a gap of positive length, and only the outermost ends may be infinite.
    """

    components: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        comps = self.components
        if not comps:
            raise ParameterError("a feasible set needs at least one interval")
        for i, (lo, hi) in enumerate(comps):
            if math.isnan(lo) or math.isnan(hi):
                raise ParameterError("feasible-set endpoints must not be NaN")
            if not lo < hi:
                raise ParameterError(
                    f"interval {i} is [{lo}, {hi}]: the lower end must be strictly below the upper"
                    " end; swap or widen the bounds"
                )
            if math.isinf(lo) and (i > 0 or lo > 0):
                raise ParameterError("only the first interval may start at -inf")
            if math.isinf(hi) and (i < len(comps) - 1 or hi < 0):
                raise ParameterError("only the last interval may end at +inf")
        for i in range(1, len(comps)):
            if not comps[i - 1][1] < comps[i][0]:
                raise ParameterError(
                    f"intervals {i - 1} and {i} overlap or touch ({comps[i - 1]} and {comps[i]});"
                    " give disjoint intervals sorted by position, or merge them"
                )

    # -- descriptions -------------------------------------------------------------------------
    @property
    def lower(self) -> float:
        return self.components[0][0]

    @property
    def upper(self) -> float:
        return self.components[-1][1]

    @property
    def is_bounded(self) -> bool:
        return math.isfinite(self.lower) and math.isfinite(self.upper)

    @property
    def kind(self) -> str:
        """``"interval"``, ``"half-line"``, ``"real-line"`` or ``"union"``."""
        if len(self.components) > 1:
            return "union"
        if self.is_bounded:
            return "interval"
        if math.isinf(self.lower) and math.isinf(self.upper):
            return "real-line"
        return "half-line"

    @property
    def finite_endpoints(self) -> list[float]:
        return [e for c in self.components for e in c if math.isfinite(e)]

    @property
    def finite_span(self) -> float:
        """Distance between the extreme finite endpoints (0 for one half-line or R)."""
        ends = self.finite_endpoints
        return max(ends) - min(ends) if len(ends) > 1 else 0.0

    @property
    def min_component_width(self) -> float:
        return min(hi - lo for lo, hi in self.components)

    def __str__(self) -> str:
        def fmt(c: tuple[float, float]) -> str:
            lo, hi = c
            left = "(" if math.isinf(lo) else "["
            right = ")" if math.isinf(hi) else "]"
            return f"{left}{lo:g}, {hi:g}{right}"

        return " ∪ ".join(fmt(c) for c in self.components)

    # -- membership and projection ------------------------------------------------------------
    def contains(self, x: np.ndarray | float) -> np.ndarray:
        """Vectorised membership test."""
        x = np.asarray(x, dtype=float)
        inside = np.zeros(x.shape, dtype=bool)
        for lo, hi in self.components:
            inside |= (x >= lo) & (x <= hi)
        return inside

    def project(self, x: np.ndarray | float) -> np.ndarray:
        """Nearest point of the set (ties go to the lower component); a deterministic map."""
        x = np.asarray(x, dtype=float)
        out = np.clip(x, self.lower, self.upper)
        for (_, hi), (lo_next, _) in zip(self.components, self.components[1:], strict=False):
            in_gap = (out > hi) & (out < lo_next)
            mid = hi + (lo_next - hi) / 2.0
            out = np.where(in_gap, np.where(out <= mid, hi, lo_next), out)
        return out

    def farthest_within(self, points: np.ndarray, reach: float, direction: int) -> np.ndarray:
        """For each point ``q`` of ``points`` (in the set), the point of the set farthest from ``q``
        in ``direction`` (+1 or -1) at distance at most ``reach``: the worst neighbour of ``q``
        (see :mod:`dpframe.mechanisms.certificate`)."""
        points = np.asarray(points, dtype=float)
        target = points + direction * reach
        best = points.copy()
        for lo, hi in self.components:
            if direction > 0:
                cand = np.minimum(target, hi)
                ok = cand >= np.maximum(lo, points)
            else:
                cand = np.maximum(target, lo)
                ok = cand <= np.minimum(hi, points)
            best = np.where(ok & ((cand - best) * direction > 0), cand, best)
        return best


def interval(lower: float, upper: float) -> FeasibleSet:
    """The closed interval ``[lower, upper]`` (either end may be infinite: a half-line)."""
    lo = _as_endpoint(lower, "lower")
    hi = _as_endpoint(upper, "upper")
    if not lo < hi:
        raise ParameterError(
            f"lower={lo:g} must be strictly below upper={hi:g}; swap them or widen the domain"
        )
    return FeasibleSet(((lo, hi),))


def half_line(*, lower: float | None = None, upper: float | None = None) -> FeasibleSet:
    """``[lower, +inf)`` or ``(-inf, upper]``; give exactly one finite end."""
    if (lower is None) == (upper is None):
        raise ParameterError("a half-line needs exactly one of lower= or upper=")
    if lower is not None:
        lo = _as_endpoint(lower, "lower")
        if not math.isfinite(lo):
            raise ParameterError("the finite end of a half-line must be finite")
        return FeasibleSet(((lo, math.inf),))
    hi = _as_endpoint(upper, "upper")
    if not math.isfinite(hi):
        raise ParameterError("the finite end of a half-line must be finite")
    return FeasibleSet(((-math.inf, hi),))


def real_line() -> FeasibleSet:
    """The whole real line (the plain Laplace mechanism's output set): one shared instance (a
    feasible set is immutable; a scalar draw asks for it on every release)."""
    return _REAL_LINE


_REAL_LINE = FeasibleSet(((-math.inf, math.inf),))


def union(intervals: Iterable[Sequence[float]]) -> FeasibleSet:
    """A finite union of disjoint closed intervals, given sorted by position."""
    comps = []
    for i, pair in enumerate(intervals):
        if len(pair) != 2:
            raise ParameterError(f"interval {i} must be a (lower, upper) pair, got {pair!r}")
        comps.append((_as_endpoint(pair[0], "lower"), _as_endpoint(pair[1], "upper")))
    return FeasibleSet(tuple(comps))


def resolve_domain(
    lower: float | None, upper: float | None, domain: FeasibleSet | Sequence | None
) -> FeasibleSet:
    """Turn the ``lower=/upper=/domain=`` arguments of a mechanism into a :class:`FeasibleSet`."""
    if domain is not None:
        if lower is not None or upper is not None:
            raise ParameterError("give either lower=/upper= or domain=, not both")
        if isinstance(domain, FeasibleSet):
            return domain
        return union(domain)
    lo = -math.inf if lower is None else _as_endpoint(lower, "lower")
    hi = math.inf if upper is None else _as_endpoint(upper, "upper")
    return interval(lo, hi)

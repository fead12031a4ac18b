"""The Laplace family: bounded (conditioned), truncated (clamped) and plain, all snapped.

* :class:`BoundedLaplace` — "bounded" (Holohan), "truncated" (Liu), "truncated-and-normalized"
  (Croft): Laplace conditioned on D; scale b* (Holohan's fixed point, half-line closed form,
  union search).
* :class:`TruncatedLaplace` — "truncated" (Holohan A.2), "BIT" (Liu): clamp to D
  (post-processing); scale Δ/ε.
* :class:`Laplace` — the standard mechanism; scale Δ/ε.

Each calibrates its continuous scale to ``ε - epsilon_overhead`` where ``epsilon_overhead`` is the
proven cost of finite precision and snapping (:mod:`.snapping`), so a release spends exactly ε.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.certificate import LossCertificate, worst_case_loss
from dpframe.mechanisms.domains import FeasibleSet, real_line, resolve_domain
from dpframe.mechanisms.moments import bounded_moments, truncated_moments
from dpframe.mechanisms.randomness import RandomSource, RandomState
from dpframe.mechanisms.sampling import real_line_offsets, sample_offsets
from dpframe.mechanisms.scalar import draw_one, project_one
from dpframe.mechanisms.scales import bounded_scale
from dpframe.mechanisms.snapping import (
    CLIP,
    SnapPlan,
    end_cell_values,
    plan_snapping,
    rounding_cost,
    snap_to_cells,
)

__all__ = ["MECHANISM_NAMES", "BoundedLaplace", "Laplace", "TruncatedLaplace", "make_mechanism"]

#: How far (in units of the scale b) the output window of unbounded sampling reaches beyond the
#: true-value range; Laplace noise exceeds it with probability e^-1024.
WINDOW_REACH = 1024.0
#: The real line's one component (a sampling set without finite ends).
_REAL_LINE = ((-math.inf, math.inf),)
#: Default public bound on |true value| for unbounded domains, beyond the finite ends, in Δ.
DEFAULT_MAGNITUDE_REACH = 2.0**16


def _check_positive_finite(value: object, name: str, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{name} must be a number, got {type(value).__name__}; {hint}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {v!r}; {hint}")
    return v


def _single_value(value: Any) -> tuple[float, tuple[int, ...]] | None:
    """``(value, shape)`` when ``value`` is one number (a Python or numpy scalar, or an
    array of one element), else None."""
    if type(value) is float:  # (the release's case, without the isinstance chain)
        return value, ()
    if isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, bool):
        return float(value), ()
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "fiu":
        return float(value.reshape(-1)[0]), value.shape
    return None


class _LaplaceFamily:
    """Shared machinery; subclasses set how the output is kept in the feasible set."""

    name: ClassVar[str] = ""
    uses_delta: ClassVar[bool] = False

    def __init__(
        self,
        epsilon: float,
        sensitivity: float,
        lower: float | None = None,
        upper: float | None = None,
        delta: float = 0.0,
        domain: FeasibleSet | None = None,
        *,
        magnitude: float | None = None,
        snapping: bool = True,
    ) -> None:
        self.epsilon = _check_positive_finite(
            epsilon, "epsilon", "pass the privacy budget for this release, e.g. epsilon=0.5"
        )
        self.sensitivity = _check_positive_finite(
            sensitivity, "sensitivity", "it is the largest change of the statistic between"
            " neighbouring datasets"
        )
        d = float(delta)
        if not (0.0 <= d < 1.0) or math.isnan(d):
            raise ParameterError(f"delta must lie in [0, 1), got {delta!r}")
        if d > 0 and not self.uses_delta:
            raise ParameterError(
                f"the {self.name} Laplace mechanism is pure ε-DP and does not use delta;"
                " pass delta=0, or use mechanism='bounded', which does"
            )
        self.delta = d
        self.domain = resolve_domain(lower, upper, domain)
        self._check_sensitivity()
        self.magnitude = self._resolve_magnitude(magnitude)
        self.snapping = bool(snapping)
        self._calibrate()

    # -- construction helpers -----------------------------------------------------------------
    def _check_sensitivity(self) -> None:
        pass

    def _resolve_magnitude(self, magnitude: float | None) -> float:
        ends = self.domain.finite_endpoints
        biggest = max((abs(e) for e in ends), default=0.0)
        if magnitude is None:
            if self.domain.is_bounded:
                return biggest
            return biggest + DEFAULT_MAGNITUDE_REACH * self.sensitivity
        m = _check_positive_finite(magnitude, "magnitude", "a public bound on |true value|")
        if m < biggest:
            raise ParameterError(f"magnitude={m:g} is smaller than the domain's ends ({biggest:g})")
        return m

    def _continuous_scale(self, epsilon: float) -> float:
        return self.sensitivity / epsilon

    def _sampling_set(self) -> FeasibleSet:
        return real_line()

    def _window(self, scale: float) -> tuple[float, float]:
        lo = self.domain.lower if math.isfinite(self.domain.lower) else -self.magnitude
        hi = self.domain.upper if math.isfinite(self.domain.upper) else self.magnitude
        return lo, hi

    def _scale_for(self, epsilon: float) -> float:
        """The continuous scale for ``epsilon``, or a :class:`ParameterError` when it is not a
        positive finite double (ε so small that Δ/ε overflows, or the scale's equation has no
        solution in floating point): a fact about the parameters alone."""
        try:
            b = self._continuous_scale(epsilon)
        except (ArithmeticError, ValueError):
            b = math.nan
        if not (math.isfinite(b) and b > 0):
            raise ParameterError(
                f"epsilon={self.epsilon:g} is too small for this sensitivity "
                f"({self.sensitivity:g}) and domain: the noise scale cannot be computed in "
                "floating point; use a larger epsilon"
            )
        return b

    def _unfit(self, reason: str) -> ParameterError:
        """The error for parameters floating point cannot calibrate, naming the way out: a
        large ε makes the noise finer than the doubles of the domain, a small one makes the
        snapping overhead exceed ε, and a domain of a few doubles fits no grid at all."""
        lo, hi = self._window(1.0)
        advice = ("use a smaller epsilon (the noise would be finer than the floating-point "
                  "numbers of the domain)" if self.epsilon > 1.0
                  else "use a larger epsilon or wider bounds")
        return ParameterError(
            f"epsilon={self.epsilon:g} cannot be calibrated in floating point for the domain "
            f"[{lo:g}, {hi:g}] and sensitivity {self.sensitivity:g} ({reason}); {advice}"
        )

    def _calibrate(self) -> None:
        if not self.snapping:
            self.scale = self._scale_for(self.epsilon)
            self.plan: SnapPlan | None = None
            self.epsilon_overhead = 0.0
            self.grid = 0.0
            return
        b = self._scale_for(self.epsilon)
        try:
            plan = plan_snapping(b, self.epsilon, self._sampling_set(), self._window(b))
        except (ArithmeticError, ValueError):
            raise self._unfit("no snapping grid fits") from None
        reserved = plan.overhead
        for _ in range(20):
            if reserved >= self.epsilon:
                raise self._unfit("snapping would cost all of it")
            b = self._scale_for(self.epsilon - reserved)
            cost = rounding_cost(plan.delta_t_at(b), plan.w_min, plan.w_max, b) + plan.choice_cost
            if cost <= reserved:
                break
            reserved = cost
        else:  # pragma: no cover - the iteration converges in 2-3 steps
            raise ArithmeticError("snapping calibration did not converge")
        self.scale = b
        self.plan = plan
        self.epsilon_overhead = reserved
        self.grid = plan.grid

    # -- public API ---------------------------------------------------------------------------
    @staticmethod
    def random_source(random_state: RandomState = None) -> str:
        """``"secure"`` when ``random_state`` is None, else ``"seeded"``."""
        return RandomSource(random_state).kind

    def _validate_values(self, value: Any) -> np.ndarray:
        true = np.asarray(value, dtype=float)
        if self._all_inside(true):  # (the release's case: clamped into an interval)
            return true
        if np.isnan(true).any():
            raise self._refused("nan")
        if not np.isfinite(true).all():
            raise self._refused("infinite")
        if not self.domain.contains(true).all():
            raise self._refused("outside")
        if (np.abs(true) > self.magnitude).any():
            raise self._refused("magnitude")
        return true

    def _all_inside(self, true: np.ndarray) -> bool:
        """Whether every value passes :meth:`_validate_values`'s four checks, from the
        smallest and largest value alone (two reductions instead of four passes; a NaN makes
        both NaN, an infinity shows in one of them) on a one-interval domain, where lying
        between the two ends is membership; False sends the values through the checks one by
        one (which then raise the right error, or pass: any other domain)."""
        comps = self.domain.components
        if len(comps) != 1 or true.size == 0:
            return False
        low = float(np.minimum.reduce(true, axis=None))
        high = float(np.maximum.reduce(true, axis=None))
        return (math.isfinite(low) and math.isfinite(high) and comps[0][0] <= low
                and high <= comps[0][1] and max(-low, high) <= self.magnitude)

    def _validate_one(self, value: float) -> float:
        """:meth:`_validate_values` for one true value, without arrays."""
        if math.isnan(value):
            raise self._refused("nan")
        if math.isinf(value):
            raise self._refused("infinite")
        comps = self.domain.components
        inside = (comps[0][0] <= value <= comps[0][1] if len(comps) == 1 else
                  any(lo <= value <= hi for lo, hi in comps))
        if not inside:
            raise self._refused("outside")
        if abs(value) > self.magnitude:
            raise self._refused("magnitude")
        return value

    def _refused(self, why: str) -> ParameterError:
        """The error for a true value the mechanism cannot take (a caller's bug: a release
        clamps its statistic into the domain first)."""
        return ParameterError({
            "nan": "the true value is NaN; drop or impute missing data first",
            "infinite": "the true value is infinite; check the data and its bounds",
            "outside": f"the true value lies outside the feasible set {self.domain}; the"
                       " query's output domain must contain every possible true answer (clamp"
                       " the data to its bounds)",
            "magnitude": f"|true value| exceeds magnitude={self.magnitude:g}, the public bound"
                         " snapping needs on an unbounded domain; pass a larger magnitude=",
        }[why])

    def sample(
        self,
        value: Any,
        size: int | tuple[int, ...] | None = None,
        random_state: RandomState = None,
    ) -> float | np.ndarray:
        """Release noisy value(s) for true value(s) ``value`` (vectorised).

        ``size`` broadcasts a scalar to that many draws. ``random_state`` (int or Generator) is
        for tests and simulations; without it randomness comes from the OS CSPRNG.
        """
        one = _single_value(value) if size is None else None
        if one is not None:  # one draw: the array-free twin of _draw (bit-identical)
            drawn = self._post_process_one(draw_one(
                self._sampling_set(), self._validate_one(one[0]), self.scale, self.plan,
                RandomSource(random_state)))
            return drawn if one[1] == () else np.full(one[1], drawn)
        true = self._validate_values(value)
        if size is not None:
            true = np.broadcast_to(true, size)
        shape = true.shape
        flat = (true if true.ndim == 1 and true.flags.c_contiguous  # (a vector of values:
                else np.ascontiguousarray(true, dtype=float).ravel())  # itself, as before)
        source = RandomSource(random_state)
        out = self._draw(flat, source)
        if shape == ():
            return float(out[0])
        return out if out.shape == shape else out.reshape(shape)

    def _draw(self, true: np.ndarray, source: RandomSource) -> np.ndarray:
        sampling_set = self._sampling_set()
        if self.plan is not None and true.size and sampling_set.components == _REAL_LINE:
            # (sample_offsets' real-line path without its copied anchors and components: no
            # finite end, no end cells to look up)
            offset = real_line_offsets(true.size, self.scale, source)
            return self._post_process(snap_to_cells(true, offset, self.plan.grid, None, None,
                                                    self.plan.window))
        anchor, offset, comp = sample_offsets(sampling_set, true, self.scale, source)
        if self.plan is None:
            out = anchor + offset
        elif sampling_set.components == _REAL_LINE:  # (no draws)
            out = snap_to_cells(anchor, offset, self.plan.grid, None, None, self.plan.window)
        else:
            lows = np.array([c[0] for c in sampling_set.components])
            highs = np.array([c[1] for c in sampling_set.components])
            out = snap_to_cells(
                anchor, offset, self.plan.grid, lows[comp], highs[comp], self.plan.window
            )
        return self._post_process(out)

    def _post_process(self, out: np.ndarray) -> np.ndarray:
        return out

    def _post_process_one(self, out: float) -> float:
        return out

    @property
    def off_grid_values(self) -> list[float]:
        """The public values a release may take besides multiples of ``grid``."""
        if self.plan is None:
            return []
        return self._off_grid_values()

    def _off_grid_values(self) -> list[float]:
        assert self.plan is not None
        return list(self.plan.window)

    def certificate(self) -> LossCertificate:
        """Worst neighbouring pair and its continuous privacy loss at the calibrated scale."""
        return worst_case_loss(self._sampling_set(), self.scale, self.sensitivity)

    def privacy_loss(self) -> float:
        """Certified ε of a release: numeric worst-case loss (δ folded in as in Holohan A.4)
        plus the snapping overhead. Must not exceed ``epsilon``."""
        loss = self.certificate().loss + math.log1p(-self.delta)
        return max(loss, 0.0) + self.epsilon_overhead

    def _moments(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def bias(self, value: Any) -> float | np.ndarray:
        """``E[release] - value`` (closed form, Liu Prop. 1; snapping excluded)."""
        b, _ = self._moments(value)
        return float(b) if np.ndim(b) == 0 else b

    def mse(self, value: Any) -> float | np.ndarray:
        """``E[(release - value)²]`` (closed form, Liu Prop. 2; snapping excluded)."""
        _, m = self._moments(value)
        return float(m) if np.ndim(m) == 0 else m

    def describe(self) -> dict[str, Any]:
        """Public parameters for the accounting log."""
        return {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sensitivity": self.sensitivity,
            "scale": self.scale,
            "grid": self.grid,
            "epsilon_overhead": self.epsilon_overhead,
            "domain": str(self.domain),
            "snapping": self.snapping,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"sensitivity={self.sensitivity:g}, domain={self.domain}, scale={self.scale:.6g}, "
            f"grid={self.grid:g}, epsilon_overhead={self.epsilon_overhead:.3g})"
        )


class BoundedLaplace(_LaplaceFamily):
    """Laplace noise conditioned on the feasible set (Holohan Def. 3.1; Croft §3.2).

    The scale solves the exact privacy condition for the set: Holohan's fixed point b* for an
    interval (honouring δ through eq. 3.1), the closed form ``Δ/ln((e^ε+1)/2)`` for a half-line,
    and a search for the smallest scale whose certified worst-case loss is within ε for a union
    of intervals (standard ε-DP; not Croft's stronger criterion, see :mod:`.scales`). Sampling
    is by exact inversion (no rejection loop).
    """

    name = "bounded"
    uses_delta = True

    def _check_sensitivity(self) -> None:
        width = self.domain.upper - self.domain.lower
        if self.domain.kind == "interval" and self.sensitivity > width:
            raise ParameterError(
                f"sensitivity={self.sensitivity:g} exceeds the domain width"
                f" {width:g}; no two answers in the domain differ"
                " by more, so pass sensitivity=upper-lower (Holohan et al. assume Δ ≤ u - l)"
            )

    def _continuous_scale(self, epsilon: float) -> float:
        return bounded_scale(epsilon, self.delta, self.sensitivity, self.domain)

    def _off_grid_values(self) -> list[float]:
        assert self.plan is not None
        return end_cell_values(self.domain.components, self.plan.grid) + list(self.plan.window)

    def _sampling_set(self) -> FeasibleSet:
        return self.domain

    def _moments(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        return bounded_moments(np.asarray(value, dtype=float), self.scale, self.domain)


class TruncatedLaplace(_LaplaceFamily):
    """Plain Laplace noise at scale Δ/ε, then clamped to the feasible set (Holohan A.2; Liu's
    BIT). Clamping is post-processing, so the scale is the plain one."""

    name = "truncated"

    def _post_process(self, out: np.ndarray) -> np.ndarray:
        comps = self.domain.components
        if len(comps) == 1:  # an interval: FeasibleSet.project's clip, on the drawn array
            return CLIP(out, comps[0][0], comps[0][1], out=out)
        return self.domain.project(out)

    def _post_process_one(self, out: float) -> float:
        return project_one(self.domain, out)

    def _off_grid_values(self) -> list[float]:
        return self.domain.finite_endpoints

    def _moments(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        return truncated_moments(np.asarray(value, dtype=float), self.scale, self.domain)


class Laplace(_LaplaceFamily):
    """The standard Laplace mechanism (output unbounded); ``lower/upper`` give the range of the
    true value, which fixes the public snapping window."""

    name = "laplace"

    def _window(self, scale: float) -> tuple[float, float]:
        lo, hi = super()._window(scale)
        return lo - WINDOW_REACH * scale, hi + WINDOW_REACH * scale

    def _moments(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(value, dtype=float)
        return np.zeros_like(v), np.full_like(v, 2.0 * self.scale**2)


MECHANISM_NAMES = ("bounded", "truncated", "laplace")
_CLASSES: dict[str, type[_LaplaceFamily]] = {
    "bounded": BoundedLaplace,
    "truncated": TruncatedLaplace,
    "laplace": Laplace,
}


def make_mechanism(
    name: str,
    *,
    epsilon: float,
    sensitivity: float,
    lower: float | None = None,
    upper: float | None = None,
    delta: float = 0.0,
    **options: Any,
) -> _LaplaceFamily:
    """Build a mechanism by name: ``"bounded"`` (dpframe's default), ``"truncated"``,
    ``"laplace"``."""
    try:
        cls = _CLASSES[name]
    except (KeyError, TypeError):
        raise ParameterError(
            f"unknown mechanism {name!r}; choose one of {', '.join(MECHANISM_NAMES)}"
        ) from None
    params = (epsilon, sensitivity, lower, upper, delta)
    if not any(isinstance(v, bool) for v in params):  # True == 1 must not hit the cache
        try:
            return _cached(name, *params, tuple(sorted(options.items())))
        except TypeError:  # unhashable arguments: build uncached (the constructor validates)
            pass
    return cls(epsilon, sensitivity, lower=lower, upper=upper, delta=delta, **options)


@functools.lru_cache(maxsize=512)
def _cached(
    name: str,
    epsilon: float,
    sensitivity: float,
    lower: float | None,
    upper: float | None,
    delta: float,
    options: tuple[tuple[str, Any], ...],
) -> _LaplaceFamily:
    """Mechanisms are immutable after construction, so equal parameters can share one
    (the scale solve and the snapping plan then run once)."""
    return _CLASSES[name](
        epsilon, sensitivity, lower=lower, upper=upper, delta=delta, **dict(options)
    )

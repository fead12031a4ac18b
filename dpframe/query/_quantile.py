"""Quantiles of a bounded column (``dpf.quantile``, ``dpf.median``, ``frame.dp.quantile``):
:class:`Quantile`, the exponential mechanism over public bins (``docs/privacy.md``, section Q)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from dpframe._validation import check_number, is_real_number
from dpframe.errors import ParameterError
from dpframe.mechanisms.domains import interval
from dpframe.mechanisms.quantile_intervals import check_ci_share
from dpframe.mechanisms.quantiles import (
    DEFAULT_MAX_CELLS,
    MAX_QUANTILE_BINS,
    QuantileMechanism,
    default_bins,
)
from dpframe.mechanisms.randomness import RandomState
from dpframe.query._aggregates import Agg, Bins, ReadWindows
from dpframe.query._measurement_kinds import SELECTION
from dpframe.query._plans import (
    Measurement,
    Plan,
    PlanContext,
    Query,
    require_bounds,
)
from dpframe.query._quantile_plan import quantile_plan_fields

__all__ = ["Quantile", "QuantileSelection", "median", "quantile"]


class Quantile(Query):
    r"""Quantiles of a bounded column: the exponential mechanism over public bins
    (``docs/privacy.md``, section Q; :mod:`dpframe.mechanisms.quantiles`).

    The column is clamped to ``[l, u]`` and its rows counted per bin of ``B`` equal public
    bins (:class:`dpframe.query._aggregates.Bins`: one exact integer aggregate per bin and group,
    computed in the frame's engine; the numpy engine counts bin by bin only where the draws
    recorded on the aggregate's :class:`~dpframe.query._aggregates.ReadWindows` read, and
    block totals elsewhere: the same draws). For each level ``q`` the mechanism picks bin ``j`` with
    probability
    ``∝ exp(−λ·min(d_j, C/λ))``, ``d_j`` the distance from the target rank ``q·N`` to the ranks
    the bin holds, and releases the bin's midpoint, always inside ``[l, u]``. Several levels
    share the query's ε equally (sequential composition) and are sorted (post-processing).

    *Sensitivity of d.* Replacing a row moves each cumulative count ``L_j`` by at most 1 with
    ``N`` fixed: ``Δ = 1``. A verified derivation (a private size) changes by one added,
    removed or replaced row: ``Δ ≤ max(q, 1 − q, 1) = 1``. One group of a group-by changes by an
    added or removed row, ``Δ = max(q, 1 − q)``, and each group is charged ε/2 (a replaced row
    touches two groups), as for every grouped statistic. ``λ = (ε_q − 4η)/(2Δ)`` with the
    finite-precision overhead ``4η`` of the race sampler reserved first (about 1e-11).
    The rank ``N`` is never released; missing values follow the column's policy.
    """

    kind = "quantile"

    def __init__(self, column: str, q: float | Sequence[float] = 0.5,
                 bins: int | None = None, ci_share: float = 0.5) -> None:
        super().__init__(column)
        levels = [q] if np.ndim(q) == 0 else list(np.asarray(q, dtype=object).ravel())
        checked = []
        for v in levels:
            if not is_real_number(v):
                raise ParameterError(f"quantile levels must be numbers in [0, 1], got {v!r}")
            level = check_number("quantile level", v)
            if not 0.0 <= level <= 1.0:
                raise ParameterError(f"quantile levels must lie in [0, 1], got {v!r} (use "
                                     "0.5 for the median, not 50)")
            checked.append(level)
        if not checked or len(set(checked)) != len(checked):
            raise ParameterError(f"q must be a level or a list of distinct levels, got {q!r}")
        if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int | np.integer)
                                 or not 2 <= int(bins) <= MAX_QUANTILE_BINS):
            raise ParameterError(f"bins must be an int in [2, {MAX_QUANTILE_BINS}] (equal "
                                 f"public bins of the bounds), got {bins!r}")
        self.levels = tuple(checked)
        self.scalar = np.ndim(q) == 0
        self.bins = None if bins is None else int(bins)
        self.ci_share = check_ci_share(ci_share)

    def __repr__(self) -> str:
        q = self.levels[0] if self.scalar else list(self.levels)
        return f"dpf.quantile({self.column!r}, {q!r})"

    @property
    def labels(self) -> tuple[str, ...] | None:
        """How the answers of several levels are named: ``<name>[<label>]``."""
        return None if self.scalar else _level_labels(self.levels)

    def plan(self, ctx: PlanContext) -> Plan:
        lo, hi = require_bounds(ctx, self.kind)
        groups = max(ctx.n_groups, 1)
        # the default grid follows the public size (the protected n, also where the size is
        # private; under add/remove neighbours the declared max_rows, else 2³¹, never n) and
        # the release's ε per row of a unit: docs/frames.md "Quantile resolution"
        eps_rule = None if ctx.epsilon is None else ctx.epsilon / ctx.rows_per_unit
        count = self.bins if self.bins is not None else default_bins(ctx.n, eps_rule, groups)
        if self.bins is None and groups * count > DEFAULT_MAX_CELLS:
            # very many groups (e.g. keys selected from the data): fewer bins, so the counts
            # (groups × bins doubles) stay within the public memory budget
            count = max(2, DEFAULT_MAX_CELLS // groups)
        windows = ReadWindows()  # the draws of this plan's mechanisms, recorded as built
        bins = Bins(float(lo), float(hi), count, windows)
        if not (hi > lo and math.isfinite(lo) and math.isfinite(hi) and bins.half_width > 0):
            # binning divides by u/2 − l/2 (engine.Bins): a public fact, checked here, so
            # binning can never fail on a value
            raise ParameterError(
                f"quantiles of {self.column!r} need finite bounds lower < upper with "
                f"upper/2 − lower/2 > 0; got [{lo:g}, {hi:g}]")
        agg = Agg("bins", self.column, bins=bins)
        # several rows per unit (k): a replaced unit is k single-row changes, each moving every
        # rank distance by at most 1 (Lemma Q1), in the groups it touches: calibrated for
        # replacement at ε/k (group privacy; per group the release's group share applies)
        # per group (a replaced row leaves one group and joins another, each at the group
        # share) and on an add/remove data set (one row more or less) a group's counts differ
        # by one added or removed row: add/remove calibration (mechanisms.quantiles)
        k = ctx.rows_per_unit
        neighbours = "add/remove" if (ctx.grouped or ctx.add_remove) and k == 1 else "replace"
        levels = self.levels

        def make(epsilon: float, delta: float) -> QuantileSelection:
            return QuantileSelection(QuantileMechanism(
                epsilon / k, lo, hi, list(levels), bins=count, neighbours=neighbours), k)

        make(1.0, 0.0)  # parameters checked before anything is read
        m = Measurement("quantile", lambda a: np.asarray(a[agg], dtype=np.float64), 1.0, lo, hi,
                        1.0, (agg,), make=make, kind=SELECTION)
        formulation = (
            f"exponential mechanism on the rank distance over {count} equal public bins of "
            f"[{lo:g}, {hi:g}] (levels {', '.join(f'{v:g}' for v in levels)}, ε split evenly, "
            f"{neighbours} neighbours); the chosen bin's midpoint, sorted over levels")
        # with ci=: a value interval from two bracketing releases at ci_share of the ε, and
        # the point's rank interval (docs/privacy.md Q.6, dpframe.mechanisms.quantile_intervals)
        fields = quantile_plan_fields(self, m, formulation, ctx, k, neighbours, count,
                                      lambda mech: QuantileSelection(mech, k))
        # every mechanism that will read the counts (the point and, with ci=, the two
        # brackets) records its draws on the aggregate when it is built, before the read
        fields["measurements"] = tuple(
            replace(p, make=_recording(p.make, windows)) if p.make is not None else p
            for p in fields["measurements"])
        return Plan(self.kind, self.column, **fields)


def _recording(make: Callable[[float, float], QuantileSelection], windows: ReadWindows
               ) -> Callable[[float, float], QuantileSelection]:
    """``make``, recording the draws of each mechanism it builds on ``windows``."""
    def made(epsilon: float, delta: float) -> QuantileSelection:
        selection = make(epsilon, delta)
        windows.record(selection.mechanism)
        return selection

    return made


def _level_labels(levels: Sequence[float]) -> tuple[str, ...]:
    """Output labels of several levels: ``0.25`` style where that is exact and distinct, the
    full ``repr`` otherwise (distinct levels never share a label)."""
    short = tuple(f"{v:g}" for v in levels)
    if len(set(short)) == len(short) and all(float(t) == v for t, v in zip(short, levels,
                                                                            strict=True)):
        return short
    return tuple(repr(float(v)) for v in levels)


class QuantileSelection:
    """The quantile mechanism in the form the release pipeline draws and logs (a
    :class:`~dpframe.mechanisms.protocol.Mechanism`): one log entry for all levels (ε is the
    total; the sensitivity and coefficient are the largest over levels); pure ε-DP, so
    ``delta`` is 0."""

    delta = 0.0

    def __init__(self, mechanism: QuantileMechanism, rows_per_unit: int = 1) -> None:
        k = rows_per_unit
        self.mechanism = mechanism
        self.name = "exponential-quantile"
        self.epsilon = mechanism.epsilon * k  # the share charged (calibrated at ε/k per row)
        self.epsilon_overhead = math.fsum(mechanism.epsilon_overheads) * k
        self.sensitivity = float(max(mechanism.sensitivities)) * k  # rank change per unit
        self.scale = float(1.0 / min(mechanism.coefficients))  # rank units per e-fold
        self.grid = (mechanism.upper - mechanism.lower) / mechanism.bins
        self.domain = interval(mechanism.lower, mechanism.upper)

    def sample(self, value: np.ndarray | float, *, random_state: RandomState = None
               ) -> np.ndarray:
        """The chosen bins' midpoints for the exact bin counts ``value`` (groups × bins)."""
        # integer-valued doubles (the engine checks every aggregate is a finite integer, and
        # counts are ≥ 0): read as they are, no int64 copy
        exact = np.atleast_2d(np.asarray(value, dtype=np.float64))
        return np.asarray(self.mechanism.sample(exact, random_state=random_state,
                                                exact_counts=True).values, dtype=float)


def quantile(column: str, q: float | Sequence[float] = 0.5, *, bins: int | None = None,
             ci_share: float = 0.5) -> Quantile:
    """Query builder: quantile(s) of ``column`` at level(s) ``q`` in [0, 1] (a list of levels
    gives one answer per level, named ``<name>[<q>]``); ``bins``: public equal bins of the
    bounds (default from public facts: ``2^⌈log₂(8·ε·n)⌉`` within ``[2^16, 2^22]``, ``n`` the
    protected size and ``ε`` the release's, fewer for many groups; docs/frames.md "Quantile
    resolution"). In ``release(..., ci=level)`` it adds the rank interval's columns
    ``<name>_rank_error`` (and ``<name>_q_lower``/``<name>_q_upper`` where ``n`` is public):
    docs/privacy.md Q.6; and ``ci_share`` of its ε (default 0.5) buys the value interval
    ``<name>_lower``/``<name>_upper``."""
    return Quantile(column, q, bins, ci_share)


def median(column: str, *, bins: int | None = None, ci_share: float = 0.5) -> Quantile:
    """Query builder: median of ``column`` (the 0.5 quantile); ``ci_share`` as for
    :func:`quantile`."""
    return Quantile(column, 0.5, bins, ci_share)

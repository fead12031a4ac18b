"""Covariance and correlation matrices of bounded columns (``dpf.cov``, ``dpf.corr``,
``frame.dp.cov``, ``frame.dp.corr``): :class:`Covariance`, :class:`CovarianceEntries`
(Liu §4.1)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np

from dpframe._validation import check_names
from dpframe.errors import ParameterError, UnsupportedInputError
from dpframe.mechanisms import matrices as analyses
from dpframe.mechanisms.intervals import (
    component_levels,
    confidence_interval,
    correlation_by_pivot,
    interval_from_components,
)
from dpframe.mechanisms.protocol import Mechanism
from dpframe.query._aggregates import Agg, FixedPoint
from dpframe.query._covariance_size_free import size_free_plan
from dpframe.query._exact import (
    FP_SLACK,
    center,
    interval_sensitivity,
    round_up,
    width,
)
from dpframe.query._measurement_kinds import ADAPTIVE_DOMAIN
from dpframe.query._plans import (
    Interval,
    Measurement,
    Plan,
    PlanContext,
    Query,
    Statistic,
)

__all__ = ["Covariance", "CovarianceEntries", "corr", "cov"]


class Covariance(Query):
    r"""Covariance (``kind="cov"``) or correlation (``"corr"``) matrix, ddof=1 (Liu §4.1).

    Needs the public ``n`` (Liu's variance and covariance bounds); on a data set protected with
    ``neighbours="add_remove"`` the size-free plan of
    :mod:`dpframe.query._covariance_size_free` answers instead. For ``p`` columns the
    ``m = p(p+1)/2`` elements share ε equally. Variances on ``[0, n w_j²/(4(n−1))]`` with
    ``Δ = w_j²/n``; each covariance then on ``[−√(S*jj S*kk), √(S*jj S*kk)]`` built from the
    *released* variances (public), with ``Δ = w_j w_k/n`` — the derivation is in
    :mod:`dpframe.mechanisms.matrices`. The exact statistics come from integer sums in fixed point
    (``Σk_j``, ``Σk_j²``, ``Σk_j k_k``), so the sensitivities hold exactly (plus the ``2⁻⁵²``
    slack of one division). Post-processing: the nearest PSD matrix with the released variances
    on its diagonal, and correlations from it.
    """

    kind = "cov"
    needs_column = False
    needs_public_size = True
    #: under add/remove neighbours the size-free plan
    #: (:mod:`dpframe.query._covariance_size_free`) answers instead
    size_free_under_add_remove = True

    def __init__(self, columns: Sequence[str], kind: str = "cov") -> None:
        super().__init__(None)
        cols = check_names("columns", columns)
        if len(cols) < 2 or len(set(cols)) != len(cols) or not all(
                isinstance(c, str) for c in cols):
            raise ParameterError(f"{kind} needs at least two distinct column names, got {cols!r}")
        if kind not in ("cov", "corr"):
            raise ParameterError(f"kind must be 'cov' or 'corr', got {kind!r}")
        self.columns = cols
        self.kind = kind

    def __repr__(self) -> str:
        return f"dpf.{self.kind}({self.columns!r})"

    def columns_read(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def plan(self, ctx: PlanContext) -> Plan:

        n, bounds = ctx.n, ctx.all_bounds
        if ctx.grouped:
            raise ParameterError(f"{self.kind} is not available per group; run it ungrouped")
        if ctx.add_remove:  # the row count is private: moments, then post-processing
            return size_free_plan(self.kind, self.columns, ctx)
        if n < 2:
            raise UnsupportedInputError(f"{self.kind} needs at least 2 rows")
        cols = self.columns
        p = len(cols)
        weight = 1.0 / (p * (p + 1) // 2)
        fps = {c: FixedPoint.choose(bounds[c][0], bounds[c][1], center(*bounds[c]), n, True)
               for c in cols}
        sums = {c: Agg("sum", c, fps[c]) for c in cols}
        measurements = [_variance_measurement(c, sums[c], width(bounds[c]), n, weight)
                        for c in cols]
        measurements += [
            _covariance_measurement(cols[j], cols[k], sums, width(bounds[cols[j]]),
                                    width(bounds[cols[k]]), n, weight)
            for j in range(p) for k in range(j + 1, p)]
        kind = self.kind

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            mat = np.zeros((p, p))
            for j in range(p):
                mat[j, j] = float(v[f"variance[{cols[j]}]"][0])
                for k in range(j + 1, p):
                    mat[j, k] = mat[k, j] = float(v[f"covariance[{cols[j]},{cols[k]}]"][0])
            cov = analyses.nearest_psd(mat, diagonal=np.diag(mat))
            return cov if kind == "cov" else analyses.correlation_from_covariance(cov)

        return Plan(kind, None, tuple(measurements), fin,
                    "Liu §4.1 element-wise: variances, then covariances on ±√(S*jj S*kk); "
                    "nearest PSD (Higham) post-processing", public_size=True,
                    columns=tuple(cols), interval=_matrix_interval(tuple(cols), kind))


def _variance_measurement(c: str, sum_c: Agg, w: Fraction, n: int, weight: float
                          ) -> Measurement:
    """Column ``c``'s variance: on ``[0, w²/4 · n/(n − 1)]`` with ``Δ = w²/n`` plus the
    quotient's ``2⁻⁵²`` slack (:class:`~dpframe.query._variance.Variance`)."""
    vmax = w ** 2 / 4 * Fraction(n, n - 1)
    up = round_up(vmax)
    sens = interval_sensitivity(w ** 2 / n + Fraction(FP_SLACK) * vmax, 0.0, up)
    sq = Agg("sum_sq", c, sum_c.fp)
    return Measurement(f"variance[{c}]", _covariance_statistic(sum_c, sum_c, sq, n), sens, 0.0,
                       up, weight, (sum_c, sq))


def _covariance_measurement(a: str, b: str, sums: Mapping[str, Agg], w_a: Fraction,
                            w_b: Fraction, n: int, weight: float) -> Measurement:
    """The covariance of ``a`` and ``b``: ``Δ = w_a w_b/n`` (plus slack) on
    ``±√(S*aa S*bb)``, the feasible set read from the *released* variances (an adaptive
    domain: post-processing of earlier measurements, no extra ε)."""
    prod = Agg("sum_prod", a, sums[a].fp, b, sums[b].fp)
    base = w_a * w_b / n

    def domain(v: Mapping[str, np.ndarray]) -> tuple[float, float]:
        c = math.sqrt(max(float(v[f"variance[{a}]"][0]), 0.0)
                      * max(float(v[f"variance[{b}]"][0]), 0.0))
        return -c, c

    def sens_after(lo: float, hi: float) -> float:
        return interval_sensitivity(base + Fraction(FP_SLACK) * Fraction(hi), lo, hi)

    return Measurement(
        f"covariance[{a},{b}]", _covariance_statistic(sums[a], sums[b], prod, n),
        float(base), -math.inf, math.inf, weight, (sums[a], sums[b], prod),
        domain_after=domain, sensitivity_after=sens_after, kind=ADAPTIVE_DOMAIN)


#: A correlation's share of α for (covariance, each variance): weighted Šidák
#: (:func:`~dpframe.mechanisms.intervals.component_levels`). ``ρ = C/√(V_x V_y)`` moves by
#: ``δC/√(V_x V_y)`` with the covariance's noise and by ``|ρ|/2 · δV/V`` with a variance's; for
#: the two noises of one relative size (equal ε, Δ ∝ widths) a variance weighs ``|ρ|/2`` of the
#: covariance, ``1/6`` at ``|ρ| = 1/3`` (docs I.7).
CORRELATION_WEIGHTS = (6.0, 1.0, 1.0)


def _matrix_interval(cols: tuple[str, ...], kind: str) -> Interval:
    """Element-wise intervals of the (clamped, fixed-point) variances and covariances; a
    correlation needs its covariance and both variances at once (weighted Šidák over the 3
    parts, :data:`CORRELATION_WEIGHTS`)."""
    p = len(cols)

    def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
        if kind == "cov":
            box = {name: _element_box(mech, float(np.asarray(noisy[name])[0]), level)
                   for name, mech in mechs.items()}
        else:
            # one covariance and two variances hold at once: levels multiply to ``level``
            lv = component_levels(level, dict(zip(("cov", "var_x", "var_y"),
                                                  CORRELATION_WEIGHTS, strict=True)))
            box = {name: _element_box(mech, float(np.asarray(noisy[name])[0]),
                                      lv["var_x" if name.startswith("variance") else "cov"])
                   for name, mech in mechs.items()}
        lo_m, hi_m = np.zeros((p, p)), np.zeros((p, p))
        for j in range(p):
            vj = box[f"variance[{cols[j]}]"]
            lo_m[j, j], hi_m[j, j] = (vj if kind == "cov" else (1.0, 1.0))
            for k in range(j + 1, p):
                cv = box[f"covariance[{cols[j]},{cols[k]}]"]
                if kind == "corr":
                    cv = _correlation(cols[j], cols[k], mechs, noisy, level, box)
                lo_m[j, k] = lo_m[k, j] = cv[0]
                hi_m[j, k] = hi_m[k, j] = cv[1]
        return lo_m, hi_m

    return interval


def _correlation(a: str, b: str, mechs: Mapping[str, Mechanism | None],
                 noisy: Mapping[str, np.ndarray], level: float,
                 box: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    """One correlation's interval: the tangent-plane pivot where the variances are plain draws
    (:func:`~dpframe.mechanisms.intervals.correlation_by_pivot`), else the box of its three
    elements at weighted Šidák levels."""
    names = {"cov": f"covariance[{a},{b}]", "var_x": f"variance[{a}]", "var_y": f"variance[{b}]"}
    pivot = correlation_by_pivot({k: mechs.get(v) for k, v in names.items()},
                                 {k: float(np.asarray(noisy[v])[0]) for k, v in names.items()},
                                 level)
    if pivot is not None:
        return pivot
    r = interval_from_components("correlation", {k: box[v] for k, v in names.items()})
    return float(r[0]), float(r[1])


def _element_box(mech: Mechanism | None, value: float, level: float) -> tuple[float, float]:
    """One element's interval, kept in its mechanism's domain; a single-point domain
    (``mech`` None: released exactly) is that point."""
    if mech is None:
        return value, value
    lo, hi = confidence_interval(mech, value, level)
    return max(float(lo), mech.domain.lower), min(float(hi), mech.domain.upper)


def _covariance_statistic(sum_a: Agg, sum_b: Agg, prod: Agg, n: int) -> Statistic:
    """Exact ddof=1 (co)variance from integer sums, correctly rounded once."""
    assert sum_a.fp is not None and sum_b.fp is not None
    qq = Fraction(sum_a.fp.q) * Fraction(sum_b.fp.q)

    def stat(a: Mapping[Agg, np.ndarray]) -> np.ndarray:
        s_a, s_b, p_ab = int(a[sum_a][0]), int(a[sum_b][0]), int(a[prod][0])
        return np.array([float(qq * (n * p_ab - s_a * s_b) / (n * (n - 1)))])

    return stat


class CovarianceEntries(Covariance):
    """:class:`Covariance` as a statistic of a release (``dpf.cov(cols)``, ``dpf.corr(cols)``):
    the same measurements, ε split and post-processing, its matrix released as entries named
    ``<name>[<a>,<b>]`` (the upper triangle; a covariance's diagonal holds the variances, a
    correlation's is 1 and is left out), with value intervals under ``ci=``."""

    def __init__(self, columns: Sequence[str], kind: str = "cov") -> None:
        super().__init__(columns, kind)
        p = len(self.columns)
        first = 0 if kind == "cov" else 1
        self.entries = tuple((j, k) for j in range(p) for k in range(j + first, p))

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(f"{self.columns[j]},{self.columns[k]}" for j, k in self.entries)

    def plan(self, ctx: PlanContext) -> Plan:
        whole = super().plan(ctx)
        rows = np.array([j for j, _ in self.entries])
        cols = np.array([k for _, k in self.entries])
        matrix_interval = whole.interval
        assert matrix_interval is not None

        def fin(v: dict[str, np.ndarray]) -> np.ndarray:
            return np.asarray(whole.finalize(v))[rows, cols][None, :]

        def interval(mechs: Mapping[str, Mechanism | None], noisy: Mapping[str, np.ndarray],
                     level: float) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = matrix_interval(mechs, noisy, level)
            return lo[rows, cols][None, :], hi[rows, cols][None, :]

        return replace(whole, finalize=fin, interval=interval, labels=self.labels)


def cov(columns: Sequence[str]) -> CovarianceEntries:
    """Query builder: covariance matrix (ddof=1) of two or more bounded columns, released as
    its upper triangle ``<name>[<a>,<b>]`` (diagonal: variances). Needs the public size and
    no group-by, as ``frame.dp.cov``."""
    return CovarianceEntries(columns, "cov")


def corr(columns: Sequence[str]) -> CovarianceEntries:
    """Query builder: correlations of two or more bounded columns, released as the entries
    above the diagonal ``<name>[<a>,<b>]``. Needs the public size and no group-by, as
    ``frame.dp.corr``."""
    return CovarianceEntries(columns, "corr")

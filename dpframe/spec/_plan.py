"""The plan of a release spec, from public facts only: budget split, mechanisms, accuracy.

:func:`plan_release` turns a checked :class:`~dpframe.spec._model.ReleaseSpec` and the
:class:`SourceFacts` of its input (column names and types from the file schema, and the public
row count ``n`` when the files' metadata holds it) into a :class:`ReleasePlan`: per query and
measurement the ε and δ charged, the mechanism, its sensitivity, output domain, scale and a
95% half-width. Each query is planned by :func:`dpframe.release._pipeline.plan` — the library's own
plans, mechanisms and checks — on the protected input during a run, or, for the dry run, on
a :func:`stand_in` of it (its schema, the spec's declarations and the public ``n``; no data),
so the dry run shows the scales the run will use (``tests/spec/test_spec.py`` checks this
against the log). Nothing here reads data.

When ``n`` is unknown (CSV files keep no row count in their metadata) the query is planned
by the library at each of :data:`SAMPLE_N`, and each measurement's sensitivity, domain, scale
and half-width — the library's mechanism's, at each size — is shown as a formula in ``n``
that those values follow (``c``, ``c/n``, ``c·n``, ``c·n/(n−1)``; :func:`_in_n`), or as the
values themselves: nothing about a statistic's sensitivity is restated here.

**Target accuracies.** A query may give each statistic a target half-width ``h`` at a level
``1 − α`` instead of a share of ε. Its ε is then the smallest ε at which the statistic's
mechanism has ``P(|release − true| ≤ h) ≥ 1 − α`` for every true value
(:func:`dpframe.release._accuracy_planner.epsilon_for`, behind ``frame.dp.epsilon_for``; doubled in
a group-by, where each group's mechanism gets half), for
statistics that are one measurement: counts, and sums, means and variances on their plan's
size; a std is released as the square root of a variance, and ``|√a − √b| ≤ √|a − b|``, so a
std within ``h`` needs its variance within ``h²``. Such queries spend no δ. The queries with
shares split what the run's ε leaves. The ε's depend on the public ``n``.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import reduce
from typing import Any

import dpframe as dpf
from dpframe.errors import DPFrameError, PrivateSizeWarning, SpecError
from dpframe.mechanisms.accuracy import half_width
from dpframe.provenance import resolve
from dpframe.release import accuracy, charged_delta, epsilon_for, plan
from dpframe.spec._model import Condition, QuerySpec, ReleaseSpec, StatisticSpec
from dpframe.spec._vocabulary import library_query

__all__ = [
    "ACCURACY_METHOD",
    "ALPHA",
    "MeasurementPlan",
    "QueryPlan",
    "ReleasePlan",
    "SourceFacts",
    "build_queries",
    "check_schema",
    "compile_filter",
    "format_plan",
    "plan_release",
]

#: Level of the half-widths shown: P(|release − true| ≤ h) ≥ 1 − ALPHA.
ALPHA = 0.05

#: how the half-widths shown are computed
ACCURACY_METHOD = ("dpframe.mechanisms.accuracy.half_width: exact worst case over the true "
                   "value, snapping included")


@dataclass(frozen=True)
class SourceFacts:
    """Public facts about the input, read from file metadata only.

    ``columns``: name → the Polars dtype the column reads as (Parquet: from the footer's
    Arrow schema; CSV: the names of the header line, types as declared, undeclared columns
    strings): what :func:`stand_in` is made of. ``n``: the public row count, or None.
    ``n_source``: where ``n`` comes from.
    """

    files: tuple[str, ...]
    columns: dict[str, Any]
    n: int | None
    n_source: str


@dataclass(frozen=True)
class MeasurementPlan:
    """One noisy measurement of a statistic (a private-size mean has two: count and sum).

    ``epsilon``/``delta``: charged to the ledger; ``mechanism_epsilon``: given to the
    mechanism (half of it per group in a group-by, where one replaced row can move between two
    groups). Numbers are None when they depend on an unknown ``n``; ``formula`` then says how.
    """

    statistic: str
    kind: str
    column: str | None
    part: str
    size: str
    epsilon: float
    delta: float
    mechanism_epsilon: float
    mechanism: str
    sensitivity: float | None
    lower: float | None
    upper: float | None
    scale: float | None
    grid: float | None
    epsilon_overhead: float | None
    half_width: float | None
    formula: str | None = None
    target: float | None = None  # the statistic's target half-width, if it has one
    level: float | None = None  # ... at this level
    target_half_width: float | None = None  # the half-width reached at ``level``
    call: str = ""  # the statistic as the spec names it, e.g. ``mean(income)``


@dataclass(frozen=True)
class QueryPlan:
    """One query: one release of ε, δ over its statistics (``delta``: what it charges)."""

    name: str
    share: float | None  # None: the ε comes from target accuracies
    epsilon: float
    delta: float
    mechanism: str
    group_by: str | None
    keys: tuple[Any, ...] | None
    filter: str | None
    measurements: tuple[MeasurementPlan, ...]
    targeted: bool = False  # ε set by target accuracies (else by the share)
    #: the δ the release asks for (passed to the library, where "auto" reads it); ``delta``
    #: is what it charges: this less the shares of the measurements given a pure ε-DP
    #: mechanism (:func:`dpframe.release._pipeline.release_delta`)
    requested_delta: float = 0.0


@dataclass(frozen=True)
class ReleasePlan:
    """The whole plan of one run of a spec."""

    spec: ReleaseSpec
    facts: SourceFacts
    queries: tuple[QueryPlan, ...]
    accuracy_method: str
    alpha: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (infinite domain ends as None)."""
        s = self.spec
        return {
            "spec": s.source,
            "input": {"path": s.input.path, "format": s.input.format, "engine": s.input.engine,
                      "files": list(self.facts.files)},
            "n": self.facts.n,
            "n_source": self.facts.n_source,
            "unit": s.unit,
            "budget": {"epsilon": s.epsilon, "delta": s.delta, "ledger": str(s.ledger),
                       "run_epsilon": s.run_epsilon, "run_delta": s.run_delta},
            "output": str(s.output),
            "accuracy": {"method": self.accuracy_method, "alpha": self.alpha},
            "queries": [
                {**{k: v for k, v in asdict(q).items() if k != "measurements"},
                 "keys": None if q.keys is None else list(q.keys),
                 "measurements": [_finite(asdict(m)) for m in q.measurements]}
                for q in self.queries
            ],
        }

    def to_json(self) -> str:
        """:meth:`as_dict` as JSON text."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False, default=str)


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in d.items()}


# -- schema checks ---------------------------------------------------------------------------
def _need_column(spec: ReleaseSpec, facts: SourceFacts, column: str, path: tuple[Any, ...],
                 what: str) -> None:
    if column not in facts.columns:
        shown = ", ".join(list(facts.columns)[:20])
        raise spec.error(path, f"{what} {column!r} is not a column of the input "
                         f"(columns: {shown})")


def _condition_columns(conds: tuple[Condition, ...]) -> list[Condition]:
    out: list[Condition] = []
    for c in conds:
        out.extend(_condition_columns(c.any_of) if c.any_of else [c])
    return out


def check_schema(spec: ReleaseSpec, facts: SourceFacts) -> None:
    """Every column the spec names is a column of the input (schema only; errors name the
    spec line). Whether a column's type suits its use (bounds on a number, keys of its type,
    filter values it can be compared with) is the library's check, when the spec is planned
    (:func:`plan_release`)."""
    for col in spec.bounds:
        _need_column(spec, facts, col, ("bounds", col), "bounded column")
    for col in spec.keys:
        _need_column(spec, facts, col, ("keys", col), "key column")
    for q in spec.queries:
        if q.group_by is not None:
            _need_column(spec, facts, q.group_by, (*q.path, "group_by"), "group_by column")
        for stat in q.statistics:
            for i, col in enumerate(stat.columns_named()):
                where = (*stat.path, "column") if stat.column is not None else (
                    *stat.path, "columns", i)
                _need_column(spec, facts, col, where, "statistic column")
        for c in _condition_columns(q.filter):
            assert c.column is not None
            _need_column(spec, facts, c.column, (*c.path, "column"), "filter column")


def _where(spec: ReleaseSpec, exc: DPFrameError, named: Mapping[str, tuple[Any, ...]],
           default: tuple[Any, ...], prefix: str) -> SpecError:
    """A library refusal as a :class:`SpecError` at the line of the one column of ``named``
    (column → spec path) its message names, else at ``default``."""
    hits = list(dict.fromkeys(path for col, path in named.items() if repr(col) in str(exc)))
    return spec.error(hits[0] if len(hits) == 1 else default, f"{prefix}{exc}")


# -- filters and queries ---------------------------------------------------------------------
#: Each filter operator (:data:`dpframe.spec._filters.FILTER_OPS`) as a narwhals expression of
#: the column and the condition's value.
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda col, v: col == v,
    "!=": lambda col, v: col != v,
    "<": lambda col, v: col < v,
    "<=": lambda col, v: col <= v,
    ">": lambda col, v: col > v,
    ">=": lambda col, v: col >= v,
    "in": lambda col, v: col.is_in(list(v)),
    "not in": lambda col, v: ~col.is_in(list(v)),
    "between": lambda col, v: col.is_between(v[0], v[1], closed="both"),
    "is null": lambda col, _: col.is_null(),
    "is not null": lambda col, _: ~col.is_null(),
}


def _expr(c: Condition) -> Any:
    import narwhals as nw

    if c.any_of:
        return reduce(lambda a, b: a | b, (_expr(x) for x in c.any_of))
    assert c.column is not None
    build = _OPERATORS.get(c.op or "")
    if build is None:
        raise AssertionError(c.op)  # pragma: no cover - checked by the parser
    return build(nw.col(c.column), c.value)


def compile_filter(conditions: tuple[Condition, ...]) -> list[Any]:
    """The narwhals expressions of a filter (one per condition; all must hold)."""
    return [_expr(c) for c in conditions]


def describe_filter(conditions: tuple[Condition, ...]) -> str | None:
    """The filter as readable text, e.g. ``age >= 18 and (region == 'north' or ...)``."""
    if not conditions:
        return None

    def one(c: Condition) -> str:
        if c.any_of:
            return "(" + " or ".join(one(x) for x in c.any_of) + ")"
        return f"{c.column} {c.op}" + ("" if c.value is None else f" {c.value!r}")

    return " and ".join(one(c) for c in conditions)


def build_queries(q: QuerySpec) -> tuple[dict[str, Any], dict[str, float]]:
    """The ``{name: dpf.count()/dpf.mean(col)/dpf.histogram(col, bins=B)/...}`` of one query
    (the library's own query objects, :func:`dpframe.spec._vocabulary.library_query`) and its
    weights."""
    return ({s.name: library_query(s) for s in q.statistics},
            {s.name: s.weight for s in q.statistics})


# -- the plan --------------------------------------------------------------------------------
def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.4g}"


def _interval(lo: float | None, hi: float | None) -> str:
    left = "(" if lo is not None and math.isinf(lo) else "["
    right = ")" if hi is not None and math.isinf(hi) else "]"
    return f"{left}{_num(lo)}, {_num(hi)}{right}"


#: The public sizes the dry run plans at when the input's ``n`` is unknown (CSV without
#: ``--rows``): each measurement's Δ, domain, scale and half-width are the library's at each of
#: them (:func:`dpframe.release._pipeline.plan`, :func:`dpframe.mechanisms.accuracy.half_width`),
# shown
#: as a formula in n where the three follow one of :data:`_FORMS` (:func:`_in_n`), else as the
#: three values.
SAMPLE_N = (1_000, 10_000, 100_000)

#: The forms ``c·g(n)`` a quantity planned at :data:`SAMPLE_N` is matched against, in this
#: order: the text of ``c`` and ``g(n)``. Public-size sensitivities are ``w/n`` plus a
#: relative float slack of ``2⁻⁵²`` (``dpframe.query.statistics``), far inside :data:`_FIT`.
_FORMS: tuple[tuple[str, Callable[[int], float]], ...] = (
    ("", lambda n: 1.0),
    ("/n", lambda n: 1.0 / n),
    ("·n", float),
    ("·n/(n−1)", lambda n: n / (n - 1)),
)
#: relative tolerances of a match: exact (``c/n``; float slack only) and approximate
#: (``≈ c/n``: within what four significant digits show, e.g. a truncated or bounded Laplace
#: scale, which depends a little on its domain and so on n)
_FIT, _NEAR = 1e-9, 1e-3


def _in_n(values: Sequence[float]) -> str:
    """The library's values of one quantity at :data:`SAMPLE_N` as text in n: ``c``,
    ``c/n``, ``c·n`` or ``c·n/(n−1)`` when all of them are ``c·g(n)`` for one ``c`` (within a
    relative :data:`_FIT`; ``≈`` in front within :data:`_NEAR`, ``c`` then at the largest n).
    Nothing of the formula is computed here: ``c`` is read off the library's values. If no
    form fits, the values themselves, ``a | b | c``."""
    if all(v == values[0] for v in values):  # (infinite ends included)
        return _num(values[0])
    for tol, mark in ((_FIT, ""), (_NEAR, "≈ ")):
        for suffix, g in _FORMS:
            cs = [v / g(n) for v, n in zip(values, SAMPLE_N, strict=True)]
            if all(math.isfinite(c) and abs(c - cs[-1]) <= tol * abs(cs[-1]) for c in cs):
                text = _num(cs[-1])
                if suffix.startswith("·") and text == "1":
                    return mark + suffix[1:]
                return f"{mark}{text}{suffix}"
    return " | ".join(_num(v) for v in values)


def _domain_in_n(lowers: Sequence[float], uppers: Sequence[float]) -> str:
    left = "(" if math.isinf(lowers[0]) else "["
    right = ")" if math.isinf(uppers[0]) else "]"
    return f"{left}{_in_n(lowers)}, {_in_n(uppers)}{right}"


def _formula(ms: Sequence[Any], mechs: Sequence[Any]) -> str:
    """Δ, domain, scale and ±95% of one measurement as the library planned it at each of
    :data:`SAMPLE_N` (``ms``: its :class:`~dpframe.query.statistics.Measurement` at each size,
    ``mechs``: the mechanism built for it, None for a domain set by earlier noisy values),
    as text in n (:func:`_in_n`)."""
    if any(mech is None for mech in mechs):
        return f"Δ = {_in_n([float(m.sensitivity) for m in ms])}; {_ADAPTIVE}"
    domain = _domain_in_n([float(x.domain.lower) for x in mechs],
                          [float(x.domain.upper) for x in mechs])
    return (f"Δ = {_in_n([float(x.sensitivity) for x in mechs])}; domain {domain}; "
            f"scale {_in_n([float(x.scale) for x in mechs])}; "
            f"±95% {_in_n([float(half_width(x, ALPHA)) for x in mechs])}")


#: a measurement whose domain the library sets from earlier noisy values of the same release
#: (a covariance on ±√ of the two released variances): its scale is known only then
_ADAPTIVE = ("domain ±√(product of the released variances); scale and ±95% follow from it "
             "(set after the variances are released)")


# -- planning through the library -------------------------------------------------------------
def protect_input(spec: ReleaseSpec, frame: Any, session: Any) -> Any:
    """``dpf.protect`` with the spec's budget, bounds, keys and missing-value rules."""

    return dpf.protect(frame, epsilon=spec.epsilon, delta=spec.delta, bounds=dict(spec.bounds),
                       keys={k: list(v) for k, v in spec.keys.items()} or None,
                       missing=dict(spec.missing), session=session)


def stand_in(spec: ReleaseSpec, facts: SourceFacts, n: int) -> Any:
    """The input as the library plans it, without its data: a Polars LazyFrame of one row of
    missing values with the input's columns and types (``facts.columns``, from file metadata),
    protected by :func:`protect_input` in a throwaway in-memory session (the spec's ledger is
    not touched) and given the public size ``n``. A release plans from public facts only (the
    schema, the declarations and ``n``), so :func:`dpframe.release._pipeline.plan` plans this frame
    as it plans the input read by Polars (a run plans its protected input itself, whatever the
    engine); nothing is ever released from it. (Its row is made
    of literals, not of a frame's buffers: protect refuses memory a protected frame holds.)"""
    import polars as pl


    row = pl.LazyFrame().select([pl.lit(None, dtype=t).alias(c) for c, t in facts.columns.items()])
    try:
        with warnings.catch_warnings():  # (the run's protect names private-size columns)
            warnings.simplefilter("ignore", PrivateSizeWarning)
            pf = protect_input(spec, row, dpf.Session())
    except DPFrameError as exc:
        named = {c: (table, c) for table in ("missing", "keys", "bounds")  # bounds win
                 for c in getattr(spec, table)}
        raise _where(spec, exc, named, ("bounds",), "") from None
    resolve(pf).dataset.n = n  # the input's public size, in place of the row protect counted
    return pf


def _derived(spec: ReleaseSpec, q: QuerySpec, frame: Any) -> Any:
    """The frame a query releases from: the protected input, filtered (a verified
    derivation) if the query has a filter."""
    if not q.filter:
        return frame
    try:
        return frame.dp.filter(*compile_filter(q.filter))
    except DPFrameError as exc:
        raise spec.error((*q.path, "filter"), f"filter of {q.name!r}: {exc}") from None


def _group(q: QuerySpec) -> dict[str, Any]:
    return {"group_by": q.group_by, "keys": None if q.keys is None else list(q.keys)}


def _target_epsilon(spec: ReleaseSpec, q: QuerySpec, stat: StatisticSpec, frame: Any
                    ) -> float:
    """The ε (charged to the ledger) at which ``stat`` reaches its target half-width at the
    query's level: :func:`dpframe.release._accuracy_planner.epsilon_for` on the query's frame (a std
    within ``h`` needs its variance within ``h²``, see the module docstring)."""

    assert stat.target is not None
    kind, target = stat.kind, stat.target
    if kind == "std":
        kind, target = "variance", target * target
    query = library_query(replace(stat, kind=kind))
    try:
        return epsilon_for(frame, query, target, alpha=1.0 - q.level, delta=0.0,
                           mechanism=q.mechanism, **_group(q))
    except DPFrameError as exc:
        raise spec.error(stat.path, f"{stat.name!r}: accuracy {stat.target:g} at level "
                         f"{q.level:g}: {exc}") from None


def _planned(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float, dlt_q: float,
             weights: Mapping[str, float]) -> list[Any]:
    """:func:`dpframe.release._pipeline.plan` of the query's release (the run makes the same call's
    release); a refusal names the line of the one statistic the library refuses on its own,
    else of the one column its message names, else the query's."""

    stats = build_queries(q)[0]
    try:
        return plan(frame, stats, epsilon=eps_q, delta=dlt_q,
                    weights=dict(weights), mechanism=q.mechanism, **_group(q))
    except DPFrameError as exc:
        refused = []
        for s in q.statistics:  # which statistic does the library refuse alone?
            try:
                plan(frame, {s.name: stats[s.name]}, epsilon=eps_q or 1.0, delta=dlt_q,
                     mechanism=q.mechanism, **_group(q))
            except DPFrameError:
                refused.append(s)
        if len(refused) == 1 and len(q.statistics) > 1:
            raise spec.error(refused[0].path, f"query {q.name!r}: {exc}") from None
        named = {col: s.path for s in q.statistics for col in s.columns_named()}
        if q.group_by is not None:
            named[q.group_by] = (*q.path, "group_by")
        raise _where(spec, exc, named, q.path, f"query {q.name!r}: ") from None


def _measurement(q: QuerySpec, stat: StatisticSpec, ps: Sequence[Any], j: int, dlt_q: float,
                 reached: float | None) -> MeasurementPlan:
    """One row of the plan: measurement ``j`` of the statistic as the library planned it
    (``ps``: its :class:`dpframe.release._pipeline.Planned` at the public n, or at each of
    :data:`SAMPLE_N` when n is unknown) and the mechanism the library built for it.
    ``reached``: the statistic's half-width at its query's level
    (:func:`dpframe.release._accuracy_planner.accuracy`),
    for a statistic with a target."""
    p = ps[0]
    m, mech = p.plan.measurements[j], p.mechanisms[j]
    grouped = q.group_by is not None
    pure = all(m.name in x.pure for x in ps)  # charged no δ (at every sample n)
    eps, dlt = p.epsilon * m.weight, 0.0 if pure else dlt_q * p.share * m.weight
    mech_eps = eps * p.plan.epsilon_factor(grouped) if mech is None else float(mech.epsilon)
    size = "public n" if p.plan.public_size else "private"
    level = q.level if stat.target is not None else None
    if len(ps) > 1 or mech is None:  # n unknown, or a domain set by earlier noisy values
        mechs = [x.mechanisms[j] for x in ps]
        names = list(dict.fromkeys(str(x.name) for x in mechs if x is not None))
        return MeasurementPlan(
            stat.name, stat.kind, stat.column, m.name, size, eps, dlt, mech_eps,
            " | ".join(names) or q.mechanism, None, None, None, None, None, None, None,
            formula=_formula([x.plan.measurements[j] for x in ps], mechs), target=stat.target,
            level=level, target_half_width=reached, call=stat.describe())
    return MeasurementPlan(
        stat.name, stat.kind, stat.column, m.name, size, eps, dlt, mech_eps,
        str(mech.name), float(mech.sensitivity), float(mech.domain.lower),
        float(mech.domain.upper), float(mech.scale), float(mech.grid or 0.0),
        float(getattr(mech, "epsilon_overhead", 0.0)), float(half_width(mech, ALPHA)),
        target=stat.target, level=level, target_half_width=reached, call=stat.describe())


def _reached(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float,
             weights: Mapping[str, float]) -> dict[str, float]:
    """The half-width of each statistic of a query with targets at the query's level, at the
    ε's the targets set: :func:`dpframe.release._accuracy_planner.accuracy` (a count's released
    integer, a std's square root of its variance's)."""

    stats = build_queries(q)[0]
    try:
        return {a.name: a.half_width for a in accuracy(
            frame, stats, epsilon=eps_q, weights=dict(weights), mechanism=q.mechanism,
            alpha=1.0 - q.level, **_group(q))}
    except DPFrameError as exc:
        raise spec.error(q.path, f"query {q.name!r}: {exc}") from None


def _plan_query(spec: ReleaseSpec, q: QuerySpec, frames: Sequence[Any], eps_q: float,
                weights: Mapping[str, float] | None = None) -> QueryPlan:
    """The plan of one query released with ε = ``eps_q`` (and its share of δ) from each of
    ``frames`` (its filter applied here): the protected input or its stand-in at the public
    n, or stand-ins at each of :data:`SAMPLE_N` when n is unknown (then n-dependent numbers
    are shown as formulas in n); ``weights``: the statistics' ε's for a query with target
    accuracies (else their weights)."""

    dlt_q = spec.query_delta(q)
    weights = weights_of(q) if weights is None else weights
    derived = [_derived(spec, q, f) for f in frames]
    by_size = [_planned(spec, q, d, eps_q, dlt_q, weights) for d in derived]
    reached = _reached(spec, q, derived[0], eps_q, weights) if q.targeted else {}
    out: list[MeasurementPlan] = []
    for i, stat in enumerate(q.statistics):
        ps = [planned[i] for planned in by_size]
        out.extend(_measurement(q, stat, ps, j, dlt_q, reached.get(stat.name))
                   for j in range(len(ps[0].plan.measurements)))
    if not any(p.plan.measurements for p in by_size[0]):  # only the public n: exact, free
        eps_q, dlt_q = 0.0, 0.0
    charged = max(charged_delta(planned, dlt_q) for planned in by_size)  # (at every sample n)
    return QueryPlan(q.name, q.share, eps_q, charged, q.mechanism, q.group_by, q.keys,
                     describe_filter(q.filter), tuple(out), targeted=q.targeted,
                     requested_delta=dlt_q)


def _check_targets_fit(spec: ReleaseSpec, targeted: Mapping[str, Mapping[str, float]]
                       ) -> float:
    """The ε the target accuracies need, refused if the run's ε cannot pay it (and leave
    something for the queries with shares)."""
    needed = math.fsum(math.fsum(e.values()) for e in targeted.values())
    if needed > spec.run_epsilon * (1 + 1e-9) or (
            needed >= spec.run_epsilon and any(not q.targeted for q in spec.queries)):
        detail = ", ".join(f"{name} {math.fsum(e.values()):.4g}" for name, e in
                           targeted.items())
        raise spec.error(("privacy", "run_epsilon"), (
            f"the target accuracies need ε = {needed:.6g} ({detail}), "
            + ("more than" if needed > spec.run_epsilon else "all of")
            + f" this run's ε = {spec.run_epsilon:g} (privacy.run_epsilon)"
            + ("" if all(q.targeted for q in spec.queries) else
               ", leaving nothing for the queries with shares")
            + "; relax the targets or raise the budget"))
    return needed


def plan_release(spec: ReleaseSpec, facts: SourceFacts, frame: Any = None) -> ReleasePlan:
    """The plan of one run of ``spec`` on an input described by ``facts`` (no data read):
    every query planned by :func:`dpframe.release._pipeline.plan` on ``frame`` (the protected input,
    during a run) or on a :func:`stand_in` of the input (the dry run, and the checks before a
    run protects anything)."""
    check_schema(spec, facts)
    if facts.n is not None and facts.n == 0:
        raise spec.error(("input", "path"), "the input has no rows (n = 0 is public); there "
                         "is nothing to release")
    frames = [frame] if frame is not None else [
        stand_in(spec, facts, n) for n in (SAMPLE_N if facts.n is None else (facts.n,))]
    frame = frames[0]
    targeted: dict[str, dict[str, float]] = {}
    for q in spec.queries:
        if not q.targeted:
            continue
        if facts.n is None:
            raise spec.error(q.statistics[0].path, (
                f"query {q.name!r}: the epsilon a target accuracy needs depends on the public "
                "row count n, which CSV files do not record; pass --rows N to plan at an "
                "assumed n (the run uses the n it counts)"))
        derived = _derived(spec, q, frame)
        targeted[q.name] = {s.name: _target_epsilon(spec, q, s, derived) for s in q.statistics}
    needed = _check_targets_fit(spec, targeted)
    queries = tuple(
        _plan_query(spec, q, frames, math.fsum(targeted[q.name].values()), targeted[q.name])
        if q.targeted else _plan_query(spec, q, frames, spec.query_epsilon(q, needed))
        for q in spec.queries)
    return ReleasePlan(spec, facts, queries, ACCURACY_METHOD, ALPHA)


# -- text ------------------------------------------------------------------------------------
def format_plan(plan: ReleasePlan) -> str:
    """The dry run's report, as text."""
    s, f = plan.spec, plan.facts
    lines = [
        "dpframe release plan (dry run: no data was read)",
        f"  spec      {s.source}",
        f"  input     {s.input.path}  ({s.input.format}, {len(f.files)} file"
        f"{'' if len(f.files) == 1 else 's'}, engine {s.input.engine})",
        f"  rows n    {f'{f.n:,}' if f.n is not None else 'unknown'}  ({f.n_source})",
        f"  unit      one {s.unit}: neighbouring data sets differ by replacing one row",
        f"  budget    data set total ε = {s.epsilon:g}, δ = {s.delta:g}; durable ledger "
        f"{s.ledger}",
        f"  this run  ε = {s.run_epsilon:g}, δ = {s.run_delta:g}, split by the queries' "
        "shares (δ only to queries using the 'bounded' or 'auto' mechanism)",
        f"  output    {s.output}",
        f"  accuracy  ±{100 * (1 - plan.alpha):g}% = half-width h with P(|release − true| ≤ h)"
        f" ≥ {1 - plan.alpha:g}; {plan.accuracy_method}",
    ]
    if f.n is None:
        sizes = " | ".join(f"{n:,}" for n in SAMPLE_N)
        lines += ["            n is unknown, so quantities that depend on it are shown as "
                  "formulas in n (pass --rows N to evaluate them at an assumed n),",
                  f"            read off the library's plans at n = {sizes}: ≈ where they "
                  "agree to 0.1% (the value at the largest n), a | b | c where no formula "
                  "fits"]
    for q in plan.queries:
        lines.append("")
        extra = []
        if q.group_by is not None:
            assert q.keys is not None
            extra.append(f"group_by {q.group_by} ({len(q.keys)} public keys: ε/2 per group)")
        if q.filter is not None:
            extra.append(f"filter {q.filter}")
        how = (f"target accuracies at level {q.measurements[0].level:g}" if q.targeted
               and q.measurements else f"share {q.share:g}")
        lines.append(f"query {q.name!r}: {how} → ε = {q.epsilon:.6g}, "
                     f"δ = {q.delta:.3g}, mechanism {q.mechanism}"
                     + ("; " + "; ".join(extra) if extra else ""))
        header = ("statistic", "part", "size", "ε", "ε mech", "δ", "Δ", "domain", "scale",
                  "±95%")
        rows = []
        for m in q.measurements:
            what = f"{m.statistic} = {m.call or m.kind}"
            if m.formula is not None:
                rows.append((what, m.part, m.size, f"{m.epsilon:.4g}",
                             f"{m.mechanism_epsilon:.4g}", f"{m.delta:.3g}", m.formula, "", "",
                             ""))
                continue
            rows.append((what, m.part, m.size, f"{m.epsilon:.4g}", f"{m.mechanism_epsilon:.4g}",
                         f"{m.delta:.3g}", _num(m.sensitivity),
                         _interval(m.lower, m.upper), _num(m.scale),
                         _num(m.half_width)))
        if not rows:  # (a count of every row: the public n, released exactly at no ε)
            lines.append("  no measurement: the public n, released exactly at no ε")
            continue
        # a formula (n unknown, or a domain set by earlier noisy values) spans the last four
        # columns; they are aligned over the other rows
        numeric = [r for r in rows if r[7:] != ("", "", "")] or [header]
        widths = [max(len(h), *(len(r[i]) for r in (rows if i < 6 else numeric)))
                  for i, h in enumerate(header)]
        if all(m.formula is not None for m in q.measurements):
            widths[6:] = [0, 0, 0, 0]
            header = (*header[:6], "Δ, domain, scale, ±95% (formulas in n)", "", "", "")
        for r in (header, *rows):
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                         .rstrip())
        for m in q.measurements:
            if m.target is not None:
                reached = ("" if m.target_half_width is None else
                           f": reaches ±{_num(m.target_half_width)} at ε = {m.epsilon:.4g}")
                lines.append(f"  target {m.statistic}: ±{m.target:g} with probability ≥ "
                             f"{m.level:g}{reached}")
    total = math.fsum(q.epsilon for q in plan.queries)
    lines += ["", f"total: ε = {total:.6g} of this run's {s.run_epsilon:g}"
              + ("" if total >= s.run_epsilon * (1 - 1e-9) else " (the rest stays unspent: "
                 "every query has a target accuracy)") + "; Δ and the domain "
              "are in the mechanism's coordinates (public-size sums and means are released "
              "shifted by the lower bound); ε mech = the ε each group's mechanism gets (ungrouped "
              "histograms and key counts: each cell's)."]
    return "\n".join(lines)


def weights_of(q: QuerySpec) -> Mapping[str, float]:
    """The relative weights of a query's statistics."""
    return {s.name: s.weight for s in q.statistics}

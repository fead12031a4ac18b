"""The plan of a release spec, from public facts only: budget split, mechanisms, accuracy.

:func:`plan_release` turns a checked :class:`~dpframe.spec._model.ReleaseSpec` and the
:class:`SourceFacts` of its input (column names and types from the file schema, and the public
row count ``n`` when the files' metadata holds it) into a :class:`ReleasePlan`: per query and
measurement the ε and δ charged, the mechanism, its sensitivity, output domain, scale and a
95% half-width. Each query is planned by :func:`dpframe.release._pipeline.plan` — the library's own
plans, mechanisms and checks — on the protected input during a run, or, for the dry run, on
a :func:`stand_in` of it (its schema, the spec's declarations and the public ``n``; no data),
so the dry run shows the scales the run will use (``tests/spec/test_spec.py`` checks this
against the log). What is planned is the query's API call (:mod:`dpframe.spec._calls`: the
frame with the spec's derived columns, filtered, and binned for a histogram over edges).
Nothing here reads data.

**Every answer's ±.** Besides each measurement's half-width, each answer's (a count's
released integer, a std's square root, a private-size mean's ratio of noisy sum and count,
a quantile's rank accuracy) comes from the API's accuracy planner
(:func:`dpframe.release._accuracy_planner.accuracy`, behind ``frame.dp.accuracy``) on the same
call (:func:`answer_accuracy`); a private-size mean's depends on its private size ``N``, so
it is shown at the query's ``min_rows`` or at several ``N``. A count of the public n costs no
ε and is listed as free.

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
from typing import Any

import dpframe as dpf
from dpframe.errors import DPFrameError, PrivateSizeWarning, SpecError
from dpframe.mechanisms.accuracy import half_width
from dpframe.provenance import resolve
from dpframe.release import accuracy, charged_delta, epsilon_for, plan
from dpframe.spec._calls import (
    PipelineArguments,
    build_queries,
    compile_filter,
    describe_filter,
    method_of,
    pipeline_arguments,
)
from dpframe.spec._derived import expression_columns, with_columns
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
class AnswerPlan:
    """The accuracy of one released answer before spending (the API's accuracy planner,
    ``frame.dp.accuracy``): ``half_width`` at level 1 − :data:`ALPHA` (None where it depends
    on an unknown n or a private size), ``shown`` its text in the dry run (several values
    where it depends on n or on the private size), ``note`` the planner's."""

    statistic: str
    query: str
    epsilon: float
    half_width: float | None
    shown: str
    note: str


@dataclass(frozen=True)
class QueryPlan:
    """One query: one release of ε, δ over its statistics (``delta``: what it charges)."""

    name: str
    share: float | None  # None: the ε comes from target accuracies
    epsilon: float
    delta: float
    mechanism: str
    group_by: str | tuple[str, ...] | None
    keys: tuple[Any, ...] | None
    filter: str | None
    measurements: tuple[MeasurementPlan, ...]
    targeted: bool = False  # ε set by target accuracies (else by the share)
    #: the δ the release asks for (passed to the library, where "auto" reads it); ``delta``
    #: is what it charges: this less the shares of the measurements given a pure ε-DP
    #: mechanism (:func:`dpframe.release._pipeline.release_delta`)
    requested_delta: float = 0.0
    #: the ± of every answer (:func:`answer_accuracy`)
    answers: tuple[AnswerPlan, ...] = ()
    #: the statistics released exactly at no ε (a count of the public n)
    free: tuple[str, ...] = ()
    #: the level of the intervals released with the answers (``ci``), or None
    ci: float | None = None


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
                {**{k: v for k, v in asdict(q).items() if k not in ("measurements", "answers")},
                 "keys": None if q.keys is None else [list(k) if isinstance(k, tuple) else k
                                                      for k in q.keys],
                 "measurements": [_finite(asdict(m)) for m in q.measurements],
                 "answers": [_finite(asdict(a)) for a in q.answers],
                 "free": [{"statistic": f, "value": self.facts.n} for f in q.free]}
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
    for d in spec.derived:  # each reads the input's columns and those derived before it
        for col in expression_columns(d.expr):
            _need_column(spec, facts, col, (*d.path, "expr"), "column")
    if spec.derived:  # the queries read the derived columns too
        facts = replace(facts, columns={**facts.columns, **{d.name: None for d in spec.derived}})
    for q in spec.queries:
        for col in q.group_columns:
            _need_column(spec, facts, col, (*q.path, "group_by"), "group_by column")
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
    """``dpf.protect`` with the spec's budget, bounds, keys and missing-value rules (one fill
    word, or one rule per column), and its neighbour definition and row bound where given
    (``neighbours="replace"`` when the spec names none)."""
    missing = spec.missing if isinstance(spec.missing, str) else dict(spec.missing)
    return dpf.protect(frame, epsilon=spec.epsilon, delta=spec.delta, bounds=dict(spec.bounds),
                       keys={k: list(v) for k, v in spec.keys.items()} or None,
                       missing=missing, session=session,
                       neighbours=spec.neighbours or "replace", max_rows=spec.max_rows)


def query_frame(spec: ReleaseSpec, frame: Any) -> Any:
    """The frame every query reads: the protected input with the spec's derived columns
    (``frame.dp.with_columns``, :func:`dpframe.spec._derived.with_columns`); a refusal names
    the line of the column it is about."""
    try:
        return with_columns(frame, spec.derived)
    except DPFrameError as exc:
        named = {d.name: d.path for d in spec.derived}
        raise _where(spec, exc, named, ("with_columns",), "with_columns: ") from None


def stand_in(spec: ReleaseSpec, facts: SourceFacts, n: int) -> Any:
    """The input as the library plans it, without its data: a Polars LazyFrame of one row of
    missing values with the input's columns and types (``facts.columns``, from file metadata),
    protected by :func:`protect_input` in a throwaway in-memory session (the spec's ledger is
    not touched) and given the public size ``n``. A release plans from public facts only (the
    schema, the declarations and ``n``), so :func:`dpframe.release._pipeline.plan` plans this
    frame as it plans the input read by Polars (a run plans its protected input itself,
    whatever the engine); nothing is ever released from it. (Its row is made of literals, not
    of a frame's buffers: protect refuses memory a protected frame holds.)"""
    import polars as pl

    row = pl.LazyFrame().select([pl.lit(None, dtype=t).alias(c) for c, t in facts.columns.items()])
    try:
        with warnings.catch_warnings():  # (the run's protect names private-size columns)
            warnings.simplefilter("ignore", PrivateSizeWarning)
            pf = protect_input(spec, row, dpf.Session())
    except DPFrameError as exc:
        tables = ("keys", "bounds") if isinstance(spec.missing, str) else (
            "missing", "keys", "bounds")
        named = {c: (table, c) for table in tables for c in getattr(spec, table)}  # bounds win
        raise _where(spec, exc, named, ("bounds",), "") from None
    resolve(pf).dataset.n = n  # the input's public size, in place of the row protect counted
    return pf


def _arguments(spec: ReleaseSpec, q: QuerySpec, frame: Any) -> PipelineArguments:
    """The pipeline's arguments of the query's API call (:mod:`dpframe.spec._calls`); a
    refusal of its filter (or bins) names the query's line."""
    try:
        return pipeline_arguments(q, frame)
    except DPFrameError as exc:
        where = (*q.path, "filter") if q.filter else q.path
        raise spec.error(where, f"query {q.name!r}: {exc}") from None


def _target_epsilon(spec: ReleaseSpec, q: QuerySpec, stat: StatisticSpec, frame: Any
                    ) -> float:
    """The ε (charged to the ledger) at which ``stat`` reaches its target half-width at the
    query's level: :func:`dpframe.release._accuracy_planner.epsilon_for` on the query's frame
    (a std within ``h`` needs its variance within ``h²``, see the module docstring)."""

    assert stat.target is not None
    kind, target = stat.kind, stat.target
    if kind == "std":
        kind, target = "variance", target * target
    args = _arguments(spec, q, frame)
    query = (library_query(replace(stat, kind=kind)) if method_of(q) == "release"
             else next(iter(args.queries.values())))  # (a method's one count)
    try:
        return epsilon_for(args.frame, query, target, alpha=1.0 - q.level, delta=0.0,
                           mechanism=q.mechanism, group_by=args.group_by, keys=args.keys)
    except DPFrameError as exc:
        raise spec.error(stat.path, f"{stat.name!r}: accuracy {stat.target:g} at level "
                         f"{q.level:g}: {exc}") from None


def _planned(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float, dlt_q: float,
             weights: Mapping[str, float]) -> list[Any]:
    """:func:`dpframe.release._pipeline.plan` of the query's release (the run makes the same
    call's release); a refusal names the line of the one statistic the library refuses on its
    own, else of the one column its message names, else the query's."""

    args = _arguments(spec, q, frame)
    stats = args.queries
    weights = weights if stats.keys() == weights.keys() else {n: 1.0 for n in stats}
    try:
        return plan(args.frame, stats, epsilon=eps_q, delta=dlt_q, weights=dict(weights),
                    mechanism=q.mechanism, group_by=args.group_by, keys=args.keys, ci=q.ci)
    except DPFrameError as exc:
        refused = []
        for name, query in stats.items():  # which statistic does the library refuse alone?
            try:
                plan(args.frame, {name: query}, epsilon=eps_q or 1.0, delta=dlt_q,
                     mechanism=q.mechanism, group_by=args.group_by, keys=args.keys, ci=q.ci)
            except DPFrameError:
                refused.append(name)
        by_name = {s.name: s for s in q.statistics}
        if len(refused) == 1 and len(stats) > 1 and refused[0] in by_name:
            raise spec.error(by_name[refused[0]].path, f"query {q.name!r}: {exc}") from None
        named = {col: s.path for s in q.statistics for col in s.columns_named()}
        for col in q.group_columns:
            named[col] = (*q.path, "group_by")
        raise _where(spec, exc, named, q.path, f"query {q.name!r}: ") from None


def _measurement(q: QuerySpec, stat: StatisticSpec, ps: Sequence[Any], j: int, dlt_q: float,
                 reached: float | None) -> MeasurementPlan:
    """One row of the plan: measurement ``j`` of the statistic as the library planned it
    (``ps``: its :class:`dpframe.release._pipeline.Planned` at the public n, or at each of
    :data:`SAMPLE_N` when n is unknown) and the mechanism the library built for it.
    ``reached``: the statistic's half-width at its query's level
    (:func:`dpframe.release._accuracy_planner.accuracy`), for a statistic with a target."""
    p = ps[0]
    m, mech = p.plan.measurements[j], p.mechanisms[j]
    grouped = q.group_by is not None or method_of(q) != "release"  # (a method's group-by)
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
    rows = statistic_accuracy(spec, q, frame, eps_q, 0.0, weights, 1.0 - q.level)
    return {a.name: a.half_width for a in rows}


def statistic_accuracy(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float,
                       dlt_q: float, weights: Mapping[str, float], alpha: float,
                       min_rows: int | None = None) -> list[Any]:
    """:func:`dpframe.release._accuracy_planner.accuracy` of the query's API call (the API's
    ``frame.dp.accuracy``): each statistic's half-width at level ``1 − alpha`` (a method's
    one statistic named by the spec's name), ``min_rows`` a public lower bound on the rows
    behind a private-size mean (the query's, else none: its half-width is then unknown)."""
    args = _arguments(spec, q, frame)
    weights = weights if args.queries.keys() == weights.keys() else {
        n: 1.0 for n in args.queries}
    try:
        rows = accuracy(args.frame, args.queries, epsilon=eps_q, delta=dlt_q,
                        weights=dict(weights), mechanism=q.mechanism, alpha=alpha,
                        group_by=args.group_by, keys=args.keys, ci=q.ci,
                        min_rows=q.min_rows if min_rows is None else min_rows)
    except DPFrameError as exc:
        raise spec.error(q.path, f"query {q.name!r}: {exc}") from None
    if args.queries.keys() != {s.name for s in q.statistics}:  # a method's own label
        rows = [replace(r, name=q.statistics[0].name) for r in rows if r.name != "keys"]
    return rows


#: the private sizes (as fractions of the public n) at which the dry run shows the ± of a
#: private-size mean whose query declares no ``min_rows``
PRIVATE_SIZE_FRACTIONS = (1.0, 0.1, 0.01)


def _shown(values: Sequence[float]) -> str:
    """Half-widths at the sizes planned (one, or one per :data:`SAMPLE_N`: then as a formula
    in n where one fits, :func:`_in_n`) as text."""
    return _num(values[0]) if len(values) == 1 else _in_n(values)


def _private_size_text(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float,
                       dlt_q: float, weights: Mapping[str, float], name: str) -> str | None:
    """The ± of a private-size answer at private sizes ``N`` of :data:`PRIVATE_SIZE_FRACTIONS`
    of the public n (the accuracy planner with ``min_rows = N``), or None if that does not
    help (a quantile: its values' accuracy depends on the data)."""
    n = resolve(frame).dataset.n
    parts = []
    for fraction in PRIVATE_SIZE_FRACTIONS:
        rows = max(1, int(n * fraction))
        found = {a.name: a.half_width for a in statistic_accuracy(
            spec, q, frame, eps_q, dlt_q, weights, ALPHA, min_rows=rows)}
        h = found.get(name, math.nan)
        if not math.isfinite(h):
            return None
        parts.append(f"{_num(h)} at N ≥ {rows:,}")
    return "; ".join(parts)


def answer_accuracy(spec: ReleaseSpec, q: QuerySpec, frames: Sequence[Any], eps_q: float,
                    dlt_q: float, weights: Mapping[str, float]) -> tuple[AnswerPlan, ...]:
    """The ± (at level 1 − :data:`ALPHA`) of every answer of the query: the API's accuracy
    planner (:func:`statistic_accuracy`) at each size planned. A private-size mean of a query
    without ``min_rows`` is shown at several private sizes N (:func:`_private_size_text`)."""
    by_size = [statistic_accuracy(spec, q, f, eps_q, dlt_q, weights, ALPHA) for f in frames]
    out = []
    for i, row in enumerate(by_size[0]):
        if row.name == "keys":  # (a key selection: not a released number)
            continue
        values = [rows[i].half_width for rows in by_size]
        finite = all(math.isfinite(v) for v in values)
        shown = _shown(values) if finite else None
        if shown is None and q.min_rows is None:
            shown = _private_size_text(spec, q, frames[0], eps_q, dlt_q, weights, row.name)
        out.append(AnswerPlan(row.name, row.query, float(row.epsilon),
                              values[0] if finite and len(values) == 1 else None,
                              shown or "-", row.note))
    return tuple(out)


def _plan_query(spec: ReleaseSpec, q: QuerySpec, frames: Sequence[Any], eps_q: float,
                weights: Mapping[str, float] | None = None) -> QueryPlan:
    """The plan of one query released with ε = ``eps_q`` (and its share of δ) from each of
    ``frames`` (its filter applied here): the protected input or its stand-in at the public
    n, or stand-ins at each of :data:`SAMPLE_N` when n is unknown (then n-dependent numbers
    are shown as formulas in n); ``weights``: the statistics' ε's for a query with target
    accuracies (else their weights)."""

    dlt_q = spec.query_delta(q)
    weights = weights_of(q) if weights is None else weights
    by_size = [_planned(spec, q, f, eps_q, dlt_q, weights) for f in frames]
    reached = _reached(spec, q, frames[0], eps_q, weights) if q.targeted else {}
    out: list[MeasurementPlan] = []
    for i, stat in enumerate(q.statistics):
        ps = [planned[i] for planned in by_size]
        out.extend(_measurement(q, stat, ps, j, dlt_q, reached.get(stat.name))
                   for j in range(len(ps[0].plan.measurements)))
    free = tuple(s.name for s, p in zip(q.statistics, by_size[0], strict=True)
                 if not p.plan.measurements)
    if len(free) == len(q.statistics):  # only the public n: exact, free
        eps_q, dlt_q = 0.0, 0.0
    charged = max(charged_delta(planned, dlt_q) for planned in by_size)  # (at every sample n)
    answers = answer_accuracy(spec, q, frames, eps_q, dlt_q, weights)
    return QueryPlan(q.name, q.share, eps_q, charged, q.mechanism, q.group_by, q.keys,
                     describe_filter(q.filter), tuple(out), targeted=q.targeted,
                     requested_delta=dlt_q, answers=answers, free=free, ci=q.ci)


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
    frames = [query_frame(spec, f) for f in ([frame] if frame is not None else [
        stand_in(spec, facts, n) for n in (SAMPLE_N if facts.n is None else (facts.n,))])]
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
        targeted[q.name] = {s.name: _target_epsilon(spec, q, s, frame) for s in q.statistics}
    needed = _check_targets_fit(spec, targeted)
    queries = tuple(
        _plan_query(spec, q, frames, math.fsum(targeted[q.name].values()), targeted[q.name])
        if q.targeted else _plan_query(spec, q, frames, spec.query_epsilon(q, needed))
        for q in spec.queries)
    return ReleasePlan(spec, facts, queries, ACCURACY_METHOD, ALPHA)


def weights_of(q: QuerySpec) -> Mapping[str, float]:
    """The relative weights of a query's statistics."""
    return {s.name: s.weight for s in q.statistics}

"""The plan of a release spec, from public facts only: budget split, mechanisms, accuracy.

:func:`plan_release` turns a checked :class:`~dpframe.cli.spec.ReleaseSpec` and the
:class:`SourceFacts` of its input (column names and types from the file schema, and the public
row count ``n`` when the files' metadata holds it) into a :class:`ReleasePlan`: per query and
measurement the ε and δ charged, the mechanism, its sensitivity, output domain, scale and a
95% half-width. Each query is planned by :func:`dpframe.release.plan` — the library's own
plans, mechanisms and checks — on the protected input during a run, or, for the dry run, on
a :func:`stand_in` of it (its schema, the spec's declarations and the public ``n``; no data),
so the dry run shows the scales the run will use (``tests/cli/test_spec.py`` checks this
against the log). Nothing here reads data.

When ``n`` is unknown (CSV files keep no row count in their metadata) the sensitivities,
domains and scales that depend on ``n`` are shown as formulas in ``n`` (:func:`_formula`; the
measurements themselves still come from the library's plan).

**Target accuracies.** A query may give each statistic a target half-width ``h`` at a level
``1 − α`` instead of a share of ε. Its ε is then the smallest ε at which the statistic's
mechanism has ``P(|release − true| ≤ h) ≥ 1 − α`` for every true value
(:func:`dpframe.planner.epsilon_for`, behind ``frame.dp.epsilon_for``; doubled in a
group-by, where each group's mechanism gets half), for
statistics that are one measurement: counts, and sums, means and variances on their plan's
size; a std is released as the square root of a variance, and ``|√a − √b| ≤ √|a − b|``, so a
std within ``h`` needs its variance within ``h²``. Such queries spend no δ. The queries with
shares split what the run's ε leaves. The ε's depend on the public ``n``.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import reduce
from typing import Any

from dpframe.cli.spec import Condition, QuerySpec, ReleaseSpec, StatisticSpec
from dpframe.errors import DPFrameError, PrivateSizeWarning, SpecError
from dpframe.mechanisms.accuracy import ROUNDED, half_width, rounded_half_width

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


@dataclass(frozen=True)
class QueryPlan:
    """One query: one release of ε, δ over its statistics."""

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
        for c in _condition_columns(q.filter):
            assert c.column is not None
            _need_column(spec, facts, c.column, (*c.path, "column"), "filter column")


def _where(spec: ReleaseSpec, exc: DPFrameError, named: Mapping[str, tuple[Any, ...]],
           default: tuple[Any, ...], prefix: str) -> SpecError:
    """A library refusal as a :class:`SpecError` at the line of the one column of ``named``
    (column → spec path) its message names, else at ``default``."""
    hits = [path for col, path in named.items() if repr(col) in str(exc)]
    return spec.error(hits[0] if len(hits) == 1 else default, f"{prefix}{exc}")


# -- filters and queries ---------------------------------------------------------------------
def _expr(c: Condition) -> Any:
    import narwhals as nw

    if c.any_of:
        return reduce(lambda a, b: a | b, (_expr(x) for x in c.any_of))
    assert c.column is not None
    col = nw.col(c.column)
    op, v = c.op, c.value
    if op == "==":
        return col == v
    if op == "!=":
        return col != v
    if op == "<":
        return col < v
    if op == "<=":
        return col <= v
    if op == ">":
        return col > v
    if op == ">=":
        return col >= v
    if op == "in":
        return col.is_in(list(v))
    if op == "not in":
        return ~col.is_in(list(v))
    if op == "between":
        return col.is_between(v[0], v[1], closed="both")
    if op == "is null":
        return col.is_null()
    if op == "is not null":
        return ~col.is_null()
    raise AssertionError(op)  # pragma: no cover - checked by the parser


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
    """The ``{name: dpf.count()/dpf.mean(col)/...}`` of one query (the library's own query
    objects, :data:`dpframe.queries.SCALAR_STATISTICS`) and its weights."""
    from dpframe.queries import SCALAR_STATISTICS

    stats = {s.name: SCALAR_STATISTICS[s.kind](s.column) if s.column is not None
             else SCALAR_STATISTICS[s.kind]() for s in q.statistics}
    return stats, {s.name: s.weight for s in q.statistics}


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


def _formula(stat: StatisticSpec, part: str, public: bool, bounds: tuple[float, float] | None,
             mech: str, eps: float) -> tuple[str, str, str, str]:
    """(Δ, domain, scale, half-width) as text in n, for an unknown n."""
    lo, hi = bounds if bounds is not None else (0.0, 0.0)
    w = hi - lo
    rel = "≥" if mech == "bounded" else "≈"
    tail = math.log(1 / ALPHA)

    def over_n(c: float) -> tuple[str, str, str]:
        return f"{c:.4g}/n", f"{rel} {c / eps:.4g}/n", f"≈ {tail * c / eps:.4g}/n"

    if part == "count":
        d, dom = 1.0, "[0, n]"
    elif stat.kind == "sum" and public:
        d, dom = w, f"[0, {w:.4g}·n]"
    elif stat.kind == "sum":
        d = max(w, abs(lo), abs(hi))
        dom = "[0, ∞)" if lo >= 0 else "(-∞, 0]" if hi <= 0 else "(-∞, ∞)"
    elif part == "mean":
        s, sc, hw = over_n(w)
        return s, f"[0, {w:.4g}]", sc, hw
    elif part == "variance":
        s, sc, hw = over_n(w * w)
        return s, f"[0, {w * w / 4:.4g}·n/(n−1)]", sc, hw
    elif part == "sum":
        d, dom = w, "(-∞, ∞)"
    else:  # sum_sq
        d, dom = (w / 2) ** 2, "[0, ∞)"
    return f"{d:.4g}", dom, f"{rel} {d / eps:.4g}", f"≈ {tail * d / eps:.4g}"


# -- planning through the library -------------------------------------------------------------
#: The public row count a stand-in plans at when the input's ``n`` is unknown (CSV without
#: ``--rows``): only what does not depend on ``n`` is read from that plan (the measurements,
#: their weights, whether the size is public); the rest is shown as formulas in ``n``.
PLACEHOLDER_N = 1_000


def protect_input(spec: ReleaseSpec, frame: Any, session: Any) -> Any:
    """``dpf.protect`` with the spec's budget, bounds, keys and missing-value rules."""
    import dpframe as dpf

    return dpf.protect(frame, epsilon=spec.epsilon, delta=spec.delta, bounds=dict(spec.bounds),
                       keys={k: list(v) for k, v in spec.keys.items()} or None,
                       missing=dict(spec.missing), session=session)


def stand_in(spec: ReleaseSpec, facts: SourceFacts, n: int) -> Any:
    """The input as the library plans it, without its data: a Polars LazyFrame of one row of
    missing values with the input's columns and types (``facts.columns``, from file metadata),
    protected by :func:`protect_input` in a throwaway in-memory session (the spec's ledger is
    not touched) and given the public size ``n``. A release plans from public facts only (the
    schema, the declarations and ``n``), so :func:`dpframe.release.plan` plans this frame as
    it plans the input read by Polars (a run plans its protected input itself, whatever the
    engine); nothing is ever released from it. (Its row is made
    of literals, not of a frame's buffers: protect refuses memory a protected frame holds.)"""
    import polars as pl

    import dpframe as dpf
    from dpframe.provenance import resolve

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
    query's level: :func:`dpframe.planner.epsilon_for` on the query's frame (a std within
    ``h`` needs its variance within ``h²``, see the module docstring)."""
    from dpframe.planner import epsilon_for

    assert stat.target is not None
    kind, target = stat.kind, stat.target
    if kind == "std":
        kind, target = "variance", target * target
    query = build_queries(QuerySpec(q.name, 1.0, (StatisticSpec(
        stat.name, kind, stat.column, 1.0),), None, None, (), q.mechanism))[0][stat.name]
    try:
        return epsilon_for(frame, query, target, alpha=1.0 - q.level, delta=0.0,
                           mechanism=q.mechanism, **_group(q))
    except DPFrameError as exc:
        raise spec.error(stat.path, f"{stat.name!r}: accuracy {stat.target:g} at level "
                         f"{q.level:g}: {exc}") from None


def _planned(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float, dlt_q: float,
             weights: Mapping[str, float]) -> list[Any]:
    """:func:`dpframe.release.plan` of the query's release (the run makes the same call's
    release); an error names the query's line."""
    from dpframe.release import plan

    try:
        return plan(frame, build_queries(q)[0], epsilon=eps_q, delta=dlt_q,
                    weights=dict(weights), mechanism=q.mechanism, **_group(q))
    except DPFrameError as exc:
        named = {s.column: s.path for s in q.statistics if s.column is not None}
        if q.group_by is not None:
            named[q.group_by] = (*q.path, "group_by")
        raise _where(spec, exc, named, q.path, f"query {q.name!r}: ") from None


def _measurement(q: QuerySpec, stat: StatisticSpec, p: Any, m: Any, mech: Any, dlt_q: float,
                 size: str) -> MeasurementPlan:
    """One row of the plan: a measurement of ``p`` (a :class:`dpframe.release.Planned`) and
    the mechanism the library built for it."""
    eps, dlt = p.epsilon * m.weight, dlt_q * p.share * m.weight
    h = half_width(mech, ALPHA)
    reached = None
    if stat.target is not None:
        reached = half_width(mech, 1.0 - q.level)
        reached = math.sqrt(reached) if stat.kind == "std" else reached
        reached = rounded_half_width(reached) if stat.kind in ROUNDED else reached
    return MeasurementPlan(
        stat.name, stat.kind, stat.column, m.name, size, eps, dlt, float(mech.epsilon),
        str(mech.name), float(mech.sensitivity), float(mech.domain.lower),
        float(mech.domain.upper), float(mech.scale), float(mech.grid or 0.0),
        float(getattr(mech, "epsilon_overhead", 0.0)), float(h),
        target=stat.target, level=q.level if stat.target is not None else None,
        target_half_width=reached)


def _in_n(spec: ReleaseSpec, q: QuerySpec, stat: StatisticSpec, p: Any, m: Any,
          dlt_q: float, size: str) -> MeasurementPlan:
    """A measurement planned at :data:`PLACEHOLDER_N`, its n-dependent numbers as
    formulas in n (:func:`_formula`)."""
    gf = (p.plan.group_share or 0.5) if q.group_by is not None else 1.0
    eps, dlt = p.epsilon * m.weight, dlt_q * p.share * m.weight
    bounds = spec.bounds.get(stat.column) if stat.column is not None else None
    d, dom, sc, hw = _formula(stat, m.name, p.plan.public_size, bounds, q.mechanism, eps * gf)
    return MeasurementPlan(stat.name, stat.kind, stat.column, m.name, size, eps, dlt, eps * gf,
                           q.mechanism, None, None, None, None, None, None, None,
                           formula=f"Δ = {d}; domain {dom}; scale {sc}; ±95% {hw}")


def _plan_query(spec: ReleaseSpec, q: QuerySpec, frame: Any, eps_q: float,
                weights: Mapping[str, float] | None = None, *, in_n: bool = False
                ) -> QueryPlan:
    """The plan of one query released with ε = ``eps_q`` (and its share of δ) from
    ``frame`` (its filter applied here); ``weights``: the statistics' ε's for a query with
    target accuracies (else their weights). ``in_n``: ``n`` is unknown (formulas in n)."""
    dlt_q = spec.query_delta(q)
    planned = _planned(spec, q, _derived(spec, q, frame), eps_q, dlt_q,
                       weights_of(q) if weights is None else weights)
    out: list[MeasurementPlan] = []
    for stat, p in zip(q.statistics, planned, strict=True):
        size = "public n" if p.plan.public_size else "private"
        for m, mech in zip(p.plan.measurements, p.mechanisms, strict=True):
            out.append(_in_n(spec, q, stat, p, m, dlt_q, size) if in_n or mech is None
                       else _measurement(q, stat, p, m, mech, dlt_q, size))
    if not any(p.plan.measurements for p in planned):  # only the public n: exact, free
        eps_q, dlt_q = 0.0, 0.0
    return QueryPlan(q.name, q.share, eps_q, dlt_q, q.mechanism, q.group_by, q.keys,
                     describe_filter(q.filter), tuple(out), targeted=q.targeted)


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
    every query planned by :func:`dpframe.release.plan` on ``frame`` (the protected input,
    during a run) or on a :func:`stand_in` of the input (the dry run, and the checks before a
    run protects anything)."""
    check_schema(spec, facts)
    if facts.n is not None and facts.n == 0:
        raise spec.error(("input", "path"), "the input has no rows (n = 0 is public); there "
                         "is nothing to release")
    if frame is None:
        frame = stand_in(spec, facts, PLACEHOLDER_N if facts.n is None else facts.n)
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
    in_n = facts.n is None
    queries = tuple(
        _plan_query(spec, q, frame, math.fsum(targeted[q.name].values()), targeted[q.name])
        if q.targeted else _plan_query(spec, q, frame, spec.query_epsilon(q, needed),
                                       in_n=in_n)
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
        lines.append("            n is unknown, so quantities that depend on it are shown as "
                     "formulas in n (pass --rows N to evaluate them at an assumed n)")
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
            what = f"{m.statistic} = {m.kind}({m.column or ''})"
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
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        if any(m.formula is not None for m in q.measurements):
            widths[6:] = [0, 0, 0, 0]
            header = (*header[:6], "Δ, domain, scale, ±95% (formulas in n)", "", "", "")
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
                     .rstrip())
        for r in rows:
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
              "shifted by the lower bound); ε mech = the ε each group's mechanism gets."]
    return "\n".join(lines)


def weights_of(q: QuerySpec) -> Mapping[str, float]:
    """The relative weights of a query's statistics."""
    return {s.name: s.weight for s in q.statistics}

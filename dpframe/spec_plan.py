"""The plan of a release spec, from public facts only: budget split, mechanisms, accuracy.

:func:`plan_release` turns a checked :class:`~dpframe.spec.ReleaseSpec` and the
:class:`SourceFacts` of its input (column names and types from the file schema, and the public
row count ``n`` when the files' metadata holds it) into a :class:`ReleasePlan`: per query and
measurement the ε and δ charged, the mechanism, its sensitivity, output domain, scale and a
95% half-width. It builds the same :class:`~dpframe.queries.PlanContext` that
:mod:`dpframe.release` builds for the real run, so the dry run shows the scales the run will
use (``tests/test_release_spec.py`` checks this against the log). Nothing here reads data.

When ``n`` is unknown (CSV files keep no row count in their metadata) the sensitivities,
domains and scales that depend on ``n`` are shown as formulas in ``n``.

**Target accuracies.** A query may give each statistic a target half-width ``h`` at a level
``1 − α`` instead of a share of ε. Its ε is then the smallest ε at which the statistic's
mechanism has ``P(|release − true| ≤ h) ≥ 1 − α`` for every true value
(:func:`dpframe.mechanisms.accuracy.epsilon_for_half_width`, the inverse behind
``frame.dp.epsilon_for``; doubled in a group-by, where each group's mechanism gets half), for
statistics that are one measurement: counts, and sums, means and variances on their plan's
size; a std is released as the square root of a variance, and ``|√a − √b| ≤ √|a − b|``, so a
std within ``h`` needs its variance within ``h²``. Such queries spend no δ. The queries with
shares split what the run's ε leaves. The ε's depend on the public ``n``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import reduce
from typing import Any

from dpframe.errors import DPFrameError
from dpframe.mechanisms.accuracy import ROUNDED, half_width, raw_target, rounded_half_width
from dpframe.spec import Condition, QuerySpec, ReleaseSpec, StatisticSpec

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

    ``columns``: name → ``"numeric"``, ``"string"``, ``"boolean"``, ``"other"`` or
    ``"unknown"`` (CSV: names from the header line, types unknown until the engine infers them
    from the data). ``n``: the public row count, or None. ``n_source``: where ``n`` comes from.
    """

    files: tuple[str, ...]
    columns: dict[str, str]
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
                 what: str) -> str:
    kind = facts.columns.get(column)
    if kind is None:
        shown = ", ".join(list(facts.columns)[:20])
        raise spec.error(path, f"{what} {column!r} is not a column of the input "
                         f"(columns: {shown})")
    return kind


def _condition_columns(conds: tuple[Condition, ...]) -> list[Condition]:
    out: list[Condition] = []
    for c in conds:
        out.extend(_condition_columns(c.any_of) if c.any_of else [c])
    return out


def check_schema(spec: ReleaseSpec, facts: SourceFacts) -> None:
    """Check the spec against the input's columns and types (schema only); errors name the
    spec line."""
    for col in spec.bounds:
        kind = _need_column(spec, facts, col, ("bounds", col), "bounded column")
        if kind not in ("numeric", "unknown"):
            raise spec.error(("bounds", col), f"column {col!r} is {kind}, not numeric; only "
                             "numeric columns can be bounded and aggregated")
    for col in spec.keys:
        _need_column(spec, facts, col, ("keys", col), "key column")
    for q in spec.queries:
        if q.group_by is not None:
            kind = _need_column(spec, facts, q.group_by, (*q.path, "group_by"),
                                "group_by column")
            assert q.keys is not None
            numeric_keys = all(isinstance(k, int | float) and not isinstance(k, bool)
                               for k in q.keys)
            if (kind == "numeric" and not numeric_keys) or (kind == "string" and any(
                    not isinstance(k, str) for k in q.keys)):
                raise spec.error((*q.path, "group_by"), f"keys of {q.group_by!r} do not match "
                                 f"its type ({kind})")
        for c in _condition_columns(q.filter):
            assert c.column is not None
            kind = _need_column(spec, facts, c.column, (*c.path, "column"), "filter column")
            values = c.value if isinstance(c.value, list) else [c.value]
            vpath = (*c.path, "value")
            if c.value is None or kind in ("unknown", "other"):
                continue
            if kind == "numeric" and c.op != "between" and any(
                    isinstance(v, str | bool) for v in values):
                raise spec.error(vpath, f"column {c.column!r} is numeric; compare it with "
                                 f"numbers, got {c.value!r}")
            if kind == "string" and (c.op in ("<", "<=", ">", ">=", "between") or any(
                    not isinstance(v, str) for v in values)):
                raise spec.error(vpath, f"column {c.column!r} holds strings: use ==, !=, in, "
                                 f"not in with string values, got {c.op} {c.value!r}")


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
    """The ``{name: dpf.count()/dpf.mean(col)/...}`` of one query and its weights."""
    from dpframe import queries as q_

    builders: dict[str, Callable[[str], q_.Query]] = {
        "sum": q_.sum, "mean": q_.mean, "variance": q_.variance, "std": q_.std}
    stats: dict[str, Any] = {}
    for s in q.statistics:
        if s.kind == "count" or s.column is None:
            stats[s.name] = q_.count()
        else:
            stats[s.name] = builders[s.kind](s.column)
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


def _context(spec: ReleaseSpec, q: QuerySpec, stat: StatisticSpec, n: int) -> Any:
    from dpframe.queries import PlanContext

    read = (stat.column,) if stat.column is not None else ()
    drops = [c for c in read if spec.missing.get(c, "drop") == "drop"]
    grouped = q.group_by is not None
    return PlanContext(
        size_public=not q.filter and not drops, n=n,
        bounds=spec.bounds[stat.column] if stat.column is not None else None,
        grouped=grouped, count_cap=float(n), column=stat.column, drops=bool(drops),
        n_groups=len(q.keys) if q.keys is not None else 1,
        all_bounds={c: spec.bounds[c] for c in read},
    )


def _parts(stat: StatisticSpec, public: bool) -> tuple[tuple[str, float], ...]:
    """Measurement names and their share of the statistic's ε (mirrors dpframe.queries)."""
    if stat.kind in ("count", "sum") or public:
        part = {"count": "count", "sum": "sum", "mean": "mean"}.get(stat.kind, "variance")
        return ((part, 1.0),)
    if stat.kind == "mean":
        return (("count", 0.5), ("sum", 0.5))
    return (("count", 1 / 3), ("sum", 1 / 3), ("sum_sq", 1 / 3))


def _target_epsilon(spec: ReleaseSpec, q: QuerySpec, stat: StatisticSpec, n: int) -> float:
    """The ε (charged to the ledger) at which ``stat`` reaches its target half-width at the
    query's level (see the module docstring)."""
    from dpframe.mechanisms.accuracy import epsilon_for_half_width

    assert stat.target is not None
    one = QuerySpec(q.name, 1.0, (stat,), q.group_by, q.keys, q.filter, q.mechanism)
    try:
        plan = build_queries(one)[0][stat.name].plan(_context(spec, q, stat, n))
    except DPFrameError as exc:
        raise spec.error(stat.path, f"{stat.name!r}: {exc}") from None
    ms = plan.measurements
    if len(ms) != 1:
        raise spec.error(stat.path, (
            f"{stat.name!r}: a target accuracy needs a statistic released as one measurement "
            f"(counts; sums, means, variances and stds on a public size); this {stat.kind} is "
            f"{len(ms)} measurements ({', '.join(m.name for m in ms)}: its size is private — "
            "a filter, a group-by or missing = \"drop\" on its column). Give the query a share "
            "instead, or declare a fill value for the column"))
    m = ms[0]
    target = stat.target * stat.target if stat.kind == "std" else raw_target(stat.kind,
                                                                              stat.target)
    finite = math.isfinite(m.lower) and math.isfinite(m.upper)
    options = {} if finite or m.magnitude is None else {"magnitude": m.magnitude}
    gf = (plan.group_share or 0.5) if q.group_by is not None else 1.0
    try:
        eps = epsilon_for_half_width(
            q.mechanism, target, sensitivity=m.sensitivity,
            lower=m.lower if math.isfinite(m.lower) else None,
            upper=m.upper if math.isfinite(m.upper) else None,
            delta=0.0, alpha=1.0 - q.level, **options)
    except DPFrameError as exc:
        raise spec.error(stat.path, f"{stat.name!r}: accuracy {stat.target:g} at level "
                         f"{q.level:g} cannot be reached: {exc}") from None
    return eps / gf / m.weight


def _plan_query(spec: ReleaseSpec, q: QuerySpec, n: int | None, eps_q: float,
                weights: Mapping[str, float] | None = None) -> QueryPlan:
    """The plan of one query released with ε = ``eps_q`` (and its share of δ); ``weights``:
    the statistics' ε's for a query with target accuracies (else their weights)."""
    from dpframe.mechanisms import make_mechanism

    dlt_q = spec.query_delta(q)
    if weights is not None:
        q = QuerySpec(q.name, q.share, tuple(
            StatisticSpec(s.name, s.kind, s.column, weights[s.name], s.path, s.target)
            for s in q.statistics), q.group_by, q.keys, q.filter, q.mechanism, q.path, q.level)
    total_w = math.fsum(s.weight for s in q.statistics)
    grouped = q.group_by is not None
    out: list[MeasurementPlan] = []
    for stat in q.statistics:
        share = stat.weight / total_w
        drops = stat.column is not None and spec.missing.get(stat.column, "drop") == "drop"
        public = not q.filter and not drops and not grouped
        size = "public n" if public else "private"
        if n is None:
            for part, weight in _parts(stat, public):
                gf = 0.5 if grouped else 1.0
                eps, dlt = eps_q * share * weight, dlt_q * share * weight
                bounds = spec.bounds.get(stat.column) if stat.column is not None else None
                d, dom, sc, hw = _formula(stat, part, public, bounds, q.mechanism, eps * gf)
                out.append(MeasurementPlan(
                    stat.name, stat.kind, stat.column, part, size, eps, dlt, eps * gf,
                    q.mechanism, None, None, None, None, None, None, None,
                    formula=f"Δ = {d}; domain {dom}; scale {sc}; ±95% {hw}"))
            continue
        try:
            plan = build_queries(QuerySpec(q.name, q.share, (stat,), q.group_by, q.keys,
                                           q.filter, q.mechanism))[0][stat.name].plan(
                _context(spec, q, stat, n))
        except DPFrameError as exc:
            raise spec.error(stat.path, f"{stat.name!r}: {exc}") from None
        gf = (plan.group_share or 0.5) if grouped else 1.0
        for m in plan.measurements:
            eps, dlt = eps_q * share * m.weight, dlt_q * share * m.weight
            finite = math.isfinite(m.lower) and math.isfinite(m.upper)
            try:
                mech = make_mechanism(q.mechanism, epsilon=eps * gf, sensitivity=m.sensitivity,
                                      lower=m.lower, upper=m.upper, delta=dlt * gf,
                                      magnitude=None if finite else m.magnitude)
            except DPFrameError as exc:
                raise spec.error((*q.path, "share"), f"{q.name!r}/{stat.name!r}: the "
                                 f"{q.mechanism} mechanism cannot be built: {exc}") from None
            h = half_width(mech, ALPHA)
            reached = None
            if stat.target is not None:
                reached = half_width(mech, 1.0 - q.level)
                reached = math.sqrt(reached) if stat.kind == "std" else reached
                reached = rounded_half_width(reached) if stat.kind in ROUNDED else reached
            out.append(MeasurementPlan(
                stat.name, stat.kind, stat.column, m.name, size, eps, dlt, eps * gf,
                str(mech.name), float(mech.sensitivity), float(mech.domain.lower),
                float(mech.domain.upper), float(mech.scale), float(mech.grid or 0.0),
                float(getattr(mech, "epsilon_overhead", 0.0)), float(h),
                target=stat.target, level=q.level if stat.target is not None else None,
                target_half_width=reached))
    return QueryPlan(q.name, q.share, eps_q, dlt_q, q.mechanism, q.group_by, q.keys,
                     describe_filter(q.filter), tuple(out), targeted=q.targeted)


def plan_release(spec: ReleaseSpec, facts: SourceFacts) -> ReleasePlan:
    """The plan of one run of ``spec`` on an input described by ``facts`` (no data read)."""
    check_schema(spec, facts)
    if facts.n is not None and facts.n == 0:
        raise spec.error(("input", "path"), "the input has no rows (n = 0 is public); there "
                         "is nothing to release")
    targeted: dict[str, dict[str, float]] = {}
    for q in spec.queries:
        if not q.targeted:
            continue
        if facts.n is None:
            raise spec.error(q.statistics[0].path, (
                f"query {q.name!r}: the epsilon a target accuracy needs depends on the public "
                "row count n, which CSV files do not record; pass --rows N to plan at an "
                "assumed n (the run uses the n it counts)"))
        targeted[q.name] = {s.name: _target_epsilon(spec, q, s, facts.n) for s in q.statistics}
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
    queries = tuple(
        _plan_query(spec, q, facts.n, math.fsum(targeted[q.name].values()), targeted[q.name])
        if q.targeted else _plan_query(spec, q, facts.n, spec.query_epsilon(q, needed))
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
        "shares (δ only to queries using the 'bounded' mechanism)",
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

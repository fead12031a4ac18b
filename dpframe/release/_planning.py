"""Step 3 of a release (:mod:`dpframe.release._pipeline`), the plan: each query's measurements
from public facts only (bounds, missing-value policy, the public size, dtypes), ε shared among
the queries that need noise, and every mechanism built — bad parameters fail here, before
anything is read (docs/architecture.md, "Module by module", steps 6–7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpframe import engine
from dpframe import provenance as units
from dpframe.errors import (
    BoundsError,
    ParameterError,
    PrivateSizeError,
)
from dpframe.mechanisms.selection import selection_rule
from dpframe.provenance import DROP, FrameFacts
from dpframe.query.statistics import PlanContext, Query
from dpframe.release._key_checks import _check_keys_match, selectable
from dpframe.release._mechanisms import build_mechanisms, mark_pure
from dpframe.release._records import Planned, Request, group_columns


def immutable(facts: FrameFacts) -> bool:
    """The frame a release reads cannot change its schema: dpframe's private snapshot of an
    in-memory frame, or an immutable plan (Polars LazyFrame, DuckDB relation, Spark
    DataFrame; a Dask DataFrame can be assigned to in place)."""
    return facts.data is not None or facts.dataset.backend.fixed_schema


def queries_part(request: Request) -> Request:
    """What the queries of a release that selects its keys get: ε − ε_sel and no δ."""
    assert request.selection is not None
    return replace(request, epsilon=request.epsilon - request.epsilon * request.selection,
                   delta=0.0)


def key_selection_rule(facts: FrameFacts, request: Request) -> Any:
    """The key selection's calibration (public facts only): ``m`` keys and a count of at most
    1 per unit, replacement neighbours, counts at most the public n (or U)."""
    assert request.selection is not None
    unit = facts.unit
    return selection_rule(request.epsilon * request.selection, request.delta,
                          1 if unit is None else unit.max_rows,
                          neighbours=selection_neighbours(facts),
                          count_upper=selection_count_upper(facts))


def selection_neighbours(facts: FrameFacts) -> str:
    """The key selection's neighbours: an added or removed row changes one key's count by 1
    (ε/m per key), a replaced one two (ε/(2m))."""
    return "add/remove" if facts.dataset.size_private else "replace"


def selection_count_upper(facts: FrameFacts) -> float:
    """The public upper bound of a key's count: ``n`` (or the units ``U``); under add/remove
    the declared ``max_rows`` or, without it, 2³¹ (never ``n``, which is private)."""
    if facts.unit is not None:
        return float(max(facts.unit.n_units, 1))
    return float(max(row_cap(facts), 1))


def row_cap(facts: FrameFacts) -> int:
    """The public bound on the rows of any frame of this data set: ``n`` under replace-one;
    under add/remove the declared ``max_rows``, else 2³¹ (a data-independent cap: counts above
    it are clamped to it, and statistics that need a declared cap are refused)."""
    dataset = facts.dataset
    if not dataset.size_private:
        return dataset.n
    return dataset.max_rows if dataset.max_rows is not None else DEFAULT_ROW_CAP


DEFAULT_ROW_CAP = 2**31


def _plan_all(frame: Any, facts: FrameFacts, request: Request, queries: Mapping[str, Query]
              ) -> list[Planned]:
    """Plan every query of a release from public facts: check the columns it reads, build its
    plan (sensitivities, measurements), share ε among the queries that need noise and build
    every mechanism the release can use — all before anything is read."""
    columns = engine.frame_columns(frame, immutable=immutable(facts))
    if request.group_by is not None:
        _check_group_dtypes(frame, request, columns)
    native: dict[str, Any] = {}
    out = [_plan_query(frame, facts, request, name, q, share, columns, native)
           for (name, q), share in zip(queries.items(), request.shares, strict=True)]
    _check_output_names(out)
    _share_budget(out, request)
    return out


def _check_group_dtypes(frame: Any, request: Request, columns: dict[str, Any]) -> None:
    """The group-by columns exist, keys can be selected from them (if asked) and declared keys
    match their dtypes."""
    assert request.group_by is not None
    cols = group_columns(request.group_by)
    for i, col in enumerate(cols):
        engine.validate_column(frame, col, numeric=False, columns=columns)
        if request.selection is not None and not selectable(columns[col]):
            raise ParameterError(
                f"keys cannot be selected from column {col!r} of dtype {columns[col]}: "
                "dpframe selects keys from integers, Float32/Float64, booleans, strings, "
                "categoricals, dates, datetimes, decimals and bytes (an object column's "
                "values of mixed Python types (1, True, 1.0, '1') may stand for one "
                "group); cast it to one of those first, or declare its keys")
        if request.keys is not None and not request.keys_from_data:
            # (keys selected from this column are of its type by construction)
            values = request.keys if len(cols) == 1 else [k[i] for k in request.keys]
            _check_keys_match(columns[col], col, values)


def _check_read_columns(frame: Any, facts: FrameFacts, read: Sequence[str],
                        columns: dict[str, Any]) -> None:
    """Each column a query reads exists, is numeric and has declared bounds."""
    for col in read:
        engine.validate_column(frame, col, columns=columns)
        if col not in facts.bounds:
            raise BoundsError(
                f"no bounds declared for column {col!r}. Bounds are public and never "
                "computed from the data; declare them on the with_columns that makes the "
                f"column: frame.dp.with_columns(<its expression>.alias({col!r}), "
                f"bounds={{{col!r}: (lower, upper)}}, missing='lower'), or on a step that "
                f"keeps it as it is: frame.dp.with_columns(nw.col({col!r}), "
                f"bounds={{{col!r}: (lower, upper)}}, missing='lower') (row-wise: the size "
                "stays public, nothing is spent)"
            )


def _plan_context(facts: FrameFacts, request: Request, q: Query, read: Sequence[str],
                  drops: Sequence[str]) -> PlanContext:
    """The public facts a query plans from. With a privacy unit the row count is private and
    k·U (public) caps the bounded rows; keys still to be selected plan for two groups, the
    case where a proportion's per-cell share is smallest, so every mechanism the release can
    need is checked before the read."""
    unit = facts.unit
    n = row_cap(facts) if unit is None else unit.row_cap
    add_remove = facts.dataset.size_private
    n_groups = len(request.keys) if request.keys is not None else (
        2 if request.selection is not None else 1)
    return PlanContext(
        size_public=facts.size_public and not drops and unit is None and not add_remove, n=n,
        bounds=facts.bounds.get(q.column) if q.column is not None else None,
        grouped=request.group_by is not None, count_cap=float(n), column=q.column,
        drops=bool(drops), n_groups=n_groups, all_bounds={c: facts.bounds[c] for c in read},
        unit=unit,
        units_public=unit is not None and facts.size_public, epsilon=request.epsilon,
        keys=facts.keys, ci=request.ci, neighbours=facts.dataset.neighbours,
        cap_declared=not add_remove or facts.dataset.max_rows is not None, kind_name=q.kind,
    )


def _require_public_size(q: Query, ctx: PlanContext, facts: FrameFacts,
                         drops: Sequence[str]) -> None:
    """Refuse a query that needs the public row count where it is private."""
    if not q.needs_public_size or ctx.size_public:
        return
    if facts.dataset.size_private and getattr(q, "size_free_under_add_remove", False):
        return  # (it plans a size-free formulation itself)
    if facts.dataset.size_private:
        raise PrivateSizeError(
            f"dp.{q.kind} needs the public row count, and this data set was protected with "
            "neighbours='add_remove', under which the row count is private (one row more or "
            "less is what the guarantee hides). Use a statistic with a size-free formulation "
            "(count, sum, mean, variance, quantiles, histograms, corr/cov), or protect with "
            "neighbours='replace'"
        )
    if facts.unit is not None:
        raise PrivateSizeError(
            f"dp.{q.kind} needs the public row count, which a privacy unit makes "
            f"private (one person can own several rows); it is not available on frames "
            f"protected with privacy_unit={facts.unit.column!r}"
        )
    if not facts.size_public:
        raise PrivateSizeError(
            f"dp.{q.kind} needs the public row count, and this frame's is private because "
            "it was filtered; no missing-value rule changes that. Run it on the protected "
            "frame or on a derivation that keeps every row (with_columns, select, rename, drop)"
        )
    cols = ", ".join(f"nw.col({c!r})" for c in drops)
    bounds = ", ".join(f"{c!r}: ({facts.bounds[c][0]!r}, {facts.bounds[c][1]!r})"
                       for c in drops)
    raise PrivateSizeError(
        f"dp.{q.kind} needs the public row count, and {', '.join(map(repr, drops))} drop "
        "missing values (missing='drop'), which makes it private for them. Declare a public "
        f"fill where the columns are bounded, e.g. frame.dp.with_columns({cols}, "
        f"bounds={{{bounds}}}, missing='lower'): the same columns, their public bounds, and a "
        "fill read from them ('lower', 'upper', 'midpoint' or a number within them); the size "
        "stays public and nothing is spent"
    )


def _plan_query(frame: Any, facts: FrameFacts, request: Request, name: str, q: Query,
                share: float, columns: dict[str, Any], native: dict[str, Any]) -> Planned:
    """One query's plan (``native``: the dtypes of the columns read so far, shared)."""
    backend = facts.dataset.backend
    read = q.columns_read()
    _check_read_columns(frame, facts, read, columns)
    known = engine.engine_dtypes(frame) if immutable(facts) else None  # (read with the data)
    for c in read:
        if c not in native:
            native[c] = known[c] if known is not None else backend.column_dtype(frame, c)
    drops = [c for c in read
             if facts.missing.get(c, DROP) == DROP and backend.can_hold_missing(native[c])]
    ctx = _plan_context(facts, request, q, read, drops)
    _require_public_size(q, ctx, facts, drops)
    try:
        plan_q = q.plan(ctx)
    except OverflowError:  # n·w or w² beyond the largest double: a public fact
        raise ParameterError(
            f"the bounds of {', '.join(read) or 'this query'} are too wide for {q.kind} on "
            f"{ctx.n} rows (the statistic's range overflows a double); declare narrower bounds"
        ) from None
    for agg in plan_q.aggregates:  # counts per public key of a column: keys of its dtype
        if agg.kind == "keys" and agg.column is not None and agg.keys is not None:
            if agg.column in group_columns(request.group_by):
                raise ParameterError(f"{q!r} counts the keys of a group-by column; count "
                                     "the groups with dpf.count()")
            engine.validate_column(frame, agg.column, numeric=False, columns=columns)
            _check_keys_match(columns[agg.column], agg.column, agg.keys)
    # sensitivities × k, group shares / min(g, k) (dpframe.provenance._units)
    if facts.unit is not None:
        plan_q = units.bound_plan(plan_q, q, facts.unit, ctx.grouped)
    if ctx.add_remove:  # one added or removed row touches one group and one cell
        plan_q = replace(plan_q, group_share=1.0, cell_share=None)
    return Planned(name, q, plan_q, share, [], {}, 0.0, ctx.bounds)


def _check_output_names(out: Sequence[Planned]) -> None:
    outputs = [f"{p.name}[{label}]" for p in out for label in p.plan.labels or ()] + [
        p.name for p in out if p.plan.labels is None]
    clash = sorted({o for o in outputs if outputs.count(o) > 1})
    if clash:
        raise ParameterError(f"the release would have several outputs named {clash}: rename "
                             "the queries (several quantile levels are named <name>[<q>])")


def _share_budget(out: Sequence[Planned], request: Request) -> None:
    """Split ε and δ: a query answered from public facts alone (the count of a frame whose
    size is public) costs nothing and its share goes to the queries that need noise; within a
    query each measurement gets its weight (times the per-group share when grouped)."""
    noisy = [p for p in out if p.plan.measurements]
    total = sum(p.share for p in noisy)
    if noisy and request.epsilon <= 0:
        raise ParameterError(
            "epsilon must be a finite number > 0 for a noisy release, e.g. epsilon=0.1; only "
            "a count of a frame whose size is public (released exactly, at no cost) can be "
            "asked with epsilon=0"
        )
    for p in out:
        p.share = p.share / total if p.plan.measurements else 0.0
        p.epsilon = request.epsilon * p.share
        build_mechanisms(p, request)
        mark_pure(p)

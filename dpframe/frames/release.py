"""Run queries against a frame: validate, plan, reserve, aggregate, add noise, commit, log.

Everything that can fail on the caller's input fails *before* the ledger is touched (bounds,
columns, ε/δ, mechanism names), and anything that fails afterwards (e.g. NaNs discovered by the
aggregation) cancels the reservation, so a failed query spends nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpframe import engine
from dpframe.errors import BoundsError, LedgerError, ParameterError
from dpframe.frames.context import Dataset, Session, backend_of, check_key_list, resolve
from dpframe.mechanisms import make_mechanism
from dpframe.queries import Measurement, Plan, PlanContext, Query

__all__ = ["Outcome", "run_queries"]

MECHANISMS = ("bounded", "truncated", "laplace")


@dataclass
class Outcome:
    """Answers of one release: ``values[name]`` is an array over ``keys`` (one entry when
    ungrouped), plus the committed log entries."""

    values: dict[str, np.ndarray]
    keys: list[Any] | None
    group_by: str | None
    entries: list[dict[str, Any]]
    ledger: Any

    @property
    def document(self) -> dict[str, Any]:
        """The ledger's log as of now (includes this release)."""
        return self.ledger.snapshot_document()


def _check_epsilon(epsilon: Any) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}") from None
    if not math.isfinite(eps) or eps <= 0:
        raise ParameterError(
            f"epsilon must be a finite number > 0, got {epsilon!r}; e.g. epsilon=0.1"
        )
    return eps


def _check_delta(delta: Any, mechanism: str) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ParameterError(f"delta must be a number, got {delta!r}") from None
    if not math.isfinite(d) or d < 0 or d >= 1:
        raise ParameterError(f"delta must be in [0, 1), got {delta!r}")
    if d > 0 and mechanism != "bounded":
        raise ParameterError(
            f"mechanism={mechanism!r} does not use delta; pass delta=0 (or use "
            "mechanism='bounded', the only one that takes a delta)"
        )
    return d


def _check_mechanism(mechanism: Any) -> str:
    if mechanism not in MECHANISMS:
        raise ParameterError(
            f"unknown mechanism {mechanism!r}; choose one of 'bounded' (default), "
            "'truncated', 'laplace'"
        )
    return str(mechanism)


def _check_weights(names: list[str], weights: Any) -> list[float]:
    if weights is None:
        return [1.0 / len(names)] * len(names)
    if isinstance(weights, Mapping):
        missing = [n for n in names if n not in weights]
        extra = [k for k in weights if k not in names]
        if missing or extra:
            raise ParameterError(
                f"weights must name exactly the queries {names}; missing {missing}, "
                f"unknown {extra}"
            )
        raw = [weights[n] for n in names]
    else:
        raw = list(weights)
        if len(raw) != len(names):
            raise ParameterError(f"weights has {len(raw)} entries for {len(names)} queries")
    try:
        vals = [float(w) for w in raw]
    except (TypeError, ValueError):
        raise ParameterError(f"weights must be numbers, got {raw!r}") from None
    if any(not math.isfinite(w) or w <= 0 for w in vals):
        raise ParameterError(f"weights must be finite and > 0, got {raw!r}")
    total = sum(vals)
    return [w / total for w in vals]


def _json_num(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _check_nulls(nulls: Any) -> str:
    if nulls not in ("raise", "drop"):
        raise ParameterError(
            f"nulls must be 'raise' (default) or 'drop', got {nulls!r}"
        )
    return str(nulls)


def run_queries(
    frame: Any,
    queries: Mapping[str, Query],
    *,
    epsilon: Any,
    delta: Any = 0.0,
    weights: Any = None,
    mechanism: Any = "bounded",
    random_state: Any = None,
    nulls: Any = "raise",
    group_by: str | None = None,
    keys: Sequence[Any] | None = None,
    session: Session | str | None = None,
) -> Outcome:
    """Answer ``queries`` on ``frame`` as one release costing ``epsilon`` (and ``delta``)."""
    dataset, is_root = resolve(frame, session)
    if not isinstance(queries, Mapping) or not queries:
        raise ParameterError(
            "release() takes a non-empty dict name -> query, e.g. {'n': dpf.count()}"
        )
    names = [str(k) for k in queries]
    for name, q in queries.items():
        if not isinstance(q, Query):
            raise ParameterError(
                f"query {name!r} must be built with dpf.count(), dpf.mean(col), ...; got {q!r}"
            )
    mech = _check_mechanism(mechanism)
    eps = _check_epsilon(epsilon)
    dlt = _check_delta(delta, mech)
    shares = _check_weights(names, weights)
    nulls = _check_nulls(nulls)
    backend = backend_of(frame)
    if is_root:
        _check_not_mutated(frame, dataset, backend)
    size_public = is_root and nulls == "raise"
    grouped = group_by is not None
    key_list = _group_keys(dataset, group_by, keys) if grouped else None
    if grouped:
        engine.validate_column(frame, group_by, numeric=False)

    dataset.ledger.check(eps, dlt)  # early refusal; reserve() below is the binding step

    plans: list[tuple[str, Query, Plan, float]] = []
    dtypes: dict[str, Any] = {}
    for (name, q), share in zip(queries.items(), shares, strict=True):
        bounds = None
        if q.column is not None:
            dtypes[q.column] = engine.validate_column(frame, q.column)
            if q.column not in dataset.bounds:
                raise BoundsError(
                    f"no bounds declared for column {q.column!r}: declare them when protecting, "
                    f"dpf.protect(frame, ..., bounds={{{q.column!r}: (lower, upper)}}); bounds "
                    "are public and are never computed from the data"
                )
            bounds = dataset.bounds[q.column]
        ctx = PlanContext(size_public, dataset.n, dataset.row_cap, bounds, grouped,
                          count_cap=float(dataset.n) if is_root else math.inf)
        plans.append((name, q, q.plan(ctx), share))

    # Build every mechanism before spending: bad parameters fail here.
    group_factor = 0.5 if grouped else 1.0
    mechs: list[list[tuple[Measurement, Any, float, float]]] = []
    for _name, _q, plan, share in plans:
        row = []
        for m in plan.measurements:
            e_charged = eps * share * m.weight
            d_charged = dlt * share * m.weight
            mobj = make_mechanism(
                mech,
                epsilon=e_charged * group_factor,
                sensitivity=m.sensitivity,
                lower=m.lower,
                upper=m.upper,
                delta=d_charged * group_factor,
                magnitude=None if math.isfinite(m.lower) and math.isfinite(m.upper)
                else m.magnitude,
            )
            row.append((m, mobj, e_charged, d_charged))
        mechs.append(row)

    ledger = dataset.ledger
    reservation = ledger.reserve(eps, dlt)
    try:
        rng = np.random.default_rng(random_state) if random_state is not None else None
        eng = engine.engine_name(frame)
        release_id = 0  # assigned by the ledger at commit
        keys_json = _keys_json(key_list)
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")
        values: dict[str, np.ndarray] = {}
        entries: list[dict[str, Any]] = []
        for (name, q, plan, _share), row in zip(plans, mechs, strict=True):
            fp = None
            if plan.needs_values:
                lo, hi = dataset.bounds[q.column]  # type: ignore[index]
                fp = engine.FixedPoint.choose(lo, hi, plan.center, dataset.row_cap,
                                              plan.squares)
            aggs = engine.aggregate(
                frame, column=q.column if plan.needs_values else None, fixed_point=fp,
                squares=plan.squares, row_cap=dataset.row_cap,
                bounds=dataset.bounds.get(q.column) if q.column else None,
                nulls=nulls, group_by=group_by, keys=key_list,
                column_dtype=dtypes.get(q.column) if plan.needs_values else None,
            )
            noisy: dict[str, np.ndarray] = {}
            for m, mobj, e_charged, d_charged in row:
                if m.vectorised:
                    exact = np.asarray(m.statistic(aggs.vector), dtype=float)
                else:
                    exact = np.array([m.statistic(a) for a in aggs.values()], dtype=float)
                out = mobj.sample(exact, random_state=rng)
                noisy[m.name] = np.atleast_1d(np.asarray(out, dtype=float))
                entries.append(_entry(
                    release_id=release_id, time=now, name=name, query=q, plan=plan,
                    measurement=m, mechanism=mobj, epsilon=e_charged, delta=d_charged,
                    random_source=mobj.random_source(random_state), engine=eng,
                    size="public" if plan.public_size or (size_public and not grouped)
                    else "private",
                    group_by=group_by, keys=key_list, keys_json=keys_json, nulls=nulls,
                    fixed_point=fp,
                    bounds=dataset.bounds.get(q.column) if q.column else None,
                ))
            values[name] = np.asarray(plan.finalize(noisy), dtype=float)
        ledger.commit(reservation, entries)
    except BaseException:
        ledger.cancel(reservation)  # no-op if already committed or cancelled
        raise
    return Outcome(values, key_list, group_by, entries, ledger)


def _check_not_mutated(frame: Any, dataset: Dataset, backend: str) -> None:
    if backend == "polars-lazy":
        return
    rows = len(frame) if backend == "pandas" else frame.height
    if rows != dataset.n:
        raise LedgerError(
            "the protected frame's rows were changed in place after dpf.protect(); its size is "
            "no longer the public one. Derive new frames instead of mutating the protected one."
        )


def _group_keys(dataset: Dataset, column: str | None, keys: Sequence[Any] | None) -> list[Any]:
    if keys is None:
        declared = dataset.keys.get(column) if column is not None else None
        if declared is None:
            raise ParameterError(
                f"group key column {column!r} has no declared keys: pass them, "
                f"frame.dp.groupby({column!r}, keys=[...]), or declare them at protect time "
                f"with keys={{{column!r}: [...]}}. Keys must be public; dpframe never reads "
                "them from the data"
            )
        return list(declared)
    return check_key_list(column, keys)


def _entry(
    *,
    release_id: int,
    time: str,
    name: str,
    query: Query,
    plan: Plan,
    measurement: Measurement,
    mechanism: Any,
    epsilon: float,
    delta: float,
    random_source: str,
    engine: str,
    size: str,
    group_by: str | None,
    keys: list[Any] | None,
    keys_json: str | None,
    nulls: str,
    fixed_point: Any,
    bounds: tuple[float, float] | None,
) -> dict[str, Any]:
    if bounds is not None:
        clamping = (
            f"values clamped to [{bounds[0]:g}, {bounds[1]:g}] in the engine; how many were "
            "clamped is not released"
        )
    else:
        clamping = "none (row count)"
    return {
        "release_id": release_id,
        "time": time,
        "name": name,
        "query": plan.query,
        "part": measurement.name,
        "columns": query.column or "",
        "group_by": group_by,
        "group_keys": keys_json,
        "epsilon": float(epsilon),
        "delta": float(delta),
        "mechanism_epsilon": float(mechanism.epsilon),
        "epsilon_overhead": float(getattr(mechanism, "epsilon_overhead", 0.0)),
        "sensitivity": float(measurement.sensitivity),
        "mechanism": str(mechanism.name),
        "scale": float(mechanism.scale),
        "grid": _json_num(getattr(mechanism, "grid", 0.0) or 0.0),
        "domain_lower": _json_num(measurement.lower),
        "domain_upper": _json_num(measurement.upper),
        "clamping": clamping,
        "nulls": nulls,
        "random_source": str(random_source),
        "engine": engine,
        "size": size,
        "formulation": plan.formulation,
        "composition": (
            f"parallel over {len(keys or [])} declared groups (ε/2 per group: a replaced row "
            "can move between two groups)" if group_by is not None else "sequential"
        ),
        "fixed_point_quantum": float(fixed_point.q) if fixed_point is not None else None,
    }


def _keys_json(keys: list[Any] | None) -> str | None:
    """The declared keys as JSON, encoded once per release (its entries share the string)."""
    return None if keys is None else json.dumps([_key_json(k) for k in keys])


def _key_json(k: Any) -> Any:
    if isinstance(k, bool | int | float | str):
        return k
    if hasattr(k, "item"):
        return k.item()
    return str(k)

"""What each measurement runs (imported only inside the measurement subprocess).

A measurement is one (scenario, engine, variant, rows[, keys][, mechanism]) combination.
:func:`build` loads the data (untimed) and returns a :class:`Setup` whose ``op`` the worker
times. Variants:

* ``dp``: the dpframe call a user makes on a protected frame (protected once, untimed;
  its budget is large enough for every repeat; each query spends ε = 1). The frame is
  protected with a public fill value for missing values (``missing=`` the lower bound), so
  queries use the public size, as the statistics of a complete table do. ``protect`` itself
  is timed on a fresh frame object per call (a shallow pandas copy, a Polars ``clone``):
  dpframe refuses to protect the same object twice.
* ``floor``: the same engine's native work the DP answer physically needs — clamp to the
  public bounds, then sum and count (the issue's "physical floor").
* ``plain``: the plain native statistic, no clamping (what a user would write without DP).

Engines: ``pandas``; ``polars`` (eager DataFrame); ``polars-lazy-parquet`` (``scan_parquet``,
the file is read inside every timed run, as a lazy query does); ``polars-lazy`` (an in-memory
``LazyFrame``, the form OpenDP takes, used for the peer comparison).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.data import census_bounds, key_column

#: Total budget of a protected frame in a benchmark; each timed query spends ``QUERY_EPSILON``.
BUDGET_EPSILON = 1.0e6
QUERY_EPSILON = 1.0
MEAN_COLUMN = "income"
SAMPLE_DRAWS = 1_000_000
MICRO_DOMAIN = (0.0, 10.0)
MICRO_SENSITIVITY = 1.0


class UnavailableError(Exception):
    """The measured API is not importable yet (e.g. the frames layer has not landed)."""


@dataclass
class Setup:
    op: Callable[[], Any]
    #: Number of operations one call of ``op`` performs (per-operation time = time / inner).
    inner: int = 1
    #: Bytes of the input column(s) the operation reads (0 when not meaningful).
    input_bytes: int = 0
    #: Values one call of ``op`` produces (e.g. noise draws), for throughput.
    items: int = 0
    keep: list[Any] = field(default_factory=list)


# -- data loading -------------------------------------------------------------------------------

def _columns_for(scenario: str, keys: int | None) -> list[str]:
    if scenario in ("mean", "variance", "count", "protect"):
        return [MEAN_COLUMN]
    if scenario == "release10":
        return ["age", "hours_worked", "income"]
    if scenario in ("groupby_mean", "groupby_sum"):
        assert keys is not None
        return [key_column(keys), MEAN_COLUMN]
    raise ValueError(f"unknown frame scenario {scenario!r}")


def _load(engine: str, path: str, columns: list[str]) -> Any:
    if engine == "pandas":
        import pandas as pd

        return pd.read_parquet(path, columns=columns)
    import polars as pl
    import pyarrow.parquet as pq

    # Read through pyarrow, not pl.read_parquet: Polars' allocator would keep the freed
    # decoding buffers resident and reuse them, hiding the query's own peak from the RSS
    # high-water mark; pyarrow's pool is separate, so every Polars allocation the query makes
    # shows up. Rechunk to one chunk per column, as pl.read_parquet does by default (the
    # Arrow table has one chunk per row group), so the frame is what a user would hold.
    if engine == "polars":
        return pl.from_arrow(pq.read_table(path, columns=columns)).rechunk()
    if engine == "polars-lazy":
        return pl.from_arrow(pq.read_table(path, columns=columns)).rechunk().lazy()
    if engine == "polars-lazy-parquet":
        return pl.scan_parquet(path)
    raise ValueError(f"unknown engine {engine!r}")


def _input_bytes(engine: str, frame: Any, columns: list[str], rows: int) -> int:
    if engine == "pandas":
        return int(sum(frame[c].to_numpy().nbytes for c in columns))
    if engine == "polars":
        return int(sum(frame[c].estimated_size() for c in columns))
    if engine == "polars-lazy":
        return int(frame.select(columns).collect().estimated_size())
    # lazy from Parquet: nothing is in memory before the query; report the size the numeric
    # (8-byte) columns would have in memory, for the memory ratio
    return 8 * rows * len(columns)


# -- dpframe side ---------------------------------------------------------------------------------

def _dpframe() -> Any:
    try:
        import dpframe as dpf

        dpf.protect  # noqa: B018 - probe that the frames layer is importable
    except (ImportError, AttributeError) as exc:
        raise UnavailableError(f"dpframe frames API not importable: {exc}") from exc
    return dpf


def _query_builders() -> Any:
    dpf = _dpframe()
    if all(hasattr(dpf, n) for n in ("count", "mean", "variance", "sum", "std")):
        return dpf
    import dpframe.query.statistics as queries

    return queries


def _fill(bounds: dict[str, tuple[float, float]]) -> dict[str, float]:
    """The benchmark's declared missing-value policy: fill with the public lower bound."""
    return {c: lo for c, (lo, _hi) in bounds.items()}


def _protect(engine: str, frame: Any, bounds: dict[str, tuple[float, float]]) -> tuple[Any, dict]:
    """Protect ``frame``; return it and the keyword arguments every query needs (none: a
    frame finds its ledger by provenance, on every backend)."""
    dpf = _dpframe()
    return dpf.protect(frame, epsilon=BUDGET_EPSILON, bounds=bounds, missing=_fill(bounds)), {}


def _fresh(engine: str, frame: Any) -> Callable[[], Any]:
    """A new frame object holding the same data, cheaply (for timing ``protect``)."""
    if engine == "pandas":
        return lambda: frame.copy(deep=False)
    if engine == "polars":
        return frame.clone
    return lambda: frame.select(frame.collect_schema().names())  # LazyFrames: a new plan


def _release10(q: Any) -> dict[str, Any]:
    return {
        "n": q.count(),
        "mean_age": q.mean("age"),
        "mean_hours": q.mean("hours_worked"),
        "mean_income": q.mean("income"),
        "sum_hours": q.sum("hours_worked"),
        "sum_income": q.sum("income"),
        "var_age": q.variance("age"),
        "var_income": q.variance("income"),
        "std_hours": q.std("hours_worked"),
        "std_income": q.std("income"),
    }


def _dp_op(scenario: str, engine: str, frame: Any, bounds: dict, keys: int | None) -> Callable:
    eps = QUERY_EPSILON
    if scenario == "protect":
        dpf = _dpframe()
        fresh = _fresh(engine, frame)

        def protect() -> Any:
            return dpf.protect(fresh(), epsilon=BUDGET_EPSILON, bounds=bounds,
                               missing=_fill(bounds))

        try:  # twice, untimed: a second budget on the same files may be refused
            protect()
            protect()
        except dpf.LedgerError as exc:
            raise UnavailableError(
                f"dpframe refuses a second budget on the same data in one process ({engine}), "
                "so protect cannot be timed repeatedly here"
            ) from exc
        return protect
    pf, kw = _protect(engine, frame, bounds)
    ns = pf.dp
    col = MEAN_COLUMN
    if scenario == "mean":
        return lambda: ns.mean(col, epsilon=eps, **kw)
    if scenario == "variance":
        return lambda: ns.variance(col, epsilon=eps, **kw)
    if scenario == "count":
        return lambda: ns.count(epsilon=eps, **kw)
    if scenario == "release10":
        queries = _release10(_query_builders())
        return lambda: ns.release(queries, epsilon=eps, **kw)
    if scenario in ("groupby_mean", "groupby_sum"):
        assert keys is not None
        key_list = list(range(keys))
        grouped = ns.groupby(key_column(keys), keys=key_list)
        if scenario == "groupby_mean":
            return lambda: grouped.mean(col, epsilon=eps, **kw)
        return lambda: grouped.sum(col, epsilon=eps, **kw)
    raise ValueError(f"no dp variant for {scenario!r}")


# -- native side ----------------------------------------------------------------------------------

def _pandas_op(scenario: str, variant: str, df: Any, bounds: dict, keys: int | None) -> Callable:
    col = MEAN_COLUMN
    lo, hi = bounds[col]
    s = df[col] if col in df.columns else None
    if scenario == "mean":
        if variant == "plain":
            return lambda: s.mean()

        def floor() -> tuple[float, int]:
            return s.clip(lo, hi).sum(), s.count()

        return floor
    if scenario == "variance":
        if variant == "plain":
            return lambda: s.var()
        return lambda: s.clip(lo, hi).var()
    if scenario == "count":
        return lambda: len(df)
    if scenario == "release10":

        def native10() -> dict[str, float]:
            def c(name: str) -> Any:
                return df[name].clip(*bounds[name])

            return {
                "n": len(df),
                "mean_age": c("age").mean(),
                "mean_hours": c("hours_worked").mean(),
                "mean_income": c("income").mean(),
                "sum_hours": c("hours_worked").sum(),
                "sum_income": c("income").sum(),
                "var_age": c("age").var(),
                "var_income": c("income").var(),
                "std_hours": c("hours_worked").std(),
                "std_income": c("income").std(),
            }

        return native10
    if scenario in ("groupby_mean", "groupby_sum"):
        assert keys is not None
        key = df[key_column(keys)]
        if variant == "plain":
            if scenario == "groupby_mean":
                return lambda: s.groupby(key).mean()
            return lambda: s.groupby(key).sum()
        if scenario == "groupby_mean":
            return lambda: s.clip(lo, hi).groupby(key).agg(["sum", "count"])
        return lambda: s.clip(lo, hi).groupby(key).sum()
    raise ValueError(f"no native variant for {scenario!r}")


def _polars_op(scenario: str, variant: str, frame: Any, bounds: dict, keys: int | None) -> Callable:
    import polars as pl

    lazy = not isinstance(frame, pl.DataFrame)

    def run(exprs: list[Any], by: str | None = None) -> Callable:
        if by is None:
            if lazy:
                return lambda: frame.select(exprs).collect()
            return lambda: frame.select(exprs)
        if lazy:
            return lambda: frame.group_by(by).agg(exprs).collect()
        return lambda: frame.group_by(by).agg(exprs)

    col = MEAN_COLUMN
    x = pl.col(col)
    clamped = x.clip(*bounds[col])
    if scenario == "mean":
        if variant == "plain":
            return run([x.mean()])
        return run([clamped.sum().alias("sum"), x.count().alias("count")])
    if scenario == "variance":
        return run([x.var()] if variant == "plain" else [clamped.var()])
    if scenario == "count":
        return run([pl.len()]) if lazy else (lambda: frame.height)
    if scenario == "release10":

        def c(name: str) -> Any:
            return pl.col(name).clip(*bounds[name])

        return run(
            [
                pl.len().alias("n"),
                c("age").mean().alias("mean_age"),
                c("hours_worked").mean().alias("mean_hours"),
                c("income").mean().alias("mean_income"),
                c("hours_worked").sum().alias("sum_hours"),
                c("income").sum().alias("sum_income"),
                c("age").var().alias("var_age"),
                c("income").var().alias("var_income"),
                c("hours_worked").std().alias("std_hours"),
                c("income").std().alias("std_income"),
            ]
        )
    if scenario in ("groupby_mean", "groupby_sum"):
        assert keys is not None
        by = key_column(keys)
        if variant == "plain":
            return run([x.mean() if scenario == "groupby_mean" else x.sum()], by)
        if scenario == "groupby_mean":
            return run([clamped.sum().alias("sum"), pl.len().alias("count")], by)
        return run([clamped.sum()], by)
    raise ValueError(f"no native variant for {scenario!r}")


# -- mechanism micro-benchmarks -------------------------------------------------------------------

#: (ε, Δ/(u-l)) grid for the cold interval scale solve; u - l = 1.
SCALE_GRID: tuple[tuple[float, float], ...] = tuple(
    itertools.product((0.1, 1.0, 10.0), (1e-6, 0.01, 0.1, 0.5))
)


def _mechanism_class(name: str) -> Any:
    from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace

    return {"bounded": BoundedLaplace, "truncated": TruncatedLaplace, "laplace": Laplace}[name]


def _micro(spec: dict[str, Any]) -> Setup:
    scenario = spec["scenario"]
    mech = spec.get("mechanism") or "bounded"
    lo, hi = MICRO_DOMAIN
    if scenario == "scale_cold":
        from dpframe.mechanisms.scales import holohan_scale

        cold = holohan_scale.__wrapped__
        if spec.get("case") == "grid":
            grid = SCALE_GRID

            def solve_grid() -> None:
                for eps, ratio in grid:
                    cold(eps, 0.0, ratio, 1.0)

            return Setup(solve_grid, inner=len(grid))
        return Setup(lambda: [cold(1.0, 0.0, MICRO_SENSITIVITY, hi - lo) for _ in range(200)],
                     inner=200)
    if scenario == "scale_cached":
        from dpframe.mechanisms.scales import holohan_scale

        holohan_scale(1.0, 0.0, MICRO_SENSITIVITY, hi - lo)
        return Setup(
            lambda: [holohan_scale(1.0, 0.0, MICRO_SENSITIVITY, hi - lo) for _ in range(10_000)],
            inner=10_000,
        )
    cls = _mechanism_class(mech)
    if scenario == "mechanism_init":
        counter = itertools.count(1)

        def construct() -> None:
            for _ in range(20):  # a fresh ε every time: the scale cache never hits
                cls(1.0 + next(counter) * 1e-9, MICRO_SENSITIVITY, lower=lo, upper=hi)

        return Setup(construct, inner=20)
    m = cls(1.0, MICRO_SENSITIVITY, lower=lo, upper=hi)
    if scenario == "sample":
        draws = int(spec.get("draws", SAMPLE_DRAWS))
        return Setup(lambda: m.sample(5.0, size=draws), items=draws)
    if scenario == "scalar_release":
        return Setup(lambda: [m.sample(5.0) for _ in range(50)], inner=50)
    raise ValueError(f"unknown micro scenario {scenario!r}")


MICRO_SCENARIOS = ("scale_cold", "scale_cached", "mechanism_init", "sample", "scalar_release")


def build(spec: dict[str, Any]) -> Setup:
    """Load the data and return the timed operation for one measurement spec."""
    scenario = spec["scenario"]
    if scenario in MICRO_SCENARIOS:
        return _micro(spec)
    engine, variant = spec["engine"], spec["variant"]
    keys = spec.get("keys")
    columns = _columns_for(scenario, keys)
    if variant == "dp":
        _dpframe()  # fail fast, before loading data
    frame = _load(engine, spec["data"], columns)
    bounds = {c: b for c, b in census_bounds().items() if c in columns}
    if variant == "dp":
        op = _dp_op(scenario, engine, frame, bounds, keys)
    elif engine == "pandas":
        op = _pandas_op(scenario, variant, frame, bounds, keys)
    else:
        op = _polars_op(scenario, variant, frame, bounds, keys)
    return Setup(op, input_bytes=_input_bytes(engine, frame, columns, spec["rows"]), keep=[frame])

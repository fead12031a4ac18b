"""What a batch costs (issue 34): ``frame.dp.release()`` of 10 statistics against the same 10 as
separate calls (1,000 rows) and against one native select of the same aggregates (10 M rows).

``python -m benchmarks.batches [--small 1000] [--large 10000000] [--engines pandas,polars]
[--rounds 15] [--cold-rounds 3] [--no-record]``. The 10 statistics: a count, three means, two
sums, two variances and two standard deviations of three bounded columns (as
``benchmarks.scenarios``' ``release10``). Cases (paired rounds, :mod:`benchmarks.paired`;
in-memory ledger):

* ``release of 10 / 10 calls``: one ``release`` against ``dp.count``, ``dp.mean``, ...
  called one by one on the same protected frame (target ≤ 0.6×);
* ``release of 10 / native select``: against the engine computing the same clamped
  aggregates natively (Polars: one ``select``; pandas: the clamped columns' sums, means and
  variances) (target ≤ 1×).

``--calls N`` (default 10): each warm 1,000-row variant runs N times per round (one run is a
few milliseconds, near the scheduler's slice on a loaded machine); cold rounds run once.
``--ledger memory,durable``: also the 1,000-row case with both sides' frames protected under a
durable ledger (``dpf.Session(path=...)``, fsync on: one atomic append per release), reported
beside the in-memory one.

Warm: repeated on one protected frame; cold: the first on a new frame protected as a user
would (protect not timed). Results: ``benchmarks/reports/raw/results-batches.json``,
``benchmarks/reports/RESULTS-batches.md``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.paired import (
    bench_session,
    fixed_cost_parser,
    fixed_cost_run,
    record,
    repeat,
    run_cases,
)

BOUNDS = {"age": (0.0, 120.0), "hours": (0.0, 100.0), "income": (0.0, 250_000.0)}
EPS = 1.0


def _frame(engine: str, rows: int) -> Any:
    import numpy as np
    import pandas as pd
    import polars as pl

    rng = np.random.default_rng(0)
    data = {"age": rng.integers(16, 95, rows), "hours": rng.uniform(0, 80, rows),
            "income": rng.uniform(0, 250_000, rows)}
    return pd.DataFrame(data) if engine == "pandas" else pl.DataFrame(data)


def _protected(engine: str, rows: int, ledger: str = "memory") -> Any:
    import dpframe as dpf

    session = bench_session(ledger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(_frame(engine, rows), epsilon=1e15, bounds=BOUNDS,
                           missing={c: 0.0 for c in BOUNDS}, session=session)


def _queries() -> dict[str, Any]:
    import dpframe as dpf

    return {"n": dpf.count(), "mean_age": dpf.mean("age"), "mean_hours": dpf.mean("hours"),
            "mean_income": dpf.mean("income"), "sum_hours": dpf.sum("hours"),
            "sum_income": dpf.sum("income"), "var_age": dpf.variance("age"),
            "var_income": dpf.variance("income"), "std_hours": dpf.std("hours"),
            "std_income": dpf.std("income")}


def _batch(pf: Any) -> Callable[[], Any]:
    queries = _queries()
    return lambda: pf.dp.release(queries, epsilon=EPS)


def _separate(pf: Any) -> Callable[[], Any]:
    ns = pf.dp
    each = EPS / 10

    def ten() -> list[Any]:
        return [ns.count(epsilon=each), ns.mean("age", epsilon=each),
                ns.mean("hours", epsilon=each), ns.mean("income", epsilon=each),
                ns.sum("hours", epsilon=each), ns.sum("income", epsilon=each),
                ns.variance("age", epsilon=each), ns.variance("income", epsilon=each),
                ns.std("hours", epsilon=each), ns.std("income", epsilon=each)]

    return ten


def _native(engine: str, frame: Any) -> Callable[[], Any]:
    if engine == "pandas":
        def native() -> dict[str, Any]:
            c = {name: frame[name].clip(*BOUNDS[name]) for name in BOUNDS}
            return {"n": len(frame), "mean_age": c["age"].mean(),
                    "mean_hours": c["hours"].mean(), "mean_income": c["income"].mean(),
                    "sum_hours": c["hours"].sum(), "sum_income": c["income"].sum(),
                    "var_age": c["age"].var(), "var_income": c["income"].var(),
                    "std_hours": c["hours"].std(), "std_income": c["income"].std()}

        return native
    import polars as pl

    def c(name: str) -> Any:
        return pl.col(name).clip(*BOUNDS[name])

    exprs = [pl.len().alias("n"), c("age").mean().alias("mean_age"),
             c("hours").mean().alias("mean_hours"), c("income").mean().alias("mean_income"),
             c("hours").sum().alias("sum_hours"), c("income").sum().alias("sum_income"),
             c("age").var().alias("var_age"), c("income").var().alias("var_income"),
             c("hours").std().alias("std_hours"), c("income").std().alias("std_income")]
    return lambda: frame.select(exprs)


def cases(engines: list[str], small: int, large: int, calls: int = 10,
          ledgers: tuple[str, ...] = ("memory",)) -> list[Any]:
    out: list[Any] = []
    for engine in engines:
        for ledger in ledgers:
            def warm_small(engine: str = engine, ledger: str = ledger) -> dict[str, Any]:
                pf = _protected(engine, small, ledger)
                return {"dp": repeat(_batch(pf), calls), "native": repeat(_separate(pf), calls)}

            def cold_small(engine: str = engine, ledger: str = ledger) -> dict[str, Any]:
                return {"dp": _batch(_protected(engine, small, ledger)),
                        "native": _separate(_protected(engine, small, ledger))}

            suffix = "" if ledger == "memory" else ", durable ledger"
            out.append((f"{engine} release of 10 / 10 separate calls, {small:,} rows{suffix}",
                        warm_small, cold_small))
        if large <= 0:
            continue

        def large_case(engine: str = engine) -> dict[str, Any]:
            return {"dp": _batch(_protected(engine, large)),
                    "native": _native(engine, _frame(engine, large))}

        out.append((f"{engine} release of 10 / one native select, {large:,} rows",
                    large_case, large_case))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = fixed_cost_parser(__doc__.splitlines()[0], calls=10)
    args = parser.parse_args(argv)
    ledgers = tuple(args.ledger.split(","))
    run = fixed_cost_run(args, ledgers)
    run["cases"] = run_cases(cases(args.engines.split(","), args.small, args.large,
                                   args.calls, ledgers),
                             args.rounds, args.cold_rounds)
    run["header"]["load_after"] = round(os.getloadavg()[0], 2)
    print(record("batches", "Batches: one release of 10 statistics",
                 "`python -m benchmarks.batches` (see its docstring). Paired rounds, medians "
                 "(lowest–highest per-round ratio); warm 1,000-row rounds run each side `--calls` "
                 "times (default 10), cold ones once. Targets (issue 34): ≤ 0.6× ten separate "
                 "calls at 1,000 rows; ≤ 1× one native select at 10 M rows.",
                 run, not args.no_record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

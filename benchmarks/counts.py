"""What histograms and value counts cost (issue 34): at 1,000 rows against dpframe's own scalar
mean (the fixed cost of one release), at 10 M rows against the engine's native ``cut`` and
``value_counts``.

``python -m benchmarks.counts [--small 1000] [--large 10000000] [--engines pandas,polars]
[--rounds 15] [--cold-rounds 3] [--no-record]``. Cases (paired rounds, see
:mod:`benchmarks.paired`; in-memory ledger):

* ``histogram / mean``: ``frame.dp.histogram("x", edges=11 edges, epsilon=1)`` against
  ``frame.dp.mean("x", epsilon=1)`` on the same protected frame (target ≤ 2×);
* ``value_counts / mean``: ``frame.dp.value_counts("k", epsilon=1)`` over 10 declared keys,
  the same way (target ≤ 2×);
* ``histogram / native cut``: pandas ``pd.cut(x, edges, include_lowest=True)
  .value_counts(sort=False)``, Polars ``x.cut(inner edges).value_counts()`` (target ≤ 1.3×);
* ``value_counts / native``: ``k.value_counts()`` (target ≤ 1.3×).

Warm: repeated calls on one protected frame; cold: the first call on a new frame protected as
a user would (protect not timed), against the native call on a new frame of its own.
Results: ``benchmarks/results-counts.json``, ``benchmarks/RESULTS-counts.md``.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.paired import header, record, run_cases

EDGES = [float(e) for e in range(0, 101, 10)]  # 10 bins of [0, 100]
N_KEYS = 10


def _frame(engine: str, rows: int) -> Any:
    import numpy as np
    import pandas as pd
    import polars as pl

    rng = np.random.default_rng(0)
    data = {"x": rng.uniform(0.0, 100.0, rows), "k": rng.integers(0, N_KEYS, rows)}
    return pd.DataFrame(data) if engine == "pandas" else pl.DataFrame(data)


def _protected(engine: str, rows: int) -> Any:
    import dpframe as dpf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(_frame(engine, rows), epsilon=1e15, bounds={"x": (0.0, 100.0)},
                           missing={"x": 0.0}, keys={"k": list(range(N_KEYS))})


def _native(engine: str, frame: Any, what: str) -> Callable[[], Any]:
    import pandas as pd
    import polars as pl

    if engine == "pandas":
        if what == "histogram":
            return lambda: pd.cut(frame["x"], EDGES, include_lowest=True).value_counts(
                sort=False)
        return lambda: frame["k"].value_counts()
    if what == "histogram":
        return lambda: frame.select(pl.col("x").cut(EDGES[1:-1]).value_counts())
    return lambda: frame.get_column("k").value_counts()


def _dp(pf: Any, what: str) -> Callable[[], Any]:
    if what == "histogram":
        return lambda: pf.dp.histogram("x", edges=EDGES, epsilon=1.0)
    if what == "value_counts":
        return lambda: pf.dp.value_counts("k", epsilon=1.0)
    return lambda: pf.dp.mean("x", epsilon=1.0)


def cases(engines: list[str], small: int, large: int) -> list[Any]:
    out: list[Any] = []
    for engine in engines:
        for what in ("histogram", "value_counts"):
            def warm_small(engine: str = engine, what: str = what) -> dict[str, Any]:
                pf = _protected(engine, small)
                return {"dp": _dp(pf, what), "native": _dp(pf, "mean")}

            def cold_small(engine: str = engine, what: str = what) -> dict[str, Any]:
                pf, other = _protected(engine, small), _protected(engine, small)
                return {"dp": _dp(pf, what), "native": _dp(other, "mean")}

            out.append((f"{engine} {what} / DP mean, {small:,} rows", warm_small, cold_small))
        for what in ("histogram", "value_counts"):
            def warm_large(engine: str = engine, what: str = what) -> dict[str, Any]:
                return {"dp": _dp(_protected(engine, large), what),
                        "native": _native(engine, _frame(engine, large), what)}

            out.append((f"{engine} {what} / native "
                        f"{'cut' if what == 'histogram' else 'value_counts'}, {large:,} rows",
                        warm_large, warm_large))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--engines", default="pandas,polars")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # (Polars' cut: renamed)
    run = {"header": header(args.rounds, args.cold_rounds)}
    run["cases"] = run_cases(cases(args.engines.split(","), args.small, args.large),
                             args.rounds, args.cold_rounds)
    run["header"]["load_after"] = round(os.getloadavg()[0], 2)
    print(record("counts", "Histograms and value counts: fixed cost and cost at scale",
                 "`python -m benchmarks.counts` (see its docstring). Paired rounds, medians "
                 "(lowest–highest per-round ratio). Targets (issue 34): at 1,000 rows ≤ 2× "
                 "the DP scalar mean; at 10 M rows ≤ 1.3× the native cut / value_counts.",
                 run, not args.no_record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a DP mean's time goes inside the engine: a stage-by-stage ablation.

cProfile cannot see inside Polars (all of it is one ``PyLazyFrame.collect`` call) and only
sees pandas op by op, so this module rebuilds the per-row pipeline of
``dpframe.engine._aggregation.aggregate`` (missing values filled with the declared public value,
fixed-point quantisation with clamping, rounding, sums) natively, one stage at a time, and
times each cumulative stage; then the aggregates the public-size mean's plan asks for
(``dpframe.query.statistics.Mean(...).plan(...)``) through ``dpframe.engine._aggregation.aggregate``
with each ``method=`` (``"numpy"`` where it applies, ``"narwhals"``), and the full ``frame.dp.mean``
call.
Differences between consecutive lines are the cost of a stage.

With a key count (``KEYS``) it does the same for the group-by mean: native floor, a suggested
numpy kernel (pandas), ``engine.aggregate`` with ``group_by`` and ``frame.dp.groupby().mean``.

The frame is protected with a public fill value for the mean column (``missing=``), so the
mean uses the public size, as in the other benchmarks.

``python -m benchmarks.ablation ENGINE ROWS DATA_PATH [REPEATS [KEYS]]`` prints one JSON line
(``@@ABLATION {...}``); :func:`benchmarks.run.main` runs it in a subprocess when a DP-mean
or group-by target is missed and puts the table in ``reports/RESULTS-harness.md``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.data import census_bounds
from benchmarks.scenarios import BUDGET_EPSILON, MEAN_COLUMN, QUERY_EPSILON, _load

ROUNDER = 1.5 * 2.0**52


def _fill(lo: float) -> dict[str, float]:
    """The declared missing-value policy of the benchmark: a public fill value."""
    return {MEAN_COLUMN: lo}


def _mean_aggregates(lo: float, hi: float, rows: int) -> list[Any]:
    """The exact aggregates the public-size mean's plan asks the engine for."""
    from dpframe.query.statistics import Mean, PlanContext

    ctx = PlanContext(True, rows, (lo, hi), count_cap=float(rows), column=MEAN_COLUMN,
                      all_bounds={MEAN_COLUMN: (lo, hi)})
    return list(Mean(MEAN_COLUMN).plan(ctx).aggregates)


def _fixed_point(lo: float, hi: float, rows: int) -> Any:
    """The fixed-point grid of the mean's sum (from its plan)."""
    (agg,) = [a for a in _mean_aggregates(lo, hi, rows) if a.fp is not None]
    return agg.fp


def polars_stages(frame: Any, lo: float, hi: float, fp: Any) -> list[tuple[str, Callable]]:
    """Cumulative stages of the engine's per-row pipeline under a fill value."""
    import polars as pl

    lf = frame.lazy()
    x = pl.col(MEAN_COLUMN)
    c, inv_q = fp.center, 1.0 / fp.q
    kf = ((x - c) * inv_q).clip(fp.k_lo, fp.k_hi)
    k = (kf + ROUNDER) - ROUNDER
    present = ~(x.is_null() | x.is_nan()).fill_null(True)
    filled = pl.when(present).then(x).otherwise(pl.lit(lo))
    kfill = (((filled - c) * inv_q).clip(fp.k_lo, fp.k_hi) + ROUNDER) - ROUNDER

    def q(*exprs: Any) -> Callable:
        named = [e.alias(f"a{i}") for i, e in enumerate(exprs)]
        return lambda: lf.select(*named).collect()

    return [
        ("plain: sum + count", q(x.sum(), x.count())),
        ("floor: clip + sum + count", q(x.clip(lo, hi).sum(), x.count())),
        ("Σ clip((x − c)·(1/q), k_lo, k_hi) + len", q(kf.sum(), pl.len())),
        ("+ round (+1.5·2⁵² − 1.5·2⁵²)", q(k.sum(), pl.len())),
        ("+ fill missing values (when(is_null | is_nan)) (= dpframe's path)",
         q(kfill.sum(), pl.len())),
    ]


def pandas_stages(frame: Any, lo: float, hi: float, fp: Any) -> list[tuple[str, Callable]]:
    s = frame[MEAN_COLUMN]
    return [
        ("plain: sum + count", lambda: (s.sum(), s.count())),
        ("floor: clip + sum + count", lambda: (s.clip(lo, hi).sum(), s.count())),
    ]


def groupby_stages(engine: str, frame: Any, lo: float, hi: float, fp: Any, keys: int,
                   rows: int) -> list[tuple[str, Callable]]:
    """Group-by mean: native floor, a suggested numpy kernel (pandas) and dpframe's calls."""
    import dpframe as dpf
    from benchmarks.data import key_column
    from dpframe import backends as dp_backends

    by = key_column(keys)
    declared = list(range(keys))
    out: list[tuple[str, Callable]] = []
    if engine == "pandas":
        import pandas as pd

        s, key = frame[MEAN_COLUMN], frame[by]
        index = pd.Index(declared)

        def bincount() -> tuple:
            codes = index.get_indexer(key.to_numpy())  # -1: undeclared key, never released
            a = s.to_numpy()
            k = np.clip((a - fp.center) * (1.0 / fp.q), fp.k_lo, fp.k_hi)
            k += ROUNDER
            k -= ROUNDER
            ok = codes >= 0
            if not ok.all():
                codes, k = codes[ok], k[ok]
            return (np.bincount(codes, weights=k, minlength=keys),
                    np.bincount(codes, minlength=keys), float(a.sum()))

        out += [
            ("native floor: clip + groupby sum + count",
             lambda: s.clip(lo, hi).groupby(key).agg(["sum", "count"])),
            ("suggested: Index.get_indexer(declared keys) + np.bincount(codes, weights=k) "
             "(exact: per-group partial sums < 2⁵³; no isin filter, no materialised frame)",
             bincount),
        ]
    else:
        import polars as pl

        x = pl.col(MEAN_COLUMN)
        out.append(("native floor: clip + group_by sum + len",
                    lambda: frame.group_by(by).agg(x.clip(lo, hi).sum(), pl.len())))
    pf = dpf.protect(frame, epsilon=BUDGET_EPSILON, bounds={MEAN_COLUMN: (lo, hi)},
                     missing=_fill(lo))
    grouped = pf.dp.groupby(by, keys=declared)
    # a group-by mean is planned with the private (per-group) formulation: count + centred sum
    from dpframe.engine._aggregation import Agg, FixedPoint

    gfp = FixedPoint.choose(lo, hi, 0.5 * (lo + hi), rows, False)
    aggs = [Agg("rows"), Agg("sum", MEAN_COLUMN, gfp)]
    out += [
        ("dpframe.engine._aggregation.aggregate (group_by)",
         lambda: dp_backends.aggregate(frame, aggs, missing=_fill(lo), group_by=by,
                                     keys=declared)),
        ("frame.dp.groupby(...).mean", lambda: grouped.mean(MEAN_COLUMN, epsilon=QUERY_EPSILON)),
    ]
    return out


def dpframe_stages(engine: str, frame: Any, lo: float, hi: float, fp: Any,
                   rows: int) -> list[tuple[str, Callable]]:
    import dpframe as dpf
    from dpframe import backends as dp_backends

    pf = dpf.protect(frame, epsilon=BUDGET_EPSILON, bounds={MEAN_COLUMN: (lo, hi)},
                     missing=_fill(lo))
    aggs = _mean_aggregates(lo, hi, rows)
    out: list[tuple[str, Callable]] = []
    try:  # in-memory plain numeric columns: the numpy kernel applies
        dp_backends.aggregate(frame, aggs, missing=_fill(lo), method="numpy")
    except dpf.ParameterError:
        pass
    else:
        out.append(("dpframe.engine._aggregation.aggregate(method='numpy')",
                    lambda: dp_backends.aggregate(frame, aggs, missing=_fill(lo),
                                                method="numpy")))
    out += [
        ("dpframe.engine._aggregation.aggregate(method='narwhals')",
         lambda: dp_backends.aggregate(frame, aggs, missing=_fill(lo), method="narwhals")),
        ("frame.dp.mean (plan + aggregate + mechanism + ledger)",
         lambda: pf.dp.mean(MEAN_COLUMN, epsilon=QUERY_EPSILON)),
    ]
    return out


def run(engine: str, rows: int, path: str, repeats: int = 5,
        keys: int | None = None) -> dict[str, Any]:
    from benchmarks.data import key_column

    columns = [MEAN_COLUMN] if keys is None else [key_column(keys), MEAN_COLUMN]
    frame = _load(engine, path, columns)
    lo, hi = census_bounds()[MEAN_COLUMN]
    fp = _fixed_point(lo, hi, rows)
    if keys is not None:
        stages = groupby_stages(engine, frame, lo, hi, fp, keys, rows)
    else:
        stages = pandas_stages(frame, lo, hi, fp) if engine == "pandas" else polars_stages(
            frame, lo, hi, fp)
        stages += dpframe_stages(engine, frame, lo, hi, fp, rows)
    out = []
    for label, op in stages:
        op()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
        out.append({"stage": label, "median_s": statistics.median(times)})
    return {"engine": engine, "rows": rows, "keys": keys, "stages": out,
            "fixed_point": {"center": fp.center, "q": fp.q, "k_lo": fp.k_lo, "k_hi": fp.k_hi}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    engine, rows, path = args[0], int(args[1]), args[2]
    repeats = int(args[3]) if len(args) > 3 else 5
    keys = int(args[4]) if len(args) > 4 else None
    print("@@ABLATION " + json.dumps(run(engine, rows, path, repeats, keys)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

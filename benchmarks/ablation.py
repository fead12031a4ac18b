"""Where a DP mean's time goes inside the engine: a stage-by-stage ablation.

cProfile cannot see inside Polars (all of it is one ``PyLazyFrame.collect`` call) and only
sees pandas op by op, so this module rebuilds the per-row pipeline of
``dpframe.engine.aggregate`` (clamp, finiteness mask, fixed-point quantisation, integer
cast, masked sums) natively, one stage at a time, and times each cumulative stage; then the
same aggregation through ``dpframe.engine.aggregate`` (narwhals) and the full
``frame.dp.mean`` call. Differences between consecutive lines are the cost of a stage.

``python -m benchmarks.ablation ENGINE ROWS DATA_PATH [REPEATS]`` prints one JSON line
(``@@ABLATION {...}``); :func:`benchmarks.run.main` runs it in a subprocess when a DP-mean
target is missed and puts the table in ``RESULTS.md``.
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

SUGGESTED = ("suggested: float Σ round(k) (exact: |partial sums| < 2⁵³), no Int64 cast, "
             "no k·mask (masked rows are already k = 0), rows = len")


def _fixed_point(lo: float, hi: float, rows: int) -> Any:
    from dpframe.engine import FixedPoint

    # the cap dpframe uses for a protected frame (4 × its rows) and the mean's centre
    return FixedPoint.choose(lo, hi, 0.5 * (lo + hi), 4 * rows, squares=False)


def polars_stages(frame: Any, lo: float, hi: float, fp: Any) -> list[tuple[str, Callable]]:
    import polars as pl

    lf = frame.lazy()
    x = pl.col(MEAN_COLUMN)
    c, inv_q = fp.center, 1.0 / fp.q
    good = x.is_finite().fill_null(False)
    xs = pl.when(good).then(x).otherwise(pl.lit(c))
    kf = ((xs - c) * inv_q).clip(fp.k_lo, fp.k_hi)
    good_i = good.cast(pl.Int64)
    k = kf.round(0).cast(pl.Int64)

    def q(*exprs: Any) -> Callable:
        named = [e.alias(f"a{i}") for i, e in enumerate(exprs)]
        return lambda: lf.select(*named).collect()

    return [
        ("plain: sum + count", q(x.sum(), x.count())),
        ("floor: clip + sum + count", q(x.clip(lo, hi).sum(), x.count())),
        ("+ finiteness mask (is_finite.fill_null, summed)", q(x.clip(lo, hi).sum(), good.sum())),
        ("+ when(mask).then(x).otherwise(c)", q(xs.clip(lo, hi).sum(), good.sum())),
        ("+ (x − c)·(1/q), clip to [k_lo, k_hi]", q(kf.sum(), good.sum())),
        ("+ round(0)", q(kf.round(0).sum(), good.sum())),
        ("+ cast Int64", q(k.sum(), good.sum())),
        ("+ k·mask, (1 − mask) sum (dpframe's expression set)",
         q((k * good_i).sum(), good_i.sum(), (1 - good_i).sum())),
        (SUGGESTED, q(kf.round(0).sum(), good.sum(), pl.len())),
        ("suggested, no mask pass: null_count (O(1) metadata) + is_nan().sum() to detect bad "
         "rows (raise/drop path only then), Σ round(clip((x − c)/q))",
         q(((x - c) * inv_q).clip(fp.k_lo, fp.k_hi).round(0).sum(), x.is_nan().sum(),
           x.null_count())),
    ]


def pandas_stages(frame: Any, lo: float, hi: float, fp: Any) -> list[tuple[str, Callable]]:
    s = frame[MEAN_COLUMN]
    c, inv_q = fp.center, 1.0 / fp.q

    def mask() -> Any:
        return np.isfinite(s)

    def masked() -> tuple[Any, Any]:
        good = mask()
        return good, s.where(good, c)

    def kf() -> tuple[Any, Any]:
        good, xs = masked()
        return good, ((xs - c) * inv_q).clip(fp.k_lo, fp.k_hi)

    def st_mask() -> tuple:
        return s.clip(lo, hi).sum(), mask().sum()

    def st_where() -> tuple:
        good, xs = masked()
        return xs.clip(lo, hi).sum(), good.sum()

    def st_kf() -> tuple:
        good, k = kf()
        return k.sum(), good.sum()

    def st_round() -> tuple:
        good, k = kf()
        return k.round(0).sum(), good.sum()

    def st_cast() -> tuple:
        good, k = kf()
        return k.round(0).astype("int64").sum(), good.sum()

    def st_numpy() -> tuple:
        a = s.to_numpy()  # zero-copy view of a float64 column
        good = np.isfinite(a)
        buf = np.where(good, a, c)
        np.subtract(buf, c, out=buf)
        np.multiply(buf, inv_q, out=buf)
        np.clip(buf, fp.k_lo, fp.k_hi, out=buf)
        np.rint(buf, out=buf)
        return float(buf.sum()), int(np.count_nonzero(good)), a.size

    def st_full() -> tuple:
        good, k = kf()
        k = k.round(0).astype("int64")
        good_i = good.astype("int64")
        return (k * good_i).sum(), good_i.sum(), (1 - good_i).sum()

    return [
        ("plain: sum + count", lambda: (s.sum(), s.count())),
        ("floor: clip + sum + count", lambda: (s.clip(lo, hi).sum(), s.count())),
        ("+ finiteness mask (np.isfinite, summed)", st_mask),
        ("+ where(mask, x, c)", st_where),
        ("+ (x − c)·(1/q), clip to [k_lo, k_hi]", st_kf),
        ("+ round(0)", st_round),
        ("+ astype int64", st_cast),
        ("+ k·mask, (1 − mask) sum (dpframe's expression set)", st_full),
        (SUGGESTED, lambda: (kf()[1].round(0).sum(), mask().sum(), len(s))),
        ("suggested, numpy in place on the zero-copy column (one temporary)", st_numpy),
    ]


def dpframe_stages(engine: str, frame: Any, lo: float, hi: float, fp: Any,
                   rows: int) -> list[tuple[str, Callable]]:
    import dpframe as dpf
    from dpframe import engine as dp_engine

    kw: dict[str, Any] = {}
    if engine == "pandas":
        pf = dpf.protect(frame, epsilon=BUDGET_EPSILON, bounds={MEAN_COLUMN: (lo, hi)})
    else:
        session = dpf.Session()
        pf = dpf.protect(frame, epsilon=BUDGET_EPSILON, bounds={MEAN_COLUMN: (lo, hi)},
                         session=session)
        kw["session"] = session

    def agg() -> Any:
        return dp_engine.aggregate(frame, column=MEAN_COLUMN, fixed_point=fp, squares=False,
                                   row_cap=4 * rows, bounds=(lo, hi))

    return [
        ("dpframe.engine.aggregate (same sums via narwhals)", agg),
        ("frame.dp.mean (aggregate + plan + mechanism + ledger)",
         lambda: pf.dp.mean(MEAN_COLUMN, epsilon=QUERY_EPSILON, **kw)),
    ]


def run(engine: str, rows: int, path: str, repeats: int = 5) -> dict[str, Any]:
    frame = _load(engine, path, [MEAN_COLUMN])
    lo, hi = census_bounds()[MEAN_COLUMN]
    fp = _fixed_point(lo, hi, rows)
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
    return {"engine": engine, "rows": rows, "stages": out,
            "fixed_point": {"center": fp.center, "q": fp.q, "k_lo": fp.k_lo, "k_hi": fp.k_hi}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    engine, rows, path = args[0], int(args[1]), args[2]
    repeats = int(args[3]) if len(args) > 3 else 5
    print("@@ABLATION " + json.dumps(run(engine, rows, path, repeats)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

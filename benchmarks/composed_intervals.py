"""Composed confidence intervals on the census-like table: width against the oracle, and coverage.

``python -m benchmarks.composed_intervals [--seeds 600] [--rows 6000] [--seed-base 10000]
[--out FILE.json]``

Four analyses of the census table (issue 33; write-up in
``benchmarks/reports/RESULTS-composed-intervals.md``), each released
``--seeds`` times at ε = 1 with ``ci=0.95`` on 6,000 rows of :func:`dpframe.datasets.census`
(seed 0):

* ``group mean``: ``groupby('region').mean('income')`` (private size per group: noisy centred
  sum over a noisy count);
* ``subset mean``: ``filter(age >= 30).mean('income')`` (a filtered frame: private size);
* ``group variance``: ``groupby('sex').variance('hours_worked')`` (count, sum, sum of squares);
* ``correlation``: ``corr(['age', 'income', 'hours_worked'])`` (public size: variances and
  covariances).

For every released cell: the coverage of the true value (the statistic of the data clamped to
the public bounds), the median interval width, and the **oracle width**: the narrowest interval
``[v − a, v + b]`` around the released value ``v`` whose coverage is 0.95 under the exact
distribution of ``v`` — the shortest window holding 95 % of the ``--seeds`` simulated errors
``v − truth`` (the same releases; an oracle because it knows that distribution, which depends
on the unknown truth). ``ratio`` = median width / oracle width.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import dpframe as dpf
from dpframe.datasets import CENSUS_BOUNDS, CENSUS_KEYS, census

LEVEL = 0.95
EPSILON = 1.0


def _clamped(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for col, (lo, hi) in CENSUS_BOUNDS.items():
        if col in out:
            out[col] = out[col].astype(float).clip(lo, hi)
    return out


def _protect(df: pd.DataFrame, fill: bool) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        missing: Any = "lower" if fill else "drop"
        return dpf.protect(df, epsilon=1e9, bounds=CENSUS_BOUNDS, keys=CENSUS_KEYS,
                           missing=missing)


Analysis = tuple[Callable[[Any, int], pd.DataFrame], dict[str, float], str]


def _analyses(df: pd.DataFrame) -> dict[str, Analysis]:
    import narwhals as nw

    c = _clamped(df)
    filled = _protect(df, fill=True)
    dropping = filled  # group sizes and a filtered frame's size are private all the same
    older = dropping.dp.filter(nw.col("age") >= 30)

    def by_mean(_: Any, seed: int) -> pd.DataFrame:
        return dropping.dp.groupby("region").mean("income", epsilon=EPSILON, ci=LEVEL,
                                                  random_state=seed)

    def sub_mean(_: Any, seed: int) -> pd.DataFrame:
        r = older.dp.mean("income", epsilon=EPSILON, ci=LEVEL, random_state=seed)
        return pd.DataFrame({"cell": ["age>=30"], "value": [r.value], "lower": [r.lower],
                             "upper": [r.upper]})

    def by_var(_: Any, seed: int) -> pd.DataFrame:
        return dropping.dp.groupby("sex").variance("hours_worked", epsilon=EPSILON, ci=LEVEL,
                                                   random_state=seed)

    cols = ["age", "income", "hours_worked"]

    def corr(_: Any, seed: int) -> pd.DataFrame:
        return filled.dp.release({"r": dpf.corr(cols)}, epsilon=EPSILON, ci=LEVEL,
                              random_state=seed)

    truth_mean = c.groupby("region", observed=True)["income"].mean().to_dict()
    truth_sub = {"age>=30": float(c.loc[c["age"] >= 30, "income"].mean())}
    truth_var = c.groupby("sex", observed=True)["hours_worked"].var(ddof=1).to_dict()
    cm = c[cols].corr().to_numpy()
    truth_corr = {f"{cols[j]},{cols[k]}": float(cm[j, k])
                  for j in range(3) for k in range(j + 1, 3)}
    return {
        "group mean": (by_mean, {str(k): float(v) for k, v in truth_mean.items()}, "region"),
        "subset mean": (sub_mean, truth_sub, "cell"),
        "group variance": (by_var, {str(k): float(v) for k, v in truth_var.items()}, "sex"),
        "correlation": (corr, truth_corr, "corr"),
    }


def _cells(frame: Any, key: str) -> dict[str, tuple[float, float, float]]:
    """``{cell: (value, lower, upper)}`` from one release."""
    if key == "corr":
        row = frame.iloc[0]
        return {name: (float(row[f"r[{name}]"]), float(row[f"r[{name}]_lower"]),
                       float(row[f"r[{name}]_upper"]))
                for name in ("age,income", "age,hours_worked", "income,hours_worked")}
    df = frame if isinstance(frame, pd.DataFrame) else frame.to_pandas()
    if key == "cell":
        return {str(r["cell"]): (float(r["value"]), float(r["lower"]), float(r["upper"]))
                for _, r in df.iterrows()}
    stat = next(c for c in df.columns if c.endswith("_lower"))[: -len("_lower")]
    return {str(r[key]): (float(r[stat]), float(r[f"{stat}_lower"]), float(r[f"{stat}_upper"]))
            for _, r in df.iterrows()}


def oracle_width(errors: np.ndarray, level: float = LEVEL) -> float:
    """Shortest window holding ``level`` of the simulated errors."""
    e = np.sort(np.asarray(errors, dtype=float))
    k = math.ceil(level * e.size)
    if k >= e.size:
        return float(e[-1] - e[0])
    return float(np.min(e[k - 1:] - e[: e.size - k + 1]))


def run(seeds: int, rows: int, only: list[str] | None = None,
        seed_base: int = 10_000) -> dict[str, Any]:
    df = census(rows, seed=0)
    results: dict[str, Any] = {}
    for name, (fn, truth, key) in _analyses(df).items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        rec: dict[str, list[tuple[float, float, float]]] = {c: [] for c in truth}
        for s in range(seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cells = _cells(fn(None, seed_base + s), key)
            for cell, triple in cells.items():
                rec[cell].append(triple)
        rows_out = []
        for cell, triples in rec.items():
            a = np.asarray(triples)
            v, lo, hi = a[:, 0], a[:, 1], a[:, 2]
            tr = truth[cell]
            w = hi - lo
            ow = oracle_width(v - tr)
            rows_out.append({"cell": cell, "truth": tr, "coverage": float(np.mean(
                (lo <= tr) & (tr <= hi))), "median_width": float(np.median(w)),
                "oracle_width": ow, "ratio": float(np.median(w) / ow) if ow > 0 else math.nan})
        results[name] = {"cells": rows_out, "seconds": time.perf_counter() - t0}
    return results


def _print(results: dict[str, Any]) -> None:
    for name, res in results.items():
        print(f"## {name} ({res['seconds']:.1f} s)")
        print(f"{'cell':>22} {'coverage':>9} {'width':>12} {'oracle':>12} {'ratio':>6}")
        for r in res["cells"]:
            print(f"{r['cell']:>22} {r['coverage']:9.3f} {r['median_width']:12.5g} "
                  f"{r['oracle_width']:12.5g} {r['ratio']:6.2f}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=600)
    p.add_argument("--rows", type=int, default=6000)
    p.add_argument("--out", default=None)
    p.add_argument("--only", action="append", help="an analysis name (repeatable)")
    p.add_argument("--seed-base", type=int, default=10_000,
                   help="first seed (a second run with other seeds shows the figures' spread)")
    a = p.parse_args(argv)
    res = run(a.seeds, a.rows, a.only, a.seed_base)
    _print(res)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

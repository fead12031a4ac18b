"""Median relative error of the default mechanism against ``mechanism="bounded"`` on small data
(issue 23): counts by group, a histogram and means on 1,000 census rows at ε = 1.

Run: ``python -m benchmarks.mechanism_defaults [--rows 1000] [--runs 200]``. Each run protects
the table afresh and releases every statistic once per mechanism with its own seed; the
relative error of one release is ``|released − true| / true`` per cell, and the table reports
the median over runs and cells. Reads only the synthetic census of ``dpframe.datasets``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import dpframe as dpf
from dpframe.datasets import CENSUS_BOUNDS, CENSUS_KEYS, census

EDGES = [16, 30, 45, 65, 90]


def _truths(df):
    age = df["age"].clip(16, 90)
    return {
        "count by region": df["region"].value_counts().reindex(CENSUS_KEYS["region"]).to_numpy(),
        "count by education": df["education"].value_counts().reindex(
            CENSUS_KEYS["education"]).to_numpy(),
        "histogram of age": np.histogram(age, bins=EDGES)[0],
        "mean age (public size)": np.array([age.mean()]),
        "mean income by sex": df.groupby("sex", observed=False)["income"].apply(
            lambda s: s.clip(0, 250_000).mean()).reindex(CENSUS_KEYS["sex"]).to_numpy(),
    }


def _released(pf, mechanism: str, seed: int):
    kw = {"epsilon": 1.0, "mechanism": mechanism, "random_state": seed}
    region = pf.dp.groupby("region").count(**kw)
    education = pf.dp.groupby("education").count(**kw)
    hist = pf.dp.histogram("age", edges=EDGES, **kw)
    return {
        "count by region": np.asarray(region["count"], dtype=float),
        "count by education": np.asarray(education["count"], dtype=float),
        "histogram of age": np.asarray(hist["count"], dtype=float),
        "mean age (public size)": np.array([pf.dp.mean("age", **kw)]),
        "mean income by sex": np.asarray(pf.dp.groupby("sex").mean("income", **kw)["mean"],
                                         dtype=float),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    df = census(args.rows, seed=1)
    truth = _truths(df)
    errors: dict[tuple[str, str], list[float]] = {}
    for run in range(args.runs):
        pf = dpf.protect(df.copy(), epsilon=1e9, bounds=CENSUS_BOUNDS, keys=CENSUS_KEYS,
                         missing="drop")
        for mech in ("bounded", "auto"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = _released(pf, mech, seed=2 * run + (mech == "auto"))
            for name, values in out.items():
                rel = np.abs(values - truth[name]) / np.abs(truth[name])
                errors.setdefault((name, mech), []).extend(rel.tolist())
    print(f"median relative error, {args.rows} rows, ε = 1 per statistic, {args.runs} runs")
    print(f"{'statistic':<26}{'bounded':>10}{'auto':>10}")
    for name in truth:
        b, a = (float(np.median(errors[(name, m)])) for m in ("bounded", "auto"))
        print(f"{name:<26}{b:>10.2%}{a:>10.2%}")


if __name__ == "__main__":
    main()

"""Replace-one against add/remove neighbours: what each costs in error at the same ε.

The numbers in ``docs/privacy.md`` ("Neighbours: replace or add/remove") and the README come
from this script. On a synthetic census of ``--rows`` people (6,000 by default: the size of
the survey of issue 33), each statistic is released ``--seeds`` times (seeded: a simulation,
not a release) under ``dpf.protect(..., neighbours="replace")`` and under
``neighbours="add_remove", max_rows=10_000``, at the same ε, and compared with its exact value.
Reported per statistic and definition: the Laplace scale of each measurement the log records
(a mean of a private size has two: the noisy count's and the noisy sum's, joined by "/"; 0 is
the public n, released exactly) and the mean absolute error over the seeds and cells.

Run: ``python examples/neighbours_tradeoff.py [--rows 6000] [--seeds 200] [--epsilon 1.0]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import dpframe as dpf
from dpframe.datasets import census

BOUNDS = {"age": (16.0, 90.0), "income": (0.0, 250_000.0)}
REGIONS = ["Midwest", "Northeast", "South", "West"]
MAX_ROWS = 10_000


def _protect(df: pd.DataFrame, neighbours: str, epsilon: float) -> Any:
    extra: dict[str, Any] = {"max_rows": MAX_ROWS} if neighbours == "add_remove" else {}
    return dpf.protect(df, epsilon=epsilon * 10_000, bounds=BOUNDS,
                       keys={"region": REGIONS}, missing="lower",
                       neighbours=neighbours,  # type: ignore[arg-type]
                       **extra)


#: statistic -> (release on a protected frame at ε with a seed, exact value on the data)
STATISTICS: dict[str, tuple[Callable[[Any, float, int], np.ndarray],
                            Callable[[pd.DataFrame], np.ndarray]]] = {
    "count (all rows)": (
        lambda pf, e, s: np.array([pf.dp.count(epsilon=e, random_state=s)]),
        lambda df: np.array([len(df)])),
    "count by region (4 keys)": (
        lambda pf, e, s: pf.dp.groupby("region").count(
            epsilon=e, random_state=s)["count"].to_numpy(dtype=float),
        lambda df: df.groupby("region", observed=False).size().reindex(REGIONS).to_numpy(
            dtype=float)),
    "histogram of age (8 bins)": (
        lambda pf, e, s: pf.dp.histogram(
            "age", edges=list(np.linspace(16, 90, 9)), epsilon=e,
            random_state=s)["count"].to_numpy(dtype=float),
        lambda df: np.histogram(df["age"].clip(16, 90), bins=np.linspace(16, 90, 9))[0]
        .astype(float)),
    "mean of age": (
        lambda pf, e, s: np.array([pf.dp.mean("age", epsilon=e, random_state=s)]),
        lambda df: np.array([df["age"].clip(16, 90).mean()])),
    "mean of income by region": (
        lambda pf, e, s: pf.dp.groupby("region").mean(
            "income", epsilon=e, random_state=s)["mean"].to_numpy(dtype=float),
        lambda df: df.assign(income=df["income"].clip(0, 250_000)).groupby(
            "region", observed=False)["income"].mean().reindex(REGIONS).to_numpy(dtype=float)),
}


def measure(rows: int, seeds: int, epsilon: float) -> pd.DataFrame:
    df = census(rows)
    out = []
    for name, (release, exact) in STATISTICS.items():
        truth = exact(df)
        for neighbours in ("replace", "add_remove"):
            pf = _protect(df.copy(), neighbours, epsilon)
            errors = [np.abs(release(pf, epsilon, seed) - truth) for seed in range(seeds)]
            first = pf.dp.log.query("release_id == 1")
            scales = "/".join(f"{v:.4g}" for v in first["scale"]) or "0"
            out.append({"statistic": name, "neighbours": neighbours, "scale": scales,
                        "mean_abs_error": float(np.mean(np.concatenate(errors)))})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=6_000)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args(argv)
    table = measure(args.rows, args.seeds, args.epsilon)
    wide = table.pivot(index="statistic", columns="neighbours",
                       values=["scale", "mean_abs_error"])
    print(f"n = {args.rows:,} rows, ε = {args.epsilon:g} per statistic, {args.seeds} seeds "
          f"(add_remove with max_rows = {MAX_ROWS:,})")
    print(wide.loc[list(STATISTICS)].to_string(float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()

"""Each statistic family as a dpframe call and as the engine's own native query on the same
data (the reference of its paired figure).

Native references (Polars eager unless the engine says pandas): ``count`` — ``pl.len()``;
``mean`` — clamp to the public bounds, sum and count (the physical floor of a DP mean);
``variance`` — the clamped variance; ``quantile`` — the exact median; ``histogram`` —
``cut`` on the inner edges and ``value_counts``; ``value_counts`` — ``value_counts`` of the
key; ``groupby`` — clamp, sum and count per key, joined to the declared key frame (empty
keys included); ``release`` — the native select of a count and a mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.figures_data import EDGES, EPS, LOWER, UPPER

FAMILIES = ("count", "mean", "variance", "quantile", "histogram", "value_counts", "groupby")


def dp_call(pf: Any, family: str) -> Callable[[], Any]:
    """The dpframe query of ``family`` on the protected frame ``pf`` (ε = 1)."""
    ns = pf.dp
    calls: dict[str, Callable[[], Any]] = {
        "count": lambda: ns.count(epsilon=EPS),
        "mean": lambda: ns.mean("x", epsilon=EPS),
        "variance": lambda: ns.variance("x", epsilon=EPS),
        "quantile": lambda: ns.quantile("x", 0.5, epsilon=EPS),
        "histogram": lambda: ns.histogram("x", edges=EDGES, epsilon=EPS),
        "value_counts": lambda: ns.value_counts("k", epsilon=EPS),
        "groupby": lambda: ns.groupby("k").mean("x", epsilon=EPS),
        "groupby_count": lambda: ns.groupby("k").count(epsilon=EPS),
        "groupby_variance": lambda: ns.groupby("k").variance("x", epsilon=EPS),
    }
    return calls[family]


def _clip() -> Any:
    import polars as pl

    return pl.col("x").clip(LOWER, UPPER)


def polars_call(df: Any, family: str, n_keys: int = 10) -> Callable[[], Any]:
    """The native Polars query of ``family`` on the eager frame ``df``."""
    import polars as pl

    if family in ("groupby", "groupby_count", "groupby_variance", "value_counts"):
        key_frame = pl.DataFrame({"k": list(range(n_keys))}, schema={"k": df.schema["k"]})
        aggs = {"groupby": [_clip().sum(), pl.len()], "groupby_count": [pl.len()],
                "groupby_variance": [_clip().var().alias("v"), _clip().sum().alias("s"), pl.len()],
                "value_counts": [pl.len()]}[family]
        return lambda: key_frame.join(df.group_by("k").agg(aggs), on="k", how="left")
    if family == "histogram":
        return lambda: df.select(pl.col("x").cut(EDGES[1:-1]).value_counts())
    exprs = {"count": [pl.len()], "mean": [_clip().sum(), pl.len()],
             "variance": [_clip().var()], "quantile": [pl.col("x").quantile(0.5)]}[family]
    return lambda: df.select(exprs)


def pandas_call(df: Any, family: str, n_keys: int = 10) -> Callable[[], Any]:
    """The native pandas query of ``family`` (mean and group-by only)."""
    import pandas as pd

    s, g = df["x"], df["k"]
    if family == "groupby":
        index = pd.Index(range(n_keys))
        return lambda: s.clip(LOWER, UPPER).groupby(g).agg(["sum", "count"]).reindex(index)
    return lambda: (s.clip(LOWER, UPPER).sum(), s.count())

"""The engine figures of ``python -m benchmarks``: a DP mean and a 1,000-key group-by mean on
DuckDB (a relation over the Parquet file) and Dask (``read_parquet``, local scheduler) at
10 M rows, each against the same engine's own clamp + sum + count (per key, joined to the
key list) over the same file, read inside every query on both sides. Spark is not part of
the regenerated set (its JVM start and local[2] runs do not fit the run's time budget; its
figures stay in ``benchmarks/reports/RESULTS-harness.md``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import figures_data as data
from benchmarks.figures_core import Sizes, warm
from benchmarks.figures_native import dp_call

N_KEYS = 1000
_CLIP = f"least(greatest(coalesce(x, {data.LOWER}), {data.LOWER}), {data.UPPER})"


def _duckdb(path: str, family: str) -> tuple[Any, Callable[[], Any]]:
    import duckdb

    con = duckdb.connect()
    rel = con.read_parquet(path)
    if family == "mean":
        sql = f"select sum({_CLIP}), count(*) from read_parquet('{path}')"
    else:
        sql = (f"select keys.k, s, c from range({N_KEYS}) keys(k) left join (select k, "
               f"sum({_CLIP}) s, count(*) c from read_parquet('{path}') group by k) g "
               "on keys.k = g.k")
    return rel, lambda: con.sql(sql).fetchall()


def _dask(path: str, family: str) -> tuple[Any, Callable[[], Any]]:
    import dask
    import dask.dataframe as dd
    import pandas as pd

    ddf = dd.read_parquet(path)
    x = ddf["x"].fillna(data.LOWER).clip(data.LOWER, data.UPPER)
    if family == "mean":
        return ddf, lambda: dask.compute(x.sum(), x.count())
    index = pd.Index(range(N_KEYS))

    def native() -> Any:
        agg = x.groupby(ddf["k"]).agg(["sum", "count"]).compute()
        return agg.reindex(index)

    return ddf, native


_FRAMES: dict[str, Any] = {}


def _engine(engine: str, family: str) -> Callable[[Sizes], dict[str, Any]]:
    def measure(s: Sizes) -> dict[str, Any]:
        path = str(data.parquet(s.large, N_KEYS, engine))
        frame, native = (_duckdb if engine == "duckdb" else _dask)(path, family)
        if _FRAMES.get(engine + "path") != path:  # one protected frame per file and process
            _FRAMES[engine + "path"] = path
            _FRAMES[engine] = data.protect(frame, N_KEYS)
        out = warm({"dp": dp_call(_FRAMES[engine], family), "native": native}, s.large_rounds)
        return out | {"rows": s.large, "keys": N_KEYS if family == "groupby" else None}
    return measure


def figures() -> dict[str, tuple[str, Callable[[Sizes], dict[str, Any]]]]:
    return {
        f"engine.{e}.{f}.10M": (f"{name} {what}, 10 M rows (Parquet) / the engine's own "
                                f"{ref}", _engine(e, f))
        for e, name in (("duckdb", "DuckDB"), ("dask", "Dask"))
        for f, what, ref in (("mean", "DP mean", "clamp + sum + count"),
                             ("groupby", "group-by mean, 1,000 keys",
                              "clamped group-by joined to the keys"))}

"""The headline figures of ``python -m benchmarks``: the DP mean and the 1,000-key group-by at
10 M rows against the engine's native work, the fixed cost of a query at 1,000 rows, a
LazyFrame's scalar mean against its own ``mean().collect()`` (10³ and 10⁷ rows, cold and
warm), ``scan_parquet`` at 10 M rows (the content check of the file included, and alone), a
release of 10 queries, and ``protect()`` against a plain copy of the frame.

Each entry of :func:`figures` is ``id → (description, measure)``; ``measure(sizes)`` returns
the paired result (:func:`benchmarks.figures_core.paired`) plus ``rows`` (and ``keys``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import figures_data as data
from benchmarks.figures_core import Sizes, Variants, cold, warm
from benchmarks.figures_native import dp_call, pandas_call, polars_call

Measure = Callable[[Sizes], dict[str, Any]]


def _engine_mean(engine: str, rows: int, n_keys: int, family: str, rounds: int
                 ) -> dict[str, Any]:
    pf = data.protected(engine, rows, n_keys)
    df = data.frame(engine, rows, n_keys)
    native = pandas_call(df, family, n_keys) if engine == "pandas" else \
        polars_call(df, family, n_keys)
    out = warm({"dp": dp_call(pf, family), "native": native}, rounds)
    return out | {"rows": rows, "keys": n_keys if family == "groupby" else None}


def _mean(engine: str, large: bool) -> Measure:
    def measure(s: Sizes) -> dict[str, Any]:
        rows = s.large if large else s.small
        return _engine_mean(engine, rows, 10, "mean", s.rounds_for(rows))
    return measure


def _groupby(engine: str) -> Measure:
    def measure(s: Sizes) -> dict[str, Any]:
        return _engine_mean(engine, s.large, 1000, "groupby", s.large_rounds)
    return measure


def _lazy_native(lf: Any) -> Callable[[], Any]:
    import polars as pl

    return lambda: lf.select(pl.col("x").mean()).collect()


def _lazy(large: bool, is_cold: bool) -> Measure:
    """A protected in-memory LazyFrame's ``dp.mean`` against a plain LazyFrame of the same
    data running its own ``select(pl.col("x").mean()).collect()``. At 10 M rows both sides
    run on several threads (Polars' pool; dpframe's kernel splits a long column between
    threads), so the ratio is of wall time even below
    :data:`~benchmarks.figures_core.CPU_METRIC_BELOW_MS` (process CPU time would add the
    threads' times up); the CPU-time ratio is kept beside it (``cpu``)."""

    def measure(s: Sizes) -> dict[str, Any]:
        rows = s.large if large else s.small

        def make() -> Variants:
            pf = data.protected("polars-lazy", rows)
            return {"dp": dp_call(pf, "mean"),
                    "native": _lazy_native(data.frame("polars-lazy", rows))}

        out = cold(make, s.cold_rounds) if is_cold else warm(make(), s.rounds_for(rows))
        if large:
            out = out | out["wall"] | {"metric": "wall"}
        return out | {"rows": rows}
    return measure


def _scan_native(path: str, family: str, n_keys: int) -> Callable[[], Any]:
    import polars as pl

    clip = pl.col("x").fill_null(data.LOWER).clip(data.LOWER, data.UPPER)
    if family == "mean":
        return lambda: pl.scan_parquet(path).select(clip.sum(), pl.len()).collect(
            engine="streaming")
    key_frame = pl.DataFrame({"k": list(range(n_keys))}, schema={"k": pl.Int64})
    return lambda: key_frame.join(
        pl.scan_parquet(path).group_by("k").agg(clip.sum(), pl.len()).collect(
            engine="streaming"), on="k", how="left")


_SCAN: dict[str, Any] = {}


def _scan_frame(s: Sizes) -> tuple[Any, str]:
    """The protected ``scan_parquet`` of the 10 M-row file (one per process: a second
    protect of the same file is refused)."""
    import polars as pl

    path = str(data.parquet(s.large, 1000))
    if _SCAN.get("path") != path:
        _SCAN.update(path=path, pf=data.protect(pl.scan_parquet(path), 1000))
    return _SCAN["pf"], path


def _scan(family: str, check: str = "overlap") -> Measure:
    """``scan_parquet`` mean or 1,000-key group-by mean against the native lazy query on the
    same file (streaming engine on both sides). ``check``: ``"overlap"`` as releases run it
    (the digests in a thread beside the read, joined before the noise; the release names the
    columns it reads, so the footer's rest and those columns' chunks are hashed);
    ``"whole"`` the same with every byte of the file hashed (as before releases named their
    columns); ``"serial"`` the digests completed before
    the read (the order before the overlap); ``"off"`` the content check ablated — patched
    in this process only."""

    def measure(s: Sizes) -> dict[str, Any]:
        from dpframe.provenance._datasets import Dataset

        pf, path = _scan_frame(s)
        variants = {"dp": dp_call(pf, family), "native": _scan_native(path, family, 1000)}
        original = Dataset.begin_check

        def serial(self: Dataset, columns: Any = None, plan: Any = None) -> Callable[[], None]:
            finish = original(self, columns, plan)
            finish()
            return lambda: None

        def whole(self: Dataset, columns: Any = None, plan: Any = None) -> Callable[[], None]:
            return original(self)

        patched = {"overlap": original, "serial": serial, "whole": whole,
                   "off": lambda self, columns=None, plan=None: (lambda: None)}[check]
        Dataset.begin_check = patched  # type: ignore[method-assign]
        try:
            out = warm(variants, s.large_rounds)
        finally:
            Dataset.begin_check = original  # type: ignore[method-assign]
        return out | {"rows": s.large, "keys": 1000 if family == "groupby" else None}
    return measure


def _scan_digest(columns: tuple[str, ...] | None) -> Measure:
    """The content check alone, as a release of the 10 M-row file runs it (list, metadata,
    then the digests: the footer's rest and the chunks of ``columns``, every column's if
    None), against the native lazy mean; ``hashed_mb``: the bytes it hashes."""

    def measure(s: Sizes) -> dict[str, Any]:
        import os

        from dpframe.provenance import resolve

        pf, path = _scan_frame(s)
        binding = resolve(pf).dataset.source
        bound = binding.digests[path] if binding is not None else None
        layout = bound.layout if bound is not None else None
        assert binding is not None and layout is not None  # a bare scan of one Parquet file
        parts = [*layout.rest, *(r for c, rs in layout.columns.items()
                                 if columns is None or c in columns for r in rs)]
        out = warm({"dp": lambda: binding.begin_check(columns).changed(),
                    "native": _scan_native(path, "mean", 1000)}, s.large_rounds)
        mb = os.path.getsize(path) / 1e6
        hashed = sum(e - b for b, e in parts) / 1e6
        return out | {"rows": s.large, "file_mb": round(mb, 1), "hashed_mb": round(hashed, 1),
                      "digest_ms_per_mb": round(out["dp_ms"] / hashed, 3)}
    return measure


def _release10(s: Sizes) -> dict[str, Any]:
    from benchmarks import batches

    out = warm({"dp": batches._batch(batches._protected("polars", s.large)),
                "native": batches._native("polars", batches._frame("polars", s.large))},
               s.large_rounds)
    return out | {"rows": s.large}


def _numpy_floor(large: bool) -> Measure:
    """The pandas DP mean against numpy's ``clip`` + ``sum`` + count on the same array (the
    physical floor)."""

    def measure(s: Sizes) -> dict[str, Any]:
        import numpy as np

        rows = s.large if large else s.large // 10
        pf = data.protected("pandas", rows)
        x = data.frame("pandas", rows)["x"].to_numpy()
        out = warm({"dp": dp_call(pf, "mean"),
                    "native": lambda: (np.clip(x, data.LOWER, data.UPPER).sum(), x.size)},
                   s.rounds_for(rows))
        return out | {"rows": rows}
    return measure


def _many_keys(engine: str) -> Measure:
    """100,000 declared keys at 1 M rows (:mod:`benchmarks.keys`' frames and native query:
    the engine's group-by joined to the key frame)."""

    def measure(s: Sizes) -> dict[str, Any]:
        from benchmarks import keys

        rows, n_keys = s.key_rows, min(100_000, s.key_rows // 10)
        k, x = keys._data(rows, n_keys)
        pf = keys._protected(engine, k, x, keys._keys(engine, n_keys))
        grouped = pf.dp.groupby("k")
        native = keys._native(engine, keys._frame(engine, k, x), keys._keys(engine, n_keys))
        out = warm({"dp": lambda: grouped.mean("x", epsilon=data.EPS), "native": native},
                   s.large_rounds)
        return out | {"rows": rows, "keys": n_keys}
    return measure


def _plain_copy(engine: str, frame: Any) -> Callable[[], Any]:
    """pandas: ``copy(deep=True)``; Polars: a new frame over a numpy copy of each column
    (Polars' ``clone`` shares the buffers, so it is no copy)."""
    import polars as pl

    if engine == "pandas":
        return lambda: frame.copy(deep=True)
    return lambda: pl.DataFrame({c: frame.get_column(c).to_numpy().copy()
                                 for c in frame.columns})


def _protect(engine: str) -> Measure:
    """``dpf.protect`` of a new frame (its own buffers, built untimed each round) against a
    plain copy of the same frame."""

    def measure(s: Sizes) -> dict[str, Any]:
        def make() -> Variants:
            fresh, other = data.frame(engine, s.large), data.frame(engine, s.large)
            return {"dp": lambda: data.protect(fresh), "native": _plain_copy(engine, other)}

        return cold(make, s.cold_rounds) | {"rows": s.large}
    return measure


def figures() -> dict[str, tuple[str, Measure]]:
    return {
        "mean.pandas.10M": ("DP mean, pandas, 10 M rows / clip + sum + count",
                            _mean("pandas", True)),
        "mean.polars.10M": ("DP mean, Polars, 10 M rows / clip + sum + count",
                            _mean("polars", True)),
        "fixed.pandas.1k": ("DP mean, pandas, 1,000 rows (fixed cost) / clip + sum + count",
                            _mean("pandas", False)),
        "fixed.polars.1k": ("DP mean, Polars, 1,000 rows (fixed cost) / clip + sum + count",
                            _mean("polars", False)),
        "mean.pandas-numpy.10M": ("DP mean, pandas, 10 M rows / numpy clip + sum + count on "
                                  "the same array", _numpy_floor(True)),
        "mean.pandas-numpy.1M": ("DP mean, pandas, 1 M rows / numpy clip + sum + count on "
                                 "the same array", _numpy_floor(False)),
        "lazy.mean.1k.warm": ("LazyFrame DP mean / its own mean().collect(), 1,000 rows, warm",
                              _lazy(False, False)),
        "lazy.mean.1k.cold": ("LazyFrame DP mean / its own mean().collect(), 1,000 rows, cold",
                              _lazy(False, True)),
        "lazy.mean.10M.warm": ("LazyFrame DP mean / its own mean().collect(), 10 M rows, "
                               "warm, wall time", _lazy(True, False)),
        "lazy.mean.10M.cold": ("LazyFrame DP mean / its own mean().collect(), 10 M rows, "
                               "cold, wall time", _lazy(True, True)),
        "groupby1000.pandas.10M": ("group-by mean, 1,000 keys, pandas, 10 M rows / native "
                                   "group-by reindexed to the keys", _groupby("pandas")),
        "groupby1000.polars.10M": ("group-by mean, 1,000 keys, Polars, 10 M rows / native "
                                   "group-by joined to the key frame", _groupby("polars")),
        "keys100k.pandas.1M": ("group-by mean, 100,000 keys, pandas int64, 1 M rows / native "
                               "group-by reindexed to the keys", _many_keys("pandas")),
        "keys100k.polars-int.1M": ("group-by mean, 100,000 keys, Polars Int64, 1 M rows / "
                                   "native group-by joined to the keys",
                                   _many_keys("polars-int")),
        "keys100k.polars-str.1M": ("group-by mean, 100,000 keys, Polars String, 1 M rows / "
                                   "native group-by joined to the keys",
                                   _many_keys("polars-str")),
        "scan.mean.10M": ("scan_parquet DP mean (content check included), 10 M rows / native "
                          "lazy clip + sum + count", _scan("mean")),
        "scan.groupby.10M": ("scan_parquet group-by mean, 1,000 keys (check included), 10 M "
                             "rows / native lazy group-by joined to the keys",
                             _scan("groupby")),
        "scan.mean.10M.nocheck": ("scan_parquet DP mean with the content check ablated / "
                                  "native lazy query", _scan("mean", check="off")),
        "scan.mean.10M.serial": ("scan_parquet DP mean with the content check completed "
                                 "before the read (not beside it) / native lazy query",
                                 _scan("mean", check="serial")),
        "scan.mean.10M.whole": ("scan_parquet DP mean, the check hashing every byte of the "
                                "file (as before releases named their columns) / native lazy "
                                "query", _scan("mean", "whole")),
        "scan.digest.10M": ("the content check alone of every byte (the digest of the "
                            "footer's rest and every column chunk: a group-by over x and k) / "
                            "native lazy mean", _scan_digest(None)),
        "scan.digest.10M.x": ("the content check alone for a release reading x (rest and x's "
                              "chunks) / native lazy mean", _scan_digest(("x",))),
        "release10.polars.10M": ("Polars release() of 10 queries, 10 M rows / one native "
                                 "select", _release10),
        "protect.pandas.10M": ("dpf.protect(), pandas, 10 M rows / df.copy(deep=True)",
                               _protect("pandas")),
        "protect.polars.10M": ("dpf.protect(), Polars, 10 M rows / numpy copy of each column",
                               _protect("polars")),
    }

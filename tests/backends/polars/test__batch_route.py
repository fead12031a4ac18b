"""A LazyFrame that is the bare scan of files takes the numpy kernel batch by batch
(:mod:`dpframe.backends.polars._batch_route`): chosen from the plan's structure and the
schema only, the same exact aggregates as Polars' expressions bit for bit (values chosen to
break an engine, several row groups, a batch with a missing key, an empty file), and within
the sensitivity on neighbouring data sets."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpframe import backends
from dpframe.backends._base import registered
from dpframe.backends.polars import _adapter, _batch_route
from dpframe.engine._aggregation import Agg, FixedPoint, frame_columns

LO, HI = -3.0, 7.5


def _frame(n: int = 2_000) -> pl.DataFrame:
    rng = np.random.default_rng(8)
    x = rng.uniform(LO - 4, HI + 4, n)
    x[[5, 6, 7, 8, 9]] = [np.nan, np.inf, -np.inf, 1.7e308, -1.7e308]
    values = pl.Series("x", x).scatter([11, n * 3 // 4], None)  # nulls beside NaN
    keys = pl.Series("k", rng.integers(0, 6, n)).scatter([n * 17 // 20], None)  # one batch's
    return pl.DataFrame({"x": values, "k": keys})


def _aggs(n: int) -> list[Agg]:
    fp = FixedPoint.choose(LO, HI, 2.25, n, True)
    return [Agg("rows"), Agg("rows", "x"), Agg("sum", "x", fp), Agg("sum_sq", "x", fp)]


def _parquet(tmp_path, df: pl.DataFrame, name: str = "d") -> pl.LazyFrame:
    path = tmp_path / f"{name}.parquet"
    df.write_parquet(path, row_group_size=300)  # several row groups: several batches
    return pl.scan_parquet(path)


def _expressions(lazy, aggs, policy, group_by, keys, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(_adapter, "bare_file_scan", lambda lazy: False)
        return backends.aggregate(lazy, aggs, missing={"x": policy}, group_by=group_by,
                                  keys=keys)


@pytest.mark.parametrize("policy", ["drop", 0.5])
def test_batches_equal_the_expressions_bit_for_bit(policy, tmp_path, monkeypatch):
    df = _frame()
    aggs = _aggs(df.height)
    eager = registered("polars")
    by_expressions = []  # (the batch with a missing key: its rows by the expressions)
    aggregate = type(eager).aggregate
    monkeypatch.setattr(type(eager), "aggregate", lambda self, frame, *a, **k: (
        by_expressions.append(frame.height), aggregate(self, frame, *a, **k))[1])
    for name, data in (("rows", df), ("empty", df.clear())):
        lazy = _parquet(tmp_path, data, name)
        assert _batch_route.bare_file_scan(lazy)
        for group_by, keys in ((None, None), ("k", [0, 1, 2, 3, 99])):
            with np.errstate(over="ignore", invalid="ignore"):  # (as inside aggregate)
                got = _batch_route.batch_sums(lazy, aggs, frame_columns(lazy),
                                              {"x": policy}, group_by, keys, eager)
            want = _expressions(lazy, aggs, policy, group_by, keys, monkeypatch)
            assert got is not None, (name, group_by)
            for a in aggs:
                assert np.array_equal(got[a], want[a]), (name, group_by, a)
            # the release's own path takes the route and gives the same sums
            through = backends.aggregate(lazy, aggs, missing={"x": policy},
                                         group_by=group_by, keys=keys)
            assert all(np.array_equal(through[a], want[a]) for a in aggs)
    assert by_expressions == [300, 300]  # (batch_sums, then the release's path)


def test_route_is_read_from_the_plan_structure_and_the_schema(tmp_path):
    df = _frame(50)
    lazy = _parquet(tmp_path, df)
    assert _batch_route.bare_file_scan(lazy)
    assert not _batch_route.bare_file_scan(lazy.filter(pl.col("k") >= 1))
    assert not _batch_route.bare_file_scan(lazy.with_columns(y=pl.col("x") + 1))
    assert not _batch_route.bare_file_scan(df.lazy())  # in memory: the kernel route's
    eager, aggs = registered("polars"), _aggs(df.height)
    columns = frame_columns(lazy)
    # a count reads no column (Polars answers from the metadata); several group columns,
    # and a dtype the kernel does not read, keep the expressions
    assert _batch_route.batch_sums(lazy, aggs[:1], columns, {}, None, None, eager) is None
    assert _batch_route.batch_sums(lazy, aggs, columns, {"x": "drop"}, ("k", "x"),
                                   [(0, 1.0)], eager) is None
    text = _parquet(tmp_path, df.with_columns(pl.col("k").cast(pl.String).alias("x")), "t")
    assert _batch_route.batch_sums(text, aggs, frame_columns(text), {"x": "drop"}, None,
                                   None, eager) is None


def test_neighbouring_files_differ_within_the_sensitivity(tmp_path):
    """Removing a row (the finite extreme, then the NaN one) changes each exact aggregate by
    at most one row's share."""
    df = _frame(900)
    aggs = _aggs(df.height)
    fp = aggs[2].fp
    assert fp is not None
    bound = max(abs(fp.k_lo), abs(fp.k_hi))
    base = backends.aggregate(_parquet(tmp_path, df), aggs, missing={"x": "drop"})
    for row in (8, 5):
        near = backends.aggregate(_parquet(tmp_path, pl.concat([df[:row], df[row + 1:]]),
                                           f"n{row}"), aggs, missing={"x": "drop"})
        for a, limit in zip(aggs, [1, 1, bound, bound**2], strict=True):
            assert np.isfinite(near[a]).all()
            assert abs(float(base[a][0] - near[a][0])) <= limit, (row, a)

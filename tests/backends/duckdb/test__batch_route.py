"""A DuckDB relation's ungrouped sums by the numpy kernel on its Arrow batches
(:mod:`dpframe.backends.duckdb._batch_route`): the SQL's exact aggregates bit for bit (values
chosen to break an engine, several batches, an empty file, each plain type), the SQL kept for
other types and for a group-by, and neighbours within the sensitivity."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

from dpframe import backends
from dpframe.backends._base import registered
from dpframe.backends.duckdb import _batch_route
from dpframe.engine._aggregation import Agg, FixedPoint

LO, HI = -3.0, 7.5


def _frame(n: int) -> pl.DataFrame:
    rng = np.random.default_rng(9)
    x = rng.uniform(LO - 4, HI + 4, n)
    x[[5, 6, 7, 8, 9]] = [np.nan, np.inf, -np.inf, 1.7e308, -1.7e308]
    return pl.DataFrame({
        "x": pl.Series(x).scatter([11, n - 3], None),
        "f": pl.Series(x, dtype=pl.Float32),
        "i": pl.Series(rng.integers(-10, 20, n)).scatter([12], None),
        "s": pl.Series(rng.integers(0, 3, n)).cast(pl.Int8),
        "d": pl.Series(x).fill_nan(0.0).clip(-1e6, 1e6).cast(pl.Decimal(20, 4)),
    })


def _aggs(column: str, n: int) -> list[Agg]:
    fp = FixedPoint.choose(LO, HI, 2.25, n, True)
    return [Agg("rows"), Agg("rows", column), Agg("sum", column, fp), Agg("sum_sq", column, fp)]


def _relation(tmp_path, df: pl.DataFrame, name: str) -> duckdb.DuckDBPyRelation:
    path = tmp_path / f"{name}.parquet"
    df.write_parquet(path, row_group_size=400)
    return duckdb.connect().read_parquet(str(path))


def _sql(relation, aggs, missing, monkeypatch, group_by=None, keys=None):
    with monkeypatch.context() as m:
        m.setattr(_batch_route, "BATCH_ROWS", 1 << 17)
        m.setattr(type(registered("duckdb")), "engine_sums", lambda self, *a: None)
        return backends.aggregate(relation, aggs, missing=missing, group_by=group_by,
                                  keys=keys)


@pytest.mark.parametrize("policy", ["drop", 0.5])
def test_batches_equal_the_sql_bit_for_bit(policy, tmp_path, monkeypatch):
    monkeypatch.setattr(_batch_route, "BATCH_ROWS", 256)  # several batches
    df = _frame(1_000)
    eager = registered("polars")
    for name, data in (("rows", df), ("empty", df.clear())):
        relation = _relation(tmp_path, data, name)
        for column in ("x", "f", "i", "s"):
            aggs, missing = _aggs(column, df.height), {column: policy}
            with np.errstate(over="ignore", invalid="ignore"):  # (as inside aggregate)
                got = _batch_route.relation_sums(relation, aggs, missing, None, None, eager)
            want = _sql(relation, aggs, missing, monkeypatch)
            assert got is not None, (name, column)
            for a in aggs:
                assert np.array_equal(got[a], want[a]), (name, column, a)
            through = backends.aggregate(relation, aggs, missing=missing)  # the release's path
            assert all(np.array_equal(through[a], want[a]) for a in aggs)


def test_other_types_a_group_by_and_a_bare_count_keep_the_sql(tmp_path):
    relation = _relation(tmp_path, _frame(50), "d")
    eager = registered("polars")
    assert _batch_route.relation_sums(relation, _aggs("d", 50), {}, None, None, eager) is None
    assert _batch_route.relation_sums(relation, _aggs("x", 50), {}, "s", [0, 1], eager) is None
    assert _batch_route.relation_sums(relation, [Agg("rows")], {}, None, None, eager) is None


def test_neighbouring_files_differ_within_the_sensitivity(tmp_path):
    df = _frame(600)
    aggs = _aggs("x", df.height)
    fp = aggs[2].fp
    assert fp is not None
    bound = max(abs(fp.k_lo), abs(fp.k_hi))
    base = backends.aggregate(_relation(tmp_path, df, "b"), aggs, missing={"x": "drop"})
    for row in (8, 5):
        near = backends.aggregate(_relation(tmp_path, pl.concat([df[:row], df[row + 1:]]),
                                            f"n{row}"), aggs, missing={"x": "drop"})
        for a, limit in zip(aggs, [1, 1, bound, bound**2], strict=True):
            assert np.isfinite(near[a]).all()
            assert abs(float(base[a][0] - near[a][0])) <= limit, (row, a)

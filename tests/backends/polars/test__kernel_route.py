"""A LazyFrame that is the bare scan of dpframe's in-memory copy takes the numpy kernel
(:mod:`dpframe.backends.polars._kernel_route`): chosen from the plan's structure only, the same
exact aggregates as Polars' expressions bit for bit (values chosen to break an engine included),
total on them, and within the sensitivity on neighbouring data sets."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe import backends
from dpframe.backends._base import registered
from dpframe.backends.polars import _kernel_route
from dpframe.engine import _kernel as kernel
from dpframe.engine._aggregation import Agg, FixedPoint, frame_columns

LO, HI = -3.0, 7.5


def _frame(n: int = 3_001) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    x = rng.uniform(LO - 4, HI + 4, n)
    x[[5, 6, 7, 8]] = [np.nan, np.inf, -np.inf, 1.7e308]
    x[9] = -1.7e308
    values = pl.Series("x", x).scatter([11, 12], None)  # nulls beside NaN
    return pl.DataFrame({"x": values, "k": rng.integers(0, 4, n)})


def _aggs(n: int) -> list[Agg]:
    fp = FixedPoint.choose(LO, HI, 2.25, n, True)
    return [Agg("rows"), Agg("rows", "x"), Agg("sum", "x", fp), Agg("sum_sq", "x", fp)]


def _expressions_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernel_route, "_route", lambda lazy: None)


@pytest.mark.parametrize("policy", ["drop", 0.5])
def test_kernel_equals_the_expressions_bit_for_bit(policy, monkeypatch):
    df = _frame()
    aggs = _aggs(df.height)
    plans = {"bare": df.lazy(), "empty": df.clear().lazy()}
    kernel, generic = {}, {}
    groupings = ((None, None), ("k", list(range(25))))  # (25 keys for 3,001 rows: the kernel)
    eager = registered("polars")
    for name, lazy in plans.items():
        for group_by, keys in groupings:
            with np.errstate(over="ignore", invalid="ignore"):  # (as inside aggregate)
                got = _kernel_route.kernel_sums(lazy, aggs, frame_columns(lazy),
                                                {"x": policy}, group_by, keys, eager)
            assert got is not None, (name, group_by)
            kernel[name, group_by] = got
    _expressions_only(monkeypatch)
    for name, lazy in plans.items():
        for group_by, keys in groupings:
            generic[name, group_by] = backends.aggregate(lazy, aggs, missing={"x": policy},
                                                         group_by=group_by, keys=keys)
    for case, got in kernel.items():
        for a in aggs:
            assert np.array_equal(got[a], generic[case][a]), (case, a)
    assert kernel["empty", None][Agg("rows")][0] == 0


def test_route_is_read_from_the_plan_structure(tmp_path):
    df = _frame(50)
    bare = _kernel_route._route(df.lazy())
    assert bare is not None and bare.rows == 50 and bare.scanned is not None
    # a derived plan keeps the expressions (only aggregates are collected from a LazyFrame)
    assert _kernel_route._route(df.lazy().filter(pl.col("k") >= 1)) is None
    assert _kernel_route._route(df.lazy().select("x")) is None
    path = tmp_path / "d.parquet"
    df.write_parquet(path)
    assert _kernel_route._route(pl.scan_parquet(path)) is None  # a file: the expressions
    assert _kernel_route._route(df.lazy().join(df.lazy(), on="k")) is None  # two scans
    assert _kernel_route._route(df.lazy().group_by("k").agg(pl.col("x").sum())) is None


def test_protected_lazy_releases_are_unchanged_and_total(monkeypatch):
    df = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(df.lazy(), epsilon=1e6, bounds={"x": (LO, HI)},
                         keys={"k": [0, 1, 2, 3]})

        def run() -> list[object]:
            older = pf.dp.filter(pl.col("k") >= 2)
            none = pf.dp.filter(pl.col("k") > 99)
            return [pf.dp.mean("x", epsilon=1.0, random_state=1),
                    pf.dp.groupby("k").sum("x", epsilon=1.0, random_state=2).to_dicts(),
                    older.dp.variance("x", epsilon=1.0, random_state=3),
                    none.dp.mean("x", epsilon=1.0, random_state=4)]

        fast = run()
        _expressions_only(monkeypatch)
        slow = run()
    assert repr(fast) == repr(slow)


def test_neighbouring_data_sets_differ_within_the_sensitivity():
    """Removing a row (the finite extreme, then the NaN one) changes each exact aggregate by
    at most one row's share: 1 row, ``max|k|`` in Σk, ``max k²`` in Σk²."""
    df = _frame(400)
    aggs = _aggs(df.height)
    fp = aggs[2].fp
    assert fp is not None
    bound = max(abs(fp.k_lo), abs(fp.k_hi))
    base = backends.aggregate(df.lazy(), aggs, missing={"x": "drop"})
    for row in (8, 5):
        neighbour = pl.concat([df[:row], df[row + 1:]])
        near = backends.aggregate(neighbour.lazy(), aggs, missing={"x": "drop"})
        limits = [1, 1, bound, bound**2]
        for a, limit in zip(aggs, limits, strict=True):
            assert np.isfinite(near[a]).all()
            assert abs(float(base[a][0] - near[a][0])) <= limit, (row, a)


def test_a_protected_lazy_frame_knows_its_route_without_reading_its_plan(monkeypatch):
    df = _frame(50)
    snapshot = registered("polars-lazy").snapshot(df.lazy())
    with monkeypatch.context() as m:
        m.setattr(_kernel_route, "_plan_route", lambda lazy: pytest.fail("the plan was read"))
        known = _kernel_route._route(snapshot)
    read = _kernel_route._plan_route(snapshot)  # what reading its plan finds
    assert known is not None and read is not None and known.rows == read.rows == 50
    for column in df.columns:  # the very buffers the plan scans (dpframe's copy)
        assert (known.scanned.get_column(column).to_arrow().buffers()[1].address
                == read.scanned.get_column(column).to_arrow().buffers()[1].address)
    assert (known.scanned.get_column("x").to_arrow().buffers()[1].address
            != df.get_column("x").to_arrow().buffers()[1].address)  # not the user's


@pytest.mark.parametrize("with_nan", [False, True])
def test_a_one_block_scan_takes_the_one_block_pass_with_the_same_sums(with_nan, monkeypatch):
    """Plain arrays of at most one block (no nulls) take the kernel's one-block pass, as the
    eager frame does; a NaN hands the column to the blocked pass: the same sums either way."""
    rng = np.random.default_rng(4)
    x = rng.uniform(LO - 4, HI + 4, 1_000)
    x[:4] = [np.inf, -np.inf, 1.7e308, -0.0]
    if with_nan:
        x[7] = np.nan
    lazy = pl.DataFrame({"x": x}).lazy()
    aggs, eager = _aggs(x.size), registered("polars")
    one_block = []
    original = kernel.one_block_sums
    monkeypatch.setattr(kernel, "one_block_sums", lambda *args: (
        one_block.append(result := original(*args)), result)[1])
    for policy in ("drop", 0.5):
        with np.errstate(over="ignore", invalid="ignore"):
            got = _kernel_route.kernel_sums(lazy, aggs, frame_columns(lazy), {"x": policy},
                                            None, None, eager)
        with monkeypatch.context() as m:
            _expressions_only(m)
            want = backends.aggregate(lazy, aggs, missing={"x": policy})
        assert got is not None
        for a in aggs:
            assert np.array_equal(got[a], want[a]), (policy, a)
    assert len(one_block) == 2 and all((r is None) == with_nan for r in one_block)


def test_neighbours_on_the_one_block_route_differ_within_the_sensitivity(monkeypatch):
    """The one-block pass of a scan without nulls: removing the largest finite row, then the
    NaN one, changes each aggregate by at most one row's share, and the outcome is a number
    on every neighbour (the NaN hands the column to the blocked pass)."""
    x = np.random.default_rng(5).uniform(LO - 4, HI + 4, 300)
    x[[3, 4]] = [1.7e308, np.nan]
    aggs = _aggs(x.size)
    fp = aggs[2].fp
    assert fp is not None
    bound = max(abs(fp.k_lo), abs(fp.k_hi))
    taken = []
    original = kernel.one_block_sums
    monkeypatch.setattr(kernel, "one_block_sums", lambda *args: (
        taken.append((result := original(*args)) is not None), result)[1])

    def sums(values: np.ndarray) -> dict[Agg, np.ndarray]:
        return backends.aggregate(pl.DataFrame({"x": values}).lazy(), aggs,
                                  missing={"x": "drop"})

    without_nan = sums(np.delete(x, 4))
    for row in (3, 4):
        near = sums(np.delete(np.delete(x, 4), 3) if row == 3 else x)
        for a, limit in zip(aggs, [1, 1, bound, bound**2], strict=True):
            assert np.isfinite(near[a]).all()
            assert abs(float(without_nan[a][0] - near[a][0])) <= limit, (row, a)
    assert taken == [True, True, False]  # (the NaN: the blocked pass)

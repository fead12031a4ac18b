"""The bin counts split between threads (issue 34, ``dpframe.engine._bins``): a column's blocks
cut into whole-block row ranges (``_kernel._parts``), each counted on a thread of its own, give
the same bits as one pass (integer counts added in a fixed order): the two-pass count of
ungrouped and grouped quantiles (NaN, ±inf, values beyond the bounds, missing values dropped or
filled, recounted row blocks, integer columns, several quantiles read by one count) and the
dense count; seeded releases are unchanged; a one-block column starts no thread. The split is
forced on small columns (small blocks, few rows per thread, three cores)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import backends
from dpframe.engine import _bins, _kernel
from dpframe.mechanisms.quantile_intervals import BracketMechanism
from dpframe.mechanisms.quantiles import QuantileMechanism
from dpframe.query._aggregates import Agg, Bins, ReadWindows

B = 1 << 15


def _windows() -> ReadWindows:
    w = ReadWindows()
    w.record(QuantileMechanism(80.0, 0.0, 100.0, [0.5, 0.0, 0.93], bins=B))
    w.record(BracketMechanism(80.0, 0.0, 100.0, [0.5], side="lower", alpha_side=0.05, bins=B))
    return w


def _column(n: int = 5_000, seed: int = 34) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(50.0, 30.0, n)
    x[rng.integers(0, n // 2, 40)] = np.nan  # missing values in the first half's blocks only
    x[:6] = [np.inf, -np.inf, 1e308, -1.0, 100.0, 0.0]
    return x


@pytest.fixture
def threads(monkeypatch):
    """``split(True)``: 256-row blocks (1,024 when split), 1,024 rows per thread, three cores
    (so a 5,000-row column runs on three threads of one or two blocks each);
    ``split(False)``: one pass. Counts the thread launches."""
    monkeypatch.setattr(_bins, "_BIN_BLOCK", 256)
    monkeypatch.setattr(_bins, "TWO_PASS_MIN_ROWS", 0)
    monkeypatch.setattr(_kernel, "_cores", lambda: 3)
    launched: list[int] = []

    def in_threads(tasks):
        launched.append(len(tasks))
        _kernel._in_threads(tasks)

    monkeypatch.setattr(_bins, "_in_threads", in_threads)

    def split(on: bool) -> list[int]:
        monkeypatch.setattr(_kernel, "PARALLEL_ROWS", 1024 if on else 1 << 40)
        launched.clear()
        return launched

    return split


def _same(threads, count):
    """``count()`` on one thread and split between three: the same bits."""
    threads(False)
    one = count()
    launched = threads(True)
    split = count()
    assert launched == [3] * len(launched) and launched
    assert one.dtype == split.dtype == np.float64
    np.testing.assert_array_equal(one, split)
    return split


@pytest.mark.parametrize("policy", ["drop", 37.5])
def test_two_pass_counts_split_between_threads_are_the_same_bits(threads, policy):
    bins = Bins(0.0, 100.0, B, _windows())
    got = _same(threads, lambda: _bins.two_pass_counts(_column(), bins, policy))
    assert got.sum() == (5_000 - np.isnan(_column()).sum() if policy == "drop" else 5_000)
    ints = np.arange(-700, 4_300, dtype=np.int64)  # an integer column: every block recounted
    _same(threads, lambda: _bins.two_pass_counts(ints, bins, policy))


@pytest.mark.parametrize("policy", ["drop", 0.0])
def test_grouped_two_pass_counts_split_between_threads_are_the_same_bits(threads, policy):
    bins = Bins(0.0, 100.0, B, _windows())
    codes = np.random.default_rng(1).integers(-1, 3, 5_000)  # -1: an undeclared key
    _same(threads, lambda: _bins.grouped_two_pass_counts(_column(), codes, bins, policy, 3))


def test_dense_counts_split_between_threads_are_the_same_bits(threads):
    df = pd.DataFrame({"x": _column(), "g": np.random.default_rng(2).choice(list("abz"), 5_000)})
    agg = Agg("bins", "x", bins=Bins(0.0, 100.0, 64))  # no recorded draws: the dense count
    for group_by, keys in ((None, None), ("g", ["a", "b", "c"])):
        _same(threads, lambda g=group_by, k=keys: backends.aggregate(
            df, [agg], missing={"x": 12.0}, group_by=g, keys=k, method="numpy")[agg])


def test_seeded_releases_are_unchanged_by_the_split(threads):
    """Several quantiles with brackets (one merged count), grouped, on a Polars column with
    nulls and on an integer column: the same seeded values on one thread and on three."""
    x = _column()
    nulls = pl.DataFrame({"x": pl.Series(x).fill_nan(None), "g": np.arange(5_000) % 2})
    ints = pd.DataFrame({"x": np.arange(5_000) % 97, "g": np.arange(5_000) % 2})
    kw = {"epsilon": 1e6, "bounds": {"x": (0.0, 100.0)}, "keys": {"g": [0, 1]}}
    frames = [dpf.protect(nulls, missing={"x": "drop"}, **kw),
              dpf.protect(ints, missing={"x": 0.0}, **kw)]
    args = {"epsilon": 60.0, "bins": B, "random_state": 7, "ci": 0.9}

    def releases():
        out = []
        for f in frames:
            out.append(np.asarray(f.dp.quantile("x", [0.2, 0.5, 0.9], **args), dtype=float))
            grouped = f.dp.groupby("g").quantile("x", 0.5, **args)
            if isinstance(grouped, pl.DataFrame):
                grouped = grouped.to_pandas()
            out.append(np.asarray(grouped.select_dtypes("number"), dtype=float))
        return out

    threads(False)
    one = releases()
    launched = threads(True)
    split = releases()
    assert len(launched) >= 8
    for a, b in zip(one, split, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_one_block_column_starts_no_thread(threads, monkeypatch):
    monkeypatch.setattr(_bins, "_BIN_BLOCK", 1 << 16)
    launched = threads(False)
    monkeypatch.setattr(_kernel, "PARALLEL_ROWS", 1 << 21)  # the shipped threshold
    frame = dpf.protect(pd.DataFrame({"x": _column(1_000)}), epsilon=1e6,
                        bounds={"x": (0.0, 100.0)}, missing={"x": 0.0})
    frame.dp.quantile("x", 0.5, epsilon=1.0, bins=B, random_state=0)
    assert launched == []

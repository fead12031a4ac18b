"""The two-pass bin count of a quantile (issue 34, ``dpframe.engine._bins.two_pass_counts``):
exact block totals and end bins, exact fine counts in every block a recorded draw reads
(``fine_blocks_read``), on adversarial columns (NaN, ±inf, values at or beyond the bounds,
one value, no rows, integers) under both missing-value policies; and through the frames, the
same seeded outputs as the dense count even when every block no draw reads is garbled (a read
outside the window would change the draws)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.engine import _bins
from dpframe.engine._kernel import _read_block
from dpframe.mechanisms.quantile_intervals import BracketMechanism
from dpframe.mechanisms.quantiles import CumulativeCounts, QuantileMechanism, fine_blocks_read
from dpframe.query._aggregates import Bins, ReadWindows

K = CumulativeCounts.BLOCK
BIN_COUNTS = (1 << 15, (1 << 15) + 1, (1 << 15) + 1025)  # whole, 1-bin and short last block


def _dense(x: np.ndarray, bins: Bins, policy: object) -> np.ndarray:
    binning = _bins._BlockBinning(bins, 1, max(min(x.size, _bins._BIN_BLOCK), 1))
    for start in range(0, x.size, _bins._BIN_BLOCK):
        block, missing = _read_block(x, start, start + _bins._BIN_BLOCK)
        binning.add(block, missing, policy, None)
    return binning.counts()[0].copy()


def _windows(b: int, lam: float) -> ReadWindows:
    w = ReadWindows()
    w.record(QuantileMechanism(2 * lam, 0.0, 100.0, [0.5, 0.0, 0.93], bins=b))
    for side in ("lower", "upper"):
        w.record(BracketMechanism(2 * lam, 0.0, 100.0, [0.5], side=side, alpha_side=0.05,
                                  bins=b))
    return w


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.floats(-1.0, 101.0), st.sampled_from([0.0, 100.0, 50.0]))


@settings(max_examples=25, deadline=None)
@given(st.lists(values, max_size=300), st.sampled_from(BIN_COUNTS),
       st.sampled_from(["drop", 0.0, 100.0, 37.5]), st.sampled_from([0.02, 1.0, 40.0]))
@example([], BIN_COUNTS[0], "drop", 1.0)
@example([42.0], BIN_COUNTS[1], 0.0, 40.0)
@example([37.5] * 200, BIN_COUNTS[2], "drop", 40.0)
@example([100.0] * 50 + [1e308] * 50, BIN_COUNTS[1], "drop", 40.0)
@example([-np.inf, np.inf, np.nan, 0.0] * 30, BIN_COUNTS[2], 100.0, 40.0)
def test_two_pass_counts_agree_with_the_dense_count_where_draws_read(x, b, policy, lam):
    column = np.asarray(x, dtype=np.float64)
    windows = _windows(b, lam)
    bins = Bins(0.0, 100.0, b, windows)
    dense = _dense(column, bins, policy)
    old = _bins.TWO_PASS_MIN_ROWS
    _bins.TWO_PASS_MIN_ROWS = 0
    try:
        got = _bins.two_pass_counts(column, bins, policy)
    finally:
        _bins.TWO_PASS_MIN_ROWS = old
    assert got is not None and got.shape == (1, b)
    got = got[0]
    assert (got >= 0).all() and (np.trunc(got) == got).all()
    totals = CumulativeCounts.block_totals(dense)
    assert np.array_equal(CumulativeCounts.block_totals(got), totals)
    assert got[0] == dense[0] and got[-1] == dense[-1]
    draws = windows.draws()
    assert draws is not None
    for d in draws:
        k1, k2 = fine_blocks_read(totals, b, d.q, d.offset, d.padding, d.coefficient)
        assert np.array_equal(got[k1 * K:(k2 + 1) * K], dense[k1 * K:(k2 + 1) * K])


def test_integer_column_and_no_draws():
    x = np.arange(-50, 150, dtype=np.int64).repeat(3)
    bins = Bins(0.0, 100.0, 1 << 15, _windows(1 << 15, 40.0))
    old = _bins.TWO_PASS_MIN_ROWS
    _bins.TWO_PASS_MIN_ROWS = 0
    try:
        got = _bins.two_pass_counts(x, bins, "drop")
        assert got is not None
        assert np.array_equal(CumulativeCounts.block_totals(got[0]),
                              CumulativeCounts.block_totals(_dense(x, bins, "drop")))
        # no recorded draws, or a histogram's bins: the dense count
        assert _bins.two_pass_counts(x, Bins(0.0, 100.0, 1 << 15, ReadWindows()), 0.0) is None
        assert _bins.two_pass_counts(x, Bins(0.0, 100.0, 1 << 15), 0.0) is None
    finally:
        _bins.TWO_PASS_MIN_ROWS = old


def test_too_many_draws_fall_back_to_the_dense_count():
    w = ReadWindows()
    for i in range(ReadWindows.MAX_DRAWS + 1):
        w.record(QuantileMechanism(1.0 + i, 0.0, 1.0, 0.5, bins=1 << 15))
    assert w.draws() is None


def _garbled(out, totals, unread):
    """Every unread block's total spread over random bins of the block: a count vector with
    the same totals that differs from the exact one wherever it is not read."""
    rng = np.random.default_rng(len(out))
    for k in unread:
        lo, hi = k * K, min((k + 1) * K, out.size)
        out[lo:hi] = np.bincount(rng.integers(0, hi - lo, int(totals[k])), minlength=hi - lo)


def _dense_and_garbled(monkeypatch, releases):
    """``releases()`` with every bin counted, then with the two-pass count and every unread
    block garbled (its total kept): both results and the sizes of the unread block sets."""
    monkeypatch.setattr(_bins, "TWO_PASS_MIN_ROWS", 10**12)
    dense = releases()
    unread: list[int] = []

    def garbled(out, totals, blocks):
        unread.append(blocks.size)
        _garbled(out, totals, blocks)

    monkeypatch.setattr(_bins, "TWO_PASS_MIN_ROWS", 0)
    monkeypatch.setattr(_bins, "_place_unread", garbled)
    return dense, releases(), unread


def test_frames_release_the_dense_counts_draws_with_unread_blocks_garbled(monkeypatch):
    """Point, several levels and ci= brackets, seeded: the two-pass route (with every block
    no draw reads garbled) releases exactly what the dense count releases."""
    rng = np.random.default_rng(34)
    x = np.concatenate([rng.normal(50, 5, 20_000), [np.nan, np.inf, -np.inf, 150.0, -3.0]])
    frame = dpf.protect(pd.DataFrame({"x": x}), epsilon=1e6, bounds={"x": (0.0, 100.0)},
                        missing={"x": 0.0})

    def releases():
        return [frame.dp.quantile("x", [0.1, 0.5, 0.97], epsilon=60.0, bins=1 << 16,
                                  random_state=s, ci=0.9) for s in range(3)]

    dense, two_pass, unread = _dense_and_garbled(monkeypatch, releases)
    assert unread and min(unread) >= 15  # many non-empty blocks unread: not vacuous
    for a, b in zip(dense, two_pass, strict=True):
        pd.testing.assert_frame_equal(a, b) if isinstance(a, pd.DataFrame) else \
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("ci", [None, 0.9])
def test_a_quantile_plan_records_the_draws_of_each_mechanism_it_builds(ci):
    """The plan's Bins aggregate carries the draws of the point (and the two brackets),
    recorded when the release builds them; each plan its own record."""
    from dpframe.release._pipeline import plan

    frame = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 50)}), epsilon=10.0,
                        bounds={"x": (0.0, 1.0)})
    planned = plan(frame, {"q": dpf.quantile("x", [0.25, 0.75])}, epsilon=1.0, ci=ci)
    (agg,) = {a for p in planned for a in p.plan.aggregates}
    draws = agg.bins.window.draws()
    assert draws is not None and len(draws) == (2 if ci is None else 6)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(values, st.integers(-1, 2)), max_size=200),
       st.sampled_from(BIN_COUNTS), st.sampled_from(["drop", 0.0, 100.0]))
@example([(37.5, 0)] * 100 + [(np.nan, 1), (np.inf, -1), (-np.inf, 2)], BIN_COUNTS[2], "drop")
def test_grouped_two_pass_counts_agree_with_the_dense_count_where_draws_read(rows, b, policy):
    column = np.asarray([v for v, _ in rows], dtype=np.float64)
    codes = np.asarray([c for _, c in rows], dtype=np.int64)
    windows = _windows(b, 40.0)
    bins = Bins(0.0, 100.0, b, windows)
    binning = _bins._BlockBinning(bins, 3, max(min(column.size, _bins._BIN_BLOCK), 1))
    binning.add(column, _bins._UNCHECKED, policy, codes)
    dense = binning.counts()
    old = _bins.TWO_PASS_MIN_ROWS
    _bins.TWO_PASS_MIN_ROWS = 0
    try:
        got = _bins.grouped_two_pass_counts(column, codes, bins, policy, 3)
    finally:
        _bins.TWO_PASS_MIN_ROWS = old
    assert got is not None and got.shape == (3, b)
    draws = windows.draws()
    assert draws is not None
    for g in range(3):
        totals = CumulativeCounts.block_totals(dense[g])
        assert np.array_equal(CumulativeCounts.block_totals(got[g]), totals)
        assert got[g, 0] == dense[g, 0] and got[g, -1] == dense[g, -1]
        for d in draws:
            k1, k2 = fine_blocks_read(totals, b, d.q, d.offset, d.padding, d.coefficient)
            assert np.array_equal(got[g, k1 * K:(k2 + 1) * K], dense[g, k1 * K:(k2 + 1) * K])


def test_grouped_frames_release_the_dense_counts_draws_with_unread_blocks_garbled(monkeypatch):
    rng = np.random.default_rng(35)
    n = 30_000
    frame = dpf.protect(pd.DataFrame({"x": rng.normal(50, 5, n), "g": rng.choice(["a", "b"], n)}),
                        epsilon=1e6, bounds={"x": (0.0, 100.0)}, missing={"x": 0.0},
                        keys={"g": ["a", "b", "c"]})

    def releases():
        return [frame.dp.groupby("g").quantile("x", [0.2, 0.5], epsilon=60.0, bins=1 << 16,
                                               random_state=s, ci=0.9) for s in range(2)]

    dense, two_pass, unread = _dense_and_garbled(monkeypatch, releases)
    assert unread and max(unread) >= 15
    for a, b in zip(dense, two_pass, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_the_polars_lazy_route_counting_every_bin_releases_the_same_values(monkeypatch):
    """Routes agree: a Polars LazyFrame (every bin counted by the engine's expressions) and
    the pandas two-pass count release the same seeded values."""
    import polars as pl

    monkeypatch.setattr(_bins, "TWO_PASS_MIN_ROWS", 0)
    x = np.random.default_rng(36).normal(50, 5, 20_000)
    kw = {"epsilon": 1e6, "bounds": {"x": (0.0, 100.0)}, "missing": {"x": 0.0}}
    eager = dpf.protect(pd.DataFrame({"x": x}), **kw)
    lazy = dpf.protect(pl.LazyFrame({"x": x}), **kw)
    for seed in range(2):
        args = {"epsilon": 60.0, "bins": 1 << 16, "random_state": seed, "ci": 0.9}
        a = eager.dp.quantile("x", [0.3, 0.5], **args)
        b = lazy.dp.quantile("x", [0.3, 0.5], **args)
        np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))

"""The numpy kernel's split of a long column between threads (:mod:`dpframe.engine._kernel`):
the same exact aggregates bit for bit as one pass and as Polars' expressions (every partial sum
is an integer below 2⁵³; adversarial values and seeded releases included),
the split decided from the column's length and kind only, and nothing — no exception, no
warning — leaves a worker thread but through the caller.

The threshold is lowered here (``PARALLEL_ROWS``) so that small columns take the threaded path,
and the core count is fixed, so the tests do the same on any machine."""

from __future__ import annotations

import itertools
import threading
import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe import backends
from dpframe.engine import _kernel
from dpframe.engine._aggregation import Agg, FixedPoint
from dpframe.engine._column_views import _FloatBlocks

N = 7 * _kernel._BLOCK + 777  # eight blocks (four of a threaded pass), a ragged tail
LO, HI = -3.0, 7.5


def _values() -> np.ndarray:
    rng = np.random.default_rng(11)
    x = rng.uniform(LO - 4, HI + 4, N)
    x[::997] = np.nan
    x[[3, 4, 5, 6]] = [np.inf, -np.inf, 1.7e308, -1.7e308]  # overflow when scaled by 1/q
    x[N - 5 :] = np.nan  # NaN in the last part only: the speculative sums of one part
    return x


def _aggs() -> list[Agg]:
    fp = FixedPoint.choose(LO, HI, 2.25, N, True)
    return [Agg("rows"), Agg("rows", "x"), Agg("sum", "x", fp), Agg("sum_sq", "x", fp)]


def _threaded(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(_kernel, "PARALLEL_ROWS", _kernel._BLOCK)
    monkeypatch.setattr(_kernel, "_cores", lambda: threads)


def _frames() -> dict[str, object]:
    x = _values()
    k = np.arange(N) % 7
    with_nulls = pl.Series("x", x).scatter([1, 2, N - 1], None)  # values buffer + bitmap
    return {"pandas": pd.DataFrame({"x": x, "k": k}),
            "polars-nulls": pl.DataFrame({"x": with_nulls, "k": k})}


@pytest.mark.parametrize("threads", [2, 4])
def test_threaded_pass_equals_one_pass_bit_for_bit(monkeypatch, threads):
    aggs = _aggs()
    cases = [(name, frame, policy, group_by)
             for name, frame in _frames().items() for policy in ("drop", 0.5)
             for group_by in (None, "k")]
    keys = list(range(5))  # keys 5 and 6 undeclared: their rows leave the pass

    def run() -> list[dict[Agg, np.ndarray]]:
        return [backends.aggregate(frame, aggs, missing={"x": policy}, group_by=group_by,
                                   keys=None if group_by is None else keys, method="numpy")
                for _name, frame, policy, group_by in cases]

    spies: list[int] = []
    original = _kernel._in_threads
    monkeypatch.setattr(_kernel, "_in_threads",
                        lambda tasks: (spies.append(len(tasks)), original(tasks))[1])
    one = run()
    assert not spies  # (the machine's threshold: these columns are short)
    _threaded(monkeypatch, threads)
    split = run()
    assert spies and set(spies) == {threads}
    for (name, _f, policy, group_by), a_one, a_split in zip(cases, one, split, strict=True):
        for a in aggs:
            assert np.array_equal(a_one[a], a_split[a]), (name, policy, group_by, a)


def test_the_split_is_whole_blocks_from_public_facts(monkeypatch):
    step = _kernel._BLOCK
    column = np.zeros(N)
    assert _kernel._parts(column, step) == [(0, N)]  # below the threshold: one pass
    _threaded(monkeypatch, 4)
    parts = _kernel._parts(column, step)
    assert len(parts) == 4 and parts[0][0] == 0 and parts[-1][1] == N
    assert all(a % step == 0 and b > a for a, b in parts)
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(parts))
    # the same split for any values of the same length and dtype
    assert _kernel._parts(np.full(N, np.nan), step) == parts
    # a column read block by block through its engine stays on this thread
    blocks = _FloatBlocks(pd.array(np.zeros(N), dtype="Float64"), N, polars=False)
    assert _kernel._parts(blocks, step) == [(0, N)]


def test_no_warning_leaves_a_worker_thread(monkeypatch):
    _threaded(monkeypatch, 2)
    frame = pd.DataFrame({"x": np.full(N, 1.7e308)})  # overflows in every block when scaled
    fp = FixedPoint.choose(LO, HI, 0.0, N, True)
    aggs = [Agg("sum", "x", fp), Agg("sum_sq", "x", fp)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (global: a worker's warning would fail its part)
        got = backends.aggregate(frame, aggs, missing={"x": "drop"}, method="numpy")
    assert got[aggs[0]][0] == N * fp.k_hi


def test_a_worker_exception_is_raised_by_the_caller_after_every_part_ran():
    ran: list[str] = []
    main = threading.get_ident()

    def ok() -> None:
        ran.append("ok")

    def fails() -> None:
        assert threading.get_ident() != main  # (on a worker)
        ran.append("fails")
        raise MemoryError("worker")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (an exception a thread printed would warn)
        with pytest.raises(MemoryError, match="worker"):
            _kernel._in_threads([ok, fails, ok])
    assert sorted(ran) == ["fails", "ok", "ok"]
    assert not [t for t in threading.enumerate() if t.name == "dpframe-kernel"]


def _adversarial() -> st.SearchStrategy[float]:
    """±0, NaN, ±inf, subnormals, the largest doubles, and .5 ties in k at every magnitude up
    to 2⁵⁰ (``x = (m + ½)·q`` with the quantum of :func:`_tie_aggs`)."""
    fp = _tie_aggs()[2].fp
    assert fp is not None
    ties = st.builds(lambda e, s: s * (2.0**e + 0.5) * fp.q, st.integers(0, 50),
                     st.sampled_from([1.0, -1.0]))
    special = st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324,
                               2.2250738585072014e-308, 1.7976931348623157e308,
                               -1.7976931348623157e308, 0.5, -0.5, 1.5, 2.5])
    return st.one_of(ties, special, st.floats(allow_nan=True, allow_infinity=True))


def _tie_aggs() -> list[Agg]:
    """A grid with |k| up to 2⁵⁰ for Σk (4 rows) and a centred one for Σk, Σk²."""
    wide = FixedPoint.choose(-(2.0**40), 2.0**40, 0.0, 4, False)
    centred = FixedPoint.choose(LO, HI, 2.25, 4, True)
    return [Agg("rows"), Agg("rows", "x"), Agg("sum", "x", wide), Agg("sum", "x", centred),
            Agg("sum_sq", "x", centred)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_adversarial(), min_size=2, max_size=4), st.sampled_from(["drop", 1.25]))
def test_threaded_pass_one_pass_and_the_expressions_agree_on_adversarial_values(values, policy):
    """Each row its own part (one-row blocks) on up to four threads, against one pass and
    against Polars' expressions: the same k per row, so the same sums bit for bit."""
    aggs = _tie_aggs()
    sums = aggs[2:]
    x = np.array(values, dtype=np.float64)
    assert sums[0].fp is not None and sums[0].fp.k_hi >= 2**50
    one = {a: np.zeros(1) for a in sums}
    split = {a: np.zeros(1) for a in sums}
    with np.errstate(over="ignore", invalid="ignore"), pytest.MonkeyPatch.context() as m:
        _kernel._column_pass(x, sums, policy, None, 1, one, 0, x.size, 8)
        m.setattr(_kernel, "PARALLEL_ROWS", 1)
        m.setattr(_kernel, "_THREAD_BLOCK", 1)
        m.setattr(_kernel, "_cores", lambda: 4)
        assert len(_kernel._parts(x, 1)) == x.size
        _kernel._column_kernel(x, sums, policy, None, 1, split)
    kernel = backends.aggregate(pd.DataFrame({"x": x}), aggs, missing={"x": policy},
                                method="numpy")  # (one block)
    engine = backends.aggregate(pl.DataFrame({"x": x}).lazy(), aggs, missing={"x": policy},
                                method="narwhals")
    for a in aggs:
        assert np.array_equal(kernel[a], engine[a]), a
        if a in one:
            assert np.array_equal(one[a], engine[a]) and np.array_equal(split[a], one[a]), a


def test_seeded_releases_are_the_same_on_one_thread_and_split(monkeypatch):
    def run() -> str:
        frame = pd.DataFrame({"x": _values(), "k": np.arange(N) % 3})  # (a new data set)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pf = dpf.protect(frame, epsilon=1e6, bounds={"x": (LO, HI)},
                             missing={"x": 0.5}, keys={"k": [0, 1, 2]})
        return repr([pf.dp.mean("x", epsilon=1.0, random_state=5),
                     pf.dp.variance("x", epsilon=1.0, random_state=6),
                     pf.dp.groupby("k").sum("x", epsilon=1.0, random_state=7)])

    one = run()
    _threaded(monkeypatch, 2)
    assert run() == one

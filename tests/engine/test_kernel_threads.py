"""The numpy kernel's split of a long column between threads (:mod:`dpframe.engine._kernel`):
the same exact aggregates bit for bit as one pass (every partial sum is an integer below 2⁵³),
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

"""dpframe._util.memory and the identity registries (issue 24 item 4): dpframe holds no strong
reference to user data, so memory comes back when the user drops every frame, and yet data
whose memory is still held by anything derived from a protected frame is recognised as such
(re-protect refused, same ledger) — never mistaken for new data, and freed memory reused by new
data never mistaken for protected data.

How memory is observed: Polars takes a float64 numpy array without copying it, so the Rust
buffers of a frame built on ``arr`` keep ``arr`` alive; a weak reference to ``arr`` dies exactly
when the last Polars object over that memory is freed. RSS is measured in
``benchmarks/memory.py``, not here.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe._util.memory import MemoryRegistry
from dpframe.backends import backend_of
from dpframe.backends.polars._memory import anchored_series, polars_ranges
from dpframe.provenance import _protect as provenance

BOUNDS = {"x": (0.0, 1.0)}


class _Owner:
    """Any weak-referenceable object."""


def _collected(ref: weakref.ref[Any]) -> bool:
    gc.collect()
    return ref() is None


def _protected_lazy(size: int = 10_000, seed: int = 0) -> tuple[Any, weakref.ref[Any]]:
    arr = np.random.default_rng(seed).random(size)
    lf = dpf.protect(pl.DataFrame({"x": arr}).lazy(), epsilon=10.0, bounds=BOUNDS)
    return lf, weakref.ref(arr)


# -- anchored values ---------------------------------------------------------------------------
def test_an_anchored_series_keeps_its_owner_alive_exactly_as_long_as_polars_holds_it():
    owner = _Owner()
    ref = weakref.ref(owner)
    series = anchored_series("dpframe:abc", owner)
    del owner
    assert not _collected(ref) and series.to_list() == ["dpframe:abc"]
    plan = pl.LazyFrame({"a": [1, 2]}).filter(pl.lit("dpframe:abc") == pl.lit(series))
    del series
    assert not _collected(ref)
    derived = plan.with_columns(b=pl.col("a") * 2).filter(pl.col("a") > 1)
    del plan
    assert not _collected(ref)  # a plan built on the plan holds it too
    assert derived.collect()["b"].to_list() == [4]
    del derived
    assert _collected(ref)


def test_the_anchored_marker_costs_native_queries_nothing():
    """Polars' optimiser still removes the whole marker filter: a native query on a protected
    LazyFrame runs the user's plan only."""
    lf, _arr = _protected_lazy()
    assert "dpframe:" in lf.explain(optimized=False)
    assert "dpframe:" not in lf.explain() and "FILTER" not in lf.explain()
    assert lf.filter(pl.col("x") > 2.0).collect().height == 0


# -- the registry forgets what nobody holds ------------------------------------------------------
def test_a_dropped_protected_lazyframe_frees_its_data_and_its_records():
    gc.collect()
    markers, ranges = len(provenance._markers), len(provenance._memory)
    lf, arr = _protected_lazy()
    lf.dp.count(epsilon=1.0)
    assert not _collected(arr)
    del lf
    assert _collected(arr)
    assert (len(provenance._markers), len(provenance._memory)) == (markers, ranges)


@pytest.mark.parametrize("make", [
    lambda a: pl.DataFrame({"x": a}),
    lambda a: __import__("pandas").DataFrame({"x": a}, copy=False),
], ids=["polars", "pandas"])
def test_a_dropped_protected_eager_frame_frees_its_data(make: Callable[[Any], Any]):
    arr = np.random.default_rng(3).random(1000)
    ref = weakref.ref(arr)
    pf = dpf.protect(make(arr), epsilon=10.0, bounds=BOUNDS)
    pf.dp.filter(pl.col("x") > 0.5 if isinstance(pf, pl.DataFrame)
                 else __import__("narwhals").col("x") > 0.5).dp.count(epsilon=1.0)
    del arr, pf
    assert _collected(ref)


@pytest.mark.parametrize("make", [
    lambda a: pl.DataFrame({"x": a}).lazy(),
    lambda a: pl.DataFrame({"x": a}),
    lambda a: __import__("pandas").DataFrame({"x": a}, copy=False),
], ids=["polars-lazy", "polars", "pandas"])
def test_dpframes_copy_is_its_own_and_leaves_with_the_protected_frame(
        make: Callable[[Any], Any]):
    """The snapshot releases read is a byte copy (issue 30): none of its memory is the user's
    array, and it is freed, with its records, when the protected frame is dropped."""
    gc.collect()
    ranges = len(provenance._memory)
    arr = np.random.default_rng(6).random(1000)
    start = arr.__array_interface__["data"][0]
    pf = dpf.protect(make(arr), epsilon=10.0, bounds=BOUNDS)
    data = provenance.resolve(pf).data
    owned = backend_of(data).buffer_ranges(data)
    assert owned and not any(a < start + arr.nbytes and start < b for a, b in owned)
    copy = weakref.ref(data)
    del data, pf
    assert _collected(copy)
    assert len(provenance._memory) == ranges


def test_derived_lazyframes_leave_no_record_behind():
    lf, _arr = _protected_lazy()
    gc.collect()
    before = len(provenance._markers)
    for _ in range(200):
        lf.dp.filter(pl.col("x") > 0.5)
        lf.dp.with_columns((pl.col("x") * 2).alias("y"), bounds={"y": (0.0, 2.0)})
    gc.collect()
    assert len(provenance._markers) == before


def test_a_session_the_user_keeps_does_not_keep_the_data():
    session = dpf.Session()
    arr = np.random.default_rng(4).random(1000)
    ref = weakref.ref(arr)
    lf = dpf.protect(pl.DataFrame({"x": arr}).lazy(), epsilon=10.0, bounds=BOUNDS,
                     session=session)
    lf.dp.mean("x", epsilon=1.0)
    del arr, lf
    assert _collected(ref)
    assert session.budget.epsilon_spent == 1.0  # the ledger stays, the data goes


def test_a_protected_duckdb_relation_is_not_kept_alive():
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    rel = con.sql("select range::double / 100 as x from range(100)")
    ref = weakref.ref(rel)
    pf = dpf.protect(rel, epsilon=10.0, bounds=BOUNDS)
    pf.dp.count(epsilon=1.0)
    del rel, pf
    assert _collected(ref)


# -- recognised while anything derived holds the memory -------------------------------------------
def test_a_native_derivation_keeps_the_protection_after_the_protected_frame_is_dropped():
    lf, arr = _protected_lazy()
    derived = lf.filter(pl.col("x") > 0.25).with_columns((pl.col("x") + 1).alias("y"))
    session = lf.dp.session
    del lf
    assert not _collected(arr)  # the derivation's plan holds the protected data
    derived.dp.count(epsilon=1.0)  # same ledger
    assert session.budget.epsilon_spent == 1.0
    with pytest.raises(dpf.LedgerError, match="already carries a privacy budget"):
        dpf.protect(derived, epsilon=1.0, bounds=BOUNDS)
    del derived
    assert _collected(arr)


def test_memory_shared_with_a_live_protected_plan_is_refused():
    arr = np.random.default_rng(5).random(1000)
    lf = dpf.protect(pl.DataFrame({"x": arr}).lazy(), epsilon=10.0, bounds=BOUNDS)
    # the user's own frames over the protected memory: an Arrow slice, a Series, a view
    series = pl.Series("x", arr)
    for again in (pl.DataFrame({"x": series}), pl.from_arrow(
            pl.DataFrame({"x": arr}).to_arrow().slice(10)), pl.DataFrame({"x": arr[5:]}).lazy(),
                  lf.collect(), lf.select(pl.all()).collect().lazy()):
        with pytest.raises(dpf.LedgerError, match="already carries a privacy budget"):
            dpf.protect(again, epsilon=1.0, bounds=BOUNDS)
    assert lf.dp.budget.epsilon_spent == 0.0


def test_freed_memory_reused_by_new_data_is_new_data():
    """Protected frames are dropped and new frames of the same shape are made at once (the
    allocator hands out the freed addresses): each is new data with a budget of its own, never
    refused as protected and never charged to a dropped frame's ledger."""
    for i in range(20):
        lf, _arr = _protected_lazy(seed=i)
        lf.dp.sum("x", epsilon=1.0)  # (a count of the public size would be free)
        del lf, _arr
        gc.collect()
    for i in range(20):
        fresh = dpf.protect(pl.DataFrame({"x": np.random.default_rng(100 + i).random(10_000)})
                            .lazy(), epsilon=10.0, bounds=BOUNDS)
        fresh.dp.sum("x", epsilon=1.0)
        assert fresh.dp.budget.epsilon_spent == 1.0


def test_the_registry_confirms_memory_against_a_live_holder_only():
    registry = MemoryRegistry()
    frame = pl.DataFrame({"x": np.arange(100.0)})
    ranges = polars_ranges(frame)
    registry.add(ranges, frame, polars_ranges)
    assert registry.overlaps(ranges) and len(registry) == len(ranges)
    del frame
    gc.collect()
    assert len(registry) == 0 and not registry.overlaps(ranges)


def test_a_chain_of_derivations_outlives_the_frames_it_was_built_from():
    lf, arr = _protected_lazy()
    session = lf.dp.session
    chained = lf.dp.with_columns((pl.col("x") * 2).alias("y"), bounds={"y": (0.0, 2.0)})
    chained = chained.filter(pl.col("y") > 0.5).dp.filter(pl.col("x") < 0.9).select("y")
    del lf
    gc.collect()
    chained.dp.sum("y", epsilon=1.0)  # the declared bounds of y travel with the chain
    assert session.budget.epsilon_spent == 1.0
    del chained
    assert _collected(arr)

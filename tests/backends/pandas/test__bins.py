"""The histogram's bin step on a float64 numpy pandas column, computed in numpy
(:mod:`dpframe.backends.pandas._bins`), gives exactly the bins of the Polars compilation every
other pandas derivation goes through: every kind of float (±0.0, ±inf, NaN, subnormals, edges
themselves and their neighbours, values below the first and above the last edge) over many
random edge sets, under both missing-value rules; and only that step over that dtype takes the
numpy route."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe.backends.pandas import _bins
from dpframe.backends.pandas import _rowwise as pandas_eval
from dpframe.frames import bins

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
            -2.2250738585072014e-308, 1e-300, -1e-300, 1.7976931348623157e308,
            -1.7976931348623157e308, 1.0, -1.0, 0.5]


def _edge_set(rng: np.random.Generator, i: int) -> list[float]:
    """Strictly increasing finite edges of one of a few shapes (2 to 40 edges)."""
    count = int(rng.integers(2, 41))
    shape = i % 4
    if shape == 0:  # ordinary numbers
        raw = rng.normal(0, 100, count)
    elif shape == 1:  # around zero, subnormals and signed zeros among them
        raw = np.concatenate([rng.choice([*SPECIALS[5:11], 0.0, -0.0], count // 2),
                              rng.normal(0, 1e-307, count - count // 2)])
    elif shape == 2:  # huge magnitudes
        raw = rng.choice([-1, 1], count) * 10.0 ** rng.uniform(-300, 308, count)
    else:  # small integers (many values equal to an edge)
        raw = rng.integers(-5, 6, count).astype(float)
    edges = sorted({float(e) + 0.0 for e in raw if np.isfinite(e)})
    return edges if len(edges) >= 2 else [0.0, 1.0]


def _values(rng: np.random.Generator, edges: list[float]) -> np.ndarray:
    inner = np.array(edges, dtype=np.float64)
    near = np.concatenate([inner, np.nextafter(inner, np.inf), np.nextafter(inner, -np.inf),
                           -inner])
    spread = rng.uniform(edges[0] - 1, edges[-1] + 1, 20) if np.isfinite(
        edges[-1] - edges[0]) else rng.normal(0, 1, 20)
    return np.concatenate([np.array(SPECIALS), near, spread,
                           [edges[0] - abs(edges[0]) - 1, edges[-1] + abs(edges[-1]) + 1]])


def _polars_route(frame: pd.DataFrame, step: object) -> pd.DataFrame:
    """The step through Polars, as every other pandas derivation (the numpy route off)."""
    original = pandas_eval._binned
    pandas_eval._binned = lambda *_: None  # type: ignore[assignment]
    try:
        return pandas_eval.TARGET.apply(frame, step, {"x": pl.Float64})
    finally:
        pandas_eval._binned = original  # type: ignore[assignment]


def test_numpy_bins_equal_polars_bins_over_random_edges() -> None:
    rng = np.random.default_rng(20261129)
    routed = 0
    for i in range(200):
        edges = _edge_set(rng, i)
        x = _values(rng, edges)
        frame = pd.DataFrame({"x": rng.permutation(x)}, index=np.arange(len(x)) * 3)
        fill = None if i % 2 else float(rng.choice([edges[0], edges[-1], 0.0, x[-1]]))
        facts = types.SimpleNamespace(missing={} if fill is None else {"x": fill})
        step = bins.bin_step("x", edges, facts, {"x": pl.Float64})  # type: ignore[arg-type]
        search = _bins.bin_search(step.columns, {"x": pl.Float64})
        assert search is not None and _bins.bin_column(frame["x"], search, "b") is not None
        fast = pandas_eval.TARGET.apply(frame, step, {"x": pl.Float64})
        slow = _polars_route(frame, step)
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)
        assert str(fast[bins.BIN].dtype) == "Int64"
        routed += 1
    assert routed == 200


def test_signed_zero_infinities_and_the_closed_last_bin() -> None:
    edges = [-1.0, 0.0, 1.0, 2.0]
    x = [-np.inf, -2.0, -1.0, -0.0, 0.0, 5e-324, 1.0, 2.0, 3.0, np.inf, np.nan]
    facts = types.SimpleNamespace(missing={})
    step = bins.bin_step("x", edges, facts, {"x": pl.Float64})  # type: ignore[arg-type]
    out = pandas_eval.TARGET.apply(pd.DataFrame({"x": x}), step, {"x": pl.Float64})
    assert out[bins.BIN].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, pd.NA]


@pytest.mark.parametrize("column", [
    pd.Series([0.5, np.nan], dtype="float32"),
    pd.Series([0.5, None], dtype="Float64"),
    pd.Series([0.5, None], dtype="float64[pyarrow]"),
    pd.Series([1, 2], dtype="int64"),
])
def test_other_dtypes_keep_the_polars_route(column: pd.Series) -> None:
    frame = pd.DataFrame({"x": column})
    schema = pandas_eval.polars_schema(frame)
    step = bins.bin_step("x", [0.0, 1.0, 2.0], types.SimpleNamespace(missing={}),  # type: ignore[arg-type]
                         schema)
    search = _bins.bin_search(step.columns, schema)
    assert search is None or _bins.bin_column(frame["x"], search, bins.BIN) is None
    pd.testing.assert_frame_equal(pandas_eval.TARGET.apply(frame, step, schema),
                                  _polars_route(frame, step) if search is None else
                                  pandas_eval.TARGET.apply(frame, step, schema))


def test_only_the_bin_step_is_read_as_one() -> None:
    """A step that differs from bin_step's tree in any node keeps the Polars route."""
    import dataclasses

    from dpframe.rowwise.nodes import Lit

    facts = types.SimpleNamespace(missing={})
    step = bins.bin_step("x", [0.0, 1.0, 2.0], facts, {"x": pl.Float64})  # type: ignore[arg-type]
    ((name, tree),) = step.columns
    assert _bins.bin_search(step.columns, {"x": pl.Float64}) is not None
    assert _bins.bin_search(step.columns, {"x": pl.Float32}) is None
    other = dataclasses.replace(tree, otherwise=Lit(tree.dtype, 7))  # (not a bin number)
    assert _bins.bin_search(((name, other),), {"x": pl.Float64}) is None
    swapped = dataclasses.replace(tree, predicate=Lit(tree.predicate.dtype, True))
    assert _bins.bin_search(((name, swapped),), {"x": pl.Float64}) is None
    assert _bins.bin_search(((name, tree.then),), {"x": pl.Float64}) is None

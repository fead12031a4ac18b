"""A repeated histogram reuses its binned frame (issue 34: no second verification or
evaluation of the bin step, and the release finds the first one's plan), with the same
outcome as a first histogram on a new frame; a pandas bin column with dropped (missing) rows
is matched to the bins by the numpy kernel, exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation as engine
from dpframe.frames import bins as bins_
from dpframe.provenance import _protect as provenance
from dpframe.query import statistics as q_
from dpframe.query._keys import checked_keys
from dpframe.release._pipeline import exact_measurements

EDGES = [0.0, 2.5, 5.0, 7.5, 10.0]


def _data(missing: bool) -> dict[str, list[float]]:
    x = [0.5, 3.0, 9.9, 10.0, 5.0, 7.4, 2.5, 8.0]
    if missing:
        x[2] = np.nan
    return {"x": x}


@pytest.mark.parametrize("backend", ["pandas", "polars"])
def test_a_repeated_histogram_reuses_the_binned_frame_with_the_same_outcome(backend):
    make = pd.DataFrame if backend == "pandas" else pl.DataFrame
    pf = dpf.protect(make(_data(False)), epsilon=10.0, bounds={"x": (0, 10)},
                     missing={"x": 0.0})
    first = pf.dp.histogram("x", edges=EDGES, epsilon=1.0, random_state=5)
    facts = provenance.resolve(pf)
    cached = bins_._BINNED.get(facts)
    assert cached is not None and len(cached) == 1
    binned = next(iter(cached.values()))
    again = pf.dp.histogram("x", edges=EDGES, epsilon=1.0, random_state=5)
    assert next(iter(bins_._BINNED.get(facts).values())) is binned
    fresh = dpf.protect(make(_data(False)), epsilon=10.0, bounds={"x": (0, 10)},
                        missing={"x": 0.0}).dp.histogram("x", edges=EDGES, epsilon=1.0,
                                                           random_state=5)
    assert list(first["count"]) == list(again["count"]) == list(fresh["count"])
    pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=1.0)  # other edges: another entry
    assert len(bins_._BINNED.get(facts)) == 2


def test_binned_frames_per_frame_are_capped():
    pf = dpf.protect(pd.DataFrame(_data(False)), epsilon=100.0, bounds={"x": (0, 10)},
                     missing={"x": 0.0})
    for top in range(11, 11 + bins_.BINNED_PER_FRAME + 2):
        pf.dp.histogram("x", edges=[0.0, 5.0, float(top)], epsilon=1.0)
    assert len(bins_._BINNED.get(provenance.resolve(pf))) == bins_.BINNED_PER_FRAME


def test_a_nullable_bin_column_is_matched_by_the_numpy_kernel_exactly():
    pf = dpf.protect(pd.DataFrame(_data(True)), epsilon=10.0, bounds={"x": (0, 10)},
                     missing="drop")
    facts = provenance.resolve(pf)
    binned = pf.dp._binned("x", EDGES, None)
    native = provenance.resolve(binned).data
    assert str(native[bins_.BIN].dtype) == "Int64"
    keys = checked_keys(range(4))
    codes = engine.pandas_codes(native, bins_.BIN, keys)
    assert codes is not None and codes.tolist() == [0, 1, -1, 3, 2, 2, 1, 3]
    assert engine.pandas_codes(native, bins_.BIN, checked_keys([3, 0])).tolist() == [
        1, -1, -1, 0, -1, -1, -1, 0]
    exact = exact_measurements(binned, {"h": q_.count()}, group_by=bins_.BIN, keys=keys)
    ((values, _sensitivity),) = exact.values()
    present = np.array([v for v in _data(True)["x"] if v == v])
    assert values.tolist() == np.histogram(present, bins=EDGES)[0].tolist()
    assert facts is provenance.resolve(pf)

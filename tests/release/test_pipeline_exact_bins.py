"""``exact_measurements`` counts every bin of a quantile exactly, also where a release counts
only the blocks its draws read (the two-pass count of ``dpframe.engine._bins``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.release._pipeline import exact_measurements

B = 1 << 16  # (≥ 2¹⁵ bins and ≥ 2¹⁴ rows: the two-pass count applies)


def _exact_counts(x: np.ndarray) -> np.ndarray:
    t = (np.clip(x, 0.0, 100.0) * 0.5) / 50.0
    return np.bincount(np.minimum(np.floor(t * B).astype(np.int64), B - 1), minlength=B)


@pytest.mark.parametrize("replaced", [None, 99.0])  # neighbouring data sets
def test_exact_measurements_count_every_bin_of_a_quantile(replaced):
    x = np.random.default_rng(1).normal(50.0, 5.0, 20_000)
    if replaced is not None:
        x[0] = replaced
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = dpf.protect(pd.DataFrame({"x": x}), epsilon=1e9, bounds={"x": (0.0, 100.0)},
                            missing={"x": 0.0})
    out = exact_measurements(frame, {"q": dpf.quantile("x", 0.5, bins=B)})
    (counts, _sensitivity), = out.values()
    assert np.array_equal(np.asarray(counts).ravel(), _exact_counts(x))

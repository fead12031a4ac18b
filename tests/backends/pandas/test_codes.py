"""The pandas adapter's key codes of a nullable integer column over a run of consecutive keys
(dpframe.backends.pandas._codes) are the engine's general codes, row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpframe.backends.pandas._adapter import PandasBackend, _column_array
from dpframe.backends.pandas._codes import consecutive_run, nullable_int_codes
from dpframe.engine import pandas_codes
from dpframe.query._keys import checked_keys


@pytest.mark.parametrize("declared", [list(range(10)), list(range(-3, 7)), [5], [0, 2, 1],
                                      [2, 3, 5]])
def test_the_codes_are_the_engines(declared):
    rng = np.random.default_rng(7)
    values = pd.array(rng.integers(-20, 20, 400), dtype="Int64")
    values[rng.random(400) < 0.2] = pd.NA
    values[0], values[1] = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    frame = pd.DataFrame({"b": values, "x": rng.random(400)})
    keys = checked_keys(declared)
    fast = nullable_int_codes(_column_array(frame, "b"), keys)
    general = pandas_codes(frame, "b", keys)
    consecutive = declared == list(range(declared[0], declared[0] + len(declared)))
    assert (fast is not None) == consecutive == (consecutive_run(keys) is not None)
    assert np.array_equal(PandasBackend().key_codes(frame, "b", keys), general)
    if fast is not None:
        assert fast.dtype == np.int64 and np.array_equal(fast, general)


def test_other_columns_take_the_engines_path():
    keys = checked_keys(list(range(3)))
    frame = pd.DataFrame({"i": np.arange(6) % 4, "s": list("abcabc"),
                          "n": pd.array([0, 1, None, 2, 3, 1], dtype="Int32")})
    for column in ("i", "s", "n"):
        assert nullable_int_codes(_column_array(frame, column), keys) is None
    assert nullable_int_codes(_column_array(frame, "missing"), keys) is None

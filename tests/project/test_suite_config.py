"""The test suite's own set-up (tests/conftest.py): the derandomised Hypothesis profile holds
in every pytest-xdist worker, and the ``constructor`` backends build the frames they name."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import BACKENDS, DEFAULT_BACKENDS, Constructor
from hypothesis import settings


def test_hypothesis_profile_is_derandomised_in_this_worker():
    # each xdist worker imports conftest itself: the profile is loaded there, not inherited
    if os.environ.get("HYPOTHESIS_PROFILE", "dpframe") != "dpframe":
        pytest.skip("another Hypothesis profile was asked for (HYPOTHESIS_PROFILE)")
    assert settings.default.derandomize
    assert settings.default.database is None and settings.default.deadline is None


def test_xdist_worker_runs_in_its_own_temp_folder(tmp_path):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        assert worker in str(tmp_path)


@pytest.mark.parametrize(("name", "dtype"), [("pandas", "float64"),
                                             ("pandas-nullable", "Float64"),
                                             ("pandas-pyarrow", "double[pyarrow]")])
def test_pandas_backends_build_their_dtypes(name, dtype):
    assert name in BACKENDS
    frame = Constructor(name)({"x": [1.0, float("nan")], "s": ["a", None]})
    assert isinstance(frame, pd.DataFrame) and str(frame["x"].dtype) == dtype
    assert frame["x"].isna().tolist() == frame["s"].isna().tolist() == [False, True]


@pytest.mark.skip_backends("pandas-pyarrow", "spark")
def test_skip_backends_opts_a_test_out_of_some_backends(constructor, request):
    everything = request.config.getoption("--all-backends")
    assert constructor.name in (BACKENDS if everything else DEFAULT_BACKENDS)
    assert constructor.name not in ("pandas-pyarrow", "spark")

"""One backend fixture for the whole suite (issue 16 item 5).

``constructor`` knows every backend dpframe supports — ``"pandas"``, ``"polars"`` (eager),
``"polars-lazy"``, and the engines ``"duckdb"``, ``"spark"`` (local mode, one session per run)
and ``"dask"`` (local scheduler) — and builds a native frame from a dict of columns or a pandas
frame (modelled on narwhals' ``tests/conftest.py``)::

    def test_mean(constructor):
        pf = dpf.protect(constructor({"x": [1.0, 2.0]}), epsilon=1, bounds={"x": (0, 5)})

A test runs on the three in-memory backends unless it names others with
``@pytest.mark.backends(...)`` (the engine tests name the engines: a Spark release costs about
a second, too much for every test). Pick backends on the command line: ``pytest
--backends=pandas,polars`` (default: all); a test is parametrised over the intersection (never
generated just to be skipped).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

#: property tests draw their examples from a fixed seed (derandomised: a CI failure reproduces
#: on any machine) and have no per-example time limit (CI machines are slower and shared);
#: ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples when hunting for new failures
settings.register_profile("dpframe", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dpframe"))

#: every backend dpframe supports: in-memory frames, then the engines (started for real by the
#: tests: DuckDB in-process, Spark in local mode, Dask's local scheduler). Adding an engine is
#: one name here and one branch in Constructor.__call__.
IN_MEMORY = ("pandas", "polars", "polars-lazy")
ENGINES = ("duckdb", "spark", "dask")
BACKENDS = IN_MEMORY + ENGINES


class Constructor:
    """Builds native frames of one backend from a dict of columns (or a pandas frame).

    ``name`` is the backend's name as dpframe logs it; ``family`` the library results come
    back in (``"pandas"`` or ``"polars"``); ``lazy`` whether frames are ``LazyFrame``s.
    Missing values are kept as given: in Polars ``None`` becomes a null and ``NaN`` stays a
    float NaN (both are missing values to dpframe); pandas holds both as NaN in float columns.
    A pandas frame passed in is converted with ``nan_to_null=False``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.family = "polars" if name.startswith("polars") else "pandas"  # results' library
        self.lazy = name not in ("pandas", "polars")

    def __repr__(self) -> str:
        return self.name

    def __call__(self, data: Mapping[str, Any] | Any) -> Any:
        import pandas as pd

        if self.name in ENGINES:
            pdf = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
            return _engine_frame(self.name, pdf)
        if self.family == "pandas":
            return data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
        import polars as pl

        # fresh buffers every call: Polars converts numpy data without copying, and dpframe
        # refuses a second budget on buffers a protected frame already holds
        if isinstance(data, pd.DataFrame):
            frame = pl.from_pandas(data.copy(deep=True), nan_to_null=False)
        else:
            frame = pl.DataFrame({k: _plain(v) for k, v in dict(data).items()})
        return frame.lazy() if self.lazy else frame

    # -- reading release tables (always eager, of this backend's library) -----------------
    def column(self, table: Any, name: str) -> list[Any]:
        """A column of a release table or log as a Python list."""
        values = table[name]
        return values.to_list() if hasattr(values, "to_list") else list(values)

    def values(self, table: Any, name: str) -> np.ndarray:
        """A numeric column of a release table or log as a float array."""
        return np.asarray(self.column(table, name), dtype=float)


_SPARK: list[Any] = []


def spark_session() -> Any:
    """One local Spark session for the whole run, started on first use (Java 17 is on the CI
    machines; without Java the test is skipped with a message that says so)."""
    import shutil

    if not _SPARK:
        pytest.importorskip("pyspark")
        if shutil.which("java") is None:
            pytest.skip("Spark tests need Java (17) on the PATH; it is missing on this machine")
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[1]").appName("dpframe-tests")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.execution.arrow.pyspark.enabled", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        _SPARK.append(spark)
    return _SPARK[0]


def _engine_frame(name: str, pdf: Any) -> Any:
    import warnings

    if name == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        return duckdb.connect().from_df(pdf)
    if name == "dask":
        dd = pytest.importorskip("dask.dataframe")
        return dd.from_pandas(pdf, npartitions=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas 3
        return spark_session().createDataFrame(pdf)


def _plain(values: Any) -> Any:
    """numpy object/str arrays as lists (Polars then infers String with nulls for None)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "OU":
        return values.tolist()
    if isinstance(values, np.ndarray):
        return values.copy()
    return values


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        action="store",
        default=",".join(BACKENDS),
        help="comma-separated backends for the `constructor` fixture "
        f"(default: all of {', '.join(BACKENDS)}; tests run on the in-memory ones unless "
        "marked with @pytest.mark.backends(...))",
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SPARK:
        _SPARK.pop().stop()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names): run a `constructor` test only on these backends (intersected with "
        "--backends)",
    )
    selected_backends(config)  # a bad --backends is a usage error before collection


def selected_backends(config: pytest.Config) -> list[str]:
    raw = str(config.getoption("--backends"))
    chosen = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise pytest.UsageError(
            f"--backends: unknown backend(s) {unknown or raw!r}; choose from {', '.join(BACKENDS)}"
        )
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "constructor" not in metafunc.fixturenames:
        return
    chosen = selected_backends(metafunc.config)
    marker = metafunc.definition.get_closest_marker("backends")
    wanted = IN_MEMORY if marker is None else marker.args
    bad = [b for b in wanted if b not in BACKENDS]
    if bad:
        raise pytest.UsageError(f"@pytest.mark.backends: unknown backend(s) {bad}")
    chosen = [b for b in chosen if b in wanted]
    # an empty selection yields one test skipped by pytest ("got empty parameter set"): the
    # command line excluded every backend this test runs on
    metafunc.parametrize("constructor", [Constructor(b) for b in chosen], ids=chosen)

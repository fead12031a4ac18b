"""One backend fixture for the whole suite (issue 16 item 5, issue 22).

``constructor`` knows every backend dpframe supports — ``"pandas"`` (NumPy dtypes),
``"pandas-nullable"`` (pandas' nullable extension dtypes: ``Int64``, ``Float64``, ``string``,
``boolean``), ``"pandas-pyarrow"`` (Arrow-backed dtypes: ``double[pyarrow]`` ...),
``"polars"`` (eager), ``"polars-lazy"``, and the engines ``"duckdb"``, ``"spark"`` (local mode,
one session per pytest process) and ``"dask"`` (local scheduler) — and builds a native frame
from a dict of columns or a pandas frame (modelled on narwhals' ``tests/conftest.py``)::

    def test_mean(constructor):
        pf = dpf.protect(constructor({"x": [1.0, 2.0]}), epsilon=1, bounds={"x": (0, 5)})

Which backends a test runs on:

* ``@pytest.mark.backends("pandas", "duckdb")``: exactly these (a test that needs them);
* ``@pytest.mark.skip_backends("spark", ...)``: the default set less these (the opt-out, for a
  test that cannot run on some backend; say why in a comment);
* ``@pytest.mark.default_backends("pandas", ...)``: without ``--all-backends``, only these
  (a costly suite that keeps one engine out of CI's default run; say why);
* unmarked: the default set. By default that is ``DEFAULT_BACKENDS``: pandas in its three dtype
  families (NumPy, nullable, Arrow), Polars eager and lazy, and DuckDB (in-process: its 376
  cases add about 45 s of CPU, 25 s of a two-core CI run). With ``DPFRAME_TEST_BACKENDS=all``
  in the environment (or ``pytest --all-backends``) it is every backend, Spark and Dask
  included: opt-in, because on the two-core CI machine they add 1,150 more cases (a Spark
  release costs about a second: 464 s; Dask's scheduler about 150 s), more than the 10-minute
  budget leaves. Their engine-specific code paths have tests of their own that always run
  (``tests/backends/``, ``tests/backends/spark/test__rowwise.py``, the cluster tests).

``pytest --backends=pandas,polars`` (default: all) intersects every test's set with the given
ones; a test is parametrised over the intersection (never generated just to be skipped). Spark
cases skip with a message on a machine without Java.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from dpframe.backends import BACKENDS as REGISTERED

#: property tests draw their examples from a fixed seed (derandomised: a CI failure reproduces
#: on any machine) and have no per-example time limit (CI machines are slower and shared);
#: ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples when hunting for new failures
settings.register_profile("dpframe", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dpframe"))

#: every backend dpframe supports, from its registry (``dpframe.backends.BACKENDS``): the frames
#: in memory and readable plans (pandas, Polars, Polars lazy), then the engines (started for real
#: by the tests: DuckDB in-process, Spark in local mode, Dask's local scheduler). A new engine
#: registered there fails here until ``_ENGINE_FRAMES`` can build its frames.
IN_MEMORY = tuple(b.name for b in REGISTERED if not b.lazy or b.readable_plans)
#: pandas frames of extension dtypes (built from the same data, converted with convert_dtypes)
PANDAS_DTYPES = ("pandas-nullable", "pandas-pyarrow")
ENGINES = tuple(b.name for b in REGISTERED if b.name not in IN_MEMORY)
BACKENDS = IN_MEMORY[:1] + PANDAS_DTYPES + IN_MEMORY[1:] + ENGINES
#: the backends of an unmarked test: the in-memory ones (about 30 s of CI for the two pandas
#: dtype variants) and DuckDB (in-process, about 25 s); every backend with
#: ALL_BACKENDS_ENV=all or --all-backends
DEFAULT_BACKENDS = IN_MEMORY[:1] + PANDAS_DTYPES + IN_MEMORY[1:] + ("duckdb",)
ALL_BACKENDS_ENV = "DPFRAME_TEST_BACKENDS"


class Constructor:
    """Builds native frames of one backend from a dict of columns (or a pandas frame).

    ``name`` is the backend's name as dpframe logs it; ``family`` the library results come
    back in (``"pandas"`` or ``"polars"``); ``lazy`` whether frames are ``LazyFrame``s.
    Missing values are kept as given: in Polars ``None`` becomes a null and ``NaN`` stays a
    float NaN (both are missing values to dpframe); pandas holds both as NaN in float columns
    (``pd.NA`` in the nullable and Arrow dtypes, which ``convert_dtypes`` makes of NaN).
    A pandas frame passed in is converted with ``nan_to_null=False``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.family = "polars" if name.startswith("polars") else "pandas"  # results' library
        self.lazy = name in ("polars-lazy", *ENGINES)

    def __repr__(self) -> str:
        return self.name

    def __call__(self, data: Mapping[str, Any] | Any) -> Any:
        import pandas as pd

        if self.name in ENGINES:
            pdf = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
            return _engine_frame(self.name, pdf)
        if self.family == "pandas":
            pdf = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
            return _extension_dtypes(pdf, arrow=self.name == "pandas-pyarrow") if (
                self.name in PANDAS_DTYPES) else pdf
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


#: The JVM options of every JVM the tests start (Spark's local driver; the cluster tests' master,
#: workers, driver and executors): the client compiler only (no C2: a test's JVM lives for
#: seconds to minutes, and C2's compile threads took the two CI cores from the tests) and the
#: serial collector (heaps of a few hundred MB). The Spark rowwise comparisons took 70 s instead
#: of 111-160 s with them (11 tests, -n 0, load 7-9, both orders).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


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
                 .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.execution.arrow.pyspark.enabled", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        _SPARK.append(spark)
    return _SPARK[0]


def _duckdb_frame(pdf: Any) -> Any:
    duckdb = pytest.importorskip("duckdb")
    return duckdb.connect().from_df(pdf)


def _dask_frame(pdf: Any) -> Any:
    dd = pytest.importorskip("dask.dataframe")
    return dd.from_pandas(pdf, npartitions=2)


def _spark_frame(pdf: Any) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas 3
        return spark_session().createDataFrame(pdf)


#: how the tests build a frame of each registered engine from a pandas frame
_ENGINE_FRAMES: dict[str, Callable[[Any], Any]] = {
    "duckdb": _duckdb_frame, "dask": _dask_frame, "spark": _spark_frame}
assert set(_ENGINE_FRAMES) == set(ENGINES), (
    f"tests/conftest.py builds frames of {sorted(_ENGINE_FRAMES)} but dpframe registers the "
    f"engines {sorted(ENGINES)}: add a builder to _ENGINE_FRAMES")


def _engine_frame(name: str, pdf: Any) -> Any:
    return _ENGINE_FRAMES[name](pdf)


def _extension_dtypes(pdf: Any, arrow: bool) -> Any:
    """Each column in pandas' nullable dtype of the same width (``Float64``, ``Int32``,
    ``boolean``, ``string``) or, with ``arrow``, the Arrow-backed one (``double[pyarrow]`` ...);
    NaN becomes ``pd.NA``. Columns of other kinds (categoricals, objects that are not all
    strings) are left as they are; datetimes stay NumPy-backed in the nullable variant."""
    import pandas as pd
    import pyarrow as pa

    out = {}
    for name, col in pdf.items():
        dtype = col.dtype
        kind = getattr(dtype, "kind", "")
        if isinstance(dtype, pd.CategoricalDtype) or (not isinstance(dtype, np.dtype) and (
                not pd.api.types.is_string_dtype(dtype))):
            out[name] = col
        elif kind in "iufb" and arrow:
            out[name] = col.astype(pd.ArrowDtype(pa.from_numpy_dtype(dtype)))
        elif kind in "iuf":
            prefix = {"i": "Int", "u": "UInt", "f": "Float"}[kind]
            out[name] = col.astype(f"{prefix}{dtype.itemsize * 8}")
        elif kind == "b":
            out[name] = col.astype("boolean")
        elif kind == "M" and arrow:
            out[name] = col.astype(pd.ArrowDtype(pa.timestamp(np.datetime_data(dtype)[0])))
        elif pd.api.types.is_string_dtype(dtype) and all(
                isinstance(v, str) for v in col.dropna()):
            out[name] = col.astype(pd.ArrowDtype(pa.string()) if arrow else "string")
        else:
            out[name] = col
    return pd.DataFrame(out, index=pdf.index)


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
        f"(default: all of {', '.join(BACKENDS)}; an unmarked test runs on "
        f"{', '.join(DEFAULT_BACKENDS)} unless --all-backends)",
    )
    parser.addoption(
        "--all-backends",
        action="store_true",
        default=os.environ.get(ALL_BACKENDS_ENV, "") == "all",
        help="unmarked `constructor` tests run on every backend, Spark and Dask included, not "
        f"only the default ones (also: {ALL_BACKENDS_ENV}=all)",
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
    config.addinivalue_line(
        "markers",
        "skip_backends(*names, reason=...): run a `constructor` test on the default backends "
        "less these (the opt-out from --all-backends)",
    )
    config.addinivalue_line(
        "markers",
        "default_backends(*names, reason=...): without --all-backends, run a `constructor` "
        "test on these backends only",
    )
    selected_backends(config)  # a bad --backends is a usage error before collection


#: Modules whose tests run on one xdist worker, in file order (:func:`pytest_xdist_make_scheduler`):
#: the cluster tests, whose clusters are module-scoped and whose kill tests must run last.
SERIAL_MODULES = ("tests/backends/test_cluster.py",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (pyproject's addopts) with each module of :data:`SERIAL_MODULES`
    as one work unit, which starts first (the scheduler hands out the largest units first).
    xdist's own ``xdist_group`` marker does not group under pytest 9 (xdist 3.8 renames
    ``item._nodeid``, which pytest 9 no longer reads), so the cluster tests were split over
    both workers: two Spark clusters at once, one more cluster start (about 55 s), and kill
    tests not last."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleUnits(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in SERIAL_MODULES else super()._split_scope(nodeid)

    return ModuleUnits(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The cluster tests run where Java works (:func:`_cluster_tests_wanted`), all on one
    xdist worker (:data:`SERIAL_MODULES`)."""
    cluster = [item for item in items if item.get_closest_marker("cluster") is not None]
    stray = sorted({item.nodeid.split("::", 1)[0] for item in cluster} - set(SERIAL_MODULES))
    if stray:
        raise pytest.UsageError(f"cluster tests outside SERIAL_MODULES (tests/conftest.py): "
                                f"{stray}")
    if cluster and not config.option.markexpr and not _cluster_tests_wanted():
        config.hook.pytest_deselected(items=cluster)
        items[:] = [item for item in items if item.get_closest_marker("cluster") is None]


@functools.lru_cache(maxsize=1)
def _cluster_tests_wanted() -> bool:
    """The cluster tests run in a plain ``pytest`` where Java works (Spark's standalone
    cluster needs it) unless DPFRAME_CLUSTER_TESTS=0; ``-m cluster`` selects them anyway."""
    import subprocess

    if os.environ.get("DPFRAME_CLUSTER_TESTS", "1") == "0":
        return False
    try:
        return subprocess.run(["java", "-version"], capture_output=True, timeout=60,
                              check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def selected_backends(config: pytest.Config) -> list[str]:
    raw = str(config.getoption("--backends"))
    chosen = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise pytest.UsageError(
            f"--backends: unknown backend(s) {unknown or raw!r}; choose from {', '.join(BACKENDS)}"
        )
    return chosen


def _known(names: tuple[str, ...], mark: str) -> tuple[str, ...]:
    bad = [b for b in names if b not in BACKENDS]
    if bad:
        raise pytest.UsageError(f"@pytest.mark.{mark}: unknown backend(s) {bad}")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "constructor" not in metafunc.fixturenames:
        return
    chosen = selected_backends(metafunc.config)
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None:
        wanted = _known(marker.args, "backends")
    else:
        wanted = BACKENDS if metafunc.config.getoption("--all-backends") else DEFAULT_BACKENDS
        default = metafunc.definition.get_closest_marker("default_backends")
        if default is not None and not metafunc.config.getoption("--all-backends"):
            wanted = _known(default.args, "default_backends")
        skip = metafunc.definition.get_closest_marker("skip_backends")
        if skip is not None:
            wanted = tuple(b for b in wanted if b not in _known(skip.args, "skip_backends"))
    chosen = [b for b in chosen if b in wanted]
    # an empty selection yields one test skipped by pytest ("got empty parameter set"): the
    # command line excluded every backend this test runs on
    metafunc.parametrize("constructor", [Constructor(b) for b in chosen], ids=chosen)

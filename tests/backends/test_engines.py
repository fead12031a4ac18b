"""DuckDB, Spark (local mode) and Dask (local scheduler): the same queries, derivations,
group-by and release as a Polars LazyFrame, with the engines started by the tests themselves.

Every engine must give exactly the aggregates pandas gives (the exact statistics of every
measurement agree bit for bit), refuse what it cannot verify, and keep its public size honest
when the data under it changes.
"""

from __future__ import annotations

import math

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.release._pipeline import exact_measurements

ENGINES = ("duckdb", "spark", "dask")
BOUNDS = {"age": (0.0, 100.0), "income": (0.0, 1000.0)}
KEYS = {"g": ["a", "b", "c"]}


pytestmark = pytest.mark.backends(*ENGINES)


def data(n: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    age = rng.uniform(0, 100, n)
    age[0] = math.nan
    age[1] = math.inf
    return pd.DataFrame({"age": age, "income": rng.uniform(0, 1000, n).round(0),
                         "g": [["a", "b", "c", "zzz"][i % 4] for i in range(n)]})


QUERIES = {"n": dpf.count(), "s": dpf.sum("age"), "m": dpf.mean("age"),
           "v": dpf.variance("age"), "sd": dpf.std("age"), "mi": dpf.mean("income")}


@pytest.mark.parametrize("missing", ["drop", 50.0])
@pytest.mark.parametrize("grouped", [False, True])
def test_exact_statistics_equal_pandas(constructor, missing, grouped):
    kw = {"epsilon": 10.0, "bounds": BOUNDS, "keys": KEYS,
          "missing": {"age": missing, "income": 0.0}}
    reference = dpf.protect(data(), **kw)
    frame = dpf.protect(constructor(data()), **kw)
    group = {"group_by": "g"} if grouped else {}
    for view in (lambda f: f, lambda f: f.dp.filter(nw.col("income") > 300)):
        want = exact_measurements(view(reference), QUERIES, **group)
        got = exact_measurements(view(frame), QUERIES, **group)
        assert want.keys() == got.keys()
        for key in want:
            assert np.array_equal(want[key][0], got[key][0]), key
            assert want[key][1] == got[key][1]


def test_queries_release_and_log(constructor):
    frame = dpf.protect(constructor(data()), epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing=0.0)
    assert 0.0 <= frame.dp.mean("age", epsilon=0.5) <= 100.0
    table = frame.dp.release(QUERIES, epsilon=1.0)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == list(QUERIES)
    by_group = frame.dp.groupby("g").mean("income", epsilon=1.0)
    assert by_group["g"].tolist() == ["a", "b", "c"]  # declared keys only, in order
    assert frame.dp.cov(["age", "income"], epsilon=1.0).shape == (2, 2)
    assert list(frame.dp.describe(epsilon=1.0).index) == ["count", "mean", "std", "lower",
                                                          "upper"]
    log = frame.dp.log
    assert log["engine"].str.contains("-lazy").all()
    assert frame.dp.budget.epsilon_spent == pytest.approx(4.5)


def test_verified_derivations_and_sizes(constructor):
    frame = dpf.protect(constructor(data()), epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing=0.0)
    derived = frame.dp.with_columns((nw.col("income") / 10).alias("k"),
                                    bounds={"k": (0.0, 100.0)})
    assert derived.dp.size == 30
    older = derived.dp.filter(nw.col("age") >= 50).dp.rename({"k": "income10"})
    assert not older.dp.is_size_public
    assert 0.0 <= older.dp.mean("income10", epsilon=1.0) <= 100.0
    assert "protect > with_columns > filter > select" in older.dp.log["derivation"].iloc[-1]


def test_unverifiable_derivations_are_refused_before_reading(constructor, monkeypatch):
    from dpframe.engine import _aggregation as engine

    frame = dpf.protect(constructor(data()), epsilon=10.0, bounds=BOUNDS, keys=KEYS)
    calls = {"n": 0}
    real = engine.aggregate
    monkeypatch.setattr(engine, "aggregate", lambda *a, **k: (calls.__setitem__(
        "n", calls["n"] + 1), real(*a, **k))[1])
    native = nw.from_native(frame).filter(nw.col("age") > 1).to_native()  # not through .dp
    with pytest.raises(dpf.NoLedgerError, match=r"frame\.dp\.filter"):
        native.dp.count(epsilon=1.0)
    with pytest.raises(dpf.DerivationError):
        frame.dp.filter(nw.col("age") > nw.col("age").mean())
    assert calls["n"] == 0 and frame.dp.budget.epsilon_spent == 0.0


def test_bad_input_spends_nothing(constructor):
    frame = dpf.protect(constructor(data()), epsilon=1.0, bounds={"age": (0.0, 100.0)}, keys=KEYS)
    for call, error in [
        (lambda: frame.dp.mean("income", epsilon=0.1), dpf.BoundsError),
        (lambda: frame.dp.mean("nope", epsilon=0.1), dpf.UnsupportedInputError),
        (lambda: frame.dp.mean("g", epsilon=0.1), dpf.UnsupportedInputError),
        (lambda: frame.dp.mean("age", epsilon=5.0), dpf.BudgetExceededError),
        (lambda: frame.dp.groupby("g", keys=[1, 2]).count(epsilon=0.1), dpf.ParameterError),
        (lambda: frame.dp.mean("age", epsilon=0.1, session=dpf.Session()), dpf.LedgerError),
        (lambda: dpf.protect(frame, epsilon=1.0, bounds={}), dpf.LedgerError),
    ]:
        with pytest.raises(error):
            call()
    assert frame.dp.budget.epsilon_spent == 0.0


def test_a_duckdb_table_that_grows_after_protect_is_not_read():
    """A relation over a table reads the table's current rows: dpframe copies them at protect
    and every release reads the copy, so rows inserted later are never read."""
    duckdb = pytest.importorskip("duckdb")
    from dpframe.release._pipeline import exact_measurements

    con = duckdb.connect()
    con.execute("create table t as select range::double as x from range(100)")
    frame = dpf.protect(con.table("t"), epsilon=10.0, bounds={"x": (0.0, 200.0)}, missing=0.0)
    before = exact_measurements(frame, {"s": dpf.sum("x"), "n": dpf.count()})
    con.execute("insert into t select 150.0 from range(50)")
    after = exact_measurements(frame, {"s": dpf.sum("x"), "n": dpf.count()})
    assert {k: v[0].tolist() for k, v in before.items()} == {
        k: v[0].tolist() for k, v in after.items()}
    frame.dp.mean("x", epsilon=1.0)
    assert frame.dp.budget.epsilon_spent == 1.0


def test_dp_function_reaches_the_namespace_of_any_frame():
    duckdb = pytest.importorskip("duckdb")
    rel = dpf.protect(duckdb.connect().from_df(data()), epsilon=1.0, bounds=BOUNDS)
    assert dpf.dp(rel).size == 30
    with pytest.raises(dpf.UnsupportedInputError):
        dpf.dp([1, 2, 3])


@pytest.mark.parametrize("engine", ["duckdb", "duckdb-sql", "dask"])
def test_a_file_rewritten_with_the_same_row_count_is_refused(tmp_path, engine):
    import polars as pl

    path = tmp_path / "src.parquet"
    x = np.random.default_rng(2).uniform(0, 1, 200)
    pl.DataFrame({"x": x}).write_parquet(path)
    if engine.startswith("duckdb"):
        duckdb = pytest.importorskip("duckdb")
        con = duckdb.connect()
        frame = con.read_parquet(str(path)) if engine == "duckdb" else con.sql(
            f"select * from read_parquet('{path}')")
    else:
        dd = pytest.importorskip("dask.dataframe")
        frame = dd.read_parquet(str(path))
    p = dpf.protect(frame, bounds={"x": (0.0, 1.0)}, epsilon=5.0, missing=0.0)
    p.dp.mean("x", epsilon=1.0)
    pl.DataFrame({"x": np.full(200, x[0])}).write_parquet(path)  # same n, other content
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0)
    assert p.dp.budget.epsilon_spent == 1.0


def test_spark_files_are_bound_by_their_metadata_without_a_count_job(tmp_path, monkeypatch):
    """A Spark frame over Parquet files is checked before each release by its file list and
    the files' size/mtime/inode (no Spark job); a changed file or a refreshed listing is
    refused before anything is read or spent."""
    import polars as pl
    from conftest import spark_session

    from dpframe.backends import Backend, aggregate
    from dpframe.engine._aggregation import Agg

    spark = spark_session()
    folder = tmp_path / "src"
    folder.mkdir()
    x = np.random.default_rng(4).uniform(0, 1, 300)
    for i in range(3):
        pl.DataFrame({"x": x[i * 100:(i + 1) * 100]}).write_parquet(folder / f"p{i}.parquet")
    p = dpf.protect(spark.read.parquet(str(folder)), bounds={"x": (0.0, 1.0)}, epsilon=5.0,
                    missing=0.0)
    assert p.dp.size == 300

    def no_count(self, frame, **kw):
        raise AssertionError("the public size must not be re-counted")

    monkeypatch.setattr(Backend, "count_rows", no_count)
    p.dp.mean("x", epsilon=1.0)
    # a file added to the folder: Spark keeps reading the listing it made, so the protected
    # rows are still exactly the ones read (nothing to refuse)
    pl.DataFrame({"x": np.ones(50)}).write_parquet(folder / "p3.parquet")
    assert aggregate(p, [Agg("rows")], missing={})[Agg("rows")][0] == 300
    p.dp.mean("x", epsilon=1.0)
    spark.catalog.refreshByPath(str(folder))  # re-lists cached plans only: still the same
    assert aggregate(p, [Agg("rows")], missing={})[Agg("rows")][0] == 300
    # a cached plan over the same file index: refreshing it re-lists the folder for every frame
    # sharing that index, so the protected frame would now read 350 rows: refused
    p.cache()
    spark.catalog.refreshByPath(str(folder))
    assert aggregate(p, [Agg("rows")], missing={})[Agg("rows")][0] == 350
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0)
    assert p.dp.budget.epsilon_spent == 2.0


def test_spark_file_rewritten_with_the_same_row_count_is_refused(tmp_path, monkeypatch):
    import polars as pl
    from conftest import spark_session

    from dpframe.backends import Backend

    path = tmp_path / "src.parquet"
    x = np.random.default_rng(2).uniform(0, 1, 200)
    pl.DataFrame({"x": x}).write_parquet(path)
    p = dpf.protect(spark_session().read.parquet(str(path)), bounds={"x": (0.0, 1.0)},
                    epsilon=5.0, missing=0.0)
    monkeypatch.setattr(Backend, "count_rows", lambda self, frame, **kw: 200)  # would pass
    p.dp.mean("x", epsilon=1.0)
    pl.DataFrame({"x": np.full(200, x[0])}).write_parquet(path)  # same n, other content
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0)
    path.unlink()
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0)
    assert p.dp.budget.epsilon_spent == 1.0


def test_spark_frames_not_made_of_bound_files_are_recounted(monkeypatch):
    """In-memory data Spark holds as an RDD could come from anywhere: it is re-counted."""
    from dpframe.backends import SPARK, Backend

    frame = dpf.protect(spark_frame(data()), epsilon=5.0, bounds=BOUNDS, missing=0.0)
    assert SPARK.bound_files(frame) is None
    calls = []
    real = Backend.count_rows
    monkeypatch.setattr(Backend, "count_rows",
                        lambda self, f, **kw: (calls.append(1), real(self, f, **kw))[1])
    frame.dp.mean("age", epsilon=1.0)
    assert calls == [1]


def spark_frame(pdf):
    from conftest import Constructor

    return Constructor("spark")(pdf)

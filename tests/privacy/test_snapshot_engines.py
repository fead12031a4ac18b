"""What protect captured is what every release reads, on the lazy engines (DESIGN §2, rule 1).

Each case builds a frame over memory the user can still write (a numpy array under pandas or
Arrow, a DuckDB table), protects it, overwrites the source in place with a statement that reads
nothing out (``arr[:] = arr[t]``, SQL ``UPDATE``), then runs seeded releases of every statistic
family, a ``.dp`` derivation, a declared-key group-by and a key selection: they equal those of
an unwritten twin, bit for bit. Two independent Dask frames with equal values each read their
own bytes. Native derivations of a protected DuckDB relation are refused at protect.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf

pa = pytest.importorskip("pyarrow")

N = 600
KEYS = ["a", "b", "c"]


def _values() -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(30)
    return rng.uniform(0.0, 100.0, N), [KEYS[i % 3] for i in range(N)]


def _bits(value: Any) -> Any:
    """Every float as its exact hex form, through tables, dicts and lists."""
    if hasattr(value, "to_dict"):
        return _bits(value.to_dict("list"))
    if isinstance(value, dict):
        return {str(k): _bits(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bits(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value).hex()
    if isinstance(value, np.integer):
        return int(value)
    return value


def releases(p: Any, full: bool = True) -> str:
    """Seeded releases of every statistic family, a derivation, a declared-key group-by and a
    key selection, as exact bits (``full=False``: a mean, a derivation and a group-by, for
    Spark, where each release costs about a second)."""
    import narwhals as nw

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not full:
            return json.dumps(_bits([
                p.dp.mean("x", epsilon=0.5, random_state=3),
                p.dp.filter(nw.col("x") > 30.0).dp.mean("x", epsilon=0.5, random_state=7),
                p.dp.groupby("g", keys=KEYS).mean("x", epsilon=0.5, random_state=8),
            ]), sort_keys=True)
        out = [
            p.dp.count(epsilon=0.5, random_state=1),
            p.dp.sum("x", epsilon=0.5, random_state=2),
            p.dp.mean("x", epsilon=0.5, random_state=3),
            p.dp.variance("x", epsilon=0.5, random_state=4),
            p.dp.median("x", epsilon=0.5, random_state=5),
            p.dp.histogram("x", edges=[0, 25, 50, 75, 100], epsilon=0.5, random_state=6),
            p.dp.filter(nw.col("x") > 30.0).dp.mean("x", epsilon=0.5, random_state=7),
            p.dp.groupby("g", keys=KEYS).mean("x", epsilon=0.5, random_state=8),
            p.dp.groupby("g").count(epsilon=0.5, delta=1e-6, random_state=9),
        ]
    return json.dumps(_bits(out), sort_keys=True, default=str)


def _protect(frame: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(frame, epsilon=100.0, delta=1e-3, bounds={"x": (0.0, 100.0)},
                           missing=0.0)


def _arrow_pandas(x: np.ndarray, g: list[str]) -> pd.DataFrame:
    """A pandas frame whose Arrow-backed columns are zero-copy views of ``x``."""
    frame = pa.table({"x": pa.array(x), "g": pa.array(g)}).to_pandas(types_mapper=pd.ArrowDtype)
    buffer = frame["x"].array._pa_array.chunk(0).buffers()[1]
    assert buffer.address == x.ctypes.data  # the route really shares the user's buffer
    return frame


def _numpy_pandas(x: np.ndarray, g: list[str]) -> pd.DataFrame:
    """A pandas frame whose numpy column is a view of ``x``."""
    frame = pd.DataFrame(x.reshape(-1, 1), columns=["x"], copy=False).assign(g=g)
    assert np.shares_memory(frame["x"].to_numpy(), x)
    return frame


def _overwrite(x: np.ndarray) -> None:
    x[:] = x[7]  # reads nothing out, branches on nothing: every row now holds row 7's value


def _dask_frames() -> dict[str, Callable[[np.ndarray, list[str], bool], Any]]:
    """Dask routes; ``twin``: the unwritten twin, whose leaf must not be deduplicated by Dask
    into the frame under test (Dask names hash the values: an extra column, or a named array,
    keeps the twin's expression its own under any version of dpframe)."""
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")

    def mark(frame: pd.DataFrame, twin: bool) -> pd.DataFrame:
        return frame.assign(twin=1.0) if twin else frame

    return {
        "dask from pandas": lambda x, g, twin: dd.from_pandas(
            mark(_numpy_pandas(x, g), twin), npartitions=3),
        "dask from Arrow-backed pandas": lambda x, g, twin: dd.from_pandas(
            mark(_arrow_pandas(x, g), twin), npartitions=3),
        "dask from Arrow-backed pandas, one partition": lambda x, g, twin: dd.from_pandas(
            mark(_arrow_pandas(x, g), twin), npartitions=1),
        "dask from a dask array": lambda x, g, twin: dd.from_dask_array(
            da.from_array(x, chunks=200, name="twin" if twin else None), columns=["x"]).assign(
            g=dd.from_pandas(pd.Series(g, name="g"), npartitions=3)),
    }


@pytest.mark.parametrize("route", list(_dask_frames()))
def test_dask_release_reads_the_bytes_protect_captured(route):
    make = _dask_frames()[route]
    x, g = _values()
    source = x.copy()
    p = _protect(make(source, g, False))
    _overwrite(source)
    got = releases(p)
    assert got == releases(_protect(make(x.copy(), g, True)))  # an unwritten twin


def test_two_equal_dask_frames_each_read_their_own_bytes():
    """Two independent frames with equal values: Dask deduplicates live expressions by a name
    that hashes the values, so the second frame (and before this issue, the second data set's
    releases) resolved to the first frame's expression and read its buffer as its owner
    later wrote it. Each snapshot now has an expression of its own, and protect takes the
    protected frame's expressions out of Dask's table, so a frame built afterwards over equal
    values reads its own memory."""
    dd = pytest.importorskip("dask.dataframe")
    from dpframe.provenance._protect import resolve

    x, g = _values()
    first, second = x.copy(), x.copy()
    pa_ = _protect(dd.from_pandas(_arrow_pandas(first, g), npartitions=2))
    b = dd.from_pandas(_arrow_pandas(second, g), npartitions=2)
    pb = _protect(b)
    assert resolve(pa_).data.expr._name != resolve(pb).data.expr._name
    _overwrite(first)
    got_b, got_a = releases(pb), releases(pa_)
    _overwrite(second)  # (after protect: reaches neither)
    twin = releases(_protect(dd.from_pandas(_arrow_pandas(x.copy(), g).assign(twin=1.0),
                                            npartitions=2)))
    assert got_a == got_b == twin == releases(pb)


def test_a_dask_frame_that_dask_resolved_to_a_protected_frames_memory_is_refused():
    """Built before the first was protected, the second frame already reads the first one's
    buffer (Dask's deduplication, not dpframe's): protecting it would open a second budget on
    that memory, so it is refused like any frame over a protected frame's memory."""
    dd = pytest.importorskip("dask.dataframe")
    x, g = _values()
    a = dd.from_pandas(_arrow_pandas(x.copy(), g), npartitions=2)
    b = dd.from_pandas(_arrow_pandas(x.copy(), g), npartitions=2)
    _protect(a)
    with pytest.raises(dpf.LedgerError):
        _protect(b)


def test_writing_a_computed_dask_partition_does_not_reach_the_snapshot():
    dd = pytest.importorskip("dask.dataframe")
    x, g = _values()
    expected = releases(_protect(dd.from_pandas(pd.DataFrame({"x": x, "g": g, "twin": 1.0}),
                                                npartitions=2)))
    p = _protect(dd.from_pandas(pd.DataFrame({"x": x.copy(), "g": g}), npartitions=2))
    part = p.partitions[0].compute()
    for write in (lambda: part["x"].array.__setitem__(slice(None), 0.0),
                  lambda: part.iloc.__setitem__((slice(None), 0), 0.0)):
        with contextlib.suppress(ValueError):  # (a read-only buffer: also fine)
            write()
    assert releases(p) == expected


def _duckdb_frames() -> dict[str, Callable[[np.ndarray, list[str]], tuple[Any, Any]]]:
    duckdb = pytest.importorskip("duckdb")

    def table(x: np.ndarray, g: list[str]) -> tuple[Any, Any]:
        con = duckdb.connect()
        con.register("source", pa.table({"x": pa.array(x), "g": pa.array(g)}))
        con.execute("CREATE TABLE people AS SELECT * FROM source")
        con.unregister("source")
        return con, con.table("people")

    return {
        "duckdb from pandas": lambda x, g: (x, duckdb.connect().from_df(_numpy_pandas(x, g))),
        "duckdb from Arrow-backed pandas": lambda x, g: (x, duckdb.connect().from_df(
            _arrow_pandas(x, g))),
        "duckdb from an Arrow table": lambda x, g: (x, duckdb.connect().from_arrow(
            pa.table({"x": pa.array(x), "g": pa.array(g)}))),
        "duckdb table changed by UPDATE": table,
    }


@pytest.mark.parametrize("route", list(_duckdb_frames()))
def test_duckdb_release_reads_the_bytes_protect_captured(route):
    make = _duckdb_frames()[route]
    x, g = _values()
    source, relation = make(x.copy(), g)
    p = _protect(relation)
    if isinstance(source, np.ndarray):
        _overwrite(source)
    else:
        source.execute("UPDATE people SET x = 0.0")
        assert relation.aggregate("max(x)").fetchall()[0][0] == 0.0  # the table did change
    got = releases(p)
    assert got == releases(_protect(make(x.copy(), g)[1]))  # an unwritten twin


def test_duckdb_copy_shares_no_buffer_with_the_source():
    """The snapshot of a relation over memory is DuckDB's own result, not a view of it."""
    duckdb = pytest.importorskip("duckdb")
    x, g = _values()
    table = pa.table({"x": pa.array(x), "g": pa.array(g)})
    source = [(b.address, b.address + b.size) for column in table.columns
              for chunk in column.chunks for b in chunk.buffers() if b is not None]
    for relation in (duckdb.connect().from_arrow(table), duckdb.connect().from_df(
            pd.DataFrame(x.reshape(-1, 1), columns=["x"], copy=False))):
        copy = relation.to_arrow_table()
        for column in copy.columns:
            for chunk in column.chunks:
                for b in chunk.buffers():
                    if b is not None:
                        assert not any(b.address < hi and lo < b.address + b.size
                                       for lo, hi in source)


def test_native_derivations_of_a_protected_duckdb_relation_are_refused():
    duckdb = pytest.importorskip("duckdb")
    import narwhals as nw

    x, g = _values()
    con = duckdb.connect()
    relation = con.from_df(pd.DataFrame({"x": x, "g": g}))
    p = _protect(relation)
    derived = p.dp.filter(nw.col("x") > 10.0)
    routes = {
        "project": lambda: relation.project("x + 0 AS x, g"),
        "filter": lambda: relation.filter("x > 1"),
        "order": lambda: relation.order("x"),
        "limit": lambda: relation.limit(N),
        "set_alias then project": lambda: relation.set_alias("other").project("x, g"),
        "native step on a .dp derivation": lambda: derived.project("x, g"),
    }
    for name, make in routes.items():
        with pytest.raises(dpf.LedgerError):
            _protect(make())
        assert p.dp.budget.epsilon_spent == 0.0, name
    # an independent relation over equal values is another data set (no value is compared)
    _protect(con.from_df(pd.DataFrame({"x": x.copy(), "g": g})))


def test_native_derivations_of_protected_file_relations_and_dask_frames_are_refused(tmp_path):
    """The same rule where the link is a generated alias of a file relation, the files read,
    or the pandas objects a Dask frame's leaves read."""
    duckdb = pytest.importorskip("duckdb")
    dd = pytest.importorskip("dask.dataframe")
    x, g = _values()
    path = tmp_path / "people.parquet"
    pd.DataFrame({"x": x, "g": g}).to_parquet(path)
    relation = duckdb.read_parquet(str(path))
    _protect(relation)
    frame = dd.from_pandas(pd.DataFrame({"x": x.copy(), "g": g}), npartitions=2)
    _protect(frame)
    for derived in (relation.project("x, g"), relation.filter("x > 1"),
                    frame[frame.x > 1.0], frame.assign(y=frame.x + 1.0)):
        with pytest.raises(dpf.LedgerError):
            _protect(derived)


def test_spark_from_pandas_reads_the_rows_protect_captured():
    from conftest import spark_session

    spark = spark_session()
    x, g = _values()

    def make(values: np.ndarray) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return spark.createDataFrame(pd.DataFrame({"x": values, "g": g}, copy=False))

    source = x.copy()
    p = _protect(make(source))
    _overwrite(source)
    got = releases(p, full=False)
    assert got == releases(_protect(make(x.copy())), full=False)  # an unwritten twin

"""What protect captured is what every release reads (issue 30, DESIGN §2 rule 1).

A matrix of constructor routes (numpy, Arrow over numpy buffers, sliced Arrow arrays, pandas
nullable arrays, Polars from numpy / Arrow / pandas, eager and ``.lazy()``) over the dtype
families a frame carries (float, int, bool, datetime, Decimal, String, Categorical /
dictionary, List, Struct, object cells): protect, then write the user's memory in place with
statements that read nothing out (``arr[:] = arr[k]``), and separately write through the
returned frame, the arrays taken from it and a derived frame; every statistic family, a ``.dp``
derivation, a group-by and a key selection with a fixed seed then equal the unwritten twin's,
bit for bit, and dpframe's snapshot shares no byte with the user's arrays.
"""

from __future__ import annotations

import contextlib
import datetime
import warnings
from collections.abc import Callable
from typing import Any

import narwhals as nw
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import dpframe as dpf
from dpframe._util.memory import own_arrow
from dpframe.backends.polars._memory import own_polars, polars_plan_ranges, polars_ranges
from dpframe.errors import LedgerError
from dpframe.provenance import _protect as provenance

N = 300  # rows the routes read
PAD = 3  # rows the sliced routes drop
K = 7  # the row whose value every in-place write copies everywhere
KEYS = ["a", "b", "c"]
CUTOFF = datetime.datetime(2020, 1, 1, 0, 2, 30)
BOUNDS = {"x": (0.0, 100.0), "i": (0.0, 1000.0)}


# -- the user's memory --------------------------------------------------------------------
def _sources() -> dict[str, Any]:
    """The numpy arrays (N + PAD rows) every route builds its frame over without copying."""
    rng = np.random.default_rng(30)
    m = N + PAD
    src: dict[str, Any] = {
        "x": rng.uniform(0.0, 100.0, m),
        "i": rng.integers(0, 1000, m).astype(np.int64),
        "b": rng.integers(0, 2, m).astype(bool),
        "t": (np.datetime64("2020-01-01T00:00:00", "us")
              + (rng.integers(0, 300, m) * 1_000_000).astype("timedelta64[us]")),
        "s_off": np.arange(m + 1, dtype=np.int32),  # one-letter strings
        "s_data": np.frombuffer(bytes(np.array([97, 98, 99], np.uint8)[rng.integers(0, 3, m)]),
                                dtype=np.uint8).copy(),
        "d": np.zeros((m, 2), dtype=np.int64),  # decimal128 (low, high words)
        "l_off": np.arange(0, 2 * m + 1, 2, dtype=np.int32),
        "l_vals": rng.integers(0, 50, 2 * m).astype(np.int64),
        "c_idx": rng.integers(0, 3, m).astype(np.int32),
        "mask": np.zeros(m, dtype=bool),
    }
    src["d"][:, 0] = rng.integers(0, 10_000, m)
    src["o"] = [[int(v)] for v in rng.integers(0, 9, m)]  # mutable cells
    return src


def _write_sources(src: dict[str, Any]) -> None:
    """Overwrite the user's memory in place, reading nothing out and branching on nothing."""
    for name, array in src.items():
        if name == "o":
            for cell in array:
                cell[0] = -1
                cell.append(99)
        elif name == "mask":
            array[:] = True
        else:
            array[:] = array[K]


def _arrow_arrays(src: dict[str, Any]) -> dict[str, pa.Array]:
    """Arrow arrays over the numpy buffers (``pa.array`` zero-copy, ``from_buffers`` over
    ``pa.py_buffer`` of numpy arrays)."""
    m = len(src["x"])
    strings = pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(src["s_off"]),
                                                     pa.py_buffer(src["s_data"])])
    return {
        "x": pa.array(src["x"]),
        "i": pa.array(src["i"]),
        "b": pa.array(src["b"]),
        "t": pa.array(src["t"]),
        "s": strings,
        "d": pa.Array.from_buffers(pa.decimal128(12, 2), m, [None, pa.py_buffer(src["d"])]),
        "l": pa.Array.from_buffers(pa.list_(pa.int64()), m, [None, pa.py_buffer(src["l_off"])],
                                   children=[pa.array(src["l_vals"])]),
        "st": pa.StructArray.from_arrays([pa.array(src["i"]), strings], names=["k", "v"]),
        "c": pa.DictionaryArray.from_arrays(pa.array(src["c_idx"]), pa.array(KEYS)),
    }


def _arrow_table(src: dict[str, Any], sliced: bool) -> pa.Table:
    table = pa.table(_arrow_arrays(src))
    return table.slice(PAD) if sliced else table.slice(0, N)


def _string_array(src: dict[str, Any]) -> Any:
    """pandas' ``str`` / ``string[pyarrow]`` column over the numpy buffers."""
    return pd.arrays.ArrowStringArray(pa.chunked_array([_arrow_arrays(src)["s"].slice(0, N)]))


def _pandas_numpy(src: dict[str, Any]) -> pd.DataFrame:
    cells = np.empty(N, dtype=object)
    for j in range(N):
        cells[j] = src["o"][j]
    return pd.DataFrame({
        "x": src["x"][:N], "i": src["i"][:N], "b": src["b"][:N], "t": src["t"][:N],
        "s": _string_array(src),
        "c": pd.Categorical.from_codes(src["c_idx"][:N], categories=KEYS),
        "o": cells,
    }, copy=False)


def _pandas_nullable(src: dict[str, Any]) -> pd.DataFrame:
    mask = src["mask"][:N]
    return pd.DataFrame({
        "x": pd.arrays.FloatingArray(src["x"][:N], mask),
        "i": pd.arrays.IntegerArray(src["i"][:N], mask),
        "b": pd.arrays.BooleanArray(src["b"][:N], mask),
        "t": src["t"][:N],
        "s": _string_array(src),
    }, copy=False)


def _polars_strings(src: dict[str, Any]) -> Any:
    """A Polars String column over the numpy buffers (Polars converts it to views)."""
    return pl.from_arrow(_arrow_arrays(src)["s"].slice(0, N))


def _polars_numpy(src: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame({"x": src["x"][:N], "i": src["i"][:N], "b": src["b"][:N],
                         "t": src["t"][:N]}).with_columns(
        s=_polars_strings(src))


def _polars_from_numpy(src: dict[str, Any]) -> pl.DataFrame:
    return pl.concat([pl.from_numpy(src[c][:N], schema=[c]) for c in ("x", "i", "b", "t")],
                     how="horizontal").with_columns(s=_polars_strings(src))


def _polars_pandas(src: dict[str, Any]) -> pl.DataFrame:
    frame = pd.DataFrame({"x": src["x"][:N], "i": src["i"][:N], "b": src["b"][:N],
                          "t": src["t"][:N]}, copy=False)
    return pl.from_pandas(frame).with_columns(
        s=_polars_strings(src))


ROUTES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "pandas-numpy": _pandas_numpy,
    "pandas-nullable": _pandas_nullable,
    "pandas-arrow": lambda src: _arrow_table(src, False).to_pandas(types_mapper=pd.ArrowDtype),
    "pandas-arrow-sliced": lambda src: _arrow_table(src, True).to_pandas(
        types_mapper=pd.ArrowDtype),
    "polars-numpy": _polars_numpy,
    "polars-from_numpy": _polars_from_numpy,
    "polars-arrow": lambda src: pl.from_arrow(_arrow_table(src, False)),
    "polars-arrow-sliced": lambda src: pl.from_arrow(_arrow_table(src, True)),
    "polars-pandas": _polars_pandas,
}


def _lazy(build: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda src: build(src).lazy()


ROUTES.update({f"{name}-lazy": _lazy(build) for name, build in list(ROUTES.items())
               if name.startswith("polars")})


def _protect(frame: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(frame, epsilon=1000.0, delta=1e-5, bounds=BOUNDS,
                           keys={"s": KEYS}, missing={"x": 0.0, "i": 0.0})


def _derived(pf: Any) -> Any:
    return pf.dp.with_columns((nw.col("x") * 2).alias("x2"), bounds={"x2": (0.0, 200.0)})


# -- what a release reads -------------------------------------------------------------------
def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    try:
        table = nw.from_native(value, eager_only=True)
    except TypeError:
        return repr(value)
    return _canonical(table.to_dict(as_series=False))


def _releases(pf: Any, derived: Any) -> dict[str, Any]:
    """Every statistic family, a derivation (made before any write, and a new one), a
    group-by and a key selection, each with a fixed seed."""
    dp = pf.dp
    eps = {"epsilon": 1.0, "random_state": 5}
    out = {
        "count": dp.count(**eps),
        "sum": dp.sum("x", **eps),
        "sum_int": dp.sum("i", **eps),
        "mean": dp.mean("x", **eps),
        "variance": dp.variance("x", **eps),
        "median": dp.median("x", **eps),
        "quantile": dp.quantile("i", q=[0.25, 0.75], **eps),
        "histogram": dp.histogram("x", bins=5, **eps),
        "value_counts": dp.value_counts("s", **eps),
        "group_by": dp.groupby("s").mean("x", **eps),
        "key_selection": dp.groupby("s", selection_share=0.5).sum("x", delta=1e-6, **eps),
        "derived_before": derived.dp.sum("x2", **eps),
        "derived_after": _derived(pf).dp.mean("x2", **eps),
        "filter_bool": pf.dp.filter(nw.col("b")).dp.count(**eps),
        "filter_time": pf.dp.filter(nw.col("t") < CUTOFF).dp.sum("x", **eps),
        "filter_string": pf.dp.filter(nw.col("s") == "a").dp.sum("i", **eps),
    }
    if "c" in nw.from_native(pf).collect_schema():  # a categorical / dictionary column
        out["value_counts_categorical"] = dp.value_counts("c", keys=KEYS, **eps)
    return {name: _canonical(value) for name, value in out.items()}


def _snapshot(pf: Any) -> Any:
    data = provenance.resolve(pf).data
    return data.collect() if isinstance(data, pl.LazyFrame) else data


def _ranges(frame: Any) -> list[tuple[int, int]]:
    """Every buffer of every column (numpy arrays under pandas extension arrays too)."""
    if isinstance(frame, pl.LazyFrame):
        return polars_plan_ranges(frame)
    if isinstance(frame, pl.DataFrame):
        return polars_ranges(frame)
    out = []
    for _name, series in frame.items():
        array = series.array
        chunked = getattr(array, "_pa_array", None)
        if chunked is not None:
            out += [(b.address, b.address + b.size) for c in chunked.chunks
                    for b in c.buffers() if b is not None and b.size]
            continue
        for attr in ("_ndarray", "_data", "_mask"):
            values = getattr(array, attr, None)
            if isinstance(values, np.ndarray) and values.nbytes:
                start = values.__array_interface__["data"][0]
                out.append((start, start + values.nbytes))
    return out


def _overlap(ranges: list[tuple[int, int]], src: dict[str, Any]) -> list[str]:
    hit = []
    for name, array in src.items():
        if isinstance(array, np.ndarray) and array.nbytes:
            start = array.__array_interface__["data"][0]
            if any(a < start + array.nbytes and start < b for a, b in ranges):
                hit.append(name)
    return hit


# -- writing through what the user holds ------------------------------------------------------
_VALUE_BUFFER = {1: (pa.types.is_floating, pa.types.is_integer, pa.types.is_temporal,
                     pa.types.is_boolean, pa.types.is_decimal),
                 2: (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary)}


def _scribble_arrow(chunked: Any) -> None:
    """Write every writable value buffer of an Arrow column (values and string bytes; never
    offsets or validity, so the column stays valid) through ``np.frombuffer``."""
    chunks = chunked.chunks if isinstance(chunked, pa.ChunkedArray) else [chunked]
    for chunk in chunks:
        buffers = chunk.buffers()
        for index, checks in _VALUE_BUFFER.items():
            if index < len(buffers) and any(check(chunk.type) for check in checks):
                buf = buffers[index]
                if buf is not None and buf.is_mutable and buf.size:
                    view = np.frombuffer(buf, dtype=np.uint8)
                    view[:] = view[0]


def _scribble_numpy(array: Any) -> None:
    with contextlib.suppress(ValueError, TypeError):  # (read-only, as it should be)
        array[:] = array[K]


def _write_through(frame: Any) -> None:
    """Write through a frame the user holds and every array taken from it."""
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    if isinstance(frame, pl.DataFrame):
        for series in frame.iter_columns():
            if series.dtype.is_numeric() or series.dtype == pl.Boolean:
                _scribble_numpy(series.to_numpy())
            _scribble_arrow(series.to_arrow())
        _scribble_numpy(frame.select(pl.col(pl.Float64)).to_numpy())
        for column in frame.to_arrow().columns:
            _scribble_arrow(column)
        return
    for name in frame.columns:
        series = frame[name]
        array = series.array
        chunked = getattr(array, "_pa_array", None)
        if isinstance(series.dtype, pd.CategoricalDtype):  # (its categories, shared by copies)
            categories = series.dtype.categories.array
            if getattr(categories, "_pa_array", None) is not None:
                _scribble_arrow(categories._pa_array)
            else:
                _scribble_numpy(categories)
        if chunked is not None:
            _scribble_arrow(chunked)
        elif series.dtype != object:
            _scribble_numpy(array)
            _scribble_numpy(series.to_numpy())
            _scribble_numpy(series.values)
        else:
            for cell in series:
                if isinstance(cell, list):
                    cell.append(5)
    _scribble_numpy(frame.select_dtypes("number").values)


# -- the matrix -----------------------------------------------------------------------------
def _twin(route: str) -> tuple[dict[str, Any], Any]:
    pf = _protect(ROUTES[route](_sources()))
    return _releases(pf, _derived(pf)), _snapshot(pf)


def _assert_same_snapshot(got: Any, want: Any) -> None:
    if isinstance(want, pl.DataFrame):
        assert got.equals(want, null_equal=True)
    else:
        pd.testing.assert_frame_equal(got, want)


@pytest.mark.parametrize("route", list(ROUTES))
def test_writing_the_users_memory_changes_no_release(route: str) -> None:
    src = _sources()
    frame = ROUTES[route](src)
    before = _ranges(frame)
    assert _overlap(before, src), "the route must build its frame over the user's memory"
    pf = _protect(frame)
    derived = _derived(pf)
    assert not _overlap(_ranges(provenance.resolve(pf).data), src)
    _write_sources(src)
    want, want_snapshot = _twin(route)
    assert _releases(pf, derived) == want
    _assert_same_snapshot(_snapshot(pf), want_snapshot)


@pytest.mark.parametrize("route", list(ROUTES))
def test_writing_through_the_returned_frame_changes_no_release(route: str) -> None:
    pf = _protect(ROUTES[route](_sources()))
    derived = _derived(pf)
    _write_through(pf)
    _write_through(derived)
    want, want_snapshot = _twin(route)
    assert _releases(pf, derived) == want
    _assert_same_snapshot(_snapshot(pf), want_snapshot)


def test_every_column_of_the_snapshot_is_dpframes_own() -> None:
    """Decimal, strings, lists, structs, dictionaries of a Polars frame over numpy buffers:
    the snapshot shares no byte with them (the eager snapshot used to copy numbers only)."""
    src = _sources()
    frame = pl.from_arrow(_arrow_table(src, False))
    assert set(_overlap(_ranges(frame), src)) >= {"x", "i", "d", "l_vals"}
    pf = _protect(frame)
    assert _overlap(_ranges(provenance.resolve(pf).data), src) == []


# -- the copies themselves ------------------------------------------------------------------
@pytest.mark.parametrize("sliced", [False, True])
def test_own_arrow_copies_every_buffer_read_only(sliced: bool) -> None:
    src = _sources()
    for name, array in _arrow_arrays(src).items():
        if sliced:
            array = array.slice(PAD, N - PAD)
        chunked = pa.chunked_array([array, array.slice(1, 5)])
        owned = own_arrow(chunked)
        assert owned.equals(chunked), name
        assert owned.type == chunked.type
        new = [b for c in owned.chunks for b in c.buffers() if b is not None and b.size]
        old = {b.address for c in chunked.chunks for b in c.buffers() if b is not None}
        assert new and not {b.address for b in new} & old, name
        assert not any(b.is_mutable for b in new), name
        assert not _overlap([(b.address, b.address + b.size) for b in new], src), name


def test_own_polars_copies_every_dtype() -> None:
    import decimal

    frame = pl.DataFrame({
        "f": np.arange(4.0), "b": [True, False, None, True],
        "d": pl.Series([decimal.Decimal("1.25")] * 4, dtype=pl.Decimal(10, 2)),
        "i128": pl.Series([1, 2, 3, -(2**100)], dtype=pl.Int128),
        "s": ["a", "bb", None, "a much longer string than twelve bytes"],
        "cat": pl.Series(["x", "y", "x", None], dtype=pl.Categorical),
        "en": pl.Series(["x", "y", "x", "y"], dtype=pl.Enum(["x", "y"])),
        "l": [[1, 2], [], None, [3]], "arr": pl.Series([[1, 2]] * 4, dtype=pl.Array(pl.Int64, 2)),
        "st": [{"a": 1, "b": "q"}, None, {"a": 2, "b": None}, {"a": 3, "b": "r"}],
        "bin": [b"ab", None, b"", b"z"],
        "t": [datetime.datetime(2020, 1, 1)] * 4,
        "dur": pl.Series([1, 2, 3, 4]).cast(pl.Duration("ms")),
        "o": pl.Series([[1], [2], [3], [4]], dtype=pl.Object),
    }).slice(1)
    owned = own_polars(frame)
    assert owned.schema == frame.schema
    assert owned.drop("o").equals(frame.drop("o"), null_equal=True)
    assert owned["o"].to_list() == frame["o"].to_list()
    assert owned["o"][0] is not frame["o"][0]  # a list cell: deep-copied
    assert not set(polars_ranges(owned.drop("o"))) & set(
        polars_ranges(frame.drop("o")))


def test_pandas_snapshot_is_read_only_and_its_cells_are_copies() -> None:
    src = _sources()
    pf = _protect(_pandas_numpy(src))
    data = provenance.resolve(pf).data
    assert not data["x"].array._ndarray.flags.writeable
    with pytest.raises(ValueError):
        data["x"].array[0] = 1.0
    assert data["o"].iloc[0] is not src["o"][0] and data["o"].iloc[0] == src["o"][0]
    derived = _derived(pf)
    with pytest.raises(ValueError):
        derived["x"].array[0] = 1.0  # (it would write what the snapshot holds)
    assert derived["o"].iloc[0] is not data["o"].iloc[0]
    kept = provenance.resolve(derived).data  # what releases of the derived frame read
    assert kept["o"].iloc[0] is not derived["o"].iloc[0]
    with pytest.raises(ValueError):
        kept["x"].array[0] = 1.0


# -- LazyFrames -----------------------------------------------------------------------------
def test_a_lazy_plan_over_memory_is_collected_once_and_files_stay_lazy(tmp_path: Any) -> None:
    from dpframe._util.polars_plan import scan_nodes, scanned_frames

    src = _sources()
    path, other = tmp_path / "more.parquet", tmp_path / "other.parquet"
    pl.DataFrame({"x": [1.0, 2.0], "i": [3, 4]}).write_parquet(path)
    pl.DataFrame({"x": [1.0, 2.0], "i": [3, 4]}).write_parquet(other)
    over_files = pl.scan_parquet(other)
    pf = dpf.protect(over_files, epsilon=1.0, bounds=BOUNDS, missing={"x": 0.0, "i": 0.0})
    data = provenance.resolve(pf).data
    assert scan_nodes(data) and not scanned_frames(data)  # the plan itself: it reads files

    memory = pl.DataFrame({"x": src["x"][:N], "i": src["i"][:N]})
    mixed = pl.concat([memory.lazy(), pl.scan_parquet(path)])
    pf = dpf.protect(mixed, epsilon=1.0, bounds=BOUNDS, missing={"x": 0.0, "i": 0.0})
    data = provenance.resolve(pf).data
    assert not scan_nodes(data) and len(scanned_frames(data)) == 1
    assert pf.dp.size == N + 2
    assert not _overlap(_ranges(data), src)
    # a native derivation of the protected plan is verified and read from the copy
    native = pf.filter(pl.col("x") > 10).with_columns(y=pl.col("x") * 2)
    assert isinstance(native.dp.count(epsilon=0.5, random_state=1), float)


@pytest.mark.parametrize("build", [
    lambda arr: pl.DataFrame({"x": arr}).lazy(),
    lambda arr: pl.from_arrow(pa.table({"x": pa.array(arr)})).lazy(),
    lambda arr: pl.from_pandas(pd.DataFrame({"x": arr}, copy=False)).lazy(),
], ids=["numpy", "arrow", "pandas"])
def test_the_issues_attack_on_a_streamed_lazyframe(build: Callable[[Any], Any]) -> None:
    """The issue's reproduction: a mean after ``arr[:] = arr[t]`` gave person t's value. Above
    IN_MEMORY_ROWS rows, so the release runs on Polars' streaming engine."""
    from dpframe.backends.polars._adapter import IN_MEMORY_ROWS

    rows = IN_MEMORY_ROWS + 1

    def protected() -> tuple[Any, Any]:
        arr = np.random.default_rng(1).uniform(0.0, 100.0, rows)
        return arr, dpf.protect(build(arr), epsilon=1.0, bounds={"x": (0.0, 100.0)},
                                missing={"x": 0.0})

    arr, pf = protected()
    arr[:] = arr[K]
    _twin_arr, twin = protected()
    got = pf.dp.mean("x", epsilon=0.1, random_state=3)
    assert got == twin.dp.mean("x", epsilon=0.1, random_state=3)
    assert abs(got - arr[K]) > 1.0


def test_a_lazy_plan_failing_at_protect_names_no_value() -> None:
    lazy = pl.LazyFrame({"x": ["1.5", "oops"]}).select(pl.col("x").cast(pl.Float64))
    with pytest.raises(dpf.UnsupportedInputError) as caught:
        dpf.protect(lazy, epsilon=1.0, bounds={"x": (0.0, 1.0)}, missing="drop")
    assert "oops" not in str(caught.value)


def test_lazy_privacy_units_over_memory() -> None:
    lazy = pl.DataFrame({"uid": np.arange(40) // 2, "x": np.linspace(0, 10, 40)}).lazy()
    pf = dpf.protect(lazy, epsilon=1.0, bounds={"x": (0.0, 10.0)}, missing={"x": 0.0},
                     privacy_unit="uid", max_rows_per_unit=2)
    assert pf.dp.count_units(epsilon=0) == 20
    assert isinstance(pf.dp.sum("x", epsilon=0.5, random_state=2), float)


# -- native derivations of a protected eager frame (point 4 of the issue) ----------------------
@pytest.mark.parametrize("derive", [
    lambda pf: pf.with_columns(pl.col("age") + 0),
    lambda pf: pf.with_columns((pl.col("age") * 2).alias("twice")),
    lambda pf: pf.cast({"age": pl.Float32}),
    lambda pf: pf.select(pl.all()),
    lambda pf: pf.filter(pl.col("age") > 3),
    lambda pf: pf.head(50),
    lambda pf: pf.rename({"income": "pay"}),
    lambda pf: pf.clone(),
], ids=["with_columns", "with_new_column", "cast_one", "select", "filter", "head", "rename",
        "clone"])
def test_native_polars_derivations_sharing_buffers_are_refused(derive: Any) -> None:
    from dpframe.datasets import CENSUS_BOUNDS, census

    pf = dpf.protect(census(200, backend="polars"), epsilon=1.0, bounds=CENSUS_BOUNDS,
                     missing="drop")
    with pytest.raises(LedgerError):
        dpf.protect(derive(pf), epsilon=1.0, bounds={"age": (0, 120)}, missing="drop")


def test_derivations_writing_only_fresh_buffers_stay_the_curators_job() -> None:
    """A ``sort`` (or a cast of every column) writes new buffers for every column: nothing
    links it to the protected frame except its values, which dpframe never compares (the
    docs leave such copies to the curator)."""
    from dpframe.datasets import CENSUS_BOUNDS, census

    pf = dpf.protect(census(200, backend="polars"), epsilon=1.0, bounds=CENSUS_BOUNDS,
                     missing="drop")
    again = dpf.protect(pf.sort("age"), epsilon=1.0, bounds={"age": (0, 120)}, missing="drop")
    assert again.dp.session is not pf.dp.session



def test_a_cell_that_cannot_be_copied_is_refused_at_protect_with_dpframes_message():
    """protect copies object cells that can change in place; one that cannot be copied (a lock)
    is refused before anything is protected or spent, without the copier's message."""
    import threading

    frame = pd.DataFrame({"x": [1.0, 2.0], "o": pd.Series([threading.Lock(), 1], dtype=object)})
    with pytest.raises(dpf.UnsupportedInputError, match="could not copy") as info:
        dpf.protect(frame, epsilon=1.0, bounds={"x": (0.0, 5.0)})
    assert "pickle" not in str(info.value) and info.value.__cause__ is None

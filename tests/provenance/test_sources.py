"""CSV sources (dpframe/provenance/_sources.py): declared types, parsed in full at protect, never an
error in a release.

A CSV reader that infers types from the first rows fails on a later value inside a release,
quoting it: whether the release fails then depends on one row. Neighbouring files that differ
only in such a late value must give the same outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dpframe as dpf

ROWS = "".join(f"{20 + i % 50},{i % 7}\n" for i in range(300))


def _csv(folder: Path, late: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.csv"
    path.write_text(f"age,k\n{ROWS}{late},1\n")
    return path


def test_polars_csv_with_inferred_types_is_refused_before_reading(tmp_path):
    path = _csv(tmp_path, "55")
    with pytest.raises(dpf.UnsupportedInputError, match=r"schema=\{"):
        dpf.protect(pl.scan_csv(path), epsilon=1.0, bounds={"age": (0.0, 100.0)})


def test_polars_csv_with_declared_lenient_types_reads_bad_values_as_missing(tmp_path):
    outcomes = []
    for late in ("55", "fifty-five"):
        path = _csv(tmp_path / late, late)
        lf = dpf.protect(pl.scan_csv(path, schema={"age": pl.Float64, "k": pl.Int64},
                                     ignore_errors=True, truncate_ragged_lines=True),
                         epsilon=10.0, bounds={"age": (0.0, 100.0)}, missing=0.0)
        assert lf.dp.size == 301
        lf.dp.mean("age", epsilon=1.0, random_state=0)
        outcomes.append([e["mechanism"] for e in lf.dp.session.ledger.entries])
    assert outcomes[0] == outcomes[1]


def test_a_csv_that_does_not_parse_as_declared_is_refused_at_protect_without_its_text(
        tmp_path):
    path = _csv(tmp_path, "fifty-five")
    with pytest.raises(dpf.UnsupportedInputError) as info:
        dpf.protect(pl.scan_csv(path, schema={"age": pl.Int64, "k": pl.Int64}), epsilon=1.0,
                    bounds={"age": (0.0, 100.0)})
    assert "fifty-five" not in str(info.value) and "declared column types" in str(info.value)


def test_duckdb_csv_sources_declare_types_and_never_drop_rows(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = _csv(tmp_path, "55")
    with pytest.raises(dpf.UnsupportedInputError, match="infer"):
        dpf.protect(duckdb.connect().sql(f"SELECT * FROM read_csv('{path}')"), epsilon=1.0,
                    bounds={"age": (0.0, 100.0)})
    # duckdb.read_csv(path) sniffs the types when the relation is made and writes them into
    # its SQL as declared columns; a value beyond the sniffed sample is then caught by the
    # full parse at protect, never in a release
    late = tmp_path / "late.csv"  # a bad value after DuckDB's 20,480-row sample
    late.write_text("age,k\n" + "".join(f"{i % 90},1\n" for i in range(30_000)) + "x1,1\n")
    with pytest.raises(dpf.UnsupportedInputError, match="declared column types"):
        dpf.protect(duckdb.read_csv(str(late)), epsilon=1.0, bounds={"age": (0.0, 100.0)})
    with pytest.raises(dpf.UnsupportedInputError, match="ignore_errors"):
        dpf.protect(duckdb.connect().sql(
            f"SELECT * FROM read_csv('{path}', columns={{'age': 'DOUBLE', 'k': 'BIGINT'}}, "
            "ignore_errors=true)"), epsilon=1.0, bounds={"age": (0.0, 100.0)})
    rel = dpf.protect(duckdb.read_csv(str(path), dtype={"age": "DOUBLE", "k": "BIGINT"}),
                      epsilon=1.0, bounds={"age": (0.0, 100.0)}, missing=0.0)
    assert rel.dp.size == 301
    rel.dp.mean("age", epsilon=0.5)


def test_dask_csv_sources_declare_every_column(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    path = _csv(tmp_path, "55")
    with pytest.raises(dpf.UnsupportedInputError, match="dtype="):
        dpf.protect(dd.read_csv(str(path)), epsilon=1.0, bounds={"age": (0.0, 100.0)})
    ddf = dpf.protect(dd.read_csv(str(path), dtype={"age": "float64", "k": "int64"}),
                      epsilon=1.0, bounds={"age": (0.0, 100.0)}, missing=0.0)
    ddf.dp.mean("age", epsilon=0.5)
    bad = _csv(tmp_path / "bad", "fifty-five")
    with pytest.raises(dpf.UnsupportedInputError, match="declared column types"):
        dpf.protect(dd.read_csv(str(bad), dtype={"age": "float64", "k": "int64"}),
                    epsilon=1.0, bounds={"age": (0.0, 100.0)})


def test_the_public_size_of_a_csv_is_the_rows_its_parse_gives(tmp_path):
    """Polars' fast row count and its parser disagree on a stray quote before a CRLF: the
    public n comes from the full parse at protect (and a malformed file is refused there)."""
    rows = "".join(f"{i},name{i}\n" for i in range(1, 101))
    kw = {"schema": {"x": pl.Float64, "s": pl.String}, "ignore_errors": True,
          "truncate_ragged_lines": True}
    good = tmp_path / "good.csv"
    good.write_bytes(("x,s\n" + rows + "7,a\r\n").encode())
    lf = dpf.protect(pl.scan_csv(good, **kw), epsilon=1.0, bounds={"x": (0.0, 200.0)})
    from dpframe.release._pipeline import exact_measurements

    every = lf.dp.filter(pl.col("x").is_null() | pl.col("x").is_not_null())  # counted rows
    seen = exact_measurements(every, {"c": dpf.count()})[("c", "count")][0].tolist()
    assert [lf.dp.size] == [int(v) for v in seen] == [101]
    bad = tmp_path / "bad.csv"
    bad.write_bytes(("x,s\n" + rows + '7,a"\r\n').encode())
    with pytest.raises(dpf.UnsupportedInputError, match="does not parse cleanly"):
        dpf.protect(pl.scan_csv(bad, **kw), epsilon=1.0, bounds={"x": (0.0, 200.0)})


def _parquet(folder: Path, last: bytes) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "data.parquet"
    text = pa.array([b"a"] * 300 + [last], pa.binary()).view(pa.string())  # not validated
    pq.write_table(pa.table({"s": text, "x": [float(i % 50) for i in range(301)]}), path)
    return path


def _readers() -> dict[str, Any]:
    def duckdb_reader(path: Path) -> Any:
        duckdb = pytest.importorskip("duckdb")
        return duckdb.connect().sql(f"SELECT * FROM read_parquet('{path}')")

    def dask_reader(path: Path) -> Any:
        dd = pytest.importorskip("dask.dataframe")
        return dd.read_parquet(str(path))

    return {"polars": pl.scan_parquet, "duckdb": duckdb_reader, "dask": dask_reader}


@pytest.mark.parametrize("reader", ["polars", "duckdb", "dask"])
def test_parquet_with_a_string_that_is_not_utf8_is_refused_at_protect(tmp_path, reader):
    """The review's neighbours: one row's bytes b"b" or b"\\xff". Every release reading the
    column failed on the second; now it is refused when protected (no budget exists yet) and
    the first answers."""
    read = _readers()[reader]
    good = dpf.protect(read(_parquet(tmp_path / "good", b"b")), epsilon=1.0,
                       bounds={"x": (0.0, 50.0)}, keys={"s": ["a", "b"]})
    import narwhals as nw

    assert good.dp.filter(nw.col("s") == "a").dp.count(epsilon=0.5) > 0
    with pytest.raises(dpf.UnsupportedInputError, match="UTF-8") as info:
        dpf.protect(read(_parquet(tmp_path / "bad", b"\xff")), epsilon=1.0,
                    bounds={"x": (0.0, 50.0)})
    assert "\\xff" not in str(info.value)

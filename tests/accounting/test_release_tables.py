"""A whole analysis in one file (issue 23): ``dpf.concat_releases`` builds the tidy long table
of ``dpframe release`` from any mix of release tables (matrices included), sealed; the
post-processing functions (round, rename, sort) keep a release verifiable and record their
step in the seal; Polars' own ``write_parquet`` writes no log and reading such a file says so
and names the writer to use."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import dpframe as dpf
from dpframe.accounting._release_tables import (
    LONG_COLUMNS,
    TIDY_COLUMNS,
    release_rows,
    tidy_rows,
)
from dpframe.accounting.seals import release_log_of
from dpframe.spec._release import _output_rows
from dpframe.spec._run import OUTPUT_COLUMNS


def _long_concat(tables: Any, **options: Any) -> Any:
    """``concat_releases`` in the long form of earlier versions (what most of this file
    checks; the tidy default has its own tests, tests/report/test_analysis.py too)."""
    return dpf.concat_releases(tables, form="long", **options)

KEY = b"steward-key"


def _data(n=120):
    rng = np.random.default_rng(3)
    return {"x": rng.uniform(0, 10, n), "y": rng.uniform(0, 5, n),
            "g": np.array(["a", "b", "c"] * (n // 3)), "k": np.array([1, 2] * (n // 2))}


def _analysis(lib):
    pf = dpf.protect(lib(_data()), epsilon=50.0, bounds={"x": (0, 10), "y": (0, 5)},
                     keys={"g": ["a", "b", "c"], "k": [1, 2]}, missing={"x": 0.0, "y": 0.0})
    return pf, {
        "overall": pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.5,
                                 random_state=1, ci=0.9),
        "describe": pf.dp.describe(epsilon=1.0, random_state=2),
        "corr": pf.dp.corr(["x", "y"], epsilon=1.0, random_state=3),
        "cov": pf.dp.cov(["x", "y"], epsilon=1.0, random_state=4, ci=0.9),
        "hist": pf.dp.histogram("x", bins=3, epsilon=0.5, random_state=5),
        "counts": pf.dp.value_counts("g", epsilon=0.5, random_state=6),
        "by_g": pf.dp.groupby("g").release({"n": dpf.count(), "m": dpf.mean("y")},
                                           epsilon=0.5, random_state=7),
        "by_k": pf.dp.groupby("k").mean("x", epsilon=0.5, random_state=8),
        "quantiles": pf.dp.quantile("x", [0.25, 0.75], epsilon=0.5, random_state=9, ci=0.9),
    }


@pytest.fixture(scope="module")
def analyses():
    return {"pandas": _analysis(pd.DataFrame), "polars": _analysis(pl.DataFrame)}


def _pandas(table):
    return table if isinstance(table, pd.DataFrame) else table.to_pandas()


def _wide_cells(table):
    """Every statistic cell of a wide release table as {(group, statistic): value}, read
    independently of the long-table code (labels: non-float columns, bin edges, the index)."""
    pdf = _pandas(table)
    labelled = not isinstance(pdf.index, pd.RangeIndex) or "column" in pdf or "statistic" in pdf
    if isinstance(table, pd.DataFrame) and labelled:
        pdf = pdf.reset_index()
    labels = [c for c in pdf.columns
              if pdf[c].dtype.kind != "f" or c.startswith("bin_") or c == "q"]
    out = {}
    for row in pdf.to_dict("records"):  # (iterrows would make an int key a float)
        texts = [repr(float(row[c])) if isinstance(row[c], float) else str(row[c])
                 for c in labels]
        for c in pdf.columns:
            if c not in labels:
                out[(", ".join(texts) or None, c)] = float(row[c])
    return out


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_long_table_holds_every_cell_of_every_table(analyses, lib):
    _, tables = analyses[lib]
    long = _long_concat(tables)
    assert type(long) is type(tables["overall"])
    pdf = _pandas(long)
    assert list(pdf.columns) == list(LONG_COLUMNS)
    assert pdf["value"].dtype == np.float64
    for name, table in tables.items():
        part = pdf[pdf["query"] == name]
        got = {(g if isinstance(g, str) else None, s): v
               for g, s, v in zip(part["group"], part["statistic"], part["value"], strict=True)}
        assert got == _wide_cells(table), name
        assert len(part) == len(got)
    assert set(pdf.loc[pdf["query"] == "corr", "group_by"]) == {"column"}
    assert set(pdf.loc[pdf["query"] == "cov", "group_by"]) == {"statistic,column"}
    assert set(pdf.loc[pdf["query"] == "describe", "group_by"]) == {"statistic"}
    assert set(pdf.loc[pdf["query"] == "hist", "group_by"]) == {"bin_lower,bin_upper"}
    assert set(pdf.loc[pdf["query"] == "by_k", "group"]) == {"1", "2"}
    assert set(pdf.loc[pdf["query"] == "quantiles", "group"]) == {"0.25", "0.75"}
    assert pdf.loc[pdf["query"] == "overall", "group_by"].isna().all()


def test_pandas_and_polars_give_the_same_long_table(analyses):
    a = _long_concat(analyses["pandas"][1])
    b = _long_concat(analyses["polars"][1]).to_pandas()
    pd.testing.assert_frame_equal(a, b)


def test_cli_rows_are_the_tidy_table(analyses):
    """``dpframe release`` writes the table ``concat_releases`` gives by default: the tidy one
    (value, lower, upper, one column per key)."""
    _, tables = analyses["polars"]
    rows = _output_rows("by_g", tables["by_g"])
    assert rows == tidy_rows("by_g", tables["by_g"])
    tidy = dpf.concat_releases({"by_g": tables["by_g"]})
    assert list(tidy.columns[:5]) == list(TIDY_COLUMNS) == list(OUTPUT_COLUMNS)
    assert rows == tidy.to_dicts()


def test_the_long_form_is_still_written_on_request(analyses):
    """Files of earlier versions hold the long table; ``form="long"`` still writes it."""
    _, tables = analyses["polars"]
    long = _long_concat({"by_g": tables["by_g"]})
    assert long.columns == list(LONG_COLUMNS)
    assert release_rows("by_g", tables["by_g"]) == long.to_dicts()


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_concat_round_trip_verifies_and_tampering_is_detected(analyses, tmp_path, lib):
    _, tables = analyses[lib]
    long = _long_concat(tables)
    path = tmp_path / "all.parquet"
    dpf.write_parquet(long, path)
    doc = dpf.read_log(path)
    ids = [release_log_of(t)["release_ids"][0] for t in tables.values()]
    assert doc["release_ids"] == ids
    assert doc["postprocessing"] == [{"op": "concat", "queries": list(tables)}]
    assert [s["digest"] for s in doc["derived_from"]] == [
        release_log_of(t)["seal"]["digest"] for t in tables.values()]
    if lib == "pandas":
        long.to_parquet(tmp_path / "pandas.parquet")
        assert dpf.read_log(tmp_path / "pandas.parquet") == doc
    # an edited value, and an edited step list, are detected
    table = pq.read_table(path)
    values = table.column("value").to_pylist()
    values[3] += 1.0
    pq.write_table(table.set_column(4, "value", [values]), tmp_path / "edited.parquet")
    with pytest.raises(dpf.IntegrityError, match="values do not match"):
        dpf.read_log(tmp_path / "edited.parquet")
    md = dict(table.schema.metadata)
    forged = json.loads(md[b"dpframe.log"])
    forged["postprocessing"] = []
    md[b"dpframe.log"] = json.dumps(forged).encode()
    pq.write_table(table.replace_schema_metadata(md), tmp_path / "forged.parquet")
    with pytest.raises(dpf.IntegrityError, match="altered"):
        dpf.read_log(tmp_path / "forged.parquet")
    # a long table is an input like any other: its rows are kept, names must stay distinct
    again = _long_concat([long])
    assert _pandas(again).equals(_pandas(long))
    with pytest.raises(dpf.ParameterError, match="twice"):
        _long_concat({"corr": tables["corr"], "again": long})


def test_concat_refusals(analyses):
    pf, tables = analyses["pandas"]
    with pytest.raises(dpf.ParameterError, match="single released number"):
        _long_concat([tables["overall"], pf.dp.mean("x", epsilon=0.1, random_state=0)])
    with pytest.raises(dpf.ParameterError, match="not a release table"):
        _long_concat([tables["overall"], pd.DataFrame({"n": [1.0]})])
    with pytest.raises(dpf.IntegrityError, match="round_release"):
        _long_concat([tables["overall"].round(1)])
    with pytest.raises(dpf.ParameterError, match="twice"):
        _long_concat([tables["corr"], tables["corr"]])
    with pytest.raises(dpf.ParameterError, match="at least one"):
        _long_concat([])
    other = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)})
    with pytest.raises(dpf.ParameterError, match="one ledger"):
        _long_concat([tables["overall"], other.dp.release({"n": dpf.count()},
                                                                 epsilon=0.1)])


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_postprocessing_keeps_verification_and_records_steps(analyses, tmp_path, lib):
    _, tables = analyses[lib]
    grouped = tables["by_g"]
    done = dpf.sort_release(dpf.rename_release(dpf.round_release(grouped, 1), {"m": "mean_y"}),
                            "mean_y", descending=True)
    pdf = _pandas(done)
    assert list(pdf.columns) == ["g", "n", "mean_y"]
    assert np.array_equal(pdf["mean_y"], np.sort(np.round(_pandas(grouped)["m"], 1))[::-1])
    path = tmp_path / "pp.parquet"
    dpf.write_parquet(done, path)
    doc = dpf.read_log(path)
    assert doc["postprocessing"] == [
        {"op": "round", "decimals": {"n": 1, "m": 1}},
        {"op": "rename", "mapping": {"m": "mean_y"}},
        {"op": "sort", "by": ["mean_y"], "descending": True}]
    assert doc["derived_from"] == [{k: release_log_of(grouped)["seal"][k]
                                    for k in ("table", "digest")}]
    # the steps are deterministic: replayed on the original, the same sealed values
    replay = dpf.sort_release(dpf.rename_release(dpf.round_release(grouped, 1),
                                                 {"m": "mean_y"}), "mean_y", descending=True)
    assert release_log_of(replay)["seal"]["table"] == doc["seal"]["table"]
    # a post-processed table still goes into the long table, its steps named by query
    long = _long_concat({"by_g": done, "corr": tables["corr"]})
    steps = release_log_of(long)["postprocessing"]
    assert steps[0] == {"op": "round", "decimals": {"n": 1, "m": 1}, "query": "by_g"}
    assert set(_pandas(long).loc[lambda f: f["query"] == "by_g", "statistic"]) == {"n",
                                                                                   "mean_y"}
    # the library's own rounding breaks the seal, and the message names the dpframe function
    plain = pdf.round(0) if lib == "pandas" else done.with_columns(pl.col("n").round(0))
    if lib == "pandas":
        plain.to_parquet(tmp_path / "plain.parquet")  # pandas writes the stale log along
        with pytest.raises(dpf.IntegrityError, match=r"dpf\.round_release"):
            dpf.read_log(tmp_path / "plain.parquet")
        with pytest.raises(dpf.IntegrityError, match=r"dpf\.round_release"):
            dpf.write_parquet(plain, tmp_path / "plain2.parquet")  # refused when writing
    else:
        with pytest.raises(dpf.ParameterError, match=r"not one.*dpf\.round_release"):
            dpf.write_parquet(plain, tmp_path / "plain.parquet")
    # tampering after post-processing is detected
    table = pq.read_table(path)
    col = table.column_names.index("mean_y")
    vals = table.column(col).to_pylist()
    vals[0] = vals[0] + 0.1
    pq.write_table(table.set_column(col, "mean_y", [vals]), tmp_path / "t.parquet")
    with pytest.raises(dpf.IntegrityError, match="values do not match"):
        dpf.read_log(tmp_path / "t.parquet")


def test_postprocessing_of_labelled_tables_and_signatures(analyses, tmp_path):
    _, tables = analyses["pandas"]
    described = dpf.round_release(tables["describe"], {"x": 2})
    assert list(described.index) == list(tables["describe"].index)
    assert described["y"].equals(tables["describe"]["y"])
    hist = dpf.round_release(tables["hist"], 0)  # the bin edges are labels: not rounded
    assert hist["bin_upper"].equals(tables["hist"]["bin_upper"])
    ranked = dpf.sort_release(tables["corr"], "x")  # the index moves with its rows
    assert list(ranked.index) == list(tables["corr"].sort_values("x").index)
    ranked.to_parquet(tmp_path / "r.parquet")
    assert dpf.read_log(tmp_path / "r.parquet")["postprocessing"][0]["op"] == "sort"
    signed = dpf.sign_release(tables["counts"].copy(), KEY)
    with pytest.raises(dpf.ParameterError, match="signed"):
        dpf.round_release(signed, 0)
    with pytest.raises(dpf.IntegrityError, match="signature"):
        dpf.round_release(signed, 0, key=b"wrong")
    rounded = dpf.round_release(signed, 0, key=KEY)
    rounded.to_parquet(tmp_path / "s.parquet")
    assert dpf.read_log(tmp_path / "s.parquet", key=KEY)["postprocessing"][0]["op"] == "round"
    for bad in (lambda: dpf.round_release(tables["counts"], {"g": 1}),
                lambda: dpf.round_release(tables["counts"], 1.5),
                lambda: dpf.rename_release(tables["counts"], {"nope": "x"}),
                lambda: dpf.rename_release(tables["counts"], {"g": "count"}),
                lambda: dpf.sort_release(tables["counts"], "nope")):
        with pytest.raises(dpf.ParameterError):
            bad()


def test_polars_native_writer_gives_a_clear_message(analyses, tmp_path):
    _, tables = analyses["polars"]
    table = tables["overall"]
    table.write_parquet(tmp_path / "native.parquet")  # Polars' own writer: no log
    with pytest.raises(dpf.LedgerError, match=r"Polars' own DataFrame.write_parquet.*"
                                              r"dpf.write_parquet\(table, path\)"):
        dpf.read_log(tmp_path / "native.parquet")
    dpf.write_parquet(table, tmp_path / "dp.parquet")
    table.dp.write_parquet(tmp_path / "ns.parquet")
    assert dpf.read_log(tmp_path / "dp.parquet") == dpf.read_log(tmp_path / "ns.parquet")
    with pytest.raises(dpf.ParameterError, match="not one"):
        dpf.write_parquet(table.clone(), tmp_path / "clone.parquet")


def test_pandas_writers_that_keep_the_log(analyses, tmp_path):
    import pyarrow as pa

    _, tables = analyses["pandas"]
    table = tables["by_g"]
    doc = release_log_of(table)
    table.to_parquet(tmp_path / "a.parquet")
    dpf.write_parquet(table, tmp_path / "b.parquet")
    pq.write_table(pa.Table.from_pandas(table), tmp_path / "c.parquet")
    for name in ("a", "b", "c"):
        assert dpf.read_log(tmp_path / f"{name}.parquet")["seal"] == doc["seal"]


def test_duckdb_copy_writes_no_log(analyses, tmp_path):
    import duckdb

    table = analyses["pandas"][1]["by_g"]
    con = duckdb.connect()
    con.register("release_table", table)
    con.execute(f"COPY release_table TO '{tmp_path / 'duck.parquet'}' (FORMAT parquet)")
    with pytest.raises(dpf.LedgerError, match="no log in this file"):
        dpf.read_log(tmp_path / "duck.parquet")


def test_inspect_shows_the_recorded_steps(analyses, tmp_path, capsys):
    from dpframe.cli import main

    _, tables = analyses["polars"]
    done = dpf.round_release(_long_concat({"corr": tables["corr"]}), 3)
    dpf.write_parquet(done, tmp_path / "a.parquet")
    assert main(["inspect", str(tmp_path / "a.parquet")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("VERIFIED")
    assert "post-processing since release" in out and '"op": "round"' in out
    tables["corr"].write_parquet(tmp_path / "native.parquet")
    assert main(["inspect", str(tmp_path / "native.parquet")]) == 1
    err = capsys.readouterr().err
    assert "no log in this file" in err and "Polars' own" in err


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_steward_replays_the_recorded_steps_on_the_original_files(analyses, tmp_path, lib):
    """The original release files, read back as release tables, post-processed with the
    recorded steps, give the published file's sealed values and derived_from."""
    _, tables = analyses[lib]
    for name in ("by_g", "corr"):
        dpf.write_parquet(tables[name], tmp_path / f"{name}.parquet")
    published = dpf.sort_release(dpf.round_release(
        _long_concat({"by_g": tables["by_g"], "corr": tables["corr"]}), 2), "value")
    dpf.write_parquet(published, tmp_path / "published.parquet")
    claimed = dpf.read_log(tmp_path / "published.parquet")
    originals = {n: dpf.read_release(tmp_path / f"{n}.parquet", as_frame=lib)
                 for n in ("by_g", "corr")}
    assert type(originals["corr"]) is type(tables["corr"])
    replayed = dpf.sort_release(dpf.round_release(_long_concat(originals), 2), "value")
    assert release_log_of(replayed)["seal"]["table"] == claimed["seal"]["table"]
    assert release_log_of(replayed)["derived_from"] == claimed["derived_from"]
    other = "polars" if lib == "pandas" else "pandas"
    with pytest.raises(dpf.IntegrityError, match=f"as_frame={lib!r}"):
        dpf.read_release(tmp_path / "corr.parquet", as_frame=other)

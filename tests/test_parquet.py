"""The log travels to Parquet (pandas via attrs, Polars via frame.dp.write_parquet)."""

from __future__ import annotations

import json

import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import dpframe as dpf
from dpframe.accounting import LOG_VERSION


def _release(frame, session=None):
    pf = dpf.protect(frame, epsilon=1.0, bounds={"x": (0, 10)}, session=session)
    pf.dp.count(epsilon=0.1, random_state=1)
    table = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x"), "s": dpf.std("x")},
                          epsilon=0.3, random_state=2)
    return pf, table


def test_pandas_release_roundtrip(tmp_path):
    pf, table = _release(pd.DataFrame({"x": [1.0, 2.0, 3.0, 9.0]}))
    path = tmp_path / "r.parquet"
    table.to_parquet(path)
    doc = dpf.read_log(path)
    assert doc["version"] == LOG_VERSION
    assert len(doc["entries"]) == len(pf.dp.log) == 4
    assert [e["name"] for e in doc["entries"]] == ["count", "n", "m", "s"]
    assert doc["budget"]["epsilon_spent"] == pytest.approx(0.4)
    back = pd.read_parquet(path)
    assert back.attrs["dpframe_log"] == doc
    frame = dpf.read_log(path, as_frame="pandas")
    assert list(frame["name"]) == ["count", "n", "m", "s"]
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN/Infinity


def test_pandas_protected_frame_and_explicit_writer(tmp_path):
    pf, _ = _release(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    pf.to_parquet(tmp_path / "p.parquet")  # attrs hold the live log document
    assert len(dpf.read_log(tmp_path / "p.parquet")["entries"]) == 4
    pf.dp.write_parquet(tmp_path / "q.parquet")
    assert len(dpf.read_log(tmp_path / "q.parquet")["entries"]) == 4
    back = pd.read_parquet(tmp_path / "p.parquet")
    with pytest.raises(dpf.NoLedgerError):  # a file's log is not a live budget
        back.dp.count(epsilon=0.1)


@pytest.mark.parametrize("lazy", [False, True])
def test_polars_release_roundtrip(tmp_path, lazy):
    df = pl.DataFrame({"x": [1.0, 2.0, 3.0, 9.0]})
    pf, table = _release(df.lazy() if lazy else df, session=dpf.Session())
    path = tmp_path / "r.parquet"
    table.dp.write_parquet(path)
    doc = dpf.read_log(path)
    assert [e["name"] for e in doc["entries"]] == ["count", "n", "m", "s"]
    assert pl.read_parquet(path).equals(table)
    assert b"dpframe.log" in pq.read_schema(path).metadata
    log = dpf.read_log(path, as_frame="polars")
    assert log.height == 4 and log["engine"][0].startswith("polars")
    # the protected frame itself can be written with the session's log
    pf.dp.write_parquet(tmp_path / "data.parquet")
    assert len(dpf.read_log(tmp_path / "data.parquet")["entries"]) == 4


def test_log_json_handles_infinite_domains(tmp_path):
    pf = dpf.protect(pl.DataFrame({"x": [1.0, 2.0]}), epsilon=1.0, bounds={"x": (0, 10)})
    t = pf.dp.release({"m": dpf.mean("x")}, epsilon=0.5, nulls="drop", random_state=0)
    t.dp.write_parquet(tmp_path / "r.parquet")
    entries = dpf.read_log(tmp_path / "r.parquet")["entries"]
    assert entries[1]["domain_lower"] is None and entries[1]["domain_upper"] is None


def test_read_log_without_log(tmp_path):
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(dpf.LedgerError, match="no dpframe log"):
        dpf.read_log(tmp_path / "plain.parquet")


def test_read_log_refuses_newer_versions(tmp_path):
    import pyarrow as pa

    table = pa.table({"x": [1]}).replace_schema_metadata(
        {b"dpframe.log": json.dumps({"version": 99, "entries": []}).encode()})
    pq.write_table(table, tmp_path / "v.parquet")
    with pytest.raises(dpf.LedgerError, match="upgrade"):
        dpf.read_log(tmp_path / "v.parquet")

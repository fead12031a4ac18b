"""Sealed release logs travel to Parquet (pandas via attrs, Polars via table.dp.write_parquet)
and only release tables are written with one."""

from __future__ import annotations

import json

import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import dpframe as dpf
from dpframe.accounting.ledger import LOG_VERSION


def _release(frame, session=None):
    pf = dpf.protect(frame, epsilon=1.0, bounds={"x": (0, 10)}, session=session)
    pf.dp.sum("x", epsilon=0.1, random_state=1)
    table = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x"), "s": dpf.std("x")},
                          epsilon=0.3, random_state=2)
    return pf, table


def _names(doc):
    return list(dict.fromkeys(e["name"] for e in doc["entries"]))


def test_pandas_release_roundtrip(tmp_path):
    pf, table = _release(pd.DataFrame({"x": [1.0, 2.0, 3.0, 9.0]}))
    path = tmp_path / "r.parquet"
    table.to_parquet(path)
    doc = dpf.read_log(path)
    assert doc["version"] == LOG_VERSION and doc["kind"] == "dpframe.release"
    assert doc["ledger_id"] == pf.dp.session.ledger.id
    assert len(doc["entries"]) == len(pf.dp.log)
    assert _names(doc) == ["sum", "n", "m", "s"]
    assert {e["ledger_id"] for e in doc["entries"]} == {doc["ledger_id"]}
    assert doc["budget"]["epsilon_spent"] == pytest.approx(0.4)
    back = pd.read_parquet(path)
    assert back.attrs["dpframe_log"] == doc
    back.to_parquet(tmp_path / "copy.parquet")  # an unchanged copy still verifies
    assert dpf.read_log(tmp_path / "copy.parquet") == doc
    frame = dpf.read_log(path, as_frame="pandas")
    assert list(dict.fromkeys(frame["name"])) == ["sum", "n", "m", "s"]
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN/Infinity


def test_the_protected_frame_never_writes_a_release_log(tmp_path):
    """The live budget handle in attrs is not a log; the explicit writer refuses non-releases."""
    pf, _ = _release(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    pf.to_parquet(tmp_path / "p.parquet")
    with pytest.raises(dpf.LedgerError, match="no dpframe release log"):
        dpf.read_log(tmp_path / "p.parquet")
    with pytest.raises(dpf.LedgerError, match="no dpframe release log"):
        dpf.read_log(tmp_path / "p.parquet", verify=False)
    with pytest.raises(dpf.ParameterError):
        pf.dp.write_parquet(tmp_path / "q.parquet")
    back = pd.read_parquet(tmp_path / "p.parquet")
    with pytest.raises(dpf.NoLedgerError):  # a file is not a live budget
        back.dp.count(epsilon=0.1)


@pytest.mark.parametrize("lazy", [False, True])
def test_polars_release_roundtrip(tmp_path, lazy):
    df = pl.DataFrame({"x": [1.0, 2.0, 3.0, 9.0]})
    pf, table = _release(df.lazy() if lazy else df, session=dpf.Session())
    path = tmp_path / "r.parquet"
    table.dp.write_parquet(path)
    doc = dpf.read_log(path)
    assert _names(doc) == ["sum", "n", "m", "s"]
    assert pl.read_parquet(path).equals(table)
    assert b"dpframe.log" in pq.read_schema(path).metadata
    log = dpf.read_log(path, as_frame="polars")
    assert log.height == len(doc["entries"]) and log["engine"][0].startswith("polars")
    with pytest.raises(dpf.ParameterError):  # the protected frame is not a release
        pf.dp.write_parquet(tmp_path / "data.parquet")


def test_read_log_without_log(tmp_path):
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(dpf.LedgerError, match="no dpframe release log"):
        dpf.read_log(tmp_path / "plain.parquet")


def test_read_log_refuses_newer_versions(tmp_path):
    import pyarrow as pa

    table = pa.table({"x": [1]}).replace_schema_metadata(
        {b"dpframe.log": json.dumps({"version": 99, "entries": []}).encode()})
    pq.write_table(table, tmp_path / "v.parquet")
    with pytest.raises(dpf.LedgerError, match="upgrade"):
        dpf.read_log(tmp_path / "v.parquet")


def test_unsealed_logs_are_refused_unless_verify_is_false(tmp_path):
    """A log without a seal (an older dpframe, or hand-made) does not vouch for values."""
    import pyarrow as pa

    doc = {"version": 1, "ledger_id": 1, "budget": {}, "entries": [{"epsilon": 0.1}]}
    table = pa.table({"x": [1.0]}).replace_schema_metadata(
        {b"dpframe.log": json.dumps(doc).encode()})
    pq.write_table(table, tmp_path / "old.parquet")
    with pytest.raises(dpf.IntegrityError, match="not a sealed release log"):
        dpf.read_log(tmp_path / "old.parquet")
    assert dpf.read_log(tmp_path / "old.parquet", verify=False) == doc

"""Tamper-evident releases (issue 11): the sealed log binds a release table's values to its
log; ``dpf.read_log`` verifies by default; HMAC signing with the steward's key; raw frames never
read as releases; concatenations either fail verification or are built by
``dpf.concat_releases`` with a valid seal."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpframe as dpf
from dpframe.accounting.seals import attach_release_log, release_log_of, table_digest

KEY = b"steward-secret-key"


def _data(n=40):
    rng = np.random.default_rng(0)
    return {"x": rng.uniform(0, 10, n), "g": np.array(["a", "b"] * (n // 2))}


@pytest.fixture
def pandas_release():
    pf = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)},
                     keys={"g": ["a", "b"]})
    overall = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.2,
                            random_state=1)
    grouped = pf.dp.groupby("g", keys=["a", "b"]).release({"m": dpf.mean("x")}, epsilon=0.2,
                                                          random_state=2)
    return pf, overall, grouped


def _rewrite(path, *, values=None, meta=None):
    """Rewrite a Parquet file keeping its metadata, with edited values and/or metadata."""
    table = pq.read_table(path)
    md = dict(table.schema.metadata or {})
    if values is not None:
        name, fn = values
        i = table.column_names.index(name)
        col = pa.array(fn(table.column(i).to_pylist()), type=table.schema.field(i).type)
        table = table.set_column(i, table.schema.field(i), col)
    if meta is not None:
        md = meta(md)
    pq.write_table(table.replace_schema_metadata(md), path)


def _edit_log(md, fn):
    if b"dpframe.log" in md:
        doc = json.loads(md[b"dpframe.log"])
        fn(doc)
        md[b"dpframe.log"] = json.dumps(doc).encode()
    else:
        attrs = json.loads(md[b"PANDAS_ATTRS"])
        fn(attrs["dpframe_log"])
        md[b"PANDAS_ATTRS"] = json.dumps(attrs).encode()
    return md


def _divide_epsilons(doc):
    for e in doc["entries"]:
        e["epsilon"] = e["epsilon"] / 10


def test_a_release_verifies_and_names_its_ledger(pandas_release, tmp_path):
    pf, overall, _ = pandas_release
    path = tmp_path / "r.parquet"
    overall.to_parquet(path)
    doc = dpf.read_log(path)
    assert doc["ledger_id"] == pf.dp.session.ledger.id
    assert doc["seal"]["table"] == table_digest(overall) == table_digest(pq.read_table(path))
    assert "hmac" not in doc["seal"]


@pytest.mark.parametrize("edit", ["value", "tiny_value", "column_name", "index"])
def test_tampered_values_are_detected(pandas_release, tmp_path, edit):
    _, overall, grouped = pandas_release
    path = tmp_path / "r.parquet"
    if edit == "value":
        overall.to_parquet(path)
        _rewrite(path, values=("m", lambda v: [x * 2 for x in v]))
    elif edit == "tiny_value":  # one ulp
        overall.to_parquet(path)
        _rewrite(path, values=("m", lambda v: [float(np.nextafter(x, np.inf)) for x in v]))
    elif edit == "column_name":
        overall.rename(columns={"m": "mean"}).to_parquet(path)
    else:
        grouped.to_parquet(path)
        _rewrite(path, values=("g", lambda v: list(reversed(v))))  # swap the group labels
    with pytest.raises(dpf.IntegrityError, match="values do not match"):
        dpf.read_log(path)
    assert dpf.read_log(path, verify=False)["kind"] == "dpframe.release"  # forensics


@pytest.mark.parametrize("edit", ["epsilons", "drop_entry", "budget", "ledger_id", "seal"])
def test_tampered_log_is_detected(pandas_release, tmp_path, edit):
    _, overall, _ = pandas_release
    path = tmp_path / "r.parquet"
    overall.to_parquet(path)
    fn = {
        "epsilons": _divide_epsilons,
        "drop_entry": lambda d: d["entries"].pop(0),
        "budget": lambda d: d["budget"].update(epsilon=100.0),
        "ledger_id": lambda d: d.update(ledger_id="0" * 32),
        "seal": lambda d: d["seal"].update(digest="0" * 64),
    }[edit]
    _rewrite(path, meta=lambda md: _edit_log(md, fn))
    with pytest.raises(dpf.IntegrityError, match="altered"):
        dpf.read_log(path)


def test_polars_release_tampering(tmp_path):
    pf = dpf.protect(pl.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)})
    table = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.2, random_state=1)
    path = tmp_path / "r.parquet"
    table.dp.write_parquet(path)
    assert dpf.read_log(path)["ledger_id"] == pf.dp.session.ledger.id
    _rewrite(path, meta=lambda md: _edit_log(md, _divide_epsilons))
    with pytest.raises(dpf.IntegrityError, match="log was altered"):
        dpf.read_log(path)
    table.dp.write_parquet(path)
    _rewrite(path, values=("n", lambda v: [x + 1 for x in v]))
    with pytest.raises(dpf.IntegrityError, match="values do not match"):
        dpf.read_log(path)


def test_signed_release_right_key_wrong_key_and_reseal(pandas_release, tmp_path):
    _, overall, _ = pandas_release
    dpf.sign_release(overall, KEY)
    path = tmp_path / "r.parquet"
    overall.to_parquet(path)
    assert dpf.read_log(path, key=KEY)["seal"]["hmac"]
    assert dpf.read_log(path)  # without a key: the digest is still checked
    with pytest.raises(dpf.IntegrityError, match="signature does not match"):
        dpf.read_log(path, key=b"wrong key")
    # a forger without the key edits ε and re-seals: the digest passes (documented limit) ...
    doc = dpf.read_log(path)
    _divide_epsilons(doc)
    forged = pd.read_parquet(path)
    attach_release_log(forged, doc)
    forged.to_parquet(tmp_path / "forged.parquet")
    assert dpf.read_log(tmp_path / "forged.parquet")  # unsigned digest: recomputable
    with pytest.raises(dpf.IntegrityError):  # ... but the steward's key catches it
        dpf.read_log(tmp_path / "forged.parquet", key=KEY)
    # an unsigned release checked with a key fails too
    plain = pd.read_parquet(path)
    attach_release_log(plain, {"version": 1, "ledger_id": "x", "entries": []})
    plain.to_parquet(tmp_path / "u.parquet")
    assert dpf.read_log(tmp_path / "u.parquet")
    with pytest.raises(dpf.IntegrityError, match="not signed"):
        dpf.read_log(tmp_path / "u.parquet", key=KEY)


def test_signing_checks_the_values_first(pandas_release):
    _, overall, _ = pandas_release
    edited = overall.copy()
    edited.iloc[0, 0] = 1e6  # attrs travel with the copy, the values changed
    with pytest.raises(dpf.IntegrityError):
        dpf.sign_release(edited, KEY)


def test_raw_frames_derived_from_a_protected_frame_never_read_as_a_release(tmp_path):
    """Plain pandas results computed on the protected frame (no noise) carry the live handle at
    most, which is not a log; their files are refused by read_log, verified or not."""
    pf = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)})
    pf.dp.count(epsilon=0.1, random_state=0)
    raw = {
        "filtered": lambda: pf[pf.x > 4],
        "describe": lambda: pf.describe(),
        "groupby_mean": lambda: pf.groupby("g")[["x"]].mean(),
        "copy": lambda: pf.copy(),
        "root": lambda: pf,
    }
    for name, make in raw.items():
        path = tmp_path / f"{name}.parquet"
        make().to_parquet(path)
        for verify in (True, False):
            with pytest.raises(dpf.LedgerError, match="no dpframe release log"):
                dpf.read_log(path, verify=verify)


def test_raw_frames_derived_from_a_release_fail_verification(pandas_release, tmp_path):
    _, overall, grouped = pandas_release
    for i, derived in enumerate([overall * 2, grouped.head(1), grouped.iloc[::-1],
                                 overall.assign(extra=1.0)]):
        path = tmp_path / f"d{i}.parquet"
        derived.to_parquet(path)
        with pytest.raises(dpf.IntegrityError, match="values do not match"):
            dpf.read_log(path)


def test_pd_concat_of_releases_fails_verification_instead_of_dropping_the_log(
        pandas_release, tmp_path):
    _, overall, grouped = pandas_release
    combined = pd.concat([overall, grouped])
    assert release_log_of(combined) is not None  # the log survives pandas' propagation
    combined.to_parquet(tmp_path / "c.parquet")
    with pytest.raises(dpf.IntegrityError, match="concat"):
        dpf.read_log(tmp_path / "c.parquet")
    # two releases of different ledgers: the first log is kept and fails as well
    other = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)})
    t2 = other.dp.release({"n": dpf.count()}, epsilon=0.1, random_state=3)
    pd.concat([overall, t2]).to_parquet(tmp_path / "c2.parquet")
    with pytest.raises(dpf.IntegrityError):
        dpf.read_log(tmp_path / "c2.parquet")


def test_concat_releases_builds_a_verifiable_combined_table(pandas_release, tmp_path):
    pf, overall, grouped = pandas_release
    combined = dpf.concat_releases([overall, grouped])
    assert list(combined.columns)[:5] == ["query", "statistic", "value", "lower", "upper"]
    assert len(combined) == overall.size + grouped.shape[0]  # one row per released cell
    path = tmp_path / "c.parquet"
    combined.to_parquet(path)
    doc = dpf.read_log(path)
    assert doc["ledger_id"] == pf.dp.session.ledger.id
    assert len(doc["entries"]) >= len(release_log_of(grouped)["entries"])
    signed = dpf.concat_releases([overall, grouped], key=KEY)
    signed.to_parquet(path)
    assert dpf.read_log(path, key=KEY)
    edited = overall * 2
    with pytest.raises(dpf.IntegrityError):
        dpf.concat_releases([edited, grouped])
    other = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)})
    t2 = other.dp.release({"n": dpf.count()}, epsilon=0.1, random_state=3)
    with pytest.raises(dpf.ParameterError, match="one ledger"):
        dpf.concat_releases([overall, t2])
    with pytest.raises(dpf.ParameterError, match="not a release table"):
        dpf.concat_releases([overall, pd.DataFrame({"n": [1.0]})])


def test_polars_concat(tmp_path):
    pf = dpf.protect(pl.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)},
                     keys={"g": ["a", "b"]})
    overall = pf.dp.release({"m": dpf.mean("x")}, epsilon=0.2, random_state=1)
    grouped = pf.dp.groupby("g", keys=["a", "b"]).release({"m": dpf.mean("x")}, epsilon=0.2,
                                                          random_state=2)
    raw = pl.concat([overall, grouped], how="diagonal")
    with pytest.raises(dpf.ParameterError):  # no log: the explicit writer refuses
        raw.dp.write_parquet(tmp_path / "raw.parquet")
    combined = dpf.concat_releases([overall, grouped])
    assert combined.height == 3
    combined.dp.write_parquet(tmp_path / "c.parquet")
    assert dpf.read_log(tmp_path / "c.parquet")["ledger_id"] == pf.dp.session.ledger.id


def test_durable_release_names_the_ledger_chain(tmp_path):
    from dpframe.accounting.durable import read_ledger_file

    path = tmp_path / "ledger.jsonl"
    pf = dpf.protect(pd.DataFrame(_data()), epsilon=1.0, bounds={"x": (0, 10)},
                     session=dpf.Session(path=path))
    pf.dp.count(epsilon=0.1, random_state=0)
    table = pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1, random_state=1)
    table.to_parquet(tmp_path / "r.parquet")
    doc = dpf.read_log(tmp_path / "r.parquet")
    info = read_ledger_file(path)
    assert doc["ledger_id"] == info["ledger_id"]
    assert doc["chain"] == {"seq": 2, "hash": info["chain_hash"]}


# -- the columnar table digest (dpframe-release-v2) --------------------------------------------
def _typed_frames():
    x = [1.5, float("nan"), -0.0, None, float("inf")]
    pdf = pd.DataFrame({
        "f": pd.array(x, dtype="Float64"),
        "n": np.array([1.5, np.nan, -0.0, 2.0, -np.inf]),
        "i": pd.array([1, None, 3, 4, 5], dtype="Int64"),
        "s": pd.array(["a", None, "", "é", "bb"], dtype="str"),
        "c": pd.Categorical(["u", "v", None, "u", "v"]),
        "b": pd.array([True, False, None, True, False], dtype="boolean"),
        "d": pd.to_datetime(["2024-01-01", "2024-01-02", None, "2024-01-04", "2024-01-05"]),
    })
    plf = pl.DataFrame({"f": x, "i": [1, None, 3, 4, 5], "s": ["a", None, "", "é", "bb"],
                        "c": pl.Series(["u", "v", None, "u", "v"], dtype=pl.Categorical),
                        "b": [True, False, None, True, False], "u": pl.Series([1, 2, 3, 4, 5],
                                                                           dtype=pl.UInt64)})
    return pdf, plf


@pytest.mark.parametrize("which", [0, 1])
def test_columnar_digest_survives_parquet(tmp_path, which):
    frame = _typed_frames()[which]
    path = tmp_path / "t.parquet"
    if which == 0:
        frame.to_parquet(path)
    else:
        frame.write_parquet(path)
    assert table_digest(frame) == table_digest(pq.read_table(path))
    # chunking does not matter
    table = pq.read_table(path)
    chunked = pa.concat_tables([table.slice(0, 2), table.slice(2)])
    assert table_digest(chunked) == table_digest(table)


@pytest.mark.parametrize("column", ["f", "n", "i", "s", "c", "b", "d"])
def test_columnar_digest_sees_every_change(column):
    frame = _typed_frames()[0]
    base = table_digest(frame)
    edited = frame.copy()
    edited[column] = edited[column].iloc[::-1].to_numpy()
    assert table_digest(edited) != base
    assert table_digest(frame.rename(columns={column: column + "2"})) != base


def test_columnar_digest_distinguishes_nulls_signed_zero_and_nan():
    def d(values, dtype=None):
        return table_digest(pa.table({"x": pa.array(values, type=dtype)}))

    assert d([0.0]) != d([-0.0])
    assert d([None], pa.float64()) != d([0.0])
    assert d([float("nan")]) != d([None], pa.float64())
    assert d(["ab", "c"]) != d(["a", "bc"])
    assert d([None], pa.string()) != d([""])
    assert d([1.0]) != d([1], pa.int64())  # the type family is part of the content


def test_releases_sealed_with_the_v1_scheme_still_verify(pandas_release, tmp_path):
    from dpframe.accounting import seals as integrity

    _, overall, _ = pandas_release
    doc = dict(release_log_of(overall))
    table_hash = table_digest(overall, integrity._SCHEME_V1)
    msg = integrity._message(doc, table_hash, integrity._SCHEME_V1)
    import hashlib

    doc["seal"] = {"scheme": integrity._SCHEME_V1, "table": table_hash,
                   "digest": hashlib.sha256(msg).hexdigest()}
    assert integrity.check_seal(doc, overall)["values_match"]
    edited = overall.assign(m=overall["m"] * 2)
    with pytest.raises(dpf.IntegrityError, match="values do not match"):
        integrity.check_seal(doc, edited)

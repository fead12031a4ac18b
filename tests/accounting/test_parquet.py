"""Release files (dpframe.accounting._parquet): every part of the file a reader shows is covered by
the seal or checked against the sealed log (the pandas metadata and its attrs copy, schema and field
metadata, column labels, index); honest round trips through pandas, pyarrow, Polars and DuckDB
verify or say that the log is gone; malformed files raise DPFrameError subclasses only."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.release_files import good_file, malformed_files, sample_data

import dpframe as dpf
from dpframe.accounting import seals as integrity
from dpframe.accounting.seals import release_log_of, sealed_document, table_digest

KEY = b"steward key"


@pytest.fixture(scope="module")
def releases():
    pf = dpf.protect(pd.DataFrame(sample_data()), epsilon=10.0, bounds={"income": (0, 100)},
                     keys={"g": ["a", "b", "c"]})
    plf = dpf.protect(pl.DataFrame(sample_data()), epsilon=10.0, bounds={"income": (0, 100)},
                      keys={"g": ["a", "b", "c"]})
    stats = {"mean_income": dpf.mean("income"), "std_income": dpf.std("income")}
    out = {
        "pandas": pf.dp.release(stats, epsilon=0.5, random_state=1),
        "pandas_grouped": pf.dp.groupby("g").release(stats, epsilon=0.5, random_state=2),
        "polars": plf.dp.release(stats, epsilon=0.5, random_state=3),
        "polars_grouped": plf.dp.groupby("g").release(stats, epsilon=0.5, random_state=4),
    }
    for t in out.values():
        dpf.sign_release(t, KEY)
    return out


def _write(table, path: Path, writer: str) -> Path:
    if writer == "to_parquet":
        table.to_parquet(path)
    else:
        table.dp.write_parquet(path)
    return path


def _edit_meta(path: Path, out: Path, fn) -> Path:
    table = pq.read_table(path)
    md = dict(table.schema.metadata or {})
    fn(md)
    pq.write_table(table.replace_schema_metadata(md), out)
    return out


def _edit_pandas(md, fn):
    pm = json.loads(md[b"pandas"])
    fn(pm)
    md[b"pandas"] = json.dumps(pm).encode()


def _swap_labels(pm):
    swap = {"mean_income": "std_income", "std_income": "mean_income"}
    for c in pm["columns"]:
        c["name"] = swap.get(c["name"], c["name"])


def _divide(doc):
    for e in doc["entries"]:
        e["epsilon"] = e["epsilon"] / 10


def _attrs_edit(fn):
    def edit(md):
        attrs = json.loads(md[b"PANDAS_ATTRS"])
        fn(attrs)
        md[b"PANDAS_ATTRS"] = json.dumps(attrs).encode()
    return edit


PANDAS_EDITS = {
    "swap_labels": lambda md: _edit_pandas(md, _swap_labels),
    "attributes_copy": lambda md: _edit_pandas(md, lambda pm: _divide(
        pm["attributes"]["dpframe_log"])),
    "attributes_extra": lambda md: _edit_pandas(md, lambda pm: pm["attributes"].update(
        note="epsilon was 0.05")),
    "numpy_type": lambda md: _edit_pandas(md, lambda pm: pm["columns"][0].update(
        numpy_type="float32", pandas_type="float32")),
    "index": lambda md: _edit_pandas(md, lambda pm: pm["index_columns"][0].update(start=5,
                                                                                  stop=6)
                                     if isinstance(pm["index_columns"][0], dict)
                                     else pm.update(index_columns=[])),
    "column_indexes": lambda md: _edit_pandas(md, lambda pm: pm.update(column_indexes=[
        {"name": "statistic", "field_name": None, "pandas_type": "unicode",
         "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}])),
}
GENERAL_EDITS = {
    "extra_key": lambda md: md.update({b"note": b"epsilon was 0.05"}),
}


def _pandas_attrs_edits():
    return {
        "PANDAS_ATTRS_copy": _attrs_edit(lambda a: _divide(a["dpframe_log"])),
        "PANDAS_ATTRS_extra": _attrs_edit(lambda a: a.update(note="hello")),
    }


def _cases():
    for name in ("pandas", "pandas_grouped"):
        for writer in ("to_parquet", "dp"):
            edits = {**PANDAS_EDITS, **GENERAL_EDITS}
            if writer == "to_parquet":
                edits.update(_pandas_attrs_edits())
            for edit in edits:
                yield name, writer, edit
    for name in ("polars", "polars_grouped"):
        for edit in GENERAL_EDITS:
            yield name, "dp", edit


@pytest.mark.parametrize(("name", "writer", "edit"), list(_cases()))
def test_every_metadata_edit_readers_see_is_refused(releases, tmp_path, name, writer, edit):
    path = _write(releases[name], tmp_path / "r.parquet", writer)
    assert dpf.read_log(path, key=KEY)["seal"]["scheme"] == "dpframe-release-v3"
    edits = {**PANDAS_EDITS, **GENERAL_EDITS, **_pandas_attrs_edits()}
    bad = _edit_meta(path, tmp_path / "bad.parquet", edits[edit])
    for key in (None, KEY):
        with pytest.raises(dpf.IntegrityError):
            dpf.read_log(bad, key=key)
    from dpframe.accounting.steward import inspect_file

    report = inspect_file(bad, key=KEY)
    assert not report["verified"] and report["error"]


def test_the_swap_shows_other_labels_to_pandas_and_is_refused(releases, tmp_path):
    """The reproduction of issue 24: labels swapped in the pandas metadata."""
    path = _write(releases["pandas"], tmp_path / "r.parquet", "to_parquet")
    bad = _edit_meta(path, tmp_path / "bad.parquet", PANDAS_EDITS["swap_labels"])
    shown, honest = pd.read_parquet(bad), pd.read_parquet(path)
    assert shown["mean_income"].iloc[0] == honest["std_income"].iloc[0]
    with pytest.raises(dpf.IntegrityError, match="column labels"):
        dpf.read_log(bad, key=KEY)


@pytest.mark.parametrize("edit", ["field_metadata", "field_type"])
def test_field_metadata_and_types_are_covered(releases, tmp_path, edit):
    path = _write(releases["polars"], tmp_path / "r.parquet", "dp")
    table = pq.read_table(path)
    field = table.schema.field(0)
    if edit == "field_metadata":
        table = table.cast(table.schema.set(0, field.with_metadata({b"note": b"eps=0.05"})))
    else:
        table = table.set_column(0, pa.field(field.name, pa.decimal128(38, 10)),
                                 pa.array([None] * table.num_rows, pa.decimal128(38, 10)))
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(dpf.IntegrityError, match="do not match"):
        dpf.read_log(tmp_path / "bad.parquet")


@pytest.mark.parametrize("name", ["pandas", "pandas_grouped", "polars", "polars_grouped"])
def test_honest_round_trips_verify_or_say_the_log_is_gone(releases, tmp_path, name):
    table = releases[name]
    writers = ["to_parquet", "dp"] if name.startswith("pandas") else ["dp"]
    for writer in writers:
        path = _write(table, tmp_path / f"{writer}.parquet", writer)
        assert dpf.read_log(path, key=KEY)
        # pyarrow: read and write the table as it is
        pq.write_table(pq.read_table(path), tmp_path / "pa.parquet")
        assert dpf.read_log(tmp_path / "pa.parquet", key=KEY)
        # pandas: read, then write again with pandas or dpframe
        back = pd.read_parquet(path)
        if name.startswith("pandas"):
            assert release_log_of(back) == release_log_of(table)
            back.to_parquet(tmp_path / "pd.parquet")
            back.dp.write_parquet(tmp_path / "pd_dp.parquet")
            pq.read_table(path).to_pandas().to_parquet(tmp_path / "pa_pd.parquet")
            for p in ("pd", "pd_dp", "pa_pd"):
                assert dpf.read_log(tmp_path / f"{p}.parquet", key=KEY)
        else:  # pandas does not read dpframe.log into attrs: the rewritten file has no log
            back.to_parquet(tmp_path / "pd.parquet")
            with pytest.raises(dpf.LedgerError, match=r"no dpframe release log.*lost its log"):
                dpf.read_log(tmp_path / "pd.parquet")
        # Polars and DuckDB carry no metadata along: no log, said as such
        plback = pl.read_parquet(path)
        with pytest.raises(dpf.ParameterError, match="only release tables"):
            plback.dp.write_parquet(tmp_path / "pl_dp.parquet")
        plback.write_parquet(tmp_path / "pl.parquet")
        duckdb.sql(f"COPY (SELECT * FROM '{path}') TO '{tmp_path / 'dd.parquet'}' "
                   "(FORMAT parquet)")
        for p in ("pl", "dd"):
            with pytest.raises(dpf.LedgerError, match="no dpframe release log"):
                dpf.read_log(tmp_path / f"{p}.parquet")
        # what the readers show is what was sealed
        assert pl.read_parquet(path).columns[-2:] == ["mean_income", "std_income"]
        con = duckdb.connect()
        assert [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()][-2:] == [
            "mean_income", "std_income"]


def test_extra_schema_metadata_is_sealed_when_written_with_the_table(releases, tmp_path):
    """An Arrow table with its own metadata (the release spec's output carries the spec):
    the seal covers the key; editing it fails verification."""
    doc = release_log_of(releases["polars"])
    table = releases["polars"].to_arrow()
    table = table.replace_schema_metadata({b"dpframe.cli.spec": b"epsilon = 0.5"})
    sealed = sealed_document(table, doc, release_id=doc["release_ids"])
    table = table.replace_schema_metadata({**table.schema.metadata,
                                           b"dpframe.log": json.dumps(sealed).encode()})
    pq.write_table(table, tmp_path / "s.parquet")
    assert dpf.read_log(tmp_path / "s.parquet")
    _edit_meta(tmp_path / "s.parquet", tmp_path / "bad.parquet",
               lambda md: md.update({b"dpframe.cli.spec": b"epsilon = 0.05"}))
    with pytest.raises(dpf.IntegrityError, match="do not match"):
        dpf.read_log(tmp_path / "bad.parquet")


def test_a_signed_file_with_extra_metadata_reads_back_only_with_its_key(releases, tmp_path):
    """read_release seals the frame of such a file anew (no frame carries the extra key): a
    signed one needs key=, which checks the file's signature and re-signs the frame."""
    doc = release_log_of(releases["polars"])
    table = releases["polars"].to_arrow().replace_schema_metadata(
        {b"dpframe.cli.spec": b"epsilon = 0.5"})
    sealed = sealed_document(table, doc, release_id=doc["release_ids"], key=KEY)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata,
                                                  b"dpframe.log": json.dumps(sealed).encode()}),
                   tmp_path / "s.parquet")
    with pytest.raises(dpf.ParameterError, match=r"is signed.*pass key="):
        dpf.read_release(tmp_path / "s.parquet")
    with pytest.raises(dpf.IntegrityError, match="signature does not match"):
        dpf.read_release(tmp_path / "s.parquet", key=b"another key")
    frame = dpf.read_release(tmp_path / "s.parquet", key=KEY)
    assert integrity.check_seal(release_log_of(frame), frame, key=KEY)["signature"] == "valid"
    assert release_log_of(frame)["derived_from"] == [
        {"table": sealed["seal"]["table"], "digest": sealed["seal"]["digest"]}]


def _legacy_sealed(table, scheme):
    doc = {k: v for k, v in release_log_of(table).items() if k != "seal"}
    doc = json.loads(json.dumps(doc))
    table_hash = table_digest(table, scheme)
    msg = integrity._message(doc, table_hash, scheme)
    doc["seal"] = {"scheme": scheme, "table": table_hash,
                   "digest": hashlib.sha256(msg).hexdigest()}
    return doc


@pytest.mark.parametrize("scheme", ["dpframe-release-v2", "dpframe-release-v1"])
def test_files_sealed_with_older_schemes_still_verify_and_swaps_are_caught(
        releases, tmp_path, scheme):
    table = releases["pandas"].copy()
    table.attrs = {"dpframe_log": _legacy_sealed(releases["pandas"], scheme)}
    table.to_parquet(tmp_path / "old.parquet")
    assert dpf.read_log(tmp_path / "old.parquet")["seal"]["scheme"] == scheme
    bad = _edit_meta(tmp_path / "old.parquet", tmp_path / "bad.parquet",
                     PANDAS_EDITS["swap_labels"])
    with pytest.raises(dpf.IntegrityError, match="shows column"):
        dpf.read_log(bad)
    bad = _edit_meta(tmp_path / "old.parquet", tmp_path / "bad2.parquet",
                     PANDAS_EDITS["attributes_copy"])
    with pytest.raises(dpf.IntegrityError, match="pandas attrs"):
        dpf.read_log(bad)


def test_sign_release_refuses_a_missing_key(releases):
    table = releases["pandas"].copy()
    for key in (None, b"", ""):
        with pytest.raises(dpf.ParameterError, match="key"):
            dpf.sign_release(table, key)
    assert "hmac" in release_log_of(table)["seal"]  # still signed


# -- the chained digests: a seal covers the log by reference ---------------------------------
def _recomputed(doc):
    from dpframe.accounting._log_entries import (
        ENTRIES_CHAIN_START,
        KEYS_CHAIN_START,
        chain_entries,
        chain_keys,
    )

    plain = json.loads(json.dumps(doc))
    return (chain_entries(ENTRIES_CHAIN_START, plain["entries"]),
            chain_keys(KEYS_CHAIN_START, plain["keys"].items()))


def test_snapshot_digests_equal_the_recomputed_chains(tmp_path):
    path = tmp_path / "ledger.jsonl"
    pf = dpf.protect(pd.DataFrame(sample_data()), epsilon=10.0, bounds={"income": (0, 100)},
                     keys={"g": ["a", "b", "c"]}, session=dpf.Session(path=path))
    pf.dp.count(epsilon=0.1, random_state=0)
    pf.dp.groupby("g").release({"n": dpf.count()}, epsilon=0.1, random_state=1)
    pf.dp.groupby("g", keys=["a", "b"]).release({"n": dpf.count()}, epsilon=0.1,
                                                 random_state=2)
    doc = pf.dp.session.ledger.snapshot_document()
    assert len(doc["keys"]) == 2
    assert (doc["entries"].digest, doc["keys"].digest) == _recomputed(doc)
    # another process's view (the file re-read from the start) has the same digests
    from dpframe.accounting.durable import DurableLedger

    other = DurableLedger(path)
    again = other.snapshot_document()
    assert (again["entries"].digest, again["keys"].digest) == _recomputed(doc)
    other.close()
    # the sealed table's file verifies with the digests recomputed from the file
    table = pf.dp.groupby("g").release({"n": dpf.count()}, epsilon=0.1, random_state=3)
    table.to_parquet(tmp_path / "r.parquet")
    assert dpf.read_log(tmp_path / "r.parquet")


def test_snapshot_entries_are_immutable_and_survive_pickling():
    import pickle

    pf = dpf.protect(pd.DataFrame(sample_data()), epsilon=1.0, bounds={"income": (0, 100)})
    pf.dp.count(epsilon=0.1, random_state=0)
    doc = pf.dp.session.ledger.snapshot_document()
    with pytest.raises(TypeError):
        doc["entries"].append({})
    with pytest.raises(TypeError):
        doc["keys"]["sha256:x"] = "[]"
    back = pickle.loads(pickle.dumps(doc))
    assert back["entries"].digest == doc["entries"].digest
    assert back["keys"].digest == doc["keys"].digest


# -- malformed files: DPFrameError subclasses only --------------------------------------------
def test_read_log_raises_only_dpframe_errors_on_malformed_files(tmp_path):
    files = malformed_files(tmp_path)
    assert len(files) >= 39
    unreadable = tmp_path / "unreadable.parquet"
    unreadable.write_bytes(good_file(tmp_path).read_bytes())
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        files["permission_denied"] = unreadable
    outcome = {}
    for name, path in files.items():
        for kwargs in ({}, {"key": KEY}, {"verify": False}, {"verify": False,
                                                               "as_frame": "pandas"}):
            try:
                dpf.read_log(path, **kwargs)
            except dpf.DPFrameError as exc:
                outcome[name, tuple(kwargs)] = type(exc).__name__
                assert str(exc)
            else:
                outcome[name, tuple(kwargs)] = "read"
    # a file that cannot be verified is never read as verified
    for name in files:
        assert outcome[name, ()] != "read", name
        assert outcome[name, ("key",)] != "read", name
    for name in ("kv_log_bit_flip", "kv_pandas_bit_flip"):
        assert outcome[name, ()] == "IntegrityError", name
    for name in ("text", "empty", "magic_only", "truncated_half", "truncated_footer",
                 "no_leading_magic", "garbage_with_magic", "directory", "missing"):
        assert outcome[name, ()] == "ReleaseFileError", name
    unreadable.chmod(0o600)


def test_read_log_checks_its_arguments(tmp_path):
    good = good_file(tmp_path)
    with pytest.raises(dpf.ParameterError, match="as_frame"):
        dpf.read_log(good, as_frame="spark")
    with pytest.raises(dpf.ParameterError, match="key"):
        dpf.read_log(good, key=42)
    for path in (None, 42, ["a.parquet"]):
        with pytest.raises(dpf.ParameterError, match="path"):
            dpf.read_log(path)
    assert dpf.read_log(os.fsencode(good))

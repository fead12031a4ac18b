"""A release table's seal is computed when it is first needed (dpframe.accounting.seals,
``_PendingSeal``), over a snapshot of the table as released: the same seal as sealing at
release, every way of reading a pandas table's log seals it first, and a table edited after
release (values, labels' names) still fails verification."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.seals import (
    RELEASE_ATTRS_KEY,
    check_seal,
    release_log_of,
    sealed_document,
    table_digest,
)
from dpframe.errors import IntegrityError


def _protected(library):
    rng = np.random.default_rng(3)
    data = {"x": rng.uniform(0, 10, 60), "g": np.arange(60) % 3}
    frame = pd.DataFrame(data) if library == "pandas" else pl.DataFrame(data)
    return dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 10)}, keys={"g": [0, 1, 2]})


def _pending(table):
    return type(table.attrs[RELEASE_ATTRS_KEY]).__name__ == "_LazySealedLog" and \
        table.attrs[RELEASE_ATTRS_KEY]._pending is not None


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_the_deferred_seal_is_the_seal_at_release(library):
    pf = _protected(library)
    for table in (pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.5,
                                random_state=1),
                  pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=0.5, random_state=2),
                  pf.dp.value_counts("g", epsilon=0.5, random_state=3)):
        if library == "pandas":
            assert _pending(table)
        doc = release_log_of(table)
        assert doc is not None and doc["seal"]["table"] == table_digest(table)
        check_seal(doc, table)
        unsealed = {k: v for k, v in doc.items() if k != "seal"}
        assert sealed_document(table, unsealed, release_id=doc["release_ids"]) == doc


def test_every_way_of_reading_a_pandas_log_seals_it():
    pf = _protected("pandas")

    def fresh():
        return pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1, random_state=4)

    readers = [lambda a: json.loads(json.dumps(a))[RELEASE_ATTRS_KEY],
               lambda a: pickle.loads(pickle.dumps(a))[RELEASE_ATTRS_KEY],
               lambda a: copy.deepcopy(a)[RELEASE_ATTRS_KEY],
               lambda a: dict(a[RELEASE_ATTRS_KEY]),
               lambda a: {k: a[RELEASE_ATTRS_KEY][k] for k in a[RELEASE_ATTRS_KEY]}]
    for read in readers:
        table = fresh()
        assert _pending(table)
        got = read(table.attrs)
        assert "seal" in got and not _pending(table)
        assert json.loads(json.dumps(got)) == json.loads(json.dumps(release_log_of(table)))
        check_seal(json.loads(json.dumps(got)), table)
    # two unsealed logs compare equal without sealing (pandas keeps attrs through concat)
    a, b = fresh(), fresh()
    assert a.attrs == b.attrs and _pending(a) and _pending(b)


def test_a_pandas_table_edited_after_release_fails_verification(tmp_path):
    pf = _protected("pandas")
    edits = [lambda t: t.iloc.__setitem__((0, 0), 1e6),
             lambda t: setattr(t.columns, "name", "edited"),
             lambda t: setattr(t.index, "name", "edited")]
    for edit in edits:
        table = pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1, random_state=5)
        edit(table)  # before the seal is computed
        with pytest.raises(IntegrityError):
            dpf.write_parquet(table, tmp_path / "t.parquet")
        with pytest.raises(IntegrityError):
            table.to_parquet(tmp_path / "u.parquet")
            dpf.read_log(tmp_path / "u.parquet")


def test_a_polars_table_edited_after_release_fails_verification(tmp_path):
    pf = _protected("polars")
    table = pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=0.5, random_state=6)
    table[0, "count"] = 1e6  # in place, before the seal is computed
    with pytest.raises(IntegrityError):
        dpf.write_parquet(table, tmp_path / "t.parquet")
    clean = pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=0.5, random_state=6)
    dpf.write_parquet(clean, tmp_path / "c.parquet")
    assert dpf.read_log(tmp_path / "c.parquet") is not None


def test_a_pandas_table_kept_as_parts_is_the_table_and_edits_fail(tmp_path):
    """A small table of numbers is snapshotted as its blocks' values (seals._PandasParts,
    pandas 3): rebuilt, it is the table as released; an edit after release (a key, a count,
    a label's name) still fails verification."""
    from dpframe.accounting import seals

    pf = _protected("pandas")
    table = pf.dp.value_counts("g", epsilon=0.5, random_state=3)
    parts = seals._snapshot(table)
    if type(parts).__name__ != "_PandasParts":
        pytest.skip("pandas without tables from blocks (before 3)")
    pd.testing.assert_frame_equal(parts.frame(), table, check_exact=True)
    assert table_digest(parts.frame()) == table_digest(table)
    edits = [lambda t: t.iloc.__setitem__((0, 0), 7), lambda t: t.iloc.__setitem__((1, 1), 1e6),
             lambda t: setattr(t.columns, "name", "edited"),
             lambda t: setattr(t.index, "name", "edited")]
    for edit in edits:
        table = pf.dp.value_counts("g", epsilon=0.5, random_state=3)
        edit(table)  # before the seal is computed
        with pytest.raises(IntegrityError):
            dpf.write_parquet(table, tmp_path / "t.parquet")


def test_parts_handed_over_at_release_are_the_parts_read_back(tmp_path):
    """A pandas table made from its blocks hands its seal those blocks and labels
    (seals.attach_release_log_of_blocks): the same snapshot as read back from the table
    (seals._snapshot), a seal that verifies, and an edit after release still fails."""
    from dpframe.accounting import seals

    pf = _protected("pandas")
    for release in (lambda: pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=0.5,
                                            random_state=6),
                    lambda: pf.dp.value_counts("g", epsilon=0.5, random_state=3),
                    lambda: pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1, random_state=5)):
        table = release()
        handed = table.attrs[RELEASE_ATTRS_KEY]._pending._snapshot
        read = seals._snapshot(table)
        if type(read).__name__ != "_PandasParts":
            pytest.skip("pandas without tables from blocks (before 3)")
        assert type(handed) is type(read)
        pd.testing.assert_frame_equal(handed.frame(), read.frame(), check_exact=True)
        assert table_digest(handed.frame()) == table_digest(table)
        check_seal(release_log_of(table), table)
        edited = release()
        edited.iloc[0, edited.shape[1] - 1] = 1e6
        with pytest.raises(IntegrityError):
            dpf.write_parquet(edited, tmp_path / "t.parquet")

"""The declared neighbour definition (issue 33): ``dpf.protect(..., neighbours=...)`` is
checked before anything is read, recorded in the ledger's document, every log entry, the
durable ledger's header and a sealed file's log; one ledger never mixes the two; documents and
files written without the field read as ``"replace"`` and still verify."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import dpframe as dpf
from dpframe.accounting.durable import DurableLedger
from dpframe.accounting.neighbours import neighbours_of
from dpframe.errors import LedgerError, ParameterError, SelectionWarning, UnsupportedInputError
from dpframe.provenance import _protect

FIXTURE = Path(__file__).parents[1] / "report" / "data" / "whole_analysis_long.parquet"
BOUNDS = {"x": (0.0, 10.0)}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "g": ["a", "b", "a", "b"]})


def _refuse(*_a: object, **_k: object) -> None:
    raise AssertionError("protect read the data")


@pytest.fixture
def no_read(monkeypatch):
    """Fail the test if protect reaches its first read of the data."""
    monkeypatch.setattr(_protect, "_first_read", _refuse)
    monkeypatch.setattr(_protect, "_snapshot", _refuse)


@pytest.mark.parametrize("kw", [{"neighbours": "add-remove"}, {"neighbours": None},
                                {"max_rows": 10},  # only with add_remove
                                {"neighbours": "add_remove", "max_rows": 0},
                                {"neighbours": "add_remove", "max_rows": True},
                                {"neighbours": "add_remove", "privacy_unit": "g",
                                 "max_rows_per_unit": 2}])
def test_bad_arguments_are_refused_before_anything_is_read(no_read, kw):
    with pytest.raises(ParameterError):
        dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, **kw)


def test_recorded_in_the_document_every_entry_the_log_frame_and_the_sealed_file(tmp_path):
    pf = dpf.protect(_frame(), epsilon=5.0, delta=1e-6, bounds=BOUNDS, missing="lower",
                     neighbours="add_remove")
    pf.dp.count(epsilon=0.5, random_state=1)
    with pytest.warns(SelectionWarning):  # (4 rows: no key passes; two entries all the same)
        table = pf.dp.groupby("g").count(epsilon=0.5, delta=1e-6, random_state=1)
    doc = pf.dp.session.ledger.snapshot_document()
    assert doc["neighbours"] == "add_remove"
    assert len(doc["entries"]) == 3
    assert all(e["neighbours"] == "add_remove" for e in doc["entries"])
    assert set(pf.dp.log["neighbours"]) == {"add_remove"}
    path = tmp_path / "r.parquet"
    table.to_parquet(path)
    back = dpf.read_log(path)  # verified: the seal covers the field
    assert neighbours_of(back) == "add_remove"
    assert all(e["neighbours"] == "add_remove" for e in back["entries"])
    assert "neighbours" in dpf.read_log(path, as_frame="pandas").columns


def test_replace_documents_and_files_written_before_have_no_field_and_read_as_replace():
    pf = dpf.protect(_frame(), epsilon=5.0, bounds=BOUNDS, missing="lower")
    pf.dp.mean("x", epsilon=0.5, random_state=1)
    doc = pf.dp.session.ledger.snapshot_document()
    assert "neighbours" not in doc and all("neighbours" not in e for e in doc["entries"])
    assert neighbours_of(doc) == "replace"
    assert "neighbours" not in pf.dp.log.columns
    old = dpf.read_log(FIXTURE)  # written before the field existed: still verifies
    assert "neighbours" not in old and neighbours_of(old) == "replace"


def test_a_session_never_mixes_the_two(monkeypatch):
    sess = dpf.Session()
    dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, missing="lower",
                neighbours="add_remove", session=sess)
    monkeypatch.setattr(_protect, "_first_read", _refuse)
    monkeypatch.setattr(_protect, "_snapshot", _refuse)
    with pytest.raises(LedgerError, match="never mixes"):
        dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, missing="lower", session=sess)


def test_a_durable_ledger_keeps_its_definition_and_old_files_read_as_replace(tmp_path,
                                                                             monkeypatch):
    new = tmp_path / "ar.ledger"
    pf = dpf.protect(_frame(), epsilon=2.0, bounds=BOUNDS, missing="lower",
                     neighbours="add_remove", session=dpf.Session(path=new))
    pf.dp.count(epsilon=0.5, random_state=1)
    assert DurableLedger(new).neighbours == "add_remove"
    old = tmp_path / "old.ledger"
    DurableLedger(old, 2.0, 0.0).close()  # the format written before: no field
    assert DurableLedger(old).neighbours == "replace"
    monkeypatch.setattr(_protect, "_first_read", _refuse)
    monkeypatch.setattr(_protect, "_snapshot", _refuse)
    for path, asked in ((new, "replace"), (old, "add_remove")):
        with pytest.raises(LedgerError, match="never mixes"):
            dpf.protect(_frame(), epsilon=2.0, bounds=BOUNDS, neighbours=asked,
                        session=dpf.Session(path=path))
    with pytest.raises(LedgerError, match="never mixes"):  # opened directly: checked too
        DurableLedger(new, neighbours="replace")


def test_max_rows_must_hold_and_is_checked_once_at_protect():
    with pytest.raises(UnsupportedInputError, match="more rows than the max_rows"):
        dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, neighbours="add_remove", max_rows=3)
    pf = dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, missing="lower",
                     neighbours="add_remove", max_rows=4)
    pf.dp.mean("x", epsilon=0.5, random_state=1)
    assert pf.dp.log["domain_upper"].iloc[0] == 4.0  # the count's domain: [0, max_rows]


def test_no_private_size_notice_under_add_remove(recwarn):
    dpf.protect(_frame(), epsilon=1.0, bounds=BOUNDS, neighbours="add_remove")  # n is private
    assert not [w for w in recwarn if issubclass(w.category, dpf.PrivateSizeWarning)]

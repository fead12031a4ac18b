"""The typed log entry (dpframe/accounting/_log_schema.py): the columns of the log frame, the JSON
of each entry and the reader of a stored entry all derive from ``LogRecord``, and agree."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting._log_schema import (
    FLOAT_COLUMNS,
    INT_COLUMNS,
    LOG_COLUMNS,
    OPTIONAL_COLUMNS,
    LogRecord,
)


def _entries() -> list[dict[str, object]]:
    """Entries of every kind a ledger holds: plain and grouped releases, a key selection,
    a public size, a privacy unit, a failed release."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"x": rng.uniform(0, 10, 400), "g": rng.choice(["a", "b"], 400),
                          "pid": rng.integers(0, 100, 400)})
    pf = dpf.protect(frame, epsilon=10.0, delta=1e-4, bounds={"x": (0.0, 10.0)})
    pf.dp.mean("x", epsilon=0.5, random_state=1)
    pf.dp.release({"n": dpf.count(), "s": dpf.sum("x")}, epsilon=0.5, random_state=1)
    pf.dp.groupby("g").mean("x", epsilon=0.5, delta=1e-6, random_state=1)  # keys selected
    units = dpf.protect(frame.copy(), epsilon=10.0, bounds={"x": (0.0, 10.0)},
                        privacy_unit="pid", max_rows_per_unit=4)
    units.dp.groupby("g", keys=["a", "b"]).sum("x", epsilon=0.5, random_state=1)
    entries = [dict(e) for e in pf.dp.session.ledger.snapshot_document()["entries"]]
    entries += [dict(e) for e in units.dp.session.ledger.snapshot_document()["entries"]]
    from dpframe.provenance._units import describe
    from dpframe.release._safety_net import failure_entry

    entries.append(failure_entry(what="release", names=["m"], epsilon=0.1, delta=0.0,
                                 engine="pandas", random_source="secure",
                                 derivation="protect", unit_fields=describe(None, False)))
    return entries


ENTRIES = _entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e['query']}:{e['part']}")
def test_every_entry_reads_back_as_a_record_and_writes_the_same_json(entry):
    record = LogRecord.from_dict(entry)
    assert record.to_dict() == entry
    stamped = "release_id" in entry
    assert set(entry) == set(LOG_COLUMNS) - (set() if stamped else {"ledger_id",
                                                                    "release_id"})


def test_the_entries_cover_every_kind():
    assert {e["query"] for e in ENTRIES} >= {"mean", "key selection", "failed release"}
    assert any(e["privacy_unit"] != "row" for e in ENTRIES)


def test_an_unknown_or_missing_column_is_refused():
    entry = dict(ENTRIES[0])
    with pytest.raises(TypeError):
        LogRecord.from_dict({**entry, "surprise": 1})
    del entry["formulation"]
    with pytest.raises(TypeError):
        LogRecord.from_dict(entry)


def test_the_log_frames_have_the_record_s_columns_and_types():
    pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0, 3.0]}), epsilon=1.0, bounds={"x": (0, 5)})
    pf.dp.mean("x", epsilon=0.5, random_state=0)
    assert tuple(pf.dp.log.columns) == LOG_COLUMNS
    lf = dpf.protect(pl.DataFrame({"x": [1.0, 2.0, 3.0]}), epsilon=1.0, bounds={"x": (0, 5)})
    lf.dp.mean("x", epsilon=0.5, random_state=0)
    log = lf.dp.log
    assert tuple(log.columns) == LOG_COLUMNS
    for name, dtype in log.schema.items():
        expected = (pl.Float64 if name in FLOAT_COLUMNS else pl.Int64 if name in INT_COLUMNS
                    else pl.String)
        assert dtype == expected, name
    assert tuple(f.name for f in dataclasses.fields(LogRecord)) == LOG_COLUMNS + OPTIONAL_COLUMNS


def test_entry_dict_is_the_record_read_back():
    fields = {k: v for k, v in ENTRIES[0].items() if k not in ("ledger_id", "release_id")}
    assert LogRecord.entry_dict(fields) == LogRecord.from_dict(fields).to_dict()
    assert list(LogRecord.entry_dict(fields)) == [c for c in LOG_COLUMNS
                                                  if c not in ("ledger_id", "release_id")]
    with pytest.raises(TypeError):
        LogRecord.entry_dict({**fields, "unknown": 1})
    # the neighbour definition: written only when it is add/remove, as the record writes it
    assert "neighbours" not in LogRecord.entry_dict({**fields, "neighbours": "replace"})
    marked = {**fields, "neighbours": "add_remove"}
    assert LogRecord.entry_dict(marked) == LogRecord.from_dict(marked).to_dict()
    del fields["time"]
    with pytest.raises(TypeError):
        LogRecord.entry_dict(fields)

"""A ledger snapshot's entries and key lists are copied out when first read
(dpframe.accounting._log_snapshot): a table release costs O(1) in the ledger's history, and
what any reader sees is what a copy made at release would hold -- later releases (tables and
numbers), a cleared log, or reading in any order change nothing."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting._log_entries import ENTRIES_CHAIN_START, chain_entries
from dpframe.accounting._log_snapshot import EntriesAsOf, LogDocument
from dpframe.accounting.ledger import Ledger
from dpframe.accounting.seals import check_seal, release_log_of


def _protected(library: str):
    rng = np.random.default_rng(5)
    data = {"x": rng.uniform(0, 10, 40), "g": np.arange(40) % 3}
    frame = pd.DataFrame(data) if library == "pandas" else pl.DataFrame(data)
    return dpf.protect(frame, epsilon=100.0, bounds={"x": (0, 10)}, keys={"g": [0, 1, 2]})


def _plain(doc):
    """The document as JSON text (every reader's view: values, order of fields)."""
    return json.dumps(doc)


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_a_later_release_does_not_change_an_earlier_tables_log(library):
    pf = _protected(library)
    ledger = pf.dp.session.ledger
    first = pf.dp.histogram("x", edges=[0.0, 5.0, 10.0], epsilon=0.5, random_state=1)
    at_release = json.loads(json.dumps(dict(ledger.snapshot_document())))
    read_now = pf.dp.value_counts("g", epsilon=0.5, random_state=2)
    now_log = json.loads(json.dumps(release_log_of(read_now)))
    second = pf.dp.groupby("g", keys=[1, 2]).release({"n": dpf.count()}, epsilon=0.5,
                                                     random_state=3)
    pf.dp.mean("x", epsilon=0.5, random_state=4)  # (a number: entries, no table)
    pf.dp.value_counts("g", epsilon=0.5, random_state=5)
    log = release_log_of(first)  # read only now, after four more releases
    assert log is not None
    check_seal(log, first)
    assert json.loads(json.dumps(log["entries"])) == at_release["entries"]
    assert json.loads(json.dumps(log["keys"])) == at_release["keys"]
    assert {k: v for k, v in log.items() if k not in ("seal", "kind", "release_ids")} == \
        at_release
    assert len(release_log_of(second)["keys"]) == len(now_log["keys"]) + 1
    assert release_log_of(read_now)["entries"] == now_log["entries"]
    everything = ledger.snapshot_document()["entries"]
    assert len(everything) >= len(log["entries"]) + 4
    assert everything[: len(log["entries"])] == log["entries"]


def test_a_snapshot_reads_as_the_copy_made_at_snapshot_time():
    ledger = Ledger(1.0)
    commit = [{"query": "count", "name": f"q{i}", "x": [i, {"y": i}]} for i in range(6)]
    ledger.commit(ledger.reserve(0.0), commit[:3], keys={"r1": "[1,2]"})
    doc = ledger.snapshot_document()
    twin = ledger.snapshot_document()
    ledger.commit(ledger.reserve(0.0), commit[3:], keys={"r2": "[3]"})
    assert isinstance(doc, LogDocument) and isinstance(doc.fields()["entries"], EntriesAsOf)
    copies = [copy.copy(doc), copy.deepcopy(doc), pickle.loads(pickle.dumps(doc)), dict(doc),
              {**doc}, json.loads(json.dumps(doc))]
    assert list(doc) == ["version", "ledger_id", "budget", "entries", "keys"]
    assert [e["name"] for e in doc["entries"]] == ["q0", "q1", "q2"]
    assert dict(doc["keys"]) == {"r1": "[1,2]"}
    for other in copies:
        assert other == doc and json.dumps(other) == json.dumps(doc)
    assert doc["entries"].digest == chain_entries(ENTRIES_CHAIN_START,
                                                  json.loads(json.dumps(doc["entries"])))
    with ledger._lock:  # a cleared log: the snapshot keeps its prefix of the old lists
        ledger._clear_log()
    assert twin == doc and len(twin["entries"]) == 3 and len(ledger.snapshot_document()[
        "entries"]) == 0

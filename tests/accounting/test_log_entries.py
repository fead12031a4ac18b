"""Committed log entries are immutable and keep their canonical JSON, so a table release seals
the ledger's document without re-encoding every earlier entry (issue 15: log building)."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.accounting._log_entries import LogEntry, canonical_json, detached, frozen_entries


def _plain(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def test_canonical_json_is_json_dumps_byte_for_byte():
    raw = [{"b": 1, "a": [1.5, None, {"z": "é", "y": float("inf")}], "c": (1, 2)},
           {"epsilon": 0.1, "name": "n", "nested": {"k": [True, False]}}]
    entries = frozen_entries(raw)
    doc = {"version": 2, "entries": entries, "keys": {"sha256:x": "[1, 2]"},
           "budget": {"epsilon": 1.0}, "ünï": "ok"}
    assert canonical_json(doc) == _plain(doc)
    assert canonical_json(entries) == _plain(entries)
    assert canonical_json(entries[0]) == _plain(json.loads(json.dumps(raw[0])))
    assert entries[0]["c"] == [1, 2]  # a tuple became a list, as a JSON round trip makes it


def test_entries_refuse_changes_and_copy_as_themselves():
    (entry,) = frozen_entries([{"a": [1, 2], "b": {"c": 3}}])
    for change in (lambda: entry.__setitem__("a", 0), lambda: entry.update(a=0),
                   lambda: entry.pop("a"), lambda: entry["a"].append(3),
                   lambda: entry["a"].__setitem__(0, 9), lambda: entry["b"].clear()):
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    assert entry == {"a": [1, 2], "b": {"c": 3}}
    assert copy.copy(entry) is entry and copy.deepcopy(entry) is entry
    back = pickle.loads(pickle.dumps(entry))
    assert back == entry and isinstance(back, LogEntry) and isinstance(back["b"], LogEntry)
    mutable = dict(entry)
    mutable["a"] = 0  # a plain copy is an ordinary dict


def test_detached_shares_entries_and_copies_the_rest():
    entries = frozen_entries([{"a": 1}])
    doc = {"entries": entries, "budget": {"epsilon": 1.0}, "ids": (1, 2)}
    out = detached(doc)
    assert out["entries"][0] is entries[0] and out["entries"] is not entries
    assert out["budget"] == doc["budget"] and out["budget"] is not doc["budget"]
    assert out["ids"] == [1, 2]


@pytest.mark.parametrize("backend", ["pandas", "polars"])
def test_a_release_table_seals_the_same_log_as_before(backend, tmp_path):
    """The table's log is the ledger's document; its entries are the ledger's own immutable
    entries; the seal verifies from the Parquet file; a later release does not reach it."""
    data = {"x": np.random.default_rng(1).uniform(0, 1, 300)}
    frame = pd.DataFrame(data) if backend == "pandas" else pl.DataFrame(data)
    pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 1)}, missing={"x": 0.0})
    for _ in range(5):
        pf.dp.mean("x", epsilon=0.1)
    table = pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1)
    ledger_entries = pf.dp.session.ledger.entries
    assert all(isinstance(e, LogEntry) for e in ledger_entries)
    path = tmp_path / "r.parquet"
    if backend == "pandas":
        table.to_parquet(path)
    else:
        table.dp.write_parquet(path)
    read = dpf.read_log(path)  # verifies the seal against the file's values
    assert len(read["entries"]) == 6
    assert read["entries"] == [dict(e) for e in ledger_entries]
    pf.dp.mean("x", epsilon=0.1)
    assert len(dpf.read_log(path)["entries"]) == 6


def test_freezing_gives_what_a_json_round_trip_gives():
    raw = {"a": (1, 2.5, None), "b": {"c": [True, {"d": "x"}]}, "n": float("inf")}
    odd = {"a": {1: "one", 2.5: "x"}}  # non-string keys: JSON makes them strings
    for entry in (raw, odd):
        (frozen,) = frozen_entries([entry])
        assert frozen == json.loads(json.dumps(entry))
        assert frozen.canonical == _plain(json.loads(json.dumps(entry)))


# -- chained digests (a seal covers the log by reference) -------------------------------------
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=12)
_entries = st.lists(st.dictionaries(st.text(max_size=6), _json_values, max_size=4), max_size=6)


@settings(max_examples=150, deadline=None)
@given(_entries, _entries)
def test_entry_chain_extends_and_survives_a_json_round_trip(first, second):
    """Extending the chain commit by commit equals chaining all entries at once, and a log
    read back from JSON (a file) gives the same chain as the ledger's frozen entries."""
    from dpframe.accounting._log_entries import ENTRIES_CHAIN_START, chain_entries

    frozen = frozen_entries(first + second)
    step = chain_entries(chain_entries(ENTRIES_CHAIN_START, frozen[:len(first)]),
                         frozen[len(first):])
    assert step == chain_entries(ENTRIES_CHAIN_START, frozen)
    assert step == chain_entries(ENTRIES_CHAIN_START, json.loads(json.dumps(frozen)))
    if frozen:  # any change to any entry, or their order, changes it
        changed = json.loads(json.dumps(frozen))
        changed[-1]["__extra"] = 1
        assert chain_entries(ENTRIES_CHAIN_START, changed) != step
    if len(frozen) >= 2 and canonical_json(frozen[0]) != canonical_json(frozen[1]):
        swapped = [frozen[1], frozen[0], *frozen[2:]]
        assert chain_entries(ENTRIES_CHAIN_START, swapped) != step


def test_key_chain_follows_the_insertion_order():
    from dpframe.accounting._log_entries import KEYS_CHAIN_START, chain_keys, keys_digest

    keys = {"sha256:a": "[1]", "sha256:b": "[2]"}
    d = keys_digest(keys)
    assert d == chain_keys(chain_keys(KEYS_CHAIN_START, [("sha256:a", "[1]")]),
                           [("sha256:b", "[2]")])
    assert d != keys_digest(dict(reversed(list(keys.items()))))
    assert d == keys_digest(json.loads(json.dumps(keys)))


def test_snapshot_digests_read_in_any_order_equal_the_chain_over_their_entries() -> None:
    """The entries chain is extended when a snapshot's digest is read, not at each commit;
    snapshots read late, early, twice or out of order all carry the chain over exactly
    their own items, also after the ledger clears its log."""
    from dpframe.accounting._log_entries import ENTRIES_CHAIN_START, chain_entries
    from dpframe.accounting.ledger import Ledger

    ledger = Ledger(10.0)
    snaps = []
    for i in range(6):
        ledger.commit(ledger.reserve(0.1), [{"query": f"q{i}", "value": i}])
        snaps.append(ledger.snapshot_document()["entries"])
    for j in (3, 1, 5, 0, 4, 2, 5):
        assert snaps[j].digest == chain_entries(ENTRIES_CHAIN_START, list(snaps[j]))
    with ledger._lock:
        ledger._clear_log()
    ledger.commit(ledger.reserve(0.1), [{"query": "after", "value": 0}])
    fresh = ledger.snapshot_document()["entries"]
    assert fresh.digest == chain_entries(ENTRIES_CHAIN_START, list(fresh))
    assert snaps[5].digest == chain_entries(ENTRIES_CHAIN_START, list(snaps[5]))

"""Group keys are stored once per ledger (issue 15): log entries name a key list by reference,
the ledger's ``keys`` table holds its JSON once, durable ledgers write it once, and every
reader (log frames, durable re-reads, release files) resolves the reference."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import polars as pl

import dpframe as dpf
from dpframe.accounting.durable import read_ledger_file
from dpframe.query._keys import keys_reference

KEYS = [f"k{i}" for i in range(50)]


def _frame(n=400):
    rng = np.random.default_rng(0)
    return pd.DataFrame({"g": rng.choice(KEYS, n), "x": rng.uniform(0, 1, n)})


def test_reference_is_the_sha256_of_the_json():
    ref, text = keys_reference(("a", "b"))
    assert text == '["a", "b"]'
    assert ref == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    # equal-comparing keys of other types are other key lists
    assert keys_reference((1, 2))[1] == "[1, 2]"
    assert keys_reference((1.0, 2.0))[1] == "[1.0, 2.0]"
    assert keys_reference((True, False))[1] == "[true, false]"
    assert keys_reference((np.int64(3),))[1] == "[3]"
    assert keys_reference((("a", 1), ("b", 2)))[1] == '[["a", 1], ["b", 2]]'
    assert len({keys_reference(k)[0] for k in [(1, 2), (1.0, 2.0), (True, False)]}) == 3


def test_in_memory_ledger_stores_each_key_list_once():
    pf = dpf.protect(_frame(), epsilon=10.0, bounds={"x": (0.0, 1.0)}, keys={"g": KEYS})
    for _ in range(3):
        pf.dp.groupby("g").mean("x", epsilon=0.1)
    table = pf.dp.groupby("g", keys=KEYS[:5]).count(epsilon=0.1)
    doc = pf.dp.session.ledger.snapshot_document()
    refs = {e["group_keys"] for e in doc["entries"]}
    assert len(doc["entries"]) == 7 and len(refs) == 2
    assert set(doc["keys"]) == refs
    assert json.loads(doc["keys"][doc["entries"][0]["group_keys"]]) == KEYS
    log = pf.dp.log  # the frame shows the JSON list itself
    assert log["group_keys"].iloc[0] == json.dumps(KEYS)
    assert log["group_keys"].iloc[-1] == json.dumps(KEYS[:5])
    assert table.dp.log["group_keys"].iloc[-1] == json.dumps(KEYS[:5])


def test_durable_ledger_writes_each_key_list_once(tmp_path):
    path = tmp_path / "ledger.jsonl"
    session = dpf.Session(path=path)
    pf = dpf.protect(pl.from_pandas(_frame()), epsilon=10.0, bounds={"x": (0.0, 1.0)},
                     keys={"g": KEYS}, session=session)
    table = None
    for _ in range(3):
        table = pf.dp.groupby("g").mean("x", epsilon=0.1)
    info = read_ledger_file(path)
    with_keys = [r for r in info["releases"] if "keys" in r]
    assert len(info["releases"]) == 3 and len(with_keys) == 1
    assert list(with_keys[0]["keys"].values()) == [json.dumps(KEYS)]
    # a second session re-reads the table from the file; the release file carries it too
    from dpframe.accounting.durable import DurableLedger

    doc = DurableLedger(path).snapshot_document()
    assert doc["keys"] == pf.dp.session.ledger.snapshot_document()["keys"]
    out = tmp_path / "r.parquet"
    table.dp.write_parquet(out)
    frame = dpf.read_log(out, as_frame="pandas")
    assert (frame["group_keys"] == json.dumps(KEYS)).all()

"""The generic exceptions that remained (issue 30, item 6) are ``DPFrameError`` subclasses whose
message names the fix and quotes no data value:

* ``read_log`` on a file whose footer is damaged where pyarrow decodes it lazily
  (``created_by``, string statistics): was ``UnicodeDecodeError``;
* ``write_parquet`` into a folder or a missing folder (was ``IsADirectoryError`` /
  ``FileNotFoundError``), and a write that fails (``ReleaseWriteError``, also an ``OSError``);
* a durable ledger that cannot be opened or read (no permission, read-only file system): was
  ``PermissionError``; now a ``LedgerError`` before anything is read or spent;
* ``weights=[1e308, 1e308]``: was ``ZeroDivisionError`` (their sum overflowed); now the same
  shares as ``[1, 1]``, and weights whose smaller share is 0 in floating point are refused.
"""

from __future__ import annotations

import contextlib
import os
import random
import warnings

import pandas as pd
import pytest

import dpframe as dpf
from dpframe.accounting.durable import DurableLedger, read_ledger_file
from dpframe.errors import (
    DPFrameError,
    LedgerError,
    ParameterError,
    ReleaseFileError,
    ReleaseWriteError,
)


def _table():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(pd.DataFrame({"x": [0.25] * 50}), epsilon=1.0, bounds={"x": (0, 1)},
                         missing={"x": 0.5})
    return pf, pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.5,
                             random_state=1)


# -- read_log on a damaged footer -----------------------------------------------------------
def test_read_log_on_a_damaged_created_by_is_a_release_file_error(tmp_path):
    _, table = _table()
    path = tmp_path / "r.parquet"
    dpf.write_parquet(table, path)
    raw = bytearray(path.read_bytes())
    at = raw.rfind(b"parquet-cpp-arrow")
    assert at > 0
    raw[at + 3] = 0xD6  # an invalid UTF-8 sequence inside created_by
    path.write_bytes(bytes(raw))
    for verify in (True, False):
        with pytest.raises(ReleaseFileError, match="truncated or damaged"):
            dpf.read_log(path, verify=verify)


def test_read_log_on_random_footer_damage_raises_only_dpframe_errors(tmp_path):
    _, table = _table()
    path = tmp_path / "r.parquet"
    dpf.write_parquet(table, path)
    raw = path.read_bytes()
    footer = int.from_bytes(raw[-8:-4], "little")
    start = len(raw) - 8 - footer
    rng = random.Random(30)
    bad = tmp_path / "bad.parquet"
    for _ in range(600):
        damaged = bytearray(raw)
        damaged[rng.randrange(start, len(raw) - 8)] = rng.randrange(256)
        bad.write_bytes(bytes(damaged))
        for verify in (True, False):
            with contextlib.suppress(DPFrameError):  # anything else fails the test
                dpf.read_log(bad, verify=verify)


# -- write_parquet -----------------------------------------------------------------------------
def test_write_parquet_into_a_folder_or_a_missing_folder_names_the_fix(tmp_path):
    _, table = _table()
    with pytest.raises(ParameterError, match="is a folder; name the file to write inside it"):
        dpf.write_parquet(table, tmp_path)
    with pytest.raises(ParameterError, match="is a folder"):
        dpf.write_parquet(table, str(tmp_path) + os.sep)
    with pytest.raises(ParameterError, match=r"does not exist .*create it first"):
        dpf.write_parquet(table, tmp_path / "missing" / "r.parquet")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ParameterError, match="is not a folder"):
        dpf.write_parquet(table, tmp_path / "file" / "r.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    dpf.write_parquet(table, tmp_path / "r.parquet")  # a file path: written, readable
    assert dpf.read_log(tmp_path / "r.parquet")["kind"] == "dpframe.release"


def test_a_failed_write_is_a_release_write_error(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    _, table = _table()

    def failing(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(ReleaseWriteError, match="Permission denied; choose a path") as info:
        dpf.write_parquet(table, tmp_path / "r.parquet")
    assert isinstance(info.value, OSError)


# -- a ledger that cannot be opened --------------------------------------------------------------
def _deny(monkeypatch, *names: str) -> None:
    real = os.open

    def guarded(path, flags, *args, **kwargs):
        if os.path.basename(os.fsdecode(path)) in names and not kwargs.get("dir_fd"):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)


@pytest.mark.parametrize("denied", ["l.jsonl", "l.jsonl.head"])
def test_a_ledger_that_cannot_be_opened_is_a_ledger_error(tmp_path, monkeypatch, denied):
    path = tmp_path / "l.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(pd.DataFrame({"x": [0.5] * 20}), epsilon=1.0, bounds={"x": (0, 1)},
                         missing={"x": 0.5}, session=dpf.Session(path=path))
    pf.dp.count(epsilon=0.1, random_state=1)
    spent = read_ledger_file(path)["epsilon_spent"]
    with monkeypatch.context() as m:
        _deny(m, denied)
        with pytest.raises(LedgerError, match="Give this user read and write permission"):
            DurableLedger(path)
        # an open session whose ledger becomes unreadable refuses before reading or spending
        with pytest.raises(LedgerError, match="nothing was read or spent"):
            pf.dp.count(epsilon=0.1, random_state=1)
    assert read_ledger_file(path)["epsilon_spent"] == spent
    pf.dp.count(epsilon=0.1, random_state=1)  # and answers again once it can be opened


def test_read_ledger_file_that_cannot_be_read_is_a_ledger_error(tmp_path, monkeypatch):
    from pathlib import Path

    path = tmp_path / "l.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dpf.protect(pd.DataFrame({"x": [0.5] * 20}), epsilon=1.0, bounds={"x": (0, 1)},
                    missing={"x": 0.5}, session=dpf.Session(path=path))
    real = Path.read_bytes

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(LedgerError, match="give this user read permission"):
        read_ledger_file(path)
    monkeypatch.setattr(Path, "read_bytes", real)
    assert read_ledger_file(path)["epsilon_spent"] == 0


# -- weights -------------------------------------------------------------------------------------
def test_huge_weights_share_like_equal_ones():
    pf, _ = _table()
    queries = {"s": dpf.sum("x"), "m": dpf.mean("x")}
    huge = pf.dp.release(queries, epsilon=0.2, weights=[1e308, 1e308], random_state=7)
    ones = pf.dp.release(queries, epsilon=0.2, weights=[1, 1], random_state=7)
    assert huge.equals(ones)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5 + 0.4)


@pytest.mark.parametrize("weights", [[1.7e308, 1e-300], [1e-320, 1e300]])
def test_weights_with_a_zero_share_are_refused_before_spending(weights):
    pf, _ = _table()
    before = pf.dp.budget.epsilon_spent
    with pytest.raises(ParameterError, match="share of epsilon that is 0"):
        pf.dp.release({"s": dpf.sum("x"), "m": dpf.mean("x")}, epsilon=0.2, weights=weights)
    assert pf.dp.budget.epsilon_spent == before

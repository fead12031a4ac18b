"""Head digests of a durable ledger (:func:`dpframe.accounting.durable.ledger_head`): ``dpframe
inspect LEDGER --head`` prints one; ``dpf.Session(path, expect_head=...)`` refuses a ledger whose
history does not contain it.

Rolling both ledger files back to an older copy, deleting both, or cloning them and spending on
the copy leaves two files that verify on their own; only a head recorded elsewhere shows it.
Cases: equal and ahead pass; behind (rolled back), diverged (a clone that spent separately),
deleted and another ledger are refused before anything is read or spent, leaving the files
unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.durable import DurableLedger, head_digest, ledger_head, read_ledger_file

ROOT = Path(__file__).resolve().parents[2]
HEAD = re.compile(r"[0-9]+:[0-9a-f]{32}")


def _spend(path: Path, releases: int, expect_head: str | None = None) -> None:
    """Protect a new frame in a session on ``path`` and spend ``releases`` times ε = 0.01."""
    session = dpf.Session(path=path, expect_head=expect_head)
    pf = dpf.protect(pl.DataFrame({"x": np.arange(30.0)}), epsilon=1.0,
                     bounds={"x": (0, 30)}, session=session)
    for _ in range(releases):
        pf.dp.mean("x", epsilon=0.01, random_state=0)


def _copy(src: Path, dst: Path) -> None:
    shutil.copy(src, dst)
    shutil.copy(f"{src}.head", f"{dst}.head")


def _files(path: Path) -> tuple[bytes, bytes]:
    return path.read_bytes(), Path(f"{path}.head").read_bytes()


def _inspect(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpframe", "inspect", *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_inspect_head_prints_the_chained_digest(tmp_path):
    """One line ``<release>:<32 hex>``: the last release and the start of its line's hash,
    which chains every line before it. ``--json`` gives the same; exit 0."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 3)
    proc = _inspect(ledger, "--head")
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.strip()
    assert HEAD.fullmatch(head) and head.startswith("3:")
    info = read_ledger_file(ledger)
    assert head == head_digest(3, info["chain_hash"]) == ledger_head(ledger)
    assert info["chain_hash"].startswith(head.split(":")[1])
    as_json = _inspect(ledger, "--head", "--json")
    assert json.loads(as_json.stdout) == {"file": str(ledger), "head": head}


def test_inspect_head_exit_codes(tmp_path):
    """A damaged ledger: exit 2 (NOT VERIFIED, no digest printed); a release file or a
    missing file: exit 1. Never a traceback."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 2)
    raw = bytearray(ledger.read_bytes())
    raw[-20] ^= 1
    ledger.write_bytes(bytes(raw))
    damaged = _inspect(ledger, "--head")
    assert damaged.returncode == 2 and damaged.stdout == ""
    assert damaged.stderr.startswith("NOT VERIFIED:")
    release = tmp_path / "r.parquet"
    pl.DataFrame({"x": [1.0]}).write_parquet(release)
    for path in (release, tmp_path / "missing.jsonl"):
        proc = _inspect(path, "--head")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_equal_and_ahead_are_accepted(tmp_path):
    """A ledger at the recorded head, or ahead of it, opens and spends; the full 64-hex hash
    is accepted too."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 2)
    head = ledger_head(ledger)
    _spend(ledger, 1, expect_head=head)  # equal
    _spend(ledger, 1, expect_head=head)  # ahead by one
    full = f"2:{read_ledger_file(ledger)['releases'][1]['hash']}"
    _spend(ledger, 1, expect_head=full)
    assert len(read_ledger_file(ledger)["releases"]) == 5


def test_every_earlier_head_is_contained_in_later_states(tmp_path):
    """The head after each release is accepted by every later state (a chain: extends)."""
    ledger = tmp_path / "l.jsonl"
    heads = []
    _spend(ledger, 0)
    heads.append(ledger_head(ledger))
    for _ in range(4):
        _spend(ledger, 1)
        heads.append(ledger_head(ledger))
    assert [h.split(":")[0] for h in heads] == ["0", "1", "2", "3", "4"]
    for head in heads:
        led = DurableLedger(ledger, expect_head=head)
        assert led.budget.epsilon_spent == pytest.approx(0.04)


def test_behind_a_rolled_back_ledger_is_refused(tmp_path):
    """Both files restored from an older backup: they verify on their own, but the recorded
    head names a later release. Refused (LedgerError, "BEHIND") by Session() and by
    DurableLedger(); both files unchanged."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 2)
    _copy(ledger, tmp_path / "backup.jsonl")
    _spend(ledger, 3)
    head = ledger_head(ledger)
    _copy(tmp_path / "backup.jsonl", ledger)
    read_ledger_file(ledger)  # verifies: undetectable without the head
    before = _files(ledger)
    with pytest.raises(dpf.LedgerError, match=r"is BEHIND the expected head '5:[0-9a-f]+': "
                       r"it ends at release 2.*rolled back"):
        dpf.Session(path=ledger, expect_head=head)
    with pytest.raises(dpf.LedgerError, match="BEHIND"):
        DurableLedger(ledger, expect_head=head)
    assert _files(ledger) == before


def test_rollback_between_session_and_protect_is_refused(tmp_path):
    """The session checks at construction; protect opens the ledger and checks again."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 1)
    _copy(ledger, tmp_path / "backup.jsonl")
    _spend(ledger, 1)
    session = dpf.Session(path=ledger, expect_head=ledger_head(ledger))
    _copy(tmp_path / "backup.jsonl", ledger)
    frame = pl.DataFrame({"x": np.arange(30.0)})
    with pytest.raises(dpf.LedgerError, match="BEHIND"):
        dpf.protect(frame, epsilon=1.0, bounds={"x": (0, 30)}, session=session)
    assert len(read_ledger_file(ledger)["releases"]) == 1


def test_diverged_clone_is_refused(tmp_path):
    """Both files cloned at release 2; the original and the clone each spend once more. The
    head of either is refused by the other ("DIVERGED"): each shows only its own spending.
    The clone's head before it diverged (release 2) is still accepted by both."""
    original, clone = tmp_path / "l.jsonl", tmp_path / "clone.jsonl"
    _spend(original, 2)
    at_fork = ledger_head(original)
    _copy(original, clone)
    _spend(original, 1)
    _spend(clone, 1)
    head_original, head_clone = ledger_head(original), ledger_head(clone)
    assert head_original.split(":")[0] == head_clone.split(":")[0] == "3"
    assert head_original != head_clone
    before = _files(clone)
    with pytest.raises(dpf.LedgerError, match=r"has DIVERGED from the expected head '3:.*its "
                       "release 3 is not the one recorded"):
        dpf.Session(path=clone, expect_head=head_original)
    with pytest.raises(dpf.LedgerError, match="DIVERGED"):
        dpf.Session(path=original, expect_head=head_clone)
    assert _files(clone) == before
    dpf.Session(path=clone, expect_head=at_fork)
    dpf.Session(path=original, expect_head=at_fork)


def test_deleted_or_replaced_by_another_ledger_is_refused(tmp_path):
    """Both files deleted: refused, and no new ledger is created (it would start the budget
    again). Another ledger at the path (a new one created after the deletion): refused."""
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 2)
    head = ledger_head(ledger)
    ledger.unlink()
    Path(f"{ledger}.head").unlink()
    with pytest.raises(dpf.LedgerError, match="does not exist, but a head"):
        dpf.Session(path=ledger, expect_head=head)
    with pytest.raises(dpf.LedgerError, match="does not exist, but a head"):
        DurableLedger(ledger, 1.0, expect_head=head)
    assert not ledger.exists() and not Path(f"{ledger}.head").exists()
    _spend(ledger, 3)  # a new ledger, with a new id, at the same path
    with pytest.raises(dpf.LedgerError, match="DIVERGED"):
        dpf.Session(path=ledger, expect_head=head)


@pytest.mark.parametrize("value", ["", "3", "3:abc", "x:" + "0" * 32, "-1:" + "0" * 32,
                                   "3:" + "g" * 32, "3:" + "0" * 40, 3, b"3:" + b"0" * 32,
                                   True, "３:" + "0" * 32])
def test_malformed_heads_are_parameter_errors(tmp_path, value):
    ledger = tmp_path / "l.jsonl"
    _spend(ledger, 1)
    with pytest.raises(dpf.ParameterError, match="expect_head must be a ledger head"):
        dpf.Session(path=ledger, expect_head=value)
    with pytest.raises(dpf.ParameterError, match="expect_head must be a ledger head"):
        DurableLedger(ledger, expect_head=value)


def test_expect_head_needs_a_path():
    with pytest.raises(dpf.ParameterError, match="pass path= too"):
        dpf.Session(expect_head="1:" + "0" * 32)

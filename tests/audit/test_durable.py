"""The durable ledger (``dpframe.accounting.durable``): fsync before return, reload on restart, torn
tails, SIGKILL in the middle of a stream of releases, several processes on one file."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.accounting.durable import DurableLedger, read_ledger_file
from dpframe.errors import BudgetExceededError, LedgerError

ROOT = Path(__file__).resolve().parents[2]


def _spend(ledger: DurableLedger, eps: float, tag: int) -> None:
    ledger.commit(ledger.reserve(eps), [{"tag": tag}])


def test_reload_after_restart(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with DurableLedger(path, 1.0, 1e-6) as led:
        for i in range(5):
            _spend(led, 0.1, i)
        assert led.budget.epsilon_spent == pytest.approx(0.5)
    with DurableLedger(path) as again:
        assert again.budget.epsilon_spent == pytest.approx(0.5)
        assert again.budget.epsilon == 1.0 and again.budget.delta == 1e-6
        assert [e["tag"] for e in again.entries] == list(range(5))
        with pytest.raises(BudgetExceededError):
            again.reserve(0.6)


def test_budget_cannot_be_changed_by_reopening(tmp_path):
    path = tmp_path / "ledger.jsonl"
    DurableLedger(path, 1.0).close()
    with pytest.raises(LedgerError, match="cannot be changed"):
        DurableLedger(path, 2.0)


def test_torn_last_line_is_cut_and_the_rest_kept(tmp_path):
    """An unterminated last line is a crashed append: cut off, the rest kept (more damage
    kinds: tests/accounting/test_durable_damage.py)."""
    path = tmp_path / "ledger.jsonl"
    with DurableLedger(path, 1.0) as led:
        for i in range(3):
            _spend(led, 0.1, i)
    intact = path.read_bytes()
    last = intact.rstrip(b"\n").rsplit(b"\n", 1)[1]
    for torn in (last[: len(last) // 2], b"\x00\x00\x00"):
        path.write_bytes(intact + torn)
        with DurableLedger(path) as led:
            assert led.recovered["torn_tail_bytes"] == len(torn)
            assert led.budget.epsilon_spent == pytest.approx(0.3)
        assert path.read_bytes() == intact
    with DurableLedger(path) as led:
        _spend(led, 0.1, 99)  # appending after recovery works
    info = read_ledger_file(path)
    assert info["torn_tail_bytes"] == 0 and len(info["releases"]) == 4


def test_a_damaged_complete_last_line_is_refused_not_dropped(tmp_path):
    """A terminated line cannot be a torn write; dropping it could forget spent budget."""
    path = tmp_path / "ledger.jsonl"
    with DurableLedger(path, 1.0) as led:
        _spend(led, 0.1, 0)
    path.write_bytes(path.read_bytes()[:-3] + b"X}\n")
    with pytest.raises(LedgerError, match="damaged at release 1"):
        DurableLedger(path)


def test_damage_before_the_last_line_is_refused(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with DurableLedger(path, 1.0) as led:
        for i in range(3):
            _spend(led, 0.1, i)
    lines = path.read_bytes().split(b"\n")
    assert b'"tag":0' in lines[1]
    lines[1] = lines[1].replace(b'"tag":0', b'"tag":7')  # the hash no longer matches
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(LedgerError, match="damaged at release 1"):
        DurableLedger(path)


def test_session_path_records_every_release_and_reloads(tmp_path):
    """``dpf.Session(path=...)``: every ``.dp`` release is on disk before it returns, and a new
    session on the same file (a restart) starts from the spent budget."""
    path = tmp_path / "ledger.jsonl"
    df = pd.DataFrame({"x": np.linspace(0, 1, 20)})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    assert isinstance(pf.dp.session.ledger, DurableLedger)
    pf.dp.mean("x", epsilon=0.25, random_state=1)
    pf.dp.sum("x", epsilon=0.25, random_state=2)
    info = read_ledger_file(path)
    assert info["epsilon_spent"] == Fraction(0.25) * 2
    assert [r["entries"][0]["query"] for r in info["releases"]] == ["mean", "sum"]
    ledger_id = pf.dp.session.ledger.id
    assert {e["ledger_id"] for r in info["releases"] for e in r["entries"]} == {ledger_id}
    again = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 20)}), epsilon=1.0,
                        bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    assert again.dp.session.ledger.id == ledger_id
    assert again.dp.budget.epsilon_spent == pytest.approx(0.5)
    assert again.dp.log["release_id"].nunique() == 2
    with pytest.raises(BudgetExceededError):
        again.dp.sum("x", epsilon=0.6)


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np, pandas as pd
    import dpframe as dpf
    from dpframe.accounting.durable import DurableLedger

    path, mode = sys.argv[1], sys.argv[2]
    if mode == "torn":
        real_write = DurableLedger._write_all
        def torn_write(fd, payload, n=[0]):
            n[0] += 1
            if n[0] == 8:  # the 7th release: write half its line, then die
                os.write(fd, payload[: len(payload) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
            real_write(fd, payload)
        DurableLedger._write_all = staticmethod(torn_write)
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 100)}), epsilon=1000.0,
                     bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    i = 0
    while True:
        v = pf.dp.mean("x", epsilon=0.01, random_state=i)
        print("ack", i, v, flush=True)  # the value reached the caller
        i += 1
    """
)


def _child(path: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), mode],
                            stdout=subprocess.PIPE, env=env, text=True)


def test_sigkill_mid_stream_keeps_every_returned_release(tmp_path):
    path = tmp_path / "ledger.jsonl"
    proc = _child(path, "kill")
    acks = 0
    assert proc.stdout is not None
    while acks < 40:  # count-based: kill after the 40th acknowledged release, however slow
        line = proc.stdout.readline()
        if not line:  # the child ended on its own: the assertions below say how
            break
        if line.startswith("ack"):
            acks += 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # lines already printed before the kill also reached the caller
    acks += sum(1 for line in proc.stdout.read().splitlines() if line.startswith("ack"))
    assert acks >= 40
    with DurableLedger(path) as led:
        spent = Fraction(led.budget.epsilon_spent)
        # every returned release is on disk; at most the one in flight more
        assert spent >= acks * Fraction(0.01) * (1 - Fraction(1, 10**12))
        assert spent <= (acks + 1) * Fraction(0.01) * (1 + Fraction(1, 10**12))
    info = read_ledger_file(path)
    assert info["torn_tail_bytes"] == 0


def test_sigkill_during_a_write_leaves_a_torn_line_that_is_recovered(tmp_path):
    path = tmp_path / "ledger.jsonl"
    proc = _child(path, "torn")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    acks = sum(1 for line in out.splitlines() if line.startswith("ack"))
    assert acks == 6  # the 7th release never returned
    raw = read_ledger_file(path)
    assert raw["torn_tail_bytes"] > 0 and len(raw["releases"]) == 6
    with DurableLedger(path) as led:
        assert led.recovered["torn_tail_bytes"] == raw["torn_tail_bytes"]
        assert led.budget.epsilon_spent == pytest.approx(0.06)
    assert read_ledger_file(path)["torn_tail_bytes"] == 0


def _hammer(path: str, who: int, queue) -> None:
    led = DurableLedger(path, 1.0)
    ok = 0
    for i in range(60):
        try:
            led.commit(led.reserve(0.01), [{"who": who, "i": i}])
            ok += 1
        except BudgetExceededError:
            pass
    queue.put(ok)


def test_processes_hammering_one_file_never_overspend(tmp_path):
    """Four processes (forked: they share nothing but the file) × 60 releases of ε = 0.01
    against ε = 1: exactly 100 fit; no overspend, no lost or duplicated entries."""
    path = tmp_path / "ledger.jsonl"
    DurableLedger(path, 1.0).close()
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(str(path), k, queue)) for k in range(4)]
    for p in procs:
        p.start()
    oks = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    info = read_ledger_file(path)
    assert sum(oks) == len(info["releases"]) == 100
    assert info["epsilon_spent"] <= Fraction(1) * (1 + Fraction(1, 10**9))
    tags = [(e["who"], e["i"]) for r in info["releases"] for e in r["entries"]]
    assert len(set(tags)) == len(tags) == 100
    assert [r["seq"] for r in info["releases"]] == list(range(1, 101))
    with DurableLedger(path) as led:
        assert len(led.entries) == 100


FRAMES_HAMMER = textwrap.dedent(
    """
    import sys
    import numpy as np, pandas as pd
    import dpframe as dpf
    path = sys.argv[1]
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 50)}), epsilon=1.0,
                     bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    ok = 0
    for i in range(60):
        try:
            pf.dp.sum("x", epsilon=0.01, random_state=i)
            ok += 1
        except dpf.BudgetExceededError:
            pass
    print(ok)
    """
)


def test_processes_releasing_through_session_path_share_one_budget(tmp_path):
    """Three processes protect the same data with ``dpf.Session(path=...)`` on one file and
    release 60 × ε = 0.01 each against ε = 1: exactly 100 releases in total."""
    path = tmp_path / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", FRAMES_HAMMER, str(path)],
                              stdout=subprocess.PIPE, env=env, text=True) for _ in range(3)]
    oks = [int(p.communicate(timeout=120)[0].strip()) for p in procs]
    info = read_ledger_file(path)
    assert sum(oks) == len(info["releases"]) == 100
    assert info["epsilon_spent"] <= Fraction(1) * (1 + Fraction(1, 10**9))

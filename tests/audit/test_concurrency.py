"""Threads hammering one budget through ``.dp`` (pandas root and verified derived frames,
Polars eager and lazy roots with derived frames — a LazyFrame's native plan is verified in every
thread — under a session they name, and a durable ledger): no overspend, no lost or duplicated
log entries."""

from __future__ import annotations

import threading
from collections import Counter
from fractions import Fraction

import narwhals as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.durable import DurableLedger, read_ledger_file
from dpframe.errors import BudgetExceededError

THREADS = 8
PER_THREAD = 40
EPS = 0.01
BUDGET = 1.0  # 8 × 40 × 0.01 = 3.2: most queries must be refused


def _hammer(ask) -> tuple[int, int, list[BaseException]]:
    ok = refused = 0
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker(k: int) -> None:
        nonlocal ok, refused
        start.wait()
        for i in range(PER_THREAD):
            try:
                ask(k, i)
                with lock:
                    ok += 1
            except BudgetExceededError:
                with lock:
                    refused += 1
            except BaseException as exc:  # anything else is a failure of the test
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ok, refused, errors


def _check(ok: int, refused: int, errors, entries: list[dict], spent: float) -> None:
    assert not errors, errors[:3]
    assert ok + refused == THREADS * PER_THREAD
    # exactly as many releases as fit: 100 × 0.01 = 1.0 (within the ledger's 1e-9)
    assert ok == 100
    releases = Counter(e["release_id"] for e in entries)
    assert len(releases) == ok  # no lost, no duplicated release
    per_release = {}
    for e in entries:
        per_release[e["release_id"]] = per_release.get(e["release_id"], Fraction(0)) + Fraction(
            e["epsilon"])
    total = sum(per_release.values(), Fraction(0))
    assert float(total) == pytest.approx(spent, rel=1e-12)
    assert total <= Fraction(BUDGET) * (1 + Fraction(1, 10**9))


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.uniform(0, 10, 200), "g": rng.choice(["a", "b"], 200)})


def test_threads_on_pandas_root_and_derived_frames():
    pf = dpf.protect(_frame(), epsilon=BUDGET, bounds={"x": (0, 10)}, keys={"g": ["a", "b"]})
    derived = pf.dp.filter(nw.col("x") > 3)

    def ask(k: int, i: int) -> None:
        choice = (k + i) % 4
        if choice == 0:
            pf.dp.mean("x", epsilon=EPS, random_state=i)
        elif choice == 1:
            derived.dp.count(epsilon=EPS, random_state=i)
        elif choice == 2:
            pf.dp.groupby("g").variance("x", epsilon=EPS, random_state=i)
        else:
            derived.dp.release({"s": dpf.sum("x"), "m": dpf.mean("x")}, epsilon=EPS)

    ok, refused, errors = _hammer(ask)
    _check(ok, refused, errors, pf.dp.log.to_dict("records"), pf.dp.budget.epsilon_spent)


@pytest.mark.backends("polars", "polars-lazy")
def test_threads_on_polars_frames_under_one_session(constructor):
    s = dpf.Session()
    pf = dpf.protect(constructor(_frame()), epsilon=BUDGET, bounds={"x": (0, 10)}, session=s)
    derived = pf.filter(pl.col("x") < 8) if constructor.lazy else pf.dp.filter(
        pl.col("x") < 8)

    def ask(k: int, i: int) -> None:
        target = pf if k % 2 else derived
        target.dp.mean("x", epsilon=EPS, session=s, random_state=i)

    ok, refused, errors = _hammer(ask)
    _check(ok, refused, errors, s.ledger.snapshot_document()["entries"], s.budget.epsilon_spent)


def test_threads_on_a_durable_ledger(tmp_path):
    path = tmp_path / "ledger.jsonl"
    pf = dpf.protect(_frame(), epsilon=BUDGET, bounds={"x": (0, 10)},
                     session=dpf.Session(path=path))
    assert isinstance(pf.dp.session.ledger, DurableLedger)

    def ask(k: int, i: int) -> None:
        pf.dp.sum("x", epsilon=EPS, random_state=i)

    ok, refused, errors = _hammer(ask)
    entries = pf.dp.log.to_dict("records")
    _check(ok, refused, errors, entries, pf.dp.budget.epsilon_spent)
    info = read_ledger_file(path)
    assert len(info["releases"]) == ok
    assert float(info["epsilon_spent"]) == pytest.approx(pf.dp.budget.epsilon_spent, rel=1e-12)

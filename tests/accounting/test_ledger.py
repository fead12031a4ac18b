"""The budget ledger: exact-with-tolerance accounting, atomic reserve/commit, threads."""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.ledger import RELATIVE_TOLERANCE, Ledger


def test_decimal_shares_fit_the_budget_exactly():
    led = Ledger(1.0)
    for e in (0.1, 0.2, 0.2, 0.2, 0.3):
        led.commit(led.reserve(e), [])
    assert sum(map(Fraction, (0.1, 0.2, 0.2, 0.2, 0.3))) > 1  # exactly, the shares exceed 1
    with pytest.raises(dpf.BudgetExceededError):
        led.reserve(1e-6)


def test_truly_exceeding_share_is_refused():
    led = Ledger(1.0)
    with pytest.raises(dpf.BudgetExceededError, match="Nothing was spent"):
        led.reserve(1.0 + 1e-6)
    led.commit(led.reserve(1.0), [])
    assert led.budget.epsilon_remaining == 0


def test_tolerance_is_relative_and_tiny():
    led = Ledger(1000.0)
    with pytest.raises(dpf.BudgetExceededError):
        led.reserve(1000.0 * (1 + 10 * RELATIVE_TOLERANCE))
    led.reserve(1000.0 * (1 + RELATIVE_TOLERANCE / 2))


def test_delta_is_accounted_and_refused_beyond_budget():
    led = Ledger(1.0, 1e-6)
    led.commit(led.reserve(0.1, 6e-7), [])
    with pytest.raises(dpf.BudgetExceededError, match="delta"):
        led.reserve(0.1, 6e-7)
    assert led.budget.delta_spent == pytest.approx(6e-7)
    with pytest.raises(dpf.BudgetExceededError):
        Ledger(1.0).reserve(0.1, 1e-9)  # no delta budget at all


def test_cancel_spends_nothing_and_pending_counts():
    led = Ledger(1.0)
    r = led.reserve(0.7)
    with pytest.raises(dpf.BudgetExceededError):
        led.reserve(0.5)  # pending 0.7 counts
    led.cancel(r)
    led.commit(led.reserve(0.5), [{"x": 1}])
    assert led.budget.epsilon_spent == 0.5
    assert led.entries == [{"x": 1, "ledger_id": led.id, "release_id": 1}]
    with pytest.raises(dpf.LedgerError):
        led.commit(r, [])


@pytest.mark.parametrize("epsilon", [0, -1, float("nan"), float("inf"), "a"])
def test_invalid_budgets(epsilon):
    with pytest.raises(dpf.ParameterError):
        Ledger(epsilon)


def test_eight_threads_500_queries_never_overspend():
    df = pd.DataFrame({"x": np.linspace(0, 1, 20)})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 1)})
    eps = 1 / 256  # 256 fit (exactly, in binary); 4000 are tried
    ok = [0] * 8
    refused = [0] * 8
    errors: list[BaseException] = []

    def work(i):
        frame = pf
        for j in range(500):
            try:
                if j % 3 == 0:
                    frame.dp.mean("x", epsilon=eps, random_state=j)
                else:
                    frame.dp.sum("x", epsilon=eps, random_state=j)
                ok[i] += 1
            except dpf.BudgetExceededError:
                refused[i] += 1
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(ok) + sum(refused) == 4000
    budget = pf.dp.budget
    log = pf.dp.log
    assert budget.epsilon_spent <= 1.0 * (1 + RELATIVE_TOLERANCE)
    assert log["release_id"].nunique() == sum(ok)  # no lost or duplicated entries
    assert float(sum(map(Fraction, log["epsilon"]))) == pytest.approx(budget.epsilon_spent)
    assert sum(ok) == int(1.0 / eps)


def test_polars_session_threads_share_one_ledger():
    s = dpf.Session()
    pf = dpf.protect(pl.DataFrame({"x": [0.1, 0.5, 0.9]}), epsilon=0.5,
                     bounds={"x": (0, 1)}, session=s)
    results = []

    def work():
        for _ in range(50):
            try:
                pf.dp.filter(pl.col("x") > 0.2).dp.count(epsilon=0.01, session=s)
                results.append(1)
            except dpf.BudgetExceededError:
                results.append(0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 50 and s.budget.epsilon_spent == pytest.approx(0.5)


def test_session_with_durable_path_reloads_spent_budget(tmp_path):
    path = tmp_path / "ledger.jsonl"
    df = pd.DataFrame({"x": [0.1, 0.5, 0.9]})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    pf.dp.mean("x", epsilon=0.25, random_state=0)
    again = dpf.protect(pd.DataFrame({"x": [0.1, 0.5, 0.9]}), epsilon=1.0,
                        bounds={"x": (0, 1)}, session=dpf.Session(path=path))
    assert again.dp.budget.epsilon_spent == pytest.approx(0.25)
    assert again.dp.session.ledger.id == pf.dp.session.ledger.id


def test_nested_with_blocks_of_one_session():
    from dpframe.provenance._protect import current_session

    s = dpf.Session()
    with s:
        with s:
            assert current_session() is s
        assert current_session() is s
    assert current_session() is None


def test_ledger_ids_are_random_hex_and_distinct():
    ids = {Ledger(1.0).id for _ in range(100)}
    assert len(ids) == 100 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def _spend_in_child(led, queue):
    try:
        led.commit(led.reserve(0.5), [])
        queue.put("spent")
    except dpf.LedgerError as exc:
        queue.put(str(exc))


def test_an_in_memory_ledger_refuses_to_spend_in_a_forked_child():
    """A forked child holds a copy of an in-memory budget: spending it would double the
    budget, so it is refused (share budgets between processes with Session(path=...))."""
    import multiprocessing as mp

    led = Ledger(1.0)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_spend_in_child, args=(led, queue))
    proc.start()
    message = queue.get(timeout=60)
    proc.join(timeout=60)
    assert "Session(path=...)" in message
    led.commit(led.reserve(1.0), [])  # the parent still holds the whole budget

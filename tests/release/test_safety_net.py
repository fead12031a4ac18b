"""The safety net (dpframe/release/_safety_net.py): a failure after the read spends, logs, says
nothing.

Totality makes these paths unreachable by design, so the tests inject a failure where data
has just been read — inside the one aggregation pass of a release, and inside the evaluation
of an eager derivation — with an exception whose message quotes a "value".
"""

from __future__ import annotations

import narwhals as nw
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation as engine
from dpframe.rowwise import engines as rowwise_engines

SECRET = "age=73421"


class EngineBoom(ArithmeticError):
    pass


def _frame(name: str) -> object:
    data = {"age": [30.0, 50.0, 70.0], "g": ["a", "b", "a"]}
    return pd.DataFrame(data) if name == "pandas" else pl.DataFrame(data)


@pytest.mark.parametrize("name", ["pandas", "polars"])
def test_a_release_that_fails_after_the_read_spends_logs_and_hides_the_message(
        name, monkeypatch):
    pf = dpf.protect(_frame(name), epsilon=1.0, bounds={"age": (0.0, 100.0)})

    def boom(*args, **kwargs):
        raise EngineBoom(f"Overflow in multiplication ({SECRET} * 100000)!")

    monkeypatch.setattr(engine, "aggregate", boom)
    with pytest.raises(dpf.ReleaseFailedError) as info:
        pf.dp.release({"mean_age": dpf.mean("age"), "n": dpf.count()}, epsilon=0.25)
    error = info.value
    # neither the text nor the class: which exception fired can depend on which value failed
    assert SECRET not in str(error) and "EngineBoom" not in str(error)
    assert "'mean_age'" in str(error) and "'n'" in str(error)
    # nothing chains to the original exception: no context, no cause, no traceback text
    assert error.__context__ is None and error.__cause__ is None
    assert isinstance(error, dpf.DPFrameError)
    budget = pf.dp.budget
    assert budget.epsilon_spent == pytest.approx(0.25)
    entry = pf.dp.session.ledger.snapshot_document()["entries"][-1]
    assert entry["query"] == "failed release" and entry["epsilon"] == pytest.approx(0.25)
    assert "EngineBoom" not in str(entry) and SECRET not in str(entry)
    assert "failed inside dpframe" in entry["formulation"]


def test_an_eager_derivation_that_fails_logs_and_hides_the_message(monkeypatch):
    pf = dpf.protect(_frame("pandas"), epsilon=1.0, bounds={"age": (0.0, 100.0)})

    def boom(*args, **kwargs):
        raise ValueError(f"invalid literal for int() with base 10: {SECRET!r}")

    monkeypatch.setattr("dpframe.release._pipeline.apply_steps", boom)
    with pytest.raises(dpf.ReleaseFailedError) as info:
        pf.dp.filter(nw.col("age") > 40)
    assert SECRET not in str(info.value) and info.value.__context__ is None
    entries = pf.dp.session.ledger.snapshot_document()["entries"]
    assert entries[-1]["query"] == "failed derivation" and entries[-1]["epsilon"] == 0.0
    assert pf.dp.budget.epsilon_spent == 0.0
    assert pf.dp.session.ledger.locked


def test_a_panic_is_caught_too(monkeypatch):
    """Polars' Rust panics are ``BaseException``s: the net catches them as well."""
    pf = dpf.protect(_frame("polars"), epsilon=1.0, bounds={"age": (0.0, 100.0)})

    class PanicException(BaseException):
        pass

    def panic(*args, **kwargs):
        raise PanicException(f"Formatting argument out of range: {SECRET}")

    monkeypatch.setattr(engine, "aggregate", panic)
    with pytest.raises(dpf.ReleaseFailedError) as info:
        pf.dp.mean("age", epsilon=0.5)
    assert SECRET not in str(info.value) and "PanicException" not in str(info.value)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5)


def test_failures_before_the_read_still_spend_nothing():
    pf = dpf.protect(_frame("pandas"), epsilon=1.0, bounds={"age": (0.0, 100.0)})
    with pytest.raises(dpf.BudgetExceededError):
        pf.dp.mean("age", epsilon=2.0)
    with pytest.raises(dpf.UnsupportedInputError):
        pf.dp.mean("g", epsilon=0.5)
    assert pf.dp.budget.epsilon_spent == 0.0
    assert pf.dp.session.ledger.snapshot_document()["entries"] == []


def test_the_failed_entry_has_every_log_column():
    from dpframe.accounting._log_schema import LOG_COLUMNS
    from dpframe.provenance._units import describe
    from dpframe.release._safety_net import failure_entry

    entry = failure_entry(what="release", names=["m"], epsilon=0.1,
                          delta=0.0, engine="pandas", random_source="secure",
                          derivation="protect", unit_fields=describe(None, False))
    missing = [c for c in LOG_COLUMNS if c not in entry and c not in (
        "ledger_id", "release_id", "privacy_unit", "max_rows_per_unit",
        "max_groups_per_unit", "bounding")]
    assert missing == []


def test_engine_module_is_not_monkeypatched_for_the_rest_of_the_run():
    # the apply function the pipeline uses is the real one again (monkeypatch undoes it)
    assert rowwise_engines.apply_steps.__module__ == "dpframe.rowwise.engines"


def test_a_failure_locks_the_data_set_so_it_cannot_be_a_repeated_oracle(monkeypatch):
    """The review turned a free failing derivation into a binary search (40 calls, ε = 0).
    After one failure the ledger refuses every reservation: one bit, not a search."""
    pf = dpf.protect(_frame("pandas"), epsilon=1.0, bounds={"age": (0.0, 100.0)})

    def boom(*args, **kwargs):
        raise ValueError(SECRET)

    with monkeypatch.context() as patched:
        patched.setattr("dpframe.release._pipeline.apply_steps", boom)
        with pytest.raises(dpf.ReleaseFailedError):
            pf.dp.filter(nw.col("age") > 40)
    for attempt in (lambda: pf.dp.mean("age", epsilon=0.1),
                    lambda: pf.dp.count(epsilon=0),
                    lambda: pf.dp.filter(nw.col("age") > 40)):
        with pytest.raises((dpf.LedgerError, dpf.ReleaseFailedError), match="answers nothing"):
            attempt()
    assert pf.dp.budget.epsilon_spent == 0.0


def test_a_durable_ledger_stays_locked_in_another_process(tmp_path, monkeypatch):
    import subprocess
    import sys

    path = tmp_path / "ledger.jsonl"
    s = dpf.Session(path=str(path))
    pf = dpf.protect(_frame("pandas"), epsilon=1.0, bounds={"age": (0.0, 100.0)}, session=s)

    def boom(*args, **kwargs):
        raise ArithmeticError(SECRET)

    with monkeypatch.context() as patched:
        patched.setattr(engine, "aggregate", boom)
        with pytest.raises(dpf.ReleaseFailedError):
            pf.dp.mean("age", epsilon=0.25)
    code = (
        "import pandas as pd, dpframe as dpf\n"
        f"s = dpf.Session(path={str(path)!r})\n"
        "pf = dpf.protect(pd.DataFrame({'age': [1.0]}), epsilon=1.0, bounds={'age': (0, 100)},"
        " session=s)\n"
        "try:\n    pf.dp.mean('age', epsilon=0.1)\nexcept dpf.LedgerError as e:\n"
        "    print('locked' if 'answers nothing' in str(e) else 'other')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "locked"

"""The engine timeout (``DPFRAME_ENGINE_TIMEOUT``, issue 30): a Dask or Spark pass that does not
finish in time raises :class:`dpframe.errors.EngineTimeoutError` instead of waiting for ever.
Here on Dask's threaded scheduler with a deliberately slow partition function (the cluster
tests, ``tests/backends/test_cluster.py``, kill every worker instead): after the reservation
the release spends its ε once, writes one "timed-out release" entry (memory and durable file)
and does not lock the ledger; its late result is discarded. Before the reservation (the
re-count of the source's rows) a timeout spends nothing. A bad value is refused before
anything is read or spent; in-process engines do not use a thread or the setting at all."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.backends import backend_of
from dpframe.errors import EngineTimeoutError
from dpframe.release import _pipeline as release

dd = pytest.importorskip("dask.dataframe")
dask = pytest.importorskip("dask")

BOUNDS = {"x": (0.0, 1.0)}


def slow_frame(pdf: pd.DataFrame, gate: dict[str, float]) -> Any:
    """A Dask frame whose partitions sleep ``gate["sleep"]`` seconds each when read."""

    def step(part: pd.DataFrame) -> pd.DataFrame:
        if len(part):
            time.sleep(gate["sleep"])
        return part

    return dd.from_pandas(pdf, npartitions=2).map_partitions(step, meta=pdf.iloc[:0])


@pytest.fixture
def pdf() -> pd.DataFrame:
    return pd.DataFrame({"x": np.linspace(0.0, 1.0, 50)})


def engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "dpframe-engine-pass"]


def test_a_slow_aggregation_times_out_spends_once_and_discards_the_late_result(
        pdf, tmp_path, monkeypatch):
    gate = {"sleep": 0.0}
    ledger = tmp_path / "ledger.jsonl"
    with dask.config.set(scheduler="threads"):
        pf = dpf.protect(slow_frame(pdf, gate), epsilon=5.0, bounds=BOUNDS,
                         missing={"x": 0.5}, session=dpf.Session(path=ledger))
        want = pf.dp.mean("x", epsilon=1.0, random_state=3)  # healthy: the default timeout
        assert engine_threads() == []
        gate["sleep"] = 0.2  # the re-count (2 partitions, threads) fits in 1 s ...
        monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", "1")
        gate_after_count = {"n": 0}

        def recount_then_stall(*args: Any, **kwargs: Any) -> Any:
            gate["sleep"] = 4.0  # ... the aggregation does not
            gate_after_count["n"] += 1
            return real(*args, **kwargs)

        real = release._aggregate
        monkeypatch.setattr(release, "_aggregate", recount_then_stall)
        start = time.monotonic()
        with pytest.raises(EngineTimeoutError, match="DPFRAME_ENGINE_TIMEOUT") as info:
            pf.dp.mean("x", epsilon=1.0, random_state=3)
        took = time.monotonic() - start
    assert gate_after_count["n"] == 1 and took < 3.5, took
    assert info.value.__context__ is None and isinstance(info.value, TimeoutError)
    assert "epsilon=1" in str(info.value) and "is spent" in str(info.value)
    assert pf.dp.budget.epsilon_spent == 2.0
    entries = pf.dp.log.to_dict("records")
    assert [e["query"] for e in entries][-1] == "timed-out release"
    assert entries[-1]["epsilon"] == 1.0 and entries[-1]["part"] == "failed"
    assert not pf.dp.session.ledger.locked  # a timeout is not the safety net
    for thread in engine_threads():  # the abandoned pass finishes ...
        thread.join(10)
    assert len(pf.dp.log) == 2 and pf.dp.budget.epsilon_spent == 2.0  # ... and changes nothing
    reread = dpf.protect(pdf.copy(), epsilon=5.0, bounds=BOUNDS,
                         session=dpf.Session(path=ledger))
    assert reread.dp.budget.epsilon_spent == 2.0 and not reread.dp.session.ledger.locked
    monkeypatch.undo()
    gate["sleep"] = 0.0
    with dask.config.set(scheduler="threads"):  # the budget still answers, bit for bit
        assert pf.dp.mean("x", epsilon=1.0, random_state=3) == want


def test_a_timeout_before_the_reservation_spends_nothing(pdf, monkeypatch, tmp_path):
    """A source whose rows are re-counted before each release (a Parquet file under a
    partition function: an in-memory source is dpframe's own copy and is not re-counted)."""
    pdf.iloc[:40].to_parquet(tmp_path / "x.parquet")
    gate = {"sleep": 0.0}

    def step(part: pd.DataFrame) -> pd.DataFrame:
        if len(part):
            time.sleep(gate["sleep"])
        return part

    source = dd.read_parquet(tmp_path / "x.parquet").map_partitions(step, meta=pdf.iloc[:0])
    with dask.config.set(scheduler="threads"):
        pf = dpf.protect(source, epsilon=5.0, bounds=BOUNDS, missing={"x": 0.5})
        gate["sleep"] = 2.0
        monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", "0.5")
        with pytest.raises(EngineTimeoutError, match="Nothing was spent"):
            pf.dp.mean("x", epsilon=1.0)
    assert pf.dp.budget.epsilon_spent == 0.0 and len(pf.dp.log) == 0
    for thread in engine_threads():
        thread.join(10)


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "ten"])
def test_a_bad_timeout_is_refused_before_anything_is_read(pdf, monkeypatch, value):
    with dask.config.set(scheduler="threads"):
        pf = dpf.protect(dd.from_pandas(pdf, npartitions=2), epsilon=5.0, bounds=BOUNDS,
                         missing={"x": 0.5})
        monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", value)
        with pytest.raises(dpf.ParameterError, match="DPFRAME_ENGINE_TIMEOUT"):
            pf.dp.mean("x", epsilon=1.0)
    assert pf.dp.budget.epsilon_spent == 0.0


def test_in_process_engines_do_not_use_the_timeout(pdf, monkeypatch):
    monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", "not read")
    pf = dpf.protect(pdf, epsilon=5.0, bounds=BOUNDS, missing={"x": 0.5})
    assert np.isfinite(pf.dp.mean("x", epsilon=1.0, random_state=1))
    assert backend_of(pdf).pass_hooks() is None


def test_the_default_is_documented(monkeypatch):
    monkeypatch.delenv("DPFRAME_ENGINE_TIMEOUT", raising=False)
    assert release.engine_timeout() == 600.0
    monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", " 2.5 ")
    assert release.engine_timeout() == 2.5

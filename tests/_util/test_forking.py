"""dpframe._util.forking: a process forked from one that ran Polars gets a clear
``UnsupportedProcessError`` (before anything is read or spent) instead of hanging in Polars'
missing thread pool; pandas work in such a child, and children of a parent that only imported
Polars, are unaffected; ``spawn`` children work. Real processes, each joined with a timeout."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import narwhals as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.durable import read_ledger_file

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90


def _run_polars() -> None:
    """Make sure Polars' thread pool runs in this process."""
    frame = pl.DataFrame({"a": np.arange(10_000.0)}).lazy()
    frame.group_by((pl.col("a") % 7).alias("k")).agg(pl.col("a").sum()).collect()


def _attempt(call: Any, queue: Any) -> None:
    try:
        call()
        queue.put("ok")
    except dpf.DPFrameError as exc:
        queue.put(type(exc).__name__)


def _in_child(context: str, target: Any, *args: Any) -> str:
    ctx = mp.get_context(context)
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    proc.join(TIMEOUT)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("the child hung")
    assert proc.exitcode == 0
    return str(queue.get(timeout=10))


def _lazy_mean(lf: Any, queue: Any) -> None:
    _attempt(lambda: lf.dp.mean("x", epsilon=0.1), queue)


def _lazy_filter(lf: Any, queue: Any) -> None:
    _attempt(lambda: lf.dp.filter(pl.col("x") > 0.5), queue)


def _pandas_filter(pf: Any, queue: Any) -> None:
    _attempt(lambda: pf.dp.filter(nw.col("x") > 0.5).dp.count(epsilon=0.1), queue)


def _pandas_count(pf: Any, queue: Any) -> None:
    _attempt(lambda: pf.dp.sum("x", epsilon=0.1), queue)  # (a count of n would be free)


def _protect_polars(queue: Any) -> None:
    _attempt(lambda: dpf.protect(pl.DataFrame({"x": [0.5]}), epsilon=1.0,
                                 bounds={"x": (0.0, 1.0)}), queue)


def _spawned_release(path: str, queue: Any) -> None:
    lf = pl.DataFrame({"x": np.linspace(0, 1, 100)}).lazy()
    pf = dpf.protect(lf, epsilon=10.0, bounds={"x": (0.0, 1.0)}, session=dpf.Session(path=path))
    _attempt(lambda: pf.dp.filter(pl.col("x") > 0.5).dp.mean("x", epsilon=0.5), queue)


def test_polars_work_in_a_fork_child_of_a_polars_process_is_refused_not_hung(tmp_path):
    _run_polars()
    path = tmp_path / "ledger.jsonl"
    lf = dpf.protect(pl.DataFrame({"x": np.linspace(0, 1, 100)}).lazy(), epsilon=10.0,
                     bounds={"x": (0.0, 1.0)}, session=dpf.Session(path=path))
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 100)}), epsilon=10.0,
                     bounds={"x": (0.0, 1.0)}, session=dpf.Session(path=tmp_path / "p.jsonl"))
    for target, frame in ((_lazy_mean, lf), (_lazy_filter, lf), (_pandas_filter, pf)):
        assert _in_child("fork", target, frame) == "UnsupportedProcessError"
    assert _in_child("fork", _protect_polars) == "UnsupportedProcessError"
    assert _in_child("fork", _pandas_count, pf) == "ok"  # no Polars involved: still works
    assert read_ledger_file(path)["epsilon_spent"] == 0  # nothing spent by the refusals
    assert read_ledger_file(tmp_path / "p.jsonl")["epsilon_spent"] == pytest.approx(0.1)


def test_spawn_children_run_polars(tmp_path):
    _run_polars()
    path = tmp_path / "ledger.jsonl"
    assert _in_child("spawn", _spawned_release, str(path)) == "ok"
    assert read_ledger_file(path)["epsilon_spent"] == pytest.approx(0.5)


CHILD_OF_AN_IMPORT = textwrap.dedent(
    """
    import multiprocessing as mp
    import narwhals as nw, pandas as pd, polars as pl
    import dpframe as dpf
    from dpframe._util import forking as forking

    def child(queue):
        pf = dpf.protect(pl.DataFrame({"x": [0.2, 0.7]}).lazy(), epsilon=1.0,
                         bounds={"x": (0.0, 1.0)})
        queue.put((forking.forked_after_polars(), type(pf.dp.filter(pl.col("x") > 0.5)).__name__))

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(queue,))
        proc.start()
        proc.join(60)
        print("hung" if proc.is_alive() else queue.get(timeout=10))
        if proc.is_alive():
            proc.kill()
    """
)


def test_a_parent_that_only_imported_polars_forks_usable_children(tmp_path):
    script = tmp_path / "child_of_an_import.py"
    script.write_text(CHILD_OF_AN_IMPORT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=TIMEOUT + 30, env={"PYTHONPATH": str(ROOT),
                                                     "PATH": "/usr/bin:/bin"}, check=False)
    assert out.stdout.strip() == "(False, 'LazyFrame')", out.stderr[-2000:]

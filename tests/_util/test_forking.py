"""dpframe._util.forking: a process forked from one that ran Polars gets a clear
``UnsupportedProcessError`` (before anything is read or spent) instead of hanging in Polars'
missing thread pool; pandas work in such a child, and children of a parent that only imported
Polars, are unaffected; ``spawn`` children work. Real processes, each joined with a timeout."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import textwrap
import time
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


# -- dpframe first imported in a fork child: the probe of a throwaway copy ---------------------
def test_the_probe_refuses_a_copy_that_hangs_and_kills_it(monkeypatch):
    """A copy that waits for ever (another thread was building Polars' pool at the fork: Polars
    would hang here too) is killed after the timeout, and the answer is the refusal."""
    from dpframe._util import forking as forking

    monkeypatch.setattr(pl, "thread_pool_size", lambda: time.sleep(120))
    started = time.monotonic()
    assert forking._probe_pool_in_a_copy(timeout=0.5) is True
    assert time.monotonic() - started < 30


def test_the_probe_cannot_tell_when_the_copy_fails(monkeypatch):
    from dpframe._util import forking as forking

    def broken() -> int:
        raise RuntimeError("no pool")

    monkeypatch.setattr(pl, "thread_pool_size", broken)
    assert forking._probe_pool_in_a_copy() is None


DESCENDANTS = textwrap.dedent(
    """
    import os, re, signal, sys
    import polars as pl
    {import_dpframe_first}
    def pool_threads():
        names = [open(f"/proc/self/task/{{t}}/comm").read().strip()
                 for t in os.listdir("/proc/self/task")]
        return sum(re.match(r"polars-\\d+$", name) is not None for name in names)
    print("pool before", pool_threads(), flush=True)
    {run}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # (children reaped by the kernel)
    for depth in range(3):  # a great-grandchild; no Polars work on the way
        if os.fork() != 0:
            try:
                os.wait()  # (with SIGCHLD ignored: returns once the child exited)
            except ChildProcessError:
                pass
            os._exit(0)
    import dpframe as dpf
    from dpframe._util import forking as forking
    print("leaf", forking.forked_after_polars(), pool_threads(), flush=True)
    if not forking.forked_after_polars():
        print("works", pl.DataFrame({{"x": [1, 2]}}).lazy().sum().collect().item(), flush=True)
    os._exit(0)
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="fork and /proc: Linux only")
@pytest.mark.parametrize(("run", "import_first", "expected"), [
    (True, False, ["pool before 0", "leaf True 0"]),
    (False, False, ["pool before 0", "leaf False 0", "works 3"]),
    (False, True, ["pool before 0", "leaf False 0", "works 3"]),
], ids=["ran-polars", "only-imported", "dpframe-imported-first-without-running"])
def test_a_great_grandchild_is_judged_by_the_memory_it_inherited(tmp_path, run, import_first,
                                                                 expected):
    """Three forks down, with no Polars work on the way and SIGCHLD ignored (the probe's copy
    is reaped by the kernel): refused when the first process had run Polars, usable when it
    had only imported it; the probe starts no pool in the process it runs in."""
    script = DESCENDANTS.format(
        import_dpframe_first="import dpframe" if import_first else "",
        run=("pl.DataFrame({'x': list(range(50_000))}).select(pl.col('x').sum())"
             if run else ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=TIMEOUT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:len(expected)] == expected, (out.stdout, out.stderr[-2000:])

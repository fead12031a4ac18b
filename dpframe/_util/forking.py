"""Forked children of a process that ran Polars: refused with a clear error instead of a hang.

Polars runs its work on a pool of native threads it starts on first use (named ``polars-0``,
``polars-1``, ...). ``fork()`` copies only the calling thread: in the child, Polars still
believes its pool exists, hands it work, and waits for ever (native Polars hangs the same way).
A child of a parent that had only *imported* Polars is fine (the pool is not started yet).

At import, this module registers ``os.register_at_fork`` hooks: just before a fork, the parent
notes whether Polars' pool is running (its threads are listed in ``/proc/self/task``; where there
is no ``/proc``, whether Polars is imported at all), and the child keeps that note.
:func:`check_polars_usable` — called by dpframe before any work that runs on Polars (protecting
or querying a Polars frame, verifying a derivation of any frame) — then raises
:class:`~dpframe.errors.UnsupportedProcessError` in such a child, before anything is read or
spent. Start worker processes with the ``spawn`` (or ``forkserver``) start method instead.

**dpframe first imported in the child.** A parent that ran Polars without importing dpframe
registered no hook, so its forked child learns nothing at the fork. When this module is first
imported in a process where Polars is imported but none of its pool's threads run here,
:func:`_inherited_pool` asks the process's own memory, not its parent: it forks a throwaway
copy of itself, and the copy asks Polars for its pool size (``polars.thread_pool_size()``,
which builds the pool, starting its threads, unless the pool is already built). If that
starts no thread in the copy, the pool was built in memory this process inherited from a
fork of a process whose pool ran (a child, or a grandchild through any number of forks): Polars
would hang here, and the process is refused. If the copy started threads, Polars' pool is
simply not started yet here (a program started with ``exec`` — ``spawn`` children, setarch -R
or not —, a child forked before its parent's pool started, in the same clock tick or not): not
refused. The copy is killed after ``_PROBE_TIMEOUT`` seconds and the process is refused: the copy
hangs if another thread was building the pool at the fork (Polars would hang the same way
here); a machine too loaded to answer in that time would be refused too. This process's
own pool is not started by the probe (a parent that only imported Polars and dpframe still
forks usable children); it costs one fork (about 15 ms) at import, only when Polars is imported
before dpframe and has not run. Where there is no ``/proc`` or no ``fork``, or the copy cannot
answer, such a child is not detected (it would hang in Polars, as it does without dpframe).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import sys
import warnings

from dpframe.errors import UnsupportedProcessError

__all__ = ["check_polars_usable", "forked_after_polars"]

_POOL_THREAD = re.compile(r"polars-\d+$")
_PROBE_TIMEOUT = 20.0  # seconds the throwaway copy may take (module docstring)
_state = {"pool_at_fork": False, "forked_after_polars": False}


def _polars_pool_running() -> bool:
    """Whether this process runs Polars' thread pool (read from the thread names)."""
    if "polars" not in sys.modules:
        return False
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True  # no /proc: Polars is imported, assume it was used
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as fh:
                if _POOL_THREAD.match(fh.read().strip()):
                    return True
        except OSError:
            continue
    return False


def _start_time(stat: str) -> int:
    """The start time (clock ticks since boot) in a ``/proc/.../stat`` line. (Not used to
    decide: start times in 10 ms ticks cannot order a fork and a pool start.)"""
    return int(stat.rsplit(") ", 1)[-1].split()[19])


def _probe_pool_in_a_copy(timeout: float = _PROBE_TIMEOUT) -> bool | None:
    """Whether Polars' pool is initialised in this process's memory though none of its threads
    run here (module docstring): asked in a throwaway fork copy, so that this process's own
    pool is not started. ``True``: inherited (Polars would hang here); ``False``: not started
    yet (Polars starts it on first use); ``None``: cannot tell."""
    pool_size = getattr(sys.modules["polars"], "thread_pool_size", None)
    if pool_size is None or not hasattr(os, "fork"):
        return None
    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():  # (3.12+ warns about fork() with threads running)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the throwaway copy: only this thread was copied
        answer = b"?"
        try:
            before = len(os.listdir("/proc/self/task"))
            pool_size()  # starts the pool's threads here unless it is already initialised
            answer = b"1" if len(os.listdir("/proc/self/task")) == before else b"0"
        finally:
            try:
                os.write(write_end, answer)
            finally:
                os._exit(0)
    os.close(write_end)
    answer = b"hung"  # (until the copy answers: killed if this wait is interrupted)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout)
        answer = os.read(read_end, 1) if ready else b"hung"
    except OSError:
        answer = b"?"
    finally:
        os.close(read_end)
        if answer == b"hung":
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # (reaped by the kernel: SIGCHLD ignored)
            os.waitpid(pid, 0)
    if answer == b"hung":
        return True  # the copy waited on a pool another thread was starting at the fork
    return {b"1": True, b"0": False}.get(answer)


def _inherited_pool() -> bool:
    """Whether this process, where Polars is imported but its pool does not run, inherited an
    initialised Polars pool from a fork (module docstring)."""
    if "polars" not in sys.modules or not os.path.isdir("/proc/self/task"):
        return False
    if _polars_pool_running():
        return False  # the pool runs here: started in this process, usable
    return _probe_pool_in_a_copy() is True


def _before_fork() -> None:
    _state["pool_at_fork"] = _polars_pool_running()


def _after_fork_in_child() -> None:
    if _state["pool_at_fork"]:
        _state["forked_after_polars"] = True  # kept by the child's own children too


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
if _inherited_pool():  # dpframe first imported in a fork child of a process that ran Polars
    _state["forked_after_polars"] = True


def forked_after_polars() -> bool:
    """Whether this process is a fork child (or grandchild) of a process running Polars."""
    return _state["forked_after_polars"]


def check_polars_usable() -> None:
    """Raise :class:`UnsupportedProcessError` if Polars would hang in this process."""
    if _state["forked_after_polars"]:
        raise UnsupportedProcessError(
            "this process was forked from a process that had already run Polars, and Polars "
            "cannot run in such a child (its thread pool was not copied by fork(); the work "
            "would wait for ever). Start worker processes with the 'spawn' start method, e.g. "
            "multiprocessing.get_context('spawn') or concurrent.futures.ProcessPoolExecutor("
            "mp_context=multiprocessing.get_context('spawn')); use a durable "
            "dpf.Session(path=...) to share one budget between them. Nothing was read or spent."
        )

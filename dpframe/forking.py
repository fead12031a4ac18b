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
"""

from __future__ import annotations

import os
import re
import sys

from dpframe.errors import UnsupportedProcessError

__all__ = ["check_polars_usable", "forked_after_polars"]

_POOL_THREAD = re.compile(r"polars-\d+$")
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


def _before_fork() -> None:
    _state["pool_at_fork"] = _polars_pool_running()


def _after_fork_in_child() -> None:
    if _state["pool_at_fork"]:
        _state["forked_after_polars"] = True  # kept by the child's own children too


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


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

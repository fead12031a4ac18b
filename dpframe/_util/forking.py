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
registered no hook, so its forked child learns nothing at the fork. When this module is
first imported in a process where Polars is already imported but its pool does not run,
:func:`_inherited_pool` looks at the parent instead (Linux ``/proc``): the child was forked
from a parent whose pool already ran if the parent runs ``polars-N`` threads that started no
later than this process, and this process is a copy of the parent, not a new program (the
same command line and Polars' library mapped at the same address: a program started with
``exec`` gets its own addresses from address-space randomisation). A spawned child whose parent
runs Polars is therefore not refused. Where ``/proc`` cannot be read, or the parent has
exited, such a child is not detected (it would hang in Polars, as it does without dpframe).
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


def _start_time(stat: str) -> int:
    """The start time (clock ticks since boot) in a ``/proc/.../stat`` line."""
    return int(stat.rsplit(") ", 1)[-1].split()[19])


def _polars_library_address(maps: str) -> str | None:
    """Where Polars' native library is mapped in a ``/proc/.../maps`` text (its first line)."""
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) >= 6 and "polars" in fields[-1] and ".so" in fields[-1]:
            return fields[0].split("-")[0]
    return None


def _inherited_pool() -> bool:
    """Whether this process, where Polars is imported but its pool does not run, is a forked
    copy of a parent whose Polars pool was already running at the fork (module docstring)."""
    if "polars" not in sys.modules or not os.path.isdir("/proc/self/task"):
        return False
    if _polars_pool_running():
        return False  # the pool runs here: started in this process, usable
    parent = f"/proc/{os.getppid()}"
    try:
        with open("/proc/self/stat", encoding="utf-8") as fh:
            born = _start_time(fh.read())
        pool_started = []
        for task in os.listdir(f"{parent}/task"):
            with open(f"{parent}/task/{task}/comm", encoding="utf-8") as fh:
                if not _POOL_THREAD.match(fh.read().strip()):
                    continue
            with open(f"{parent}/task/{task}/stat", encoding="utf-8") as fh:
                pool_started.append(_start_time(fh.read()))
        if not pool_started or min(pool_started) > born:
            return False  # the parent's pool was not running when this process started
        with open(f"{parent}/cmdline", "rb") as fh, open("/proc/self/cmdline", "rb") as own:
            if fh.read() != own.read():
                return False  # a new program, not a copy of the parent
        with open(f"{parent}/maps", encoding="utf-8") as fh, \
                open("/proc/self/maps", encoding="utf-8") as own_maps:
            here = _polars_library_address(own_maps.read())
            return here is not None and here == _polars_library_address(fh.read())
    except (OSError, ValueError, IndexError):
        return False  # cannot tell (the parent exited, /proc unreadable): as before


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

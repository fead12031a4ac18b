"""The engine timeout. On Dask and Spark, whose workers can all die while the engine waits for
them for ever, the engine's passes (the re-count of a lazy source, the key selection and the
aggregation) run under the engine timeout (``DPFRAME_ENGINE_TIMEOUT``; docs/engines.md, "When
the cluster dies").
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from dpframe.errors import (
    EngineTimeoutError,
    ParameterError,
)

#: The environment variable that sets the engine timeout, in seconds.
ENGINE_TIMEOUT = "DPFRAME_ENGINE_TIMEOUT"
_DEFAULT_TIMEOUT = 600.0
TIMEOUT_FIX = (f"Check the cluster's workers; for jobs that need more time set the "
                f"environment variable {ENGINE_TIMEOUT} to a number of seconds (default "
                f"{_DEFAULT_TIMEOUT:g}; docs/engines.md, 'When the cluster dies')")


_PASS_THREADS: set[int] = set()  # idents of running pass threads (their warnings are dropped)
_HOOK_LOCK = threading.Lock()


def _drop_pass_warnings() -> None:
    """Route every warning through a filter that drops those raised on an engine-pass thread.

    While the caller waits, :func:`~dpframe.release._safety_net.quiet` (a process-wide filter)
    hides an engine's warnings, which depend on the values. A pass abandoned on timeout keeps
    running after the caller left ``quiet()``; its warnings must still reach nobody. Python's
    filter list is shared by all threads (before 3.14), so a per-thread filter is not
    available: instead the module-level ``warnings._showwarnmsg`` — the one function both the
    C and the Python ``warn`` call to show a warning, also under ``catch_warnings(record=True)``
    — is wrapped once, and drops a warning whose thread is a pass thread. Other threads'
    warnings pass through unchanged. (A warning an engine raises on a worker thread of its own
    pool, e.g. Dask's threaded scheduler, is not on the pass thread and is not covered.)"""
    with _HOOK_LOCK:
        shown = warnings._showwarnmsg  # type: ignore[attr-defined]
        if getattr(shown, "_dpframe_pass_filter", False):
            return

        def show(message: Any) -> None:
            if threading.get_ident() in _PASS_THREADS:
                return
            shown(message)

        show._dpframe_pass_filter = True  # type: ignore[attr-defined]
        warnings._showwarnmsg = show  # type: ignore[attr-defined]


def engine_timeout() -> float:
    """The engine timeout in seconds: ``DPFRAME_ENGINE_TIMEOUT`` (a positive number), read at
    each release, else 600 (docs/engines.md, "When the cluster dies": ten minutes is far
    beyond a healthy release's pass on the clusters tested, and a false alarm spends ε)."""
    text = os.environ.get(ENGINE_TIMEOUT, "").strip()
    if not text:
        return _DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(
            f"the environment variable {ENGINE_TIMEOUT} must be a positive number of seconds "
            f"(default {_DEFAULT_TIMEOUT:g}), got {text!r}. Nothing was read or spent.")
    return value


def timeout_text(timeout: float | None, engine_name: str) -> str:
    return (f"the {engine_name} engine did not finish this release's pass within "
            f"{timeout:g} s ({ENGINE_TIMEOUT})")


def engine_pass(hooks: tuple[Callable[[], None] | None, Callable[[], None] | None] | None,
                timeout: float | None, work: Callable[[], Any], *,
                spent: tuple[float, float] | None) -> Any:
    """``work()``, for a cluster engine (``hooks`` not None) in a thread of its own that the
    caller waits for at most ``timeout`` seconds. ``enter`` runs first in that thread (Spark:
    the pass's job group); on expiry ``cancel`` runs (Spark: cancel that group), the thread is
    abandoned (a daemon; whatever it computes later is dropped, never read) and
    :class:`EngineTimeoutError` is raised. ``spent``: None before the reservation (the error
    then says nothing was spent); after it, :func:`~dpframe.release._pipeline.run` charges the
    reservation."""
    if hooks is None or timeout is None:
        return work()
    enter, cancel = hooks
    box: dict[str, Any] = {}

    _drop_pass_warnings()

    def target() -> None:
        _PASS_THREADS.add(threading.get_ident())
        try:
            if enter is not None:
                enter()
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread (or dropped if late)
            box["error"] = exc
        finally:
            _PASS_THREADS.discard(threading.get_ident())

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              name="dpframe-engine-pass", daemon=True)
    thread.start()
    try:
        thread.join(timeout)
    finally:
        if thread.is_alive() and cancel is not None:  # expired or interrupted (Ctrl-C)
            with contextlib.suppress(Exception):
                cancel()
    if thread.is_alive():
        if spent is not None:
            raise EngineTimeoutError("timeout")  # run() charges, logs and re-raises
        raise EngineTimeoutError(
            f"the engine did not finish the check of this frame's source (a re-count of its "
            f"rows) within {timeout:g} s ({ENGINE_TIMEOUT}): every worker may have died. "
            f"Nothing was spent. {TIMEOUT_FIX}")
    if "error" in box:
        raise box.pop("error")
    return box["value"]

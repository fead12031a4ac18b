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

    def target() -> None:
        try:
            if enter is not None:
                enter()
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread (or dropped if late)
            box["error"] = exc

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

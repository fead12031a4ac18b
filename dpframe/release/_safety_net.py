"""The safety net: what happens if anything fails after data was read.

By design nothing can: every expression dpframe runs on data is compiled to a total form for
its engine (:mod:`dpframe.rowwise`), the aggregation never refuses a value, and the checks
before the read look at public facts only. A failure after the read is therefore a bug — but
it would be a privacy leak if handled the ordinary way: "a query that fails spends nothing"
makes every failure free, and an engine's message often quotes the value that made it fail
(``Overflow in multiplication of INT32 (21475 * 100000)!``). So, after the read:

* a release that fails **spends** its reserved ε and δ and leaves a log entry saying it failed
  (not how: even the exception's class can depend on which value failed, so it says no more);
* a derivation of an in-memory frame that fails while being computed (no budget is reserved
  for it) leaves the same kind of entry, with ε = 0;
* either way the data set's ledger is then **locked**: every later reservation is refused
  (a durable ledger reads the entry back in every process), so an analyst who found a way to
  make dpframe fail gets one bit out of it, not a binary search;
* the caller gets one fixed :class:`~dpframe.errors.ReleaseFailedError` naming the queries —
  never the exception's class or text, and never chained to it (the original exception is
  dropped, so ``__context__`` and the traceback cannot show it either).

A failure still tells the caller that one bit (docs/audit.md, "The safety net"). That is why
totality, not this module, is the protection.
"""

from __future__ import annotations

import datetime as _dt
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpframe import provenance as units
from dpframe.accounting import LogRecord
from dpframe.errors import EngineTimeoutError, ReleaseFailedError
from dpframe.provenance import FrameFacts
from dpframe.release._engine_pass import TIMEOUT_FIX, timeout_text
from dpframe.release._entries import LogContext
from dpframe.release._records import Request

__all__ = ["charge_failure", "failure_entry", "failure_error", "quiet"]


def failure_entry(*, what: str, names: Sequence[str], epsilon: float,
                  delta: float, engine: str, random_source: str, derivation: str,
                  unit_fields: Mapping[str, Any], group_by: str | None = None,
                  keys_ref: str | None = None) -> dict[str, Any]:
    """The log entry of a failed release or derivation: every column of an ordinary entry,
    the reserved ε and δ as spent, and nothing about the exception (its class and message can
    depend on the value that failed)."""
    return LogRecord.from_dict({
        "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
        "name": ",".join(names),
        "query": f"failed {what}",
        "part": "failed",
        "columns": "",
        "group_by": group_by,
        "group_keys": keys_ref,
        "epsilon": float(epsilon),
        "delta": float(delta),
        "mechanism_epsilon": 0.0,
        "epsilon_overhead": 0.0,
        "sensitivity": 0.0,
        "mechanism": "none (failed: nothing was released)",
        "scale": 0.0,
        "grid": 0.0,
        "domain_lower": None,
        "domain_upper": None,
        "clamping": "n/a (failed)",
        "missing": "n/a (failed)",
        "random_source": random_source,
        "engine": engine,
        "size": "n/a",
        "formulation": (
            f"the {what} failed inside dpframe after data was read; nothing was "
            "released, the reserved budget is spent, and the failure itself reveals one bit "
            "(docs/audit.md, 'The safety net'); please report it as a bug"),
        "composition": "sequential",
        "fixed_point_quantum": None,
        "derivation": derivation,
        "verification": "verified from the plan structure",
        "mechanism_choice": "none (failed)",
        "interval": None,
        **dict(unit_fields),
    }).to_dict()


def failure_error(what: str, names: Sequence[str], epsilon: float,
                  delta: float) -> ReleaseFailedError:
    """The one error a failure after the read raises: the queries and what was spent — no
    data, no engine message, not even the exception's class."""
    shown = ", ".join(repr(n) for n in names) or "(unnamed)"
    spent = (f"its reserved budget (epsilon={epsilon:.6g}, delta={delta:.3g}) is spent and "
             if epsilon > 0 or delta > 0 else "")
    return ReleaseFailedError(
        f"the {what} of {shown} failed inside dpframe after reading data; "
        f"{spent}the log records a failed {what}, and this data set's budget now answers "
        "nothing more (the failure itself revealed one bit about the data). The exception is "
        "withheld (its text could quote a value, its class tell which one failed). This is a "
        "bug in dpframe: please report it with the query (not the data)."
    )


#: The one filter :class:`quiet` installs: every warning (a subclass of ``Warning``, any
#: message, module and line) is dropped, as ``warnings.simplefilter("ignore")`` puts it.
_IGNORE_EVERY_WARNING = ("ignore", None, Warning, None, 0)

#: Python's warning filters live in the module's list ``warnings.filters`` (3.11–3.13, and
#: later versions unless they run with context-aware warnings, whose filters are per context:
#: there :class:`quiet` takes ``warnings.catch_warnings``).
_MODULE_FILTERS = not getattr(sys.flags, "context_aware_warnings", False)


class quiet:  # noqa: N801 - used as a function: ``with quiet():``
    """No warning an engine might print while evaluating a verified derivation (overflow in a
    cast, log of a negative...) reaches the caller: such warnings depend on the values. The
    result holds null / NaN / inf there, which the missing-value rule and clamping handle.

    What ``warnings.catch_warnings()`` with ``warnings.simplefilter("ignore")`` does, and
    ``np.errstate(all="ignore")``, as one context manager entered on every release: the
    module's filter list is swapped for a fresh list holding the one filter that drops every
    warning (the caller's list, untouched, is put back on exit; code inside may change the
    fresh one as it likes), the filters' version is bumped on entry and exit as
    ``catch_warnings`` bumps it (so no "once"/"default" registry answers across the swap),
    and ``showwarning`` is restored. A warning is matched against the first filter first, so
    dropping the caller's filters behind the one that ignores everything changes nothing but
    the cost (about a microsecond less than copying the list and inserting the filter).
    With context-aware warnings (filters per context), ``catch_warnings`` itself."""

    __slots__ = ("_errors", "_filters", "_show", "_warnings")

    def __enter__(self) -> None:
        if _MODULE_FILTERS:
            self._filters = warnings.filters
            self._show = (warnings.showwarning,
                          warnings._showwarnmsg_impl)  # type: ignore[attr-defined]
            warnings.filters = [_IGNORE_EVERY_WARNING]
            warnings._filters_mutated()  # type: ignore[attr-defined]
        else:  # pragma: no cover - Python with context-aware warnings
            self._warnings = warnings.catch_warnings()
            self._warnings.__enter__()
            warnings.simplefilter("ignore")
        try:
            self._errors = np.errstate(all="ignore")
            self._errors.__enter__()
        except BaseException:
            self._restore()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._errors.__exit__(None, None, None)
        finally:
            self._restore()

    def _restore(self) -> None:
        if _MODULE_FILTERS:
            warnings.filters = self._filters
            warnings.showwarning, warnings._showwarnmsg_impl = (  # type: ignore[attr-defined]
                self._show)
            warnings._filters_mutated()  # type: ignore[attr-defined]
        else:  # pragma: no cover - Python with context-aware warnings
            self._warnings.__exit__(None, None, None)


def charge_failure(frame: Any, facts: FrameFacts, request: Request, names: list[str],
                   failure: str, reservation: Any, delta: float,
                   timeout: float | None = None) -> None:
    """A release failed after the read: spend its reservation, log the failure, and raise
    the one fixed error (outside the ``except`` block, so nothing chains to the original).
    ``failure == "timeout"``: the engine timeout expired
    (:func:`~dpframe.release._engine_pass.engine_pass`); the entry says so and does not lock the
    ledger (a timeout is a function of the elapsed time, which the
    caller sees anyway: docs/audit.md leaves timing out of scope), the error names the
    setting."""
    context = LogContext.of(frame, facts, request)
    entry = failure_entry(
        what="release", names=names, epsilon=request.epsilon,
        delta=delta, engine=context.engine, random_source=context.random_source,
        derivation=context.derivation,
        group_by=None if context.group_by is None else str(context.group_by),
        keys_ref=context.keys_ref,
        unit_fields=units.describe(facts.unit, context.group_by is not None,
                                   facts.dataset.neighbours))
    if failure == "timeout":
        entry = {**entry, "query": "timed-out release",
                 "mechanism": "none (timed out: nothing was released)",
                 "formulation": timeout_text(timeout, context.engine) + (
                     "; the aggregation had been submitted, so the reserved budget is spent; "
                     "its late result, if any, was discarded")}
    facts.dataset.ledger.commit(reservation, [entry])
    if failure == "timeout":
        raise EngineTimeoutError(
            f"{timeout_text(timeout, context.engine)}: every worker may have died, or the "
            f"job needs longer. The aggregation had been submitted, so this release's reserved "
            f"budget (epsilon={request.epsilon:.6g}, delta={delta:.3g}) is spent and the log "
            f"records a timed-out release; its late result, if any, is discarded. "
            f"{TIMEOUT_FIX}")
    if failure in ("KeyboardInterrupt", "SystemExit"):
        raise KeyboardInterrupt if failure == "KeyboardInterrupt" else SystemExit(1)
    raise failure_error("release", names, request.epsilon, delta)

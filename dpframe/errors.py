"""Exceptions raised by dpframe.

Every error a user can trigger is a subclass of :class:`DPFrameError`, and every error caused by
a bad argument is also a :class:`ValueError`, so ``except ValueError`` keeps working. Messages
say what to change. A query that raises any of these spends no privacy budget.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "BoundsError",
    "BudgetExceededError",
    "DPFrameError",
    "DerivationError",
    "IntegrityError",
    "LedgerError",
    "NoLedgerError",
    "ParameterError",
    "PrivateSizeError",
    "PrivateSizeWarning",
    "ReleaseFailedError",
    "ReleaseFileError",
    "ReleaseWriteError",
    "SelectionWarning",
    "SourceChangedError",
    "SpecError",
    "UnsupportedInputError",
    "UnsupportedProcessError",
]


class DPFrameError(Exception):
    """Base class of every dpframe error."""


class ParameterError(DPFrameError, ValueError):
    """A parameter (epsilon, delta, sensitivity, domain, mechanism name, ...) is invalid."""


class BoundsError(ParameterError):
    """Declared bounds are missing, reversed, non-finite, or a value lies outside them."""


class UnsupportedInputError(ParameterError):
    """The data cannot be aggregated as asked (wrong dtype, NaN/null/inf, unknown column, ...)."""


class DerivationError(ParameterError):
    """A derived frame is refused: dpframe could not verify from its structure that every row
    comes from one row of the protected data (docs/audit.md). Raised before any data is read."""


class UnsupportedProcessError(DPFrameError, RuntimeError):
    """This process cannot run the work asked: it was forked from a process that had already
    run Polars, whose thread pool a forked child does not have (the work would hang). Start
    workers with the ``spawn`` method. Raised before anything is read or spent."""


class SourceChangedError(DPFrameError):
    """The source of a protected frame (files behind a LazyFrame, a DuckDB table, a Dask or
    Spark source) changed after ``dpf.protect``: its public size may no longer hold. Raised
    before anything is read or spent."""


class PrivateSizeError(ParameterError):
    """A query needs the row count as public, but the frame's size is private."""


class BudgetExceededError(DPFrameError):
    """The query would spend more epsilon or delta than the ledger has left."""


class LedgerError(DPFrameError):
    """The accounting ledger is unusable (corrupt file, closed session, ...)."""


class IntegrityError(DPFrameError):
    """A released table's values or log were altered, its seal is missing, or its signature
    does not match the steward's key: the log does not vouch for these numbers
    (docs/ledger.md)."""


class NoLedgerError(LedgerError):
    """The frame has no budget attached: protect it, or name / enter a ``dpf.Session``."""


class ReleaseFailedError(DPFrameError):
    """A release (or the evaluation of a derivation) failed after dpframe had read data.

    This is the safety net, not the design: every expression and every line dpframe runs after
    the read is written to be total, so this should never happen. When it does, the reserved ε
    and δ are spent and the failure is logged, and the message names the query only, never
    the exception's text (which could quote a value) or class (which could tell which value
    failed). A failure still tells the caller one bit (it happened) — docs/audit.md, "The
    safety net"."""


class SpecError(DPFrameError, ValueError):
    """A bad release spec. ``line`` is the 1-based line of the spec the error is about (None
    when the spec has no such place, e.g. a whole table is missing)."""

    def __init__(self, message: str, *, source: str = "spec", line: int | None = None) -> None:
        self.message = message
        self.source = source
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class ReleaseFileError(LedgerError):
    """A file given as a release (``dpf.read_log``, ``dpframe inspect``) cannot be read as a
    Parquet file at all: missing, a directory, no permission, not Parquet, truncated or
    damaged. (A readable Parquet file without a release log is a plain :class:`LedgerError`;
    one whose log or values do not verify an :class:`IntegrityError`.)"""


class ReleaseWriteError(DPFrameError, OSError):
    """A release file could not be written (``dpf.write_parquet``): no permission, a full
    disk, a folder changed while writing. Also an ``OSError``, as the failure it reports."""


class SelectionWarning(UserWarning):
    """A group-by whose keys were selected from the data released no group: no key's noisy
    count cleared the selection threshold. Issued from the released (noisy) key set alone, so
    it tells nothing the empty table does not; its message names the public threshold and how
    to get groups (declare the keys, more ε, a larger ``selection_share``)."""


class PrivateSizeWarning(UserWarning):
    """Issued once by ``protect`` when ``missing=`` was left to its default: the bounded columns
    whose dtype can hold a missing value drop the rows missing them, so their statistics have a
    private size (sum/count formulations, more noise; statistics that need the public size are
    refused). Built from the schema and the arguments alone (no data is read); it names the
    columns and how to keep the size public (a fill value). Passing ``missing=`` explicitly
    (``"drop"`` included) silences it."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(warning: Warning) -> None:
    """Issue ``warning`` attributed to the first caller outside dpframe (the user's line)."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(warning, stacklevel=level)


class EngineTimeoutError(DPFrameError, TimeoutError):
    """A Dask or Spark pass of a release did not finish within the engine timeout (the
    environment variable ``DPFRAME_ENGINE_TIMEOUT``, in seconds; default 600): typically every
    worker of the cluster died, and the engine would wait for ever. Raised by the main thread,
    which stopped waiting (the engine's job is cancelled where the engine can, and its late
    result discarded). Before the reservation (the re-count of a source's rows) nothing is
    spent; once the release's aggregation was submitted the reserved ε and δ are spent and the
    log records a timed-out release (docs/engines.md, "When the cluster dies")."""


__all__ += ["EngineTimeoutError"]

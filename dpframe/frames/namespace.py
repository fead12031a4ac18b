"""The ``.dp`` namespace shared by pandas and Polars: a thin layer over
:func:`dpframe.frames.release.run_queries`.

New statistics (issue 7: proportions, cov/corr, describe) add a :class:`~dpframe.queries.Query`
subclass in :mod:`dpframe.queries` and a short method here; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpframe import queries as q_
from dpframe.accounting import Budget
from dpframe.errors import PrivateSizeError
from dpframe.frames import results
from dpframe.frames.context import Session, backend_of, resolve
from dpframe.frames.release import Outcome, run_queries
from dpframe.integrity import attach_release_log as _remember_release_log
from dpframe.integrity import release_log_of as _release_log

__all__ = ["DPGroupBy", "DPNamespace"]


class DPNamespace:
    """``frame.dp``: differentially private queries on a protected frame and its derivatives.

    Every query takes ``epsilon=``, ``delta=0.0``, ``mechanism="bounded"`` (or
    ``"truncated"``, ``"laplace"``), ``nulls="raise"`` (or ``"drop"``), ``random_state=None``
    (secure randomness; an int or ``numpy.random.Generator`` for tests and simulations only)
    and ``session=None`` (a :class:`dpframe.Session` or its name; needed for derived Polars
    frames outside a ``with session:`` block).
    """

    def __init__(self, frame: Any) -> None:
        self._frame = frame

    # -- single statistics -> float -------------------------------------------------------
    def _scalar(self, query: q_.Query, name: str, **kw: Any) -> float:
        out = run_queries(self._frame, {name: query}, **kw)
        return float(out.values[name][0])

    def count(self, *, epsilon: float, **kw: Any) -> float:
        """Noisy number of rows (Δ = 1)."""
        return self._scalar(q_.count(), "count", epsilon=epsilon, **kw)

    def sum(self, column: str, *, epsilon: float, **kw: Any) -> float:
        """Noisy sum of a bounded column."""
        return self._scalar(q_.sum(column), "sum", epsilon=epsilon, **kw)

    def mean(self, column: str, *, epsilon: float, **kw: Any) -> float:
        """Noisy mean of a bounded column, in ``[lower, upper]``."""
        return self._scalar(q_.mean(column), "mean", epsilon=epsilon, **kw)

    def variance(self, column: str, *, epsilon: float, **kw: Any) -> float:
        """Noisy sample variance (ddof=1) of a bounded column."""
        return self._scalar(q_.variance(column), "variance", epsilon=epsilon, **kw)

    var = variance

    def std(self, column: str, *, epsilon: float, **kw: Any) -> float:
        """Noisy sample standard deviation (ddof=1): sqrt of the noisy variance."""
        return self._scalar(q_.std(column), "std", epsilon=epsilon, **kw)

    # -- batch ---------------------------------------------------------------------------
    def release(
        self, queries: Mapping[str, q_.Query], *, epsilon: float, weights: Any = None, **kw: Any
    ) -> Any:
        """Several statistics in one release; ε (and δ) split evenly or by ``weights``.

        Returns a one-row frame of the caller's library whose log travels with it (pandas:
        ``attrs``, written by ``to_parquet``; Polars: ``table.dp.write_parquet(path)``).
        """
        out = run_queries(self._frame, queries, epsilon=epsilon, weights=weights, **kw)
        return self._table(out)

    # -- analyses (issue 7; the logic lives in dpframe.frame_analyses) ---------------------
    def proportions(self, column: str, *, epsilon: float, keys: Sequence[Any] | None = None,
                    method: str = "rescale", **kw: Any) -> Any:
        """Proportions of a categorical column's public keys, Σ = 1, each in [0, 1] (Liu §4.2);
        ``method="rescale"`` or ``"all_but_one"``."""
        from dpframe import frame_analyses

        return frame_analyses.proportions(self, column, epsilon=epsilon, keys=keys,
                                          method=method, **kw)

    def cov(self, columns: Sequence[str], *, epsilon: float, **kw: Any) -> Any:
        """PSD covariance matrix (ddof=1) of bounded columns, labelled (Liu §4.1)."""
        from dpframe import frame_analyses

        return frame_analyses.covariance(self, columns, epsilon=epsilon, kind="cov", **kw)

    def corr(self, columns: Sequence[str], *, epsilon: float, **kw: Any) -> Any:
        """Correlation matrix in [−1, 1] from the released covariance (Liu §4.1)."""
        from dpframe import frame_analyses

        return frame_analyses.covariance(self, columns, epsilon=epsilon, kind="corr", **kw)

    def describe(self, *, epsilon: float, columns: Sequence[str] | None = None,
                 **kw: Any) -> Any:
        """count, mean, std and declared bounds of bounded columns, ε split evenly."""
        from dpframe import frame_analyses

        return frame_analyses.describe(self, epsilon=epsilon, columns=columns, **kw)

    def groupby(self, column: str, *, keys: Sequence[Any] | None = None) -> DPGroupBy:
        """Group by a column with public ``keys`` (or the keys declared at protect time)."""
        return DPGroupBy(self, column, keys)

    group_by = groupby

    # -- budget and log ------------------------------------------------------------------
    @property
    def session(self) -> Session:
        return resolve(self._frame)[0].session

    def _dataset(self, session: Session | str | None = None) -> Any:
        return resolve(self._frame, session)[0]

    @property
    def budget(self) -> Budget:
        """Spent and remaining ε and δ of the dataset this frame draws from."""
        return self._dataset().ledger.budget

    def budget_in(self, session: Session | str) -> Budget:
        return self._dataset(session).ledger.budget

    @property
    def log(self) -> Any:
        """The accounting log, one row per noisy measurement, as a frame of this library."""
        return self.log_in(None)

    def log_in(self, session: Session | str | None) -> Any:
        frame_log = _release_log(self._frame)
        doc = frame_log if frame_log is not None else self._dataset(session).ledger.document
        return results.log_frame(doc, backend_of(self._frame))

    @property
    def size(self) -> int:
        """The public row count of the protected frame; :class:`~dpframe.PrivateSizeError` on
        any derived frame (its size is private: release it with ``frame.dp.count(...)``)."""
        dataset, is_root = resolve(self._frame)
        if not is_root:
            raise PrivateSizeError(
                "this frame was derived from the protected one (filter, join, head, copy, ...), "
                "so its size is private; release a noisy one with frame.dp.count(epsilon=...)"
            )
        return dataset.n

    @property
    def is_size_public(self) -> bool:
        """True only for the frame returned by :func:`dpframe.protect` itself."""
        return resolve(self._frame)[1]

    def write_parquet(self, path: Any, *, session: Session | str | None = None) -> None:
        """Write the frame to Parquet with the accounting log in the key-value metadata."""
        from dpframe import io

        doc = _release_log(self._frame)
        if doc is None:
            doc = self._dataset(session).ledger.snapshot_document()
        io.write_parquet(self._frame, path, doc)

    # -- helpers -------------------------------------------------------------------------
    def _table(self, out: Outcome) -> Any:
        table = results.to_frame(out, backend_of(self._frame))
        _remember_release_log(table, out.document)
        return table


class DPGroupBy:
    """``frame.dp.groupby(col, keys=[...])``: one row per declared key (empty groups too);
    undeclared keys never appear. One group-by costs ε once (parallel composition)."""

    def __init__(self, ns: DPNamespace, column: str, keys: Sequence[Any] | None) -> None:
        self._ns = ns
        self._column = column
        self._keys = keys

    def release(self, queries: Mapping[str, q_.Query], *, epsilon: float, weights: Any = None,
                **kw: Any) -> Any:
        out = run_queries(self._ns._frame, queries, epsilon=epsilon, weights=weights,
                          group_by=self._column, keys=self._keys, **kw)
        return self._ns._table(out)

    def _one(self, query: q_.Query, name: str, epsilon: float, **kw: Any) -> Any:
        return self.release({name: query}, epsilon=epsilon, **kw)

    def count(self, *, epsilon: float, **kw: Any) -> Any:
        return self._one(q_.count(), "count", epsilon, **kw)

    def sum(self, column: str, *, epsilon: float, **kw: Any) -> Any:
        return self._one(q_.sum(column), "sum", epsilon, **kw)

    def mean(self, column: str, *, epsilon: float, **kw: Any) -> Any:
        return self._one(q_.mean(column), "mean", epsilon, **kw)

    def variance(self, column: str, *, epsilon: float, **kw: Any) -> Any:
        return self._one(q_.variance(column), "variance", epsilon, **kw)

    var = variance

    def std(self, column: str, *, epsilon: float, **kw: Any) -> Any:
        return self._one(q_.std(column), "std", epsilon, **kw)

"""The ``.dp`` namespace shared by pandas, Polars and the engines, and its single statistics
(a float each), group-bys, budget and log.

A thin layer: every release goes through :func:`dpframe.release._pipeline.run`. The namespace
is assembled from parts with one job each: the methods answering with a table
(:mod:`.analyses`), the verified derivations (:mod:`.derivations`), the group-bys
(:class:`~dpframe.frames.groupby.DPGroupBy`); the text of the parameters the methods share is
in :mod:`.parameters`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Generic, overload

import numpy as np
import pandas as pd
import polars as pl

from dpframe import accounting as parquet
from dpframe import provenance, release
from dpframe._validation import check_quantile_delta, check_quantile_mechanism
from dpframe.accounting.ledger import Budget
from dpframe.accounting.seals import release_log_of
from dpframe.backends import backend_of
from dpframe.errors import ParameterError, PrivateSizeError
from dpframe.frames import results
from dpframe.frames.analyses import Analyses
from dpframe.frames.derivations import DerivationVerbs
from dpframe.frames.groupby import DPGroupBy
from dpframe.frames.parameters import QUANTILE, entries, shared_parameters
from dpframe.frames.results import Estimate, QuantileEstimate
from dpframe.frames.types import (
    FrameT,
    KeyList,
    Mechanism,
    QuantileMechanismName,
    RandomState,
    TableT,
)
from dpframe.provenance import Session, count_units
from dpframe.query import statistics as q_

__all__ = ["DPGroupBy", "DPNamespace", "Mechanism", "QuantileMechanismName", "dp"]


class DPNamespace(Analyses[TableT], DerivationVerbs[FrameT], Generic[FrameT, TableT]):
    """``frame.dp``: differentially private queries on a protected frame and its verified
    derivations.

    Queries return a float (one statistic), or a frame of the caller's library (``release``,
    group-bys, ``cov``/``corr``, ``describe``, ``proportions``) whose log travels with it.
    Derivations (``filter``, ``with_columns``, ``select``, ``drop``, ``rename``) return a new
    frame of the same library that draws from the same budget.
    """

    def __init__(self, frame: FrameT) -> None:
        self._frame = frame

    # -- single statistics -> float ---------------------------------------------------------
    def _scalar(self, query: q_.Query, name: str, epsilon: float, delta: float,
                mechanism: Mechanism, random_state: RandomState,
                session: Session | str | None, ci: float | None) -> float | Estimate:
        out = release.run(self._frame, {name: query}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci, document=False)
        value = float(out.values[name][0])
        if ci is None:
            return value
        lo, hi = out.intervals[name]
        return Estimate(value, float(np.atleast_1d(lo)[0]), float(np.atleast_1d(hi)[0]), ci)

    @overload
    def count(self, *, epsilon: float, delta: float = ..., mechanism: Mechanism = ...,
              random_state: RandomState = ..., session: Session | str | None = ...,
              ci: None = None) -> float: ...

    @overload
    def count(self, *, epsilon: float, delta: float = ..., mechanism: Mechanism = ...,
              random_state: RandomState = ..., session: Session | str | None = ...,
              ci: float) -> Estimate: ...

    @shared_parameters()
    def count(self, *, epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
              random_state: RandomState = None, session: Session | str | None = None,
              ci: float | None = None) -> float | Estimate:
        """Number of rows: on a frame whose size is public (the protected frame, or a
        derivation that keeps every row) the public n, exact and free whatever ``epsilon`` is
        asked (logged with size "public"); otherwise noisy (Δ = 1, domain [0, n]).

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0]}), epsilon=1, bounds={"x": (0, 5)})
        >>> 0 <= pf.dp.count(epsilon=0.5) <= 2
        True
        """
        return self._scalar(q_.count(), "count", epsilon, delta, mechanism, random_state,
                            session, ci)

    @overload
    def count_units(self, *, epsilon: float, delta: float = ..., mechanism: Mechanism = ...,
                    random_state: RandomState = ..., session: Session | str | None = ...,
                    ci: None = None) -> float: ...

    @overload
    def count_units(self, *, epsilon: float, delta: float = ..., mechanism: Mechanism = ...,
                    random_state: RandomState = ..., session: Session | str | None = ...,
                    ci: float) -> Estimate: ...

    @shared_parameters()
    def count_units(self, *, epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
                    random_state: RandomState = None, session: Session | str | None = None,
                    ci: float | None = None) -> float | Estimate:
        """Noisy number of distinct persons (privacy units), on a frame
        protected with ``privacy_unit=``: Δ = 1 however many rows a person owns (``count`` counts
        rows, Δ = k). On the protected frame the number of units is public: it is returned
        exactly, at no cost, whatever ``epsilon`` is asked.

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)
        """
        return self._scalar(count_units(), "count_units", epsilon, delta, mechanism,
                            random_state, session, ci)

    @overload
    def sum(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: RandomState = ...,
            session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def sum(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: RandomState = ...,
            session: Session | str | None = ..., ci: float) -> Estimate: ...

    @shared_parameters()
    def sum(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: Mechanism = "auto", random_state: RandomState = None,
            session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy sum of a bounded column (values clamped to its bounds).

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)
        """
        return self._scalar(q_.sum(column), "sum", epsilon, delta, mechanism, random_state,
                            session, ci)

    @overload
    def mean(self, column: str, *, epsilon: float, delta: float = ...,
             mechanism: Mechanism = ..., random_state: RandomState = ...,
             session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def mean(self, column: str, *, epsilon: float, delta: float = ...,
             mechanism: Mechanism = ..., random_state: RandomState = ...,
             session: Session | str | None = ..., ci: float) -> Estimate: ...

    @shared_parameters()
    def mean(self, column: str, *, epsilon: float, delta: float = 0.0,
             mechanism: Mechanism = "auto", random_state: RandomState = None,
             session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy mean of a bounded column, inside its bounds.

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 40, 50]}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> 0 <= pf.dp.mean("age", epsilon=0.5) <= 120
        True
        """
        return self._scalar(q_.mean(column), "mean", epsilon, delta, mechanism, random_state,
                            session, ci)

    @overload
    def variance(self, column: str, *, epsilon: float, delta: float = ...,
                 mechanism: Mechanism = ..., random_state: RandomState = ...,
                 session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def variance(self, column: str, *, epsilon: float, delta: float = ...,
                 mechanism: Mechanism = ..., random_state: RandomState = ...,
                 session: Session | str | None = ..., ci: float) -> Estimate: ...

    @shared_parameters()
    def variance(self, column: str, *, epsilon: float, delta: float = 0.0,
                 mechanism: Mechanism = "auto", random_state: RandomState = None,
                 session: Session | str | None = None, ci: float | None = None
                 ) -> float | Estimate:
        """Noisy sample variance (ddof=1) of a bounded column (``var`` is the same method).

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)
        """
        return self._scalar(q_.variance(column), "variance", epsilon, delta, mechanism,
                            random_state, session, ci)

    var = variance

    @overload
    def quantile(self, column: str, q: float = ..., *, epsilon: float, delta: float = ...,
                 mechanism: QuantileMechanismName = ..., bins: int | None = ...,
                 random_state: RandomState = ..., session: Session | str | None = ...,
                 ci: None = None, ci_share: float = ...) -> float: ...

    @overload
    def quantile(self, column: str, q: float = ..., *, epsilon: float, delta: float = ...,
                 mechanism: QuantileMechanismName = ..., bins: int | None = ...,
                 random_state: RandomState = ..., session: Session | str | None = ...,
                 ci: float, ci_share: float = ...) -> QuantileEstimate: ...

    @overload
    def quantile(self, column: str, q: Sequence[float], *, epsilon: float, delta: float = ...,
                 mechanism: QuantileMechanismName = ..., bins: int | None = ...,
                 random_state: RandomState = ..., session: Session | str | None = ...,
                 ci: float | None = ..., ci_share: float = ...) -> TableT: ...

    @shared_parameters(QUANTILE)
    def quantile(self, column: str, q: float | Sequence[float] = 0.5, *, epsilon: float,
                 delta: float = 0.0, mechanism: QuantileMechanismName = "auto",
                 bins: int | None = None, random_state: RandomState = None,
                 session: Session | str | None = None, ci: float | None = None,
                 ci_share: float = 0.5) -> float | QuantileEstimate | TableT:
        """Noisy quantile(s) of a bounded column, inside its bounds.

        The exponential mechanism over public bins (docs/privacy.md, section Q): the column is
        clamped to its bounds and counted per bin of ``bins`` equal bins, and a bin near the
        target rank is chosen with probability falling exponentially with its rank distance; its
        midpoint is released. Several levels split ε evenly and are sorted. Missing values follow
        the column's rule (dropped by default).

        The default number of bins follows the public size (docs/frames.md, "Quantile
        resolution"): ``B = 2^⌈log₂(8·ε·n)⌉`` within ``[2^16, 2^22]`` with ``n`` the protected
        frame's public size (also where the queried rows' count is private: a filter or dropped
        missing values), fewer for many groups (memory). The grid's error (about a quarter bin)
        then stays below the mechanism's own rank noise.

        Returns
        -------
        float for one level (a ``dpf.QuantileEstimate`` with ``ci``: value, lower, upper,
        rank_error, and the levels q_lower/q_upper where n is public); for a list, a frame with
        columns ``q`` and ``quantile`` (and ``lower``, ``upper``, ``rank_error`` with ``ci``),
        one row per level, whose log travels with it.

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 40, 50] * 50}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> 0 <= pf.dp.median("age", epsilon=0.5) <= 120
        True
        """
        check_quantile_mechanism(mechanism)
        check_quantile_delta(mechanism, delta)
        query = q_.quantile(column, q, bins=bins, ci_share=ci_share)
        out = release.run(self._frame, {"quantile": query}, epsilon=epsilon, delta=delta,
                          mechanism="auto", random_state=random_state, session=session, ci=ci)
        if query.scalar:
            value = float(out.values["quantile"][0])
            if ci is None:
                return value
            return results.quantile_estimate(out, "quantile", value, float(ci))
        assert query.labels is not None
        names = [f"quantile[{label}]" for label in query.labels]
        data: dict[str, Any] = {"q": list(query.levels),
                                "quantile": [float(out.values[n][0]) for n in names]}
        if ci is not None:
            data["lower"] = [float(out.intervals[n][0][0]) for n in names]
            data["upper"] = [float(out.intervals[n][1][0]) for n in names]
            data["rank_error"] = [float(out.values["quantile_rank_error"][0])] * len(names)
        return results.with_log(out, out.backend.table(data))

    @overload
    def median(self, column: str, *, epsilon: float, delta: float = ...,
               mechanism: QuantileMechanismName = ..., bins: int | None = ...,
               random_state: RandomState = ..., session: Session | str | None = ...,
               ci: None = None, ci_share: float = ...) -> float: ...

    @overload
    def median(self, column: str, *, epsilon: float, delta: float = ...,
               mechanism: QuantileMechanismName = ..., bins: int | None = ...,
               random_state: RandomState = ..., session: Session | str | None = ...,
               ci: float, ci_share: float = ...) -> QuantileEstimate: ...

    @shared_parameters(QUANTILE)
    def median(self, column: str, *, epsilon: float, delta: float = 0.0,
               mechanism: QuantileMechanismName = "auto", bins: int | None = None,
               random_state: RandomState = None, session: Session | str | None = None,
               ci: float | None = None, ci_share: float = 0.5) -> float | QuantileEstimate:
        """Noisy median of a bounded column: :meth:`quantile` at 0.5 (a float, or a
        ``dpf.QuantileEstimate`` with ``ci``)."""
        if ci is None:
            return self.quantile(column, 0.5, epsilon=epsilon, delta=delta, mechanism=mechanism,
                                 bins=bins, random_state=random_state, session=session,
                                 ci_share=ci_share)
        return self.quantile(column, 0.5, epsilon=epsilon, delta=delta, mechanism=mechanism,
                             bins=bins, random_state=random_state, session=session, ci=ci,
                             ci_share=ci_share)

    @overload
    def std(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: RandomState = ...,
            session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def std(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: RandomState = ...,
            session: Session | str | None = ..., ci: float) -> Estimate: ...

    @shared_parameters()
    def std(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: Mechanism = "auto", random_state: RandomState = None,
            session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy sample standard deviation (ddof=1): √ of the noisy variance.

        Returns
        -------
        float (a ``dpf.Estimate`` with ``ci``)
        """
        return self._scalar(q_.std(column), "std", epsilon, delta, mechanism, random_state,
                            session, ci)

    @shared_parameters(entries("""
    column : str or list of str
        The group column, or several.
    keys : list, optional
        Public keys of the group column (default: those declared at protect time), or key
        tuples of several columns (default: every combination of their declared keys).
    selection_share : float, default 0.5
        Where keys are selected from the data: the share of each release's ε that pays for
        the selection (with all its δ).
    """))
    def groupby(self, column: str | Sequence[str], *, keys: KeyList | None = None,
                selection_share: float = 0.5) -> DPGroupBy[TableT]:
        """Group by one column with public ``keys`` (or the keys declared at protect time), or
        by several columns: every combination of their declared keys (or the key tuples given
        as ``keys=[("north", "F"), ...]``).

        One row per key or combination (empty groups too); undeclared keys never appear; the
        whole group-by costs ε once (parallel composition: a replaced row changes at most two
        groups, so each gets ε/2).

        **Keys from the data.** Without declared keys, a release with ``delta > 0`` selects
        them privately: a noisy count per key present in the data, and only keys above a
        threshold are kept, so a key one person holds appears with probability at most δ
        (docs/privacy.md, section K). ``selection_share`` of each release's ε (default half)
        and all its δ pay for the selection; the queries get the rest of ε. Without δ the
        release is refused, before anything is read."""
        return DPGroupBy(self._frame, column, keys, selection_share)

    group_by = groupby

    # -- budget and log -----------------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The session (ledger handle) of the data set this frame's rows come from."""
        return provenance.resolve(self._frame).dataset.session

    @property
    def budget(self) -> Budget:
        """Spent and remaining ε and δ of the data set this frame draws from."""
        return provenance.resolve(self._frame).dataset.ledger.budget

    @property
    def log(self) -> TableT:
        """The accounting log, one row per noisy measurement, as a frame of this library (for
        a release table: the log it carries)."""
        doc = release_log_of(self._frame)
        if doc is None:
            doc = provenance.resolve(self._frame).dataset.ledger.snapshot_document()
        return results.log_frame(doc, backend_of(self._frame))

    @property
    def size(self) -> int:
        """The public row count; :class:`~dpframe.PrivateSizeError` on a frame whose size is
        private (after a filter: release a noisy one with ``frame.dp.count(...)``)."""
        facts = provenance.resolve(self._frame)
        if facts.dataset.size_private:
            raise PrivateSizeError(
                "this data set is protected with neighbours='add_remove': its number of rows "
                "is private (one row more or less is what the guarantee hides); release a "
                "noisy one with frame.dp.count(epsilon=...)"
            )
        if facts.unit is not None:
            raise PrivateSizeError(
                f"this frame is protected with privacy_unit={facts.unit.column!r}: its number "
                "of rows is private (one person can own several rows); its number of persons is "
                "public: frame.dp.count_units(epsilon=0)"
            )
        if not facts.size_public:
            raise PrivateSizeError(
                "this frame was filtered from the protected one, so its size is private; "
                "release a noisy one with frame.dp.count(epsilon=...)"
            )
        return facts.dataset.n

    @property
    def is_size_public(self) -> bool:
        """True when the frame has exactly the protected frame's rows (no filter), no
        privacy unit and replace-one neighbours (a unit or ``neighbours="add_remove"`` makes
        the row count private)."""
        facts = provenance.resolve(self._frame)
        return facts.size_public and facts.unit is None and not facts.dataset.size_private

    @shared_parameters()
    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write a release table to Parquet with its log in the key-value metadata.

        Parameters
        ----------
        path : str or path-like
            Where to write.
        """
        doc = release_log_of(self._frame)
        if doc is None:
            raise ParameterError(
                "only release tables (what .dp.release / groupby / describe / cov return) are "
                "written with a log; this frame is not one"
            )
        parquet.write_parquet(self._frame, path, doc)


@overload
def dp(frame: pl.LazyFrame) -> DPNamespace[pl.LazyFrame, pl.DataFrame]: ...
@overload
def dp(frame: pl.DataFrame) -> DPNamespace[pl.DataFrame, pl.DataFrame]: ...
@overload
def dp(frame: FrameT) -> DPNamespace[FrameT, pd.DataFrame]: ...


@shared_parameters()
def dp(frame: object) -> DPNamespace[Any, Any]:
    """The ``.dp`` namespace of any supported frame: ``dpf.dp(frame).mean("x", epsilon=1)``
    is ``frame.dp.mean("x", epsilon=1)``. Useful where a library has no ``.dp`` attribute yet
    (an engine frame before its first ``protect``) or in generic code.

    Parameters
    ----------
    frame : pandas, Polars or engine frame
        A protected frame, or one derived from it (its result tables: Polars for Polars
        frames, pandas otherwise).
    """
    backend_of(frame)  # a clear error for unsupported objects
    return DPNamespace(frame)

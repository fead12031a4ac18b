"""The ``.dp`` namespace shared by pandas and Polars: queries, verified derivations, budget and
log. A thin layer: every release goes through :func:`dpframe.release._pipeline.run`, every
derivation through :mod:`dpframe.provenance._derivations` and :mod:`dpframe.provenance._protect`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from dpframe._validation import (
    check_column,
    check_count,
    check_labels,
    check_names,
    check_number,
    check_pure_delta,
    check_quantile_mechanism,
)
from dpframe.accounting.ledger import Budget
from dpframe.accounting.seals import attach_release_log, release_log_of
from dpframe.backends import backend_of
from dpframe.errors import DerivationError, ParameterError, PrivateSizeError
from dpframe.frames import bins as bins_
from dpframe.frames import results
from dpframe.frames.results import Estimate
from dpframe.provenance import _derivations as derivations
from dpframe.provenance import _protect as provenance
from dpframe.provenance._protect import Missing, Session
from dpframe.query import statistics as q_
from dpframe.release import _pipeline as release
from dpframe.release._pipeline import Outcome, evaluate_derivation
from dpframe.rowwise.engines import apply_steps

__all__ = ["DPGroupBy", "DPNamespace", "dp"]


#: The mechanism names every release takes (docs/privacy.md).
Mechanism = Literal["bounded", "truncated", "laplace", "auto"]
#: The mechanism names a quantile takes: the exponential mechanism is the only one for them.
QuantileMechanismName = Literal["auto", "exponential"]


class DPNamespace:
    """``frame.dp``: differentially private queries on a protected frame and its verified
    derivations.

    Queries return a float (one statistic), or a frame of the caller's library (``release``,
    group-bys, ``cov``/``corr``, ``describe``, ``proportions``) whose log travels with it.
    Derivations (``filter``, ``with_columns``, ``select``, ``drop``, ``rename``) return a new
    frame of the same library that draws from the same budget.
    """

    def __init__(self, frame: Any) -> None:
        self._frame = frame

    # -- single statistics -> float ---------------------------------------------------------
    def _scalar(self, query: q_.Query, name: str, epsilon: float, delta: float, mechanism: str,
                random_state: Any, session: Session | str | None, ci: float | None
                ) -> float | Estimate:
        out = release.run(self._frame, {name: query}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci, document=False)
        value = float(out.values[name][0])
        if ci is None:
            return value
        lo, hi = out.intervals[name]
        return Estimate(value, float(np.atleast_1d(lo)[0]), float(np.atleast_1d(hi)[0]), ci)

    @overload
    def count(self, *, epsilon: float, delta: float = ...,
              mechanism: Mechanism = ..., random_state: Any = ...,
              session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def count(self, *, epsilon: float, delta: float = ...,
              mechanism: Mechanism = ..., random_state: Any = ...,
              session: Session | str | None = ..., ci: float) -> Estimate: ...

    def count(self, *, epsilon: float, delta: float = 0.0, mechanism: str = "auto",
              random_state: Any = None, session: Session | str | None = None,
              ci: float | None = None) -> float | Estimate:
        """Number of rows: on a frame whose size is public (the protected frame, or a
        derivation that keeps every row) the public n, exact and free whatever ``epsilon`` is
        asked (logged with size "public"); otherwise noisy (Δ = 1, domain [0, n]).

        Parameters
        ----------
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float

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
    def count_units(self, *, epsilon: float, delta: float = ...,
                    mechanism: Mechanism = ..., random_state: Any = ...,
                    session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def count_units(self, *, epsilon: float, delta: float = ...,
                    mechanism: Mechanism = ..., random_state: Any = ...,
                    session: Session | str | None = ..., ci: float) -> Estimate: ...

    def count_units(self, *, epsilon: float, delta: float = 0.0, mechanism: str = "auto",
                    random_state: Any = None, session: Session | str | None = None,
                    ci: float | None = None) -> float | Estimate:
        """Noisy number of distinct persons (privacy units), on a frame
        protected with ``privacy_unit=``: Δ = 1 however many rows a person owns (``count`` counts
        rows, Δ = k). On the protected frame the number of units is public: it is returned
        exactly, at no cost, whatever ``epsilon`` is asked.

        Parameters
        ----------
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float
        """
        from dpframe.provenance._units import count_units

        return self._scalar(count_units(), "count_units", epsilon, delta, mechanism,
                            random_state, session, ci)

    @overload
    def sum(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: Any = ...,
            session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def sum(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: Any = ...,
            session: Session | str | None = ..., ci: float) -> Estimate: ...

    def sum(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", random_state: Any = None,
            session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy sum of a bounded column (values clamped to its bounds).

        Parameters
        ----------
        column : str
            A column with declared bounds.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float
        """
        return self._scalar(q_.sum(column), "sum", epsilon, delta, mechanism, random_state,
                            session, ci)

    @overload
    def mean(self, column: str, *, epsilon: float, delta: float = ...,
             mechanism: Mechanism = ..., random_state: Any = ...,
             session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def mean(self, column: str, *, epsilon: float, delta: float = ...,
             mechanism: Mechanism = ..., random_state: Any = ...,
             session: Session | str | None = ..., ci: float) -> Estimate: ...

    def mean(self, column: str, *, epsilon: float, delta: float = 0.0,
             mechanism: str = "auto", random_state: Any = None,
             session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy mean of a bounded column, inside its bounds.

        Parameters
        ----------
        column : str
            A column with declared bounds.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float

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
                 mechanism: Mechanism = ..., random_state: Any = ...,
                 session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def variance(self, column: str, *, epsilon: float, delta: float = ...,
                 mechanism: Mechanism = ..., random_state: Any = ...,
                 session: Session | str | None = ..., ci: float) -> Estimate: ...

    def variance(self, column: str, *, epsilon: float, delta: float = 0.0,
                 mechanism: str = "auto", random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None
                 ) -> float | Estimate:
        """Noisy sample variance (ddof=1) of a bounded column.

        Parameters
        ----------
        column : str
            A column with declared bounds.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float
        """
        return self._scalar(q_.variance(column), "variance", epsilon, delta, mechanism,
                            random_state, session, ci)

    var = variance

    def quantile(self, column: str, q: float | Sequence[float] = 0.5, *, epsilon: float,
                 delta: float = 0.0, mechanism: QuantileMechanismName = "auto",
                 bins: int | None = None, random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None) -> Any:
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

        Parameters
        ----------
        column : str
            A column with declared bounds.
        q : float or list of float, default 0.5
            Level(s) in [0, 1].
        epsilon : float
            The privacy budget this release spends (> 0), for all levels together.
        delta : float, default 0.0
            Quantiles are pure ε-DP: only 0 is accepted.
        mechanism : {"auto", "exponential"}, default "auto"
            The exponential mechanism is the only one for quantiles (both names select it); the
            Laplace names ("bounded", "truncated", "laplace") are refused with a ParameterError.
        bins : int, optional
            Number of equal public bins of the bounds (the resolution: (upper − lower)/bins).
        random_state, session
            As for :meth:`mean`.
        ci : float, optional
            A confidence level: also release the *rank* interval (post-processing, no ε): with
            probability ≥ ``ci`` the released bin holds rows within ``rank_error`` ranks of the
            target rank ``q·n`` (docs/privacy.md, section Q.6). Not an interval in values (that
            would need the data's density).

        Returns
        -------
        float for one level (a ``dpf.QuantileEstimate`` with ``ci``: value, rank_error, and the
        levels q_lower/q_upper where n is public); for a list, a frame with columns ``q`` and
        ``quantile`` (and ``rank_error`` with ``ci``), one row per level, whose log travels with it.

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 40, 50] * 50}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> 0 <= pf.dp.median("age", epsilon=0.5) <= 120
        True
        """
        check_quantile_mechanism(mechanism)
        check_pure_delta(delta, "quantiles")
        query = q_.quantile(column, q, bins=bins)
        out = release.run(self._frame, {"quantile": query}, epsilon=epsilon,
                          mechanism="auto", random_state=random_state, session=session, ci=ci)
        if query.scalar:
            value = float(out.values["quantile"][0])
            if ci is None:
                return value
            return _quantile_estimate(out.values, "quantile", value, float(ci))
        assert query.labels is not None
        values = [float(out.values[f"quantile[{label}]"][0]) for label in query.labels]
        data: dict[str, Any] = {"q": list(query.levels), "quantile": values}
        if ci is not None:
            data["rank_error"] = [float(out.values["quantile_rank_error"][0])] * len(values)
        return _table(out, out.backend.table(data))

    def median(self, column: str, *, epsilon: float, delta: float = 0.0,
               mechanism: QuantileMechanismName = "auto", bins: int | None = None,
               random_state: Any = None, session: Session | str | None = None,
               ci: float | None = None) -> Any:
        """Noisy median of a bounded column: :meth:`quantile` at 0.5 (a float, or a
        ``dpf.QuantileEstimate`` with ``ci``)."""
        out = self.quantile(column, 0.5, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            bins=bins, random_state=random_state, session=session, ci=ci)
        return out if ci is not None else float(out)

    @overload
    def std(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: Any = ...,
            session: Session | str | None = ..., ci: None = None) -> float: ...

    @overload
    def std(self, column: str, *, epsilon: float, delta: float = ...,
            mechanism: Mechanism = ..., random_state: Any = ...,
            session: Session | str | None = ..., ci: float) -> Estimate: ...

    def std(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", random_state: Any = None,
            session: Session | str | None = None, ci: float | None = None) -> float | Estimate:
        """Noisy sample standard deviation (ddof=1): √ of the noisy variance.

        Parameters
        ----------
        column : str
            A column with declared bounds.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.

        Returns
        -------
        float
        """
        return self._scalar(q_.std(column), "std", epsilon, delta, mechanism, random_state,
                            session, ci)

    # -- batch and analyses -----------------------------------------------------------------
    def release(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                weights: Mapping[str, float] | Sequence[float] | None = None,
                mechanism: str = "auto", random_state: Any = None,
                session: Session | str | None = None, ci: float | None = None) -> Any:
        """Several statistics in one release (one pass over the data).

        Parameters
        ----------
        queries : dict of str to query
            Names to queries built with ``dpf.count()``, ``dpf.mean(col)``, ...
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        weights : dict or list of float, optional
            Relative shares of ε (and δ); even by default.

        Returns
        -------
        A one-row frame of the caller's library; its log travels with it (pandas ``to_parquet``,
        Polars ``table.dp.write_parquet``).
        """
        out = release.run(self._frame, queries, epsilon=epsilon, delta=delta, weights=weights,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci)
        return _table(out, results.to_frame(out))

    def proportions(self, column: str, *, epsilon: float, keys: Sequence[Any] | None = None,
                    method: str = "rescale", remainder: Any = None, delta: float = 0.0,
                    mechanism: str = "auto", random_state: Any = None,
                    session: Session | str | None = None, ci: float | None = None) -> Any:
        """Proportions of a categorical column's public keys (Liu §4.2):
        each in [0, 1], summing to 1.

        Parameters
        ----------
        column : str
            The categorical column.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        keys : list, optional
            Public keys (default: those declared at protect time).
        method : {"rescale", "all_but_one"}
            Normalise the noisy proportions, or release all but one and set it to 1 − Σ others
            (needs the public size).
        remainder : optional
            The key computed as the remainder (``all_but_one``; default the last).
        """
        pos = -1
        check_column(column)
        if isinstance(method, str) and method == "all_but_one" and remainder is not None:
            facts = provenance.resolve(self._frame, session)
            declared = check_names("keys", keys, what="keys") if keys is not None \
                else facts.keys.get(column)
            if declared is None or remainder not in declared:
                raise ParameterError(
                    f"remainder={remainder!r} is not one of the keys {declared!r}")
            pos = declared.index(remainder)
        query = q_.Proportions(method, pos)
        return self.groupby(column, keys=keys).release(
            {"proportion": query}, epsilon=epsilon, delta=delta, mechanism=mechanism,
            random_state=random_state, session=session, ci=ci)

    def cov(self, columns: Sequence[str], *, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", random_state: Any = None,
            session: Session | str | None = None, ci: float | None = None) -> Any:
        """Covariance matrix (ddof=1) of bounded columns, positive semi-definite
        (Liu §4.1). Needs the public size.

        Parameters
        ----------
        columns : list of str
            Two or more bounded columns.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        """
        return self._matrix("cov", columns, epsilon, delta, mechanism, random_state, session,
                            ci)

    def corr(self, columns: Sequence[str], *, epsilon: float, delta: float = 0.0,
             mechanism: str = "auto", random_state: Any = None,
             session: Session | str | None = None, ci: float | None = None) -> Any:
        """Correlation matrix in [−1, 1] from the released covariance (Liu
        §4.1).

        Parameters
        ----------
        columns : list of str
            Two or more bounded columns.
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        """
        return self._matrix("corr", columns, epsilon, delta, mechanism, random_state, session,
                            ci)

    def _matrix(self, kind: str, columns: Sequence[str], epsilon: float, delta: float,
                mechanism: str, random_state: Any, session: Session | str | None,
                ci: float | None) -> Any:
        query = q_.Covariance(columns, kind)
        check_labels(kind, query.columns, ("column", "statistic"))
        out = release.run(self._frame, {kind: query}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci)
        return _table(out, results.matrix_frame(out.values[kind], query.columns, out.backend,
                                                out.intervals.get(kind)))

    def describe(self, *, epsilon: float, columns: Sequence[str] | None = None,
                 delta: float = 0.0, mechanism: str = "auto", random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None) -> Any:
        """count, mean, std and declared bounds of bounded columns, in one
        release (ε split evenly over the 2 statistics per column and, where the size is
        private, the count; the count of a public size is exact and free).

        Parameters
        ----------
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        columns : list of str, optional
            Bounded columns to describe (default: all of them).
        """
        facts = provenance.resolve(self._frame, session)
        cols = list(facts.bounds) if columns is None else check_names("columns", columns)
        if not cols:
            raise ParameterError("describe needs at least one column with declared bounds")
        check_labels("describe", cols, ("statistic",))
        queries: dict[str, q_.Query] = {"count": q_.count()}
        for col in cols:
            queries[f"mean[{col}]"] = q_.mean(col)
            queries[f"std[{col}]"] = q_.std(col)
        out = release.run(self._frame, queries, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci)
        return _table(out, results.describe_frame(out, cols, facts.bounds))

    def histogram(self, column: str, *, edges: Sequence[float] | None = None,
                  bins: int | Sequence[float] | None = None, epsilon: float,
                  delta: float = 0.0, mechanism: str = "auto", total: int | None = None,
                  random_state: Any = None, session: Session | str | None = None,
                  ci: float | None = None) -> Any:
        """Noisy counts of a numeric column over public bins.

        One group-by count over the bins (a verified row-wise bin index, then parallel
        composition: a replaced row moves between two bins, so each bin gets ε/2). Bin ``j`` is
        ``[e_j, e_{j+1})``, the last one closed; values below the first edge go to the first bin,
        values above the last edge (``+inf`` too) to the last one; missing values (null, NaN)
        follow the column's missing-value rule (dropped: in no bin). The bin index is a binary
        search over the edges in every engine, so thousands of edges cost O(log k) per row.
        Counts are non-negative integers (post-processing).

        Parameters
        ----------
        column : str
            A numeric column.
        edges : list of float
            Public, strictly increasing, finite bin edges (at least two).
        bins : int
            Instead of ``edges``: that many equal-width bins over the column's declared bounds
            ``[l, u]``, with edges ``e_j = l + (u − l)·j/bins`` computed exactly and rounded once
            to the nearest double (``e_0 = l``, ``e_bins = u``; refused if two edges would round
            to the same double). A list here is the former spelling of ``edges`` (deprecated:
            ``DeprecationWarning``).
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        total : int, optional
            A public (or already released) total: counts are apportioned to add up to it
            (largest remainders; each stays within 1 of its noisy value's share).

        Returns
        -------
        A frame with ``bin_lower``, ``bin_upper`` and ``count`` (and interval columns with ``ci``).
        """
        facts = provenance.resolve(self._frame, session)
        public = bins_.histogram_edges(check_column(column), edges, bins, facts.bounds)
        return self._counts(column, public, None, epsilon, delta, mechanism,
                            total, random_state, session, ci)

    def value_counts(self, column: str, *, keys: Sequence[Any] | None = None,
                     epsilon: float, delta: float = 0.0, mechanism: str = "auto",
                     total: int | None = None, random_state: Any = None,
                     session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy counts of a categorical column's public keys.

        A group-by count over the declared keys (every key appears, even with no rows; keys not
        declared never appear), ε/2 per key; non-negative integer counts.

        Parameters
        ----------
        column : str
            The categorical column.
        keys : list, optional
            Public keys (default: those declared at protect time).
        epsilon : float
            The privacy budget this release spends (> 0).
        delta : float, default 0.0
            Its δ (only the bounded mechanism uses one; "auto" weighs it in its choice).
        mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
            How noise stays in the output domain: "auto" takes, per measurement, the one with
            the smaller worst-case error from public facts (the log's ``mechanism`` and
            ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
            domain (Holohan), "truncated" clamps, "laplace" does neither.
        random_state : None, int or numpy.random.Generator, default None
            None draws from the operating system's secure source; a seed is for tests and
            simulations only and is recorded in the log.
        session : dpf.Session or str, optional
            Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
        ci : float, optional
            A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
            mechanism's output and conservative for composed statistics (post-processing: no
            extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
            (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
        total : int, optional
            A public (or already released) total the counts are apportioned to.

        Returns
        -------
        A frame with the key column and ``count``.
        """
        return self._counts(column, None, keys, epsilon, delta, mechanism, total,
                            random_state, session, ci)

    def _counts(self, column: str, edges: list[float] | None, keys: Sequence[Any] | None,
                epsilon: float, delta: float, mechanism: str, total: int | None,
                random_state: Any, session: Session | str | None, ci: float | None) -> Any:
        check_column(column)
        if total is not None:
            check_count("total", total)
        frame, group, group_keys = self._frame, column, keys
        if edges is not None:
            frame = self._binned(column, edges, session)
            group, group_keys = bins_.BIN, list(range(len(edges) - 1))
        # the log names the statistic as asked ("histogram(age)"); the table's column is count
        label = f"{'histogram' if edges is not None else 'value_counts'}({column})"
        out = release.run(frame, {label: q_.count()}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, group_by=group,
                          keys=group_keys, session=session, ci=ci)
        out.values["count"] = out.values.pop(label)
        if label in out.intervals:
            out.intervals["count"] = out.intervals.pop(label)
        if total is not None:
            from dpframe.mechanisms.histograms import apportion

            out.values["count"] = apportion(out.values["count"], total).astype(float)
        table = results.to_frame(out)
        if edges is not None:
            lower, upper = edges[:-1], edges[1:]
            data = {"bin_lower": lower, "bin_upper": upper,
                    **{c: list(table[c]) for c in table.columns if c != bins_.BIN}}
            table = out.backend.table(data)
        return _table(out, table)

    def _binned(self, column: str, edges: list[float], session: Session | str | None) -> Any:
        """This frame with the hidden bin column (:func:`dpframe.frames.bins.bin_step`)."""
        facts = provenance.resolve(self._frame, session)

        def build() -> Any:
            backend = facts.dataset.backend
            schema = backend.polars_schema(facts.data)
            steps = [bins_.bin_step(column, edges, facts, schema)]
            backend.rowwise.check(steps)
            return self._built(facts, facts.after(steps), steps, schema)

        return bins_.binned_frame(facts, column, edges, build)  # made once per frame and edges

    # -- accuracy before spending -----------------------------------------------------------
    def accuracy(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                 weights: Mapping[str, float] | Sequence[float] | None = None,
                 mechanism: str = "auto", alpha: float = 0.05,
                 min_rows: int | None = None, session: Session | str | None = None) -> Any:
        """How accurate a release with these arguments will be, before spending anything.

        Parameters
        ----------
        queries, epsilon, delta, weights, mechanism, session
            As for :meth:`release`.
        alpha : float, default 0.05
            Each half-width holds with probability at least ``1 − alpha``, whatever the data.
        min_rows : int, optional
            A public lower bound on the rows behind a private-size mean.

        Returns
        -------
        A frame: ``name, query, epsilon, half_width, alpha, mechanisms, note`` (and a key
        selection's ``threshold, min_group_half, min_group_1_alpha``:
        :meth:`DPGroupBy.accuracy`). Reads no data, spends and logs nothing.

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 40, 50] * 100}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> plan = pf.dp.accuracy({"m": dpf.mean("age")}, epsilon=0.5)
        >>> bool(plan["half_width"].iloc[0] < 5) and pf.dp.budget.epsilon_spent == 0
        True
        """
        from dpframe.release import _accuracy_planner as planner

        rows = planner.accuracy(self._frame, queries, epsilon=epsilon, delta=delta,
                                weights=weights, mechanism=mechanism, alpha=alpha,
                                min_rows=min_rows, session=session)
        return _accuracy_table(self._frame, rows)

    def epsilon_for(self, query: q_.Query, half_width: float, *, alpha: float = 0.05,
                    delta: float = 0.0, mechanism: str = "bounded",
                    session: Session | str | None = None) -> float:
        """The smallest ε at which ``query`` will be within ``half_width`` of the truth with
        probability ``1 − alpha`` (the inverse of :meth:`accuracy`; one-measurement answers:
        counts, public-size sums, means and variances). Reads no data, spends nothing.
        The inverse is of one named mechanism (default "bounded"; "auto", the releases'
        default, picks one per ε and has no inverse): check the release's mechanism with
        :meth:`accuracy` at the ε found."""
        from dpframe.release import _accuracy_planner as planner

        return planner.epsilon_for(self._frame, query, half_width, alpha=alpha, delta=delta,
                                   mechanism=mechanism, session=session)

    def split(self, targets: Mapping[str, tuple[q_.Query, float]], *, epsilon: float,
              alpha: float = 0.05, mechanism: str = "bounded",
              session: Session | str | None = None) -> Any:
        """Split ``epsilon`` over queries with target half-widths ``{name: (query, target)}``
        so the worst achieved/target ratio is smallest. Returns a frame ``name, epsilon,
        half_width, target``; pass ``dict(zip(t["name"], t["epsilon"]))`` as ``weights=`` of
        one :meth:`release` (with the same named ``mechanism``: the split is for it). Reads no
        data, spends nothing."""
        from dpframe.release import _accuracy_planner as planner

        result = planner.split(self._frame, targets, epsilon=epsilon, alpha=alpha,
                               mechanism=mechanism, session=session)
        return backend_of(self._frame).table({
            "name": list(result),
            "epsilon": [e for e, _ in result.values()],
            "half_width": [h for _, h in result.values()],
            "target": [float(targets[n][1]) for n in result],
        })

    def groupby(self, column: str | Sequence[str], *, keys: Sequence[Any] | None = None,
                selection_share: float = 0.5) -> DPGroupBy:
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
        return DPGroupBy(self, column, keys, selection_share)

    group_by = groupby

    # -- verified derivations ---------------------------------------------------------------
    def filter(self, *predicates: Any) -> Any:
        """Keep the rows where every predicate holds (row-wise predicates only).

        Parameters
        ----------
        *predicates
            narwhals expressions (``nw.col("age") >= 65``, any backend) or, on Polars frames,
            Polars expressions. Verified from their structure before any data is read;
            aggregates, windows, shifts, ranks and the like are refused.

        Returns
        -------
        A frame of the same library with a *private* size, drawing from the same budget.

        Examples
        --------
        >>> import narwhals as nw, pandas as pd, dpframe as dpf
        >>> pf = dpf.protect(pd.DataFrame({"age": [30, 70]}), epsilon=1,
        ...                  bounds={"age": (0, 120)})
        >>> older = pf.dp.filter(nw.col("age") >= 65)
        >>> older.dp.is_size_public
        False
        """
        return self._derive("filter", predicates, None, None)

    def with_columns(self, *exprs: Any,
                     bounds: Mapping[str, tuple[float, float]] | None = None,
                     missing: Missing | Mapping[str, Missing] | None = None) -> Any:
        """Add or replace columns computed row-wise.

        Parameters
        ----------
        *exprs
            Named (``.alias``) narwhals expressions, or Polars expressions on Polars frames.
        bounds : dict, optional
            Public bounds of new or replaced columns that will be aggregated. A replaced
            column loses its old bounds; a column copied or cast keeps them.
        missing : "drop", number or dict, optional
            Missing-value policy of the newly bounded columns (default ``"drop"``).

        Returns
        -------
        A frame of the same library; its size stays public if this frame's was.
        """
        return self._derive("with_columns", exprs, bounds, missing)

    def select(self, *columns: str) -> Any:
        """Keep only these columns (by name)."""
        return self._rows_kept("select", _names(columns), None)

    def drop(self, *columns: str) -> Any:
        """Drop these columns (by name)."""
        return self._rows_kept("drop", _names(columns), None)

    def rename(self, mapping: Mapping[str, str]) -> Any:
        """Rename columns; bounds, missing-value policies and keys follow the names."""
        if not isinstance(mapping, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
            raise ParameterError("rename takes a dict old name -> new name (strings)")
        return self._rows_kept("rename", list(mapping), dict(mapping))

    def _rows_kept(self, verb: str, names: list[str], mapping: dict[str, str] | None) -> Any:
        facts = provenance.resolve(self._frame)
        source = facts.data
        schema = facts.dataset.backend.polars_schema(source)
        unknown = [c for c in names if c not in schema]
        if unknown:
            raise ParameterError(f"dp.{verb}: unknown columns {unknown}; available: "
                                 f"{list(schema)}")
        if verb == "select":
            outputs = {c: c for c in names}
        elif verb == "drop":
            outputs = {c: c for c in schema if c not in names}
        else:
            assert mapping is not None
            outputs = {mapping.get(c, c): c for c in schema}
            if len(outputs) != len(schema):
                raise ParameterError(f"dp.rename: the new names collide: {mapping}")
        if not outputs:
            raise DerivationError(f"dp.{verb}: {derivations.NO_COLUMNS}")
        steps = [derivations.Step.copying(outputs, schema)]
        return self._built(facts, facts.after(steps), steps, schema)

    def _derive(self, verb: str, exprs: Sequence[Any],
                bounds: Mapping[str, tuple[float, float]] | None,
                missing: Missing | Mapping[str, Missing] | None) -> Any:
        facts = provenance.resolve(self._frame)
        backend = facts.dataset.backend
        if not backend.polars_expressions and exprs and all(_is_polars_expr(e) for e in exprs):
            raise DerivationError("Polars expressions apply to Polars frames; use narwhals "
                                  "expressions (import narwhals as nw) for this frame")
        schema = backend.polars_schema(facts.data)
        steps, _derived_schema = derivations.verify_expressions(schema, exprs, verb)
        backend.rowwise.check(steps)
        new = facts.after(steps)
        if bounds is not None or missing is not None:
            new = _declare(new, steps, bounds or {}, missing)
        return self._built(facts, new, steps, schema)

    def _built(self, facts: provenance.FrameFacts, new: provenance.FrameFacts,
               steps: Sequence[derivations.Step], schema: Mapping[str, Any]) -> Any:
        """The derived frame: dpframe's compilation of the verified ``steps`` applied to the
        private data of this frame (eager frames are computed here, lazy ones are plans)."""
        backend = facts.dataset.backend
        if backend.lazy:
            native = apply_steps(facts.data, steps, backend.rowwise, schema)
        else:
            native = evaluate_derivation(facts, steps, schema)
        return provenance.derive(new, native)

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
    def log(self) -> Any:
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
        """True when the frame has exactly the protected frame's rows (no filter) and no
        privacy unit (which makes the row count private)."""
        facts = provenance.resolve(self._frame)
        return facts.size_public and facts.unit is None

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write a release table to Parquet with its log in the key-value metadata."""
        from dpframe.accounting import _parquet as io

        doc = release_log_of(self._frame)
        if doc is None:
            raise ParameterError(
                "only release tables (what .dp.release / groupby / describe / cov return) are "
                "written with a log; this frame is not one"
            )
        io.write_parquet(self._frame, path, doc)


def dp(frame: Any) -> DPNamespace:
    """The ``.dp`` namespace of any supported frame: ``dpf.dp(frame).mean("x", epsilon=1)``
    is ``frame.dp.mean("x", epsilon=1)``. Useful where a library has no ``.dp`` attribute yet
    (an engine frame before its first ``protect``) or in generic code."""
    backend_of(frame)  # a clear error for unsupported objects
    return DPNamespace(frame)


class DPGroupBy:
    """``frame.dp.groupby(col, keys=[...])``: one row per declared key (empty groups too);
    undeclared keys never appear. One group-by costs ε once (parallel composition)."""

    def __init__(self, ns: DPNamespace, column: str | Sequence[str],
                 keys: Sequence[Any] | None, selection_share: float = 0.5) -> None:
        self._ns = ns
        self._column: str | tuple[str, ...] = column if isinstance(column, str) else tuple(
            column)
        self._keys = keys
        self._selection_share = selection_share

    def _declared(self) -> Sequence[Any] | None:
        """The ``keys=`` of one column as a checked :class:`~dpframe.query._keys.Keys`, made at
        the first release and reused by the next ones (so 100,000 keys are checked, hashed
        for the log and indexed once, not per release)."""
        if self._keys is not None and isinstance(self._column, str):
            self._keys = release.declared_keys(self._column, self._keys)
        return self._keys

    def release(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                weights: Mapping[str, float] | Sequence[float] | None = None,
                mechanism: str = "auto", random_state: Any = None,
                session: Session | str | None = None, ci: float | None = None) -> Any:
        """Several statistics per group in one release; see :meth:`DPNamespace.release`."""
        out = release.run(self._ns._frame, queries, epsilon=epsilon, delta=delta,
                          weights=weights, mechanism=mechanism, random_state=random_state,
                          group_by=self._column, keys=self._declared(), session=session,
                          ci=ci, selection_share=self._selection_share)
        return _table(out, results.to_frame(out))

    def accuracy(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                 weights: Mapping[str, float] | Sequence[float] | None = None,
                 mechanism: str = "auto", alpha: float = 0.05,
                 min_rows: int | None = None, session: Session | str | None = None) -> Any:
        """Per-group accuracy before spending; see :meth:`DPNamespace.accuracy` (``min_rows``:
        a public lower bound on every group's rows, for means). Without declared keys (keys
        selected from the data) the table starts with a ``keys`` row for the selection and
        has three more columns: ``threshold`` (a group is kept iff its noisy count exceeds
        it), ``min_group_half`` and ``min_group_1_alpha`` (the smallest group kept with
        probability ½ and ``1 − alpha``); the queries' rows hold for each kept group."""
        from dpframe.release import _accuracy_planner as planner

        rows = planner.accuracy(self._ns._frame, queries, epsilon=epsilon, delta=delta,
                                weights=weights, mechanism=mechanism, alpha=alpha,
                                group_by=self._column, keys=self._declared(),
                                min_rows=min_rows, session=session,
                                selection_share=self._selection_share)
        return _accuracy_table(self._ns._frame, rows)

    def _one(self, query: q_.Query, name: str, epsilon: float, delta: float, mechanism: str,
             random_state: Any, session: Session | str | None, ci: float | None) -> Any:
        return self.release({name: query}, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            random_state=random_state, session=session, ci=ci)

    def count(self, *, epsilon: float, delta: float = 0.0, mechanism: str = "auto",
              random_state: Any = None, session: Session | str | None = None,
              ci: float | None = None) -> Any:
        """Noisy row count per group."""
        return self._one(q_.count(), "count", epsilon, delta, mechanism, random_state, session,
                         ci)

    def count_units(self, *, epsilon: float, delta: float = 0.0, mechanism: str = "auto",
                    random_state: Any = None, session: Session | str | None = None,
                    ci: float | None = None) -> Any:
        """Noisy number of distinct persons (privacy units) per group (Δ = 1; a person counts
        in at most ``min(g, k)`` groups)."""
        from dpframe.provenance._units import count_units

        return self._one(count_units(), "count_units", epsilon, delta, mechanism,
                         random_state, session, ci)

    def sum(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", random_state: Any = None,
            session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy sum per group."""
        return self._one(q_.sum(column), "sum", epsilon, delta, mechanism, random_state,
                         session, ci)

    def mean(self, column: str, *, epsilon: float, delta: float = 0.0,
             mechanism: str = "auto", random_state: Any = None,
             session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy mean per group."""
        return self._one(q_.mean(column), "mean", epsilon, delta, mechanism, random_state,
                         session, ci)

    def variance(self, column: str, *, epsilon: float, delta: float = 0.0,
                 mechanism: str = "auto", random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy sample variance per group."""
        return self._one(q_.variance(column), "variance", epsilon, delta, mechanism,
                         random_state, session, ci)

    var = variance

    def std(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: str = "auto", random_state: Any = None,
            session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy sample standard deviation per group."""
        return self._one(q_.std(column), "std", epsilon, delta, mechanism, random_state,
                         session, ci)

    def quantile(self, column: str, q: float | Sequence[float] = 0.5, *, epsilon: float,
                 bins: int | None = None, delta: float = 0.0,
                 mechanism: QuantileMechanismName = "auto", random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy quantile(s) per group (see :meth:`DPNamespace.quantile`; each group's ranks
        are its own): a column ``quantile``, or ``quantile[<q>]`` per level for a list.
        ``delta`` is used only to select keys from the data (none declared); ``mechanism``:
        "auto" or "exponential" (the only one for quantiles); ``ci``: a column
        ``quantile_rank_error`` (the rank interval's half-width: group sizes are private, so
        no levels)."""
        check_quantile_mechanism(mechanism)
        self._check_quantile_delta(delta, session)
        return self._one(q_.quantile(column, q, bins=bins), "quantile", epsilon, delta,
                         "auto", random_state, session, ci)

    def _check_quantile_delta(self, delta: float, session: Session | str | None) -> None:
        """Quantiles are pure ε-DP: a δ > 0 is accepted only to select the keys from the data
        (none declared for a group column), never charged for nothing (public facts only)."""
        from dpframe.provenance._protect import resolve

        if check_number("delta", delta) == 0:
            return
        columns = (self._column,) if isinstance(self._column, str) else self._column
        known = resolve(self._ns._frame, session).keys
        if self._keys is not None or all(c in known for c in columns):
            check_pure_delta(delta, "quantiles with declared keys")

    def median(self, column: str, *, epsilon: float, bins: int | None = None,
               delta: float = 0.0, mechanism: QuantileMechanismName = "auto",
               random_state: Any = None, session: Session | str | None = None,
               ci: float | None = None) -> Any:
        """Noisy median per group: a column ``median`` (with ``ci``, ``median_rank_error``)."""
        check_quantile_mechanism(mechanism)
        self._check_quantile_delta(delta, session)
        return self._one(q_.median(column, bins=bins), "median", epsilon, delta, "auto",
                         random_state, session, ci)

    # -- per-group counts over a second column: histogram, value_counts ----------------------
    def histogram(self, column: str, *, edges: Sequence[float] | None = None,
                  bins: int | None = None, epsilon: float, delta: float = 0.0,
                  mechanism: str = "auto", random_state: Any = None,
                  session: Session | str | None = None, ci: float | None = None) -> Any:
        """Noisy counts of a numeric column over public bins, per group: one row per group and
        bin (columns: the group column(s), ``bin_lower``, ``bin_upper``, ``count``; with
        ``ci``, ``count_lower``/``count_upper``). Bins as :meth:`DPNamespace.histogram`
        (``edges=[...]`` or ``bins=<int>`` equal bins of the declared bounds; missing values
        follow the column's rule).

        One group-by count over (group, bin): a replaced row changes at most two cells, so
        each cell gets ε/2 and the whole table costs ε once. Keys: with the group keys declared
        (or given to ``groupby``), every group × bin appears, empty ones too; with none
        declared and ``delta > 0``, the (group, bin) pairs are selected from the data
        privately (docs/privacy.md, section K: rare pairs are left out), else refused before
        anything is read."""
        column = check_column(column)
        facts = provenance.resolve(self._ns._frame, session)
        public = bins_.histogram_edges(column, edges, bins, facts.bounds)
        cells = list(range(len(public) - 1))
        frame = self._ns._binned(column, public, session)
        out = self._cells(frame, bins_.BIN, cells, epsilon, delta, mechanism, random_state,
                          session, ci, select=True)
        table = _bin_edges_columns(results.to_frame(out), public,
                                   len(_group_names(self._column)))
        return _table(out, table)

    def value_counts(self, column: str, *, keys: Sequence[Any] | None = None,
                     epsilon: float, delta: float = 0.0, mechanism: str = "auto",
                     random_state: Any = None, session: Session | str | None = None,
                     ci: float | None = None) -> Any:
        """Noisy counts of a categorical column's keys, per group: one row per group and key
        (columns: the group column(s), ``column``, ``count``; with ``ci``,
        ``count_lower``/``count_upper``). One group-by count over (group, key): ε/2 per cell,
        ε once for the table.

        Keys: ``keys=`` (or those declared at protect) for ``column``, and the group keys
        given to ``groupby`` (or declared): every combination appears, empty ones too. With
        neither column's keys declared anywhere and ``delta > 0``, the (group, key) pairs are
        selected from the data privately (docs/privacy.md, section K). Declaring one side
        and selecting the other is refused (a selection keeps whole pairs), as is a release
        without δ when some keys are undeclared."""
        if not isinstance(column, str) or column in _group_names(self._column):
            raise ParameterError(f"value_counts needs a column name other than the group "
                                 f"column(s) {list(_group_names(self._column))}, got "
                                 f"{column!r}")
        facts = provenance.resolve(self._ns._frame, session)
        declared = keys if keys is not None else facts.keys.get(column)
        if declared is not None:
            declared = provenance.check_key_list(column, declared)
        out = self._cells(self._ns._frame, column, declared, epsilon, delta, mechanism,
                          random_state, session, ci, select=False)
        return _table(out, results.to_frame(out))

    def proportions(self, column: str, *, epsilon: float, keys: Sequence[Any] | None = None,
                    delta: float = 0.0, mechanism: str = "auto", random_state: Any = None,
                    session: Session | str | None = None, ci: float | None = None) -> Any:
        """Proportions of a categorical column's public keys (``keys``, else those declared at
        protect) within each group, summing to 1 per group: one row per group, a column
        ``proportion[<key>]`` per key (with ``ci``, ``_lower``/``_upper``). The noisy
        per-(group, key) counts of :meth:`value_counts`, rescaled (``method="rescale"``; the
        frame's ``"all_but_one"`` needs the public size, which a group's is not)."""
        return self._one(q_.proportions(column, keys=keys), "proportion", epsilon, delta,
                         mechanism, random_state, session, ci)

    def describe(self, *, epsilon: float, columns: Sequence[str] | None = None,
                 delta: float = 0.0, mechanism: str = "auto", random_state: Any = None,
                 session: Session | str | None = None, ci: float | None = None) -> Any:
        """count, mean and std of bounded columns per group, in one release (ε split evenly
        over count and the 2 statistics per column, as :meth:`DPNamespace.describe`): one row
        per group, columns ``count``, ``mean[<col>]``, ``std[<col>]`` (and their
        ``_lower``/``_upper`` with ``ci``)."""
        facts = provenance.resolve(self._ns._frame, session)
        cols = list(facts.bounds) if columns is None else check_names("columns", columns)
        if not cols:
            raise ParameterError("describe needs at least one column with declared bounds")
        queries: dict[str, q_.Query] = {"count": q_.count()}
        for col in cols:
            queries[f"mean[{col}]"] = q_.mean(col)
            queries[f"std[{col}]"] = q_.std(col)
        return self.release(queries, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            random_state=random_state, session=session, ci=ci)

    def epsilon_for(self, query: q_.Query, half_width: float, *, alpha: float = 0.05,
                    delta: float = 0.0, mechanism: str = "bounded",
                    session: Session | str | None = None) -> float:
        """The smallest ε at which ``query`` will be within ``half_width`` of the truth in
        every group, with probability ``1 − alpha`` each (see
        :meth:`DPNamespace.epsilon_for`; each group gets half of it). Reads no data."""
        from dpframe.release import _accuracy_planner as planner

        return planner.epsilon_for(self._ns._frame, query, half_width, alpha=alpha,
                                   delta=delta, mechanism=mechanism, group_by=self._column,
                                   keys=self._declared(), session=session)

    def split(self, targets: Mapping[str, tuple[q_.Query, float]], *, epsilon: float,
              alpha: float = 0.05, mechanism: str = "bounded",
              session: Session | str | None = None) -> Any:
        """Split ``epsilon`` over per-group queries with target half-widths (see
        :meth:`DPNamespace.split`): a frame ``name, epsilon, half_width, target``. Reads no
        data, spends nothing."""
        from dpframe.release import _accuracy_planner as planner

        result = planner.split(self._ns._frame, targets, epsilon=epsilon, alpha=alpha,
                               mechanism=mechanism, group_by=self._column,
                               keys=self._declared(), session=session)
        return backend_of(self._ns._frame).table({
            "name": list(result),
            "epsilon": [e for e, _ in result.values()],
            "half_width": [h for _, h in result.values()],
            "target": [float(targets[n][1]) for n in result],
        })

    def _cells(self, frame: Any, column: str, cells: Sequence[Any] | None, epsilon: float,
               delta: float, mechanism: str, random_state: Any,
               session: Session | str | None, ci: float | None, select: bool
               ) -> Outcome:
        """One count per (group, cell of ``column``) of ``frame``: a group-by count over the
        group column(s) and ``column``. Group keys and ``cells`` both public: their product;
        the group keys undeclared and ``cells`` None (or ``select``: bins, dpframe's own
        values): the pairs are selected from the data (δ > 0); else refused (public facts)."""
        groups = _group_names(self._column)
        known = provenance.resolve(frame, session).keys
        group_keys: list[tuple[Any, ...]] | None = None
        if self._keys is not None:
            group_keys = [tuple(g) if len(groups) > 1 else (g,) for g in self._keys]
        elif all(c in known for c in groups):
            group_keys = list(itertools.product(*(known[c] for c in groups)))
        combos: list[tuple[Any, ...]] | None = None
        if group_keys is not None and cells is not None:
            combos = [(*g, c) for g in group_keys for c in cells]
        elif group_keys is not None or not (cells is None or select):
            side = repr(column) if cells is None else ", ".join(map(repr, groups))
            raise ParameterError(
                f"the keys of {side} are not declared while the other column's are: keys are "
                "selected from the data as whole (group, value) pairs, so declare both "
                "(groupby(..., keys=[...]), keys=[...] or keys= at protect) or, with "
                "delta > 0, neither")
        return release.run(frame, {"count": q_.count()}, epsilon=epsilon, delta=delta,
                           mechanism=mechanism, random_state=random_state,
                           group_by=(*groups, column), keys=combos, session=session, ci=ci,
                           selection_share=self._selection_share)


def _bin_edges_columns(table: Any, edges: Sequence[float], at: int) -> Any:
    """A per-group histogram's table with the hidden bin index replaced by its public edges
    ``bin_lower``, ``bin_upper`` (after the ``at`` group columns, whose dtypes are kept)."""
    index = np.asarray(table[bins_.BIN], dtype=np.int64)
    public = np.asarray(edges, dtype=float)
    lower, upper = public[index], public[index + 1]
    if hasattr(table, "iloc"):  # pandas
        out = table.drop(columns=[bins_.BIN])
        out.insert(at, "bin_lower", lower)
        out.insert(at + 1, "bin_upper", upper)
        return out
    import polars as pl

    return table.drop(bins_.BIN).insert_column(at, pl.Series("bin_lower", lower)) \
        .insert_column(at + 1, pl.Series("bin_upper", upper))


def _group_names(column: str | tuple[str, ...]) -> tuple[str, ...]:
    return (column,) if isinstance(column, str) else tuple(column)


def _quantile_estimate(values: Mapping[str, np.ndarray], name: str, value: float,
                       level: float) -> results.QuantileEstimate:
    """The ``ci=`` answer of one quantile from the release's public interval columns."""
    lo, hi = values.get(f"{name}_q_lower"), values.get(f"{name}_q_upper")
    return results.QuantileEstimate(
        value, float(values[f"{name}_rank_error"][0]),
        None if lo is None else float(lo[0]), None if hi is None else float(hi[0]), level)


def _table(out: release.Outcome, table: Any) -> Any:
    attach_release_log(table, out.document, release_id=out.release_id)
    return table


def _accuracy_table(frame: Any, rows: Sequence[Any]) -> Any:
    fields: tuple[str, ...] = ("name", "query", "epsilon", "half_width", "alpha", "mechanisms",
                               "note")
    if any(r.query == "key selection" for r in rows):  # keys selected from the data
        fields += ("threshold", "min_group_half", "min_group_1_alpha")
    return backend_of(frame).table({f: [getattr(r, f) for r in rows] for f in fields})


def _is_polars_expr(expr: Any) -> bool:
    import sys

    pl = sys.modules.get("polars")
    return pl is not None and isinstance(expr, pl.Expr)


def _names(columns: Sequence[str]) -> list[str]:
    if not columns or not all(isinstance(c, str) for c in columns):
        raise ParameterError("pass column names as strings, e.g. frame.dp.select('age', 'sex')")
    return list(columns)


def _declare(facts: provenance.FrameFacts, steps: Sequence[derivations.Step],
             bounds: Mapping[str, tuple[float, float]],
             missing: Missing | Mapping[str, Missing] | None) -> provenance.FrameFacts:
    """Add declared bounds (and missing policies) for columns the derivation produced."""
    from dataclasses import replace

    produced = {name for s in steps for name in s.outputs}
    clean = provenance.validate_bounds(bounds)
    unknown = [c for c in clean if c not in produced]
    if unknown:
        raise ParameterError(
            f"bounds= names columns this with_columns does not produce: {unknown}; bounds of "
            "existing columns are declared at dpf.protect"
        )
    policies = provenance.validate_missing(provenance.DROP if missing is None else missing,
                                           clean)
    return replace(facts, bounds={**facts.bounds, **clean},
                   missing={**facts.missing, **policies})

"""The ``.dp`` methods whose answer is a table of the frame's library: several statistics in
one release, the analyses (proportions, covariance and correlation matrices, describe,
histograms, value counts) and the planner's tables (accuracy before spending, the inverse
ε, splits of ε). Each release goes through :func:`dpframe.release._pipeline.run` and its
table carries the release's log (:func:`dpframe.frames.results.with_log`); planning reads no
data and spends nothing (:mod:`dpframe.release._accuracy_planner`).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Generic

from dpframe import provenance, release
from dpframe import release as planner
from dpframe._validation import check_column, check_count, check_labels, check_names
from dpframe.backends import backend_of
from dpframe.errors import ParameterError
from dpframe.frames import bins as bins_
from dpframe.frames import derivations, results
from dpframe.frames.groupby import DPGroupBy
from dpframe.frames.parameters import (
    ACCURACY,
    CATEGORICAL,
    DESCRIBE,
    HISTOGRAM,
    MATRIX,
    PLANNER,
    shared_parameters,
)
from dpframe.frames.types import KeyList, Mechanism, RandomState, TableT
from dpframe.mechanisms.histograms import apportion
from dpframe.provenance import Session
from dpframe.query import Keys
from dpframe.query import statistics as q_

__all__ = ["Analyses"]


@functools.lru_cache(maxsize=64)
def _bin_keys(count: int) -> Keys:
    """The keys of a histogram's hidden bin column, ``0 .. count - 1``, checked once per
    number of bins (:func:`dpframe.release.declared_keys`, the check every release makes of
    keys it is given; a checked key list is taken as it is): a public fact, so a repeated
    histogram reuses the list with its lookup table and log reference."""
    return release.declared_keys(bins_.BIN, list(range(count)))


class Analyses(Generic[TableT]):
    """The table-valued methods of :class:`~dpframe.frames.namespace.DPNamespace`."""

    _frame: Any

    @shared_parameters()
    def release(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                weights: Mapping[str, float] | Sequence[float] | None = None,
                mechanism: Mechanism = "auto", random_state: RandomState = None,
                session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Several statistics in one release (one pass over the data).

        Returns
        -------
        A one-row frame of the caller's library; its log travels with it (pandas ``to_parquet``,
        Polars ``table.dp.write_parquet``).
        """
        out = release.run(self._frame, queries, epsilon=epsilon, delta=delta, weights=weights,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci)
        return results.release_table(out)

    @shared_parameters(CATEGORICAL)
    def proportions(self, column: str, *, epsilon: float, keys: KeyList | None = None,
                    method: str = "rescale", remainder: Hashable | None = None,
                    delta: float = 0.0, mechanism: Mechanism = "auto",
                    random_state: RandomState = None, session: Session | str | None = None,
                    ci: float | None = None) -> TableT:
        """Proportions of a categorical column's public keys (Liu §4.2):
        each in [0, 1], summing to 1.

        Parameters
        ----------
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
        grouped: DPGroupBy[TableT] = DPGroupBy(self._frame, column, keys)
        return grouped.release(
            {"proportion": query}, epsilon=epsilon, delta=delta, mechanism=mechanism,
            random_state=random_state, session=session, ci=ci)

    @shared_parameters(MATRIX)
    def cov(self, columns: Sequence[str], *, epsilon: float, delta: float = 0.0,
            mechanism: Mechanism = "auto", random_state: RandomState = None,
            session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Covariance matrix (ddof=1) of bounded columns, positive semi-definite
        (Liu §4.1). Needs the public size."""
        return self._matrix("cov", columns, epsilon, delta, mechanism, random_state, session,
                            ci)

    @shared_parameters(MATRIX)
    def corr(self, columns: Sequence[str], *, epsilon: float, delta: float = 0.0,
             mechanism: Mechanism = "auto", random_state: RandomState = None,
             session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Correlation matrix in [−1, 1] from the released covariance (Liu
        §4.1)."""
        return self._matrix("corr", columns, epsilon, delta, mechanism, random_state, session,
                            ci)

    def _matrix(self, kind: str, columns: Sequence[str], epsilon: float, delta: float,
                mechanism: Mechanism, random_state: RandomState,
                session: Session | str | None, ci: float | None) -> TableT:
        query = q_.Covariance(columns, kind)
        check_labels(kind, query.columns, ("column", "statistic"))
        out = release.run(self._frame, {kind: query}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, session=session,
                          ci=ci)
        table = results.matrix_frame(out.values[kind], query.columns, out.backend,
                                     out.intervals.get(kind))
        return results.with_log(out, table)

    @shared_parameters(DESCRIBE)
    def describe(self, *, epsilon: float, columns: Sequence[str] | None = None,
                 delta: float = 0.0, mechanism: Mechanism = "auto",
                 random_state: RandomState = None, session: Session | str | None = None,
                 ci: float | None = None) -> TableT:
        """count, mean, std and declared bounds of bounded columns, in one
        release (ε split evenly over the 2 statistics per column and, where the size is
        private, the count; the count of a public size is exact and free)."""
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
        table = results.describe_frame(out, cols, facts.bounds)
        return results.with_log(out, table)

    @shared_parameters(HISTOGRAM)
    def histogram(self, column: str, *, edges: Sequence[float] | None = None,
                  bins: int | Sequence[float] | None = None, epsilon: float,
                  delta: float = 0.0, mechanism: Mechanism = "auto", total: int | None = None,
                  random_state: RandomState = None, session: Session | str | None = None,
                  ci: float | None = None) -> TableT:
        """Noisy counts of a numeric column over public bins.

        One group-by count over the bins (a verified row-wise bin index, then parallel
        composition: a replaced row moves between two bins, so each bin gets ε/2; under
        ``neighbours="add_remove"`` a row is added to or removed from one bin: ε). Bin ``j`` is
        ``[e_j, e_{j+1})``, the last one closed; values below the first edge go to the first bin,
        values above the last edge (``+inf`` too) to the last one; missing values (null, NaN)
        follow the column's missing-value rule (dropped: in no bin). The bin index is a binary
        search over the edges in every engine, so thousands of edges cost O(log k) per row.
        Counts are non-negative integers (post-processing). A list as ``bins`` is the former
        spelling of ``edges`` (deprecated: ``DeprecationWarning``).

        Returns
        -------
        A frame with ``bin_lower``, ``bin_upper`` and ``count`` (and interval columns with ``ci``).
        """
        facts = provenance.resolve(self._frame, session)
        public = bins_.histogram_edges(check_column(column), edges, bins, facts.bounds)
        return self._counts(column, public, None, epsilon, delta, mechanism,
                            total, random_state, session, ci)

    @shared_parameters(CATEGORICAL)
    def value_counts(self, column: str, *, keys: KeyList | None = None,
                     epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
                     total: int | None = None, random_state: RandomState = None,
                     session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy counts of a categorical column's public keys.

        A group-by count over the declared keys (every key appears, even with no rows; keys not
        declared never appear), ε/2 per key (ε under ``neighbours="add_remove"``);
        non-negative integer counts.

        Returns
        -------
        A frame with the key column and ``count``.
        """
        return self._counts(column, None, keys, epsilon, delta, mechanism, total,
                            random_state, session, ci)

    def _counts(self, column: str, edges: list[float] | None, keys: KeyList | None,
                epsilon: float, delta: float, mechanism: Mechanism, total: int | None,
                random_state: RandomState, session: Session | str | None,
                ci: float | None) -> TableT:
        check_column(column)
        if total is not None:
            check_count("total", total)
        frame, group, group_keys = self._frame, column, keys
        if edges is not None:
            frame = self._binned(column, edges, session)
            group, group_keys = bins_.BIN, _bin_keys(len(edges) - 1)
        # the log names the statistic as asked ("histogram(age)"); the table's column is count
        label = f"{'histogram' if edges is not None else 'value_counts'}({column})"
        out = release.run(frame, {label: q_.count()}, epsilon=epsilon, delta=delta,
                          mechanism=mechanism, random_state=random_state, group_by=group,
                          keys=group_keys, session=session, ci=ci)
        out.values["count"] = out.values.pop(label)
        if label in out.intervals:
            out.intervals["count"] = out.intervals.pop(label)
        if total is not None:
            out.values["count"] = apportion(out.values["count"], total).astype(float)
        return results.release_table(out, edges)

    def _binned(self, column: str, edges: list[float], session: Session | str | None) -> Any:
        """This frame with the hidden bin column (:func:`dpframe.frames.derivations.binned`)."""
        return derivations.binned(self._frame, column, edges, session)

    # -- accuracy before spending -----------------------------------------------------------
    @shared_parameters(ACCURACY)
    def accuracy(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                 weights: Mapping[str, float] | Sequence[float] | None = None,
                 mechanism: Mechanism = "auto", alpha: float = 0.05,
                 min_rows: int | None = None, session: Session | str | None = None,
                 ci: float | None = None) -> TableT:
        """How accurate a release with these arguments will be, before spending anything.

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
        rows = planner.accuracy(self._frame, queries, epsilon=epsilon, delta=delta,
                                weights=weights, mechanism=mechanism, alpha=alpha,
                                min_rows=min_rows, session=session, ci=ci)
        return results.accuracy_table(backend_of(self._frame), rows)

    @shared_parameters(PLANNER)
    def epsilon_for(self, query: q_.Query, half_width: float, *, alpha: float = 0.05,
                    delta: float = 0.0, mechanism: Mechanism = "bounded",
                    session: Session | str | None = None) -> float:
        """The smallest ε at which ``query`` will be within ``half_width`` of the truth with
        probability ``1 − alpha`` (the inverse of :meth:`accuracy`; one-measurement answers:
        counts, public-size sums, means and variances). Reads no data, spends nothing.
        The inverse is of one named mechanism (default "bounded"; "auto", the releases'
        default, picks one per ε and has no inverse): check the release's mechanism with
        :meth:`accuracy` at the ε found."""
        return planner.epsilon_for(self._frame, query, half_width, alpha=alpha, delta=delta,
                                   mechanism=mechanism, session=session)

    @shared_parameters(PLANNER)
    def split(self, targets: Mapping[str, tuple[q_.Query, float]], *, epsilon: float,
              alpha: float = 0.05, mechanism: Mechanism = "bounded",
              session: Session | str | None = None) -> TableT:
        """Split ``epsilon`` over queries with target half-widths ``{name: (query, target)}``
        so the worst achieved/target ratio is smallest. Returns a frame ``name, epsilon,
        half_width, target``; pass ``dict(zip(t["name"], t["epsilon"]))`` as ``weights=`` of
        one :meth:`release` (with the same named ``mechanism``: the split is for it). Reads no
        data, spends nothing."""
        result = planner.split(self._frame, targets, epsilon=epsilon, alpha=alpha,
                               mechanism=mechanism, session=session)
        return results.split_table(backend_of(self._frame), result,
                                   targets)

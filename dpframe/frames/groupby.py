"""``frame.dp.groupby(...)``: the statistics per group of public keys.

One row per declared key (empty groups too); undeclared keys never appear. One group-by costs
ε once: a replaced row changes at most two groups, so each gets ε/2 (parallel composition);
under ``neighbours="add_remove"`` an added or removed row is in one group, which gets ε.
Without declared keys a release with ``δ > 0`` selects them from the data privately
(docs/privacy.md, section K). Every method goes through :func:`dpframe.release._pipeline.run`
with the group column(s) and keys; the tables are of the frame's library (generic in
:data:`~dpframe.frames.types.TableT`).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from dpframe import provenance, release
from dpframe import release as planner
from dpframe._validation import (
    check_column,
    check_names,
    check_quantile_delta,
    check_quantile_mechanism,
)
from dpframe.backends import backend_of
from dpframe.errors import ParameterError
from dpframe.frames import bins as bins_
from dpframe.frames import derivations, results
from dpframe.frames.parameters import (
    ACCURACY,
    CATEGORICAL,
    DESCRIBE,
    GROUPED,
    GROUPED_QUANTILE,
    HISTOGRAM,
    PLANNER,
    QUANTILE,
    shared_parameters,
)
from dpframe.frames.types import KeyList, Mechanism, QuantileMechanismName, RandomState, TableT
from dpframe.provenance import Session, count_units
from dpframe.query import statistics as q_
from dpframe.release import Outcome

__all__ = ["DPGroupBy"]

C = TypeVar("C")

#: The frame every example starts from (``>>> SETUP`` in a docstring is replaced by it, so
#: ``help()`` shows each example complete).
EXAMPLE_SETUP = """\
>>> import pandas as pd, dpframe as dpf
>>> df = pd.DataFrame({"g": ["a", "b"] * 50, "x": [1.0, 3.0] * 50})
>>> pf = dpf.protect(df, epsilon=5, bounds={"x": (0, 5)}, missing={"x": 0.0},
...                  keys={"g": ["a", "b"]})"""


def _with_example_setup(cls: type[C]) -> type[C]:
    """``cls`` with ``>>> SETUP`` in its methods' docstrings replaced by :data:`EXAMPLE_SETUP`."""
    for member in vars(cls).values():
        if inspect.isfunction(member) and member.__doc__:
            member.__doc__ = member.__doc__.replace(">>> SETUP", EXAMPLE_SETUP)
    return cls


def _group_names(column: str | tuple[str, ...]) -> tuple[str, ...]:
    return (column,) if isinstance(column, str) else tuple(column)


@_with_example_setup
class DPGroupBy(Generic[TableT]):
    """``frame.dp.groupby(col, keys=[...])``: one row per declared key (empty groups too);
    undeclared keys never appear. One group-by costs ε once (parallel composition).

    Every method returns a table of the frame's library (pandas for pandas and the engines,
    Polars for Polars frames) whose log travels with it, except :meth:`epsilon_for` (a float).
    """

    def __init__(self, frame: object, column: str | Sequence[str], keys: KeyList | None,
                 selection_share: float = 0.5) -> None:
        self._frame = frame
        if not isinstance(column, str) and not (
                isinstance(column, Sequence) and all(isinstance(c, str) for c in column)):
            raise ParameterError(
                f"groupby(...) takes a column name or a list of column names, not "
                f"{type(column).__name__}: e.g. groupby('region') or groupby(['region', 'sex'])")
        self._column: str | tuple[str, ...] = column if isinstance(column, str) else tuple(
            column)
        self._keys = keys
        self._selection_share = selection_share

    def _declared(self) -> KeyList | None:
        """The ``keys=`` of one column as a checked :class:`~dpframe.query._keys.Keys`, made at
        the first release and reused by the next ones (so 100,000 keys are checked, hashed
        for the log and indexed once, not per release)."""
        if self._keys is not None and isinstance(self._column, str):
            self._keys = release.declared_keys(self._column, self._keys)
        return self._keys

    @shared_parameters()
    def release(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                weights: Mapping[str, float] | Sequence[float] | None = None,
                mechanism: Mechanism = "auto", random_state: RandomState = None,
                session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Several statistics per group in one release; see :meth:`DPNamespace.release`.

        Examples
        --------
        >>> SETUP
        >>> t = pf.dp.groupby("g").release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1)
        >>> list(t.columns), list(t["g"])
        (['g', 'n', 'm'], ['a', 'b'])
        """
        out = release.run(self._frame, queries, epsilon=epsilon, delta=delta,
                          weights=weights, mechanism=mechanism, random_state=random_state,
                          group_by=self._column, keys=self._declared(), session=session,
                          ci=ci, selection_share=self._selection_share)
        return results.with_log(out, results.to_frame(out))

    @shared_parameters(GROUPED, ACCURACY)
    def accuracy(self, queries: Mapping[str, q_.Query], *, epsilon: float, delta: float = 0.0,
                 weights: Mapping[str, float] | Sequence[float] | None = None,
                 mechanism: Mechanism = "auto", alpha: float = 0.05,
                 min_rows: int | None = None, session: Session | str | None = None,
                 ci: float | None = None) -> TableT:
        """Per-group accuracy before spending; see :meth:`DPNamespace.accuracy`. Without
        declared keys (keys selected from the data) the table starts with a ``keys`` row for
        the selection and has three more columns: ``threshold`` (a group is kept iff its noisy
        count exceeds it), ``min_group_half`` and ``min_group_1_alpha`` (the smallest group
        kept with probability ½ and ``1 − alpha``); the queries' rows hold for each kept group.

        Examples
        --------
        >>> SETUP
        >>> plan = pf.dp.groupby("g").accuracy({"n": dpf.count()}, epsilon=1)
        >>> list(plan["name"]), pf.dp.budget.epsilon_spent
        (['n'], 0.0)
        """
        rows = planner.accuracy(self._frame, queries, epsilon=epsilon, delta=delta,
                                weights=weights, mechanism=mechanism, alpha=alpha,
                                group_by=self._column, keys=self._declared(),
                                min_rows=min_rows, session=session, ci=ci,
                                selection_share=self._selection_share)
        return results.accuracy_table(backend_of(self._frame), rows)

    def _one(self, query: q_.Query, name: str, epsilon: float, delta: float,
             mechanism: Mechanism, random_state: RandomState, session: Session | str | None,
             ci: float | None) -> TableT:
        return self.release({name: query}, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            random_state=random_state, session=session, ci=ci)

    @shared_parameters()
    def count(self, *, epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
              random_state: RandomState = None, session: Session | str | None = None,
              ci: float | None = None) -> TableT:
        """Noisy row count per group: a column ``count``.

        Examples
        --------
        >>> SETUP
        >>> t = pf.dp.groupby("g").count(epsilon=1, ci=0.9)
        >>> list(t.columns)
        ['g', 'count', 'count_lower', 'count_upper']
        """
        return self._one(q_.count(), "count", epsilon, delta, mechanism, random_state, session,
                         ci)

    @shared_parameters()
    def count_units(self, *, epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
                    random_state: RandomState = None, session: Session | str | None = None,
                    ci: float | None = None) -> TableT:
        """Noisy number of distinct persons (privacy units) per group, on a frame protected
        with ``privacy_unit=`` (Δ = 1; a person counts in at most ``min(g, k)`` groups): a
        column ``count_units``.

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> visits = pd.DataFrame({"g": ["a", "b"] * 50, "person": list(range(50)) * 2})
        >>> pu = dpf.protect(visits, epsilon=1, bounds={}, keys={"g": ["a", "b"]},
        ...                  privacy_unit="person", max_rows_per_unit=2)
        >>> list(pu.dp.groupby("g").count_units(epsilon=1).columns)
        ['g', 'count_units']
        """
        return self._one(count_units(), "count_units", epsilon, delta, mechanism,
                         random_state, session, ci)

    @shared_parameters()
    def sum(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: Mechanism = "auto", random_state: RandomState = None,
            session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy sum of a bounded column per group (values clamped to its bounds): a column
        ``sum``.

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").sum("x", epsilon=1).columns)
        ['g', 'sum']
        """
        return self._one(q_.sum(column), "sum", epsilon, delta, mechanism, random_state,
                         session, ci)

    @shared_parameters()
    def mean(self, column: str, *, epsilon: float, delta: float = 0.0,
             mechanism: Mechanism = "auto", random_state: RandomState = None,
             session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy mean of a bounded column per group, inside its bounds: a column ``mean``.

        Examples
        --------
        >>> SETUP
        >>> t = pf.dp.groupby("g").mean("x", epsilon=1)
        >>> bool(t["mean"].between(0, 5).all())
        True
        """
        return self._one(q_.mean(column), "mean", epsilon, delta, mechanism, random_state,
                         session, ci)

    @shared_parameters()
    def variance(self, column: str, *, epsilon: float, delta: float = 0.0,
                 mechanism: Mechanism = "auto", random_state: RandomState = None,
                 session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy sample variance (ddof=1) of a bounded column per group: a column
        ``variance`` (``var`` is the same method).

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").var("x", epsilon=1).columns)
        ['g', 'variance']
        """
        return self._one(q_.variance(column), "variance", epsilon, delta, mechanism,
                         random_state, session, ci)

    var = variance

    @shared_parameters()
    def std(self, column: str, *, epsilon: float, delta: float = 0.0,
            mechanism: Mechanism = "auto", random_state: RandomState = None,
            session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy sample standard deviation (ddof=1) of a bounded column per group: a column
        ``std``.

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").std("x", epsilon=1).columns)
        ['g', 'std']
        """
        return self._one(q_.std(column), "std", epsilon, delta, mechanism, random_state,
                         session, ci)

    @shared_parameters(GROUPED_QUANTILE, QUANTILE)
    def quantile(self, column: str, q: float | Sequence[float] = 0.5, *, epsilon: float,
                 bins: int | None = None, delta: float = 0.0,
                 mechanism: QuantileMechanismName = "auto", random_state: RandomState = None,
                 session: Session | str | None = None, ci: float | None = None,
                 ci_share: float = 0.5) -> TableT:
        """Noisy quantile(s) per group (see :meth:`DPNamespace.quantile`; each group's ranks
        are its own): a column ``quantile``, or ``quantile[<q>]`` per level for a list.

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").quantile("x", [0.25, 0.75], epsilon=1).columns)
        ['g', 'quantile[0.25]', 'quantile[0.75]']
        """
        check_quantile_mechanism(mechanism)
        check_quantile_delta(mechanism, delta)
        return self._one(q_.quantile(column, q, bins=bins, ci_share=ci_share), "quantile",
                         epsilon, delta,
                         "auto", random_state, session, ci)

    @shared_parameters(GROUPED_QUANTILE, QUANTILE)
    def median(self, column: str, *, epsilon: float, bins: int | None = None,
               delta: float = 0.0, mechanism: QuantileMechanismName = "auto",
               random_state: RandomState = None, session: Session | str | None = None,
               ci: float | None = None, ci_share: float = 0.5) -> TableT:
        """Noisy median per group: a column ``median`` (with ``ci``, ``median_lower``,
        ``median_upper`` at ``ci_share`` of ε, and ``median_rank_error``).

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").median("x", epsilon=1, ci=0.9).columns)
        ['g', 'median', 'median_lower', 'median_upper', 'median_rank_error']
        """
        check_quantile_mechanism(mechanism)
        check_quantile_delta(mechanism, delta)
        return self._one(q_.median(column, bins=bins, ci_share=ci_share), "median", epsilon,
                         delta, "auto",
                         random_state, session, ci)

    # -- per-group counts over a second column: histogram, value_counts ----------------------
    @shared_parameters(HISTOGRAM)
    def histogram(self, column: str, *, edges: Sequence[float] | None = None,
                  bins: int | None = None, epsilon: float, delta: float = 0.0,
                  mechanism: Mechanism = "auto", random_state: RandomState = None,
                  session: Session | str | None = None, ci: float | None = None) -> TableT:
        """Noisy counts of a numeric column over public bins, per group: one row per group and
        bin (columns: the group column(s), ``bin_lower``, ``bin_upper``, ``count``; with
        ``ci``, ``count_lower``/``count_upper``). Missing values follow the column's rule.

        One group-by count over (group, bin): a replaced row changes at most two cells, so
        each cell gets ε/2 and the whole table costs ε once. Keys: with the group keys declared
        (or given to ``groupby``), every group × bin appears, empty ones too; with none
        declared and ``delta > 0``, the (group, bin) pairs are selected from the data
        privately (docs/privacy.md, section K: rare pairs are left out), else refused before
        anything is read.

        Examples
        --------
        >>> SETUP
        >>> t = pf.dp.groupby("g").histogram("x", bins=2, epsilon=1)
        >>> list(t.columns), list(t["bin_lower"])
        (['g', 'bin_lower', 'bin_upper', 'count'], [0.0, 2.5, 0.0, 2.5])
        """
        column = check_column(column)
        facts = provenance.resolve(self._frame, session)
        public = bins_.histogram_edges(column, edges, bins, facts.bounds)
        cells = list(range(len(public) - 1))
        frame = derivations.binned(self._frame, column, public, session)
        out = self._cells(frame, bins_.BIN, cells, epsilon, delta, mechanism, random_state,
                          session, ci, select=True)
        table = results.bin_edges_columns(results.to_frame(out), public,
                                          len(_group_names(self._column)))
        return results.with_log(out, table)

    @shared_parameters(CATEGORICAL)
    def value_counts(self, column: str, *, keys: KeyList | None = None,
                     epsilon: float, delta: float = 0.0, mechanism: Mechanism = "auto",
                     random_state: RandomState = None, session: Session | str | None = None,
                     ci: float | None = None) -> TableT:
        """Noisy counts of a categorical column's keys, per group: one row per group and key
        (columns: the group column(s), ``column``, ``count``; with ``ci``,
        ``count_lower``/``count_upper``). One group-by count over (group, key): ε/2 per cell,
        ε once for the table.

        Keys: ``keys=`` (or those declared at protect) for ``column``, and the group keys
        given to ``groupby`` (or declared): every combination appears, empty ones too. With
        neither column's keys declared anywhere and ``delta > 0``, the (group, key) pairs are
        selected from the data privately (docs/privacy.md, section K). Declaring one side
        and selecting the other is refused (a selection keeps whole pairs), as is a release
        without δ when some keys are undeclared.

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> df = pd.DataFrame({"g": ["a", "b"] * 50, "c": ["u", "v", "w", "u"] * 25})
        >>> pc = dpf.protect(df, epsilon=1, bounds={}, keys={"g": ["a", "b"], "c": ["u", "v"]})
        >>> t = pc.dp.groupby("g").value_counts("c", epsilon=1)
        >>> list(t.columns), len(t)
        (['g', 'c', 'count'], 4)
        """
        if not isinstance(column, str) or column in _group_names(self._column):
            raise ParameterError(f"value_counts needs a column name other than the group "
                                 f"column(s) {list(_group_names(self._column))}, got "
                                 f"{column!r}")
        facts = provenance.resolve(self._frame, session)
        declared = keys if keys is not None else facts.keys.get(column)
        if declared is not None:
            declared = provenance.check_key_list(column, declared)
        out = self._cells(self._frame, column, declared, epsilon, delta, mechanism,
                          random_state, session, ci, select=False)
        return results.with_log(out, results.to_frame(out))

    @shared_parameters(CATEGORICAL)
    def proportions(self, column: str, *, epsilon: float, keys: KeyList | None = None,
                    delta: float = 0.0, mechanism: Mechanism = "auto",
                    random_state: RandomState = None, session: Session | str | None = None,
                    ci: float | None = None) -> TableT:
        """Proportions of a categorical column's public keys (``keys``, else those declared at
        protect) within each group, summing to 1 per group: one row per group, a column
        ``proportion[<key>]`` per key (with ``ci``, ``_lower``/``_upper``). The noisy
        per-(group, key) counts of :meth:`value_counts`, rescaled (``method="rescale"``; the
        frame's ``"all_but_one"`` needs the public size, which a group's is not).

        Examples
        --------
        >>> import pandas as pd, dpframe as dpf
        >>> df = pd.DataFrame({"g": ["a", "b"] * 50, "c": ["u", "v", "w", "u"] * 25})
        >>> pc = dpf.protect(df, epsilon=1, bounds={}, keys={"g": ["a", "b"]})
        >>> t = pc.dp.groupby("g").proportions("c", keys=["u", "v", "w"], epsilon=1)
        >>> list(t.columns)
        ['g', 'proportion[u]', 'proportion[v]', 'proportion[w]']
        """
        return self._one(q_.proportions(column, keys=keys), "proportion", epsilon, delta,
                         mechanism, random_state, session, ci)

    @shared_parameters(DESCRIBE)
    def describe(self, *, epsilon: float, columns: Sequence[str] | None = None,
                 delta: float = 0.0, mechanism: Mechanism = "auto",
                 random_state: RandomState = None, session: Session | str | None = None,
                 ci: float | None = None) -> TableT:
        """count, mean and std of bounded columns per group, in one release (ε split evenly
        over count and the 2 statistics per column, as :meth:`DPNamespace.describe`): one row
        per group, columns ``count``, ``mean[<col>]``, ``std[<col>]`` (and their
        ``_lower``/``_upper`` with ``ci``).

        Examples
        --------
        >>> SETUP
        >>> list(pf.dp.groupby("g").describe(epsilon=1).columns)
        ['g', 'count', 'mean[x]', 'std[x]']
        """
        facts = provenance.resolve(self._frame, session)
        cols = list(facts.bounds) if columns is None else check_names("columns", columns)
        if not cols:
            raise ParameterError("describe needs at least one column with declared bounds")
        queries: dict[str, q_.Query] = {"count": q_.count()}
        for col in cols:
            queries[f"mean[{col}]"] = q_.mean(col)
            queries[f"std[{col}]"] = q_.std(col)
        return self.release(queries, epsilon=epsilon, delta=delta, mechanism=mechanism,
                            random_state=random_state, session=session, ci=ci)

    @shared_parameters(PLANNER)
    def epsilon_for(self, query: q_.Query, half_width: float, *, alpha: float = 0.05,
                    delta: float = 0.0, mechanism: Mechanism = "bounded",
                    session: Session | str | None = None) -> float:
        """The smallest ε at which ``query`` will be within ``half_width`` of the truth in
        every group, with probability ``1 − alpha`` each (see
        :meth:`DPNamespace.epsilon_for`; each group gets half of it). Reads no data.

        Examples
        --------
        >>> SETUP
        >>> 0 < pf.dp.groupby("g").epsilon_for(dpf.count(), 5.0) < 5
        True
        """
        return planner.epsilon_for(self._frame, query, half_width, alpha=alpha,
                                   delta=delta, mechanism=mechanism, group_by=self._column,
                                   keys=self._declared(), session=session)

    @shared_parameters(PLANNER)
    def split(self, targets: Mapping[str, tuple[q_.Query, float]], *, epsilon: float,
              alpha: float = 0.05, mechanism: Mechanism = "bounded",
              session: Session | str | None = None) -> TableT:
        """Split ``epsilon`` over per-group queries with target half-widths (see
        :meth:`DPNamespace.split`): a frame ``name, epsilon, half_width, target``. Reads no
        data, spends nothing.

        Examples
        --------
        >>> SETUP
        >>> targets = {"n": (dpf.count(), 5.0), "s": (dpf.sum("x"), 20.0)}
        >>> t = pf.dp.groupby("g").split(targets, epsilon=1, mechanism="laplace")
        >>> list(t["name"])
        ['n', 's']
        """
        result = planner.split(self._frame, targets, epsilon=epsilon, alpha=alpha,
                               mechanism=mechanism, group_by=self._column,
                               keys=self._declared(), session=session)
        return results.split_table(backend_of(self._frame), result,
                                   targets)

    def _cells(self, frame: object, column: str, cells: Sequence[Any] | None, epsilon: float,
               delta: float, mechanism: str, random_state: RandomState,
               session: Session | str | None, ci: float | None, select: bool
               ) -> Outcome:
        """One count per (group, cell of ``column``) of ``frame``: a group-by count over the
        group column(s) and ``column``. Group keys and ``cells`` both public: their product;
        the group keys undeclared and ``cells`` None (or ``select``: bins, dpframe's own
        values): the pairs are selected from the data (δ > 0); else refused (public facts)."""
        groups = _group_names(self._column)
        group_keys = self._group_keys(frame, session)
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

    def _group_keys(self, frame: object, session: Session | str | None
                    ) -> list[tuple[Any, ...]] | None:
        """The public key tuples of the group column(s): given to ``groupby``, or the product
        of the keys declared at protect; None when some are not declared."""
        groups = _group_names(self._column)
        known = provenance.resolve(frame, session).keys
        if self._keys is not None:
            return [tuple(g) if len(groups) > 1 else (g,)  # type: ignore[arg-type]
                    for g in self._keys]
        if all(c in known for c in groups):
            return list(itertools.product(*(known[c] for c in groups)))
        return None



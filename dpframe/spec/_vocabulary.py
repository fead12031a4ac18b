"""The release spec's vocabulary: the statistics a spec names and the parameters each takes, from
the registry of statistics (:data:`dpframe.query.registry.STATISTICS`), with the API's names.

A statistic the registry builds from a spec's arguments (:func:`~dpframe.query.registry.
spec_statistics`) is built by its registry entry; the quantiles, which the registry builds only
through ``frame.dp.quantile``/``median``, are built here by their library builders
(``dpf.quantile(column, q, bins=, ci_share=)``, ``dpf.median(column, bins=, ci_share=)``).
A parameter a spec gives beyond the registry's is the API's own: a quantile's ``ci_share``, a
histogram's ``edges`` (``frame.dp.histogram(column, edges=[...])``). Every statistic of the
registry is a word here except those in :data:`NOT_IN_SPEC`
(``tests/spec/test_parity.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable

from dpframe.query import statistics as q_
from dpframe.query.registry import STATISTICS, StatisticArguments
from dpframe.query.statistics import Query
from dpframe.spec._model import StatisticSpec

#: Statistics of the registry a spec does not name, and why.
NOT_IN_SPEC: dict[str, str] = {
    "count_units": "counts persons of a privacy_unit, which a spec does not declare (its unit "
                   "is one row)",
}
#: Parameters a spec gives beyond the registry's, by statistic: the API's own names.
EXTRA_PARAMETERS: dict[str, tuple[str, ...]] = {
    "histogram": ("edges",),
    "quantile": ("ci_share",),
    "median": ("ci_share",),
}
#: Parameters a statistic may leave out (the API's defaults): a quantile's level (0.5), its
#: bins (from public facts) and ci_share (0.5), a key column's keys (its ``[keys]``), and a
#: histogram's edges (its bins then).
OPTIONAL: dict[str, tuple[str, ...]] = {
    "quantile": ("q", "bins", "ci_share"),
    "median": ("bins", "ci_share"),
    "histogram": ("edges",),
    "value_counts": ("keys",),
    "proportions": ("keys",),
}

#: The statistics a spec names and the parameters each takes, as its builder does
#: (``dpf.mean(column)``, ``dpf.histogram(column, bins=B)``, ``dpf.value_counts(column,
#: keys=None)``, ``dpf.cov(columns)``, ``dpf.quantile(column, q, bins=, ci_share=)``, ...).
SPEC_PARAMETERS: dict[str, tuple[str, ...]] = {
    e.name: (*e.parameters, *EXTRA_PARAMETERS.get(e.name, ()))
    for e in STATISTICS.values() if e.name not in NOT_IN_SPEC}
#: The statistics that take parameters besides one column (histogram, value counts,
#: proportions, cov, corr, quantiles).
PARAMETERS: dict[str, tuple[str, ...]] = {
    k: ps for k, ps in SPEC_PARAMETERS.items() if ps not in ((), ("column",))}
KINDS = tuple(SPEC_PARAMETERS)


def _quantile(stat: StatisticSpec) -> Query:
    assert stat.column is not None
    q = 0.5 if stat.q is None else (list(stat.q) if isinstance(stat.q, tuple) else stat.q)
    share = 0.5 if stat.ci_share is None else stat.ci_share
    if stat.kind == "median":
        return q_.median(stat.column, bins=stat.bins, ci_share=share)
    return q_.quantile(stat.column, q, bins=stat.bins, ci_share=share)


def _registry_builder(name: str) -> Callable[[StatisticSpec], Query]:
    build = STATISTICS[name].build
    assert build is not None, name

    def built(stat: StatisticSpec) -> Query:
        return build(StatisticArguments(stat.column, stat.columns, stat.bins, stat.keys))

    return built


#: Each word's query from its parameters, as its builder builds it.
STATISTIC_BUILDERS: dict[str, Callable[[StatisticSpec], Query]] = {
    **{e.name: _registry_builder(e.name) for e in STATISTICS.values() if e.build is not None},
    "quantile": _quantile,
    "median": _quantile,
}


def library_query(stat: StatisticSpec) -> Query:
    """The library's query object of a statistic, built as its builder builds it
    (``dpf.mean(column)``, ``dpf.histogram(column, bins=...)``, ``dpf.cov(columns)``,
    ``dpf.quantile(column, q, ...)``; the builder checks its arguments, raising
    :class:`~dpframe.errors.ParameterError`). A histogram over public ``edges`` has no query
    object: it is released by ``frame.dp.histogram`` (:mod:`dpframe.spec._calls`)."""
    assert stat.edges is None, "a histogram over edges is released by frame.dp.histogram"
    return STATISTIC_BUILDERS[stat.kind](stat)

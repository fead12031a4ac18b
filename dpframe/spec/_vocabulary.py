"""The release spec's vocabulary: the statistics a spec names and the parameters each takes, from
the registry of statistics (:func:`dpframe.query.registry.spec_statistics`), with the API's
names: a statistic registered there is a word here, built by its entry as its builder builds it
(``dpf.mean(column)``, ``dpf.histogram(column, bins=B)``, ``dpf.quantile(column, q, bins=,
ci_share=)``, ...). ``tests/spec/test_parity.py`` checks the words against the API's methods."""

from __future__ import annotations

from collections.abc import Callable

from dpframe.query.registry import STATISTICS, StatisticArguments, StatisticEntry, spec_statistics
from dpframe.query.statistics import Query
from dpframe.spec._model import StatisticSpec

#: The statistics a spec names and the parameters each takes, as its builder does
#: (``dpf.mean(column)``, ``dpf.histogram(column, bins=B)``, ``dpf.value_counts(column,
#: keys=None)``, ``dpf.cov(columns)``, ``dpf.quantile(column, q, ...)``, ...): the registry's
#: (a histogram's ``edges`` are ``frame.dp.histogram``'s), built by :func:`library_query`.
SPEC_PARAMETERS: dict[str, tuple[str, ...]] = {e.name: e.parameters for e in spec_statistics()}
#: The parameters each statistic may leave out (its builder's defaults).
OPTIONAL: dict[str, tuple[str, ...]] = {e.name: e.optional for e in spec_statistics()}
#: The statistics that take parameters besides one column (histogram, value counts,
#: proportions, cov, corr, quantiles).
PARAMETERS: dict[str, tuple[str, ...]] = {
    k: ps for k, ps in SPEC_PARAMETERS.items() if ps not in ((), ("column",))}
KINDS = tuple(SPEC_PARAMETERS)
#: Each word's query from its parameters, as its builder builds it.
STATISTIC_BUILDERS: dict[str, Callable[[StatisticArguments], Query]] = {
    e.name: e.build for e in spec_statistics() if e.build is not None}


def entry_of(stat: StatisticSpec) -> StatisticEntry:
    """The registry's entry of a statistic."""
    return STATISTICS[stat.kind]


def library_query(stat: StatisticSpec) -> Query:
    """The library's query object of a statistic, built as its builder builds it
    (``dpf.mean(column)``, ``dpf.histogram(column, bins=...)``, ``dpf.cov(columns)``,
    ``dpf.quantile(column, q, ...)``; the builder checks its arguments, raising
    :class:`~dpframe.errors.ParameterError`). A histogram over public ``edges`` has no query
    object: ``frame.dp.histogram`` releases it (:mod:`dpframe.spec._calls`)."""
    assert stat.edges is None, "a histogram over edges is released by frame.dp.histogram"
    build = STATISTIC_BUILDERS[stat.kind]
    q = list(stat.q) if isinstance(stat.q, tuple) else stat.q
    return build(StatisticArguments(stat.column, stat.columns, stat.bins, stat.keys, q,
                                    stat.ci_share))

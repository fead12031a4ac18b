"""The release spec's vocabulary: the statistics a spec names and the parameters each takes, from
the registry of statistics (:func:`dpframe.query.registry.spec_statistics`)."""

from __future__ import annotations

from collections.abc import Callable

from dpframe.query.registry import StatisticArguments, spec_statistics
from dpframe.query.statistics import Query
from dpframe.spec._model import StatisticSpec

#: The statistics a spec names and the parameters each takes, as its builder does
#: (``dpf.mean(column)``, ``dpf.histogram(column, bins=B)``, ``dpf.value_counts(column,
#: keys=None)``, ``dpf.cov(columns)``, ...): the release spec's vocabulary is the registry's
#: (:func:`dpframe.query.registry.spec_statistics`), so a statistic registered there is a
#: word here too; built by :func:`library_query`.
SPEC_PARAMETERS: dict[str, tuple[str, ...]] = {e.name: e.parameters for e in spec_statistics()}
#: The statistics that take parameters besides one column (histogram, value counts,
#: proportions, cov, corr).
PARAMETERS: dict[str, tuple[str, ...]] = {
    k: ps for k, ps in SPEC_PARAMETERS.items() if ps not in ((), ("column",))}
KINDS = tuple(SPEC_PARAMETERS)
#: Each word's query from its parameters, as its builder builds it.
STATISTIC_BUILDERS: dict[str, Callable[[StatisticArguments], Query]] = {
    e.name: e.build for e in spec_statistics() if e.build is not None}


def library_query(stat: StatisticSpec) -> Query:
    """The library's query object of a statistic, built as its builder builds it
    (``dpf.mean(column)``, ``dpf.histogram(column, bins=...)``, ``dpf.cov(columns)``, ...;
    the builder checks its arguments, raising :class:`~dpframe.errors.ParameterError`)."""
    build = STATISTIC_BUILDERS[stat.kind]
    return build(StatisticArguments(stat.column, stat.columns, stat.bins, stat.keys))

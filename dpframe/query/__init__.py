"""What to compute, reading no data.

* :mod:`~dpframe.query.registry` — the statistics by name: each one's spec parameters,
  accuracy rule and ``frame.dp`` method; nothing outside this package branches on a
  statistic's name;
* one module per statistic, each with its query class (its plan and sensitivity derivation)
  and builder: ``_count``, ``_sum``, ``_mean``, ``_variance`` (and std), ``_proportions``,
  ``_histogram``, ``_value_counts`` (and key proportions), ``_quantile``, ``_covariance``;
  :mod:`~dpframe.query.statistics` gathers their public names (``dpf.count``, ``dpf.mean``,
  ... are public from ``dpframe``);
* internal: the plan types (``_plans``: ``Query``, ``Plan``, ``PlanContext``,
  ``Measurement``), exact arithmetic on public numbers (``_exact``), per-cell counts
  (``_cells``), the accuracy rules (``_accuracy``), aggregate requests for the engine
  (``_aggregates``: ``Agg``, ``Bins``, ``FixedPoint``), public group keys (``_keys``) and the
  kinds of measurement (``_measurement_kinds``).
"""

from dpframe.query._aggregates import (
    ADDITIVE_KINDS,
    DROP,
    Agg,
    Bins,
    Bounding,
    FixedPoint,
    UnitBound,
    merged_reads,
)
from dpframe.query._keys import Keys, checked_keys, key_kinds, keys_reference
from dpframe.query._measurement_kinds import LaplaceFactory
from dpframe.query._quantile_plan import BRACKETS

__all__ = [
    "ADDITIVE_KINDS",
    "BRACKETS",
    "DROP",
    "Agg",
    "Bins",
    "Bounding",
    "FixedPoint",
    "Keys",
    "LaplaceFactory",
    "UnitBound",
    "checked_keys",
    "key_kinds",
    "keys_reference",
    "merged_reads",
]

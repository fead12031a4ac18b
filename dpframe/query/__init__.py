"""What to compute, reading no data.

* :mod:`~dpframe.query.statistics` — the ``Query``/``Plan``/``Measurement`` types and one query
  class per statistic (``Count``, ``Sum``, ``Mean``, ``Variance``, ``Std``, ``Proportions``,
  ``Histogram``, ``ValueCounts``, ``KeyProportions``, ``Quantile``, ``Covariance``,
  ``CovarianceEntries``) with its sensitivity; the builders ``dpf.count``, ``dpf.mean``, ... are
  public from ``dpframe``;
* internal: aggregate requests for the engine (``_aggregates``: ``Agg``, ``Bins``,
  ``FixedPoint``), public group keys (``_keys``) and the kinds of measurement
  (``_measurement_kinds``).
"""

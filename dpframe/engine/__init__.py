"""The one aggregation pass over a frame, in its own engine (not for users).

* :mod:`~dpframe.engine._aggregation` — ``aggregate``: the requests of a release in one pass
  (numpy kernel or narwhals expressions; the adapters in ``dpframe/backends/`` say what differs);
* :mod:`~dpframe.engine._row_expressions` — per-row expressions (missing values, clamping, the
  fixed-point grid);
* :mod:`~dpframe.engine._bounding` — privacy-unit bounding (at most k rows and g groups per unit);
* :mod:`~dpframe.engine._tick_keys` — date/datetime group keys matched as integer ticks.
"""

"""The one aggregation pass over a frame, in its own engine (not for users).

* :mod:`~dpframe.engine._aggregation` — ``aggregate``: the requests of a release in one pass
  (numpy kernel or narwhals expressions; the adapters in ``dpframe/backends/`` say what differs);
* :mod:`~dpframe.engine._frame_engine` — what the pass asks the adapters (``FrameEngine``);
* :mod:`~dpframe.engine._kernel`, :mod:`~dpframe.engine._column_views`,
  :mod:`~dpframe.engine._key_codes` — the numpy kernel, the columns it reads, the key codes;
* :mod:`~dpframe.engine._expressions` — the generic path (narwhals or Polars expressions);
* :mod:`~dpframe.engine._bins` — bin counts; :mod:`~dpframe.engine._schema` — schema, engine name;
* :mod:`~dpframe.engine._row_expressions` — per-row expressions (missing values, clamping, the
  fixed-point grid);
* :mod:`~dpframe.engine._bounding` — privacy-unit bounding (at most k rows and g groups per unit);
* :mod:`~dpframe.engine._tick_keys` — date/datetime group keys matched as integer ticks.
"""

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

from dpframe.engine._aggregation import (
    POLARS_ROWS_PER_KEY,
    aggregate,
    engine_name,
    frame_columns,
    pandas_codes,
    pandas_view,
    polars_codes,
    polars_view,
    validate_column,
)
from dpframe.engine._bounding import Bounding, UnitBound, bound_pandas, bound_polars, release_seed
from dpframe.engine._kernel import forced_numpy_sums
from dpframe.engine._row_expressions import ROUNDER, aligned, is_float, is_present
from dpframe.engine._schema import engine_dtypes, remember_schema
from dpframe.engine._tick_keys import (
    arrow_ticks,
    column_kind,
    partitions_with_ticks,
    temporal_key_fits,
    with_ticks,
)

__all__ = [
    "POLARS_ROWS_PER_KEY",
    "ROUNDER",
    "Bounding",
    "UnitBound",
    "aggregate",
    "aligned",
    "arrow_ticks",
    "bound_pandas",
    "bound_polars",
    "column_kind",
    "engine_dtypes",
    "engine_name",
    "forced_numpy_sums",
    "frame_columns",
    "is_float",
    "is_present",
    "pandas_codes",
    "pandas_view",
    "partitions_with_ticks",
    "polars_codes",
    "polars_view",
    "release_seed",
    "remember_schema",
    "temporal_key_fits",
    "validate_column",
    "with_ticks",
]

"""What the aggregation asks the frame's engine adapter (:class:`FrameEngine`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from dpframe.engine._bounding import Bounding
from dpframe.query import Agg

__all__ = ["FrameEngine"]


class FrameEngine(Protocol):
    """What the aggregation asks the frame's engine adapter (:class:`dpframe.backends.Backend`
    implements it; this module never tells engines apart itself). Every answer comes from the
    kind of frame and its schema, never from its values."""

    @property
    def lazy(self) -> bool:
        """The frame is a plan, not data in memory (then the numpy kernel never runs)."""
        ...

    @property
    def ticks_temporal_keys(self) -> bool:
        """Date/datetime group columns are matched as integer ticks
        (:mod:`dpframe.engine._tick_keys`) because the engine converts them to Python objects inside
        a group-by."""
        ...

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int: ...

    def numpy_column(self, frame: Any, column: str) -> Any:
        """A numeric column as the numpy kernels read it (an array or a block reader), or
        None (the engine's own expressions run instead)."""
        ...

    def key_codes(self, frame: Any, column: str, keys: Sequence[Any]) -> np.ndarray | None:
        """Each row's position among the declared ``keys`` (-1: undeclared or missing), or
        None when the numpy kernel cannot match keys on this engine or column."""
        ...

    def leaves_group_by(self, n_keys: int, n_rows: int) -> bool:
        """With ``method="auto"``, leave a group-by of ``n_keys`` keys over ``n_rows`` rows to
        the engine's own group-by (faster there) instead of the numpy kernel."""
        ...

    def expressions(self, frame: Any) -> tuple[Any, Any]:
        """``(namespace, frame)`` the per-row expressions are built in and run on."""
        ...

    def engine_frame(self, frame: Any) -> Any:
        """The narwhals frame bin counts and key observations run on."""
        ...

    def collect(self, result: Any, source: Any = None) -> Any:
        """Collect a (tiny) aggregate result the engine computed lazily; ``source``: the
        native frame it was computed from, if the engine may pick how to run it by it."""
        ...

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """The additive aggregates by an engine-specific path (Spark SQL text, Dask per
        partition), or None for the generic expression path."""
        ...

    def bound_contributions(self, frame: Any, bounding: Bounding, *, columns: Sequence[str],
                            group_by: str | tuple[str, ...] | None,
                            keys: Sequence[Any] | None) -> tuple[Any, FrameEngine]:
        """The frame with each privacy unit's contribution bounded
        (:mod:`dpframe.engine._bounding`), and the adapter of that frame."""
        ...

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        """The frame with the date/datetime ``columns`` as integer ticks."""
        ...

    def tick_kind(self, frame: Any, column: str) -> Any:
        """The Arrow type of a date/datetime column, from its dtype alone."""
        ...

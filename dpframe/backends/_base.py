"""The adapter every engine implements: what dpframe needs to know about one kind of frame.

A :class:`Backend` answers the questions that differ between dataframe libraries (detection,
row count, schema, dtypes, the private snapshot a release reads, the handle given to the user,
the files a frame reads, result tables). Each engine is one subclass in its own module of this
package; the defaults here are the narwhals answers that hold for the lazy engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from dpframe.errors import UnsupportedInputError

__all__ = ["Backend", "duplicate_names", "registered"]


def duplicate_names(names: list[Any]) -> UnsupportedInputError:
    """The error for a frame whose column names repeat (names are public schema)."""
    seen: dict[Any, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    repeated = [f"{name!r} ({n} times)" for name, n in seen.items() if n > 1]
    return UnsupportedInputError(
        f"column names must be unique, but {', '.join(repeated[:5]) or 'some'} repeat: rename "
        "or drop the copies before protecting (a statistic must name one column)"
    )



class Backend:
    """One engine's adapter (a singleton per engine; compare with ``is`` or by ``name``).

    ``name``: as logged; ``family``: the library; ``lazy``: the frame is a plan, not data (its
    size is counted once at protect time); ``readable_plans``: dpframe can read and verify the
    frame's logical plan (Polars LazyFrames), so native derivations are accepted;
    ``result_family``: the library small result tables are built in (pandas for the
    distributed engines: results are a few rows).
    """

    name: ClassVar[str]
    family: ClassVar[str]
    lazy: ClassVar[bool] = True
    readable_plans: ClassVar[bool] = False
    result_family: ClassVar[str] = ""

    def __init__(self) -> None:
        _INSTANCES.setdefault(self.name, self)

    def __repr__(self) -> str:
        return f"<dpframe backend {self.name}>"

    def __reduce__(self) -> Any:  # one adapter per engine, also after pickling
        return (registered, (self.name,))

    @staticmethod
    def detect(obj: Any) -> bool:
        """True for a native frame of this engine; never imports the engine's library (a
        frame of library X can only exist if X is already in ``sys.modules``)."""
        raise NotImplementedError

    @property
    def results_in(self) -> str:
        return self.result_family or self.family

    def count_rows(self, frame: Any, *, fresh: bool = False) -> int:
        """The number of rows (for a lazy frame this runs the plan's count once). ``fresh``:
        count what the source holds now, not a count the engine cached."""
        import narwhals as nw

        return int(nw.from_native(frame).select(nw.len()).lazy().collect().item())

    def schema(self, frame: Any) -> dict[str, Any]:
        """Column name → dtype (native for pandas and Polars, narwhals otherwise), from the
        schema only (no data is read). Repeated column names are refused."""
        import narwhals as nw

        names = list(frame.columns)  # DuckDB, Spark and Dask allow repeated names
        if len(set(names)) != len(names):
            raise duplicate_names(names)
        return dict(nw.from_native(frame).collect_schema().items())

    def column_dtype(self, frame: Any, column: str) -> Any:
        """One column's dtype, as :meth:`schema` gives it (eager engines answer without
        converting the whole schema)."""
        return self.schema(frame)[column]

    def polars_schema(self, frame: Any) -> dict[str, Any]:
        """The frame's schema as Polars dtypes (for verifying expressions on an empty frame)."""
        import narwhals as nw

        return dict(nw.from_native(frame).collect_schema().to_polars().items())

    def snapshot(self, frame: Any) -> Any:
        """dpframe's private copy of a frame it protects or verifies, which later edits of
        the object the user holds can never reach (DESIGN §2: nothing reads the user's mutable
        object after ``protect``). Default: the object itself (an immutable plan)."""
        return frame

    def private_result(self, frame: Any) -> Any:
        """What releases of an eager frame dpframe computed itself (a verified derivation)
        read, which edits of the object handed to the user cannot reach."""
        return frame

    def handout(self, frame: Any) -> Any:
        """The object handed to the user for a derived frame dpframe built (and keeps, as
        what releases read). Default: the same object (immutable plans)."""
        return frame

    def source_paths(self, frame: Any) -> list[str]:
        """The files an engine frame reads, where the engine says so without reading them;
        empty when unknown (tables, in-memory data)."""
        return []

    def bound_files(self, frame: Any) -> tuple[str, ...] | None:
        """Every file the frame's plan reads, as local paths, when the engine fixes that list
        in the plan and says so without reading data; None otherwise (then the row count is
        re-read before each release instead)."""
        return None

    def can_hold_missing(self, dtype: Any) -> bool:
        """Whether a column of this dtype can hold a missing value (null or NaN): a schema
        fact (every Arrow-backed column can)."""
        return True

    def table(self, data: Mapping[str, Sequence[Any]], index: Sequence[Any] | None = None) -> Any:
        """A small result table (eager, even for lazy inputs): pandas or Polars."""
        if self.results_in == "pandas":
            import pandas as pd

            return pd.DataFrame(dict(data), index=None if index is None else list(index))
        import polars as pl

        return pl.DataFrame(dict(data), strict=False)


#: the adapter made for each engine name (its first instance)
_INSTANCES: dict[str, Backend] = {}


def registered(name: str) -> Backend:
    """The adapter of the engine logged as ``name``."""
    try:
        return _INSTANCES[name]
    except KeyError:
        raise UnsupportedInputError(f"no backend named {name!r}") from None

"""The adapter every engine implements: what dpframe needs to know about one kind of frame.

A :class:`Backend` answers the questions that differ between dataframe libraries (detection,
row count, schema, dtypes, the private snapshot a release reads, the handle given to the user,
the files a frame reads, file-reader checks, result tables) and runs the one aggregation pass
of a release (:meth:`Backend.aggregate`: :func:`dpframe.engine._aggregation.aggregate`, which asks
the adapter — the :class:`dpframe.engine._aggregation.FrameEngine` protocol — everything
engine-specific, and the engine-specific paths: Spark SQL, Dask per partition, the numpy kernel of
the in-memory
engines). Each engine is one subclass in its own module of this package; the defaults here
are the narwhals answers that hold for the lazy engines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from dpframe.engine import Bounding
from dpframe.engine import _aggregation as engine
from dpframe.errors import UnsupportedInputError
from dpframe.query import Agg
from dpframe.rowwise.engines import RowwiseTarget

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
    distributed engines: results are a few rows); ``ticks_temporal_keys``: date/datetime group
    columns are grouped as integer ticks (the engine converts them to Python objects inside a
    group-by, which fails on some values); ``fixed_schema``: a frame's schema can never change
    (immutable plans), so a release converts it once; ``carries_handle``: the frame carries
    dpframe's handle to its ledger itself (pandas ``attrs``), instead of an identity registry
    or a plan marker; ``bounds_units``: dpframe bounds a privacy unit's rows on this engine;
    ``object_strings``: an ``object`` column is how the engine holds strings (a valid unit id);
    ``polars_expressions``: ``.dp`` derivations accept Polars expressions (else narwhals
    ones); ``utc_as_fixed_zone``: the engine hands back timestamps of a UTC session zone as
    the fixed ``datetime.UTC``.
    """

    name: ClassVar[str]
    family: ClassVar[str]
    #: the compiler of verified derivations on this engine (:mod:`dpframe.rowwise.engines`)
    rowwise: ClassVar[RowwiseTarget]
    lazy: ClassVar[bool] = True
    readable_plans: ClassVar[bool] = False
    result_family: ClassVar[str] = ""
    ticks_temporal_keys: ClassVar[bool] = False
    fixed_schema: ClassVar[bool] = False
    carries_handle: ClassVar[bool] = False
    bounds_units: ClassVar[bool] = False
    object_strings: ClassVar[bool] = False
    polars_expressions: ClassVar[bool] = False
    utc_as_fixed_zone: ClassVar[bool] = False

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

    def read_file(self, path: str, fmt: str, declared: Mapping[str, str]) -> Any:
        """A release spec's input file as a lazy frame of this engine (``fmt``: "parquet" or
        "csv"; ``declared``: each CSV column's declared type), read by rules that cannot fail
        on any value (:mod:`dpframe.backends._file_inputs`); nothing is read but what the
        engine needs to plan (schema, file list)."""
        raise UnsupportedInputError(f"release specs are not read with {self.name}")

    def buffer_ranges(self, frame: Any) -> list[tuple[int, int]]:
        """The byte ranges of the memory ``frame``'s columns live in (what a copy sharing its
        buffers would share), nothing copied and no plan run; none where the engine holds
        the data out of dpframe's reach."""
        return []

    def source_paths(self, frame: Any) -> list[str]:
        """The files an engine frame reads, where the engine says so without reading them;
        empty when unknown (tables, in-memory data)."""
        return []

    def bound_files(self, frame: Any) -> tuple[str, ...] | None:
        """Every file the frame's plan reads, as local paths, when the engine fixes that list
        in the plan and says so without reading data; None otherwise (then the row count is
        re-read before each release instead)."""
        return None

    def memory_leaves(self, frame: Any) -> list[Any]:
        """The pandas objects an engine plan reads from memory (Dask's ``from_pandas``
        leaves), for the registry of protected memory; nothing is computed. Default: none."""
        return []

    def lineage(self, frame: Any) -> set[str]:
        """Names in the frame's structure that identify what it reads (DuckDB's registered
        objects and generated relation aliases), never its data: a frame naming one that a
        protected frame names derives from it. Default: none."""
        return set()

    def protected(self, frame: Any) -> None:
        """Called once ``frame`` is protected (Dask: its expressions leave Dask's table of live
        expressions, so equal values built later get expressions of their own)."""

    def pass_hooks(self) -> tuple[Callable[[], None] | None, Callable[[], None] | None] | None:
        """How a release's engine passes run: None in this process, directly (no thread, no
        timeout: in-process engines); else ``(enter, cancel)`` for
        :func:`dpframe.release._pipeline.engine_pass`, which runs each pass in a thread under the
        engine
        timeout (``enter`` in that thread first, ``cancel`` when the wait gives up; either may
        be None) -- engines whose workers can all die (Dask, Spark)."""
        return None

    def can_hold_missing(self, dtype: Any) -> bool:
        """Whether a column of this dtype can hold a missing value (null or NaN): a schema
        fact (every Arrow-backed column can)."""
        return True

    def check_usable(self) -> None:
        """Refuse (before anything is read) to run an engine this process cannot use."""

    def user_frame(self, frame: Any) -> Any:
        """The object ``protect`` hands to the user for ``frame``: the same object, unless
        the engine's handle to the ledger rides in the object (then a new one over the same
        data, so the user's own object is left as it was)."""
        return frame

    def namespace_target(self) -> tuple[type, Any] | None:
        """Where ``.dp`` is registered when a frame of this engine is first protected: the
        frame class and the library's accessor registrar (None: set as a property); None for
        engines whose namespace is registered at import (pandas, Polars)."""
        return None

    def no_root_message(self) -> str:
        """Why a frame of this engine without a protected root is refused (no handle, no
        registered identity, no plan dpframe can read)."""
        return (
            f"this {self.name} frame has no protected root: it is not a frame returned by "
            f"dpf.protect or by a .dp derivation of one ({self.name} plans cannot be read by "
            "dpframe, so frames derived with native operations cannot be verified). Derive "
            "from the protected frame with frame.dp.filter(nw.col('age') >= 65) / "
            "frame.dp.with_columns(...) (import narwhals as nw). Nothing was read or spent."
        )

    # -- the aggregation pass (dpframe.engine._aggregation asks these; see FrameEngine)
    # ---------------------
    def aggregate(self, frame: Any, aggs: Sequence[Agg], *, missing: Mapping[str, Any],
                  group_by: str | tuple[str, ...] | None = None,
                  keys: Sequence[Any] | None = None, method: str = "auto",
                  bounding: Bounding | None = None,
                  columns: Mapping[str, Any] | None = None) -> dict[Agg, np.ndarray]:
        """Every aggregate of ``aggs``, exactly, in one pass over ``frame`` (a frame of this
        engine): :func:`dpframe.engine._aggregation.aggregate` with this adapter."""
        return engine.aggregate(frame, aggs, backend=self, missing=missing, group_by=group_by,
                                keys=keys, method=method, bounding=bounding, columns=columns)

    def engine_sums(self, frame: Any, aggs: Sequence[Agg], columns: Mapping[str, Any],
                    missing: Mapping[str, Any], group_by: str | tuple[str, ...] | None,
                    keys: Sequence[Any] | None) -> dict[Agg, np.ndarray] | None:
        """An engine-specific path for the additive aggregates, or None: the per-row
        expressions (:meth:`expressions`) run."""
        return None

    def numpy_column(self, frame: Any, column: str) -> Any:
        """A column as the numpy kernels read it, or None (plans: never)."""
        return None

    def key_codes(self, frame: Any, column: str, keys: Sequence[Any]) -> np.ndarray | None:
        """Each row's position among the declared keys, for the numpy kernel, or None."""
        return None

    def leaves_group_by(self, n_keys: int, n_rows: int) -> bool:
        """Whether ``method="auto"`` leaves such a group-by to the engine's own."""
        return False

    def expressions(self, frame: Any) -> tuple[Any, Any]:
        """``(namespace, frame)`` the per-row expressions are built in: narwhals."""
        import narwhals.stable.v2 as nw

        return nw, nw.from_native(frame)

    def engine_frame(self, frame: Any) -> Any:
        """The narwhals frame bin counts and key observations run on."""
        import narwhals.stable.v2 as nw

        return nw.from_native(frame)

    def collect(self, result: Any, source: Any = None) -> Any:
        """Collect a small lazy aggregate result."""
        return result.collect()

    def bound_contributions(self, frame: Any, bounding: Bounding, *, columns: Sequence[str],
                            group_by: str | tuple[str, ...] | None = None,
                            keys: Sequence[Any] | None = None) -> tuple[Any, Backend]:
        """``frame`` with at most ``k`` rows (and ``g`` groups) per privacy unit, and its
        adapter (:mod:`dpframe.engine._bounding`); only engines with ``bounds_units``."""
        raise AssertionError("privacy units are refused at protect time on this engine")

    def count_units(self, frame: Any, column: str) -> int:
        """The number of distinct non-missing ids of ``column`` (engines with
        ``bounds_units``; read once, at protect)."""
        raise NotImplementedError

    def with_ticks(self, frame: Any, columns: Sequence[str], keep: Any = None) -> Any:
        """The frame with date/datetime ``columns`` as integer ticks (engines with
        ``ticks_temporal_keys``)."""
        raise NotImplementedError

    def tick_kind(self, frame: Any, column: str) -> Any:
        """The Arrow type of a date/datetime column (engines with ``ticks_temporal_keys``)."""
        raise NotImplementedError

    # -- file sources, checked at protect (dpframe.provenance._sources)
    # ------------------------------------
    def check_readers(self, frame: Any) -> None:
        """Refuse (reading no data) a CSV reader whose column types would be inferred from the
        data, or a reader option that makes the rows read differ from the rows counted."""

    def reads_csv(self, frame: Any) -> bool:
        """The frame reads a CSV file (known from its plan, without reading)."""
        return False

    def reads_other_files(self, frame: Any) -> bool:
        """The frame reads files of another format the engine decodes (Parquet, JSON, ...)."""
        return False

    def parse_rows(self, frame: Any) -> int:
        """Read every value of every column once and return the number of rows (a file
        source, at protect: see :func:`dpframe.provenance._sources.parse_in_full`)."""
        raise NotImplementedError

    def invalid_text(self, frame: Any) -> bool:
        """The frame holds a string that is not valid Unicode (see
        :func:`dpframe.provenance._sources.check_strings`). Default: the engine replaces such
        bytes."""
        return False

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

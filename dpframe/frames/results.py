"""Turn release outcomes and log documents into frames of the caller's library."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import numbers
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl

from dpframe import accounting as log_schema
from dpframe.accounting import LOG_COLUMNS
from dpframe.accounting.seals import attach_release_log, attach_release_log_of_blocks
from dpframe.backends import Backend
from dpframe.frames.bins import BIN
from dpframe.query import Keys
from dpframe.release import Outcome
from dpframe.report.views import estimate_html

__all__ = ["LOG_COLUMNS", "Estimate", "QuantileEstimate", "accuracy_table", "bin_edges_columns",
           "describe_frame", "log_frame", "matrix_frame", "quantile_estimate", "release_table",
           "split_table", "to_frame", "with_log"]

T = TypeVar("T")


class Estimate:
    """A released statistic with its confidence interval (``ci=`` on a single query):
    ``lower ≤ true value ≤ upper`` with probability at least ``level``.

    It behaves as the number ``value`` wherever a number is expected: ``float(e)``,
    arithmetic with numbers (``e + 1``, ``2 * e``, ``e / n``, ``-e``, ``round(e)``) and
    comparisons (``e < 3``, ``e == 47.0``) use ``value`` and return plain floats and bools.
    That is post-processing of the released value; the interval does not follow the
    arithmetic (an interval of ``e / n`` needs ``lower / n``, ``upper / n``, which you can
    compute). ``str(e)`` and ``format(e, spec)`` show ``value ± half_width`` (the spec applies
    to both numbers, e.g. ``f"{e:.2f}"``; without one, both are rounded to the second
    significant digit of the half-width: ``47.17 ± 0.90``) when the interval is symmetric
    about the value, and ``value [lower, upper]`` when it is not (an interval cut by a
    bound). It is immutable,
    and unpacks as ``value, lower, upper, level`` (and compares equal to that tuple), as the
    named tuple it used to be did.
    """

    __slots__ = ("level", "lower", "upper", "value")

    value: float
    lower: float
    upper: float
    level: float

    def __init__(self, value: float, lower: float, upper: float, level: float) -> None:
        for name, v in (("value", value), ("lower", lower), ("upper", upper), ("level", level)):
            object.__setattr__(self, name, float(v))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Estimate is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Estimate is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[float, float, float, float]]:
        return (Estimate, self._tuple())

    def _tuple(self) -> tuple[float, float, float, float]:
        return (self.value, self.lower, self.upper, self.level)

    @property
    def half_width(self) -> float:
        """Half the interval's width, ``(upper − lower) / 2``."""
        return (self.upper - self.lower) / 2

    @property
    def symmetric(self) -> bool:
        """Whether the interval is centred on the value (to float rounding)."""
        a, b = self.value - self.lower, self.upper - self.value
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12 * max(1.0, abs(self.value)))

    # -- a tuple, for code written against the named tuple ----------------------------------
    def __iter__(self) -> Iterator[float]:
        return iter(self._tuple())

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> float:
        return self._tuple()[index]

    # -- a number ------------------------------------------------------------------------------
    def __float__(self) -> float:
        return self.value

    def __int__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return self.value != 0

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """NumPy sees the value (a 0-d array), not a sequence of four numbers."""
        return np.asarray(self.value, dtype=dtype)

    def __hash__(self) -> int:
        return hash(self.value)  # equal to its value, so hashed as its value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Estimate):
            return self._tuple() == other._tuple()
        if isinstance(other, tuple):
            return self._tuple() == other
        if isinstance(other, numbers.Real):
            return self.value == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __lt__(self, other: object) -> bool:
        o = _num(other)
        return NotImplemented if o is None else self.value < o

    def __le__(self, other: object) -> bool:
        o = _num(other)
        return NotImplemented if o is None else self.value <= o

    def __gt__(self, other: object) -> bool:
        o = _num(other)
        return NotImplemented if o is None else self.value > o

    def __ge__(self, other: object) -> bool:
        o = _num(other)
        return NotImplemented if o is None else self.value >= o

    def __add__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value + o

    def __radd__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o + self.value

    def __sub__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value - o

    def __rsub__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o - self.value

    def __mul__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value * o

    def __rmul__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o * self.value

    def __truediv__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value / o

    def __rtruediv__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o / self.value

    def __floordiv__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value // o

    def __rfloordiv__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o // self.value

    def __mod__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else self.value % o

    def __rmod__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else o % self.value

    def __pow__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else float(self.value ** o)

    def __rpow__(self, other: object) -> float:
        o = _num(other)
        return NotImplemented if o is None else float(o ** self.value)

    def __neg__(self) -> float:
        return -self.value

    def __pos__(self) -> float:
        return self.value

    def __abs__(self) -> float:
        return abs(self.value)

    def __round__(self, ndigits: int | None = None) -> float:
        return float(round(self.value, ndigits))

    def __trunc__(self) -> int:
        return math.trunc(self.value)

    def __floor__(self) -> int:
        return math.floor(self.value)

    def __ceil__(self) -> int:
        return math.ceil(self.value)

    # -- shown ---------------------------------------------------------------------------------
    def __format__(self, spec: str) -> str:
        if not spec:  # the value to the decimal place of the half-width's 2nd digit
            h = self.half_width
            places = 2 - math.floor(math.log10(h)) - 1 if math.isfinite(h) and h > 0 else None
            spec = "g" if places is None or places > 15 else f".{max(0, places)}f"
        if self.symmetric:
            return f"{format(self.value, spec)} ± {format(self.half_width, spec)}"
        return (f"{format(self.value, spec)} [{format(self.lower, spec)}, "
                f"{format(self.upper, spec)}]")

    def __str__(self) -> str:
        return self.__format__("")

    def __repr__(self) -> str:
        return (f"Estimate(value={self.value!r}, lower={self.lower!r}, upper={self.upper!r}, "
                f"level={self.level!r})")

    def _repr_html_(self) -> str:
        """Notebooks: the value, its interval as a bar, and the level."""
        return estimate_html(self)


def _num(other: object) -> float | None:
    """A plain number (int, float, NumPy scalar, Fraction, an Estimate's value) as a float;
    None for anything else, so NumPy arrays and the like handle the operation themselves."""
    if isinstance(other, Estimate):
        return other.value
    return float(other) if isinstance(other, numbers.Real) else None


class QuantileEstimate(Estimate):
    """A released quantile with its intervals (``ci=`` on ``quantile``/``median``).

    * ``lower``, ``upper`` (as on :class:`Estimate`): an interval *in the column's units*
      that contains the sample quantile (of the values clamped to the bounds, under every
      usual definition) with probability at least ``level`` for every data set. It comes
      from two bracketing releases that spend ``ci_share`` of the query's ε
      (:mod:`dpframe.mechanisms.quantile_intervals`, docs/privacy.md Q.6); with
      ``ci_share=0`` it is the declared bounds.
    * ``rank_error``: the point release's *rank* interval: with probability at least
      ``level`` its chosen bin holds rows within ``rank_error`` ranks of the target rank
      ``q·n``. Where ``n`` is public (the protected frame, no dropped rows) the same
      statement in quantile levels, ``q_lower``/``q_upper``; None where ``n`` is private.

    It behaves as the number ``value`` and unpacks as ``value, lower, upper, level``, like
    :class:`Estimate`.
    """

    __slots__ = ("q_lower", "q_upper", "rank_error")

    rank_error: float
    q_lower: float | None
    q_upper: float | None

    def __init__(self, value: float, lower: float, upper: float, level: float,
                 rank_error: float, q_lower: float | None = None,
                 q_upper: float | None = None) -> None:
        super().__init__(value, lower, upper, level)
        object.__setattr__(self, "rank_error", float(rank_error))
        object.__setattr__(self, "q_lower", None if q_lower is None else float(q_lower))
        object.__setattr__(self, "q_upper", None if q_upper is None else float(q_upper))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (QuantileEstimate, (*self._tuple(), self.rank_error, self.q_lower, self.q_upper))

    def __repr__(self) -> str:
        return (f"QuantileEstimate(value={self.value!r}, lower={self.lower!r}, "
                f"upper={self.upper!r}, level={self.level!r}, rank_error={self.rank_error!r}, "
                f"q_lower={self.q_lower!r}, q_upper={self.q_upper!r})")


def to_frame(out: Outcome, edges: Sequence[float] | None = None) -> Any:
    """One row (ungrouped) or one row per declared key (grouped), one column per query.

    ``edges``: a histogram's public bin edges; its group column (the hidden bin index, whose
    keys are ``0 .. len(edges) - 2``) is then given as the columns ``bin_lower`` and
    ``bin_upper`` (the table is built once, with them in its place)."""
    table = _pandas_float_table(out, edges)
    if table is not None:
        return table
    data: dict[str, Any] = {}
    if edges is not None:
        data["bin_lower"] = np.array(edges[:-1], dtype=np.float64)
        data["bin_upper"] = np.array(edges[1:], dtype=np.float64)
    elif isinstance(out.group_by, str):
        keys = out.keys or ()
        # (a Keys gives int keys as one numpy array: no per-key Python for 100,000 keys; the
        # table gets a copy, never the key list's own array)
        data[out.group_by] = (np.array(keys.column_values) if isinstance(keys, Keys)
                              and isinstance(keys.column_values, np.ndarray)
                              else keys.column_values if isinstance(keys, Keys) else list(keys))
    elif out.group_by is not None:  # several key columns: one output column each
        for i, col in enumerate(out.group_by):
            data[col] = [k[i] for k in out.keys or []]
    for name, vals in out.values.items():  # float64 arrays (copies): no per-value Python
        data[name] = _floats(vals)
        if name in out.intervals:
            lo, hi = out.intervals[name]
            data[f"{name}_lower"] = _floats(lo)
            data[f"{name}_upper"] = _floats(hi)
    if out.key_dtypes is not None and not out.keys:  # no key kept: typed, zero rows
        return _no_rows(out, data)
    return _fresh_table(out.backend, data)


def release_table(out: Outcome, edges: Sequence[float] | None = None) -> Any:
    """:func:`to_frame`'s table carrying the release's log (:func:`with_log`). A pandas table
    made from its blocks (:func:`_pandas_float_parts`) hands the log's seal those blocks and
    labels as its snapshot (:func:`~dpframe.accounting.seals.attach_release_log_of_blocks`:
    copies of the blocks' values, as the seal would read back from the table); any other
    table is sealed as :func:`with_log` seals it."""
    made = _pandas_float_parts(out, edges)
    if made is None:
        return with_log(out, to_frame(out, edges))
    table, blocks, index, columns = made
    attach_release_log_of_blocks(table, out.document, blocks, index, columns,
                                 release_id=out.release_id)
    return table


def _pandas_float_table(out: Outcome, edges: Sequence[float] | None) -> Any:
    """pandas 3: :func:`to_frame`'s table when every column but an int64 key column is
    float64 (a histogram, value counts of int keys, an ungrouped release): the float columns
    converted into one two-dimensional block in one step (the same conversion to float64 as
    column by column), the key column a copy of the key list's array, and the table made
    from these blocks (:func:`_from_blocks`). The same values, dtypes, labels and row index
    as the general path; None for any other table (then that path runs)."""
    made = _pandas_float_parts(out, edges)
    return None if made is None else made[0]


def _pandas_float_parts(out: Outcome, edges: Sequence[float] | None
                        ) -> tuple[Any, list[tuple[np.ndarray, np.ndarray]], Any, Any] | None:
    """:func:`_pandas_float_table`'s table with the blocks and the row and column labels it
    was made from (the table holds these very arrays and label objects), or None."""
    if _from_blocks is None or out.backend.results_in != "pandas" or out.key_dtypes is not None:
        return None
    if edges is None and out.group_by is not None:
        keys = out.keys
        column = keys.column_values if isinstance(keys, Keys) else None
        if not (isinstance(out.group_by, str) and isinstance(column, np.ndarray)
                and column.dtype == np.int64):
            return None
    names, rows = _float_columns(out, edges)
    try:
        block = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError):  # (ragged: not one length)
        return None
    if block.ndim == 1:  # every answer a single number: one row
        block = block[:, None]
    if block.ndim != 2 or not rows:
        return None
    positions = np.arange(len(names), dtype=np.intp)
    if edges is None and out.group_by is not None:  # the key column first
        key = np.array(cast(Keys, out.keys).column_values)
        names.insert(0, cast(str, out.group_by))
        if key.shape != (block.shape[1],):
            return None
        blocks = [(key[None, :], np.zeros(1, dtype=np.intp)), (block, positions + 1)]
    else:
        blocks = [(block, positions)]
    if len(set(names)) != len(names):  # (a repeated name: the general path's dict keeps one)
        return None
    index, columns = _row_index(block.shape[1]), _labels(tuple(names))
    return _table_of_blocks(blocks, index, columns), blocks, index, columns


def _float_columns(out: Outcome, edges: Sequence[float] | None) -> tuple[list[str], list[Any]]:
    """The names and sources of :func:`to_frame`'s float columns, in table order: a
    histogram's edges, then each answer and its interval."""
    names: list[str] = []
    rows: list[Any] = []
    if edges is not None:
        names += ["bin_lower", "bin_upper"]
        rows += [edges[:-1], edges[1:]]
    for name, values in out.values.items():
        names.append(name)
        rows.append(values)
        if name in out.intervals:
            names += [f"{name}_lower", f"{name}_upper"]
            rows += list(out.intervals[name])
    return names, rows


def _fresh_table(backend: Backend, data: dict[str, Any]) -> Any:
    """``backend.table(data)`` for columns no one else holds (new arrays and lists): the
    table takes the arrays without copying them (pandas; columns that are all float64 as one
    two-dimensional block, the same table; numbers of several dtypes from their blocks,
    :func:`_numeric_blocks`), or is built from one Series per column (Polars), which infers
    each column's dtype as the dict constructor does."""
    if backend.results_in == "pandas":
        columns = list(data.values())
        labels = _labels(tuple(data))
        blocks = _numeric_blocks(columns) if columns else None
        if blocks is not None:
            return _from_blocks(blocks, index=_row_index(len(columns[0])), columns=labels)
        if columns and all(isinstance(c, np.ndarray) and c.dtype == np.float64
                           and c.shape == columns[0].shape for c in columns):
            # all float64 (a release's answers, a histogram): one block, built in one step
            return pd.DataFrame(np.column_stack(columns), columns=labels, copy=False)
        table = pd.DataFrame(dict(enumerate(columns)), copy=False)
        table.columns = labels
        return table
    table = _polars_numeric_table(data)
    if table is not None:
        return table
    return pl.DataFrame([pl.Series(name, values) if isinstance(values, np.ndarray)
                         else pl.Series(name, values, strict=False)
                         for name, values in data.items()])


def _polars_numeric_table(data: dict[str, Any]) -> Any:
    """:func:`_fresh_table`'s Polars table when every column is a one-dimensional, aligned,
    C-contiguous, native float64 or int64 numpy array (a histogram, value counts of int
    keys, an ungrouped release): each column made by the constructor ``pl.Series(name,
    array)`` itself calls for such an array, with the same arguments (float64: NaN kept as
    NaN; int64: strict), and the frame from those columns in one call, without the public
    constructors' argument dispatch (about 7 µs per column and 9 µs per frame). The same
    table; None for any other column, or a Polars without these constructors (then the
    public path runs): also for a subclass of ndarray (a masked array) or an empty name."""
    if _PySeries is None or not data:
        return None
    columns = []
    for name, values in data.items():
        # (exactly ndarray: a masked array's mask would be dropped; a name: the public path
        # renames "" to column_0)
        if not (type(values) is np.ndarray and isinstance(name, str) and name
                and values.ndim == 1 and values.dtype.isnative
                and values.flags.c_contiguous and values.flags.aligned):
            return None
        if values.dtype == np.float64:
            columns.append(_PySeries.new_f64(name, values, False))  # (nan_to_null=False)
        elif values.dtype == np.int64:
            columns.append(_PySeries.new_i64(name, values, True))  # (strict=True)
        else:
            return None
    return pl.DataFrame._from_pydf(_PyDataFrame(columns))


def _polars_constructors() -> tuple[Any, Any]:
    """Polars' column and frame constructors (``PySeries``, ``PyDataFrame``), or Nones when
    this Polars does not have them as :func:`_polars_numeric_table` calls them."""
    try:
        from polars._plr import PyDataFrame, PySeries
    except ImportError:  # pragma: no cover - another Polars layout
        return None, None
    if not (hasattr(PySeries, "new_f64") and hasattr(PySeries, "new_i64")
            and hasattr(pl.DataFrame, "_from_pydf")):
        return None, None  # pragma: no cover
    return PySeries, PyDataFrame


_PySeries, _PyDataFrame = _polars_constructors()


try:  # pandas 3: a frame made from its blocks, without the dict constructor's inference
    from pandas.api.internals import create_dataframe_from_blocks as _from_blocks
except ImportError:  # pragma: no cover - pandas 2
    _from_blocks = None


def _table_of_blocks(blocks: list[tuple[np.ndarray, np.ndarray]], index: Any, columns: Any
                     ) -> Any:
    """``create_dataframe_from_blocks(blocks, index=index, columns=columns)`` for blocks
    :func:`_pandas_float_table` made (2-D float64 or int64 numpy arrays of the index's
    length, positions that are together ``0 .. len(columns) - 1``): the same frame made
    from pandas' own block, manager and frame constructors (:func:`_block_constructors`),
    which that function calls with the same arguments, without its per-block dtype
    dispatch and its check of the shapes, which these blocks pass by construction (about
    10 of a warm histogram table's 30 µs). The public function where pandas does not have
    these constructors as called here."""
    made = _BLOCK_CONSTRUCTORS
    if made is None:  # pragma: no cover - another pandas layout
        return _from_blocks(blocks, index=index, columns=columns)
    block, placement, manager = made
    mgr = manager(tuple([block(values, ndim=2, placement=placement(places))
                         for values, places in blocks]), [columns, index],
                  verify_integrity=False)
    return pd.DataFrame._from_mgr(mgr, mgr.axes)


def _block_constructors() -> tuple[Any, Any, Any] | None:
    """pandas' numpy block class, ``BlockPlacement`` and ``BlockManager`` (pandas 3), or None
    when this pandas does not have them as :func:`_table_of_blocks` calls them: then the
    public ``create_dataframe_from_blocks`` runs (tests/frames/test_results_blocks.py
    compares the two tables bit for bit)."""
    if _from_blocks is None:  # pragma: no cover - pandas 2
        return None
    try:
        from pandas._libs.internals import BlockPlacement
        from pandas.core.internals.blocks import NumpyBlock
        from pandas.core.internals.managers import BlockManager
    except ImportError:  # pragma: no cover - another pandas layout
        return None
    if not hasattr(pd.DataFrame, "_from_mgr"):  # pragma: no cover
        return None
    return NumpyBlock, BlockPlacement, BlockManager


_BLOCK_CONSTRUCTORS = _block_constructors()


def _numeric_blocks(columns: list[Any]) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The blocks pandas' own constructors hold for numpy columns of numbers (signed,
    unsigned, float, bool; one length, native byte order), with their positions: columns
    that are all float64 as one two-dimensional block (``pd.DataFrame(np.column_stack(
    columns))``, a copy), otherwise one block per column, a view of its array
    (``pd.DataFrame(dict(enumerate(columns)), copy=False)``: no copy). The constructors infer
    nothing for such arrays (their dtype is the column's), so the table is the same, built
    without their checks. None for any other column (a list of keys, dates, objects: pandas
    infers those), and on pandas 2."""
    if _from_blocks is None:
        return None
    rows = columns[0].shape if isinstance(columns[0], np.ndarray) else None
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 and c.shape == rows
               and c.dtype.kind in "iufb" and c.dtype.isnative for c in columns):
        return None
    if all(c.dtype == np.float64 for c in columns):  # (np.array: the rows stacked, a copy)
        return [(np.array(columns), np.arange(len(columns), dtype=np.intp))]
    return [(c[None, :], np.array([i], dtype=np.intp)) for i, c in enumerate(columns)]


def _labels(names: tuple[str, ...]) -> Any:
    """The column labels of a pandas table with these column names: the index pandas infers
    for them, built once per tuple of names (:func:`_label_index`; public names only), and a
    new index object of them for each table (a view: a table's labels are its own object,
    whose ``name`` can be set; their values, as any index's, cannot be changed)."""
    if not all(type(n) is str for n in names):
        return pd.Index(list(names))
    return _label_index(names).view()  # (a new index object over the same labels)


@functools.lru_cache(maxsize=256)
def _label_index(names: tuple[str, ...]) -> Any:
    return pd.Index(list(names))


def _row_index(rows: int) -> Any:
    """``pd.RangeIndex(rows)``, the row labels the constructors give, as a new index object
    (a view) of one made once per number of rows (public: the number of keys)."""
    return _range_index(rows).view()


@functools.lru_cache(maxsize=64)
def _range_index(rows: int) -> Any:
    return pd.RangeIndex(rows)


def _no_rows(out: Outcome, data: dict[str, Any]) -> Any:
    """The table of a selection that kept no key: every column of a table with keys, each
    key column of the dtype a kept key of its type gives it. Built from one made-up key per
    column (a public constant of the column's dtype, never data) and cut to zero rows, so
    each library infers the key columns exactly as it does for released keys."""
    kinds = out.key_dtypes or {}
    full: dict[str, Any] = {
        name: [_stand_in(kinds[name], out.backend)] if name in kinds
        else np.zeros(1, dtype=np.float64)
        for name in data}
    table = out.backend.table(full)
    return table.iloc[:0] if out.backend.results_in == "pandas" else table.clear()


#: names of UTC in the time-zone database (Spark sessions report ``Etc/UTC``)
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Etc/Universal",
                        "Zulu", "Etc/Zulu"})


def _stand_in(dtype: Any, backend: Backend) -> Any:
    """A Python value of the kind key selection hands back for a column of ``dtype``
    (:mod:`dpframe.release._key_observation`): int, float, bool, str, date, datetime (in the
    column's time zone; Spark hands back its session's UTC as the fixed ``datetime.UTC``),
    Decimal, bytes; None for a dtype selection refuses."""
    if dtype.is_integer():
        return 0
    if dtype.is_float():
        return 0.0
    if dtype == nw.Boolean:
        return False
    if dtype in (nw.String, nw.Categorical) or dtype == nw.Enum:
        return ""
    if dtype == nw.Date:
        return dt.date(1970, 1, 1)
    if dtype == nw.Datetime:
        zone = getattr(dtype, "time_zone", None)
        if zone is None:
            return dt.datetime(1970, 1, 1)
        utc = backend.utc_as_fixed_zone and str(zone) in _UTC_NAMES
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC if utc else zoneinfo.ZoneInfo(str(zone)))
    if dtype == nw.Decimal:  # at the column's scale (Polars infers it from the values)
        scale = getattr(dtype, "scale", None)
        return decimal.Decimal(0) if not scale else decimal.Decimal("0." + "0" * int(scale))
    if dtype == nw.Binary:
        return b""
    return None


def _floats(values: Any) -> Any:
    """``values`` as a new one-dimensional float64 array (a number: one entry)."""
    out = np.array(values, dtype=np.float64)
    return out.reshape(1) if out.ndim == 0 else out


def matrix_frame(matrix: np.ndarray, columns: Sequence[str], backend: Backend,
                 interval: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
    """A labelled square matrix: pandas index and columns are the names; Polars has a leading
    ``column`` column. With an interval, the lower and upper matrices follow, labelled by a
    ``statistic`` level (pandas: an outer index level) of ``estimate``/``lower``/``upper``."""
    parts = [("estimate", matrix)]
    if interval is not None:
        parts += [("lower", interval[0]), ("upper", interval[1])]
    labels = [s for s, _ in parts for _ in columns]
    rows = [c for _ in parts for c in columns]
    data = {c: [float(v) for _, m in parts for v in m[:, j]] for j, c in enumerate(columns)}
    if backend.results_in == "pandas":
        index: Any = (pd.MultiIndex.from_arrays([labels, rows], names=["statistic", None])
                      if interval is not None else list(columns))
        return pd.DataFrame(data, index=index)
    head = {"statistic": labels} if interval is not None else {}
    return backend.table({**head, "column": rows, **data})


def describe_frame(out: Outcome, columns: Sequence[str],
                   bounds: Mapping[str, tuple[float, float]]) -> Any:
    """Rows count, mean, std, lower, upper; one column per described column."""
    with_ci = bool(out.intervals)
    stats = ["count", "mean", "std"]
    rows = [r for s in stats for r in ([s, f"{s}_lower", f"{s}_upper"] if with_ci else [s])]
    rows += ["lower", "upper"]

    def cells(name: str) -> list[float]:
        vals = [float(out.values[name][0])]
        if with_ci:
            lo, hi = out.intervals[name]
            vals += [float(np.atleast_1d(lo)[0]), float(np.atleast_1d(hi)[0])]
        return vals

    data = {
        c: [*cells("count"), *cells(f"mean[{c}]"), *cells(f"std[{c}]"),
            float(bounds[c][0]), float(bounds[c][1])]
        for c in columns
    }
    if out.backend.results_in == "pandas":
        return out.backend.table(data, index=rows)
    return out.backend.table({"statistic": rows, **data})


def log_frame(document: dict[str, Any], backend: Backend | str) -> Any:
    """The log's entries as a frame of ``backend``'s result library (or of the library named:
    "pandas", "polars"); columns in :data:`~dpframe.accounting._log_schema.LOG_COLUMNS`."""
    family = backend if isinstance(backend, str) else backend.results_in
    return log_schema.log_frame(document, family)




def with_log(out: Outcome, table: T) -> T:
    """``table`` carrying the release's log (its key-value metadata when written)."""
    attach_release_log(table, out.document, release_id=out.release_id)
    return table


def quantile_estimate(out: Outcome, name: str, value: float, level: float
                      ) -> QuantileEstimate:
    """The ``ci=`` answer of one quantile: its value interval and rank interval columns."""
    values = out.values
    lo, hi = values.get(f"{name}_q_lower"), values.get(f"{name}_q_upper")
    v_lo, v_hi = out.intervals[name]
    return QuantileEstimate(
        value, float(v_lo[0]), float(v_hi[0]), level, float(values[f"{name}_rank_error"][0]),
        None if lo is None else float(lo[0]), None if hi is None else float(hi[0]))


def bin_edges_columns(table: T, edges: Sequence[float], at: int) -> T:
    """A per-group histogram's table with the hidden bin index replaced by its public edges
    ``bin_lower``, ``bin_upper`` (after the ``at`` group columns, whose dtypes are kept)."""
    frame: Any = table
    index = np.asarray(frame[BIN], dtype=np.int64)
    public = np.asarray(edges, dtype=float)
    lower, upper = public[index], public[index + 1]
    if isinstance(frame, pd.DataFrame):
        out = frame.drop(columns=[BIN])
        out.insert(at, "bin_lower", lower)
        out.insert(at + 1, "bin_upper", upper)
        return cast(T, out)
    return cast(T, frame.drop(BIN).insert_column(at, pl.Series("bin_lower", lower))
                .insert_column(at + 1, pl.Series("bin_upper", upper)))


def accuracy_table(backend: Backend, rows: Sequence[Any]) -> Any:
    """The planner's rows as a table: ``name, query, epsilon, half_width, alpha, mechanisms,
    note`` (and a key selection's ``threshold, min_group_half, min_group_1_alpha``)."""
    fields: tuple[str, ...] = ("name", "query", "epsilon", "half_width", "alpha", "mechanisms",
                               "note")
    if any(r.query == "key selection" for r in rows):  # keys selected from the data
        fields += ("threshold", "min_group_half", "min_group_1_alpha")
    return backend.table({f: [getattr(r, f) for r in rows] for f in fields})


def split_table(backend: Backend, result: Mapping[str, tuple[float, float]],
                targets: Mapping[str, tuple[Any, float]]) -> Any:
    """The planner's split of ε as a table ``name, epsilon, half_width, target``."""
    return backend.table({
        "name": list(result),
        "epsilon": [e for e, _ in result.values()],
        "half_width": [h for _, h in result.values()],
        "target": [float(targets[n][1]) for n in result],
    })

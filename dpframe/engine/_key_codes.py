"""Key codes: each row's key as its position among the declared keys (-1 for undeclared or
missing keys, which are dropped), for the numpy kernels' group-by.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpframe.engine._column_views import _polars_numpy_numbers
from dpframe.query import Keys, key_kinds

__all__ = ["pandas_codes", "polars_codes"]


def pandas_codes(native: Any, group_by: str, keys: Sequence[Any]) -> np.ndarray | None:
    """Position of each row's key (a pandas frame's ``group_by`` column) among the declared
    keys (-1: undeclared or missing), or None when the keys cannot be matched this way (then
    the narwhals path runs)."""
    import pandas as pd

    fast = _pandas_array_codes(_column_array(native, group_by), keys)
    if fast is not None:
        return fast
    declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
    key_col = native[group_by]
    try:
        if isinstance(key_col.dtype, pd.CategoricalDtype):
            if len(key_col.cat.categories) == 0:
                return None
            per_category = declared.get_indexer(key_col.cat.categories)
            cat_codes = key_col.cat.codes.to_numpy()
            return np.where(cat_codes >= 0, per_category[cat_codes], -1)
        codes = _arrow_string_codes(key_col, keys)
        if codes is not None:
            return codes
        if isinstance(key_col.array, pd.arrays.IntegerArray):
            return _masked_int_codes(key_col.array, keys)
        if not isinstance(key_col.dtype, np.dtype):
            # an extension column (Arrow dates, decimals, ...) would be converted value by
            # value to Python objects here, which fails on some values (a date past year
            # 9999): matched inside the engine instead, decided from the dtype alone
            return None
        lookup = _int_lookup(keys, key_col.dtype)
        if lookup is not None:
            return _lookup_codes(key_col.to_numpy(), lookup)
        return np.asarray(declared.get_indexer(key_col), dtype=np.int64)
    except (TypeError, ValueError, IndexError):  # pragma: no cover - unusual key columns
        return None


def _column_array(native: Any, name: str) -> Any:
    """The array a pandas frame holds for column ``name`` without building a Series (which
    costs tens of µs on a frame of several dtypes), or None (a name held by several columns,
    an unknown name, or a pandas without the accessor: then the caller's Series path runs)."""
    get = getattr(native, "_get_column_array", None)
    if get is None:
        return None
    try:
        loc = native.columns.get_loc(name)
    except (KeyError, TypeError):
        return None
    return get(loc) if isinstance(loc, int) else None


def _pandas_array_codes(array: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """:func:`pandas_codes` of the two common columns, from the column's array alone: a
    nullable integer column (:func:`_masked_int_codes`) and a numpy integer column the keys'
    lookup table covers (:func:`_lookup_codes`), the same steps :func:`pandas_codes` takes
    for them; None for any other column (then :func:`pandas_codes` runs its general path)."""
    import pandas as pd

    if isinstance(array, pd.arrays.IntegerArray):
        return _masked_int_codes(array, keys)
    if isinstance(array, np.ndarray):
        lookup = _int_lookup(keys, array.dtype)
        if lookup is not None:
            return _lookup_codes(array, lookup)
    return None


def _masked_int_codes(array: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of a pandas nullable integer column (``Int64`` and the like: a numpy array of
    values and a mask of missing ones, as a histogram's bin column holds its dropped rows):
    looked up as :func:`_lookup_codes` or in the keys' hash index, -1 where a value is
    missing. None for keys that are not all ``int`` (then the engine matches them). Keys
    that are a run of consecutive integers take :func:`_run_codes` (the same codes in one
    step: a histogram's bin column over its bins, a value count of small integer keys)."""
    run = _run_codes(getattr(array, "_data", None), getattr(array, "_mask", None), keys)
    if run is not None:
        return run
    if key_kinds(keys) != {int}:
        return None
    import pandas as pd

    if array.dtype.numpy_dtype == np.uint64:
        return None
    # the values and missing-value mask the array holds (no copy; a missing slot's value is
    # arbitrary and overwritten below), or pandas' own conversion where they are not exposed
    values, missing = getattr(array, "_data", None), getattr(array, "_mask", None)
    if not (isinstance(values, np.ndarray) and isinstance(missing, np.ndarray)):
        missing = np.asarray(array.isna(), dtype=bool)
        values = np.asarray(array.to_numpy(dtype=np.int64, na_value=0))
    lookup = _int_lookup(keys, values.dtype)
    if lookup is not None:
        codes = _lookup_codes(values, lookup)
    else:
        declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
        codes = np.asarray(declared.get_indexer(values), dtype=np.int64)
    if missing.any():
        codes[missing] = -1
    return codes


def _run_codes(values: Any, missing: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Each row's position among ``keys`` (-1: missing, or not a key) for int64 ``values``
    and their missing-value mask (a pandas ``Int64`` array's, read in place; None: no value
    is missing, an eager Polars integer column without nulls) when the keys are a run of
    consecutive integers ``low, low + 1, …`` in that order (:func:`_consecutive_run`): a
    row's position is its value's offset from ``low``, as an unsigned 64-bit integer (a
    value below ``low`` wraps around to above the run, as in :func:`_lookup_codes`), -1
    outside the run or where missing. None otherwise (then the lookup table runs)."""
    if not (isinstance(keys, Keys) and isinstance(values, np.ndarray)
            and (missing is None or isinstance(missing, np.ndarray))
            and values.dtype == np.int64):
        return None
    run = _consecutive_run(keys)
    if run is None:
        return None
    low, k = run
    offset = values.view(np.uint64) - low
    outside = offset >= k
    if missing is not None:
        outside |= missing
    codes = offset.view(np.int64)
    np.putmask(codes, outside, -1)
    return codes


#: Per key list (by identity; the entry holds the list, so the identity stays its own):
#: ``(keys, run)``, ``run`` being ``(low, k)`` as unsigned 64-bit numbers (``low`` modulo
#: 2⁶⁴) when its keys are the integers ``low .. low + k − 1`` in that order, else None.
#: Public facts only (the declared keys), of the :data:`_RUNS_KEPT` lists last added.
_RUNS: dict[int, tuple[Keys, tuple[np.uint64, np.uint64] | None]] = {}
_RUNS_LOCK = threading.Lock()
_RUNS_KEPT = 64
#: The longest key list :data:`_RUNS` keeps (a longer one's check is O(keys), like the
#: result table every query over it builds).
_RUN_KEYS_KEPT = 65_536


def _consecutive_run(keys: Keys) -> tuple[np.uint64, np.uint64] | None:
    """``(low, k)`` (as :class:`numpy.uint64`, ``low`` modulo 2⁶⁴) when ``keys`` are the
    ``k`` integers ``low, low + 1, …`` in that order (from their lookup table,
    :attr:`Keys.int_lookup`: position ``i`` holds key ``low + i``), else None. Worked out
    once per key list (of the last :data:`_RUNS_KEPT` of at most :data:`_RUN_KEYS_KEPT`
    keys)."""
    found = _RUNS.get(id(keys))
    if found is not None and found[0] is keys:
        return found[1]
    run = _run(keys)
    if len(keys) > _RUN_KEYS_KEPT:  # (not kept alive here: a long list is compared again)
        return run
    with _RUNS_LOCK:
        _RUNS[id(keys)] = (keys, run)
        while len(_RUNS) > _RUNS_KEPT:
            del _RUNS[next(iter(_RUNS))]
    return run


def _run(keys: Keys) -> tuple[np.uint64, np.uint64] | None:
    lookup = keys.int_lookup
    if lookup is None:
        return None
    low, table = lookup
    k = table.size - 1
    if k != len(keys) or not np.array_equal(table[:-1], np.arange(k)):
        return None
    return np.uint64(low % (1 << 64)), np.uint64(k)


def polars_codes(key_col: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of an eager Polars key column: integer columns without nulls are read as numpy
    (zero-copy for one chunk) and looked up in pandas' hash index of the keys; String
    columns are matched in Arrow (:func:`_arrow_codes`). None for other dtypes (Polars
    groups them itself)."""
    import pandas as pd

    dtype = key_col.dtype  # (decided from the dtype and the keys alone, never the values)
    if (dtype.is_integer() and dtype in _polars_numpy_numbers() and not key_col.null_count()
            and key_kinds(keys) == {int}):
        values = key_col.to_numpy()
        lookup = _int_lookup(keys, values.dtype)
        if lookup is not None:  # (signed, or unsigned of at most 32 bits: exact as int64)
            run = _run_codes(values.astype(np.int64, copy=False), None, keys)
            return run if run is not None else _lookup_codes(values, lookup)
        declared = keys.pandas_index if isinstance(keys, Keys) else pd.Index(list(keys))
        return np.asarray(declared.get_indexer(values), dtype=np.int64)
    if dtype == _polars_string() and key_kinds(keys) == {str}:
        return _arrow_codes(key_col.to_arrow(), keys)
    return None


def _int_lookup(keys: Sequence[Any], dtype: np.dtype) -> tuple[int, np.ndarray] | None:
    """The keys' lookup table (:attr:`Keys.int_lookup`) when the column's numpy dtype holds
    every value exactly as an int64 (signed integers, unsigned up to 32 bits); else None."""
    if not isinstance(keys, Keys) or not (
            dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize <= 4)):
        return None
    return keys.int_lookup


def _lookup_codes(values: np.ndarray, lookup: tuple[int, np.ndarray]) -> np.ndarray:
    """Each value's key position by table lookup (``lookup = (low, table)``,
    :attr:`Keys.int_lookup`): the value's offset from the lowest key as an unsigned 64-bit
    integer (a value below it wraps around to above the range), capped at the table's last
    cell (-1), read from the table in place. The same codes as the hash lookup."""
    low, table = lookup
    offset = values.astype(np.int64, copy=False).view(np.uint64) - np.uint64(low % (1 << 64))
    np.minimum(offset, np.uint64(table.size - 1), out=offset)
    # every offset is now a valid index (< table.size), so plain indexing needs no bounds mode
    return table[offset.view(np.int64)]


@functools.cache
def _polars_string() -> Any:
    import polars as pl

    return pl.String


def _arrow_codes(column: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Position of each value of an Arrow string array among string ``keys``
    (``pyarrow.compute.index_in`` on the array's buffers; a null matches nothing: -1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    is_view = getattr(pa.types, "is_string_view", None)  # (pyarrow >= 16)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or (is_view is not None and is_view(kind))):
        return None
    found = pc.fill_null(pc.index_in(column, value_set=pa.array(list(keys), type=column.type)),
                         -1)
    # int32, as Arrow gives them: half the memory of int64 codes for a 10 M-row column (the
    # kernels read them block by block, where numpy widens each small block as needed)
    return np.asarray(found.to_numpy(), dtype=np.int32)


def _arrow_string_codes(key_col: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Codes of an Arrow-backed pandas string column (pandas 3's default ``str``), matched in
    Arrow (``pyarrow.compute.index_in`` on the column's own buffers: no Python string per
    row); None for other columns or non-string keys. A missing key (null) matches nothing."""
    dtype = key_col.dtype
    if getattr(dtype, "storage", None) != "pyarrow" and "pyarrow" not in str(dtype):
        return None
    if key_kinds(keys) != {str}:
        return None
    try:
        column = key_col.array.__arrow_array__()
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - not Arrow-backed
        return None
    return _arrow_codes(column, keys)

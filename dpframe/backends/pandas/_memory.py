"""pandas memory: which buffers a pandas frame's columns live in, dpframe's own sealed copy of a
frame, and the sealed copies handed to the user.

:func:`pandas_ranges` lists the byte ranges of a frame's numpy-backed and Arrow-backed columns
without copying (``Backend.buffer_ranges`` of the pandas adapter); :func:`own_pandas` is the
snapshot ``protect`` takes, each buffer copied once into *sealed* memory (:func:`sealed_array`:
numpy memory under a read-only pyarrow buffer, which no view can make writable again);
:func:`hand_out_pandas` is what a derived frame gives the user. The registry of protected
memory is engine-neutral: :mod:`dpframe._util.memory`.
"""

from __future__ import annotations

from typing import Any

from dpframe._util.identity import IdentityMap
from dpframe._util.memory import Range, arrow_ranges, own_arrow, own_cells

__all__ = ["hand_out_pandas", "own_pandas", "pandas_ranges", "seal_pandas", "sealed_array"]


def pandas_ranges(frame: Any) -> list[Range]:
    """The byte ranges of a pandas DataFrame's numpy-backed and Arrow-backed column buffers;
    nothing is copied (other columns give none)."""
    import numpy as np
    import pandas as pd

    out: list[Range] = []
    for _name, series in frame.items():
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biufmM":
            values = series.to_numpy(copy=False)
            start = values.__array_interface__["data"][0]
            if values.nbytes:
                out.append((start, start + values.nbytes))
        elif isinstance(dtype, pd.ArrowDtype):
            chunked = series.array._pa_array  # the Arrow data pandas holds (no copy)
            for chunk in chunked.chunks:
                out += arrow_ranges(chunk)
    return out


#: the array attributes of pandas extension arrays that hold numpy memory (masked arrays:
#: values and mask; datetimes, periods, categoricals, numpy-backed arrays: ``_ndarray``)
_EA_NDARRAYS = ("_ndarray", "_data", "_mask", "_left", "_right", "_sparse_values")


def seal_pandas(frame: Any) -> Any:
    """Seal every numpy array under ``frame``'s columns (in place) and return it: each becomes
    a read-only array over memory no view can reopen (:func:`sealed_array`).

    Under pandas' copy-on-write, ``frame.values`` and ``to_numpy()`` are read-only views, but
    ``frame[c].array`` still writes the shared block in place, and a read-only flag alone does
    not hold: numpy lets anyone set ``writeable`` back on an array that owns its memory, and
    every view leads to that owner through ``.base``. A sealed array's ``.base`` is a
    read-only Arrow buffer that hides the allocation under it, so numpy refuses to make it, or
    any view of it, writable. Object arrays (Python objects cannot live in such a buffer) are
    only flagged read-only. pandas' own operations copy before writing (copy-on-write)."""
    import numpy as np
    import pandas as pd

    for i, (_name, series) in enumerate(frame.items()):
        values = series._values
        if isinstance(values, np.ndarray):
            if values.dtype.hasobject:
                values.flags.writeable = False  # (kept as it is: no inference of its dtype)
            elif not _is_sealed(values):
                frame.isetitem(i, pd.Series(sealed_array(values), index=frame.index, copy=False))
            continue
        sealed = _sealed_extension(values)
        if sealed is not None:
            frame.isetitem(i, pd.Series(sealed, index=frame.index, copy=False))
    return frame


def _sealed_extension(values: Any) -> Any:
    """A pandas extension array over sealed copies of its numpy arrays, or None when they are
    sealed already (or the array keeps none: Arrow-backed). Arrays backed by one ndarray
    (datetimes, timedeltas, periods, categorical codes, numpy-backed strings) are rebuilt
    over it, masked arrays (nullable numbers, booleans) over their values and mask; any other
    kind only has its arrays flagged read-only."""
    import numpy as np

    backing = getattr(values, "_ndarray", None)
    if isinstance(backing, np.ndarray) and hasattr(values, "_from_backing_data"):
        if _is_sealed(backing):
            return None
        if backing.dtype == np.dtype(object):  # (numpy-backed strings: cells owned too)
            backing = own_cells(backing)
        return values._from_backing_data(sealed_array(backing))
    data, mask = getattr(values, "_data", None), getattr(values, "_mask", None)
    if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray):
        if _is_sealed(data) and _is_sealed(mask):
            return None
        return type(values)(sealed_array(data), sealed_array(mask))
    for name in _EA_NDARRAYS:
        array = getattr(values, name, None)
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return None


#: the read-only buffers :func:`sealed_array` made (by identity, while they live)
_SEALED: IdentityMap[bool] = IdentityMap()


def sealed_array(array: Any) -> Any:
    """A read-only copy of a numpy array that nothing can make writable: its memory is a numpy
    allocation wrapped in a read-only ``pyarrow`` buffer (``pa.foreign_buffer``, which does
    not hand out what it wraps), so the array's ``.base`` chain ends in a buffer numpy knows
    to be read-only and ``flags.writeable = True`` is refused on it and on every view. An
    object array gets a copy flagged read-only (Python objects cannot live in such a buffer:
    its holder alone can reach it)."""
    import numpy as np
    import pyarrow as pa

    if array.dtype.hasobject:  # (a copy of its own, flagged: it can be reopened, but only
        copied = array.copy()  # the holder of this copy can reach it)
        copied.flags.writeable = False
        return copied
    target = np.empty_like(array, order="K")
    np.copyto(target, array)
    frozen = pa.foreign_buffer(target.ctypes.data, target.nbytes, base=target)
    _SEALED.set(frozen, True)
    return np.ndarray(target.shape, target.dtype, buffer=frozen, strides=target.strides)


def _is_sealed(array: Any) -> bool:
    """Whether no view of ``array`` can be made writable: its ``.base`` chain ends in a
    read-only buffer that is not an array (object arrays: never)."""
    import numpy as np

    if array.dtype.hasobject:
        return False
    base = array
    while isinstance(base, np.ndarray):
        if base.base is None:
            return False  # an owner: numpy lets its flag be set back
        base = base.base
    return _SEALED.get(base) is not None  # (a read-only view of memory the user can write


def _pandas_arrow(array: Any) -> bool:
    """A pandas array backed by pyarrow (``pd.ArrowDtype``, ``string[pyarrow]``, pandas 3's
    ``str``)."""
    return getattr(array, "_pa_array", None) is not None


def _with_arrow(array: Any, chunked: Any) -> Any:
    """A copy of the Arrow-backed pandas ``array`` (same class and dtype) over ``chunked``."""
    out = object.__new__(type(array))  # (copy.copy pickles an Arrow string array: 50 ms
    out.__dict__.update(vars(array))  # at 2M rows, for nothing)
    out._pa_array = chunked
    if "_cache" in out.__dict__:  # (what pandas derived from the old Arrow data)
        out._cache = {}
    return out


def _mutable_arrow(chunked: Any) -> bool:
    """Whether any buffer of ``chunked`` is writable (e.g. through ``np.frombuffer``)."""
    return any(b is not None and b.is_mutable for chunk in chunked.chunks
               for b in chunk.buffers())


def own_pandas(frame: Any) -> Any:
    """dpframe's byte copy of a pandas DataFrame or Series: numpy columns and the numpy arrays
    of extension arrays (nullable, datetime, categorical codes) copied into sealed memory
    (:func:`seal_pandas`: no view can reopen them), Arrow-backed columns and an
    Arrow-backed index copied buffer by buffer (:func:`own_arrow`; pandas' deep copy keeps the
    same Arrow array), object columns with every mutable cell deep-copied (:func:`own_cells`),
    categoricals with their categories copied too, the index and the column labels (pandas 3
    keeps ``str`` labels in a writable Arrow buffer) rebuilt. One copy of each buffer: the
    frame is copied shallowly first. Serves every engine that holds pandas objects (pandas
    itself, the ``from_pandas`` leaves of a Dask snapshot)."""
    import numpy as np
    import pandas as pd

    if isinstance(frame, pd.Series):
        owned = own_pandas(frame.to_frame(name=0))
        return owned.iloc[:, 0].rename(frame.name)
    out = frame.copy(deep=False)
    for i, (_name, series) in enumerate(out.items()):
        array = series.array
        if _pandas_arrow(array):
            out.isetitem(i, _with_arrow(array, own_arrow(array._pa_array)))
        elif series.dtype == np.dtype(object):
            out.isetitem(i, _object_column(out, own_cells(series.to_numpy(copy=False))))
        elif isinstance(series.dtype, pd.CategoricalDtype):
            out.isetitem(i, _own_categorical(array))
    if not isinstance(out.index, pd.RangeIndex):  # (a RangeIndex holds no buffer; its
        index = out.index.array  # .array would build one of n integers)
        if _pandas_arrow(index):
            out.index = pd.Index(_with_arrow(index, own_arrow(index._pa_array)),
                                 name=out.index.name, copy=False)
        else:
            out.index = out.index.copy(deep=True)
    out.columns = pd.Index(list(out.columns), dtype=out.columns.dtype, name=out.columns.name)
    return seal_pandas(out)


def _object_column(frame: Any, cells: Any) -> Any:
    """``cells`` as a column of ``frame`` that stays of ``object`` dtype (a bare object ndarray
    would be inferred: pandas 3 makes strings its ``str`` dtype, through pyarrow, which also
    fails on a lone surrogate that the strings check refuses with dpframe's own message)."""
    import pandas as pd

    return pd.Series(cells, index=frame.index, dtype=object, copy=False)


def _own_categorical(array: Any) -> Any:
    """A categorical over its (deep-copied) codes and a copy of its categories: a deep copy
    keeps the categories ``Index``, whose buffers (Arrow-backed under pandas 3's ``str``,
    writable through ``np.frombuffer``; numpy through ``.array``) the user's frame shares."""
    import numpy as np
    import pandas as pd

    categories = array.dtype.categories
    values = categories.array
    if _pandas_arrow(values):
        values = _with_arrow(values, own_arrow(values._pa_array))
    elif values.dtype == np.dtype(object):
        values = own_cells(categories.to_numpy())
    else:
        values = sealed_array(categories.to_numpy())
    owned = pd.Index(values, name=categories.name, copy=False)
    dtype = pd.CategoricalDtype(owned, ordered=array.dtype.ordered)
    return pd.Categorical.from_codes(array.codes, dtype=dtype, validate=False)


def hand_out_pandas(frame: Any) -> Any:
    """Prepare ``frame``, a pandas frame dpframe computed from a snapshot and is about to hand
    out (a verified derivation), so that nothing reachable from it writes memory a release
    reads: Arrow columns with a writable buffer (computed by pyarrow) replaced by read-only
    copies, object columns by copies of their mutable cells (the snapshot's cells stay
    dpframe's), numpy arrays sealed (:func:`seal_pandas`: the ones pandas computed are copied,
    the snapshot's are sealed already). In place; returns ``frame``."""
    import numpy as np

    for i, (_name, series) in enumerate(frame.items()):
        array = series.array
        if _pandas_arrow(array) and _mutable_arrow(array._pa_array):
            frame.isetitem(i, _with_arrow(array, own_arrow(array._pa_array)))
        elif series.dtype == np.dtype(object):
            frame.isetitem(i, _object_column(frame, own_cells(series.to_numpy(copy=False))))
    return seal_pandas(frame)

"""dpframe/backends/dask/_adapter.py: the copies a Dask snapshot reads
(``dpframe.backends.pandas._memory.own_pandas``) share no buffer with the user's pandas object,
whatever its dtypes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("dask.dataframe")


def _addresses(frame: pd.DataFrame) -> list[tuple[int, int]]:
    out = []
    for _name, column in frame.items():
        array = column.array
        if hasattr(array, "_pa_array"):
            out += [(b.address, b.address + b.size) for chunk in array._pa_array.chunks
                    for b in chunk.buffers() if b is not None and b.size]
        elif column.dtype != object:
            values = column.to_numpy()
            start = values.__array_interface__["data"][0]
            out.append((start, start + values.nbytes))
    return out


def test_owned_pandas_shares_no_buffer_and_is_read_only():
    from dpframe.backends.pandas._memory import own_pandas as owned_pandas

    x = np.arange(1000.0)
    arrow = pa.table({"a": pa.array(x), "s": pa.array([str(i) for i in range(1000)]),
                      "d": pa.array([str(i % 3) for i in range(1000)]).dictionary_encode(),
                      "l": pa.array([[i] for i in range(1000)])}).slice(10, 900)
    frame = arrow.to_pandas(types_mapper=pd.ArrowDtype).assign(
        n=np.arange(900.0), m=pd.array(range(900), dtype="Int64"),
        t=pd.Series([str(i) for i in range(900)], dtype="str"))
    copy = owned_pandas(frame)
    pd.testing.assert_frame_equal(copy, frame)
    theirs = _addresses(frame)
    for start, end in _addresses(copy):
        assert not any(start < hi and lo < end for lo, hi in theirs)
    with pytest.raises(ValueError):
        copy["n"].array[0] = 5.0  # (copy-on-write does not guard .array)
    x[:] = 0.0
    assert copy["a"].iloc[0] == 10.0


def test_owned_pandas_copies_mutable_object_cells():
    from dpframe.backends.pandas._memory import own_pandas as owned_pandas

    cells = [[1.0], [2.0]]
    frame = pd.DataFrame({"l": pd.Series(cells, dtype=object), "s": ["a", "b"]})
    copy = owned_pandas(frame)
    cells[0][0] = 99.0
    assert copy["l"].tolist() == [[1.0], [2.0]]
    series = owned_pandas(pd.Series(cells, dtype=object))
    cells[1][0] = 99.0
    assert series.tolist() == [[99.0], [2.0]]

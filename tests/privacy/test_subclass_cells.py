"""A cell of a Python-defined subclass of ``str`` (or another built-in value type) is stored
in dpframe's snapshot as the exact built-in value: the subclass's ``__eq__``/``__hash__`` may
read state the user still holds (its class's attributes), and pandas keeps such cells in a
numpy-backed ``'string'`` column and in an object column. Writing that state after ``protect``
changes no release, on neighbouring data sets (review of 2026-11-29: the key counts moved from
399 to 0 before the fix)."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe._util.memory import own_cells


class _Shifty(str):
    """A str whose comparison reads its class's state (the user's, after protect)."""

    state: ClassVar[dict[str, str | None]] = {"as": None}

    def _v(self) -> str:
        return _Shifty.state["as"] or str.__str__(self)

    def __eq__(self, other: object) -> bool:
        return self._v() == (other._v() if isinstance(other, _Shifty) else other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._v())


def _frame(dtype: Any, flip: bool) -> pd.DataFrame:
    keys = [_Shifty("a") if i % 5 == 0 else "abcbc"[i % 5] for i in range(200)]
    if flip:  # the neighbour: one row's key replaced
        keys[1] = "c"
    column = pd.Series(keys, dtype=object) if dtype is object else pd.array(keys, dtype=dtype)
    return pd.DataFrame({"k": column, "x": np.arange(200.0) % 10})


@pytest.mark.parametrize("dtype", [pd.StringDtype("python"), object], ids=["string", "object"])
@pytest.mark.parametrize("flip", [False, True], ids=["data", "neighbour"])
def test_writing_a_subclass_cells_state_after_protect_changes_no_release(
        dtype: Any, flip: bool) -> None:
    _Shifty.state["as"] = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(_frame(dtype, flip), epsilon=100.0, bounds={"x": (0, 10)},
                         keys={"k": ["a", "b", "c"]})
        query = {"n": dpf.count()}
        before = pf.dp.groupby("k").release(query, epsilon=1.0, random_state=3)
        _Shifty.state["as"] = "c"  # every 'a' of the user's frame now compares as 'c'
        try:
            after = pf.dp.groupby("k").release(query, epsilon=1.0, random_state=3)
        finally:
            _Shifty.state["as"] = None
    assert before.equals(after)
    assert list(before.columns) == ["k", "n"] and len(before) == 3


def test_own_cells_rebuilds_python_subclasses_and_keeps_compiled_scalars() -> None:
    class Number(int):
        pass

    cells = np.empty(4, dtype=object)
    cells[:] = [_Shifty("a"), Number(3), np.float64(1.5), np.str_("q")]
    owned = own_cells(cells)
    assert [type(v) for v in owned] == [str, int, np.float64, np.str_]
    assert list(owned) == ["a", 3, 1.5, "q"]

"""Key codes of a pandas nullable integer column over a run of consecutive integer keys, in
one step (a histogram's hidden bin column over its bins ``0 .. B − 1``, a value count of
small integer keys).

The engine's general matching (:func:`dpframe.engine.pandas_codes`) finds the column's
array, the keys' lookup table and then each row's position through several calls; for the
common case of keys ``low, low + 1, …, low + k − 1`` given in that order, a row's position
is its value's offset from ``low``. The codes are the same: the offset as an unsigned 64-bit
integer (a value below ``low`` wraps around to above the run, as in the engine's lookup), a
value outside the run or missing is -1.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpframe.query import Keys

__all__ = ["RUNS_KEPT", "RUN_KEYS_KEPT", "consecutive_run", "nullable_int_codes"]

#: Per key list (by identity; the entry holds the list, so the identity stays its own):
#: ``(keys, run)``, ``run`` being ``(low, k)`` as unsigned 64-bit numbers (``low`` modulo
#: 2⁶⁴) when its keys are the integers ``low .. low + k − 1`` in that order, else None.
#: Public facts only (the declared keys), of the :data:`RUNS_KEPT` lists last added.
_RUNS: dict[int, tuple[Keys, tuple[np.uint64, np.uint64] | None]] = {}
_RUNS_LOCK = threading.Lock()
RUNS_KEPT = 64
#: The longest key list :data:`_RUNS` keeps (a longer one's check is O(keys), like the
#: result table every query over it builds).
RUN_KEYS_KEPT = 65_536


def consecutive_run(keys: Keys) -> tuple[np.uint64, np.uint64] | None:
    """``(low, k)`` (as :class:`numpy.uint64`, ``low`` modulo 2⁶⁴) when ``keys`` are the
    ``k`` integers ``low, low + 1, …`` in that order (from their lookup table,
    :attr:`Keys.int_lookup`: position ``i`` holds key ``low + i``), else None. Worked out
    once per key list (of the last :data:`RUNS_KEPT` of at most :data:`RUN_KEYS_KEPT` keys)."""
    found = _RUNS.get(id(keys))
    if found is not None and found[0] is keys:
        return found[1]
    run = _run(keys)
    if len(keys) > RUN_KEYS_KEPT:  # (not kept alive here: a long list is compared again)
        return run
    with _RUNS_LOCK:
        _RUNS[id(keys)] = (keys, run)
        while len(_RUNS) > RUNS_KEPT:
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


def nullable_int_codes(array: Any, keys: Sequence[Any]) -> np.ndarray | None:
    """Each row's position among ``keys`` (-1: missing, or not a key) for a pandas
    ``Int64`` array (its values and missing-value mask, read in place) when the keys are a
    run of consecutive integers (:func:`consecutive_run`); None otherwise (then the engine's
    general matching runs)."""
    values = getattr(array, "_data", None)
    missing = getattr(array, "_mask", None)
    if not (isinstance(keys, Keys) and isinstance(values, np.ndarray)
            and isinstance(missing, np.ndarray) and values.dtype == np.int64):
        return None
    run = consecutive_run(keys)
    if run is None:
        return None
    low, k = run
    offset = values.view(np.uint64) - low
    outside = offset >= k
    outside |= missing
    codes = offset.view(np.int64)
    np.putmask(codes, outside, -1)
    return codes

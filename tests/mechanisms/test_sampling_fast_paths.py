"""The fast paths of issue 22 give exactly what the general computations give.

* full-precision uniforms: the fast path is the word truncated to 53 significant bits;
* the real-line sampler (plain and clamped mechanisms) draws bit for bit what the per-piece
  sampler draws from the same words, and consumes the same words;
* snapping one value is snapping a one-element array;
* integer keys matched by lookup table get the hash index's codes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe.engine import _aggregation as engine
from dpframe.mechanisms.domains import real_line
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.sampling import _piece_offsets, _real_line_offsets
from dpframe.mechanisms.snapping import snap_to_cells
from dpframe.query._keys import Keys, checked_keys

_EDGES = [0, 1, 2**52 - 1, 2**52, 2**52 + 1, 2**53 - 1, 2**53, 2**53 + 1, 2**54 + 1, 2**54 + 2,
          2**54 + 3, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64 - 2**10, 2**64 - 2**10 - 1,
          2**64 - 2**11, 2**64 - 2**11 + 1, 2**64 - 2**11 - 1, (3 << 60) + 1024, 12345]


class _Words(RandomSource):
    """A source replaying fixed words (and counting them)."""

    def __init__(self, words: np.ndarray) -> None:
        super().__init__(0)
        self._all, self.used = words, 0

    def words(self, n: int) -> np.ndarray:
        out = self._all[self.used : self.used + n]
        assert out.size == n
        self.used += n
        return out


def _check_truncation(lead: np.ndarray) -> None:
    rng = np.random.default_rng(lead.size)
    source = _Words(np.concatenate([lead, rng.integers(1, 2**64, 100, dtype=np.uint64)]))
    u, log_u = source.uniform(lead.size)
    fast = lead >= np.uint64(2**52)
    for w, x in zip(lead[fast].tolist(), u[fast].tolist(), strict=True):
        drop = w.bit_length() - 53
        assert x * 2**64 == (w >> drop) << drop  # exact: both sides are doubles
    assert np.array_equal(log_u[fast], np.log(u[fast]))
    short = int((~fast).sum())
    assert source.used == lead.size + short + int((lead == 0).any())  # fresh mantissas, 0
    assert np.all((u > 0) & (u < 1))


def test_uniform_is_the_word_truncated_to_53_bits() -> None:
    rng = np.random.default_rng(0)
    lead = np.concatenate([np.array(_EDGES, dtype=np.uint64),
                           rng.integers(0, 2**64, 3000, dtype=np.uint64, endpoint=False),
                           rng.integers(2**52, 2**60, 1000, dtype=np.uint64)])
    _check_truncation(lead)  # many words (the signed-conversion route)
    for start in range(0, 400, 40):  # few words (numpy's own conversion)
        _check_truncation(lead[start : start + 40])
    _check_truncation(np.array([2**64 - 1], dtype=np.uint64))


@pytest.mark.parametrize("seed", [0, 1, 2026])
def test_real_line_path_draws_what_the_pieces_draw(seed: int) -> None:
    rng = np.random.default_rng(seed)
    centre = np.concatenate([rng.uniform(-1e6, 1e6, 2000).round(), [0.0, -0.0, 1e300, -5.5]])
    for b in (1e-3, 4.0, 1e6):
        fast_src, slow_src = RandomSource(seed), RandomSource(seed)
        fast = _real_line_offsets(real_line(), centre, b, fast_src)
        slow = _piece_offsets(real_line(), centre, b, slow_src)
        for x, y in zip(fast, slow, strict=True):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
        assert fast_src.words(4).tobytes() == slow_src.words(4).tobytes()  # same words used


def test_snapping_one_value_is_snapping_an_array() -> None:
    args = (2.0**-8, np.array([-np.inf]), np.array([np.inf]), (-10.0, 10.0))
    for anchor, offset in [(1.0, 2.3), (3.0, -0.00390625), (-0.0, 9.999)]:
        one = snap_to_cells(anchor, offset, *args)
        assert isinstance(one, np.floating)
        assert one == snap_to_cells(np.array([anchor]), np.array([offset]), *args)[0]
    bounded = snap_to_cells(np.zeros(3), np.array([0.001, 5.0, 9.999]), 2.0**-4,
                            np.zeros(3), np.full(3, 10.0), (0.0, 10.0))
    assert bounded[0] > 0.0 and bounded[2] < 10.0  # end cells released at their midpoints


def test_lookup_codes_are_the_hash_index_codes() -> None:
    rng = np.random.default_rng(3)
    key_values = sorted(set(rng.integers(-500, 1500, 700).tolist()))
    keys = checked_keys(key_values)
    assert keys.int_lookup is not None
    values = np.concatenate([rng.integers(-2000, 3000, 20000),
                             [np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0]])
    expect = pd.Index(key_values).get_indexer(values)
    for dtype in (np.int64, np.int32):
        got = engine._lookup_codes(values.astype(dtype), keys.int_lookup)
        assert got.dtype == np.int64
        assert np.array_equal(got, pd.Index(key_values).get_indexer(values.astype(dtype)))
    assert np.array_equal(engine._lookup_codes(values, keys.int_lookup), expect)
    small = values[(values >= 0) & (values < 2**31)]
    assert np.array_equal(engine._lookup_codes(small.astype(np.uint32), keys.int_lookup),
                          pd.Index(key_values).get_indexer(small))
    # through the engines' key paths (Polars Int64, pandas int64)
    frame = pd.DataFrame({"k": values})
    assert np.array_equal(engine.pandas_codes(frame, "k", keys), expect)
    assert np.array_equal(engine.polars_codes(pl.Series("k", values), keys), expect)


def test_lookup_table_only_for_dense_distinct_int_keys() -> None:
    assert Keys([0, 10**12]).int_lookup is None  # sparse: the hash index
    assert Keys([True, False]).int_lookup is None  # not ints
    assert Keys([1, 2, 2]).int_lookup is None  # not distinct
    assert Keys([]).int_lookup is None
    low, table = Keys([5, 3, 9]).int_lookup or (0, np.empty(0))
    assert low == 3 and table.tolist() == [1, -1, 0, -1, -1, -1, 2, -1]

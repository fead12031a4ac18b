"""The cumulative counts of one group's bin counts, as the quantile sampler
(:func:`dpframe.mechanisms.quantiles.race_over_runs`) asks for them: the total, the first bin
where ``cum[j] = Σ_{i ≤ j} c_i`` passes a threshold, ``Σ_{i < j} c_i``, and the bins with rows
of a window with ``cum`` at each. Two forms give the same answers, value for value: block
totals with exact prefix sums inside the blocks a draw looks at (:class:`CumulativeCounts`:
large grids, where the window a draw reads is narrow), and the bins with rows found by one
scan (:class:`NonzeroCounts`: small grids, where the window covers most bins).
"""

from __future__ import annotations

import numpy as np

__all__ = ["NONZERO_RANKS_MAX_BINS", "CumulativeCounts", "NonzeroCounts", "Ranks"]


class CumulativeCounts:
    """The cumulative counts ``cum[j] = Σ_{i ≤ j} c_i`` of one group, on demand: block totals
    from one read-only pass (no ``B``-sized array: at 2^22 bins a fresh cumulative array costs
    more than the whole draw), exact prefix sums only inside the blocks a draw looks at. The
    counts may be int64 or integer-valued doubles (``QuantileMechanism.sample`` with
    ``exact_counts``): every sum is an integer below 2^53, exact in either."""

    BLOCK = 1024

    def __init__(self, counts: np.ndarray, block_totals: np.ndarray | None = None) -> None:
        """``block_totals``: the rows of each block of :data:`BLOCK` bins (the last block may
        be short), when known (then ``counts`` is read only where a draw looks:
        :func:`~dpframe.mechanisms.quantiles.fine_blocks_read`); computed from ``counts``
        otherwise."""
        self.counts = counts
        self.size = b = counts.size
        if block_totals is None:
            block_totals = self.block_totals(counts)
        self.block_end = np.cumsum(block_totals)  # cum at the last bin of each block
        self.total = int(self.block_end[-1]) if b else 0

    @classmethod
    def block_totals(cls, counts: np.ndarray) -> np.ndarray:
        """The rows of each block of :data:`BLOCK` bins of ``counts`` (the last one short)."""
        k = cls.BLOCK
        b = counts.size
        full = b // k * k
        sums = counts[:full].reshape(-1, k).sum(axis=1) if full else np.zeros(0, np.int64)
        if full < b:
            sums = np.append(sums, counts[full:].sum())
        return sums

    def searchsorted(self, x: np.int64, side: str) -> int:
        """``numpy.searchsorted(cum, x, side)`` (``cum`` does not decrease)."""
        block = int(np.searchsorted(self.block_end, x, side=side))  # type: ignore[call-overload]
        if block >= self.block_end.size:
            return self.size
        lo = block * self.BLOCK
        local = self.before(lo) + np.cumsum(self.counts[lo:lo + self.BLOCK])
        return lo + int(np.searchsorted(local, x, side=side))  # type: ignore[call-overload]

    def before(self, j: int) -> int:
        """``Σ_{i < j} c_i`` (0 for ``j = 0``)."""
        block = j // self.BLOCK
        base = int(self.block_end[block - 1]) if block else 0
        return base + int(self.counts[block * self.BLOCK:j].sum())

    def span(self, lo: int, hi: int) -> np.ndarray:
        """``cum[lo:hi]``."""
        return self.before(lo) + np.cumsum(self.counts[lo:hi])

    def window(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The bins with rows in ``[first, last)`` (increasing), their rows and ``cum`` at
        each (int64), and ``cum[first − 1]`` (0 for ``first = 0``): read from the counts of
        the window only (on booleans: several times faster than on the counts)."""
        nz = np.nonzero(self.counts[first:last] != 0)[0] + first
        base = self.before(first)
        rows = self.counts[nz].astype(np.int64)
        return nz, rows, np.cumsum(rows) + base, base


class NonzeroCounts:
    """The same answers as :class:`CumulativeCounts` (``total``, :meth:`searchsorted`,
    :meth:`before`, :meth:`window`, equal value for value) from the bins with rows: one
    read-only pass over the counts finds them, and ``cum`` is formed at them only (``cum``
    is constant between two of them). For a few thousand bins or more with few rows (a small
    table on the default grid of 2^16 bins) this pass replaces the block totals' pass *and*
    the window's own scan: the window then covers most bins (every row lies within ``C/λ``
    ranks of the target), and each later question is a binary search of the rows' bins.
    ``QuantileMechanism.sample`` picks it from the public number of bins
    (:data:`NONZERO_RANKS_MAX_BINS`)."""

    def __init__(self, counts: np.ndarray) -> None:
        self.size = counts.size
        self.bins = np.nonzero(counts != 0)[0]
        self.rows = counts[self.bins].astype(np.int64)
        self.cum = np.cumsum(self.rows)  # cum at each bin with rows
        self.total = int(self.cum[-1]) if self.cum.size else 0

    def searchsorted(self, x: np.int64, side: str) -> int:
        """``numpy.searchsorted(cum, x, side)``: the first bin with ``cum > x`` (``"right"``)
        or ``cum ≥ x`` (``"left"``), ``B`` when there is none. ``cum ≥ 0`` everywhere, so it
        is bin 0 when ``x < 0`` (``x ≤ 0``); otherwise ``cum`` must have grown, and it grows
        at a bin with rows only: the first such bin whose ``cum`` qualifies."""
        if x < 0 or (side == "left" and x == 0):
            return 0
        k = int(np.searchsorted(self.cum, x, side=side))  # type: ignore[call-overload]
        return int(self.bins[k]) if k < self.bins.size else self.size

    def before(self, j: int) -> int:
        """``Σ_{i < j} c_i`` (0 for ``j = 0``): ``cum`` at the last bin with rows below
        ``j``."""
        k = int(np.searchsorted(self.bins, j, side="left"))
        return int(self.cum[k - 1]) if k else 0

    def window(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """As :meth:`CumulativeCounts.window`: slices of the arrays of bins with rows."""
        k1, k2 = np.searchsorted(self.bins, (first, last), side="left").tolist()
        base = int(self.cum[k1 - 1]) if k1 else 0
        return self.bins[k1:k2], self.rows[k1:k2], self.cum[k1:k2], base


#: Up to this many bins (the default grid's 2^16 and coarser) ``QuantileMechanism.sample``
#: finds the cumulative counts with :class:`NonzeroCounts` (one scan of the counts), above it
#: with :class:`CumulativeCounts` (block totals: the window a draw reads is then narrow
#: unless the table is small). Both give every draw the same bin for the same random bits.
NONZERO_RANKS_MAX_BINS = 2**16

Ranks = CumulativeCounts | NonzeroCounts

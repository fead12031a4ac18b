"""Random bits and full-precision uniforms.

The secure source reads the operating system's CSPRNG (:func:`os.urandom`); a seeded source
(an ``int`` or a :class:`numpy.random.Generator`) exists for tests and simulations only, and
every release records which one it used.

**Full-precision uniforms** (Gazeau et al. §5.3; Mironov 2012). ``U`` is the real uniform on
(0, 1) rounded *down* to a double, so every double ``d`` in (0, 1) comes out with probability
equal to the length of the reals that round down to it. We draw it as Gazeau §5.3 suggests: an
exponent ``k ≥ 1`` with ``P(k) = 2^-k`` (count the leading zero bits of a random stream) and an
independent uniform 52-bit mantissa ``m`` (the bits that follow the first one bit, which are
independent of its position), so ``U = (1 + m 2^-52) 2^-k``. Below ``2^-1022``
(probability ``2^-1022``) ``log U`` is computed from ``(k, m)`` as ``log1p(m 2^-52) - k ln 2``,
which stays accurate where ``U`` itself would be subnormal. The bit stream is capped at 2048
bits, an event of probability ``2^-2048``.
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

from dpframe.errors import ParameterError

__all__ = ["RandomSource", "RandomState"]

RandomState = Union[int, np.random.Generator, None]  # noqa: UP007 - runtime alias

_LN2 = float(np.log(2.0))
_MAX_WORDS = 32  # 32 * 64 = 2048 bits of leading zeros at most
_TWO_52 = np.uint64(1 << 52)
_BELOW_2_64 = float(2**64 - 2**11)  # the largest double below 2^64
_FEW_WORDS = 64  # up to this many words, numpy's (slow) uint64 conversion costs less


def _bit_length32(x: np.ndarray) -> np.ndarray:
    """Bit length of values < 2**32 (exact: such values are exact doubles)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def _leading_zeros64(w: np.ndarray) -> np.ndarray:
    hi = w >> np.uint64(32)
    lo = w & np.uint64(0xFFFFFFFF)
    return np.where(hi > 0, 32 - _bit_length32(hi), 64 - _bit_length32(lo))


class RandomSource:
    """A stream of random 64-bit words, secure unless seeded."""

    #: bytes the secure source reads per :func:`os.urandom` call for :meth:`word` (four words:
    #: a scalar draw takes two or three)
    WORD_BUFFER_BYTES = 32

    def __init__(self, random_state: RandomState = None) -> None:
        self._buffer = b""  # unread secure bytes for :meth:`word`, each used once
        self._position = 0
        if random_state is None:
            self._rng: np.random.Generator | None = None
        elif isinstance(random_state, np.random.Generator):
            self._rng = random_state
        elif (isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
              and random_state >= 0):
            self._rng = np.random.default_rng(int(random_state))
        else:

            raise ParameterError(
                "random_state must be None (secure), a non-negative int seed or a numpy "
                f"Generator; got {random_state!r}"
            )

    @property
    def kind(self) -> str:
        """``"secure"`` (OS CSPRNG) or ``"seeded"`` (reproducible; tests and simulations)."""
        return "secure" if self._rng is None else "seeded"

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words."""
        if self._rng is None:
            # read-only and uncopied: every caller derives new arrays from the words
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        out = self._rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
        out.flags.writeable = False  # as the secure words: no caller may write into them
        return out

    def word(self) -> int:
        """One uniform 64-bit word as a Python integer.

        Seeded: the next word of :meth:`words` (the same stream, word for word). Secure: the
        next 8 unread bytes of a buffer filled by one :func:`os.urandom` call per
        :attr:`WORD_BUFFER_BYTES` (every byte still comes from the OS CSPRNG and is used once;
        the buffer lives and dies with this source, which serves one release)."""
        if self._rng is not None:
            return int(self.words(1)[0])
        start = self._position
        if start + 8 > len(self._buffer):
            self._buffer, start = os.urandom(self.WORD_BUFFER_BYTES), 0
        self._position = start + 8
        return int.from_bytes(self._buffer[start:start + 8], "little")

    def coins(self, n: int) -> np.ndarray:
        """``n`` independent fair coins (booleans).

        Seeded: the lowest bit of each of the next ``n`` words of :meth:`words` (the same
        stream, word for word, as before this method existed, so seeded draws are
        bit-identical). Secure: ``n`` bits of one :func:`os.urandom` read of ``⌈n/8⌉``
        bytes, each bit used once: the OS bits are independent and uniform, so the coins
        have the same joint law as the seeded form's, at an eighth of a byte each instead of
        eight bytes (``tests/mechanisms/test_quantile_sampler_reference.py``)."""
        if self._rng is not None:
            return (self.words(n) & np.uint64(1)).astype(bool)
        packed = np.frombuffer(os.urandom(-(-n // 8)), dtype=np.uint8)
        return np.unpackbits(packed, count=n).view(bool)

    def uniform(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` full-precision uniforms on (0, 1): returns ``(U, log U)``."""
        u, short, log_short = self._uniform(n)
        if short is None or log_short is None:
            return u, np.log(u)
        log_u = np.log(np.where(short, 1.0, u))
        log_u[short] = log_short
        return u, log_u

    def uniform_values(self, n: int) -> np.ndarray:
        """``n`` full-precision uniforms on (0, 1), without their logs (for comparisons)."""
        return self._uniform(n)[0]

    def uniform_pair(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(V, W, log W)``: ``n`` full-precision uniforms ``V`` (without logs, for
        comparisons) and ``n`` more ``W`` with their logs, all ``2n`` independent -- what
        :meth:`uniform_values` then :meth:`uniform` return.

        Seeded: exactly those two calls, so the words are read in the same order and seeded
        draws stay bit-identical. Secure: one batch of ``2n`` uniforms from one read of the OS
        CSPRNG, ``V`` the first ``n`` and ``W`` the last ``n``. Each uniform is a function of
        its own OS words only (its leading word; on the general path, probability 2^-12, also
        further words read after the batch, each used once), and the OS words are independent
        and uniform, so the ``2n`` uniforms are independent full-precision uniforms whichever
        order their words are read in: the same joint distribution as the two calls
        (``tests/mechanisms/test_uniform_pair.py`` checks it on many draws)."""
        if self._rng is not None:
            v = self.uniform_values(n)
            w, log_w = self.uniform(n)
            return v, w, log_w
        u, short, log_short = self._uniform(2 * n)
        v, w = u[:n], u[n:]
        if short is None or log_short is None:
            return v, w, np.log(w)
        short_w = short[n:]
        log_w = np.log(np.where(short_w, 1.0, w))
        log_w[short_w] = log_short[int(np.count_nonzero(short[:n])):]  # (in position order)
        return v, w, log_w

    def _uniform(self, n: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``(U, short, log U[short])``: ``short`` marks the words that took the general path
        (None, with its logs, when no word did).

        Fast path (a word of at least 2^52, probability 1 - 2^-12): the first one bit is
        among the top 12, so the word holds the 52 bits after it, and ``U`` -- the real
        ``(word + V)/2^64`` rounded down to a double -- is the word truncated to 53
        significant bits, times 2^-64. The word is rounded to the nearest double as
        ``hi + lo`` (``hi`` its top 53 bits times 2^11, ``lo`` its low 11 bits: both exact
        doubles, converted from signed integers, and the sum rounds once); where that rounded
        up (``f - hi > lo``, a difference Sterbenz's lemma makes exact), the next double below
        (the bit pattern minus one, ``f`` being positive) is the truncation. A word that
        rounds up to 2^64 thus truncates to 2^64 - 2^11. (For a few words, numpy's own
        conversion rounds them, 2^64 capped to the double below it, which gives the same
        values with fewer calls.) The other words take the general
        path (:meth:`_uniform_general`), which draws the mantissa from a fresh word; both
        paths give bit-identical values and consume the same words."""
        lead = self.words(n)
        if n <= _FEW_WORDS:  # fewer numpy calls: the same rounding by numpy's own conversion
            f = lead.astype(np.float64)
            np.minimum(f, _BELOW_2_64, out=f)  # (2^64 itself does not convert back)
            over = f.astype(np.uint64) > lead
        else:  # numpy converts signed integers to doubles much faster than unsigned ones
            hi = (lead >> np.uint64(11)).view(np.int64).astype(np.float64)  # exact: < 2^53
            hi *= 2048.0
            lo = (lead & np.uint64(0x7FF)).view(np.int64).astype(np.float64)  # exact
            f = hi + lo
            over = np.subtract(f, hi, out=hi) > lo
        bits = f.view(np.int64)
        bits -= over.view(np.int8)  # the next double below where the sum rounded up
        u = np.multiply(f, 2.0**-64, out=f)
        if not n or np.minimum.reduce(lead) >= _TWO_52:  # (one reduction: no word is short)
            return u, None, None
        short = lead < _TWO_52
        u[short], log_short = self._uniform_general(lead[short])
        return u, short, log_short

    def _uniform_general(self, lead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(U, log U)`` for any leading words: the exponent ``k`` from the leading zero
        bits (continued into further words while they are all zero), the 52-bit mantissa
        from the bits after the first one when at least 52 remain, else from a fresh word."""
        k = _leading_zeros64(lead) + 1  # position of the first one bit
        shift = np.minimum(k, 12).astype(np.uint64)
        mant_words = (lead << shift) >> np.uint64(12)
        short = k > 12
        if short.any():
            mant_words[short] = self.words(int(short.sum())) >> np.uint64(12)
        zero = lead == 0
        extra = 0
        while zero.any() and extra < _MAX_WORDS:  # P(all 64 bits zero) = 2^-64 per word
            idx = np.flatnonzero(zero)
            more = self.words(idx.size)
            k[idx] = 64 * (extra + 1) + _leading_zeros64(more) + 1
            zero[idx] = more == 0
            extra += 1
        mant = mant_words.astype(np.float64) * 2.0**-52  # 52 bits: exact, in [0, 1)
        u = np.ldexp(1.0 + mant, -k)
        # log U: directly while U is a normal double, from (k, m) below 2^-1022 (probability
        # 2^-1022), where U itself loses mantissa bits
        tiny = k > 1022
        log_u = np.log(np.where(tiny, 1.0, u))
        if tiny.any():
            log_u = np.where(tiny, np.log1p(mant) - k.astype(np.float64) * _LN2, log_u)
        return u, log_u

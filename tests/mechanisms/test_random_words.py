"""RandomSource.word: the seeded stream word for word, and the secure source's bytes read in
blocks from the OS CSPRNG, each used once."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dpframe.mechanisms import randomness
from dpframe.mechanisms.randomness import RandomSource


def test_seeded_word_is_the_words_stream() -> None:
    a, b = RandomSource(7), RandomSource(7)
    assert [a.word() for _ in range(9)] == [int(w) for w in b.words(9)]


def test_secure_word_uses_each_urandom_byte_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[bytes] = []
    real_urandom = os.urandom

    def recording_urandom(n: int) -> bytes:
        reads.append(real_urandom(n))
        return reads[-1]

    monkeypatch.setattr(randomness.os, "urandom", recording_urandom)
    source = RandomSource()
    words = [source.word() for _ in range(10)]
    stream = b"".join(reads)
    assert len(reads) == 3 and all(len(r) == RandomSource.WORD_BUFFER_BYTES for r in reads)
    assert words == [int.from_bytes(stream[8 * i:8 * i + 8], "little") for i in range(10)]
    assert source.kind == "secure"


def test_secure_words_look_uniform() -> None:
    source = RandomSource()
    words = np.array([source.word() for _ in range(4000)], dtype=np.uint64)
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 0.05)  # each bit position: 8 sigma of 4,000 draws
    assert len(set(words.tolist())) == words.size

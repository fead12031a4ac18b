"""The content check of a file root runs beside the engine's read
(:class:`dpframe.provenance._binding.ContentCheck`, joined by
``dpframe.release._pipeline._join_check`` before any noise is drawn): a same-size rewrite —
before the release or during its read — is refused with nothing spent, nothing logged and the
ledger not locked, whatever the read returned or raised; neighbouring files meet the same
outcome."""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpframe as dpf
from dpframe.provenance import _binding
from dpframe.release import _pipeline

N = 200


def _values(replaced: float | None = None) -> np.ndarray:
    x = np.random.default_rng(7).uniform(10.0, 99.0, N).round(6)
    if replaced is not None:
        x[3] = replaced  # a neighbour: one row's value replaced
    return x


def _bytes(x: np.ndarray, folder: Path) -> bytes:
    """Uncompressed Parquet, no dictionary or statistics: its size depends on ``N`` only."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = folder / "tmp.parquet"
    pq.write_table(pa.table({"x": x}), tmp, compression="none", use_dictionary=False,
                   write_statistics=False)
    data = tmp.read_bytes()
    tmp.unlink()
    return data


def _rewrite(path: Path, data: bytes) -> None:
    """Same size, same inode, modification time put back: only the content differs."""
    before = os.stat(path)
    assert len(data) == before.st_size
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _protected(path: Path, x: np.ndarray) -> Any:
    import polars as pl

    path.write_bytes(_bytes(x, path.parent))
    return dpf.protect(pl.scan_parquet(path), epsilon=2.0, bounds={"x": (0.0, 100.0)},
                       missing=0.0)


def _during_read(monkeypatch: pytest.MonkeyPatch, path: Path, data: bytes,
                 fail: bool = False) -> list[str]:
    """Arrange, deterministically, a rewrite of ``path`` while the release reads it: the
    digest thread waits until the read has rewritten the file (and then, with ``fail``,
    raised an error quoting a value, as an engine's reader might on a file that is not the
    protected one). Returns the names of the threads that took the digest."""
    rewritten = threading.Event()
    threads: list[str] = []
    unchanged = _binding.file_unchanged
    aggregate = _pipeline._aggregate

    def late_digest(*args: Any) -> bool:
        threads.append(threading.current_thread().name)
        rewritten.wait(30)
        return unchanged(*args)

    def read(*args: Any) -> Any:
        _rewrite(path, data)
        rewritten.set()
        if fail:
            raise ValueError("value 42.5 in row 3")
        return aggregate(*args)

    monkeypatch.setattr(_binding, "file_unchanged", late_digest)
    monkeypatch.setattr(_pipeline, "_aggregate", read)
    return threads


@pytest.mark.parametrize("replaced", [None, 99.0])  # neighbouring files: one row replaced
@pytest.mark.parametrize("when", ["before", "during", "during-failing"])
def test_a_rewrite_is_refused_with_nothing_spent(tmp_path, monkeypatch, when, replaced):
    path = tmp_path / "people.parquet"
    p = _protected(path, _values(replaced))
    p.dp.mean("x", epsilon=1.0, random_state=1)  # the untouched file is answered
    entries = len(p.dp.log)
    other = _bytes(_values(replaced) + 0.5, tmp_path)  # same size, other content
    threads = ["dpframe-content-check"]
    if when == "before":
        _rewrite(path, other)
    else:
        threads = _during_read(monkeypatch, path, other, fail=when == "during-failing")
    with pytest.raises(dpf.SourceChangedError) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.dp.mean("x", epsilon=1.0, random_state=1)
    message = str(caught.value)
    assert "42" not in message and caught.value.__cause__ is None
    assert caught.value.__context__ is None
    assert p.dp.budget.epsilon_spent == 1.0 and len(p.dp.log) == entries
    assert threads == ["dpframe-content-check"]
    monkeypatch.undo()
    _rewrite(path, _bytes(_values(replaced), tmp_path))  # the protected bytes, put back
    # answered with the budget's last ε: the refused release holds, spends or locks nothing
    p.dp.mean("x", epsilon=1.0, random_state=1)
    assert p.dp.budget.epsilon_spent == 2.0


def test_a_changed_file_is_reported_before_an_exhausted_budget(tmp_path):
    path = tmp_path / "people.parquet"
    p = _protected(path, _values())
    p.dp.mean("x", epsilon=2.0, random_state=1)  # the whole budget
    _rewrite(path, _bytes(_values() + 0.5, tmp_path))
    with pytest.raises(dpf.SourceChangedError):
        p.dp.mean("x", epsilon=1.0, random_state=1)


def test_the_digest_runs_beside_the_read(tmp_path, monkeypatch):
    """The digest thread is still running when the read starts (it waits for the read here),
    and is joined before the answer: the release is answered once both finished."""
    path = tmp_path / "people.parquet"
    p = _protected(path, _values())
    started = threading.Event()
    unchanged = _binding.file_unchanged
    aggregate = _pipeline._aggregate

    def late_digest(*args: Any) -> bool:
        started.wait(30)  # (a timeout would show as a refusal below)
        return unchanged(*args)

    def read(*args: Any) -> Any:
        started.set()
        return aggregate(*args)

    monkeypatch.setattr(_binding, "file_unchanged", late_digest)
    monkeypatch.setattr(_pipeline, "_aggregate", read)
    assert np.isfinite(p.dp.mean("x", epsilon=1.0, random_state=1))
    assert p.dp.budget.epsilon_spent == 1.0


def test_a_plan_of_no_files_is_checked_without_a_thread(monkeypatch):
    import polars as pl

    started: list[str] = []
    start = threading.Thread.start

    def spy(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    no_files = _binding.ContentCheck({}, {})
    assert not no_files.decided and not no_files.changed()
    assert _binding.ContentCheck({}, {"gone.parquet": b"x"}).changed()  # (a file went)
    assert _binding.ContentCheck(None).decided and _binding.ContentCheck(None).changed()
    frame = dpf.protect(pl.DataFrame({"x": _values()}).lazy(), epsilon=2.0,
                        bounds={"x": (0.0, 100.0)}, missing=0.0)
    monkeypatch.setattr(threading.Thread, "start", spy)
    assert np.isfinite(frame.dp.mean("x", epsilon=1.0))
    assert "dpframe-content-check" not in started

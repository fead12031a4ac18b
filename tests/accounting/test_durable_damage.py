"""The damage matrix of issue 11: every kind of damage to a durable ledger either raises
``LedgerError`` (on open, and in ``read_ledger_file``) without touching the files, or recovers
exactly the acknowledged history. Nothing ever reads as less spent. Also: files deleted,
replaced or truncated while a session has them open."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpframe.accounting.durable import DurableLedger, head_path, read_ledger_file
from dpframe.errors import LedgerError

N = 8  # acknowledged releases of ε = 0.1 each: 0.8 spent


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with DurableLedger(path, 1.0) as led:
        for i in range(N):
            assert led.commit(led.reserve(0.1), [{"tag": i}]) == i + 1
    return path


def _lines(path):
    return path.read_bytes().split(b"\n")[:-1]


def _write_lines(path, lines):
    path.write_bytes(b"".join(x + b"\n" for x in lines))


def _rehash(raw: bytes, **changes) -> bytes:
    rec = json.loads(raw)
    rec.update(changes)
    rec.pop("hash")
    body = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    rec["hash"] = hashlib.sha256(body).hexdigest()
    return json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()


def _other_ledger(tmp_path, n=3):
    other = tmp_path / "other" / "ledger.jsonl"
    other.parent.mkdir()
    with DurableLedger(other, 1.0) as led:
        for i in range(n):
            led.commit(led.reserve(0.1), [{"tag": 100 + i}])
    return other


# -- damage that must be refused -------------------------------------------------------------
def d_lose_final_newline(p, t):
    p.write_bytes(p.read_bytes()[:-1])


def d_truncate_mid_file(p, t):
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def d_truncate_at_line_boundary(p, t):
    _write_lines(p, _lines(p)[:-1])


def d_truncate_to_header(p, t):
    _write_lines(p, _lines(p)[:1])


def d_truncate_inside_header(p, t):
    p.write_bytes(_lines(p)[0][:40])


def d_truncate_to_zero(p, t):
    p.write_bytes(b"")


def d_delete_middle_line(p, t):
    lines = _lines(p)
    del lines[3]
    _write_lines(p, lines)


def d_duplicate_line(p, t):
    lines = _lines(p)
    _write_lines(p, [*lines[:4], lines[3], *lines[4:]])


def d_swap_lines(p, t):
    lines = _lines(p)
    lines[2], lines[3] = lines[3], lines[2]
    _write_lines(p, lines)


def d_flip_byte_in_middle(p, t):
    data = bytearray(p.read_bytes())
    pos = len(_lines(p)[0]) + 40
    data[pos] ^= 0x01
    p.write_bytes(bytes(data))


def d_edit_epsilon_rehashed_middle(p, t):
    lines = _lines(p)
    lines[2] = _rehash(lines[2], epsilon="1/100")  # an ε divided by 10, hash recomputed
    _write_lines(p, lines)


def d_edit_last_release_rehashed(p, t):
    lines = _lines(p)
    lines[-1] = _rehash(lines[-1], epsilon="0/1")
    _write_lines(p, lines)


def d_raise_budget_in_header(p, t):
    lines = _lines(p)
    lines[0] = _rehash(lines[0], epsilon="10/1", epsilon_float=10.0)
    _write_lines(p, lines)


def d_damaged_last_complete_line(p, t):
    p.write_bytes(p.read_bytes()[:-3] + b"X}\n")


def d_garbage_line_appended(p, t):
    p.write_bytes(p.read_bytes() + b"not a record\n")


def d_spliced_record_of_other_ledger(p, t):
    other = _other_ledger(t)
    _write_lines(p, [*_lines(p), _lines(other)[-1]])


def d_foreign_file_no_head(p, t):
    p.write_bytes(b"name,age\nalice,42\n")
    head_path(p).unlink()


def d_foreign_file_with_head(p, t):
    p.write_bytes(b"name,age\nalice,42\n")


def d_empty_file_no_head(p, t):
    p.write_bytes(b"")
    head_path(p).unlink()


def d_ledger_deleted_head_kept(p, t):
    p.unlink()


def d_head_deleted(p, t):
    head_path(p).unlink()


def d_head_truncated_to_zero(p, t):
    head_path(p).write_bytes(b"")


def d_head_both_slots_damaged(p, t):
    head_path(p).write_bytes(b"x" * 1024)


def d_head_older_copy(p, t):
    # the head as it was after release 5 (both slots rewound)
    from dpframe.accounting.durable import _head_slot

    lid = json.loads(_lines(p)[0])["ledger_id"]
    h5 = json.loads(_lines(p)[5])["hash"]
    h4 = json.loads(_lines(p)[4])["hash"]
    slots = {5 % 2: _head_slot(lid, 5, h5), 4 % 2: _head_slot(lid, 4, h4)}
    head_path(p).write_bytes(slots[0] + slots[1])


def d_head_of_other_ledger(p, t):
    other = _other_ledger(t, n=N)
    shutil.copyfile(head_path(other), head_path(p))


def d_ledger_older_copy(p, t):
    _write_lines(p, _lines(p)[:5])  # a backup taken after release 4, head kept


def d_ledger_replaced_by_other_ledger(p, t):
    other = _other_ledger(t, n=N)
    shutil.copyfile(other, p)


def d_version_1_file(p, t):
    p.write_bytes(b'{"type": "header", "format": "dpframe-ledger", "version": 1, "crc": 1}\n')


REFUSED = [v for k, v in sorted(globals().items()) if k.startswith("d_")]


@pytest.mark.parametrize("damage", REFUSED, ids=lambda f: f.__name__[2:])
def test_damage_is_refused_and_nothing_is_touched(ledger, tmp_path, damage):
    damage(ledger, tmp_path)
    files = [ledger, head_path(ledger)]
    before = {f: f.read_bytes() if f.exists() else None for f in files}
    with pytest.raises(LedgerError):
        read_ledger_file(ledger)
    for budget in ((), (1.0,)):  # reopen, and "create" with the same budget
        with pytest.raises(LedgerError):
            DurableLedger(ledger, *budget)
    after = {f: f.read_bytes() if f.exists() else None for f in files}
    assert after == before  # a refused file is never repaired, overwritten or reset


def test_the_matrix_has_at_least_19_kinds():
    assert len(REFUSED) >= 19


# -- damage a crash can cause: recovered to exactly the acknowledged history ------------------
def _spent(path):
    with DurableLedger(path) as led:
        recovered = led.recovered
    return read_ledger_file(path)["epsilon_spent"], recovered


def test_unterminated_tail_beyond_the_head_is_cut(ledger):
    """A crash during the append: the torn line was never acknowledged."""
    intact = ledger.read_bytes()
    record = _lines(ledger)[-1]
    for torn in (record[: len(record) // 2], b"\x00\x00\x00", record):  # also: no newline
        ledger.write_bytes(intact + torn)
        assert read_ledger_file(ledger)["torn_tail_bytes"] == len(torn)
        spent, recovered = _spent(ledger)
        assert spent == sum([Fraction(0.1)] * N) and recovered["torn_tail_bytes"] == len(torn)
        assert ledger.read_bytes() == intact


def test_one_complete_line_beyond_the_head_is_kept(ledger, tmp_path):
    """A crash between the ledger fsync and the head write: the release is kept (charged,
    perhaps never returned) and the head rolled forward."""
    from dpframe.accounting.durable import _head_slot

    lines = _lines(ledger)
    lid = json.loads(lines[0])["ledger_id"]
    slots = {N % 2: _head_slot(lid, N, json.loads(lines[N])["hash"]),
             (N - 1) % 2: _head_slot(lid, N - 1, json.loads(lines[N - 1])["hash"])}
    head_path(ledger).write_bytes(slots[0] + slots[1])  # the head as before release N+1 ...
    with DurableLedger(ledger) as led:
        led.commit(led.reserve(0.1), [{"tag": N}])  # ... which is written after release N+1
    lines = _lines(ledger)
    head_path(ledger).write_bytes(slots[0] + slots[1])
    assert len(lines) == N + 2
    spent, recovered = _spent(ledger)
    assert spent == sum([Fraction(0.1)] * (N + 1)) and recovered["head_rolled_forward"] == 1
    assert read_ledger_file(ledger)["head_seq"] == N + 1


def test_one_torn_head_slot_is_survived(ledger):
    data = bytearray(head_path(ledger).read_bytes())
    newest = (N % 2) * 512
    data[newest: newest + 512] = b"\x00" * 512  # the slot write of release N was torn ...
    head_path(ledger).write_bytes(bytes(data))
    # ... so the head names release N-1 and release N is one complete line beyond it
    spent, recovered = _spent(ledger)
    assert spent == sum([Fraction(0.1)] * N) and recovered["head_rolled_forward"] == 1


def test_documented_limit_both_files_restored_from_a_backup(ledger, tmp_path):
    """Not detectable (docs/ledger.md): both files replaced by an older consistent copy. The
    ledger id and chain hash in released files are the steward's evidence."""
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(ledger, backup / "l")
    shutil.copy(head_path(ledger), backup / "h")
    with DurableLedger(ledger) as led:
        led.commit(led.reserve(0.1), [])
    shutil.copy(backup / "l", ledger)
    shutil.copy(backup / "h", head_path(ledger))
    assert _spent(ledger)[0] == sum([Fraction(0.1)] * N)  # the rollback is not seen


# -- while open ----------------------------------------------------------------------------------
def _open(ledger):
    led = DurableLedger(ledger)
    led.commit(led.reserve(0.01), [])
    return led


def test_ledger_deleted_while_open(ledger):
    led = _open(ledger)
    ledger.unlink()
    with pytest.raises(LedgerError, match="deleted while this session"):
        led.reserve(0.01)
    with pytest.raises(LedgerError, match="head file"):
        DurableLedger(ledger, 1.0)  # a new session refuses to start the budget again


def test_both_files_deleted_while_open(ledger):
    """The issue's scenario (2.0 ε against 1.0): the old session stops; a new one starts a
    new ledger with a new id, which the steward sees."""
    led = _open(ledger)
    ledger.unlink()
    head_path(ledger).unlink()
    fresh = DurableLedger(ledger, 1.0)
    assert fresh.id != led.id and fresh.budget.epsilon_spent == 0
    with pytest.raises(LedgerError, match="replaced while this session"):
        led.commit(led.reserve(0.5), [])
    with pytest.raises(LedgerError):
        _ = led.budget


def test_ledger_replaced_while_open(ledger, tmp_path):
    led = _open(ledger)
    copy = tmp_path / "copy"
    shutil.copy(ledger, copy)
    os.replace(copy, ledger)  # same bytes, another file
    with pytest.raises(LedgerError, match="replaced while this session"):
        led.reserve(0.01)


def test_head_replaced_while_open(ledger, tmp_path):
    led = _open(ledger)
    copy = tmp_path / "copy"
    shutil.copy(head_path(ledger), copy)
    os.replace(copy, head_path(ledger))
    with pytest.raises(LedgerError, match="replaced while this session"):
        led.reserve(0.01)


def test_ledger_truncated_while_open(ledger):
    led = _open(ledger)
    with open(ledger, "r+b") as fh:
        fh.truncate(len(_lines(ledger)[0]) + 1)
    with pytest.raises(LedgerError, match="shrank while open"):
        led.reserve(0.01)


def test_ledger_edited_in_place_while_open(ledger):
    led = _open(ledger)
    lines = _lines(ledger)
    lines[0] = _rehash(lines[0], epsilon="10/1", epsilon_float=10.0)
    with open(ledger, "r+b") as fh:
        fh.write(b"".join(x + b"\n" for x in lines))
    with pytest.raises(LedgerError):
        led.reserve(0.01)


def test_head_deleted_while_open(ledger):
    led = _open(ledger)
    head_path(ledger).unlink()
    with pytest.raises(LedgerError, match="head file"):
        led.commit(led.reserve(0.01), [])


# -- I/O errors (injected: a failing disk cannot be provoked on demand) ------------------------
def test_eio_on_fsync_charges_a_release_that_was_never_returned(ledger, monkeypatch):
    """Documented behaviour: the value is not returned, the line may be on disk and is then
    charged (the safe direction); the session refuses further operations until reopened."""
    import errno

    led = DurableLedger(ledger)
    real = os.fsync

    def failing_fsync(fd):
        raise OSError(errno.EIO, "injected EIO")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(LedgerError, match="fsync"):
        led.commit(led.reserve(0.1), [{"tag": "eio"}])
    monkeypatch.setattr(os, "fsync", real)
    with pytest.raises(LedgerError, match="fsync"):
        led.reserve(0.01)  # broken until reopened
    again = DurableLedger(ledger)
    assert again.recovered["head_rolled_forward"] == 1
    assert read_ledger_file(ledger)["epsilon_spent"] == sum([Fraction(0.1)] * (N + 1))


def test_enospc_during_the_append_spends_nothing(ledger, monkeypatch):
    import errno

    led = DurableLedger(ledger)
    before = ledger.read_bytes()
    real = os.write

    def partial_write(fd, data):
        real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "injected ENOSPC")

    monkeypatch.setattr(os, "write", partial_write)
    with pytest.raises(LedgerError, match="nothing was spent"):
        led.commit(led.reserve(0.1), [{"tag": "enospc"}])
    monkeypatch.setattr(os, "write", real)
    assert ledger.read_bytes() == before  # the partial line was cut off
    assert led.commit(led.reserve(0.1), []) == N + 1  # and the session goes on


# -- any cut, any flipped byte, any unterminated junk (property-based) -------------------------
@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    path = tmp_path_factory.mktemp("prop") / "ledger.jsonl"
    with DurableLedger(path, 1.0) as led:
        for i in range(N):
            led.commit(led.reserve(0.1), [{"tag": i}])
    return path.read_bytes(), head_path(path).read_bytes()


def _fresh(tmp_path_factory, data, head):
    path = tmp_path_factory.mktemp("case") / "ledger.jsonl"
    path.write_bytes(data)
    head_path(path).write_bytes(head)
    return path


_prop = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@_prop
@given(cut=st.floats(0, 1, exclude_max=True))
def test_any_truncation_is_refused(tmp_path_factory, intact, cut):
    data, head = intact
    path = _fresh(tmp_path_factory, data[: int(cut * len(data))], head)
    with pytest.raises(LedgerError):
        read_ledger_file(path)
    with pytest.raises(LedgerError):
        DurableLedger(path, 1.0)


@_prop
@given(where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused(tmp_path_factory, intact, where, bit):
    data, head = intact
    damaged = bytearray(data)
    damaged[int(where * len(data))] ^= 1 << bit
    path = _fresh(tmp_path_factory, bytes(damaged), head)
    with pytest.raises(LedgerError):
        DurableLedger(path)


@_prop
@given(junk=st.binary(min_size=1, max_size=300).filter(lambda b: b"\n" not in b))
def test_any_unterminated_tail_recovers_exactly(tmp_path_factory, intact, junk):
    data, head = intact
    path = _fresh(tmp_path_factory, data + junk, head)
    with DurableLedger(path) as led:
        assert led.recovered["torn_tail_bytes"] == len(junk)
    assert path.read_bytes() == data
    assert read_ledger_file(path)["epsilon_spent"] == sum([Fraction(0.1)] * N)


# -- where a ledger can live (issue 24 item 7): a clear error before anything is created -------
@pytest.mark.parametrize(("where", "fix"), [
    ("", "name a file"), (3, "str or os.PathLike"), (b"ledger.jsonl", "str or os.PathLike"),
    ("DIR", "is a folder"), ("DIR/", "name a file"), ("DIR/missing/ledger.jsonl", "create it"),
])
def test_a_ledger_path_that_cannot_be_a_ledger_is_refused_up_front(tmp_path, where, fix):
    import dpframe as dpf
    from dpframe.errors import ParameterError

    path = where.replace("DIR", str(tmp_path)) if isinstance(where, str) else where
    for make in (lambda: dpf.Session(path=path), lambda: DurableLedger(path, 1.0)):
        with pytest.raises(ParameterError, match=fix):
            make()
    assert list(tmp_path.iterdir()) == []


def test_creation_that_the_file_system_refuses_is_a_ledger_error(tmp_path, monkeypatch):
    """A full disk during creation: a LedgerError that says so, and no temporary file or empty
    head file left behind (a failed creation used to leave its ``.tmp``)."""
    import errno

    real = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(LedgerError, match="No space left"):
        DurableLedger(tmp_path / "ledger.jsonl", 1.0)
    monkeypatch.setattr(os, "write", real)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LedgerError, match="cannot create"):
        DurableLedger("/proc/ledger.jsonl", 1.0)  # a folder where no file can be made


def test_a_failing_head_write_is_reported_as_the_head_not_an_fsync(ledger, monkeypatch):
    import errno

    led = DurableLedger(ledger)

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(LedgerError, match="writing the head file") as info:
        led.commit(led.reserve(0.1), [{"tag": "head"}])
    assert "fsync" not in str(info.value)

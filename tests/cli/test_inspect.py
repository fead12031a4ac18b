"""The steward's command ``python -m dpframe inspect`` (and the ``dpframe`` console script) on
real files, in real subprocesses: verified releases and ledgers, tampered files, keys."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpframe as dpf

ROOT = Path(__file__).resolve().parents[2]
KEY = b"steward key 42"


def _cli(*args, exe=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [exe] if exe else [sys.executable, "-m", "dpframe"]
    return subprocess.run([*cmd, "inspect", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inspect")
    ledger = d / "ledger.jsonl"
    rng = np.random.default_rng(1)
    pf = dpf.protect(pd.DataFrame({"x": rng.uniform(0, 10, 50), "y": rng.uniform(0, 1, 50)}),
                     epsilon=1.0, bounds={"x": (0, 10), "y": (0, 1)},
                     session=dpf.Session(path=ledger))
    pf.dp.sum("x", epsilon=0.1, mechanism="bounded", random_state=0)
    backup = d / "backup"  # both ledger files as they were after release 1
    backup.mkdir()
    shutil.copy(ledger, backup / "ledger.jsonl")
    shutil.copy(str(ledger) + ".head", backup / "ledger.jsonl.head")
    table = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x"), "s": dpf.std("y")},
                          epsilon=0.3, mechanism="bounded", random_state=1)
    dpf.sign_release(table, KEY)
    table.to_parquet(d / "release.parquet")
    (d / "key").write_bytes(KEY + b"\n")
    # a tampered copy: every ε divided by 10 in the metadata
    t = pq.read_table(d / "release.parquet")
    md = dict(t.schema.metadata)
    attrs = json.loads(md[b"PANDAS_ATTRS"])
    for e in attrs["dpframe_log"]["entries"]:
        e["epsilon"] /= 10
    md[b"PANDAS_ATTRS"] = json.dumps(attrs).encode()
    pq.write_table(t.replace_schema_metadata(md), d / "tampered.parquet")
    pd.DataFrame({"x": [1.0]}).to_parquet(d / "plain.parquet")
    return {"dir": d, "ledger": ledger, "id": pf.dp.session.ledger.id}


def test_inspect_verified_release(files):
    out = _cli(files["dir"] / "release.parquet", "--key-file", files["dir"] / "key")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "VERIFIED" in text and "signature valid" in text
    assert f"ledger {files['id']}" in text
    assert "release 1: ε=0.1" in text and "release 2: ε=0.3" in text
    assert "by column:" in text and "x: ε=" in text and "y: ε=" in text
    assert "scale=" in text and "bounded" in text


def test_inspect_json_and_console_script(files):
    exe = Path(sys.executable).parent / "dpframe"
    out = _cli(files["dir"] / "release.parquet", "--json", exe=str(exe))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["verified"] and report["values_match_log"]
    assert report["signature"] == "not checked"
    (led,) = report["ledgers"]
    assert led["ledger_id"] == files["id"]
    assert [r["release_id"] for r in led["releases"]] == [1, 2]
    assert sum(r["epsilon"] for r in led["releases"]) == pytest.approx(0.4)
    # (the count of the public size is released exactly: no mechanism)
    assert {m["mechanism"] for m in led["measurements"]} == {"bounded", "none (public size)"}
    assert all(m["scale"] > 0 for m in led["measurements"]
               if m["mechanism"] != "none (public size)")


def test_inspect_refuses_tampered_log_and_wrong_key(files):
    out = _cli(files["dir"] / "tampered.parquet")
    assert out.returncode == 2
    assert "NOT VERIFIED" in out.stdout and "altered" in out.stdout
    assert "values match the log: yes" in out.stdout  # the values are intact, the log is not
    out = _cli(files["dir"] / "release.parquet", "--key", "not the key", "--json")
    assert out.returncode == 2
    assert "signature does not match" in json.loads(out.stdout)["error"]


def test_inspect_ledger_file_and_damaged_ledger(files, tmp_path):
    out = _cli(files["ledger"])
    assert out.returncode == 0, out.stderr
    assert "hash chain and head file agree" in out.stdout and files["id"] in out.stdout
    damaged = tmp_path / "ledger.jsonl"
    damaged.write_bytes(files["ledger"].read_bytes()[:-1])  # lose the final newline
    (tmp_path / "ledger.jsonl.head").write_bytes(
        Path(str(files["ledger"]) + ".head").read_bytes())
    out = _cli(damaged, "--json")
    assert out.returncode == 2 and "missing" in json.loads(out.stdout)["error"]


def test_inspect_plain_file_is_an_error(files):
    out = _cli(files["dir"] / "plain.parquet")
    assert out.returncode == 1 and "no dpframe release log" in out.stderr


def test_inspect_release_against_its_ledger(files):
    """--ledger: the release's chain position and entries are in the ledger; a ledger rolled
    back to a backup (undetectable from the ledger alone) is caught by the release."""
    out = _cli(files["dir"] / "release.parquet", "--ledger", files["ledger"])
    assert out.returncode == 0, out.stderr
    assert "holds this release" in out.stdout
    out = _cli(files["dir"] / "release.parquet", "--ledger",
               files["dir"] / "backup" / "ledger.jsonl", "--json")
    assert out.returncode == 2
    report = json.loads(out.stdout)
    assert not report["verified"] and "rolled back" in report["ledger_check"]["detail"]


# -- malformed inputs: never a traceback, exit codes as documented ----------------------------
def _ledger_damage(files, tmp_path):
    """Damaged copies of the module's ledger (each with its head file unless said)."""
    from dpframe.accounting.durable import _encode

    src = files["ledger"]
    data = src.read_bytes()
    head = Path(str(src) + ".head").read_bytes()
    lines = data.splitlines(keepends=True)
    out = {}

    def make(name, ledger_bytes, head_bytes=head):
        d = tmp_path / name
        d.mkdir()
        (d / "ledger.jsonl").write_bytes(ledger_bytes)
        if head_bytes is not None:
            (d / "ledger.jsonl.head").write_bytes(head_bytes)
        out[name] = d / "ledger.jsonl"

    make("ledger_truncated_mid_line", data[:-20])
    make("ledger_bit_flip", data[:60] + bytes([data[60] ^ 1]) + data[61:])
    make("ledger_head_missing", data, None)
    make("ledger_head_garbage", data, b"\x00garbage" * 40)
    make("ledger_header_garbage", b"not json at all\n" + b"".join(lines[1:]))
    make("ledger_empty_with_head", b"")
    make("ledger_lines_swapped", lines[0] + lines[2] + lines[1])
    last = json.loads(lines[-1])
    last["epsilon"] = "a lot"
    last.pop("hash")
    make("ledger_rehashed_bad_types", b"".join(lines[:-1]) + _encode(last))
    last["entries"] = [1, "x", {"epsilon": "nan"}]
    last["epsilon"] = "1/10"
    make("ledger_rehashed_bad_entries", b"".join(lines[:-1]) + _encode(last))
    d = tmp_path / "ledger_is_directory"
    d.mkdir()
    (d / "ledger.jsonl").mkdir()
    out["ledger_is_directory"] = d / "ledger.jsonl"
    return out


def test_inspect_never_prints_a_traceback_on_malformed_files(files, tmp_path, capsys):
    """In process over the whole matrix (tests/helpers/release_files.py builds the release
    files): every run returns 1 or 2 and writes no traceback; 1 comes with one line on stderr."""
    from helpers.release_files import malformed_files

    from dpframe.cli import main

    (tmp_path / "releases").mkdir()
    cases = {**malformed_files(tmp_path / "releases"), **_ledger_damage(files, tmp_path)}
    codes = {}
    for name, path in cases.items():
        for extra in ([], ["--json"], ["--key", "k"], ["--ledger", str(files["ledger"])]):
            code = main(["inspect", str(path), *extra])
            err = capsys.readouterr().err
            assert "Traceback" not in err, (name, err)
            assert code in (1, 2), (name, code)
            if code == 1:
                assert err.startswith("error: ") and err.count("\n") == 1, (name, err)
                assert "bug in dpframe" not in err, (name, err)
            codes.setdefault(name, set()).add(code)
    for name in ("text", "empty", "truncated_half", "directory", "missing",
                 "no_leading_magic", "ledger_is_directory"):
        assert codes[name] == {1}, name
    for name in ("seal_wrong_digest", "entries_of_numbers", "entry_eps_nan", "log_not_json",
                 "ledger_bit_flip", "ledger_head_missing", "ledger_header_garbage",
                 "ledger_rehashed_bad_types", "ledger_empty_with_head"):
        assert codes[name] == {2}, name


def test_inspect_subprocess_on_bad_files_prints_one_line(tmp_path):
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 truncated")
    for path, code in ((tmp_path / "junk.parquet", 1), (tmp_path / "nope.parquet", 1),
                       (tmp_path, 1)):
        out = _cli(path)
        assert out.returncode == code and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith("error: ")
    out = _cli(tmp_path / "junk.parquet", "--key-file", tmp_path / "missing.key")
    assert out.returncode == 1 and "Traceback" not in out.stderr

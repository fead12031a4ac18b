"""Release files for the tests of readers (tests/accounting/test_parquet.py,
tests/cli/test_inspect.py, tests/report/test_views.py): a small good release file and the matrix
of malformed files every reader must refuse with a ``DPFrameError`` subclass (or show as NOT
VERIFIED)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import dpframe as dpf


def sample_data(n: int = 60) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"income": rng.uniform(0, 100, n), "g": np.array(["a", "b", "c"] * (n // 3))}


def good_file(tmp_path: Path) -> Path:
    pf = dpf.protect(pd.DataFrame(sample_data()), epsilon=1.0, bounds={"income": (0, 100)},
                     missing="drop")
    table = pf.dp.release({"m": dpf.mean("income")}, epsilon=0.1, random_state=0)
    table.dp.write_parquet(tmp_path / "good.parquet")
    return tmp_path / "good.parquet"


def _with_log(tmp_path: Path, good: Path, name: str, raw: bytes) -> Path:
    table = pq.read_table(good)
    md = {k: v for k, v in table.schema.metadata.items() if k != b"pandas"}
    md[b"dpframe.log"] = raw
    out = tmp_path / f"{name}.parquet"
    pq.write_table(table.replace_schema_metadata(md), out)
    return out


def _edited_log(tmp_path: Path, good: Path, name: str, fn) -> Path:
    doc = json.loads(pq.read_schema(good).metadata[b"dpframe.log"])
    fn(doc)
    return _with_log(tmp_path, good, name, json.dumps(doc).encode())


def malformed_files(tmp_path: Path) -> dict[str, Path]:
    """A matrix of files that are not good release files, each with a name."""
    good = good_file(tmp_path)
    data = good.read_bytes()
    out: dict[str, Path] = {}

    def raw(name: str, content: bytes) -> None:
        out[name] = tmp_path / name
        out[name].write_bytes(content)

    raw("text", b"hello, world\n")
    raw("empty", b"")
    raw("magic_only", b"PAR1")
    raw("truncated_half", data[: len(data) // 2])
    raw("truncated_footer", data[:-10])
    raw("no_leading_magic", data[4:])
    raw("garbage_with_magic", b"PAR1" + os.urandom(200) + b"PAR1")
    for name, anchor in (("kv_log_bit_flip", b"dpframe.log"), ("kv_pandas_bit_flip", b"pandas")):
        flipped = bytearray(data)  # the footer's key-value copy, not pyarrow's ARROW:schema one
        flipped[data.find(anchor) + 200] ^= 0x01
        raw(name, bytes(flipped))
    out["directory"] = tmp_path / "a_directory"
    out["directory"].mkdir()
    out["missing"] = tmp_path / "missing.parquet"
    for name, content in {
        "log_not_json": b"{not json",
        "log_not_utf8": b"\xff\xfe{}",
        "log_array": b"[1, 2, 3]",
        "log_string": b'"a log"',
        "log_null": b"null",
        "log_deep": b"[" * 100_000 + b"]" * 100_000,
        "log_huge_int": b'{"entries": [], "version": 1' + b"0" * 5000 + b"}",
    }.items():
        out[name] = _with_log(tmp_path, good, name, content)

    def set_(**kv):
        return lambda d: d.update(kv)

    edits = {
        "entries_not_list": set_(entries={"a": 1}),
        "entries_of_numbers": set_(entries=[1, 2, "x"]),
        "entry_eps_string": lambda d: d["entries"][0].update(epsilon="lots"),
        "entry_eps_nan": lambda d: d["entries"][0].update(epsilon=float("nan")),
        "entry_eps_huge": lambda d: d["entries"][0].update(epsilon=1e308 * 10),
        "entry_eps_bool": lambda d: d["entries"][0].update(epsilon=True),
        "entry_part_number": lambda d: d["entries"][0].update(part=5),
        "entry_ledger_id_list": lambda d: d["entries"][0].update(ledger_id=[1]),
        "keys_not_object": set_(keys=[1]),
        "budget_not_object": set_(budget=3),
        "chain_string": set_(chain="x"),
        "release_ids_int": set_(release_ids=5),
        "version_string": set_(version="2"),
        "version_future": set_(version=99),
        "missing_seal": lambda d: d.pop("seal"),
        "seal_not_object": set_(seal="x"),
        "seal_unknown_scheme": lambda d: d["seal"].update(scheme="rot13"),
        "seal_wrong_digest": lambda d: d["seal"].update(digest="0" * 64),
        "seal_wrong_table": lambda d: d["seal"].update(table="0" * 64),
        "seal_fields_numbers": lambda d: d["seal"].update(digest=1, table=2),
        "seal_non_ascii": lambda d: d["seal"].update(digest="é" * 64, table="\u2603"),
        "keys_added_empty": lambda d: d.update(keys={}) if "keys" not in d else d.update(
            keys={"sha256:00": "[]"}),
        "missing_kind": lambda d: d.pop("kind"),
        "missing_entries": lambda d: d.pop("entries"),
    }
    for name, fn in edits.items():
        out[name] = _edited_log(tmp_path, good, name, fn)
    return out

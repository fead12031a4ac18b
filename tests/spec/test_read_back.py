"""The file ``dpframe release`` writes reads back with ``dpf.read_release`` (pandas and Polars).

The spec's output is an Arrow table sealed with the spec's text in its metadata, which no
pandas or Polars frame carries, so the frame read back cannot match the file's seal: the file
is verified as stored, and the frame carries the same log sealed anew to it, its
``derived_from`` naming the file's seal. Before, ``read_release`` refused the file whichever
``as_frame`` was given. One real run through the command (``dpframe.cli.main``), shared by the
tests below.
"""

from __future__ import annotations

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpframe as dpf
from dpframe.accounting.seals import check_seal, release_log_of

from .test_run import _release, _setup


@pytest.fixture(scope="module")
def spec_output(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spec")
    _setup(folder)
    proc = _release("spec.toml", "--noise-seed", "1", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return folder / "out.parquet"


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_the_spec_output_reads_back_as_a_verified_release_table(spec_output, tmp_path, lib):
    frame = dpf.read_release(spec_output, as_frame=lib)
    assert isinstance(frame, pd.DataFrame if lib == "pandas" else pl.DataFrame)
    stored = pl.read_parquet(spec_output)
    assert pl.from_pandas(frame).equals(stored) if lib == "pandas" else frame.equals(stored)
    file_log = dpf.read_log(spec_output)
    log = release_log_of(frame)
    check_seal(log, frame)  # the frame verifies in memory
    assert log["entries"] == file_log["entries"]
    assert log["release_ids"] == file_log["release_ids"]
    assert log["derived_from"] == [{k: file_log["seal"][k] for k in ("table", "digest")}]
    # it is a release table: post-processed, written and read back like one
    rounded = dpf.round_release(frame, 1)
    assert release_log_of(rounded)["derived_from"] == log["derived_from"]
    dpf.write_parquet(rounded, tmp_path / "rounded.parquet")
    assert dpf.read_log(tmp_path / "rounded.parquet")["postprocessing"][0]["op"] == "round"
    again = dpf.read_release(tmp_path / "rounded.parquet", as_frame=lib)
    assert release_log_of(again) == release_log_of(rounded)  # same seal: read as written
    # the same file reads back with the same seal (a replay starts from the same table)
    assert release_log_of(dpf.read_release(spec_output, as_frame=lib)) == log


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_an_edit_of_the_frame_read_back_fails_verification(spec_output, lib):
    frame = dpf.read_release(spec_output, as_frame=lib)
    if lib == "polars":
        frame[1, "value"] = 0.5  # in place: the same frame, its log still attached
    else:
        frame.loc[1, "value"] = 0.5
    with pytest.raises(dpf.IntegrityError, match="do not match the release log"):
        check_seal(release_log_of(frame), frame)
    with pytest.raises(dpf.IntegrityError):
        dpf.round_release(frame, 1)


def test_a_tampered_spec_output_is_refused_quoting_no_value(spec_output, tmp_path):
    table = pq.read_table(spec_output)
    original = table.column("value").to_pylist()
    edited = [v + 1.0 for v in original]
    bad = table.set_column(table.schema.get_field_index("value"), "value", pa.array(edited))
    pq.write_table(bad.replace_schema_metadata(table.schema.metadata), tmp_path / "bad.parquet")
    for lib in ("pandas", "polars"):
        with pytest.raises(dpf.IntegrityError, match="do not match the release log") as err:
            dpf.read_release(tmp_path / "bad.parquet", as_frame=lib)
        text = str(err.value)
        assert not any(f"{v:g}" in text or repr(v) in text for v in original + edited)

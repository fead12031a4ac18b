"""``dpframe release``: an output path that cannot be written is refused before anything is
spent, and a folder swapped during the run cannot redirect the write (issue 30, item 5).

* ``output.path`` (or ``--output``) naming a folder (``data``, ``.``) or a path inside a file:
  refused with exit 2 naming the fix, nothing read or spent, no ledger created (before: the run
  spent, then failed with ``IsADirectoryError``).
* A missing output folder is created before anything is spent; one that cannot be created is
  refused before anything is spent.
* The output folder is opened once, before spending; the output and ``<output>.partial`` are
  created and renamed relative to that descriptor: a folder swapped for a symlink to the
  ledger's folder during the run does not let the final rename replace the ledger.
"""

from __future__ import annotations

import os

import polars as pl
import pytest

from .test_run import _release, _setup, _snapshot, _spent


@pytest.mark.parametrize("output", ["data", ".", "data/"])
def test_output_that_is_a_folder_is_refused_before_spending(tmp_path, output):
    spec = _setup(tmp_path, output=output)
    (tmp_path / "data").mkdir()
    before = _snapshot(tmp_path)
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = spec.read_text().splitlines().index(f'path = "{output}"') + 1
    assert f"spec.toml:{line}: output.path" in proc.stderr
    assert "is a folder; name the file to write inside it" in proc.stderr
    assert "Nothing was read or spent" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()
    assert _snapshot(tmp_path) == before
    dry = _release("spec.toml", "--dry-run", cwd=tmp_path)  # the dry run says so too
    assert dry.returncode == 2 and "is a folder" in dry.stderr


def test_output_argument_that_is_a_folder_is_refused(tmp_path):
    _setup(tmp_path)
    proc = _release("spec.toml", "--output", ".", cwd=tmp_path)
    assert proc.returncode == 2 and "arguments: --output '.' is a folder" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def test_output_inside_a_file_is_refused_before_spending(tmp_path):
    _setup(tmp_path, output="data.parquet/out.parquet")
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "which is not a folder" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_missing_output_folder_is_created_before_spending(tmp_path):
    _setup(tmp_path, output="new/deeper/out.parquet")
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pl.read_parquet(tmp_path / "new/deeper/out.parquet")["query"].to_list() == [
        "n", "m"]
    assert sorted(p.name for p in (tmp_path / "new/deeper").iterdir()) == ["out.parquet"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes any folder")
def test_an_output_folder_that_cannot_be_created_is_refused_before_spending(tmp_path):
    _setup(tmp_path, output="locked/sub/out.parquet")
    (tmp_path / "locked").mkdir(mode=0o500)
    try:
        proc = _release("spec.toml", cwd=tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o700)
    assert proc.returncode == 2 and "cannot be created or opened" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def test_an_output_folder_swapped_for_a_symlink_during_the_run_does_not_redirect_the_write(
        tmp_path, monkeypatch):
    """After the first query is released (the second is being built), the output folder
    ``out`` is moved away and a symlink to the ledger's folder (the working folder) put in its
    place. The output is named like the ledger, so a rename by path would replace the
    ledger."""
    import dpframe.spec._release as releasing

    _setup(tmp_path, output="out/ledger.jsonl")
    (tmp_path / "out").mkdir()
    real_build, calls = releasing.build_queries, []

    def build_after_swap(q):
        calls.append(q.name)
        if len(calls) == 2:
            os.rename(tmp_path / "out", tmp_path / "out.moved")
            os.symlink(tmp_path, tmp_path / "out")
        return real_build(q)
    monkeypatch.setattr(releasing, "build_queries", build_after_swap)
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out").is_symlink()
    # the ledger is intact (the whole run's ε in it), the output went to the folder checked
    assert _spent(tmp_path / "ledger.jsonl") == pytest.approx(1.0)
    written = tmp_path / "out.moved" / "ledger.jsonl"
    assert pl.read_parquet(written)["query"].to_list() == ["n", "m"]
    assert sorted(p.name for p in (tmp_path / "out.moved").iterdir()) == ["ledger.jsonl"]


def test_an_output_folder_swapped_before_it_is_opened_is_refused_before_spending(
        tmp_path, monkeypatch):
    """The output folder swapped for a symlink to the ledger's folder right after the schema
    check (after check_output, before the output folder is opened)."""
    import dpframe.spec._run as run

    _setup(tmp_path, output="out/ledger.jsonl")
    (tmp_path / "out").mkdir()
    real_facts = run.source_facts

    def facts_then_swap(*args, **kwargs):
        facts = real_facts(*args, **kwargs)
        os.rename(tmp_path / "out", tmp_path / "out.moved")
        os.symlink(tmp_path, tmp_path / "out")
        return facts
    monkeypatch.setattr(run, "source_facts", facts_then_swap)
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "now names the ledger" in proc.stderr and "Nothing was read or spent" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()

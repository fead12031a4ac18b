"""``dpframe release`` (:mod:`dpframe.spec._run`) cannot destroy what it needs, and checks every
input file before it spends.

* The output path is refused, before anything is read, created or spent, when it is the ledger,
  its head file, the spec, an input file (however spelled: ``..``, a symlink, a hard link, the
  ``--output`` argument) or a name the input glob would read next time.
* Every input file's schema (Parquet footer, CSV header line) is checked before spending; files
  that do not share one schema are refused with nothing spent and no file written.
* Input files replaced after that check: refused before the first release (nothing spent), or
  by the library before the next release (what was released is spent and kept in
  ``<output>.partial``).
* The output is written atomically: a failed write leaves the previous file intact and no
  temporary file behind.

Every run goes through the command's own entry point, ``dpframe.cli.main(["release", ...])``,
in this process (working directory, stdout and stderr switched for the call: the same code
a ``python -m dpframe release`` subprocess runs, without an interpreter start of about two
seconds per run; the subprocess entry point itself is tested in ``test_spec.py`` and
``tests/cli/test_main.py``). Where a file must change at an exact moment of the run, the
function reached at that moment is wrapped with ``monkeypatch``.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.durable import read_ledger_file

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

SPEC = """\
[input]
path = "{input}"
engine = "polars"
{columns}
[privacy]
epsilon = 10.0
run_epsilon = 1.0
ledger = "ledger.jsonl"

[bounds]
age = [0, 100]
income = [0, 1000]

[missing]
income = 0

[[query]]
name = "n"
share = 0.5
kind = "count"
filter = [{{ column = "age", op = ">=", value = 0 }}]  # a private size: the count spends

[[query]]
name = "m"
share = 0.5
kind = "mean"
column = "income"

[output]
path = "{output}"
overwrite = true
"""

CSV_COLUMNS = '[input.columns]\nage = "int64"\nincome = "float64"\nregion = "string"\n'


def _frame(n: int = 200, seed: int = 0, income: str = "income") -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"age": rng.integers(0, 100, n), income: rng.uniform(0, 1000, n),
                         "region": rng.choice(["a", "b"], n)})


def _setup(tmp_path: Path, *, input: str = "data.parquet", output: str = "out.parquet",
           files: int = 1, columns: str = "") -> Path:
    for i in range(files):
        name = "data.parquet" if files == 1 else f"part-{i}.parquet"
        _frame(seed=i).write_parquet(tmp_path / name)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(input=input, output=output, columns=columns))
    return spec


def _release(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dpframe release *args`` run in ``cwd`` through ``dpframe.cli.main``, in this process:
    its exit code, stdout and stderr (what the subprocess would give)."""
    from dpframe.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["release", *args])
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["dpframe", "release", *args], code, out.getvalue(),
                                       err.getvalue())


def _release_in_new_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m dpframe release *args``: for a second run that releases from the same input
    files, which a protected frame of an earlier run in this process still reads (protect
    refuses a second budget over them in one process)."""
    return subprocess.run([sys.executable, "-m", "dpframe", "release", *args],
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


def _spent(ledger: Path) -> float:
    return float(read_ledger_file(ledger)["epsilon_spent"])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# -- the output may not replace what the run needs ---------------------------------------------
# (through the real command for one file of each kind; every other spelling, the head file
# and the ledger's temporary name are checked in-process by
# test_check_output_catches_every_spelling_and_allows_other_paths)
@pytest.mark.parametrize("output", ["ledger.jsonl", "sub/../data.parquet", "spec.toml"])
def test_output_that_is_a_file_of_the_run_is_refused(tmp_path, output):
    """After a first run created the ledger: each path names the ledger, its head file, an
    input, the spec or a name the ledger uses while it is created. Exit 2 naming the spec's
    output line; every file byte-for-byte unchanged (nothing read, nothing spent)."""
    spec = _setup(tmp_path)
    (tmp_path / "sub").mkdir()
    assert _release("spec.toml", "--noise-seed", "1", cwd=tmp_path).returncode == 0
    spec.write_text(SPEC.format(input="data.parquet", output=output, columns=""))
    before = _snapshot(tmp_path)
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = spec.read_text().splitlines().index(f'path = "{output}"') + 1
    assert f"spec.toml:{line}: the output would replace a file this run needs" in proc.stderr
    assert "nothing was read or spent" in proc.stderr
    assert _snapshot(tmp_path) == before
    assert _spent(tmp_path / "ledger.jsonl") == pytest.approx(1.0)  # the first run only
    dry = _release("spec.toml", "--dry-run", cwd=tmp_path)  # the dry run says so too
    assert dry.returncode == 2 and "would replace" in dry.stderr


def test_output_is_the_ledger_before_it_exists(tmp_path):
    """The first run: the ledger does not exist yet and is not created."""
    _setup(tmp_path, output="ledger.jsonl")
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "is the ledger file" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()
    assert not (tmp_path / "ledger.jsonl.head").exists()


@pytest.mark.parametrize("link", ["symlink", "hardlink", "symlink-to-ledger"])
def test_output_linked_to_an_input_or_the_ledger_is_refused(tmp_path, link):
    """A symlink is resolved; a hard link is the same inode (``os.path.samefile``)."""
    _setup(tmp_path, output="alias.parquet")
    alias = tmp_path / "alias.parquet"
    if link == "symlink":
        alias.symlink_to(tmp_path / "data.parquet")
    elif link == "hardlink":
        os.link(tmp_path / "data.parquet", alias)
    else:  # a dangling symlink: the ledger it names is created by the run
        alias.symlink_to(tmp_path / "ledger.jsonl")
    data = (tmp_path / "data.parquet").read_bytes()
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert ("is the ledger file" if link == "symlink-to-ledger" else "is the input file") \
        in proc.stderr
    assert (tmp_path / "data.parquet").read_bytes() == data
    assert not (tmp_path / "ledger.jsonl").exists()


def test_output_argument_that_is_the_ledger_or_an_input_is_refused(tmp_path):
    """``--output`` (relative to the working directory) is checked the same way."""
    _setup(tmp_path)
    for target in ("ledger.jsonl", "data.parquet", "ledger.jsonl.head"):
        proc = _release("spec.toml", "--output", target, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: arguments: --output would replace")
    assert not (tmp_path / "ledger.jsonl").exists()


def test_output_the_input_glob_would_read_is_refused(tmp_path):
    """An output inside the input's pattern would be read as input by the next run; a
    sub-folder of the pattern's folder is fine (``*`` does not cross ``/``)."""
    _setup(tmp_path, input="part-*.parquet", output="part-release.parquet", files=2)
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "the next run would read the release as input" \
        in proc.stderr
    assert not (tmp_path / "part-release.parquet").exists()
    (tmp_path / "spec.toml").write_text(SPEC.format(
        input="part-*.parquet", output="out/part-release.parquet", columns=""))
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert dpf.read_log(tmp_path / "out" / "part-release.parquet")["budget"][
        "epsilon_spent"] == pytest.approx(1.0)


# -- every input file's schema, before spending ------------------------------------------------
@pytest.mark.parametrize(("second", "said"), [
    (_frame(seed=1, income="salary"), "lacks column(s) 'income'"),
    (_frame(seed=1).with_columns(pl.col("age").cast(pl.Int32)), "column 'age' is int64 in"),
    (_frame(seed=1).select("income", "age", "region"), "the columns are in another order"),
    (_frame(seed=1).with_columns(extra=pl.lit(1.0)), "has extra column(s) 'extra'"),
    (_frame(seed=1).with_columns(pl.col("region").cast(pl.Categorical)),
     "column 'region' is string in"),
])
def test_input_files_with_different_schemas_are_refused_before_spending(tmp_path, second,
                                                                        said):
    """The second file differs: the dry run and the run both refuse (exit 2, naming the
    input.path line); no ledger, no output and no ``.partial`` file is created."""
    _setup(tmp_path, input="part-*.parquet", files=2)
    second.write_parquet(tmp_path / "part-1.parquet")
    for args in (("--dry-run",), ("--noise-seed", "1")):
        proc = _release("spec.toml", *args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "spec.toml:2: the input files do not share one schema" in proc.stderr
        assert said in proc.stderr and "nothing was spent" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "part-0.parquet", "part-1.parquet", "spec.toml"]


def test_files_that_differ_only_in_encoding_share_a_schema(tmp_path):
    """A Polars-written file (strings as ``large_string``, nullable columns) and a
    pyarrow-written one (``string``, non-nullable columns): the same schema; the run reads
    both."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _setup(tmp_path, input="part-*.parquet", files=1)
    (tmp_path / "data.parquet").rename(tmp_path / "part-0.parquet")
    other = _frame(seed=1).to_arrow()
    fields = [pa.field(f.name, pa.string() if f.name == "region" else f.type, nullable=False)
              for f in other.schema]
    other = pa.table([c.cast(f.type) for c, f in zip(other.columns, fields, strict=True)],
                     schema=pa.schema(fields))
    pq.write_table(other, tmp_path / "part-1.parquet")
    assert "large_string" in str(pq.read_schema(tmp_path / "part-0.parquet"))
    assert "large" not in str(pq.read_schema(tmp_path / "part-1.parquet"))
    proc = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "n = 400" in proc.stdout


def test_csv_files_with_different_headers_are_refused(tmp_path):
    _frame(seed=0).write_csv(tmp_path / "part-0.csv")
    _frame(seed=1, income="salary").write_csv(tmp_path / "part-1.csv")
    (tmp_path / "spec.toml").write_text(SPEC.format(input="part-*.csv", output="out.parquet",
                                                    columns=CSV_COLUMNS))
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "lacks column(s) 'income'" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_file_replaced_after_the_dry_run_is_checked_again(tmp_path):
    """The dry run passes; a file is then replaced by one of another schema; the run checks
    every file itself and refuses before spending."""
    _setup(tmp_path, input="part-*.parquet", files=2)
    assert _release("spec.toml", "--dry-run", cwd=tmp_path).returncode == 0
    _frame(seed=5, income="salary").write_parquet(tmp_path / "part-1.parquet")
    proc = _release("spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "do not share one schema" in proc.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def _drive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str,
           replacement: pl.DataFrame) -> subprocess.CompletedProcess[str]:
    """The release, with ``part-1.parquet`` swapped for ``replacement`` right after the schema
    check (``after_check``: ``source_facts`` returned) or after the first release (``between``:
    the second query is being built)."""
    import dpframe.spec._release as releasing
    import dpframe.spec._run as run

    _setup(tmp_path, input="part-*.parquet", files=2)
    replacement.write_parquet(tmp_path / "replacement.parquet")

    def swap() -> None:
        shutil.copy(tmp_path / "replacement.parquet", tmp_path / "part-1.parquet")

    if when == "after_check":
        real_facts = run.source_facts

        def facts_then_swap(*args, **kwargs):
            facts = real_facts(*args, **kwargs)
            swap()
            return facts
        monkeypatch.setattr(run, "source_facts", facts_then_swap)
    else:
        real_build, calls = releasing.build_queries, []

        def build_after_swap(q):
            calls.append(q.name)
            if len(calls) == 2:
                swap()
            return real_build(q)
        monkeypatch.setattr(releasing, "build_queries", build_after_swap)
    return _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)


@pytest.mark.parametrize("replacement", [_frame(seed=7, income="salary"), _frame(seed=7)],
                         ids=["other-schema", "same-schema"])
def test_a_file_replaced_after_the_check_stops_the_run_with_nothing_spent(tmp_path,
                                                                           monkeypatch,
                                                                           replacement):
    """Swapped between the schema check and protect: whatever the new file holds (another
    schema, which protect cannot read; or the same schema with other rows), the run stops
    with one fixed message before any release. Nothing spent, no output, no partial file."""
    proc = _drive(tmp_path, monkeypatch, "after_check", replacement)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: SourceChangedError: the input files ({tmp_path}/part-*.parquet) changed "
        "while this run started (added, removed, replaced or rewritten after their schemas "
        "were checked); the release was stopped before any query ran. Nothing was spent; run "
        "it again once the files are stable.")
    ledger = tmp_path / "ledger.jsonl"
    assert not ledger.exists() or _spent(ledger) == 0
    assert not list(tmp_path.glob("out.parquet*"))


def test_a_file_replaced_between_releases_keeps_what_was_spent(tmp_path, monkeypatch):
    """Swapped after the first query was released: the library refuses the second before it
    reserves anything (SourceChangedError, no data quoted); the first query's ε is spent and
    its values are in ``out.parquet.partial``; no ``out.parquet``."""
    proc = _drive(tmp_path, monkeypatch, "between", _frame(seed=7))
    assert proc.returncode == 1
    assert "SourceChangedError" in proc.stderr and "Nothing was read or spent" in proc.stderr
    assert _spent(tmp_path / "ledger.jsonl") == pytest.approx(0.5)
    partial = tmp_path / "out.parquet.partial"
    assert pl.read_parquet(partial)["query"].to_list() == ["n"]
    assert dpf.read_log(partial)["budget"]["epsilon_spent"] == pytest.approx(0.5)
    assert not (tmp_path / "out.parquet").exists()


# -- atomic output -------------------------------------------------------------------------------
def test_output_is_replaced_atomically(tmp_path):
    """A second run replaces the output with a new file (a new inode: written beside it, then
    renamed); no temporary file is left."""
    _setup(tmp_path)
    assert _release("spec.toml", "--noise-seed", "1", cwd=tmp_path).returncode == 0
    out = tmp_path / "out.parquet"
    first = os.stat(out).st_ino
    assert _release_in_new_process("spec.toml", "--noise-seed", "2",
                                   cwd=tmp_path).returncode == 0
    assert os.stat(out).st_ino != first
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "data.parquet", "ledger.jsonl", "ledger.jsonl.head", "out.parquet", "spec.toml"]


def test_a_failed_write_leaves_the_previous_output_and_no_temporary_file(tmp_path,
                                                                       monkeypatch):
    """The Parquet writer fails half-way (after writing some bytes): the previous output is
    byte-for-byte intact and no temporary file remains."""
    import pyarrow.parquet as pq

    _setup(tmp_path)
    assert _release_in_new_process("spec.toml", "--noise-seed", "1",
                                   cwd=tmp_path).returncode == 0
    before = (tmp_path / "out.parquet").read_bytes()

    def failing(table, where, **kwargs):
        where.write(b"PAR1 half a file")  # the temporary file dpframe opened
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(pq, "write_table", failing)
    proc = _release("spec.toml", "--noise-seed", "2", cwd=tmp_path)
    assert proc.returncode == 1 and "No space left on device" in proc.stderr
    assert "writing" in proc.stdout and "the released values (spent, noisy) are:" in proc.stdout
    assert "n  -  n = " in proc.stdout and "m  -  m = " in proc.stdout  # not lost
    assert (tmp_path / "out.parquet").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "data.parquet", "ledger.jsonl", "ledger.jsonl.head", "out.parquet", "spec.toml"]


# -- the ledger head: a run prints it, --expect-head checks it -------------------------------
def test_expect_head_refuses_a_rolled_back_ledger(tmp_path):
    """Each run prints the ledger's head digest (the one `inspect --head` prints). Both ledger
    files restored from a backup made before the second run: the third run with the second
    run's head is refused before anything is read or spent (exit 1, BEHIND), and the dry run
    says so; with the head of the backup's state the run proceeds."""
    import re
    import shutil

    _setup(tmp_path)
    ledger, head_file = tmp_path / "ledger.jsonl", tmp_path / "ledger.jsonl.head"
    first = _release("spec.toml", "--noise-seed", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    head1 = re.search(r"ledger head: ([0-9]+:[0-9a-f]{32})", first.stdout).group(1)
    from dpframe.cli import main

    inspected = io.StringIO()
    with contextlib.redirect_stdout(inspected):
        assert main(["inspect", str(ledger), "--head"]) == 0
    assert inspected.getvalue().strip() == head1 and head1.startswith("2:")
    shutil.copy(ledger, tmp_path / "backup")
    shutil.copy(head_file, tmp_path / "backup.head")
    second = _release_in_new_process("spec.toml", "--noise-seed", "2", "--expect-head", head1,
                                     cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    head2 = re.search(r"ledger head: ([0-9]+:[0-9a-f]{32})", second.stdout).group(1)
    assert head2.startswith("4:")
    shutil.copy(tmp_path / "backup", ledger)
    shutil.copy(tmp_path / "backup.head", head_file)
    before = _snapshot(tmp_path)
    third = _release("spec.toml", "--expect-head", head2, cwd=tmp_path)
    assert third.returncode == 1
    assert "LedgerError" in third.stderr and "is BEHIND the expected head" in third.stderr
    assert _snapshot(tmp_path) == before
    dry = _release("spec.toml", "--dry-run", "--expect-head", head2, cwd=tmp_path)
    assert dry.returncode == 0 and "BEHIND" in dry.stdout and "the run will be refused" \
        in dry.stdout
    bad = _release("spec.toml", "--expect-head", "4:xyz", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: arguments: --expect-head")
    assert _release_in_new_process("spec.toml", "--noise-seed", "3", "--expect-head", head1,
                                   cwd=tmp_path).returncode == 0
    assert _spent(ledger) == pytest.approx(2.0)  # the rolled-back state plus this run


# -- check_output over many spellings (in-process: paths only, nothing is run) -----------------
def test_check_output_catches_every_spelling_and_allows_other_paths(tmp_path, monkeypatch):
    """Each file the run needs, spelled absolute, relative to the working directory, with
    ``./`` and ``..``, through a symlinked folder, a symlink and a hard link: refused.
    Neighbouring names are allowed."""
    from dpframe.spec._parse import load_spec
    from dpframe.spec._run import check_output

    _setup(tmp_path)
    assert _release("spec.toml", "--noise-seed", "1", cwd=tmp_path).returncode == 0
    spec = load_spec(tmp_path / "spec.toml")
    files = [str(tmp_path / "data.parquet")]
    (tmp_path / "sub").mkdir()
    (tmp_path / "via").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.chdir(tmp_path / "sub")
    refused = []
    for name in ("ledger.jsonl", "ledger.jsonl.head", "data.parquet", "spec.toml"):
        refused += [tmp_path / name, Path("..") / name, Path("../sub/..") / name,
                    tmp_path / "via" / name, Path(f"../via/./{name}")]
        link, hard = tmp_path / f"link-{name}", tmp_path / f"hard-{name}"
        link.symlink_to(tmp_path / name)
        os.link(tmp_path / name, hard)
        refused += [link, hard]
    refused += [tmp_path / ".ledger.jsonl.0123abcd.tmp", Path("../.ledger.jsonl.0a.tmp")]
    (tmp_path / "x.parquet.partial").write_bytes(b"")  # an input named like a partial file
    files.append(str(tmp_path / "x.parquet.partial"))
    refused.append(tmp_path / "x.parquet")  # its .partial would replace that input
    for target in refused:
        for from_arguments in (False, True):
            with pytest.raises(dpf.SpecError, match="would replace a file this run needs"):
                check_output(spec, Path(target), files, from_arguments=from_arguments)
    for target in ("out.parquet", "../out.parquet", "../ledger.jsonl.bak", "../data.parquet2",
                   "../sub/release.parquet", "../ledger.jsonl.head.parquet"):
        check_output(spec, Path(target), files)

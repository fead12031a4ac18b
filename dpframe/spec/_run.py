"""``dpframe release spec.toml``: run a release spec (or, with ``--dry-run``, show its plan).

* :func:`source_facts` — the input's columns, types and public row count from file metadata
  only (Parquet footers; a CSV file's header line), checking that every file has the same
  schema. The dry run reads nothing else.
* :func:`check_output` — refuses an output path that is the ledger, its head file, the spec
  or an input file (resolved paths, and inodes where the files exist).
* :func:`load_frame` — the one place that opens the input with an engine's lazy reader
  (Polars ``scan_parquet``/``scan_csv``, DuckDB ``read_parquet``/``read_csv``, Spark
  ``read.parquet``/``read.csv`` in local mode, Dask ``read_parquet``/``read_csv``).
* :func:`run_spec` — protects the frame with the spec's budget in its durable ledger, adds the
  derived columns, runs each query as its one API call (:mod:`dpframe.spec._release`,
  :mod:`dpframe.spec._calls`), writes every result into one Parquet file (long format, the
  log inside) and returns a summary.
* :func:`add_release_parser` / :func:`release_command` — the ``release`` subcommand.

Exit codes: 0 success, 2 a bad spec or bad arguments (the message names the spec line), 1
any other failure (budget exhausted, unreadable data, an engine error).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import secrets
import sys
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dpframe as dpf
from dpframe._validation import check_head
from dpframe.accounting.durable import check_ledger_head, head_digest, head_path, read_ledger_file
from dpframe.backends import CSV_POLARS, backend_named
from dpframe.errors import DPFrameError, ParameterError, SourceChangedError
from dpframe.spec._format import format_plan
from dpframe.spec._parse import InputSpec, ReleaseSpec, SpecError, load_spec
from dpframe.spec._plan import (
    ReleasePlan,
    SourceFacts,
    check_schema,
    plan_release,
    protect_input,
    query_frame,
)
from dpframe.spec._release import SPEC_KEY, check_run_budget, release_all, write_output

__all__ = [
    "OUTPUT_COLUMNS",
    "SPEC_KEY",
    "RunResult",
    "add_release_parser",
    "check_output",
    "ledger_status",
    "load_frame",
    "release_command",
    "run_spec",
    "source_facts",
]

#: Columns of the output file: one row per (query, group, statistic).
#: the output file's fixed columns (the tidy table of ``dpf.concat_releases``), then one column
#: per key name
OUTPUT_COLUMNS = ("query", "statistic", "value", "lower", "upper")


# -- the input's public facts ----------------------------------------------------------------
def _files(inp: InputSpec) -> list[str]:
    if glob.has_magic(inp.path):
        return sorted(glob.glob(inp.path, recursive=True))
    return [inp.path] if os.path.exists(inp.path) else []


def source_facts(spec: ReleaseSpec, rows: int | None = None) -> SourceFacts:
    """Columns, types and row count of the spec's input from metadata only.

    Parquet: the schema and ``num_rows`` of every file's footer
    (``pyarrow.parquet.read_metadata``), a public fact. CSV: the column names of the first
    line; types and ``n`` are unknown without reading the data (``rows`` sets an assumed ``n``
    for the plan). Raises :class:`SpecError` (naming ``input.path``) when nothing matches.
    """
    inp = spec.input
    files = _files(inp)
    if not files:
        raise spec.error(("input", "path"), f"no file matches input.path {inp.path!r}")
    if inp.format == "parquet":
        import pyarrow.parquet as pq

        n = 0
        columns: dict[str, Any] = {}
        first: list[tuple[str, str]] = []
        for i, f in enumerate(files):
            try:
                meta = pq.read_metadata(f)
                schema = meta.schema.to_arrow_schema()
            except Exception as exc:
                raise DPFrameError(f"cannot read the Parquet footer of {f}: {exc}") from None
            n += meta.num_rows
            fields = [(field.name, _type_name(field.type)) for field in schema]
            if i == 0:
                first = fields
                columns = _polars_dtypes(schema)
            elif fields != first:
                raise spec.error(("input", "path"), _schema_difference(files[0], first, f,
                                                                       fields))
        note = (f"public: from the Parquet footer{'s' if len(files) > 1 else ''} of "
                f"{len(files)} file{'s' if len(files) > 1 else ''}, no data read")
        if rows is not None:
            note += f"; --rows {rows} ignored"
        return SourceFacts(tuple(files), columns, n, note)
    header = _csv_header(spec, files[0])
    for f in files[1:]:  # every file's header line: one file's columns are not the others'
        other = _csv_header(spec, f)
        if other != header:
            raise spec.error(("input", "path"), _schema_difference(
                files[0], [(c, "") for c in header], f, [(c, "") for c in other]))
    declared = dict(inp.columns)
    cols = {c: _csv_polars_dtype(declared.get(c, "string")) for c in header}
    if rows is not None:
        return SourceFacts(tuple(files), cols, rows,
                           "ASSUMED with --rows: CSV files keep no row count in their metadata; "
                           "the run counts the rows")
    return SourceFacts(tuple(files), cols, None,
                       "unknown: CSV files keep no row count in their metadata; the run counts "
                       "the rows")


def _polars_dtypes(schema: Any) -> dict[str, Any]:
    """The Polars dtypes of an Arrow schema (a column Polars cannot represent: ``Null``)."""
    import polars as pl
    import pyarrow as pa

    out: dict[str, Any] = {}
    for arrow_field in schema:
        try:
            out[arrow_field.name] = pl.Series(pa.array([], type=arrow_field.type)).dtype
        except Exception:
            out[arrow_field.name] = pl.Null
    return out


def _csv_polars_dtype(kind: str) -> Any:
    import polars as pl

    return getattr(pl, CSV_POLARS[kind])


def _type_name(t: Any) -> str:
    """An Arrow type as compared across files, up to what every engine reads alike:
    ``large_string``/``string_view`` as ``string`` (Polars writes the one, pyarrow the
    other; the Parquet bytes are the same), likewise for binary; nullability is not part of
    it. A dictionary (categorical) column is not a string column: Polars cannot read the two
    as one."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    return str(t)


def _csv_header(spec: ReleaseSpec, path: str) -> list[str]:
    """The column names of a CSV file's first line (nothing after it is decoded)."""
    import csv

    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
    try:
        header = next(csv.reader([first.decode("utf-8-sig").rstrip("\r\n")]), [])
    except UnicodeDecodeError:
        raise spec.error(("input", "path"), f"the header line of {path} is not UTF-8"
                         ) from None
    if not header:
        raise spec.error(("input", "path"), f"{path} has no header line")
    return header


def _schema_difference(path_a: str, a: list[tuple[str, str]], path_b: str,
                       b: list[tuple[str, str]]) -> str:
    """Why two input files cannot be read as one table: the columns one has and the other
    lacks, a column whose type differs, or the order (schema facts only, never a value)."""
    names_a, names_b = [n for n, _ in a], [n for n, _ in b]
    types_a, types_b = dict(a), dict(b)
    parts = []
    if only := [n for n in names_a if n not in types_b]:
        parts.append(f"{path_b} lacks column(s) {', '.join(map(repr, only))}")
    if extra := [n for n in names_b if n not in types_a]:
        parts.append(f"{path_b} has extra column(s) {', '.join(map(repr, extra))}")
    for name in names_a:
        if name in types_b and types_a[name] != types_b[name]:
            parts.append(f"column {name!r} is {types_a[name]} in {path_a} but "
                         f"{types_b[name]} in {path_b}")
    if not parts:
        parts.append(f"the columns are in another order in {path_b}")
    return ("the input files do not share one schema (every file needs the same columns, in "
            f"the same order, with the same types): {'; '.join(parts)}. No data was read and "
            "nothing was spent.")


# -- paths the output may not take ------------------------------------------------------------
def _resolved(p: Path) -> Path:
    """``p`` with symlinks and ``..`` resolved (it need not exist); as spelled (absolute)
    when it cannot be resolved (a symlink loop, a folder that cannot be read)."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(p))


def _same(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name the same file: equal after resolving symlinks and ``..`` (the
    file need not exist), or the same inode where both exist (hard links, case-insensitive
    file systems)."""
    if _resolved(a) == _resolved(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _glob_matches(pattern: str, path: Path) -> bool:
    """Whether the input glob ``pattern`` would name ``path`` (part by part: ``*`` does not
    cross a ``/``; a pattern with ``**`` is matched as a whole, which errs toward a match)."""
    import fnmatch

    if not glob.has_magic(pattern):
        return False
    pat = os.path.abspath(pattern)
    for target in {os.path.abspath(path), str(_resolved(path))}:  # as spelled, and resolved
        if "**" in pat:
            if fnmatch.fnmatchcase(target, pat):
                return True
            continue
        pat_parts, parts = Path(pat).parts, Path(target).parts
        if len(pat_parts) == len(parts) and all(
                fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pat_parts, strict=True)):
            return True
    return False


def check_output(spec: ReleaseSpec, target: Path, files: list[str],
                 *, from_arguments: bool = False) -> None:
    """Refuse, from paths alone (before anything is read, created or spent), an output that
    would replace a file this run needs: the ledger (``privacy.ledger``), its head file or
    the temporary file a new ledger is built in (:mod:`dpframe.accounting.durable`), the spec, or an
    input file (``files``); or that the input's glob would read on the next run. The same
    holds for ``<output>.partial``, written when a run stops after some releases. Paths are
    compared after resolving symlinks and ``..``, and by inode where both files exist."""

    _check_output_place(spec, target, from_arguments=from_arguments)
    ledger = spec.ledger
    taken: list[tuple[Path, str]] = [
        (ledger, f"the ledger file {ledger} (privacy.ledger)"),
        (head_path(ledger), f"the ledger's head file {head_path(ledger)}"),
        *((Path(f), f"the input file {f}") for f in files),
    ]
    if os.path.exists(spec.source):
        taken.append((Path(spec.source), f"the spec file {spec.source}"))
    reason = None
    for path in (target, target.with_name(target.name + ".partial")):
        for other, what in taken:
            if _same(path, other):
                reason = f"{path} is {what}"
                break
        else:
            import fnmatch

            resolved = _resolved(path)
            if resolved.parent == _resolved(ledger).parent and fnmatch.fnmatchcase(
                    resolved.name, f".{ledger.name}.*.tmp"):
                reason = f"{path} is a name the ledger {ledger} uses while it is created"
            elif _glob_matches(spec.input.path, path):
                reason = (f"{path} matches input.path {spec.input.path!r}: the next run would "
                          "read the release as input")
        if reason is not None:
            break
    if reason is None:
        return
    message = (f"the output would replace a file this run needs: {reason}. Choose another "
               "output path; nothing was read or spent.")
    if from_arguments:
        raise SpecError(message.replace("the output", "--output", 1), source="arguments")
    raise spec.error(("output", "path"), message)


def _output_error(spec: ReleaseSpec, message: str, from_arguments: bool) -> SpecError:
    if from_arguments:
        return SpecError(message.replace("output.path", "--output", 1), source="arguments")
    return spec.error(("output", "path"), message)


def _check_output_place(spec: ReleaseSpec, target: Path, *, from_arguments: bool) -> None:
    """The output names a file, not a folder, in a folder that exists or can be created:
    from paths alone, before anything is read, created or spent."""
    if target.name in ("", ".", "..") or target.is_dir():
        raise _output_error(spec, (
            f"output.path {str(target)!r} is a folder; name the file to write inside it "
            f"(e.g. {str(target / 'release.parquet')!r}). Nothing was read or spent."),
            from_arguments)
    for folder in (target.parent, *target.parent.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                raise _output_error(spec, (
                    f"output.path {str(target)!r} is inside {str(folder)!r}, which is not a "
                    "folder (or a link to a missing one); choose an output in a folder. "
                    "Nothing was read or spent."), from_arguments)
            break


class _OutputFolder:
    """The output's folder, opened once before anything is spent (``O_DIRECTORY``, its
    symlinks resolved at that moment, the last one refused by ``O_NOFOLLOW``): every write of
    the run (the output, ``<output>.partial``) creates its temporary file and renames it
    relative to this descriptor, so a folder moved or swapped for a symlink during the run
    cannot redirect the write onto another file (the ledger, say)."""

    def __init__(self, spec: ReleaseSpec, target: Path, *, from_arguments: bool) -> None:
        folder = _resolved(target.parent)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                              | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise _output_error(spec, (
                f"output.path {str(target)!r}: its folder {str(folder)!r} cannot be created "
                f"or opened ({exc.strerror or type(exc).__name__}); choose a folder you can "
                "write. Nothing was read or spent."), from_arguments) from None
        self.folder = folder
        self.name = target.name
        try:
            st: os.stat_result | None = os.stat(self.name, dir_fd=self.fd,
                                                follow_symlinks=False)
        except OSError:
            st = None
        import stat

        if st is not None and stat.S_ISDIR(st.st_mode):  # a folder made since the check
            self.close()
            raise _output_error(spec, (
                f"output.path {str(target)!r} is a folder; name the file to write inside "
                "it. Nothing was read or spent."), from_arguments)
        if self._is_ledger(spec, st):  # the folder was swapped since check_output
            self.close()
            raise _output_error(spec, (
                f"output.path {str(target)!r} now names the ledger {spec.ledger} or its head "
                "file (a folder changed since the check); choose another output path. "
                "Nothing was read or spent."), from_arguments)
        if not os.access(".", os.W_OK | os.X_OK, dir_fd=self.fd):
            self.close()
            raise _output_error(spec, (
                f"output.path {str(target)!r}: the folder {str(folder)!r} is not writable; "
                "choose a folder you can write. Nothing was read or spent."), from_arguments)

    def _is_ledger(self, spec: ReleaseSpec, st: os.stat_result | None) -> bool:
        """The opened folder and name are the ledger's or its head file's (by inode)."""

        here = os.fstat(self.fd)
        for path in (spec.ledger, head_path(spec.ledger)):
            try:
                parent = os.stat(path.parent)
                if (parent.st_dev, parent.st_ino) == (here.st_dev, here.st_ino) and \
                        path.name == self.name:
                    return True
                other = os.stat(path)
            except OSError:
                continue
            if st is not None and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return True
        return False

    def write(self, name: str, table: Any) -> None:
        """Write ``table`` (Arrow) as Parquet to ``name`` in the folder, atomically: a new
        temporary file beside it (``O_EXCL | O_NOFOLLOW``), then ``os.replace``, both
        relative to the folder's descriptor."""
        import pyarrow.parquet as pq

        tmp = None
        try:
            for _ in range(100):
                candidate = f"{name}.{secrets.token_hex(6)}.tmp"
                try:
                    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                 | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600,
                                 dir_fd=self.fd)
                except FileExistsError:
                    continue
                tmp = candidate
                break
            else:  # pragma: no cover - 100 collisions of 48 random bits
                raise FileExistsError(f"no free temporary name for {name} in {self.folder}")
            with os.fdopen(fd, "wb") as fh:
                pq.write_table(table, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            tmp = None
        finally:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def ledger_status(spec: ReleaseSpec, expect_head: str | None = None) -> dict[str, Any]:
    """What the durable ledger says about this run, read from the ledger file (not data):
    ``{"exists", "epsilon_spent", "delta_spent", "fits", "note"}``. Never raises: a ledger
    that cannot be read, or that does not contain ``expect_head``, is reported in ``note``
    (the run would then fail with the reason)."""
    from fractions import Fraction

    path = spec.ledger
    if expect_head is not None:

        try:
            check_ledger_head(path, expect_head)
        except DPFrameError as exc:
            return {"exists": path.exists(), "epsilon_spent": None, "delta_spent": None,
                    "fits": False, "note": f"{exc}; the run will be refused"}
    if not path.exists():
        return {"exists": False, "epsilon_spent": 0.0, "delta_spent": 0.0, "fits": True,
                "note": "no ledger file yet: the first run creates it with the total budget"}
    try:

        info = read_ledger_file(path)
    except Exception as exc:
        return {"exists": True, "epsilon_spent": None, "delta_spent": None, "fits": None,
                "note": f"cannot read the ledger: {exc}"}
    header = info.get("header", {})
    total_e = float(header.get("epsilon_float", spec.epsilon))
    total_d = float(header.get("delta_float", spec.delta))
    spent_e, spent_d = Fraction(info["epsilon_spent"]), Fraction(info["delta_spent"])
    if (total_e, total_d) != (spec.epsilon, spec.delta):
        return {"exists": True, "epsilon_spent": float(spent_e), "delta_spent": float(spent_d),
                "fits": False, "note": f"the ledger holds a budget of ε = {total_e:g}, "
                f"δ = {total_d:g}, not the spec's ε = {spec.epsilon:g}, δ = {spec.delta:g}: "
                "the run will be refused"}
    slack = 1 + Fraction(1, 10**9)  # the ledger's tolerance for decimal shares
    fits = (spent_e + Fraction(spec.run_epsilon) <= Fraction(total_e) * slack
            and spent_d + Fraction(spec.run_delta) <= Fraction(total_d) * slack)
    left = f"ε = {float(Fraction(total_e) - spent_e):.6g}, δ = " \
           f"{float(Fraction(total_d) - spent_d):.3g} left"
    return {"exists": True, "epsilon_spent": float(spent_e), "delta_spent": float(spent_d),
            "fits": fits, "note": f"{len(info.get('releases', []))} releases so far, {left}: "
            + ("this run fits" if fits else "this run does NOT fit and will be refused")}


# -- engines ---------------------------------------------------------------------------------
def load_frame(inp: InputSpec) -> Any:
    """The input as a lazy frame of ``inp.engine`` (nothing is read until a release runs,
    except what the engine itself needs to plan: schema, file list), by that engine's reader
    (``Backend.read_file``). CSV inputs are read with their declared column types and nothing
    inferred from the data; a value that does not parse is missing."""
    return backend_named(inp.engine).read_file(inp.path, inp.format, dict(inp.columns))


# -- the run ---------------------------------------------------------------------------------
def _identities(files: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """Path → (size, modification time in ns, device, inode) of each input file: file-system
    metadata, no data."""
    out = {}
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            out[f] = (-1, -1, -1, -1)
        else:
            out[f] = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)
    return out


def _check_unchanged(spec: ReleaseSpec, checked: dict[str, tuple[int, int, int, int]]) -> None:
    """Refuse, before any release, if the input files are not the ones whose schemas were
    checked (a file added, removed, replaced or rewritten since): the check's conclusions
    would not hold for what is read. From file-system metadata only, so the refusal reveals
    nothing about the data; nothing has been spent at this point."""
    if _identities(_files(spec.input)) != checked:
        raise SourceChangedError(
            f"the input files ({spec.input.path}) changed while this run started (added, "
            "removed, replaced or rewritten after their schemas were checked); the release "
            "was stopped before any query ran. Nothing was spent; run it again once the files "
            "are stable."
        )


@dataclass
class RunResult:
    """What a run released: the long result table (pandas), the output path, the budget
    after the run, and the per-query ε spent."""

    table: Any
    output: Path
    budget: Any
    spent: dict[str, float]
    seconds: float
    head: str | None = None


def run_spec(spec: ReleaseSpec, *, output: Path | None = None, overwrite: bool = False,
             random_state: Any = None, out: Any = None, expect_head: str | None = None
             ) -> RunResult:
    """Run every query of ``spec`` and write the output file. Checks, before reading any
    data: the output path (:func:`check_output`: never the ledger, its head file, the spec
    or an input), every input file's schema (:func:`source_facts`), the plan (as in the dry
    run), and that the ledger has this run's ε and δ left (so a run never stops half-way for
    lack of budget). With ``expect_head`` (a head digest archived after an earlier run), the
    ledger must contain it (``dpf.Session(path, expect_head=...)``): a ledger rolled back,
    deleted or diverged is refused before any data is read. After ``protect`` and before the
    first release, the input files must still be the ones checked (:func:`_check_unchanged`);
    from then on every release checks them again (:class:`~dpframe.errors.SourceChangedError`,
    before anything is spent). The output's folder is opened (created if missing) before
    anything is spent, and the output is written atomically relative to it (a temporary file
    in it, then ``os.replace``; :class:`_OutputFolder`)."""
    import numpy as np


    out = sys.stdout if out is None else out
    t0 = time.perf_counter()
    target = spec.output if output is None else output
    files = _files(spec.input)
    check_output(spec, target, files, from_arguments=output is not None)
    if target.exists() and not (overwrite or spec.overwrite):
        raise SpecError(f"output {target} exists; remove it, pass --overwrite or set "
                        "overwrite = true under [output]", source=spec.source,
                        line=spec.line_of(("output", "path")))
    checked = _identities(files)  # before the footers are read: a later change shows
    facts = source_facts(spec)
    if facts.n is not None or not any(q.targeted for q in spec.queries):
        plan_release(spec, facts)  # every check of the dry run, before protect
    else:  # CSV with target accuracies: their ε needs n, known once protect has counted it
        check_schema(spec, facts)
    rng = None if random_state is None else np.random.default_rng(random_state)
    # the output's folder, opened (created if missing) before anything is spent; every write
    # of the run goes through it
    folder = _OutputFolder(spec, target, from_arguments=output is not None)
    try:
        return _run(spec, target, folder, checked, facts, rng, out, expect_head, t0)
    finally:
        folder.close()


def _run(spec: ReleaseSpec, target: Path, folder: _OutputFolder,
         checked: dict[str, tuple[int, int, int, int]], facts: SourceFacts, rng: Any,
         out: Any, expect_head: str | None, t0: float) -> RunResult:

    spec.ledger.parent.mkdir(parents=True, exist_ok=True)
    session = dpf.Session(path=spec.ledger, expect_head=expect_head)
    try:
        frame = load_frame(spec.input)
        pf = protect_input(spec, frame, session)
    except Exception:
        _check_unchanged(spec, checked)  # a changed input: one fixed message, whatever failed
        raise
    _check_unchanged(spec, checked)  # protect bound these files; every release checks them
    # the plan of the protected input itself: the ε's of the queries at the public n protect
    # read (the same n as the footers'), the same plans its releases make
    size = pf.dp.size if pf.dp.is_size_public else None  # private under add/remove
    plan = plan_release(spec, replace(facts, n=size) if size is not None else facts, pf)
    by_name = {qp.name: qp for qp in plan.queries}
    remaining = pf.dp.budget
    check_run_budget(spec, plan, session, remaining)
    shown = (f"n = {size:,}" if size is not None
             else "n private (neighbours add or remove a row)")
    print(f"protected {spec.input.path} ({spec.input.engine}): {shown}; ledger "
          f"{spec.ledger}: {remaining}", file=out)
    frame = query_frame(spec, pf)  # the derived columns, as the plan made them
    rows, spent, documents = release_all(spec, frame, by_name, rng, target, folder, out)
    try:
        frame_out = write_output(folder, target.name, rows, documents, spec.text)
    except BaseException:  # the values are released and spent: do not lose them
        print(f"  writing {target} failed; the released values (spent, noisy) are:", file=out)
        fixed = ("query", "statistic", "value", "lower", "upper")
        for r in rows:
            keys = ", ".join(f"{k}={v}" for k, v in r.items() if k not in fixed and v is not None)
            interval = (f" [{r['lower']!r}, {r['upper']!r}]" if r.get("lower") is not None
                        else "")
            print(f"    {r['query']}  {keys or '-'}  {r['statistic']} = {r['value']!r}"
                  f"{interval}", file=out)
        raise

    chain = session.ledger.snapshot_document().get("chain") or {}  # as of our last commit
    head = head_digest(chain["seq"], chain["hash"]) if "seq" in chain else None
    return RunResult(frame_out, target, pf.dp.budget, spent, time.perf_counter() - t0, head)


# -- command line ----------------------------------------------------------------------------
def add_release_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``release`` on the ``python -m dpframe`` subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "release",
        help="run a release spec (TOML): protect, release, write Parquet with the log",
        description=textwrap.fill(
            "Run the release described by a spec file (docs/release-spec.md): protect the "
            "input with the spec's budget in its durable ledger, run each query as one "
            "release, write all results to one Parquet file with the accounting log inside. "
            "--dry-run prints the plan (budget split, mechanisms, scales, the 95% half-width of "
            "every answer, the public n released at no ε) without reading any data.",
            width=78) + "\n\n" + textwrap.fill(
            "Exit codes: 0 ok, 2 bad spec or arguments (the message names the spec line), "
            "1 other failures (e.g. too little budget left in the ledger).", width=78),
        epilog="examples:\n  dpframe release spec.toml --dry-run\n  dpframe release spec.toml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", type=Path, help="the release spec (TOML)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan without reading any data (file metadata only)")
    p.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    p.add_argument("--rows", type=int, default=None, metavar="N",
                   help="with --dry-run on CSV input: evaluate the plan at an assumed n")
    p.add_argument("--output", type=Path, default=None, metavar="PATH",
                   help="write the results here instead of the spec's output.path")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output file")
    p.add_argument("--noise-seed", type=int, default=None, metavar="S",
                   help="seed the noise (tests and teaching only: NOT private)")
    p.add_argument("--expect-head", default=None, metavar="HEAD",
                   help="the ledger head printed after an earlier run (or by `dpframe inspect "
                        "LEDGER --head`): refuse a ledger that does not contain it (rolled "
                        "back to an older copy, deleted, or a clone that spent separately)")
    return p


def _print_summary(result: RunResult, spec: ReleaseSpec, out: Any) -> None:
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_rows", 200):
        shown = result.table.astype(object).where(result.table.notna(), "-")
        print("", shown.to_string(index=False), "", sep="\n", file=out)
    b = result.budget
    print(f"spent ε = {math.fsum(result.spent.values()):.6g} in {len(result.spent)} releases; "
          f"ledger {spec.ledger}: {b}", file=out)
    print(f"wrote {result.output} ({len(result.table)} rows; the log is inside: "
          f"dpf.read_log({str(result.output)!r})) in {result.seconds:.1f} s", file=out)
    if result.head is not None:
        print(f"ledger head: {result.head} (archive it elsewhere; the next run with "
              f"--expect-head {result.head} refuses a ledger rolled back behind it)", file=out)


def release_command(args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    """Run the ``release`` subcommand; returns the exit code."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        spec = load_spec(args.spec)
        if args.rows is not None and args.rows < 1:
            raise SpecError(f"--rows must be ≥ 1, got {args.rows}", source="arguments")
        if args.expect_head is not None:

            try:
                check_head(args.expect_head)
            except ParameterError as exc:
                raise SpecError(str(exc).replace("expect_head", "--expect-head", 1),
                                source="arguments") from None
        if args.dry_run:
            target = spec.output if args.output is None else args.output
            check_output(spec, target, _files(spec.input), from_arguments=args.output is not None)
            plan: ReleasePlan = plan_release(spec, source_facts(spec, args.rows))
            status = ledger_status(spec, args.expect_head)
            if args.json:
                print(json.dumps({**plan.as_dict(), "ledger": status}, indent=2,
                                 allow_nan=False, default=str), file=out)
            else:
                print(format_plan(plan), f"ledger: {status['note']}", sep="\n", file=out)
            return 0
        result = run_spec(spec, output=args.output, overwrite=args.overwrite,
                          random_state=args.noise_seed, out=out, expect_head=args.expect_head)
        _print_summary(result, spec, out)
        return 0
    except SpecError as exc:
        print(f"error: {exc}", file=err)
        return 2
    except (DPFrameError, OSError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=err)
        return 1
    except Exception as exc:  # an engine's own error: report it, exit 1
        print(f"error: {type(exc).__name__}: {exc}", file=err)
        return 1

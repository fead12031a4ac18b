"""``dpframe release spec.toml``: the example spec end to end, the dry run reads no data, bad
specs name their line, the durable ledger carries the budget across runs, engines.

Every spec here is written to a temporary folder next to its generated data; the runs happen
in-process through ``dpframe.cli.main`` except where a second process is the point (a
later run of the same spec on the same files continues the same durable ledger).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import narwhals as nw
import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.cli import main
from dpframe.spec._parse import SpecError, parse_spec
from dpframe.spec._plan import compile_filter

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "release_spec.toml"
MARK = "# <-"


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``dpframe release`` in this process, with the registry of protected files a fresh CLI
    process starts with: dpframe refuses to protect a file whose (device, inode) a protected
    source of this process read, and a file system reuses the inodes of files earlier tests
    deleted, which made this test order-dependent (a fail-safe refusal; docs/frames.md)."""
    from dpframe.provenance import _protect as provenance

    saved = set(provenance._files)
    provenance._files.clear()
    try:
        code = main(["release", *argv])
    finally:
        provenance._files.clear()
        provenance._files.update(saved)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if MARK in line]
    assert len(lines) == 1, "mark exactly one line of a bad spec"
    return lines[0]


def _make_example(tmp_path: Path, rows: int = 20_000) -> Path:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_release_data import make_release_data
    finally:
        sys.path.remove(str(ROOT / "examples"))
    make_release_data(tmp_path / "release_data", rows=rows, files=3)
    spec = tmp_path / "release_spec.toml"
    shutil.copy(EXAMPLE, spec)
    return spec


# -- the shipped example -----------------------------------------------------------------------
def test_example_spec_dry_run_then_run(tmp_path, capsys):
    spec = _make_example(tmp_path)
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert "no data was read" in out and "20,000" in out and "Parquet footers of 3 files" in out
    for name in ("population", "by_region", "employed_adults", "by_education"):
        assert f"query {name!r}" in out
    code, out_json, err = _cli([str(spec), "--dry-run", "--json"], capsys)
    assert code == 0, err
    plan = json.loads(out_json)
    assert plan["n"] == 20_000
    assert sum(q["epsilon"] for q in plan["queries"]) == pytest.approx(0.5)

    code, out, err = _cli([str(spec), "--noise-seed", "1"], capsys)
    assert code == 0, err
    output = tmp_path / "release_data" / "release.parquet"
    table = pl.read_parquet(output)
    assert table.columns[:5] == ["query", "statistic", "value", "lower", "upper"]
    by_region = table.filter(pl.col("query") == "by_region")
    assert sorted(set(by_region["region"])) == sorted(["Northeast", "Midwest", "South", "West"])
    assert len(table.filter(pl.col("query") == "by_education")) == 7
    assert np.isfinite(table["value"].to_numpy()).all()

    # the log travels in the file, and its scales are the ones the dry run announced
    doc = dpf.read_log(output)
    entries = doc["entries"]
    assert len({e["release_id"] for e in entries}) == 4
    assert len(doc["release_ids"]) == 4  # the sealed log vouches for all four releases
    logged = {(e["name"], e["part"], e["group_by"]): e for e in entries}
    for q in plan["queries"]:
        for m in q["measurements"]:
            e = logged[(m["statistic"], m["part"], q["group_by"])]
            assert e["scale"] == pytest.approx(m["scale"], rel=1e-12)
            assert e["sensitivity"] == pytest.approx(m["sensitivity"], rel=1e-12)
            assert e["epsilon"] == pytest.approx(m["epsilon"], rel=1e-12)
            assert e["mechanism"] == m["mechanism"]
    assert doc["budget"]["epsilon_spent"] == pytest.approx(0.5)
    import pyarrow.parquet as pq

    assert pq.read_schema(output).metadata[b"dpframe.cli.spec"].decode() == spec.read_text()
    assert "spent ε = 0.5 in 4 releases" in out
    assert main(["inspect", str(output)]) == 0  # the steward's check verifies the seal
    assert "VERIFIED" in capsys.readouterr().out


def test_example_generator_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_release_data.py"), "--rows", "1000",
         "--files", "2", "--out", str(tmp_path / "d")],
        capture_output=True, text=True, check=True)
    assert "1,000 rows" in proc.stdout
    assert pl.scan_parquet(tmp_path / "d" / "*.parquet").select(pl.len()).collect().item() == 1000


# -- the durable ledger ------------------------------------------------------------------------
def test_later_runs_continue_the_ledger_and_stop_when_exhausted(tmp_path, capsys):
    """run_epsilon = 0.5 of epsilon = 1: two runs fit, the third is refused before any
    release. Later runs are new processes (as a steward runs them); the first is in-process."""
    spec = _make_example(tmp_path, rows=5_000)
    ledger = tmp_path / "release_data" / "census.ledger"
    assert "no ledger file yet" in _cli([str(spec), "--dry-run"], capsys)[1]
    code, _, err = _cli([str(spec)], capsys)
    assert code == 0, err
    assert ledger.exists()
    assert "4 releases so far" in _cli([str(spec), "--dry-run"], capsys)[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def again() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dpframe", "release", str(spec),
                               "--overwrite"], capture_output=True, text=True, env=env,
                              cwd=tmp_path)

    second = again()
    assert second.returncode == 0, second.stderr
    assert "spent 1 of 1" in second.stdout
    code, out, _ = _cli([str(spec), "--dry-run"], capsys)  # reads the ledger file, no data
    assert code == 0 and "this run does NOT fit" in out
    before = ledger.read_bytes()
    output = tmp_path / "release_data" / "release.parquet"
    released = output.read_bytes()
    third = again()
    assert third.returncode == 1
    assert "BudgetExceededError" in third.stderr and "this run needs ε = 0.5" in third.stderr
    assert ledger.read_bytes() == before  # nothing spent
    assert output.read_bytes() == released  # the released file is untouched
    assert dpf.read_log(output)["budget"]["epsilon_spent"] == pytest.approx(1.0)


def test_existing_output_is_not_overwritten(tmp_path, capsys):
    spec = _make_example(tmp_path, rows=2_000)
    assert _cli([str(spec)], capsys)[0] == 0
    code, _, err = _cli([str(spec)], capsys)
    assert code == 2
    line = spec.read_text().splitlines().index(
        next(x for x in spec.read_text().splitlines() if x.startswith('path = "release_data/r')))
    assert f"release_spec.toml:{line + 1}: output" in err and "--overwrite" in err


@pytest.mark.skipif(shutil.which("dpframe") is None, reason="console script not installed")
def test_console_script(tmp_path):
    spec = _make_example(tmp_path, rows=1_000)
    proc = subprocess.run(["dpframe", "release", str(spec), "--dry-run"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert "dry run" in proc.stdout


# -- the dry run reads no data -----------------------------------------------------------------
BASE = """\
[input]
path = "data.{fmt}"
engine = "polars"
{columns}
[privacy]
epsilon = 1.0
ledger = "ledger.jsonl"

[bounds]
age = [0, 100]
income = [0, 1000]

[keys]
region = ["a", "b"]

[missing]
income = 0

[[query]]
name = "n"
share = 0.5
kind = "count"

[[query]]
name = "m"
share = 0.5
[query.statistics]
mean_age = "mean(age)"
mean_income = {{ kind = "mean", column = "income", weight = 2 }}

[output]
path = "out.parquet"
"""


#: a CSV input declares its column types (a value that does not parse is missing)
CSV_COLUMNS = """[input.columns]
age = "int64"
income = "float64"
region = "string"
"""


def _data(n: int = 50) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame({"age": rng.integers(0, 100, n), "income": rng.uniform(0, 1000, n),
                         "region": rng.choice(["a", "b"], n)})


def test_dry_run_reads_only_the_parquet_footer(tmp_path, capsys):
    """Overwrite every data page with garbage, keep the footer: the dry run succeeds (it reads
    the metadata only) and shows the public n; the real run cannot read the data."""
    path = tmp_path / "data.parquet"
    _data(5_000).write_parquet(path, statistics=False, compression="uncompressed")
    raw = bytearray(path.read_bytes())
    footer_len = int.from_bytes(raw[-8:-4], "little")
    data_end = len(raw) - 8 - footer_len
    raw[4:data_end] = b"\xff" * (data_end - 4)
    path.write_bytes(bytes(raw))
    spec = tmp_path / "spec.toml"
    spec.write_text(BASE.format(fmt="parquet", columns=""))
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert "5,000" in out and "public n" in out
    code, _, err = _cli([str(spec)], capsys)
    assert code == 1 and err.startswith("error:")
    assert not (tmp_path / "out.parquet").exists()


def test_dry_run_on_csv_reads_only_the_header(tmp_path, capsys):
    """A CSV whose body is not CSV at all: the dry run reads the header line only, says n is
    unknown and shows n-dependent quantities as formulas; --rows evaluates them."""
    (tmp_path / "data.csv").write_bytes(b"age,income,region\n" + bytes(range(256)) * 40)
    spec = tmp_path / "spec.toml"
    spec.write_text(BASE.format(fmt="csv", columns=CSV_COLUMNS))
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert "unknown" in out and "formulas in n" in out
    assert "Δ = 1000/n" in out  # public-size mean of income (filled): w/n
    assert "Δ = 100; domain (-∞, ∞)" in out  # private-size mean of age (drops): its sum
    assert "Δ = 1; domain [0, n]" in out  # the count
    code, out, err = _cli([str(spec), "--dry-run", "--rows", "1000"], capsys)
    assert code == 0, err
    assert "ASSUMED" in out and "1,000" in out


def test_formulas_in_n_are_the_librarys_plans(tmp_path, capsys):
    """The formulas in n of a CSV dry run are read off the library's plans at sample sizes
    (no sensitivity is restated in the spec planner): at n = 10,000 they give what the plan
    at an assumed n = 10,000 shows, and a formula that no longer fits falls back to values."""
    from dpframe.spec import _plan as spec_plan

    (tmp_path / "data.csv").write_text("age,income,region\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(BASE.format(fmt="csv", columns=CSV_COLUMNS).replace(
        'mean_income = { kind = "mean", column = "income", weight = 2 }',
        'mean_income = { kind = "mean", column = "income", weight = 2 }\n'
        'var_income = "variance(income)"\ntotal = "sum(income)"'))
    code, out, err = _cli([str(spec), "--dry-run", "--json"], capsys)
    assert code == 0, err
    rows = {m["statistic"]: m for q in json.loads(out)["queries"] for m in q["measurements"]}
    code, out, err = _cli([str(spec), "--dry-run", "--json", "--rows", "10000"], capsys)
    assert code == 0, err
    at = {m["statistic"]: m for q in json.loads(out)["queries"] for m in q["measurements"]}
    assert rows["mean_income"]["formula"].startswith("Δ = 1000/n; domain [0, 1000]; scale ")
    assert at["mean_income"]["sensitivity"] == pytest.approx(1000 / 10_000, rel=1e-9)
    assert "domain [0, 2.5e+05·n/(n−1)]" in rows["var_income"]["formula"]
    assert at["var_income"]["upper"] == pytest.approx(250_000 * 10_000 / 9_999, rel=1e-9)
    assert "Δ = 1000; domain [0, 1000·n]" in rows["total"]["formula"]
    assert at["total"]["upper"] == pytest.approx(1000 * 10_000, rel=1e-9)
    assert spec_plan._in_n([1.0, 2.0, 5.0]) == "1 | 2 | 5"  # no form fits: the values
    assert spec_plan._in_n([3.0 / n for n in spec_plan.SAMPLE_N]) == "3/n"


def test_csv_run_matches_parquet_run_plan(tmp_path, capsys):
    """A well-formed CSV runs with the Polars engine (n counted by protect)."""
    _data(400).write_csv(tmp_path / "data.csv")
    spec = tmp_path / "spec.toml"
    spec.write_text(BASE.format(fmt="csv", columns=CSV_COLUMNS))
    code, _, err = _cli([str(spec)], capsys)
    assert code == 0, err
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["statistic"].to_list() == ["n", "mean_age", "mean_income"]


# -- bad specs name their line -----------------------------------------------------------------
def _bad(old: str, new: str) -> str:
    base = BASE.format(fmt="parquet", columns="")
    assert old in base, old
    return base.replace(old, new, 1)


BAD = {
    "unknown key": (_bad('engine = "polars"', f'engin = "polars"  {MARK}'), "unknown key 'engin'"),
    "unknown top-level key": (_bad("[output]", f"[outputs]  {MARK}"), "unknown key 'outputs'"),
    "bad engine": (_bad('engine = "polars"', f'engine = "pandas"  {MARK}'), "input.engine"),
    "missing budget": (_bad("[privacy]\nepsilon = 1.0\n", f"[privacy]  {MARK}\n"), "epsilon"),
    "missing ledger": (_bad('[privacy]\nepsilon = 1.0\nledger = "ledger.jsonl"\n',
                            f"[privacy]  {MARK}\nepsilon = 1.0\n"), "ledger"),
    "share sum": (_bad('share = 0.5\n[query.statistics]',
                       f'share = 0.4  {MARK}\n[query.statistics]'), "add up to 0.9"),
    "negative weight": (_bad("weight = 2 }", f"weight = -2 }}  {MARK}"), "weight"),
    "unknown query kind": (_bad('kind = "count"', f'kind = "medain"  {MARK}'),
                           "unknown query kind 'medain' (did you mean 'median'?)"),
    "unknown shorthand kind": (_bad('mean_age = "mean(age)"', f'mean_age = "avg(age)"  {MARK}'),
                               "unknown query kind"),
    "unbounded column": (_bad('mean_age = "mean(age)"', f'mean_age = "mean(height)"  {MARK}'),
                         "'height' has no bounds"),
    "bounds reversed": (_bad("age = [0, 100]", f"age = [100, 0]  {MARK}"), "are reversed"),
    "fill outside bounds": (_bad("income = 0\n", f"income = 5000  {MARK}\n"), "outside"),
    "group_by without keys": (_bad('kind = "count"', f'kind = "count"\ngroup_by = "sex"  {MARK}'),
                              "no public keys"),
    "filter op": (_bad('kind = "count"',
                       f'kind = "count"\nfilter = [{{ column = "age", op = "=>", value = 1 }}]'
                       f"  {MARK}"), "filter op"),
    "filter element line": (_bad('kind = "count"',
                                 'kind = "count"\nfilter = [\n'
                                 '  { column = "age", op = ">=", value = 18 },\n'
                                 f'  {{ column = "age", op = "in", value = 3 }},  {MARK}\n]'),
                            "array of values"),
    "run_epsilon over total": (_bad("epsilon = 1.0", f"epsilon = 1.0\nrun_epsilon = 2  {MARK}"),
                               "exceeds"),
    "toml syntax": (_bad("share = 0.5", f"share = = 0.5  {MARK}"), "TOML syntax error"),
    "duplicate query name": (_bad('name = "m"', f'name = "n"  {MARK}'), "used twice"),
    # found when the spec meets the file's schema (still no data read)
    "column not in file": (_bad("income = [0, 1000]", f"income = [0, 1000]\nheight = [0, 3]"
                                f"  {MARK}"), "not a column of the input"),
    "filter type": (_bad('kind = "count"',
                         f'kind = "count"\nfilter = [{{ column = "region", op = ">", value = 3 }}]'
                         f"  {MARK}"), "cannot compare string with numeric"),
    # the library's checks of the stand-in (dpframe.spec._plan.stand_in), at the line of the
    # column they name
    "bounds on a string column": (_bad("income = [0, 1000]", f"income = [0, 1000]\n"
                                       f"region = [0, 1]  {MARK}"), "not a numeric type"),
    "keys of another type": (_bad('kind = "count"', f'kind = "count"\ngroup_by = "age"  {MARK}'
                                  '\nkeys = ["x", "y"]'), "do not match column 'age'"),
    "no matching file": (_bad('path = "data.parquet"', f'path = "nothing/*.parquet"  {MARK}'),
                         "no file matches"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_spec_names_its_line(case, tmp_path, capsys):
    _assert_refused_at_its_line(case, *BAD[case], 50, tmp_path, capsys)


def _assert_refused_at_its_line(case: str, text: str, needle: str, rows: int, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """The dry run and the run both exit 2 naming the marked line of ``text`` and ``needle``,
    before any ledger exists."""
    _data(rows).write_parquet(tmp_path / "data.parquet")
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    for argv in ([str(spec), "--dry-run"], [str(spec)]):
        code, out, err = _cli(argv, capsys)
        assert code == 2, (case, out, err)
        assert f"spec.toml:{_marked_line(text)}: " in err, (case, err)
        assert needle in err, (case, err)
    assert not (tmp_path / "ledger.jsonl").exists()  # refused before protect


def test_missing_table_is_named():
    with pytest.raises(SpecError, match=r"missing \[privacy\] table"):
        parse_spec(BASE.format(fmt="parquet", columns="").replace(
            '[privacy]\nepsilon = 1.0\nledger = "ledger.jsonl"\n', ""))


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["release"])
    assert exc.value.code == 2
    code, _, err = _cli(["/nonexistent/spec.toml", "--dry-run"], capsys)
    assert code == 2 and "cannot read the spec" in err


# -- filters -----------------------------------------------------------------------------------
def test_filter_language_compiles_to_the_same_rows():
    text = BASE.format(fmt="parquet", columns="").replace('kind = "count"', """kind = "count"
filter = [
  { column = "age", op = "between", value = [20, 60] },
  { any = [ { column = "region", op = "==", value = "a" },
            { column = "income", op = ">", value = 900 } ] },
  { column = "income", op = "is not null" },
  { column = "age", op = "not in", value = [30, 31] },
]""")
    spec = parse_spec(text)
    df = _data(2_000)
    got = nw.from_native(df).filter(*compile_filter(spec.queries[0].filter)).to_native()
    want = df.filter(pl.col("age").is_between(20, 60)
                     & ((pl.col("region") == "a") | (pl.col("income") > 900))
                     & pl.col("income").is_not_null() & ~pl.col("age").is_in([30, 31]))
    assert got.equals(want) and 0 < len(got) < len(df)


def test_filtered_query_is_verified_and_private_size(tmp_path, capsys):
    _data(3_000).write_parquet(tmp_path / "data.parquet")
    text = BASE.format(fmt="parquet", columns="").replace('kind = "count"', """kind = "count"
filter = [{ column = "age", op = ">=", value = 50 },
          { column = "region", op = "in", value = ["a"] }]""")
    (tmp_path / "spec.toml").write_text(text)
    code, _, err = _cli([str(tmp_path / "spec.toml")], capsys)
    assert code == 0, err
    doc = dpf.read_log(tmp_path / "out.parquet")
    entry = next(e for e in doc["entries"] if e["name"] == "n")
    assert entry["size"] == "private" and "filter" in entry["derivation"]


# -- engines -----------------------------------------------------------------------------------
ENGINE_MODULES = {"duckdb": "duckdb", "spark": "pyspark", "dask": "dask.dataframe"}


@pytest.mark.parametrize("engine", list(ENGINE_MODULES))
def test_other_engines(engine, tmp_path, capsys):
    """DuckDB, Spark (local mode) and Dask run the same spec through the one loader
    (``spec_run.load_frame``); results come back as the same long table with the log."""
    pytest.importorskip(ENGINE_MODULES[engine])
    if engine == "spark" and shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark cannot start")
    _data(500).write_parquet(tmp_path / "data.parquet")
    text = BASE.format(fmt="parquet", columns="").replace('engine = "polars"',
                                                           f'engine = "{engine}"')
    text = text.replace('kind = "count"', 'kind = "count"\ngroup_by = "region"')
    (tmp_path / "spec.toml").write_text(text)
    code, _, err = _cli([str(tmp_path / "spec.toml")], capsys)
    assert code == 0, err
    table = pl.read_parquet(tmp_path / "out.parquet")
    assert table.filter(pl.col("query") == "n")["region"].to_list() == ["a", "b"]
    assert table.filter(pl.col("query") == "m")["statistic"].to_list() == [
        "mean_age", "mean_income"]
    assert len(dpf.read_log(tmp_path / "out.parquet")["entries"]) == 1 + 2 + 1


@pytest.mark.parametrize("engine", ["polars", *ENGINE_MODULES])
def test_a_csv_value_that_does_not_parse_is_missing_on_every_engine(engine, tmp_path, capsys):
    """Neighbouring CSV files, one with a late value that does not parse as its declared type
    (and a ragged line): both runs exit 0 with the same log apart from noise and times — the
    value is read as missing, never an error that quotes it."""
    if engine != "polars":
        pytest.importorskip(ENGINE_MODULES[engine])
    if engine == "spark" and shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark cannot start")
    logs = []
    for late in ("55", "fifty-five"):
        folder = tmp_path / late
        folder.mkdir()
        rows = "".join(f"{20 + i % 50},{i * 3.5},{'ab'[i % 2]}\n" for i in range(300))
        (folder / "data.csv").write_text(f"age,income,region\n{rows}{late},1.0,a\n")
        text = BASE.format(fmt="csv", columns=CSV_COLUMNS).replace(
            'engine = "polars"', f'engine = "{engine}"')
        (folder / "spec.toml").write_text(text)
        code, _, err = _cli([str(folder / "spec.toml"), "--noise-seed", "1"], capsys)
        assert code == 0, err
        assert "fifty-five" not in err
        entries = dpf.read_log(folder / "out.parquet")["entries"]
        logs.append([{k: v for k, v in e.items() if k not in ("time", "ledger_id")}
                     for e in entries])
    assert logs[0] == logs[1]


def test_failure_mid_run_keeps_what_was_released(tmp_path, capsys, monkeypatch):
    """If a release fails after earlier ones were spent, their results are written to
    ``<output>.partial`` (sealed, with the log) and the command exits 1."""
    import dpframe.spec._release as spec_release

    _data(300).write_parquet(tmp_path / "data.parquet")
    private = BASE.replace('kind = "count"\n', 'kind = "count"\nfilter = [{{ column = "age", '
                           'op = ">=", value = 0 }}]\n', 1)  # a private size: the count spends
    (tmp_path / "spec.toml").write_text(private.format(fmt="parquet", columns=""))
    real = spec_release.release_query
    calls = []

    def failing(q, *args, **kwargs):
        calls.append(q.name)
        if len(calls) == 2:
            raise RuntimeError("engine lost")
        return real(q, *args, **kwargs)

    monkeypatch.setattr(spec_release, "release_query", failing)
    code, out, err = _cli([str(tmp_path / "spec.toml")], capsys)
    assert code == 1 and "engine lost" in err
    assert not (tmp_path / "out.parquet").exists()
    partial = tmp_path / "out.parquet.partial"
    assert pl.read_parquet(partial)["query"].to_list() == ["n"]
    assert dpf.read_log(partial)["budget"]["epsilon_spent"] == pytest.approx(0.5)
    assert "out.parquet.partial" in out


# -- target accuracies -------------------------------------------------------------------------
TARGETED = BASE.replace('''[[query]]
name = "n"
share = 0.5
kind = "count"
''', '''[[query]]
name = "n"
accuracy = 20.0
level = 0.9
kind = "count"
filter = [{{ column = "age", op = ">=", value = 0 }}]  # a private size (the public n is free)

[[query]]
name = "by_region"
group_by = "region"
[query.statistics]
total = {{ kind = "sum", column = "income", accuracy = 80000 }}
count = {{ kind = "count", accuracy = 60 }}

[[query]]
name = "sd_income"
kind = "std"
column = "income"
accuracy = 150
''').replace('name = "m"\nshare = 0.5', 'name = "m"\nshare = 1.0').replace(
    'ledger = "ledger.jsonl"\n', 'ledger = "ledger.jsonl"\nmechanism = "bounded"\n', 1)


def test_target_accuracies_set_epsilon_dry_run_and_run_agree(tmp_path, capsys):
    """A query with target accuracies gets the smallest ε meeting them (the planner's inverse,
    as frame.dp.epsilon_for gives it); the shares split what is left; the run spends exactly
    the planned ε's and the mechanisms it builds reach the targets."""
    from dpframe.mechanisms.accuracy import half_width, rounded_half_width

    _data(2_000).write_parquet(tmp_path / "data.parquet")
    spec = tmp_path / "spec.toml"
    spec.write_text(TARGETED.format(fmt="parquet", columns=""))
    code, out, err = _cli([str(spec), "--dry-run", "--json"], capsys)
    assert code == 0, err
    plan = {q["name"]: q for q in json.loads(out)["queries"]}
    frame = dpf.protect(_data(2_000), epsilon=1.0, bounds={"age": (0, 100),
                        "income": (0, 1000)}, missing={"income": 0.0})
    eps_n = frame.dp.filter(nw.col("age") >= 0).dp.epsilon_for(dpf.count(), 20.0, alpha=0.1)
    assert plan["n"]["share"] is None and plan["n"]["epsilon"] == pytest.approx(eps_n, rel=1e-12)
    (m_n,) = plan["n"]["measurements"]
    assert m_n["target"] == 20.0 and m_n["level"] == 0.9 and m_n["target_half_width"] <= 20.0
    grouped = {m["statistic"]: m for m in plan["by_region"]["measurements"]}
    assert grouped["total"]["target_half_width"] <= 80000
    assert grouped["count"]["target_half_width"] <= 60
    assert plan["by_region"]["epsilon"] == pytest.approx(
        grouped["total"]["epsilon"] + grouped["count"]["epsilon"])
    (m_sd,) = plan["sd_income"]["measurements"]  # a std is √ of a variance: h² on it
    assert m_sd["part"] == "variance" and m_sd["target_half_width"] <= 150
    # the planner's inverse on a protected frame of the same public facts gives the same ε's
    from dpframe.release import _accuracy_planner as planner

    for stat, query, target in (("total", dpf.sum("income"), 80000), ("count", dpf.count(), 60)):
        want = planner.epsilon_for(frame, query, target, group_by="region", keys=["a", "b"])
        assert grouped[stat]["epsilon"] == pytest.approx(want, rel=1e-12), stat
        assert grouped[stat]["mechanism_epsilon"] == pytest.approx(want / 2, rel=1e-12)
    targeted = sum(plan[q]["epsilon"] for q in ("n", "by_region", "sd_income"))
    assert plan["m"]["epsilon"] == pytest.approx(1.0 - targeted)  # the shares split the rest
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert "target n: ±20 with probability ≥ 0.9: reaches ±" in out
    assert "target accuracies at level 0.9" in out

    code, out, err = _cli([str(spec), "--noise-seed", "3"], capsys)
    assert code == 0, err
    doc = dpf.read_log(tmp_path / "out.parquet")
    logged = {(e["name"], e["part"], e["group_by"]): e for e in doc["entries"]}
    for name, q in plan.items():  # the run spends and builds exactly what the dry run showed
        for m in q["measurements"]:
            e = logged[(m["statistic"], m["part"], q["group_by"])]
            assert e["epsilon"] == pytest.approx(m["epsilon"], rel=1e-12), name
            assert e["scale"] == pytest.approx(m["scale"], rel=1e-12), name
    assert doc["budget"]["epsilon_spent"] == pytest.approx(1.0)
    # and the count's mechanism, rebuilt from its log entry, reaches the target
    from dpframe.mechanisms import make_mechanism

    e = logged[("n", "count", None)]
    mech = make_mechanism("bounded", epsilon=e["epsilon"], sensitivity=e["sensitivity"],
                          lower=e["domain_lower"], upper=e["domain_upper"], delta=0.0)
    assert half_width(mech, 0.1) < 20.5  # the released integer: within ⌊h + ½⌋ ≤ 20
    assert rounded_half_width(half_width(mech, 0.1)) <= 20.0


def test_spec_public_count_is_free(tmp_path, capsys):
    """Issue 23: a count of every row is the public n: planned and released exactly, at no ε
    (a query of only such counts spends nothing); counts behind a filter are noised."""
    _data(500).write_parquet(tmp_path / "data.parquet")
    text = BASE.replace('kind = "count"\n', 'kind = "count"\n\n[[query]]\nname = "c"\n'
                        'accuracy = 20.0\nkind = "count"\nfilter = [{{ column = "age", '
                        'op = ">=", value = 0 }}]\n', 1)
    (tmp_path / "spec.toml").write_text(text.format(fmt="parquet", columns=""))
    code, out, err = _cli([str(tmp_path / "spec.toml"), "--dry-run", "--json"], capsys)
    assert code == 0, err
    plan = {q["name"]: q for q in json.loads(out)["queries"]}
    assert plan["n"]["epsilon"] == 0.0 and plan["n"]["measurements"] == []
    (m_c,) = plan["c"]["measurements"]
    assert m_c["mechanism"] in ("bounded", "truncated") and m_c["target_half_width"] <= 20.0
    code, _, err = _cli([str(tmp_path / "spec.toml"), "--noise-seed", "2"], capsys)
    assert code == 0, err
    doc = dpf.read_log(tmp_path / "out.parquet")
    by_name = {e["name"]: e for e in doc["entries"]}
    assert by_name["n"]["epsilon"] == 0.0 and by_name["n"]["size"] == "public"
    assert by_name["c"]["mechanism"] == m_c["mechanism"]
    assert by_name["c"]["epsilon"] == pytest.approx(m_c["epsilon"], rel=1e-12)
    spent = sum(q["epsilon"] for q in plan.values())
    assert doc["budget"]["epsilon_spent"] == pytest.approx(spent, rel=1e-9)
    assert pl.read_parquet(tmp_path / "out.parquet").filter(
        pl.col("query") == "n")["value"].to_list() == [500.0]


def test_only_target_accuracies_spend_only_what_they_need(tmp_path, capsys):
    _data(2_000).write_parquet(tmp_path / "data.parquet")
    text = TARGETED.format(fmt="parquet", columns="").replace('''[[query]]
name = "m"
share = 1.0
[query.statistics]
mean_age = "mean(age)"
mean_income = { kind = "mean", column = "income", weight = 2 }
''', "")
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert "the rest stays unspent" in out
    code, out, err = _cli([str(spec), "--noise-seed", "1"], capsys)
    assert code == 0, err
    assert 0 < dpf.read_log(tmp_path / "out.parquet")["budget"]["epsilon_spent"] < 1.0


def test_target_accuracies_on_csv_need_n(tmp_path, capsys):
    _data(2_000).write_csv(tmp_path / "data.csv")
    text = TARGETED.format(fmt="csv", columns=CSV_COLUMNS)
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    code, _out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 2 and "--rows N" in err
    assert f"spec.toml:{text.splitlines().index('accuracy = 20.0') + 1}: " in err
    code, _, err = _cli([str(spec), "--dry-run", "--rows", "2000"], capsys)
    assert code == 0, err
    code, _, err = _cli([str(spec), "--noise-seed", "1"], capsys)  # the run counts n
    assert code == 0, err


def _bad_target(old: str, new: str) -> str:
    base = TARGETED.format(fmt="parquet", columns="")
    assert old in base, old
    return base.replace(old, new, 1)


BAD_TARGETS = {
    "share and accuracy": (_bad_target("accuracy = 20.0", f"share = 0.1\naccuracy = 20.0  {MARK}"),
                           "not both"),
    "neither": (_bad_target('[[query]]\nname = "n"\naccuracy = 20.0\nlevel = 0.9\n',
                            f'[[query]]  {MARK}\nname = "n"\n'), "needs share = 0.25"),
    "query accuracy with statistics": (_bad_target(
        'group_by = "region"', f'group_by = "region"\naccuracy = 5  {MARK}'),
        "give each its own target"),
    "statistic without target": (_bad_target(
        'count = { kind = "count", accuracy = 60 }', f'count = {{ kind = "count" }}  {MARK}'),
        "'count' has none"),
    "weight and accuracy": (_bad_target('accuracy = 60 }', f'accuracy = 60, weight = 2 }}'
                                        f'  {MARK}'), "not both"),
    "bad level": (_bad_target("level = 0.9", f"level = 95  {MARK}"), "level of 'n'"),
    "level with share": (_bad_target('name = "m"\nshare = 1.0',
                                     f'name = "m"\nshare = 1.0\nlevel = 0.9  {MARK}'),
                         "level goes with accuracy"),
    "negative accuracy": (_bad_target("accuracy = 20.0", f"accuracy = -1  {MARK}"), "> 0"),
    "private-size target": (_bad_target(
        'total = { kind = "sum", column = "income", accuracy = 80000 }',
        f'total = {{ kind = "mean", column = "age", accuracy = 1 }}  {MARK}'),
        "one measurement"),
    "targets over budget": (_bad_target("epsilon = 1.0", f"epsilon = 1.0\nrun_epsilon = 0.01"
                                        f"  {MARK}"), "the target accuracies need"),
    # (a count's target is for the released integer: any target is reachable, 0 meaning
    # exact with probability ≥ level; a continuous statistic's ±1e-12 is not)
    "unreachable target": (_bad_target("accuracy = 150", f"accuracy = 1e-12  {MARK}"),
                           "reaches half-width"),
}


@pytest.mark.parametrize("case", list(BAD_TARGETS))
def test_bad_target_accuracy_names_its_line(case, tmp_path, capsys):
    _assert_refused_at_its_line(case, *BAD_TARGETS[case], 2_000, tmp_path, capsys)


def test_spec_mechanism_defaults_to_auto_and_targets_invert_bounded():
    """Like the library, a spec without ``mechanism`` uses ``"auto"`` (δ goes to its queries,
    which may choose bounded); a query with target accuracies is inverted for one named
    mechanism, so under ``"auto"`` it uses ``"bounded"``."""
    shared = parse_spec(BASE.format(fmt="parquet", columns=""))
    assert {q.mechanism for q in shared.queries} == {"auto"}
    text = TARGETED.format(fmt="parquet", columns="").replace('mechanism = "bounded"\n', "")
    targeted = parse_spec(text)
    assert {q.mechanism for q in targeted.queries if q.share is None} == {"bounded"}
    assert {q.mechanism for q in targeted.queries if q.share is not None} == {"auto"}


# -- the frame API's statistics with parameters (issue 22) ------------------------------------
FRAME_STATISTICS = BASE.replace('''[[query]]
name = "m"
share = 0.5
[query.statistics]
mean_age = "mean(age)"
mean_income = {{ kind = "mean", column = "income", weight = 2 }}
''', '''[[query]]
name = "shape"
share = 0.3
[query.statistics]
ages = {{ kind = "histogram", column = "age", bins = 4 }}
regions = "value_counts(region)"
shares = {{ kind = "proportions", column = "region", keys = ["b", "a"], weight = 2 }}
c = "cov(income, age)"

[[query]]
name = "r"
share = 0.1
kind = "corr"
columns = ["age", "income"]

[[query]]
name = "by_region"
share = 0.1
group_by = "region"
kind = "histogram"
column = "income"
bins = 2
''').replace('income = 0\n', 'income = 0\nage = 0\n')  # cov and corr need a public size


def test_frame_statistics_dry_run_and_run_agree(tmp_path, capsys):
    """histogram, value_counts, proportions, cov and corr in a spec: planned by release.plan
    (the dry run shows what the run spends and builds), written as concat_releases' long
    table of the same releases."""
    _data(500).write_parquet(tmp_path / "data.parquet")
    spec = tmp_path / "spec.toml"
    spec.write_text(FRAME_STATISTICS.format(fmt="parquet", columns=""))
    code, out, err = _cli([str(spec), "--dry-run", "--json"], capsys)
    assert code == 0, err
    plan = {q["name"]: q for q in json.loads(out)["queries"]}
    code, text, err = _cli([str(spec), "--dry-run"], capsys)
    assert "ages = histogram(age, bins=4)" in text and "c = cov(income, age)" in text
    code, _, err = _cli([str(spec), "--noise-seed", "5"], capsys)
    assert code == 0, err
    doc = dpf.read_log(tmp_path / "out.parquet")
    logged = {(e["name"], e["part"], e["group_by"]): e for e in doc["entries"]}
    checked = 0
    for name, q in plan.items():
        for m in q["measurements"]:
            e = logged[(m["statistic"], m["part"], q["group_by"])]
            assert e["epsilon"] == pytest.approx(m["epsilon"], rel=1e-12), name
            if m["scale"] is not None:  # (a covariance's scale is set by the noisy variances)
                assert e["scale"] == pytest.approx(m["scale"], rel=1e-12), name
                assert e["mechanism"] == m["mechanism"]
                checked += 1
    assert checked == 5 + 2 + 1  # ages, regions, shares, 2 variances; r's 2; by_region
    assert doc["budget"]["epsilon_spent"] == pytest.approx(sum(q["epsilon"] for q in plan.values()))

    # the same releases through the frame API: the same long table, up to the noise
    written = pl.read_parquet(tmp_path / "out.parquet")
    pf = dpf.protect(_data(500), epsilon=10.0, bounds={"age": (0, 100), "income": (0, 1000)},
                     keys={"region": ["a", "b"]}, missing={"income": 0.0, "age": 0.0})
    tables = {
        "n": pf.dp.release({"n": dpf.count()}, epsilon=0.5),
        "shape": pf.dp.release({"ages": dpf.histogram("age", bins=4),
                                "regions": dpf.value_counts("region"),
                                "shares": dpf.proportions("region", keys=["b", "a"]),
                                "c": dpf.cov(["income", "age"])}, epsilon=0.3),
        "r": pf.dp.release({"r": dpf.corr(["age", "income"])}, epsilon=0.1),
        "by_region": pf.dp.groupby("region", keys=["a", "b"]).release(
            {"by_region": dpf.histogram("income", bins=2)}, epsilon=0.1),
    }
    long = dpf.concat_releases(tables)
    long = long if isinstance(long, pl.DataFrame) else pl.from_pandas(long)
    shape = [c for c in written.columns if c not in ("value", "lower", "upper")]
    assert written.columns == long.columns
    assert written.select(shape).to_dicts() == long.select(shape).to_dicts()
    assert written.filter(pl.col("statistic").str.starts_with("ages["))["statistic"].to_list() \
        == ["ages[0,25]", "ages[25,50]", "ages[50,75]", "ages[75,100]"]
    shares = written.filter(pl.col("statistic").str.starts_with("shares["))["value"]
    assert shares.sum() == pytest.approx(1.0)


def test_frame_statistic_on_neighbouring_files(tmp_path, capsys):
    """Neighbouring CSV inputs (one row replaced): the spec's histogram and proportions runs
    give output of the same shape and classes, and identical logged ε's and scales."""
    runs = []
    for last in ("1,10.5,a", "99,990.0,b"):
        folder = tmp_path / last.replace(",", "_")
        folder.mkdir()
        rows = "".join(f"{i % 100},{i * 2.5},{'ab'[i % 2]}\n" for i in range(199))
        (folder / "data.csv").write_text(f"age,income,region\n{rows}{last}\n")
        text = FRAME_STATISTICS.format(fmt="csv", columns=CSV_COLUMNS)
        (folder / "spec.toml").write_text(text)
        code, _, err = _cli([str(folder / "spec.toml"), "--noise-seed", "1"], capsys)
        assert code == 0, err
        table = pl.read_parquet(folder / "out.parquet")
        entries = dpf.read_log(folder / "out.parquet")["entries"]
        runs.append((table, [(e["name"], e["part"], e["epsilon"], e["scale"]) for e in entries]))
    (a, log_a), (b, log_b) = runs
    assert a.schema == b.schema and a.shape == b.shape
    assert a.drop("value").equals(b.drop("value"))
    assert [(n, p, e) for n, p, e, _ in log_a] == [(n, p, e) for n, p, e, _ in log_b]
    # every scale fixed before the read is the same (a covariance's follows its noisy variances)
    assert [s for n, p, _, s in log_a if "covariance" not in p] == [
        s for n, p, _, s in log_b if "covariance" not in p]


def _bad_frame(old: str, new: str) -> str:
    base = FRAME_STATISTICS.format(fmt="parquet", columns="")
    assert old in base, old
    return base.replace(old, new, 1)


_AGES = 'ages = { kind = "histogram", column = "age", bins = 4 }'
_SHARES = 'shares = { kind = "proportions", column = "region", keys = ["b", "a"], weight = 2 }'
BAD_FRAME = {
    "histogram without bins": (_bad_frame(_AGES, f'ages = {{ kind = "histogram", column = '
                                          f'"age" }}  {MARK}'), "histogram needs bins"),
    "histogram bins not whole": (_bad_frame(_AGES, f'ages = {{ kind = "histogram", column = '
                                            f'"age", bins = 2.5 }}  {MARK}'), "bins of 'ages'"),
    "histogram of an unbounded column": (_bad_frame(
        _AGES, f'ages = {{ kind = "histogram", column = "region", bins = 4 }}  {MARK}'),
        "'region' has no bounds"),
    "value_counts without keys": (_bad_frame('regions = "value_counts(region)"',
                                             f'regions = "value_counts(age)"  {MARK}'),
                                  "needs public keys"),
    "value_counts keys of another type": (_bad_frame(
        'regions = "value_counts(region)"',
        f'regions = {{ kind = "value_counts", column = "region", keys = [1, 2] }}  {MARK}'),
        "do not match column 'region'"),
    "proportions with bins": (_bad_frame(_SHARES, f'shares = {{ kind = "proportions", column = '
                                         f'"region", bins = 3 }}  {MARK}'),
                              "proportions takes no bins"),
    "proportions with repeated keys": (_bad_frame(_SHARES, f'shares = {{ kind = "proportions", '
                                                  f'column = "region", keys = ["a", "a"] }}  '
                                                  f'{MARK}'), "'region'"),
    "cov of one column": (_bad_frame('c = "cov(income, age)"', f'c = "cov(income)"  {MARK}'),
                          "at least two distinct"),
    "cov with a column": (_bad_frame('c = "cov(income, age)"',
                                     f'c = {{ kind = "cov", column = "age" }}  {MARK}'),
                          "cov takes no column"),
    "corr in a group-by": (_bad_frame('[[query]]\nname = "r"', f'[[query]]  {MARK}\nname = "r"\n'
                                      'group_by = "region"'), "not available per group"),
    "corr of a private size": (_bad_frame('[[query]]\nname = "r"',
                                          f'[[query]]  {MARK}\nname = "r"\nfilter = [{{ '
                                          'column = "age", op = ">", value = 1 }]'),
                               "corr needs the public"),
}


@pytest.mark.parametrize("case", list(BAD_FRAME))
def test_bad_frame_statistic_names_its_line(case, tmp_path, capsys):
    """Each new statistic's bad parameters are refused (exit 2, at the spec line) by the dry
    run and by the run before anything is read or spent (no ledger is created)."""
    _assert_refused_at_its_line(case, *BAD_FRAME[case], 50, tmp_path, capsys)

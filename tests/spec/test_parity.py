"""The release spec at parity with the Python API (issue 33, item 6).

* Every statistic of the registry is a spec word (or is listed with the reason it is not), and
  every parameter the API's method for it takes is a spec key (or is listed as a known gap).
* A spec run and the same API calls, with the same seed, give bit-identical values and the same
  log entries (names included: one value_counts query is logged ``value_counts(<col>)``, as
  ``frame.dp.value_counts`` logs it).
* Its dry run shows a ± for every answer (private-size means too) and lists the free public n;
  its measurements are the ones the run logs.
* Neighbouring inputs (one row replaced): the same output shape and classes, the same logged
  ε's and scales.
* Bad input is refused at its line, before anything is read or spent; ``privacy.neighbours``
  and ``privacy.max_rows`` go to protect.
"""

from __future__ import annotations

import functools
import inspect
import io
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.errors import SpecError
from dpframe.frames.namespace import DPNamespace
from dpframe.query.registry import STATISTICS
from dpframe.spec._parse import parse_spec
from dpframe.spec._run import run_spec
from dpframe.spec._vocabulary import SPEC_PARAMETERS

from .test_spec import _cli

N = 300
SEED = 7
RUN_EPSILON, RUN_DELTA = 10.0, 1e-6

SPEC = """\
missing = "midpoint"

[input]
path = "data.parquet"

[privacy]
epsilon = 20.0
delta = 1e-6
run_epsilon = 10.0
ledger = "ledger.jsonl"

[bounds]
age = [16, 90]
income = [0, 1000]
hours = [1, 60]

[keys]
region = ["N", "S"]
sex = ["F", "M"]

[with_columns]
hourly = {{ expr = "income / hours", bounds = [0, 100], missing = "drop" }}

[[query]]
name = "overall"
share = 0.3
ci = 0.9
[query.statistics]
n = "count"
mean_income = "mean(income)"
mean_hourly = "mean(hourly)"
med_age = "median(age)"
quartiles = {{ kind = "quantile", column = "age", q = [0.25, 0.75], ci_share = 0.4 }}

[[query]]
name = "ages"
share = 0.1
kind = "histogram"
column = "age"
edges = [16, 25, 45, 65, 90]
ci = 0.95

[[query]]
name = "ages_by_sex"
share = 0.1
group_by = "sex"
kind = "histogram"
column = "age"
edges = [16, 45, 90]

[[query]]
name = "by_region"
share = 0.2
kind = "value_counts"
column = "region"

[[query]]
name = "by_region_sex"
share = 0.3
group_by = ["region", "sex"]
ci = 0.95
{min_rows}[query.statistics]
n = "count"
m = "mean(income)"

[output]
path = "out.parquet"
"""


def _data(n: int = N, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"region": rng.choice(["N", "S"], n), "sex": rng.choice(["F", "M"], n),
                         "age": rng.integers(16, 91, n).astype(float),
                         "income": rng.uniform(0, 1000, n), "hours": rng.uniform(1, 60, n)})


def _write(folder: Path, frame: pl.DataFrame, min_rows: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(folder / "data.parquet")
    (folder / "spec.toml").write_text(SPEC.format(min_rows=min_rows))
    return folder / "spec.toml"


# -- the vocabulary --------------------------------------------------------------------------
#: Statistics of the registry a spec does not name, and why.
NOT_IN_SPEC = {"count_units": "counts persons of a privacy_unit; a spec's unit is one row"}


def test_every_registry_statistic_is_a_spec_word_with_its_parameters():
    for entry in STATISTICS.values():
        if entry.name in NOT_IN_SPEC:
            assert not entry.in_spec, entry.name
            continue
        assert entry.name in SPEC_PARAMETERS, entry.name
        assert set(entry.parameters) <= set(SPEC_PARAMETERS[entry.name]), entry.name
    assert set(SPEC_PARAMETERS) | set(NOT_IN_SPEC) == set(STATISTICS)


#: Parameters of a statistic's ``frame.dp`` method that a query passes for every statistic
#: (``share``/``accuracy`` set epsilon; ``ci`` and ``mechanism`` are query keys; the rest are
#: the run's), and the known gaps: API parameters a spec does not offer yet.
_QUERY_LEVEL = {"epsilon", "delta", "mechanism", "random_state", "session", "ci"}
_GAPS = {
    "histogram": {"total"},  # apportioning counts to a public total
    "value_counts": {"total"},
    "proportions": {"method", "remainder"},  # all_but_one proportions
}


def test_every_api_method_parameter_is_a_spec_key():
    for entry in STATISTICS.values():
        if entry.name in NOT_IN_SPEC:
            continue
        method = getattr(DPNamespace, entry.method)
        taken = set(inspect.signature(method).parameters) - {"self"} - _QUERY_LEVEL
        taken -= _GAPS.get(entry.name, set())
        assert taken <= set(SPEC_PARAMETERS[entry.name]), (entry.name, taken)


# -- the run and the API ---------------------------------------------------------------------
def _api_tables(path: Path) -> dict[str, object]:
    """The spec's five queries as the API's calls, in order, sharing one seeded generator."""
    import narwhals as nw

    pf = dpf.protect(pl.read_parquet(path), epsilon=20.0, delta=1e-6,
                     bounds={"age": (16, 90), "income": (0, 1000), "hours": (1, 60)},
                     keys={"region": ["N", "S"], "sex": ["F", "M"]}, missing="midpoint",
                     session=dpf.Session())
    d = pf.dp.with_columns((nw.col("income") / nw.col("hours")).alias("hourly"),
                           bounds={"hourly": (0, 100)}, missing={"hourly": "drop"})
    rng = np.random.default_rng(SEED)

    def eps(share: float) -> float:
        return (RUN_EPSILON - 0.0) * share  # (as the spec splits the run's ε)

    common = {"mechanism": "auto", "random_state": rng}
    return {
        "overall": d.dp.release(
            {"n": dpf.count(), "mean_income": dpf.mean("income"),
             "mean_hourly": dpf.mean("hourly"), "med_age": dpf.median("age"),
             "quartiles": dpf.quantile("age", [0.25, 0.75], ci_share=0.4)},
            epsilon=eps(0.3), delta=RUN_DELTA * 0.3, ci=0.9, **common),
        "ages": d.dp.histogram("age", edges=[16, 25, 45, 65, 90], epsilon=eps(0.1),
                               delta=RUN_DELTA * 0.1, ci=0.95, **common),
        "ages_by_sex": d.dp.groupby("sex", keys=["F", "M"]).histogram(
            "age", edges=[16, 45, 90], epsilon=eps(0.1), delta=RUN_DELTA * 0.1, **common),
        "by_region": d.dp.value_counts("region", epsilon=eps(0.2), delta=RUN_DELTA * 0.2,
                                       **common),
        "by_region_sex": d.dp.groupby(["region", "sex"]).release(
            {"n": dpf.count(), "m": dpf.mean("income")}, epsilon=eps(0.3),
            delta=RUN_DELTA * 0.3, ci=0.95, **common),
    }


_LOGGED = ("name", "query", "part", "columns", "group_by", "group_keys", "epsilon", "delta",
           "mechanism", "scale", "sensitivity")


def test_spec_run_equals_the_api_calls_bit_for_bit(tmp_path):
    spec = parse_spec(_write(tmp_path, _data()).read_text(), base=tmp_path)
    run_spec(spec, random_state=SEED, out=io.StringIO())
    written = pl.read_parquet(tmp_path / "out.parquet")
    tables = _api_tables(tmp_path / "data.parquet")
    long = dpf.concat_releases(tables)
    long = long if isinstance(long, pl.DataFrame) else pl.from_pandas(long)
    assert written.columns == long.columns
    assert written.to_dicts() == long.to_dicts()  # values, intervals and keys: bit-identical
    assert {"lower", "upper"} <= set(written.columns)
    assert written.filter(pl.col("query") == "overall")["lower"].drop_nulls().len() >= 5
    spec_log = [{k: e[k] for k in _LOGGED} for e in dpf.read_log(tmp_path / "out.parquet")[
        "entries"]]
    api_log = [{k: e[k] for k in _LOGGED} for t in tables.values() for e in _own(t)]
    assert spec_log == api_log
    names = [e["name"] for e in spec_log]
    assert "value_counts(region)" in names and "histogram(age)" in names


def _own(table: object) -> list[dict[str, object]]:
    """The log entries of the release that made ``table`` (its log holds the ledger's)."""
    from dpframe.accounting.seals import release_log_of

    doc = release_log_of(table)
    assert doc is not None
    last = max(int(e["release_id"]) for e in doc["entries"])
    return [e for e in doc["entries"] if int(e["release_id"]) == last]


def test_dry_run_shows_every_answers_accuracy_and_the_free_n(tmp_path, capsys):
    spec = _write(tmp_path, _data(), min_rows='min_rows = 50\n')
    code, out, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert "free public n (released at no ε): overall: n = 300" in out
    assert "mean_hourly  ±" in out and "at N ≥ 300" in out  # a private-size mean, by N
    assert "declare min_rows" in out
    code, text, err = _cli([str(spec), "--dry-run", "--json"], capsys)
    plan = {q["name"]: q for q in json.loads(text)["queries"]}
    assert plan["overall"]["free"] == [{"statistic": "n", "value": N}]
    for q in plan.values():
        for a in q["answers"]:
            if a["statistic"] in ("med_age", "quartiles"):  # values: data-dependent
                assert "in ranks" in a["note"]
            elif a["statistic"] != "mean_hourly":
                assert a["half_width"] is not None and a["half_width"] >= 0, (q["name"], a)
    # min_rows (the API planner's) gives the group means one ±
    assert all(a["half_width"] is not None for a in plan["by_region_sex"]["answers"])
    # the measurements planned are the ones the run logs
    code, _, err = _cli([str(spec), "--noise-seed", "1"], capsys)
    assert code == 0, err
    entries = dpf.read_log(tmp_path / "out.parquet")["entries"]
    planned = sorted((m["epsilon"], m["part"], m["scale"] or 0.0) for q in plan.values()
                     for m in q["measurements"])
    logged = sorted((e["epsilon"], e["part"], e["scale"] if e["query"] != "quantile" else 0.0)
                    for e in entries if e["epsilon"] > 0)
    assert [(e, p) for e, p, _ in planned] == [(e, p) for e, p, _ in logged]


def test_neighbouring_inputs_give_the_same_shape_and_log(tmp_path):
    base = _data()
    other = base.with_columns(  # the last row replaced by an extreme one
        pl.when(pl.int_range(pl.len()) == N - 1).then(pl.lit(v)).otherwise(pl.col(c)).alias(c)
        for c, v in (("age", 90.0), ("income", 1000.0), ("hours", 1.0), ("region", "S")))
    runs = []
    for name, frame in (("a", base), ("b", other)):
        spec_path = _write(tmp_path / name, frame)
        spec = parse_spec(spec_path.read_text(), base=tmp_path / name)
        run_spec(spec, random_state=SEED, out=io.StringIO())
        table = pl.read_parquet(tmp_path / name / "out.parquet")
        log = [{k: e[k] for k in ("name", "part", "epsilon", "delta", "scale", "sensitivity",
                                  "grid", "mechanism")}
               for e in dpf.read_log(tmp_path / name / "out.parquet")["entries"]]
        runs.append((table, log))
    (ta, la), (tb, lb) = runs
    assert ta.drop("value", "lower", "upper").to_dicts() == tb.drop(
        "value", "lower", "upper").to_dicts()
    assert ta.schema == tb.schema and la == lb
    for col in ("value", "lower", "upper"):
        assert (ta[col].is_null() == tb[col].is_null()).all()
    # the same seed draws the same noise, so an answer of one clamped-Laplace measurement (a
    # count per cell, a public-size mean) moves by at most its logged sensitivity (plus the
    # snapping grid; counts are whole numbers)
    moved = ta.with_columns(d=(pl.col("value") - tb["value"]).abs())
    cells = moved.filter(pl.col("query").is_in(["ages", "ages_by_sex", "by_region"])
                         | (pl.col("statistic") == "n"))
    assert len(cells) == 15 and cells["d"].max() <= 1.0
    mean = next(e for e in la if e["name"] == "mean_income")
    assert mean["mechanism"] == "truncated"
    assert moved.filter(pl.col("statistic") == "mean_income")["d"].item() <= (
        mean["sensitivity"] + mean["grid"])


# -- refusals ----------------------------------------------------------------------------------
_BAD = {
    "edges with another statistic": (
        'n = "count"\nmean_income', 'h = { kind = "histogram", column = "age", edges = [16, 50, '
        '90] }  # <-\nmean_income', "is its own release"),
    "bins and edges": ('edges = [16, 25, 45, 65, 90]', 'edges = [16, 90]  # <-\nbins = 3',
                       "not both"),
    "edges not increasing": ('edges = [16, 25, 45, 65, 90]', 'edges = [16, 90, 25]  # <-',
                             "strictly increasing"),
    "q outside [0, 1]": ('q = [0.25, 0.75]', 'q = [0.25, 1.5]', "quartiles"),
    "ci outside (0, 1)": ('ci = 0.9', 'ci = 95  # <-', "in (0, 1)"),
    "unknown function": ('expr = "income / hours"', 'expr = "eval(income)"', "unknown function"),
    "group_by of one column": ('group_by = ["region", "sex"]', 'group_by = ["region"]  # <-',
                               "two or more distinct"),
    "key tuples of the wrong width": ('group_by = ["region", "sex"]',
                                      'group_by = ["region", "sex"]\nkeys = [["N"]]  # <-',
                                      "key tuples"),
    "fill word unknown": ('missing = "midpoint"', 'missing = "middle"  # <-', "missing"),
    "neighbours unknown": ('ledger = "ledger.jsonl"',
                           'ledger = "ledger.jsonl"\nneighbours = "swap"  # <-', "neighbours"),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_bad_input_is_refused_at_its_line_before_anything_is_read(case, tmp_path):
    old, new, needle = _BAD[case]
    text = SPEC.format(min_rows="")
    assert old in text, case
    text = text.replace(old, new, 1)
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="spec.toml", base=tmp_path)
    assert needle in str(info.value), (case, str(info.value))
    marked = [i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line]
    if marked:
        assert f"spec.toml:{marked[0]}:" in str(info.value), (case, str(info.value))
    assert not list(tmp_path.iterdir())  # nothing read, written or spent


def test_a_derived_column_of_an_unknown_column_is_refused_by_the_dry_run(tmp_path, capsys):
    spec = _write(tmp_path, _data(50))
    spec.write_text(spec.read_text().replace('"income / hours"', '"income / wage"'))
    code, _, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 2 and "column 'wage' is not a column of the input" in err
    line = next(i for i, t in enumerate(spec.read_text().splitlines(), 1) if "wage" in t)
    assert f"spec.toml:{line}:" in err and not (tmp_path / "ledger.jsonl").exists()


def test_add_remove_neighbours_go_to_protect_and_the_run_logs_them(tmp_path, capsys,
                                                                    monkeypatch):
    """``privacy.neighbours = "add_remove"`` and ``privacy.max_rows`` reach ``dpf.protect``;
    the dry run and the real run succeed, the run's log says add/remove on every entry, and
    the output prints no public n (the size is private under add/remove)."""
    spec = _write(tmp_path, _data(100))
    spec.write_text(spec.read_text().replace(
        'ledger = "ledger.jsonl"', 'ledger = "ledger.jsonl"\nneighbours = "add_remove"\n'
        'max_rows = 1000'))
    seen = {}
    real = dpf.protect

    @functools.wraps(real)
    def protect(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(dpf, "protect", protect)
    code, _, err = _cli([str(spec), "--dry-run"], capsys)
    assert code == 0, err
    assert seen.get("neighbours") == "add_remove" and seen.get("max_rows") == 1000
    out = io.StringIO()
    run_spec(parse_spec(spec.read_text(), base=tmp_path), random_state=SEED, out=out)
    assert "n = 100" not in out.getvalue() and "n private" in out.getvalue()
    doc = dpf.read_log(tmp_path / "out.parquet")
    assert doc["neighbours"] == "add_remove"
    assert {e["neighbours"] for e in doc["entries"]} == {"add_remove"}


def test_example_specs_and_the_documented_format_parse(tmp_path):
    """Every spec shipped in examples/ still parses (no name was renamed), and so does the
    format block of docs/release-spec.md."""
    import re

    root = Path(__file__).resolve().parents[2]
    for path in (root / "examples").glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
        assert parse_spec(path.read_text(), base=tmp_path).queries
    doc = (root / "docs" / "release-spec.md").read_text(encoding="utf-8")
    block = re.search(r"## The format\n\n(?:<!--.*?-->\n)?```toml\n(.*?)```", doc, re.S)
    assert block is not None
    spec = parse_spec(block.group(1), base=tmp_path)
    assert [q.name for q in spec.queries] == ["population", "adults_by_region",
                                              "by_region_sex", "workers"]
    assert spec.queries[2].group_by == ("region", "sex") and spec.queries[2].ci == 0.95

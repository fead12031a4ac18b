"""The whole-analysis report (issue 33 item 5): a file of many queries (``dpf.concat_releases``)
drawn query by query, each described by its own release; the tidy form of the long table;
post-processing shown; a file written before still read. Checked as a DOM here; rendered in
Chromium in tests/report/test_views_chromium.py."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.seals import release_log_of
from dpframe.cli import main
from dpframe.cli.report import build_report
from dpframe.report.plots import ticks
from report.test_views import DOM, self_contained
from report.whole_analysis import FIXTURE, QUERIES, tables, write_files


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    made = tables()
    return made, write_files(tmp_path_factory.mktemp("analysis"), made)


def _cards(html: str) -> dict[str, str]:
    """Each query card's markup by query name."""
    parts = re.split(r'(?=<section class="dpf-card")', html)
    out = {}
    for p in parts[1:]:
        name = re.search(r'data-query="([^"]*)"', p)[1]
        out[name] = p.split("</section>", 1)[0]
    return out


def _count(html: str, tag: str, cls: str) -> int:
    return len(DOM(html).having(tag, cls))


def test_every_query_drawn_as_it_is_read(analysis):
    made, files = analysis
    html, report = build_report(files["long"])
    assert report["verified"]
    self_contained(html)
    cards = _cards(html)
    assert list(cards) == QUERIES
    assert _count(cards["ages"], "rect", "dpf-bin") == 4  # bars over the four bins' edges
    assert ">18<" in cards["ages"] and ">90<" in cards["ages"]  # the edges label the axis
    assert _count(cards["by_region"], "rect", "dpf-bar-value") == 4  # one bar per region
    assert _count(cards["by_region"], "line", "dpf-whisker") == 4
    assert _count(cards["by_region_sex"], "g", "dpf-cell") == 8  # a 4 × 2 heatmap
    assert _count(cards["income_by_sex"], "circle", "dpf-value") == 4  # 2 means × 2 groups
    assert _count(cards["income_by_sex"], "line", "dpf-whisker") == 4
    assert _count(cards["age_quartiles"], "line", "dpf-value") == 3  # on the age axis
    assert "age declared in [18, 90]" in cards["age_quartiles"] and "ranks" in cards[
        "age_quartiles"]
    corr = cards["corr"]  # a matrix, each cell with its interval
    assert _count(corr, "g", "dpf-cell") == 4
    r, lo, hi = (float(made["corr"].loc[(p, "age"), "income"])
                 for p in ("estimate", "lower", "upper"))
    assert f"[{lo:.4g}, {hi:.4g}]" in corr and f"{r:.4g}" in corr
    # legends per query: two queries named `count` keep their own release and ε; the two
    # `mean_income` (by sex, overall) are not summed
    assert "release 1: ε = 0.3" in cards["by_region"]
    assert "release 2: ε = 0.3" in cards["by_region_sex"]
    assert "release 3: ε = 1" in cards["income_by_sex"]
    assert "release 7: ε = 0.3" in cards["overall"]
    # budget by query name, measurements with their query
    budget = html.split(">Budget<", 1)[1]
    assert all(f">{q}<" in budget for q in QUERIES) and "release 1<" not in budget
    assert "3 (income_by_sex)" in html


def test_postprocessing_shown_rename_swap_undone_for_the_description(analysis, capsys):
    made, files = analysis
    html, report = build_report(files["renamed"])
    assert report["verified"]
    card = _cards(html)["income_by_sex"]
    assert "column mean_age holds mean_income as released (renamed)" in card
    assert "mean_age: mean of income by sex (released as mean_income)" in card
    assert "renamed mean_income → mean_age, mean_age → mean_income" in card
    # each interval stays with its value: the income interval is drawn under `mean_age`
    female = made["income_by_sex"].set_index("sex").loc["female"]
    tip = f"female: {female['mean_income']:.6g} [{female['mean_income_lower']:.6g}, "
    assert tip in card.split("mean_income: mean of age", 1)[0]
    # steps on the whole file are shown on every query; a sorted file keeps the queries' order
    sorted_file = files["long"].with_name("sorted.parquet")
    dpf.write_parquet(dpf.sort_release(dpf.round_release(dpf.concat_releases(made), 1),
                                       "value"), sorted_file)
    cards = _cards(build_report(sorted_file)[0])
    assert list(cards) == QUERIES and all(
        "post-processing: rounded to 1 decimals; sorted by value" in c for c in cards.values())
    assert main(["inspect", str(files["renamed"])]) == 0
    out = capsys.readouterr().out
    assert "queries in this file (7):" in out
    assert "mean_age: mean of income by sex (released as mean_income, renamed)" in out
    assert "by_region_sex by region, sex: release 2, ε=0.3" in out


def test_tidy_form_one_row_per_value_with_its_interval_and_keys(analysis, capsys):
    made, files = analysis
    tidy = dpf.read_release(files["tidy"])
    assert list(tidy.columns)[:5] == ["query", "statistic", "value", "lower", "upper"]
    assert {"region", "sex", "q", "bin_lower", "bin_upper", "column"} <= set(tidy.columns)
    assert not tidy["statistic"].str.endswith(("_lower", "_upper")).any()
    two = tidy[tidy["query"] == "by_region_sex"]
    assert len(two) == 8 and set(two["sex"]) == {"female", "male"}
    row = made["by_region_sex"].iloc[0]
    first = two.iloc[0]
    assert (first["region"], first["sex"]) == (row["region"], row["sex"])
    assert (first["value"], first["lower"], first["upper"]) == (
        row["count"], row["count_lower"], row["count_upper"])
    corr = tidy[tidy["query"] == "corr"]  # estimate/lower/upper rows folded into one each
    assert len(corr) == 4 and corr["lower"].notna().all()
    doc = dpf.read_log(files["tidy"])
    assert doc["postprocessing"][-1]["releases"] == {q: [i + 1] for i, q in enumerate(QUERIES)}
    html, report = build_report(files["tidy"])
    assert report["verified"] and list(_cards(html)) == QUERIES
    assert main(["inspect", str(files["tidy"])]) == 0
    assert "income_by_sex by sex: release 3, ε=1" in capsys.readouterr().out
    # Polars in, Polars out; post-processing keeps it verifiable; forms are not mixed
    pf = dpf.protect(pl.DataFrame({"g": ["a", "b"] * 10, "x": [0.5] * 20}), epsilon=1.0,
                     bounds={"x": (0, 1)}, keys={"g": ["a", "b"]})
    by_g = pf.dp.groupby("g").release({"m": dpf.mean("x")}, epsilon=0.5, ci=0.9,
                                      random_state=0)
    as_polars = dpf.concat_releases({"by_g": by_g}, form="tidy")
    assert isinstance(as_polars, pl.DataFrame) and as_polars.columns == [
        "query", "statistic", "value", "lower", "upper", "g"]
    assert as_polars["lower"].to_list() == by_g["m_lower"].to_list()
    rounded = dpf.round_release(tidy, 1)
    assert release_log_of(rounded)["postprocessing"][-1]["op"] == "round"
    with pytest.raises(dpf.ParameterError, match="form"):
        dpf.concat_releases(made, form="wide")
    with pytest.raises(dpf.ParameterError, match=r"joins concat_releases\(..., form='long'\)"):
        dpf.concat_releases({"a": dpf.concat_releases(made, form="long")})


def test_a_file_written_before_still_reads(tmp_path, capsys):
    """The long file as the code before the tidy form wrote it (tests/report/data)."""
    table = dpf.read_release(FIXTURE)
    assert list(table.columns) == ["query", "group_by", "group", "statistic", "value"]
    assert main(["inspect", str(FIXTURE)]) == 0
    assert "queries in this file (7):" in capsys.readouterr().out
    out = tmp_path / "old.html"
    assert main(["report", str(FIXTURE), "-o", str(out)]) == 0
    cards = _cards(out.read_text(encoding="utf-8"))
    assert list(cards) == QUERIES and _count(cards["corr"], "g", "dpf-cell") == 4


def test_ticks_are_round_and_inside():
    assert ticks(0, 1000) == [0, 200, 400, 600, 800, 1000]
    assert ticks(0, 1040) == [0, 500, 1000]
    assert ticks(51.8, 55.8) == [52, 53, 54, 55]
    assert ticks(-1, 1, 5) == [-1, -0.5, 0, 0.5, 1]
    assert ticks(3, 3) == [3]


def test_a_tampered_or_odd_long_table_is_still_drawn(analysis, tmp_path):
    """What the page draws is the file's claim: a tampered file gets its NOT VERIFIED page with
    the cards; odd cells (infinite, missing, keys that disagree with their query, hostile
    names, a log of the wrong shapes) draw without an exception."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpframe.report import views

    _, files = analysis
    table = pq.read_table(files["long"])
    values = table.column("value").to_pylist()
    values[0], values[5] = float("inf"), float("nan")
    bad = table.set_column(4, "value", pa.array(values, type=pa.float64()))
    pq.write_table(bad, tmp_path / "bad.parquet")
    html, report = build_report(tmp_path / "bad.parquet")
    assert not report["verified"] and list(_cards(html)) == QUERIES
    hostile = '<script>alert("x")</script>'
    columns = {"query": ["a", "a", "a", "b", hostile, "c", "c"],
               "group_by": ["q", "x,y", None, "bin_lower,bin_upper", hostile, "column",
                            "statistic,column"],
               "group": ["0.5", "1", None, "1.0, inf", hostile, "a", "lower"],
               "statistic": ["quantile", "quantile_lower", "rank_error", "count", hostile,
                             "a", "a"],
               "value": [1e308, -1e308, None, float("inf"), 2.0, 0.5, -2.0]}
    doc = {"entries": [{"release_id": 1, "name": 5, "query": "corr", "group_by": ["x"],
                        "clamping": "x clamped to [3, 1]", "interval": "nonsense"}, "junk"],
           "release_ids": [1, "2"],
           "postprocessing": [{"op": "rename", "mapping": [1]}, {"op": "sort", "by": 3},
                              {"op": "round", "decimals": {"a": 1, "b": "x"}},
                              {"op": "concat", "releases": {"a": "1"}}, "junk"]}
    page = views.release_html(columns, doc)
    self_contained(page)
    assert hostile not in page and len(_cards(page)) == 4


def test_other_kinds_each_drawn_as_read(tmp_path):
    """describe as a table, cov as a shaded matrix, quantiles per group on one axis each, a
    histogram per group as one panel per group, a mean by two keys as dots (a value on its
    declared bound in red), a median released in a table on the column's axis, and the
    families of columns builders write (``ages[18,42]``: bars over edges; proportions by a
    key: a heatmap)."""
    import pandas as pd

    rng = np.random.default_rng(1)
    df = pd.DataFrame({"age": rng.uniform(18, 90, 200).round(), "w": rng.uniform(0, 1, 200),
                       "g": rng.choice(["a", "b"], 200), "h": rng.choice(["x", "y"], 200)})
    pf = dpf.protect(df, epsilon=5.0, bounds={"age": (18, 90), "w": (0, 1)},
                     keys={"g": ["a", "b"], "h": ["x", "y"]}, missing={"age": 18.0, "w": 0.0})
    made = {"describe": pf.dp.describe(columns=["age"], epsilon=0.5, random_state=1),
            "cov": pf.dp.cov(["age", "w"], epsilon=0.5, random_state=2),
            "q_by_g": pf.dp.groupby("g").quantile("age", [0.25, 0.75], epsilon=0.5,
                                                  random_state=3),
            "hist_by_g": pf.dp.groupby("g").histogram("age", bins=3, epsilon=0.2,
                                                      random_state=4),
            "mean_by_2": pf.dp.groupby(["g", "h"]).mean("age", epsilon=0.05, ci=0.9,
                                                        random_state=5),
            "median": pf.dp.release({"med": dpf.median("age")}, epsilon=0.3, random_state=6),
            # builders in one release write a family of columns: ages[18,42], ...; h_by_g[x]
            "builders": pf.dp.release({"ages": dpf.histogram("age", bins=3),
                                       "by_h": dpf.value_counts("h")}, epsilon=0.3,
                                      random_state=7),
            "h_by_g": pf.dp.groupby("g").release({"p": dpf.proportions("h")}, epsilon=0.3,
                                                 random_state=8)}
    dpf.write_parquet(dpf.concat_releases(made), tmp_path / "kinds.parquet")
    html, report = build_report(tmp_path / "kinds.parquet")
    assert report["verified"]
    cards = _cards(html)
    assert _count(cards["describe"], "table", "dpf-values") == 1 and ">std<" in cards["describe"]
    assert _count(cards["cov"], "g", "dpf-cell") == 4 and "cov: matrix" in cards["cov"]
    assert _count(cards["q_by_g"], "svg", "dpf-chart") == 2  # one age axis per group
    assert _count(cards["q_by_g"], "line", "dpf-value") == 4
    assert "histogram by g" in cards["hist_by_g"]
    assert _count(cards["hist_by_g"], "svg", "dpf-chart") == 2
    assert _count(cards["hist_by_g"], "rect", "dpf-bin") == 6
    assert _count(cards["mean_by_2"], "circle", "dpf-value") == 4  # dots, not a heatmap
    assert _count(cards["mean_by_2"], "g", "dpf-cell") == 0
    assert "med: " in cards["median"] and "age declared in [18, 90]" in cards["median"]
    assert _count(cards["builders"], "rect", "dpf-bin") == 3  # ages[...] as bars over edges
    assert _count(cards["builders"], "rect", "dpf-bar-value") == 2  # by_h[x], by_h[y]
    assert _count(cards["h_by_g"], "g", "dpf-cell") == 4  # g × h heatmap of proportions


def test_a_single_matrix_or_describe_file_is_drawn_as_a_card(analysis, tmp_path):
    """A file of one corr table (pandas: the labels are its index) is a matrix with its
    intervals; a describe file a table; a Polars corr (labels in a column) the same."""
    made, _ = analysis
    dpf.write_parquet(made["corr"], tmp_path / "corr.parquet")
    cards = _cards(build_report(tmp_path / "corr.parquet")[0])
    (card,) = cards.values()
    assert _count(card, "g", "dpf-cell") == 4 and "release 6: ε = 1" in card
    lo = float(made["corr"].loc[("lower", "age"), "income"])
    assert f"{lo:.4g}, " in card
    rng = np.random.default_rng(2)
    pf = dpf.protect(pl.DataFrame({"a": rng.uniform(0, 1, 50), "b": rng.uniform(0, 1, 50)}),
                     epsilon=2.0, bounds={"a": (0, 1), "b": (0, 1)}, missing={"a": 0.0, "b": 0.0})
    for i, table in enumerate((pf.dp.corr(["a", "b"], epsilon=0.5, random_state=1),
                               pf.dp.describe(epsilon=0.5, random_state=2))):
        dpf.write_parquet(table, tmp_path / f"p{i}.parquet")
        (card,) = _cards(build_report(tmp_path / f"p{i}.parquet")[0]).values()
        assert (_count(card, "g", "dpf-cell") == 4) if i == 0 else (
            _count(card, "table", "dpf-values") == 1)

"""Pictures of releases (dpframe/report/): the SVG builder, the notebook views
(``dpf.show``), readable log names and domains, and ``dpframe report`` run in-process. The
HTML is checked as a DOM (``html.parser``): elements, classes, escaped text, nothing fetched."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting import _log_view as logview
from dpframe.cli import main
from dpframe.cli.report import build_report
from dpframe.report import svg

HOSTILE = '<script>alert("x")</script>'


class DOM(HTMLParser):
    """Every element (tag, attributes, its text) and the page's whole text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag: str, cls: str | None = None) -> list[dict[str, str]]:
        return [a for t, a in self.elements
                if t == tag and (cls is None or cls in a.get("class", "").split())]

    @property
    def all_text(self) -> str:
        return " ".join(self.text)


def self_contained(html: str) -> None:
    """Nothing fetched or run: no script, no URL, no link or import."""
    dom = DOM(html)
    assert not dom.having("script") and not dom.having("link") and not dom.having("img")
    assert not any(k in ("src", "href") for _, a in dom.elements for k in a)
    low = html.lower()
    assert "http:" not in low and "https:" not in low and "url(" not in low
    assert "@import" not in low


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(0)
    regions = ["North", "South", HOSTILE]
    df = pd.DataFrame({"age": rng.integers(18, 96, 90), "region": np.repeat(regions, 30)})
    pf = dpf.protect(df, epsilon=3.0, bounds={"age": (18, 95)}, keys={"region": regions})
    hist = pf.dp.histogram("age", edges=[18, 40, 65, 95], epsilon=0.2, random_state=1)
    counts = pf.dp.value_counts("region", epsilon=0.1, random_state=1)
    table = pf.dp.groupby("region").release({"n": dpf.count(), HOSTILE: dpf.mean("age")},
                                            epsilon=0.05, ci=0.9, random_state=5)
    mean = pf.dp.mean("age", epsilon=0.3, ci=0.95, random_state=2)
    table.to_parquet(d / "release.parquet")
    return {"dir": d, "pf": pf, "hist": hist, "counts": counts, "table": table, "mean": mean}


def test_svg_builder_escapes_and_draws():
    rows = [svg.IntervalRow(HOSTILE, 18.0, 18.0, 60.0), svg.IntervalRow("b", 50.0)]
    out = svg.interval_chart(rows, bounds=(18, 95), label="a & b")
    dom = DOM(out)
    assert HOSTILE not in out and "&lt;script&gt;" in out and "a &amp; b" in out
    assert len(dom.having("g", "dpf-row")) == 2 and len(dom.having("circle")) == 2
    assert len(dom.having("rect", "dpf-interval")) == 1  # no interval: no bar
    assert len(dom.having("g", "dpf-on-bound")) == 1  # 18 is the lower bound
    assert "on bound" in dom.all_text and "95" in dom.all_text
    bars = DOM(svg.bar_chart([("release 1", 0.5), ("release 2", 0.25)], total=2.0, label="ε"))
    widths = [float(a["width"]) for a in bars.having("rect")]
    assert widths[0] == pytest.approx(2 * widths[1])
    assert svg.fmt(None) == "-" and svg.fmt(float("inf")) == "∞" and svg.fmt(1 / 3) == "0.333333"


def test_logview_names_statistics_and_user_domains():
    entry = {"name": "m", "query": "mean", "columns": "age", "group_by": None,
             "domain_lower": 0.0, "domain_upper": 77.0,
             "clamping": "age clamped to [18, 95] in the engine; how many ...",
             "formulation": "shifted mean l + Σ(x−l)/n (public n)"}
    assert logview.statistic(entry) == "mean of age"
    assert logview.user_domain(entry) == (18.0, 95.0, 18.0)
    assert logview.domain_text(entry).startswith("[18, 95] (noise added on [0, 77]")
    total = {**entry, "query": "sum", "domain_upper": 77.0 * 40,
             "formulation": "shifted sum Σ(x−l) + n·l (public n)"}
    assert logview.user_domain(total)[:2] == (18.0 * 40, 95.0 * 40)
    hist = {"name": "histogram(age)", "query": "count", "columns": "", "group_by": "__dpframe_bin"}
    assert logview.statistic(hist) == "histogram of age" and logview.columns_of(hist) == ["age"]
    vc = {"name": "value_counts(sex)", "query": "count", "columns": "", "group_by": "sex"}
    assert logview.statistic(vc) == "value counts of sex"
    assert logview.statistic({"name": "n", "query": "count", "group_by": "a,b"}) == "count by a, b"


def test_histogram_and_value_counts_are_named_in_the_log(released):
    for frame, name in ((released["hist"], "histogram(age)"),
                        (released["counts"], "value_counts(region)")):
        assert frame.dp.log["name"].iloc[-1] == name and "count" in frame.columns


def test_show_release_table_pandas_and_polars(released):
    html = dpf.show(released["table"])._repr_html_()
    self_contained(html)
    dom = DOM(html)
    sections = dom.having("section", "dpf-stat")
    assert [s["data-column"] for s in sections] == ["n", HOSTILE]
    assert HOSTILE not in html  # the column name and the key are text, escaped
    assert len(dom.having("g", "dpf-row")) == 6 and len(dom.having("rect", "dpf-interval")) == 6
    text = dom.all_text
    assert "mean of age by region" in text and "age declared in [18, 95]" in text
    assert "90% intervals" in text and "ε = 0.05" not in text  # per statistic: its share
    assert "Budget" in text and "ε by column" in text
    described = DOM(dpf.show(released["pf"].dp.describe(columns=["age"], epsilon=0.1,
                                                          random_state=1))._repr_html_())
    assert described.having("table", "dpf-values") and "std" in described.all_text
    lazy = pl.DataFrame({"x": np.linspace(0, 1, 50)}).lazy()
    with dpf.Session():
        t = dpf.protect(lazy, epsilon=1.0, bounds={"x": (0, 1)}).dp.release(
            {"m": dpf.mean("x")}, epsilon=0.5, random_state=1)
    assert DOM(dpf.show(t)._repr_html_()).having("section", "dpf-stat")[0]["data-column"] == "m"


def test_show_budget_planner_estimate(released, tmp_path):
    pf = released["pf"]
    budget = DOM(dpf.show(pf)._repr_html_())
    spent, releases = pf.dp.budget.epsilon_spent, int(pf.dp.log["release_id"].max())
    assert f"ε spent {svg.fmt(spent)} of 3" in budget.all_text
    assert len(budget.having("g", "dpf-bar")) == releases + 3  # by column: age, region, (rows)
    plan = pf.dp.accuracy({"m": dpf.mean("age"), "n": dpf.count()}, epsilon=0.1)
    dom = DOM(dpf.show(plan)._repr_html_())
    assert len(dom.having("table", "dpf-accuracy")) == 1 and "± half-width" in dom.all_text
    assert "± " + svg.fmt(float(plan["half_width"][0])) in dom.all_text
    log = pf.dp.log
    dom = DOM(dpf.show(log)._repr_html_())  # readable columns, not all 35
    assert len(dom.having("tr")) == len(log) + 1 and "histogram of age" in dom.all_text
    assert "[18, 95] (noise added on [0, 77], shifted by 18)" in dom.all_text  # public-n mean
    est = DOM(dpf.show(released["mean"])._repr_html_())
    assert str(released["mean"]) in est.all_text
    assert dpf.show(pf.dp.session).html and dpf.show(pf.dp.budget).html
    saved = dpf.show(released["table"]).save(tmp_path / "view.html")
    self_contained(saved.read_text(encoding="utf-8"))
    with pytest.raises(dpf.ParameterError, match=r"dpf\.show takes"):
        dpf.show(42)


def test_report_page_and_cli(released, tmp_path, capsys):
    path = released["dir"] / "release.parquet"
    html, report = build_report(path)
    assert report["verified"]
    self_contained(html)
    dom = DOM(html)
    (status,) = [a for t, a in dom.elements if a.get("id") == "status"]
    assert "dpf-verified" in status["class"] and "VERIFIED: the values match" in dom.all_text
    assert len(dom.having("section", "dpf-stat")) == 2 and HOSTILE not in html
    assert "histogram of age" in dom.all_text and "value counts of region" in dom.all_text
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "VERIFIED; report written" in capsys.readouterr().out and out.read_text() == html
    # a tampered copy: the page is written, headed NOT VERIFIED; exit 2 as for inspect
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(path).slice(0, 2), tmp_path / "bad.parquet")  # a row cut
    assert main(["report", str(tmp_path / "bad.parquet"), "-o", str(out)]) == 2
    dom = DOM(out.read_text(encoding="utf-8"))
    assert dom.having("p", "dpf-not-verified") and "NOT VERIFIED" in dom.all_text
    capsys.readouterr()
    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"x": [1.0]}).to_parquet(plain)
    assert main(["report", str(plain), "-o", str(tmp_path / "no.html")]) == 1
    assert "no dpframe release log" in capsys.readouterr().err
    assert not (tmp_path / "no.html").exists()
    assert main(["report", str(tmp_path / "missing.parquet"), "-o", str(out)]) == 1


def test_inspect_reads_like_the_user_asked(released, capsys):
    main(["inspect", str(Path(released["dir"]) / "release.parquet")])
    text = capsys.readouterr().out
    assert "values in this table come from release 3 (the log below lists 3 releases" in text
    assert "histogram(age): histogram of age" in text
    assert "value_counts(region): value counts of region" in text
    assert "region: ε=" in text  # value counts count toward their column, not (rows)


def test_report_on_malformed_files_never_crashes(tmp_path, capsys):
    """The release files of the inspect matrix (tests/helpers/release_files.py): exit 1 with one
    line (no page) or 2 with a NOT VERIFIED page; never a traceback, never 'a bug in dpframe'."""
    from helpers.release_files import malformed_files

    out = tmp_path / "page.html"
    (tmp_path / "releases").mkdir()
    for name, path in malformed_files(tmp_path / "releases").items():
        out.unlink(missing_ok=True)
        code = main(["report", str(path), "-o", str(out)])
        err = capsys.readouterr().err
        assert code in (1, 2) and "bug in dpframe" not in err, (name, code, err)
        if code == 2:
            self_contained(html := out.read_text(encoding="utf-8"))
            assert DOM(html).having("p", "dpf-not-verified"), name
        else:
            assert err.startswith("error: ") and err.count("\n") == 1 and not out.exists()

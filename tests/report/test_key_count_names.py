"""value_counts / proportions inside a multi-statistic release are logged with their key
column (as ``frame.dp.value_counts(col)``'s entries are counted under it), so the report and
``inspect`` name them and count their ε under that column, not under ``(rows)``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe import accounting as logview
from dpframe.accounting.seals import release_log_of
from dpframe.accounting.steward import spending
from dpframe.cli import main
from dpframe.cli.report import build_report


@pytest.fixture(scope="module")
def protected():
    df = pd.DataFrame({"age": np.arange(120) % 70 + 18, "h": np.arange(120) % 2})
    return dpf.protect(df, epsilon=5.0, bounds={"age": (18, 90)}, keys={"h": [0, 1]},
                       missing={"age": 18.0})


def test_release_entries_carry_the_key_column_as_the_single_call(protected):
    pf = protected
    single = pf.dp.value_counts("h", epsilon=0.2, random_state=1)
    out = pf.dp.release({"by_h": dpf.value_counts("h"), "p_h": dpf.proportions("h"),
                         "n": dpf.count()}, epsilon=0.3, random_state=2)
    entries = {e["name"]: e for e in release_log_entries(out)}
    first = release_log_entries(single)[0]
    assert logview.columns_of(entries["by_h"]) == logview.columns_of(first) == ["h"]
    assert logview.statistic(entries["by_h"]) == logview.statistic(first) == "value counts of h"
    assert logview.statistic(entries["p_h"]) == "proportions of h"
    assert logview.columns_of(entries["n"]) == []  # a row count stays under (rows)
    last = [e for e in release_log_entries(out)
            if e["release_id"] == entries["by_h"]["release_id"]]
    by_column = spending(last)["by_column"]
    keyed = sum(e["epsilon"] for e in last if e["name"] in ("by_h", "p_h"))
    assert keyed > 0 and by_column["h"]["epsilon"] == pytest.approx(keyed)
    assert by_column["(rows)"]["epsilon"] == pytest.approx(entries["n"]["epsilon"])


def release_log_entries(table):
    return list(release_log_of(table)["entries"])


def test_report_and_inspect_name_them(protected, tmp_path, capsys):
    made = {"counts": protected.dp.release({"by_h": dpf.value_counts("h"),
                                            "p_h": dpf.proportions("h")},
                                           epsilon=0.3, random_state=3)}
    path = tmp_path / "keys.parquet"
    dpf.write_parquet(dpf.concat_releases(made), path)
    html, report = build_report(path)
    assert report["verified"]
    assert "value counts of h" in html and "proportions of h" in html
    assert main(["inspect", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    assert "value counts of h" in text and "proportions of h" in text
    assert json.loads(text)  # (valid JSON)

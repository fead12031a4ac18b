"""The report page and a notebook view as a user sees them: rendered by headless Chromium.

One test and one browser run (about 2.5 s): ``dpframe report``'s page, with the notebook views
``dpf.show(table)`` and an ``Estimate``'s ``_repr_html_`` added at its end, is loaded from a
file and screenshotted; the picture's pixels are checked for the green VERIFIED banner, the
drawn values, the interval bars and the red of a mean on a bound. (The same markup's DOM is
checked element by element in tests/report/test_views.py.) Skipped when Chromium is not
installed (CI installs it, .ci/run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.cli.report import build_report
from dpframe.report import svg

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True, timeout=120, check=True)


def _pixels(png: Path, colour: str) -> int:
    from PIL import Image

    want = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as im:
        rgb = im.convert("RGB")
        return sum(n for n, c in rgb.getcolors(maxcolors=1 << 20) or [] if c == want)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install "
                    "chromium); the browser rendering of the report is not checked")
def test_report_and_view_render_in_chromium(tmp_path):
    pytest.importorskip("PIL", reason="Pillow (via matplotlib) reads the screenshot")
    rng = np.random.default_rng(0)
    keys = ["a", "b", "c", "d"]
    df = pd.DataFrame({"age": rng.uniform(20, 80, 24), "g": np.repeat(keys, 6)})
    pf = dpf.protect(df, epsilon=1.0, bounds={"age": (18, 95)}, keys={"g": keys})
    # six people per group at ε = 0.2: means land on a bound, intervals span [18, 95]
    table = pf.dp.groupby("g").release({"mean_age": dpf.mean("age")}, epsilon=0.2, ci=0.9,
                                       random_state=0)
    on_bound = int(table["mean_age"].isin([18.0, 95.0]).sum())
    assert on_bound >= 1
    table.to_parquet(tmp_path / "release.parquet")
    html, report = build_report(tmp_path / "release.parquet")
    assert report["verified"] and f"{on_bound} of 4 on a bound" in html
    est = pf.dp.mean("age", epsilon=0.5, ci=0.95, random_state=1)
    views = dpf.show(table)._repr_html_() + est._repr_html_()
    (tmp_path / "page.html").write_text(html.replace("</body>", views + "</body>"),
                                        encoding="utf-8")
    png = tmp_path / "page.png"
    _chromium(tmp_path, "--hide-scrollbars", "--window-size=800,1800", f"--screenshot={png}",
              (tmp_path / "page.html").as_uri())
    assert _pixels(png, "#e3f4e6") > 5000  # the VERIFIED banner
    assert _pixels(png, svg.VALUE) > 200  # the dots and the budget bars
    assert _pixels(png, svg.INTERVAL) > 3000  # interval bars: report, view and estimate
    assert _pixels(png, svg.ON_BOUND) > 40 * on_bound  # means on a bound, in red


#: where the whole-analysis screenshots are also saved (docs/img is refreshed with
#: DPFRAME_SCREENSHOTS=docs/img); unset: kept in the test's temporary folder only
SCREENSHOTS = "DPFRAME_SCREENSHOTS"


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install "
                    "chromium); the browser rendering of the report is not checked")
def test_whole_analysis_report_renders_in_chromium(tmp_path):
    """``dpframe report`` on a ``concat_releases`` file (seven queries) at 1400 px: the cards
    fill both halves of the page, the heatmap, matrix, bars and whiskers are drawn; the page
    is saved as two screenshots (the charts; the budget and measurements)."""
    pytest.importorskip("PIL", reason="Pillow (via matplotlib) reads the screenshot")
    import os

    from PIL import Image

    from report.whole_analysis import write_files

    html, report = build_report(write_files(tmp_path)["long"])
    assert report["verified"]
    (tmp_path / "analysis.html").write_text(html, encoding="utf-8")
    png = tmp_path / "analysis.png"
    _chromium(tmp_path, "--hide-scrollbars", "--window-size=1400,2300", f"--screenshot={png}",
              (tmp_path / "analysis.html").as_uri())
    assert _pixels(png, "#e3f4e6") > 5000  # the VERIFIED banner
    assert _pixels(png, svg.INTERVAL) > 20000  # count bars and histogram bins
    assert _pixels(png, svg.VALUE) > 1000  # dots, quantile marks, budget bars, heatmap max
    assert _pixels(png, "#333333") > 300  # interval whiskers
    with Image.open(png) as im:
        rgb = im.convert("RGB")
        right = rgb.crop((720, 150, 1380, 1150))  # the right half of the cards' area
        white = sum(n for n, c in right.getcolors(maxcolors=1 << 20) or []
                    if c == (255, 255, 255))
        assert white > 0.3 * right.width * right.height  # cards there (the page is #fafafa)
        charts, tables = rgb.crop((0, 0, 1400, 1220)), rgb.crop((0, 1180, 1400, 2160))
        charts.save(tmp_path / "report-analysis-charts.png")
        tables.save(tmp_path / "report-analysis-budget.png")
        where = os.environ.get(SCREENSHOTS)
        if where:
            charts.save(Path(where) / "report-analysis-charts.png", optimize=True)
            tables.save(Path(where) / "report-analysis-budget.png", optimize=True)

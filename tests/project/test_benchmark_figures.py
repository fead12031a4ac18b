"""Every benchmark figure the README and docs cite exists in the results file and in
``python -m benchmarks --list`` (issue 34: claims that reproduce). Runs no benchmark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "latest.json"
CITATION = re.compile(r"`fig:([A-Za-z0-9_.\-]+)`")


def _cited() -> dict[str, set[str]]:
    """Figure id → the README/docs files citing it."""
    out: dict[str, set[str]] = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for fid in CITATION.findall(path.read_text(encoding="utf-8")):
            out.setdefault(fid, set()).add(path.name)
    return out


def test_every_cited_figure_is_in_the_results_and_the_list() -> None:
    cited = _cited()
    assert cited, "README/docs cite no figure"
    runs = json.loads(RESULTS.read_text(encoding="utf-8"))["runs"]
    measured = {fid for run in runs for fid in run["figures"]}
    listing = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], cwd=REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    listed = {line.split("\t", 1)[0] for line in listing.splitlines() if line}
    assert not set(cited) - measured, {f: cited[f] for f in set(cited) - measured}
    assert not set(cited) - listed, {f: cited[f] for f in set(cited) - listed}


def test_every_run_records_commit_load_and_machine() -> None:
    for run in json.loads(RESULTS.read_text(encoding="utf-8"))["runs"]:
        head = run["header"]
        assert head["commit"] and head["uptime_before"] and head["uptime_after"]
        assert head["machine"]["cpu"] and head["machine"]["cores"]
        for fig in run["figures"].values():
            assert fig["low"] <= fig["q1"] <= fig["ratio"] <= fig["q3"] <= fig["high"]

"""Smoke test: the benchmark entry point runs end to end at tiny sizes (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_entry_point_quick(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--rows", "2000",
         "--output", str(out), "--data-dir", str(tmp_path / "data")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    for heading in ("## Machine", "## Frames", "## Mechanisms", "## Targets"):
        assert heading in text
    for scenario in ("DP mean", "DP variance", "DP count", "batch release", "group-by mean"):
        assert scenario in text
    raw = json.loads((tmp_path / "results.json").read_text())
    statuses = {r["status"] for r in raw["results"]}
    assert statuses <= {"ok", "unavailable"}, statuses
    assert any(r["status"] == "ok" for r in raw["results"])


def test_rows_must_be_positive() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--rows", "0", "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode != 0
    assert "positive" in proc.stderr


def test_release_history_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "rh.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.release_history", "--history", "0,20",
         "--rounds", "1", "--ledger", "memory,durable-nofsync", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {(r["ledger"], r["history"], r["what"]) for r in rows} == {
        (k, h, w) for k in ("memory", "durable-nofsync") for h in (0, 20)
        for w in ("table", "scalar")}


def test_histogram_benchmark_measures_at_tiny_sizes() -> None:
    """benchmarks.histograms (many public edges against the engines' own binning) runs."""
    from benchmarks.histograms import measure, render

    runs = {"500": measure(500, 300, 1, ["pandas", "polars", "polars-lazy", "duckdb"])}
    assert set(runs["500"]) == {"pandas", "polars", "polars-lazy", "duckdb"}
    assert all(r["dp_ms"] > 0 and r["native_ms"] > 0 for r in runs["500"].values())
    text = render({"header": {"edges": 300, "rounds": 1, "machine": "m", "commit": "c"},
                   "runs": runs})
    assert "| duckdb | 500 |" in text


def test_quantile_bins_benchmark_runs() -> None:
    for extra in ([],):  # the main table (--sweep and --product are variations of it)
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.quantile_bins", "--no-peers", "--rows", "1000",
             *extra],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "| 1000 |" in proc.stdout


def test_peer_accuracy_benchmark_runs_dpframe_side(tmp_path: Path) -> None:
    """benchmarks.peer_accuracy (the whole analysis against the peers at add/remove) runs its
    dpframe side at a tiny size and renders one row per statistic (no peers: their venvs are
    built only by the benchmark itself)."""
    from benchmarks.peer_accuracy import ROWS, measure, render

    run = measure(400, [0, 1, 2], 1.0, peers=False, data_dir=tmp_path)
    assert [r["statistic"] for r in run["rows"]] == [lab for labs in ROWS.values() for lab in labs]
    assert all(r["dpframe"]["lo"] <= r["dpframe"]["median"] <= r["dpframe"]["hi"]
               for r in run["rows"])
    assert "| variance of age |" in render(run)

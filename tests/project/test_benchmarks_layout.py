"""benchmarks/ keeps the layout its README describes ("Layout"): scripts at the top, the cited
figure set in results/, per-topic write-ups in reports/, their raw JSON in reports/raw/.
Pure file-system checks; runs no benchmark."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _visible(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "__pycache__"]


def test_top_level_holds_only_scripts_readme_and_the_two_folders() -> None:
    stray = [p.name for p in _visible(BENCHMARKS)
             if not (p.is_file() and (p.suffix == ".py" or p.name == "README.md"))
             and not (p.is_dir() and p.name in {"results", "reports"})]
    assert not stray, f"move these into benchmarks/reports/ or reports/raw/: {sorted(stray)}"


def test_reports_hold_write_ups_and_raw_holds_json() -> None:
    reports = BENCHMARKS / "reports"
    stray = [p.name for p in _visible(reports)
             if not (p.is_file() and p.suffix == ".md") and not (p.is_dir() and p.name == "raw")]
    stray += [f"raw/{p.name}" for p in _visible(reports / "raw") if p.suffix != ".json"]
    assert not stray, sorted(stray)

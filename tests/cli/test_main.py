"""The ``python -m dpframe demo`` command runs the real release path end to end."""

from __future__ import annotations

import io
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import dpframe as dpf
from dpframe.cli import build_parser, main, run_demo
from dpframe.datasets import CENSUS_KEYS

ROWS = 3_000


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    path = tmp_path_factory.mktemp("demo") / "sub" / "release.parquet"
    out = io.StringIO()
    with warnings.catch_warnings():  # issue 33: clean data needs no ceremony and gets no notice
        warnings.simplefilter("error", dpf.PrivateSizeWarning)
        result = run_demo(
            rows=ROWS, epsilon=1.0, delta=1e-6, output=path, seed=1, noise_seed=5, out=out
        )
    return result, path, out.getvalue()


def test_writes_released_table(demo_run: tuple[dict, Path, str]) -> None:
    result, path, _ = demo_run
    assert path.exists()
    released = pd.read_parquet(path)
    assert len(released) == 1
    assert list(released.columns) == ["n", "mean_age", "mean_hours", "mean_income", "var_income"]
    for col in released.columns:
        assert math.isfinite(float(released[col].iloc[0]))
    lo, hi = 16, 90
    assert lo <= released["mean_age"].iloc[0] <= hi
    assert 0 <= released["mean_hours"].iloc[0] <= 80
    assert 0 <= released["mean_income"].iloc[0] <= 250_000
    assert released["var_income"].iloc[0] >= 0
    pd.testing.assert_frame_equal(
        released.reset_index(drop=True),
        result["table"].reset_index(drop=True),
        check_dtype=False,
    )


def test_log_travels_in_the_file(demo_run: tuple[dict, Path, str]) -> None:
    result, path, _ = demo_run
    document = dpf.read_log(path)
    log_file = dpf.read_log(path, as_frame="pandas")
    log_live = result["log"]
    assert isinstance(log_file, pd.DataFrame)
    # The released table is the demo's last release, so its log is the whole ledger's log.
    assert len(log_file) == len(log_live) == len(document["entries"]) > 0
    cols = ["release_id", "name", "query", "epsilon", "delta", "mechanism", "scale"]
    pd.testing.assert_frame_equal(log_file[cols], log_live[cols])
    assert sorted(set(log_file["release_id"])) == [1, 2, 3, 4, 5]
    assert "none (public size)" in set(log_file["mechanism"])  # n: exact and free
    assert set(log_file["mechanism"]) <= {"bounded", "truncated", "laplace", "none (public size)"}
    assert set(log_file["random_source"]) == {"seeded"}
    assert document["budget"]["epsilon_spent"] == pytest.approx(0.9, rel=1e-9)
    # δ is charged only where a mechanism uses it (bounded); auto's pure picks spend none
    assert document["budget"]["delta_spent"] == pytest.approx(
        math.fsum(log_file["delta"]), rel=1e-9, abs=1e-30)
    assert document["budget"]["delta_spent"] <= 0.5e-6
    bounded = log_file["mechanism"] == "bounded"
    assert (log_file.loc[~bounded, "delta"] == 0).all()


def test_budget_split(demo_run: tuple[dict, Path, str]) -> None:
    result, _, _ = demo_run
    budget = result["budget"]
    assert budget.epsilon_remaining == pytest.approx(0.1, rel=1e-9)
    assert budget.delta_remaining == pytest.approx(1e-6 - budget.delta_spent, rel=1e-9)
    assert budget.delta_remaining >= 0.5e-6
    by_region = result["by_region"]
    assert list(by_region["region"].astype(str)) == CENSUS_KEYS["region"]
    assert (by_region["mean_income"].between(0, 250_000)).all()


def test_prints_table_and_log(demo_run: tuple[dict, Path, str]) -> None:
    _, path, text = demo_run
    for expected in ("release", "mean_income", "var_income", "budget", "read_log", str(path)):
        assert expected.lower() in text.lower(), expected


def test_main_exit_code_and_seeded_repeatability(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for p in paths:
        argv = [
            "demo",
            "--rows",
            "500",
            "--epsilon",
            "2",
            "--output",
            str(p),
            "--seed",
            "3",
            "--noise-seed",
            "11",
        ]
        assert main(argv) == 0
    capsys.readouterr()
    a, b = (pd.read_parquet(p) for p in paths)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--rows", "1"],
        ["demo", "--rows", "many"],
        ["demo", "--epsilon", "0"],
        ["demo", "--epsilon", "-1"],
        ["demo", "--delta", "1"],
        ["demo", "--seed", "-2"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_help_explains_options(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--help"])
    assert exc.value.code == 0
    help_text = capsys.readouterr().out
    for option in (
        "--rows",
        "--epsilon",
        "--delta",
        "--output",
        "--seed",
        "--noise-seed",
        "--backend",
    ):
        assert option in help_text
    assert "release.parquet" in help_text
    assert "privacy budget" in help_text
    assert "Parquet" in help_text


def test_no_command_prints_help(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 0
    assert "demo" in capsys.readouterr().out
    assert "demo" in build_parser().format_help()


def test_module_entry_point(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``python -m dpframe demo`` as a newcomer runs it (small, in a temp directory); its
    ``--help`` (what that entry point calls: ``main``) without a second interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "dpframe", "demo", "--rows", "1000", "--noise-seed", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PrivateSizeWarning" not in proc.stderr  # the README's first command: no notice
    assert (tmp_path / "release.parquet").exists()
    assert len(dpf.read_log(tmp_path / "release.parquet")) > 0
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "--rows" in help_text and "--output" in help_text


def test_polars_backend(tmp_path: Path) -> None:
    path = tmp_path / "release_polars.parquet"
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpf.PrivateSizeWarning)
        result = run_demo(rows=2_000, output=path, noise_seed=3, backend="polars", out=out)
    assert type(result["table"]).__module__.startswith("polars")
    assert result["budget"].epsilon_remaining == pytest.approx(0.1, rel=1e-9)
    log_file = dpf.read_log(path, as_frame="pandas")
    assert len(log_file) == len(result["log"]) > 0
    assert "dpf.Session()" in out.getvalue()
    with pytest.raises(ValueError, match="backend"):
        run_demo(rows=10, backend="spark", output=tmp_path / "x.parquet")


def _python_blocks(markdown: str) -> list[str]:
    blocks, current, inside = [], [], False
    for line in markdown.splitlines():
        if line.strip() == "```python":
            inside, current = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(current))
        elif inside:
            current.append(line)
    return blocks


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``python`` block of the README runs as written (in a temporary directory), and
    none prints a PrivateSizeWarning (issue 33: the README's data are clean)."""
    readme = Path(__file__).resolve().parents[2] / "README.md"
    blocks = _python_blocks(readme.read_text(encoding="utf-8"))
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    for i, block in enumerate(blocks):
        with warnings.catch_warnings():
            warnings.simplefilter("error", dpf.PrivateSizeWarning)
            exec(compile(block, f"README.md block {i}", "exec"), {"__name__": f"readme_{i}"})
    assert dpf.read_log(tmp_path / "release.parquet")["entries"]
    assert dpf.read_log(tmp_path / "release_polars.parquet")["entries"]


@pytest.mark.parametrize("where", [".", "folder"])
def test_demo_output_that_is_a_folder_is_refused_before_any_release(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    """Issue 30: refused before anything is released (it released, then failed with
    IsADirectoryError)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    assert main(["demo", "--rows", "500", "--output", where]) == 1
    captured = capsys.readouterr()
    assert "is a folder; name the Parquet file to write inside it" in captured.err
    assert "pf.dp" not in captured.out  # no release ran

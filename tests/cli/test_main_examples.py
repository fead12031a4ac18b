"""The examples a newcomer runs after the demo print no PrivateSizeWarning (issue 33: clean
data needs no ceremony), and the script behind the docs' per-group figures runs."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from types import ModuleType

import dpframe as dpf

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str) -> ModuleType:
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_group_bounds_example_runs_without_a_notice(capsys):
    script = _load("examples/group_bounds.py")
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpf.PrivateSizeWarning)
        assert script.main(["--runs", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == list(script.MECHANISMS)
    shares = script.measure(runs=3, seed=1)
    assert all(0.0 <= v <= 1.0 for per in shares.values() for v in per.values())


def test_auto_worst_case_loss_is_measured_against_the_other_mechanism():
    """benchmarks/auto_worst_case.py, the source of the docs' 1.54× (closed forms)."""
    bench = _load("benchmarks/auto_worst_case.py")
    narrow = bench.loss(1.0, 1.0, points=201)  # auto picks bounded on a width of Δ at ε = 1
    assert narrow["auto"] == "bounded" and narrow["worst_case_gain"] >= 1.0
    middle = bench.loss(2.0, 0.5, points=201)  # the case docs/privacy.md §I.5 quotes
    assert middle["auto"] == "truncated" and middle["at"] == 0.5
    assert round(float(middle["max_loss"]), 2) == 1.54
    wide = bench.loss(100.0, 1.0, points=201)  # pointwise no worse on a wide domain
    assert wide["auto"] == "truncated" and wide["max_loss"] < 1.0

"""Each reproduction in examples/ runs at a tiny size (its core function and its CLI).

The CLI tests read the numbers the scripts print and check them: against what the core
functions return for the same arguments (the print shows the results), and against closed
forms computed here independently of dpframe.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytest.importorskip("matplotlib")


def _load(name: str):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"dpframe_example_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def _numbers(line: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(line)]


def _liu_mu1(s: float, lam: float, c0: float, c1: float) -> float:
    """Liu eq. (6), written out here: mean of Laplace(s, λ) conditioned on [c0, c1]."""
    a = math.exp((c0 - s) / lam)
    c = math.exp((s - c1) / lam)
    num = (lam - c0 + s) / 2 * a - (lam + c1 - s) / 2 * c
    return s + num / (1 - a / 2 - c / 2)


def test_holohan_fig3_core():
    m = _load("holohan_fig3")
    r = m.compute([0.05, 0.5, 1.0], [0.01, 1.0, 5.0])
    assert r.shape == (3, 3)
    assert np.allclose(r[-1], 1.0)  # ΔQ = u − l: b* = ΔQ/ε (Holohan Cor. 4.5)
    assert ((r >= 1.0 - 1e-12) & (r <= 2.0)).all()
    assert (np.diff(r[:, 0]) < 0).all()  # decreasing in ΔQ
    assert m.ratio(1e-4, 1e-4) == pytest.approx(2.0, abs=1e-3)  # Holohan: 2ε' = ε in the limit
    # small ΔQ: the half-line limit ε / ln((e^ε + 1)/2)
    assert m.ratio(1.0, 1e-4) == pytest.approx(1.0 / np.log((np.e + 1) / 2), rel=1e-3)


def test_holohan_fig3_cli(tmp_path, capsys):
    m = _load("holohan_fig3")
    out = tmp_path / "f3.png"
    assert m.main(["--quick", "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("ΔQ \\ ε"))
    eps = _numbers(lines[header].split("ε", 1)[1])
    rows = {}
    for line in lines[header + 1 : header + 7]:
        vals = _numbers(line)
        rows[vals[0]] = vals[1:]
    assert eps == [0.01, 0.1, 0.5, 1.0, 2.0, 5.0] and len(rows) == 6
    assert rows[1.0] == [1.0] * 6  # ΔQ = u − l: b* = ΔQ/ε exactly (Cor. 4.5)
    # small ΔQ: the half-line closed form ε / ln((e^ε + 1)/2), computed here
    for e, v in zip(eps, rows[0.01], strict=True):
        if e >= 0.5:
            assert v == pytest.approx(e / math.log((math.exp(e) + 1) / 2), abs=2e-4)
    # each column decreases in ΔQ, between 1 and 2
    for j in range(6):
        col = [rows[s][j] for s in sorted(rows)]
        assert all(a >= b for a, b in itertools.pairwise(col))
        assert min(col) >= 1.0 and max(col) < 2.0
    limit = next(line for line in lines if line.startswith("limit"))
    assert _numbers(limit.split(":")[1])[0] == pytest.approx(2.0, abs=2e-4)


def test_naive_bayes_core():
    pytest.importorskip("sklearn")
    m = _load("holohan_fig2_naive_bayes")
    res = m.run([0.1, 1000.0], runs=4, seed=1)
    for key in ("bounded", "truncated", "bounded_continuous", "truncated_continuous"):
        assert res[key].shape == (2,)
        assert ((res[key] >= 0) & (res[key] <= 1)).all()
    assert float(res["baseline"]) == pytest.approx(0.9)
    # at a huge ε the continuous bounded classifier is essentially the non-private one
    assert res["bounded_continuous"][1] >= 0.8
    assert res["zero_bounded_continuous"].max() == 0.0  # no atom at 0 without snapping


def test_naive_bayes_predict_zero_variance_is_point_mass():
    m = _load("holohan_fig2_naive_bayes")
    x = np.array([[0.0], [1.0]])
    means = np.array([[[0.0], [1.0]]])
    vars_ = np.array([[[0.0], [1.0]]])  # class 0: point mass at 0
    pred = m.predict(x, np.array([0.5, 0.5]), means, vars_)
    assert pred.tolist() == [[0, 1]]


def test_naive_bayes_cli(tmp_path, capsys):
    pytest.importorskip("sklearn")
    m = _load("holohan_fig2_naive_bayes")
    out = tmp_path / "f2.png"
    assert m.main(["--quick", "--out", str(out)]) == 0
    assert out.exists()
    lines = capsys.readouterr().out.splitlines()
    assert _numbers(lines[0]) == [0.9]  # the split's non-private accuracy, the paper's 90%
    rows = [_numbers(line) for line in lines[3:6]]
    assert [r[0] for r in rows] == [0.05, 1.0, 20.0]
    # the printed table is what run() returns for the same arguments (--quick: 5 runs, seed 0)
    res = m.run([0.05, 1.0, 20.0], runs=5, seed=0)
    keys = ["bounded", "truncated", "bounded_continuous", "truncated_continuous", "zero_bounded",
            "zero_truncated", "zero_bounded_continuous", "zero_truncated_continuous"]
    for i, row in enumerate(rows):
        assert row[1:] == pytest.approx([res[k][i] for k in keys], abs=5e-4)
    for row in rows:
        assert all(0.0 <= v <= 1.0 for v in row[1:])
        assert row[5] == 0.0 and row[7] == 0.0  # the bounded mechanism never releases 0
        assert row[6] > 0.0  # the clamped one does (60 variances per ε)
    assert rows[2][1] >= 0.8  # bounded at ε = 20 is close to the non-private 0.9
    assert rows[0][2] < 0.4  # truncated at ε = 0.05: at most near chance


def test_liu_covariance_core():
    m = _load("liu_covariance")
    rng = np.random.default_rng(0)
    sims = m.simulate((1.0, 2.0, 0.7), 200, "truncated", 30, rng)
    assert set(sims) == {"S11", "S22", "S12", "r"}
    assert (np.abs(sims["r"]) <= 1).all()
    assert (np.abs(sims["S12"]) <= np.sqrt(sims["S11"] * sims["S22"]) + 1e-12).all()
    res = m.run(runs=10, n_grid=(50, 800), seed=1)
    d = res[(0, "bounded", "S11")]
    assert d["mean"].shape == (2,) and d["q"].shape == (4, 2)
    # Liu Prop. 1(c): BIT (our truncated) is no more biased than the conditioned Laplace;
    # checked on the closed forms, which do not depend on the seed
    assert m.liu_lambda_variance_bias(800, 1.0, 6.0) < m.liu_lambda_variance_bias(50, 1.0, 6.0)


def test_liu_covariance_cli(tmp_path, capsys):
    m = _load("liu_covariance")
    out = tmp_path / "lc.png"
    assert m.main(["--quick", "--out", str(out)]) == 0
    assert out.exists()
    lines = capsys.readouterr().out.splitlines()
    # the closed-form lines: Liu eq. (6) written out above, at the printed scales
    closed = [line for line in lines if line.strip().startswith("n=")]
    assert len(closed) == 2
    for line, n in zip(closed, (50, 800), strict=True):
        got_n, liu_bias, lam, ours, b_star = (
            abs(v) if i == 0 else v for i, v in enumerate(_numbers(line.replace("λ=Δ/ε", "")))
        )
        assert got_n == n
        upper = n * 6.0**2 / (4 * (n - 1))  # the variance's domain [0, n w²/(4(n−1))], w = 6
        assert lam == pytest.approx(3 * 36.0 / n, abs=5e-4)  # Liu's λ = Δ/(ε/3), Δ = w²/n
        assert liu_bias == pytest.approx(_liu_mu1(1.0, lam, 0.0, upper) - 1.0, abs=2e-3)
        assert ours == pytest.approx(_liu_mu1(1.0, b_star, 0.0, upper) - 1.0, abs=2e-3)
        assert b_star > lam  # Holohan's b* exceeds Δ/ε
    assert closed[0].split(";")[0].endswith("+1.302 (λ=2.160)")
    # every statistic row: bias and a positive 2.5–97.5% width for n = 50 and n = 800
    stat_rows = [line for line in lines if re.match(r"\s*(S11|S22|S12|r)\s+(bounded|truncated)",
                                                       line)]
    assert len(stat_rows) == 3 * 4 * 2
    for line in stat_rows:
        nums = _numbers(line.split(maxsplit=2)[2])
        assert len(nums) == 4 and nums[1] > 0 and nums[3] > 0
        if line.split()[0] == "r":
            assert abs(nums[0]) <= 2 and nums[1] <= 2 and nums[3] <= 2  # r* ∈ [−1, 1]
    shares = [_numbers(line.split(":")[1]) for line in lines if "BIT share" in line]
    assert len(shares) == 6 and all(0 <= v <= 1 for s in shares for v in s)


def test_liu_proportions_core():
    m = _load("liu_proportions")
    res = m.run(runs=30, n_grid=(100,), epsilons=(1.0,), seed=2)
    for mech in m.MECHS:
        for method in m.METHODS:
            d = res[(1.0, 100, mech, method)]
            assert d["bias"].shape == (4,)
            assert (d["rmse"] >= 0).all() and ((d["cp"] >= 0) & (d["cp"] <= 1)).all()
    met = m.metrics(np.tile(m.P, (5, 1)), 100)
    assert np.allclose(met["bias"], 0) and np.allclose(met["cp"], 1)


def test_liu_proportions_cli(tmp_path, capsys):
    m = _load("liu_proportions")
    out = tmp_path / "lp.png"
    assert m.main(["--quick", "--out", str(out)]) == 0
    assert out.exists()
    lines = capsys.readouterr().out.splitlines()
    # the printed cells are what run() returns for the same arguments (--quick: 50 runs)
    res = m.run(runs=50, n_grid=(50, 500), seed=0)
    eps = None
    seen = 0
    for line in lines:
        if line.startswith("ε_Liu"):
            eps = _numbers(line)[0]
            continue
        match = re.match(r"\s*(\d+)\s+(\S+)\s+(.*)", line)
        if eps is None or not match or not match.group(2)[0].isalpha():
            continue
        n, label, cells = int(match.group(1)), match.group(2), _numbers(match.group(3))
        d = res[(eps, n, *label.split("/"))]
        for k in range(4):
            assert cells[3 * k : 3 * k + 3] == pytest.approx(
                [d["bias"][k], d["rmse"][k], d["cp"][k]], abs=6e-3
            )
        if label == "original":  # RMSE of a sample proportion: √(p(1 − p)/n), within noise
            for k, p in enumerate(m.P):
                assert cells[3 * k + 1] == pytest.approx(math.sqrt(p * (1 - p) / n), rel=0.4)
        seen += 1
    assert seen == 3 * 2 * 5  # 3 ε × 2 n × (original + 2 mechanisms × 2 methods)


def test_auto_regions_print_the_numbers_docs_privacy_quotes(capsys):
    """docs/privacy.md's "Regions" sentence quotes worst-case RMSE pairs (bounded / truncated):
    every pair it quotes is one examples/auto_regions.py prints (closed forms, deterministic)."""
    _load("auto_regions").main()
    rows = [line.split("|")[1:6] for line in capsys.readouterr().out.splitlines()[2:]]
    printed = {f"{b.strip()} / {t.strip()}" for _, _, b, t, _ in rows}
    doc = (EXAMPLES.parent / "docs" / "privacy.md").read_text(encoding="utf-8")
    sentence = doc[doc.index("Regions (Δ = 1, sup RMSE"):]
    sentence = sentence[:sentence.index("This is Holohan Fig. 3")]
    quoted = set(re.findall(r"\d+\.\d+ / \d+\.\d+", sentence))
    assert len(quoted) >= 6 and quoted <= printed, quoted - printed

"""Adversarial review of the issue-22 fixed-cost commits (c474238..767f3f7).

What is pinned here: the scalar Laplace draw (dpframe.mechanisms.scalar) against the vectorised
one on signed zeros, component ends, numpy scalar kinds and a shared Generator; Polars' in-memory
and streaming engines giving the same aggregates and releases; the lazily extended entries chain
read in any order, after a cleared log and through pickling; the value-keyed caches; and what a
release charges of δ against what the spec dry run announces (``test_spec_dry_run_delta_...``
fails on 767f3f7: the dry run and the run's own message say δ is charged where the ledger
spends none).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import pickle
import struct
import warnings
from fractions import Fraction
from pathlib import Path

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe import backends
from dpframe._util.identity import IdentityMap
from dpframe.accounting import ledger as accounting
from dpframe.accounting._log_entries import ENTRIES_CHAIN_START, chain_entries
from dpframe.backends.polars import _adapter as _polars
from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace
from dpframe.mechanisms.domains import FeasibleSet, half_line, interval, union
from dpframe.mechanisms.randomness import RandomSource
from dpframe.query import statistics as queries
from dpframe.query._aggregates import Agg, FixedPoint

CLASSES = (BoundedLaplace, TruncatedLaplace, Laplace)


def _bits(x: float) -> bytes:
    return struct.pack("<d", float(x))


def _vectorised(mech: object, q: float, state: int | np.random.Generator) -> float:
    return float(mech._draw(np.array([q], dtype=float), RandomSource(state))[0])  # type: ignore[attr-defined]


# -- 1. the scalar draw ------------------------------------------------------------------------
SIGNED_ZERO_DOMAINS = [
    interval(-0.0, 1.0), interval(-1.0, -0.0), interval(-1.0, 0.0),
    half_line(lower=-0.0), half_line(upper=-0.0),
    union([(-3.0, -0.0), (0.5, 1.0), (2.0, 9.0), (11.0, 12.0)]),
]


@functools.cache
def _mech(cls: type, domain: FeasibleSet, snapping: bool = True, epsilon: float = 0.9,
          sensitivity: float = 0.25) -> object:
    """Built once (a union's scale search takes half a second)."""
    return cls(epsilon, sensitivity, domain=domain, snapping=snapping)


@pytest.mark.parametrize("snapping", [True, False])
@pytest.mark.parametrize("domain", SIGNED_ZERO_DOMAINS, ids=str)
def test_signed_zeros_and_component_ends_draw_the_same_bits(domain: FeasibleSet,
                                                            snapping: bool) -> None:
    for cls in CLASSES:
        if cls is BoundedLaplace and domain.kind == "union" and not snapping:
            continue  # (the snapped union covers the sampler; its scale search is slow)
        mech = _mech(cls, domain, snapping)
        points = [0.0, -0.0] + [e for e in domain.finite_endpoints]
        for q in points:
            if not mech.domain.contains(q):
                continue
            for seed in range(8):
                got = mech.sample(q, random_state=seed)
                assert _bits(got) == _bits(_vectorised(mech, q, seed)), (cls, domain, q, seed)


def test_plus_and_minus_zero_true_values_release_the_same_bits() -> None:
    """What makes the in-memory engine's ``-0.0`` sums (an all-masked group) harmless."""
    for cls in CLASSES:
        for domain in (interval(-1.0, 1.0), interval(0.0, 2.0), half_line(lower=0.0)):
            mech = cls(0.5, 1.0, domain=domain)
            for seed in range(40):
                assert _bits(mech.sample(0.0, random_state=seed)) == _bits(
                    mech.sample(-0.0, random_state=seed))


@pytest.mark.parametrize("value", [
    np.float32(0.1), np.float16(1.5), np.int64(3), np.uint8(7), np.longdouble(1) / 3,
    np.array(2.5), np.array([2.5]), np.array([[2.5]]), np.array([[[4]]], dtype=np.int16),
    True, np.bool_(True), np.array(True), np.array([1.0 + 0j]).real,
], ids=repr)
def test_numpy_scalar_kinds_and_shapes_match_the_vectorised_path(value: object) -> None:
    mech = BoundedLaplace(0.7, 1.0, 0.0, 10.0)
    flat = np.asarray(value, dtype=float)
    for seed in range(5):
        got = mech.sample(value, random_state=seed)
        ref = mech._draw(flat.ravel(), RandomSource(seed))  # type: ignore[attr-defined]
        assert np.shape(got) == flat.shape
        assert isinstance(got, float) if flat.shape == () else isinstance(got, np.ndarray)
        assert _bits(np.asarray(got).reshape(-1)[0]) == _bits(ref[0])


def test_a_generator_shared_by_scalar_and_array_draws_stays_in_step() -> None:
    mech = _mech(BoundedLaplace, SIGNED_ZERO_DOMAINS[-1])
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    for q in (-3.0, -0.0, 0.5, 1.0, 2.0, 9.0, 11.5, 12.0) * 10:
        assert _bits(mech.sample(q, random_state=g1)) == _bits(_vectorised(mech, q, g2))
    assert g1.integers(0, 2**63) == g2.integers(0, 2**63)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, -4.0, 13.0, 1.5, 10.0])
def test_refusals_are_the_vectorised_paths_for_every_reason(value: float) -> None:
    for mech in (_mech(BoundedLaplace, SIGNED_ZERO_DOMAINS[-1]),
                 Laplace(0.5, 1.0, magnitude=10.0)):
        for one in (value, np.float32(value), np.array([value])):
            try:
                mech.sample(one)
                scalar = None
            except dpf.DPFrameError as exc:
                scalar = (type(exc), str(exc))
            try:
                mech.sample(np.array([value, value]))
                vector = None
            except dpf.DPFrameError as exc:
                vector = (type(exc), str(exc))
            assert scalar == vector


# -- 3. caches keyed by value ------------------------------------------------------------------
def test_value_keyed_caches_answer_by_value_whatever_was_asked_first() -> None:
    for first, second in ((True, 1), (1, 1.0), (Fraction(1, 2), 0.5), (-0.0, 0.0)):
        for fn in (queries.round_up, queries.round_down):
            a, b = fn(first), fn(second)
            assert a == b == float(second) and type(a) is float and type(b) is float
    assert accounting._exact(True) == accounting._exact(1.0) == Fraction(1)
    third = Fraction(1, 3)
    assert queries.round_up(third) > 1 / 3 or queries.round_up(third) == 1 / 3 > third
    assert queries.round_down(third) <= third <= queries.round_up(third)


def test_row_expressions_cached_by_fill_value_sum_the_same() -> None:
    """A fill of ``True``, ``1`` and ``1.0`` hash alike: the cached expressions must be right
    for each (they are: the fill enters as ``float(fill)``)."""
    df = pl.DataFrame({"x": [None, 2, 3, None]}, schema={"x": pl.Int64})
    fp = FixedPoint.choose(0.0, 4.0, 2.0, 4, True)
    aggs = [Agg("sum", "x", fp), Agg("sum_sq", "x", fp), Agg("rows", "x")]
    results = []
    for fill in (True, 1, 1.0, 1):
        got = backends.aggregate(df, aggs, missing={"x": fill})
        results.append([float(got[a][0]) for a in aggs])
    assert all(r == results[0] for r in results)


# -- 4. Polars in-memory vs streaming ----------------------------------------------------------
@contextlib.contextmanager
def _engine(in_memory: bool):  # type: ignore[no-untyped-def]
    old, old_choices = _polars.IN_MEMORY_ROWS, _polars._SMALL_IN_MEMORY
    _polars.IN_MEMORY_ROWS = 10**12 if in_memory else -1
    _polars._SMALL_IN_MEMORY = IdentityMap()  # no choice remembered from before
    try:
        yield
    finally:
        _polars.IN_MEMORY_ROWS, _polars._SMALL_IN_MEMORY = old, old_choices


def _awkward() -> pl.DataFrame:
    return pl.DataFrame({
        "x": [0.0, -0.0, 1.5, None, float("nan"), float("inf"), -3.0, 12.0],
        "g": [0.0, -0.0, float("nan"), None, 1.0, 1.0, -0.0, 2.0],
        "i": [1, 2, None, 1, 2, 3, 1, 2],
        "s": ["a", "b", None, "a", "b", "a", "c", "a"],
    })


@pytest.mark.parametrize("group", [None, ("g", [0.0, 1.0, 2.0, float("nan")]),
                                   ("g", [-0.0, 1, 2]), ("s", ["a", "b", "z"]),
                                   (("s", "i"), [("a", 1), ("b", 2), ("a", 3)])], ids=str)
@pytest.mark.parametrize("fill", ["drop", 1.0])
def test_in_memory_and_streaming_engines_aggregate_alike(group, fill) -> None:  # type: ignore[no-untyped-def]
    fp = FixedPoint.choose(0.0, 10.0, 5.0, 1000, True)
    aggs = [Agg("rows"), Agg("rows", "x"), Agg("sum", "x", fp), Agg("sum_sq", "x", fp),
            Agg("sum_prod", "x", fp, "i", fp), Agg("units", "i")]
    kw = {} if group is None else {"group_by": group[0], "keys": group[1]}
    out = []
    for in_memory in (True, False):
        with _engine(in_memory):
            out.append(backends.aggregate(_awkward().lazy(), aggs,
                                          missing={"x": fill, "i": "drop"}, **kw))
    for a in aggs:  # equal as numbers (the in-memory engine may give -0.0 for an all-masked
        np.testing.assert_array_equal(out[0][a], out[1][a])  # sum: same releases, above)


def test_in_memory_and_streaming_releases_are_bit_identical() -> None:
    def release(in_memory: bool) -> list[bytes]:
        rng = np.random.default_rng(3)
        n = 200
        frame = pl.DataFrame({
            "x": np.where(rng.random(n) < 0.1, np.nan, rng.uniform(-5, 5, n)),
            "g": rng.choice([0.0, -0.0, 1.5], n), "s": rng.choice(["a", "b"], n)}).lazy()
        with _engine(in_memory), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = dpf.protect(frame, epsilon=1e6, bounds={"x": (-5, 5)},
                            keys={"g": [0.0, 1.5], "s": ["a", "b"]})
            derived = p.dp.with_columns((nw.col("x") * 2).alias("y"),
                                        bounds={"y": (-10, 10)}).dp.filter(nw.col("x") > -4)
            tables = [p.dp.groupby(gb).release({"m": dpf.mean("x"), "c": dpf.count(),
                                                "v": dpf.variance("x")},
                                               epsilon=5.0, random_state=1)
                      for gb in ("g", "s")]
            tables.append(derived.dp.release({"m": dpf.mean("y"), "s": dpf.sum("y")},
                                             epsilon=5.0, random_state=2))
            assert in_memory in _polars._SMALL_IN_MEMORY.values()  # the engine asked for
        return [t.select(pl.selectors.numeric()).to_numpy().tobytes() for t in tables]

    assert release(True) == release(False)


# -- 3. the lazily extended entries chain ------------------------------------------------------
def _commit(ledger: accounting.Ledger, k: int) -> None:
    for i in range(k):
        ledger.commit(ledger.reserve(0.0), [{"name": f"q{i}", "x": [i, {"y": i}]}])


def _truth(entries: list[object]) -> str:
    return chain_entries(ENTRIES_CHAIN_START, json.loads(json.dumps(list(entries))))


def test_entries_chain_snapshots_read_in_any_order_and_after_a_cleared_log() -> None:
    ledger = accounting.Ledger(1.0)
    snaps = []
    for _ in range(4):
        _commit(ledger, 3)
        snaps.append(ledger.snapshot_document()["entries"])
    for i in (2, 0, 3, 1):  # out of order: later snapshots recorded first, then shorter ones
        assert snaps[i].digest == _truth(snaps[i])
    unread = ledger.snapshot_document()["entries"]
    with ledger._lock:
        ledger._clear_log()
    _commit(ledger, 2)
    after = ledger.snapshot_document()["entries"]
    assert after.digest == _truth(after)
    assert unread.digest == _truth(unread)  # the old chain still serves the old list
    revived = pickle.loads(pickle.dumps(ledger.snapshot_document()["entries"]))
    assert revived.digest == _truth(revived)


# -- 2. δ: what a run charges, what the dry run announces --------------------------------------
SPEC = """
[input]
path = "data.parquet"
engine = "polars"
[privacy]
epsilon = 100.0
delta = 1e-6
ledger = "ledger.jsonl"
[bounds]
age = [0, 100]
[missing]
age = 0
[[query]]
name = "m"
share = 1.0
[query.statistics]
mean_age = "mean(age)"
[output]
path = "out.parquet"
"""


def _cli(argv: list[str]) -> str:
    from dpframe.cli import main
    from dpframe.provenance import _protect as provenance

    saved = set(provenance._files)
    provenance._files.clear()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert main(["release", *argv]) == 0
    finally:
        provenance._files.clear()
        provenance._files.update(saved)
    return out.getvalue()


def test_spec_dry_run_delta_is_what_the_run_charges(tmp_path: Path) -> None:
    """A large ε makes "auto" pick the truncated mechanism (pure ε-DP): the run charges no δ
    (dpframe.release._pipeline.release_delta). The dry run must announce what the run charges; on
    767f3f7 it says δ = 1e-6 for the query and its measurement (spec_plan._measurement and
    _plan_query use spec.query_delta, ignoring Planned.pure) and the run prints δ = 1e-06
    while the ledger spends 0."""
    rng = np.random.default_rng(0)
    pl.DataFrame({"age": rng.integers(0, 100, 500)}).write_parquet(tmp_path / "data.parquet")
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    plan = json.loads(_cli([str(spec), "--dry-run", "--json"]))
    (query,) = plan["queries"]
    (measurement,) = query["measurements"]
    assert measurement["mechanism"] == "truncated"
    _cli([str(spec), "--noise-seed", "1"])
    doc = dpf.read_log(tmp_path / "out.parquet")
    charged = doc["budget"]["delta_spent"]
    assert charged == 0.0 == sum(e["delta"] for e in doc["entries"])
    assert measurement["delta"] == charged
    assert query["delta"] == charged


# -- 4. the engine choice reads only public facts ----------------------------------------------
def test_the_engine_choice_does_not_read_a_private_row_count(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With a privacy unit the number of rows is private (dpframe.provenance._units: "a unit's row
    count is what it hides"); only U and k are public. Two neighbouring data sets -- one person with
    one row, or with two -- must be aggregated the same way, but ``_small_in_memory`` counts
    the rows of the in-memory frames, so one neighbour got the in-memory engine and the other
    the streaming one (the results agree; the timing and memory profile do not). Fixed: a plan
    of bounded contributions is never offered for the choice (always streaming)."""
    monkeypatch.setattr(_polars, "IN_MEMORY_ROWS", 40)
    decide = _polars._small_in_memory
    answers: list[bool] = []
    monkeypatch.setattr(_polars, "_small_in_memory",
                        lambda lazy: answers.append(decide(lazy)) or answers[-1])
    chosen = []
    for extra in (0, 1):  # person 0 owns 1 row, or 2 rows (k = 3)
        ids = list(range(40)) + [0] * extra
        frame = pl.DataFrame({"u": ids, "x": [float(i % 7) for i in ids]}).lazy()
        answers.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 7)}, privacy_unit="u",
                            max_rows_per_unit=3, max_groups_per_unit=1)
            p.dp.mean("x", epsilon=1.0, random_state=0)
        chosen.append(list(answers))
    assert chosen == [[], []]

"""Synthetic, census-like data of any size, deterministic given a seed.

:func:`census` generates a table that looks like a person-level census or labour-force survey
of adults, with the joint structure an analyst expects (income depends on education, age, sex,
region and hours; older people work less and draw pensions; degrees need age). The demo, the
tests and the benchmarks all use it, so it is vectorised numpy, generated in chunks of
:data:`CHUNK_ROWS` rows on all cores (10 M rows take about 2 s on 2 cores), and it needs no
network and no files.

Columns, in order (one row per person; no missing values). Shares are for large tables.

``age`` -- int64 (Polars Int64); public bounds **(16, 90)**.
    Adults 16-100 with a population-pyramid shape; about 0.7 % are over 90, above the
    declared bound (censuses top-code old ages), so they are clamped to 90.
``sex`` -- pandas ``category`` (Polars ``Categorical``); keys ``female``, ``male``.
    About 50 / 50, more women among the old.
``region`` -- pandas ``category`` (Polars ``Categorical``); keys ``Northeast``, ``Midwest``,
    ``South``, ``West``. 17 / 21 / 38 / 24 %.
``education`` -- ordered pandas ``category`` (Polars ``Enum``); keys, in order, ``primary`` <
    ``lower_secondary`` < ``upper_secondary`` < ``vocational`` < ``bachelor`` < ``master`` <
    ``doctorate``. Depends on age: nobody holds a degree before the age it takes (no bachelor
    before 21, master before 23, doctorate before 26), and older cohorts have less schooling.
``hours_worked`` -- int64 (Polars Int64); public bounds **(0, 80)**.
    Usual weekly hours: 0 for the about 37 % who are not employed (students, retired, ...);
    the employed work part-time (~22 h), full-time (~40 h) or long hours (~55 h); about 0.07 %
    of rows report more than 80 h (at most 99).
``income`` -- float64 (Polars Float64); public bounds **(0, 250 000)**.
    Yearly income in currency units, rounded to cents. Earnings are lognormal in education,
    experience (age), sex, region and hours, mixed with a heavy-tailed high-earner component;
    the non-employed have a pension (mostly those aged 62+), some other income, or exactly 0
    (about 17 % of rows are 0). Long right tail: the mean is about 1.5 times the median, and
    about 0.7 % of rows lie above 250 000 (the largest in 10 M rows above 10 000 000).

Bounds are *declared*, not derived from the data, as differential privacy requires: they are
what a data owner would publish before seeing the data, so a few rows fall outside them and
the library clamps those rows (and logs that it did). Use :data:`CENSUS_BOUNDS` and
:data:`CENSUS_KEYS` as the public metadata::

    import dpframe as dpf
    from dpframe.datasets import CENSUS_BOUNDS, census

    df = census(1_000_000, seed=0)
    pf = dpf.protect(df, epsilon=1.0, delta=1e-6, bounds=CENSUS_BOUNDS)

Determinism: the table depends only on ``seed`` and ``n_rows``, not on the platform or on the
backend, and ``census(m, seed)`` is the first ``m`` rows of ``census(n, seed)`` for ``m <= n``
(every column of every chunk has its own random stream). The numbers are synthetic and
describe no real population.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dpframe.errors import ParameterError

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

__all__ = [
    "CENSUS_BOUNDS",
    "CENSUS_COLUMNS",
    "CENSUS_KEYS",
    "CHUNK_ROWS",
    "VISITS_BOUNDS",
    "VISITS_COLUMNS",
    "VISITS_KEYS",
    "census",
    "iter_census",
    "visits",
]

Backend = Literal["pandas", "polars"]

#: Rows per generation chunk. Part of the definition of the data: changing it changes the rows.
CHUNK_ROWS: int = 1 << 20

#: Column order of the generated table.
CENSUS_COLUMNS: tuple[str, ...] = ("age", "sex", "region", "education", "hours_worked", "income")

#: Public (declared) bounds of the numeric columns: column -> (lower, upper).
CENSUS_BOUNDS: dict[str, tuple[float, float]] = {
    "age": (16, 90),
    "hours_worked": (0, 80),
    "income": (0.0, 250_000.0),
}

_SEX = ["female", "male"]
_REGION = ["Northeast", "Midwest", "South", "West"]
_EDUCATION = [
    "primary",
    "lower_secondary",
    "upper_secondary",
    "vocational",
    "bachelor",
    "master",
    "doctorate",
]

#: Public keys of the categorical columns: column -> list of keys (for education, in order).
CENSUS_KEYS: dict[str, list[str]] = {
    "sex": list(_SEX),
    "region": list(_REGION),
    "education": list(_EDUCATION),
}

# ---------------------------------------------------------------------------------------------
# Model parameters (all public, all made up).

_MIN_AGE, _MAX_AGE = 16, 100


def _age_weights() -> np.ndarray:
    """Relative frequency of each age 16..100: flat working ages, thinning old ages."""
    ages = np.arange(_MIN_AGE, _MAX_AGE + 1, dtype=np.float64)
    w = np.ones_like(ages)
    w[(ages >= 25) & (ages < 55)] = 1.05
    w[(ages >= 65) & (ages < 75)] = 0.8
    w[(ages >= 75) & (ages < 85)] = 0.45
    w[(ages >= 85) & (ages < 90)] = 0.18
    old = ages >= 90
    w[old] = 0.12 * 0.8 ** (ages[old] - 90)
    return w


# Inverse-CDF lookup table for age: probabilities are quantised to multiples of 2**-16, so
# ``_AGE_TABLE[floor(u * 2**16)]`` samples the (quantised) distribution exactly and fast.
_TABLE_BITS = 16


def _age_table() -> np.ndarray:
    w = _age_weights()
    size = 1 << _TABLE_BITS
    counts = np.floor(w / w.sum() * size).astype(np.int64)
    counts[np.argmax(counts)] += size - counts.sum()  # largest-weight age absorbs the rounding
    return np.repeat(np.arange(_MIN_AGE, _MAX_AGE + 1, dtype=np.int64), counts)


_AGE_TABLE = _age_table()
_REGION_CDF = np.array([0.17, 0.38, 0.76, 1.0])
_EDU_CDF = np.cumsum([0.06, 0.12, 0.32, 0.14, 0.22, 0.11, 0.03])
_EDU_CDF[-1] = 1.0
# Youngest age at which education code k+1 is possible (16-17: at most lower_secondary, ...).
_EDU_AGE_THRESHOLDS = np.array([18, 19, 21, 23, 26])
_EDU_EFFECT = np.array([-0.45, -0.30, 0.0, 0.10, 0.40, 0.60, 0.80])
_REGION_EFFECT = np.array([0.08, -0.02, -0.05, 0.04])

# One independent random stream per (chunk, variable); the ids are part of the data definition.
_STREAMS = (
    "age",
    "sex",
    "region",
    "education",
    "employed",
    "hours_group",
    "hours_noise",
    "income_noise",
    "income_tail_u",
    "income_tail",
    "other_income_u",
    "other_income",
)
_STREAM_ID = {name: i for i, name in enumerate(_STREAMS)}


def _check_args(n_rows: int, seed: int) -> None:
    if isinstance(n_rows, bool) or not isinstance(n_rows, int | np.integer) or n_rows < 0:
        raise ParameterError(f"n_rows must be a non-negative integer, got {n_rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")


class _Chunk:
    """Random streams of one chunk: each variable draws from its own generator."""

    def __init__(self, seed: int, chunk_index: int, n: int) -> None:
        self.seed = int(seed)
        self.chunk_index = chunk_index
        self.n = n

    def _rng(self, name: str) -> np.random.Generator:
        ss = np.random.SeedSequence(self.seed, spawn_key=(self.chunk_index, _STREAM_ID[name]))
        return np.random.Generator(np.random.PCG64(ss))

    def uniform(self, name: str) -> np.ndarray:
        """``n`` uniforms in [0, 1) from the stream ``name``."""
        return self._rng(name).random(self.n)

    def normal(self, name: str, size: int | None = None) -> np.ndarray:
        """``size`` (default ``n``) standard normals from the stream ``name``."""
        return self._rng(name).standard_normal(self.n if size is None else size)


def _inverse_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Index of the category of each uniform ``u`` under a short cumulative table ``cdf``."""
    code = np.zeros(u.shape, dtype=np.int8)
    for edge in cdf[:-1]:
        code += u >= edge
    return code


def _by_age() -> dict[str, np.ndarray]:
    """Per-age tables (index ``age - 16``) of everything that depends on age alone."""
    a = np.arange(_MIN_AGE, _MAX_AGE + 1, dtype=np.float64)
    exp_years = np.clip(a - 18.0, 0.0, None)
    return {
        # Share of women grows among the old.
        "p_female": 0.49 + 0.2 * np.clip((a - 70.0) / 30.0, 0.0, 1.0),
        # Highest education code reachable at this age (16-17: lower_secondary, ...).
        "edu_cap": (1 + np.searchsorted(_EDU_AGE_THRESHOLDS, a, side="right")).astype(np.int8),
        # Employment rises through the early twenties and falls in the sixties.
        "p_employed": 0.80 / (1.0 + np.exp(-(a - 19.5) / 1.8)) / (1.0 + np.exp(-(63.0 - a) / 3.5))
        + 0.03,
        # Concave experience premium on log earnings.
        "experience": 0.06 * exp_years - 0.0011 * exp_years**2,
        "pensioner": (a >= 62.0).astype(np.float64),
    }


_AGE_TABLES = _by_age()
# Education CDF by age: older cohorts have less schooling. Code = #{j : u >= edge_j(age)} with
# edge_j(age) = cdf_j ** (1 / k(age)), i.e. the base distribution applied to u ** k, where
# k = 1 + 0.015 * max(age - 45, 0) > 1 leans towards low codes.
_EDU_POWER = 1.0 + 0.015 * np.maximum(np.arange(_MIN_AGE, _MAX_AGE + 1) - 45.0, 0.0)
_EDU_CDF_BY_AGE = _EDU_CDF[:-1, None] ** (1.0 / _EDU_POWER)[None, :]
_HOURS_GROUP_CDF = np.array([0.18, 0.93, 1.0])  # part-time, full-time, long hours
_HOURS_MEAN = np.array([22.0, 40.0, 55.0])
_HOURS_SD = np.array([7.0, 4.0, 12.0])
# 0.9 * log(hours / 40) for hours 0..99 (hours 0 never used for earnings).
_LOG_HOURS = 0.9 * np.log(np.maximum(np.arange(100), 1) / 40.0)


def _generate_chunk(seed: int, chunk_index: int, n: int) -> dict[str, np.ndarray]:
    """Rows ``chunk_index * CHUNK_ROWS ...`` (``n`` of them) as numpy arrays.

    Categorical columns come back as int8 codes into the matching :data:`CENSUS_KEYS` list.
    """
    c = _Chunk(seed, chunk_index, n)
    t = _AGE_TABLES

    age = _AGE_TABLE[(c.uniform("age") * (1 << _TABLE_BITS)).astype(np.intp)]
    ai = age - _MIN_AGE

    sex = (c.uniform("sex") >= t["p_female"][ai]).astype(np.int8)  # 0 = female, 1 = male
    region = _inverse_cdf(_REGION_CDF, c.uniform("region"))

    u_edu = c.uniform("education")
    edu = np.zeros(n, dtype=np.int8)
    for edge in _EDU_CDF_BY_AGE:
        edu += u_edu >= edge[ai]
    np.minimum(edu, t["edu_cap"][ai], out=edu)

    employed = c.uniform("employed") < t["p_employed"][ai] + 0.02 * np.minimum(edu, 4)

    # Weekly hours of the employed: part-time, full-time, long hours.
    group = _inverse_cdf(_HOURS_GROUP_CDF, c.uniform("hours_group"))
    hours_f = c.normal("hours_noise")
    hours_f *= _HOURS_SD[group]
    hours_f += _HOURS_MEAN[group]
    hours = np.clip(np.rint(hours_f), 1, 99).astype(np.int64)
    hours[~employed] = 0

    # Earnings: log-normal in education, experience, sex, region and hours, plus a heavy
    # high-earner component. The non-employed get a pension (mostly the old), a small other
    # income, or nothing.
    log_earn = c.normal("income_noise")
    log_earn *= 0.5
    log_earn += 9.95 + _EDU_EFFECT[edu] + t["experience"][ai] + _REGION_EFFECT[region]
    log_earn += 0.12 * sex
    log_earn += _LOG_HOURS[hours]
    # Streams used by a subset of rows draw one value per row of the subset, in row order, so
    # a prefix of the table still depends only on a prefix of every stream.
    high = c.uniform("income_tail_u") < 0.04
    log_earn[high] += 1.2 * np.abs(c.normal("income_tail", int(high.sum())))

    pensioner = t["pensioner"][ai] > 0
    has_other = ~employed & (c.uniform("other_income_u") < np.where(pensioner, 0.85, 0.15))
    z_other = c.normal("other_income", int(has_other.sum()))
    old_other = pensioner[has_other]
    log_earn[has_other] = np.where(old_other, 9.7 + 0.5 * z_other, 8.8 + 0.9 * z_other)

    has_income = employed | has_other
    income = np.zeros(n, dtype=np.float64)
    income[has_income] = np.round(np.exp(log_earn[has_income]), 2)

    return {
        "age": age,
        "sex": sex,
        "region": region,
        "education": edu,
        "hours_worked": hours,
        "income": income,
    }


def _generate_arrays(n_rows: int, seed: int) -> dict[str, np.ndarray]:
    """All ``n_rows`` rows as preallocated numpy arrays, filled chunk by chunk."""
    out: dict[str, np.ndarray] = {
        "age": np.empty(n_rows, dtype=np.int64),
        "sex": np.empty(n_rows, dtype=np.int8),
        "region": np.empty(n_rows, dtype=np.int8),
        "education": np.empty(n_rows, dtype=np.int8),
        "hours_worked": np.empty(n_rows, dtype=np.int64),
        "income": np.empty(n_rows, dtype=np.float64),
    }

    def fill(i: int) -> None:
        start = i * CHUNK_ROWS
        stop = min(start + CHUNK_ROWS, n_rows)
        for name, arr in _generate_chunk(seed, i, stop - start).items():
            out[name][start:stop] = arr

    n_chunks = -(-n_rows // CHUNK_ROWS)
    workers = min(n_chunks, os.cpu_count() or 1, 8)
    if workers <= 1:
        for i in range(n_chunks):
            fill(i)
    else:
        # numpy releases the GIL in its kernels, so chunks generate in parallel; each chunk
        # has its own streams, so the result does not depend on the schedule.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(fill, range(n_chunks)))
    return out


def _to_pandas(arrays: Mapping[str, np.ndarray]) -> pd.DataFrame:
    import pandas as pd

    cols: dict[str, Any] = {}
    for name in CENSUS_COLUMNS:
        arr = arrays[name]
        if name in CENSUS_KEYS:
            cols[name] = pd.Categorical.from_codes(
                arr, categories=CENSUS_KEYS[name], ordered=(name == "education")
            )
        else:
            cols[name] = arr
    return pd.DataFrame(cols, copy=False)


def _to_polars(arrays: Mapping[str, np.ndarray]) -> pl.DataFrame:
    import polars as pl

    cols: dict[str, pl.Series] = {}
    for name in CENSUS_COLUMNS:
        arr = arrays[name]
        if name in CENSUS_KEYS:
            keys = CENSUS_KEYS[name]
            # Ordered -> Enum (fixed, ordered categories); unordered -> Categorical, as
            # pl.from_pandas and narwhals map pandas categories.
            dtype = pl.Enum(keys) if name == "education" else pl.Categorical
            cols[name] = pl.Series(name, keys, dtype=dtype).gather(arr.astype(np.uint32))
        else:
            cols[name] = pl.Series(name, arr)
    return pl.DataFrame(cols)


def _convert(arrays: Mapping[str, np.ndarray], backend: str) -> Any:
    if backend == "pandas":
        return _to_pandas(arrays)
    if backend == "polars":
        return _to_polars(arrays)
    raise ParameterError(f"backend must be 'pandas' or 'polars', got {backend!r}")


def census(n_rows: int, seed: int = 0, backend: Backend = "pandas") -> Any:
    """Generate a census-like table of ``n_rows`` people (see the module docstring).

    Parameters
    ----------
    n_rows:
        Number of rows (people), any non-negative integer. Memory is about 27 bytes per row
        for the result plus a few hundred MB of working space.
    seed:
        Non-negative integer. Same ``(n_rows, seed)`` -> same table, on any platform and
        backend; ``census(m, seed)`` equals the first ``m`` rows of ``census(n, seed)``.
    backend:
        ``"pandas"`` for a :class:`pandas.DataFrame` or ``"polars"`` for a
        :class:`polars.DataFrame` (call ``.lazy()`` on it for a ``LazyFrame``).

    Returns
    -------
    A frame with the columns of :data:`CENSUS_COLUMNS`. Categorical columns use the keys of
    :data:`CENSUS_KEYS`; numeric columns mostly, but not always, lie in :data:`CENSUS_BOUNDS`.
    """
    _check_args(n_rows, seed)
    if backend not in ("pandas", "polars"):
        raise ParameterError(f"backend must be 'pandas' or 'polars', got {backend!r}")
    return _convert(_generate_arrays(int(n_rows), int(seed)), backend)


def iter_census(n_rows: int, seed: int = 0, backend: Backend = "pandas") -> Iterator[Any]:
    """Yield :func:`census` ``(n_rows, seed)`` as consecutive frames of up to CHUNK_ROWS rows.

    Concatenated, the chunks equal ``census(n_rows, seed, backend)``; use this to write very
    large tables (for example to Parquet with ``pyarrow.parquet.ParquetWriter``) in bounded
    memory.
    """
    _check_args(n_rows, seed)
    if backend not in ("pandas", "polars"):
        raise ParameterError(f"backend must be 'pandas' or 'polars', got {backend!r}")
    for i, start in enumerate(range(0, int(n_rows), CHUNK_ROWS)):
        stop = min(start + CHUNK_ROWS, int(n_rows))
        yield _convert(_generate_chunk(int(seed), i, stop - start), backend)


# ---------------------------------------------------------------------------------------------
# Several rows per person: clinic visits.

#: Public bounds of :func:`visits`' numeric columns.
VISITS_BOUNDS: dict[str, tuple[float, float]] = {"age": (16, 90), "cost": (0.0, 2_000.0)}

_VISIT_TYPES = ["gp", "specialist", "emergency"]

#: Public keys of :func:`visits`' categorical columns.
VISITS_KEYS: dict[str, list[str]] = {"visit_type": list(_VISIT_TYPES), "region": list(_REGION)}

#: Column order of :func:`visits`.
VISITS_COLUMNS: tuple[str, ...] = ("patient_id", "age", "region", "visit_type", "cost")


def visits(n_patients: int, seed: int = 0, backend: Backend = "pandas") -> Any:
    """A synthetic table of clinic visits: **one row per visit, several per patient** — the
    data ``dpf.protect(..., privacy_unit="patient_id", max_rows_per_unit=k)`` is for.

    Each of ``n_patients`` patients (``patient_id``, int64, random distinct ids) has
    ``1 + Poisson(frailty)`` visits, frailty gamma-distributed and growing with age: 3.3 on
    average, 16 % of patients with more than 5 visits, 4 % with more than 9, the most about 25
    (10 000 patients). Per patient: ``age`` (int64, 16–95, bounds (16, 90): about 3 % of
    patients are older) and ``region`` (the census regions). Per visit: ``visit_type`` (``gp``
    68 %, ``specialist`` 24 %, ``emergency`` 8 %; frequent visitors see specialists more) and
    ``cost`` (float64, lognormal by type, rounded to cents; about 0.1 % above the declared bound
    of 2 000). Rows come in visit order (shuffled across patients), so a patient's rows are
    scattered. Categorical columns are pandas ``category`` / Polars ``Categorical``.
    Deterministic in ``(n_patients, seed)``; the numbers describe no real population.
    """
    _check_args(n_patients, seed)
    if backend not in ("pandas", "polars"):
        raise ParameterError(f"backend must be 'pandas' or 'polars', got {backend!r}")
    rng = np.random.default_rng([int(seed), 0x715175])
    n = int(n_patients)
    age = np.minimum(16 + rng.gamma(2.0, 14.0, n), 95).astype(np.int64)
    frailty = rng.gamma(1.2, 1.0, n) * (0.6 + age / 60.0)
    count = 1 + rng.poisson(1.45 * frailty)
    region = rng.choice(len(_REGION), n, p=[0.17, 0.21, 0.38, 0.24])
    ids = rng.choice(np.arange(10**6, 10**6 + 50 * max(n, 1)), n, replace=False)
    who = np.repeat(np.arange(n), count)
    heavy = (count[who] > 5).astype(float)
    u = rng.random(who.size)
    p_emergency = 0.07 + 0.02 * heavy
    p_specialist = 0.19 + 0.12 * heavy
    kind = np.where(u < p_emergency, 2, np.where(u < p_emergency + p_specialist, 1, 0))
    median = np.array([60.0, 180.0, 450.0])[kind]
    cost = np.round(median * np.exp(rng.normal(0.0, 0.7, who.size)), 2)
    order = rng.permutation(who.size)
    who, kind, cost = who[order], kind[order], cost[order]
    arrays = {"patient_id": ids[who], "age": age[who], "region": region[who],
              "visit_type": kind, "cost": cost}
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame({
            name: pd.Categorical.from_codes(arrays[name], categories=VISITS_KEYS[name])
            if name in VISITS_KEYS else arrays[name] for name in VISITS_COLUMNS})
    import polars as pl

    return pl.DataFrame([
        pl.Series(name, VISITS_KEYS[name], dtype=pl.Categorical).gather(
            arrays[name].astype(np.uint32)) if name in VISITS_KEYS else
        pl.Series(name, arrays[name]) for name in VISITS_COLUMNS])

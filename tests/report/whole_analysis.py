"""A whole analysis built with the public API, as a user writes one (issue 33 item 5): counts by
one key and by two keys, means per group with intervals, quartiles, a histogram over public
edges, a correlation matrix with intervals, overall numbers; seeded, n = 3,000 (the releases
take about 0.2 s: the engine's time hardly depends on n at this size). ``tables()`` returns
the release tables by name; the files are written by ``dpf.concat_releases`` (the long form
and the tidy form) and ``dpf.write_parquet``.

``data/whole_analysis_long.parquet`` is the long file of ``tables(n=600)`` as the code of
November 2026 wrote it (before the tidy form): the test that the reader still reads files
written before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import dpframe as dpf

REGIONS = ["North", "South", "East", "West"]
SEXES = ["female", "male"]
FIXTURE = Path(__file__).parent / "data" / "whole_analysis_long.parquet"
QUERIES = ["by_region", "by_region_sex", "income_by_sex", "age_quartiles", "ages", "corr",
           "overall"]


def tables(n: int = 3000) -> dict[str, Any]:
    """The analysis' release tables, in the order of :data:`QUERIES`."""
    rng = np.random.default_rng(0)
    age = rng.uniform(18, 90, n).round()
    df = pd.DataFrame({"age": age,
                       "income": (rng.gamma(2, 15000, n) + age * 400).clip(0, 200_000),
                       "region": rng.choice(REGIONS, n), "sex": rng.choice(SEXES, n)})
    pf = dpf.protect(df, epsilon=8.0, bounds={"age": (18, 90), "income": (0, 200_000)},
                     keys={"region": REGIONS, "sex": SEXES},
                     missing={"age": 18.0, "income": 0.0})
    return {
        "by_region": pf.dp.value_counts("region", epsilon=0.3, ci=0.95, random_state=1),
        "by_region_sex": pf.dp.groupby(["region", "sex"]).count(epsilon=0.3, ci=0.95,
                                                                random_state=2),
        "income_by_sex": pf.dp.groupby("sex").release(
            {"mean_income": dpf.mean("income"), "mean_age": dpf.mean("age")}, epsilon=1.0,
            ci=0.95, random_state=3),
        "age_quartiles": pf.dp.quantile("age", [0.25, 0.5, 0.75], epsilon=0.5, ci=0.95,
                                        random_state=4),
        "ages": pf.dp.histogram("age", edges=[18, 30, 45, 65, 90], epsilon=0.3, ci=0.95,
                                random_state=5),
        "corr": pf.dp.corr(["age", "income"], epsilon=1.0, ci=0.95, random_state=6),
        "overall": pf.dp.release({"n": dpf.count(), "mean_income": dpf.mean("income")},
                                 epsilon=0.3, ci=0.95, random_state=7),
    }


def write_files(directory: Path, made: dict[str, Any] | None = None) -> dict[str, Path]:
    """The analysis as files: ``long`` (the long form), ``tidy`` (the tidy form) and
    ``renamed`` (the long form after ``rename_release`` swapped the two means' names)."""
    made = tables() if made is None else made
    swapped = dpf.rename_release(made["income_by_sex"], {"mean_income": "mean_age",
                                                         "mean_age": "mean_income"})
    files = {"long": directory / "long.parquet", "tidy": directory / "tidy.parquet",
             "renamed": directory / "renamed.parquet"}
    dpf.write_parquet(dpf.concat_releases(made, form="long"), files["long"])
    dpf.write_parquet(dpf.concat_releases(made, form="tidy"), files["tidy"])
    dpf.write_parquet(dpf.concat_releases({**made, "income_by_sex": swapped}, form="long"),
                      files["renamed"])
    return files

"""The facts docs/datasets.md (and docs/privacy.md §U.6) state about the generated tables.

Census (10 M rows, seed 0): the share over the age bound, sex and region shares, the share
not working and over the hours bound, the income shares (exactly 0, over the bound), mean /
median and the largest income. Visits (10 000 patients, seed 0): visit types, visits per
patient, patients over the age bound and visits over the cost bound; and on
``visits(20_000)`` the share of visits kept by ``k = 5`` rows per patient and the mean cost
(clamped to the public bounds) per kept visit against all visits. Kept visits are each
patient's first ``k`` rows in the table's (shuffled) order, one instance of the bounding's
uniformly random choice. Deterministic in the seeds; about 10 s and 1 GB at 10 M rows
(``--rows`` for fewer).

Run: ``python examples/dataset_facts.py [--rows 10000000]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dpframe.datasets import CENSUS_BOUNDS, VISITS_BOUNDS, census, visits


def pct(share: float) -> str:
    return f"{100 * share:.2f} %"


def census_facts(rows: int) -> None:
    df = census(rows, seed=0)
    hi_age = CENSUS_BOUNDS["age"][1]
    hi_hours = CENSUS_BOUNDS["hours_worked"][1]
    hi_income = CENSUS_BOUNDS["income"][1]
    print(f"census({rows:,}, seed=0)")
    print(f"  age > {hi_age}: {pct((df['age'] > hi_age).mean())}")
    for column in ("sex", "region"):
        shares = df[column].value_counts(normalize=True, sort=False)
        print(f"  {column}: " + ", ".join(f"{k} {pct(v)}" for k, v in shares.items()))
    hours = df["hours_worked"]
    print(f"  hours_worked == 0: {pct((hours == 0).mean())}; > {hi_hours}: "
          f"{pct((hours > hi_hours).mean())}; max {hours.max()}")
    income = df["income"]
    print(f"  income == 0: {pct((income == 0).mean())}; > {hi_income:,}: "
          f"{pct((income > hi_income).mean())}; mean / median "
          f"{income.mean() / income.median():.2f}; max {income.max():,.0f}")


def visits_facts(patients: int) -> None:
    df = visits(patients, seed=0)
    per_patient = df.groupby("patient_id").size()
    hi_age = VISITS_BOUNDS["age"][1]
    hi_cost = VISITS_BOUNDS["cost"][1]
    ages = df.groupby("patient_id")["age"].first()
    shares = df["visit_type"].value_counts(normalize=True, sort=False)
    print(f"visits({patients:,}, seed=0): {len(df):,} rows")
    print("  visit_type: " + ", ".join(f"{k} {pct(v)}" for k, v in shares.items()))
    print(f"  visits per patient: mean {per_patient.mean():.2f}, > 5: "
          f"{pct((per_patient > 5).mean())}, > 9: {pct((per_patient > 9).mean())}, "
          f"max {per_patient.max()}")
    print(f"  patients with age > {hi_age}: {pct((ages > hi_age).mean())}; visits with cost > "
          f"{hi_cost:g}: {pct((df['cost'] > hi_cost).mean())}")


def bounding_facts(patients: int, k: int) -> None:
    df = visits(patients, seed=0)
    cost = df["cost"].clip(*VISITS_BOUNDS["cost"])
    kept = df.groupby("patient_id").cumcount().to_numpy() < k
    print(f"visits({patients:,}, seed=0), k = {k}: keeps {pct(float(np.mean(kept)))} of the "
          f"visits; mean clamped cost per kept visit {cost[kept].mean():.1f} against "
          f"{cost.mean():.1f} over all visits")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    pd.set_option("display.width", 120)
    census_facts(args.rows)
    visits_facts(10_000)
    bounding_facts(20_000, 5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A declared key list's fingerprint stands in for its contents in the plan cache (issue 34: a
repeated group-by does no per-key work before the read), and it is exact: keys of other values
or other types never share a cached plan, and a list the user mutates after declaring it
changes nothing."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.query._keys import Keys, checked_keys
from dpframe.release import _pipeline as release


def test_the_fingerprint_tells_values_and_types_apart():
    prints = [checked_keys(k).fingerprint for k in
              ([1, 2], [1.0, 2.0], [True, 2], ["1", "2"], [2, 1], [1, 2, 3])]
    assert None not in prints and len(set(prints)) == len(prints)
    assert Keys([1, 2]).fingerprint == checked_keys((1, 2)).fingerprint
    pairs = checked_keys([(1, "a"), (2, "b")])
    assert pairs.fingerprint is not None
    assert pairs.fingerprint != checked_keys([(1.0, "a"), (2, "b")]).fingerprint


def test_keys_json_cannot_tell_apart_get_no_fingerprint():
    assert Keys([np.int64(1), np.int64(2)]).fingerprint is None  # (written as their str)
    assert Keys([(np.int64(1), "a")]).fingerprint is None


def test_the_plan_key_uses_the_fingerprint_not_the_keys():
    keys = checked_keys(range(1000))
    assert release._typed(keys) == keys.fingerprint
    assert release._typed(checked_keys([1, 2])) != release._typed(checked_keys([1.0, 2.0]))
    with pytest.raises(TypeError):
        release._typed(Keys([np.int64(1)]))  # not a plain value: nothing is cached


def test_a_repeated_groupby_reuses_its_plan_and_a_mutated_list_changes_nothing():
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({"g": rng.integers(0, 5, 400), "x": rng.uniform(0, 1, 400)})
    declared = [0, 1, 2, 3, 4]
    pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 1)}, missing={"x": 0.0},
                     keys={"g": declared})
    first = pf.dp.groupby("g").mean("x", epsilon=0.5, random_state=1)
    facts = release.resolve(pf, None)
    assert len(release._PLANS.get(facts)) == 1
    declared[0] = 99  # the user's list after protect: the declared keys were copied
    declared.append(7)
    again = pf.dp.groupby("g").mean("x", epsilon=0.5, random_state=1)
    assert len(release._PLANS.get(facts)) == 1  # the same plan, found by fingerprint
    assert again.equals(first)
    mine = [4, 3]
    grouped = pf.dp.groupby("g", keys=mine)
    a = grouped.mean("x", epsilon=0.5, random_state=2)
    mine[0] = 0  # after the first release the group-by's keys are frozen
    b = grouped.mean("x", epsilon=0.5, random_state=2)
    assert a.equals(b) and a["g"].to_list() == [4, 3]
    assert len(release._PLANS.get(facts)) == 2


def test_long_key_lists_of_one_type_are_interned_by_content():
    keys = list(range(2000))
    first = checked_keys(keys)
    assert checked_keys(list(range(2000))) is first  # equal content: the same object
    assert first.checked and first.kinds == {int}
    keys[0] = -1  # a list mutated after it was passed: new content, a new checked list
    other = checked_keys(keys)
    assert other is not first and other[0] == -1 and first[0] == 0
    words = [str(i) for i in range(2000)]
    assert checked_keys(words) is checked_keys(list(words))
    mixed = [float(i) for i in range(2000)]  # floats (0.0 == -0.0): never interned
    assert checked_keys(mixed) is not checked_keys(mixed)
    short = checked_keys([1, 2])  # short lists: interned in a table of their own
    assert checked_keys([1, 2]) is short
    for n in range(100):  # many short lists never push a long one out
        checked_keys([n, n + 1])
    assert checked_keys(list(range(2000))) is first
    assert checked_keys(list(words)) is checked_keys(words)


def test_a_new_groupby_per_query_with_the_same_keys_reuses_them():
    rng = np.random.default_rng(2)
    frame = pl.DataFrame({"g": rng.integers(0, 1500, 3000), "x": rng.uniform(0, 1, 3000)})
    pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 1)}, missing={"x": 0.0})
    keys = list(range(1500))
    a = pf.dp.groupby("g", keys=keys)
    a.count(epsilon=0.5)
    b = pf.dp.groupby("g", keys=list(keys))
    b.count(epsilon=0.5)
    assert a._declared() is b._declared()

"""Release specs: a data steward's job in one TOML file, parsed and checked without any data.

:func:`load_spec` reads a spec (``dpframe release spec.toml``, format in
``docs/release-spec.md``) with the standard library's :mod:`tomllib` and checks every key and
value, returning a :class:`ReleaseSpec`. Nothing here opens the input data (not even its
schema; :mod:`dpframe.spec._plan` checks the spec against the schema, :mod:`dpframe.spec._run`
reads it).

The pieces, one job each: :mod:`dpframe.spec._toml` (the TOML read, and errors at lines),
:mod:`dpframe.spec._model` (the checked spec), :mod:`dpframe.spec._vocabulary` (the statistics'
words, from the registry), :mod:`dpframe.spec._input`, :mod:`dpframe.spec._columns` (bounds,
keys, missing), :mod:`dpframe.spec._queries`, :mod:`dpframe.spec._statistics` and
:mod:`dpframe.spec._filters`; this module reads the spec's top level and ``[privacy]`` and
``[output]``.
"""

from __future__ import annotations

from pathlib import Path

from dpframe._validation import check_delta, check_epsilon
from dpframe.errors import SpecError
from dpframe.spec._columns import _bounds, _keys, _missing, neighbour_definition
from dpframe.spec._derived import derived_columns
from dpframe.spec._filters import FILTER_OPS
from dpframe.spec._input import CSV_TYPES as CSV_TYPES
from dpframe.spec._input import ENGINES, FORMATS, _input
from dpframe.spec._model import DEFAULT_LEVEL as DEFAULT_LEVEL
from dpframe.spec._model import (
    DELTA_MECHANISMS,
    MECHANISMS,
    SHARE_TOLERANCE,
    Condition,
    InputSpec,
    QuerySpec,
    ReleaseSpec,
    StatisticSpec,
)
from dpframe.spec._queries import _queries
from dpframe.spec._toml import Path_ as Path_
from dpframe.spec._toml import _Checker, _Locator, read_toml
from dpframe.spec._vocabulary import KINDS, library_query
from dpframe.spec._vocabulary import PARAMETERS as PARAMETERS
from dpframe.spec._vocabulary import SPEC_PARAMETERS as SPEC_PARAMETERS
from dpframe.spec._vocabulary import STATISTIC_BUILDERS as STATISTIC_BUILDERS

__all__ = [
    "ENGINES",
    "FILTER_OPS",
    "FORMATS",
    "KINDS",
    "Condition",
    "InputSpec",
    "QuerySpec",
    "ReleaseSpec",
    "SpecError",
    "StatisticSpec",
    "library_query",
    "load_spec",
    "parse_spec",
]

_TOP_KEYS = ("version", "input", "privacy", "bounds", "keys", "missing", "with_columns",
             "query", "output")
_PRIVACY_KEYS = ("unit", "epsilon", "delta", "ledger", "run_epsilon", "run_delta", "mechanism",
                 "neighbours", "max_rows")
_OUTPUT_KEYS = ("path", "overwrite")


def load_spec(path: str | Path) -> ReleaseSpec:
    """Read and check the spec file at ``path`` (no data is opened)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read the spec: {exc.strerror or exc}", source=str(p)) from None
    except UnicodeDecodeError:
        raise SpecError("the spec is not UTF-8 text", source=str(p)) from None
    return parse_spec(text, source=str(p), base=p.resolve().parent)


def parse_spec(text: str, *, source: str = "spec", base: str | Path = ".") -> ReleaseSpec:
    """Check a spec given as text; relative paths are resolved against ``base``."""
    data = read_toml(text, source)
    loc = _Locator(text)
    c = _Checker(loc, source)
    base_dir = Path(base)
    c.known(data, (), _TOP_KEYS, "the spec")
    if "version" in data and data["version"] != 1:
        raise c.fail(("version",), f"unsupported spec version {data['version']!r}; this "
                     "dpframe reads version = 1")

    for name, example in (("input", '[input] path = "data/*.parquet"'),
                          ("privacy", "[privacy] epsilon = 1.0"),
                          ("bounds", "[bounds] age = [0, 120]"),
                          ("query", '[[query]] name = "n", kind = "count", share = 1.0'),
                          ("output", '[output] path = "release.parquet"')):
        if name not in data:
            raise SpecError(f"missing [{name}] table, e.g. {example}", source=source,
                            line=None)

    inp = _input(c, data["input"], base_dir)
    priv = c.table(data["privacy"], ("privacy",), "[privacy]")
    c.known(priv, ("privacy",), _PRIVACY_KEYS, "[privacy]")
    unit = c.choice(priv.get("unit", "row"), ("privacy", "unit"), "privacy.unit", ("row",))
    eps = c.library(check_epsilon, c.required(priv, "epsilon", ("privacy",), "[privacy]",
                                              "epsilon = 1.0 (the data set's total budget)"),
                    ("privacy", "epsilon"), "privacy.epsilon")
    dlt = c.library(check_delta, priv.get("delta", 0.0), ("privacy", "delta"), "privacy.delta")
    ledger = c.string(c.required(priv, "ledger", ("privacy",), "[privacy]",
                                 'ledger = "census.ledger" (the durable ledger file)'),
                      ("privacy", "ledger"), "privacy.ledger")
    run_eps = c.library(check_epsilon, priv.get("run_epsilon", eps),
                        ("privacy", "run_epsilon"), "privacy.run_epsilon")
    if run_eps > eps * (1 + SHARE_TOLERANCE):
        raise c.fail(("privacy", "run_epsilon"),
                     f"privacy.run_epsilon = {run_eps:g} exceeds the total epsilon = {eps:g}")
    run_dlt = c.library(check_delta, priv.get("run_delta", dlt), ("privacy", "run_delta"),
                        "privacy.run_delta")
    if run_dlt > dlt * (1 + SHARE_TOLERANCE):
        raise c.fail(("privacy", "run_delta"),
                     f"privacy.run_delta = {run_dlt:g} exceeds the total delta = {dlt:g}")
    mech = c.choice(priv.get("mechanism", "auto"), ("privacy", "mechanism"),
                    "privacy.mechanism", MECHANISMS)

    neighbours, max_rows = neighbour_definition(c, priv)

    bounds = _bounds(c, data["bounds"])
    keys = _keys(c, data.get("keys", {}), ("keys",))
    missing = _missing(c, data.get("missing", {}), bounds)
    derived = derived_columns(c, data.get("with_columns", {}), bounds)
    readable = {**bounds, **{d.name: d.bounds for d in derived if d.bounds is not None}}
    queries = _queries(c, data["query"], readable, keys, mech)
    if run_dlt > 0 and not any(q.mechanism in DELTA_MECHANISMS and q.share is not None
                               for q in queries):
        raise c.fail(("privacy", "run_delta" if "run_delta" in priv else "delta"),
                     "delta > 0 but no query with a share uses the 'bounded' or 'auto' "
                     "mechanism (the only ones that spend delta; queries with target "
                     "accuracies spend none); set delta = 0")

    out = c.table(data["output"], ("output",), "[output]")
    c.known(out, ("output",), _OUTPUT_KEYS, "[output]")
    out_path = c.string(c.required(out, "path", ("output",), "[output]",
                                   'path = "release.parquet"'), ("output", "path"),
                        "output.path")
    overwrite = out.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise c.fail(("output", "overwrite"), f"output.overwrite must be true or false, got "
                     f"{overwrite!r}")
    return ReleaseSpec(
        source=source, text=text, input=inp, unit=unit, epsilon=eps, delta=dlt,
        ledger=(base_dir / ledger).resolve(), run_epsilon=run_eps, run_delta=run_dlt,
        mechanism=mech, bounds=bounds, keys=keys, missing=missing, queries=queries,
        output=(base_dir / out_path).resolve(), overwrite=overwrite, locator=loc,
        derived=derived, neighbours=neighbours, max_rows=max_rows,
    )

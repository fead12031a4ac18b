"""Release specs: a data steward's job in one TOML file, parsed and checked without any data.

:func:`load_spec` reads a spec (``dpframe release spec.toml``, format in
``docs/release-spec.md``) with the standard library's :mod:`tomllib` and checks every key and
value, returning a :class:`ReleaseSpec`. Nothing here opens the input data (not even its
schema; :mod:`dpframe.spec._plan` checks the spec against the schema, :mod:`dpframe.spec._run`
reads it).

Every error is a :class:`SpecError` naming the line of the spec it is about. :mod:`tomllib`
reports positions for syntax errors only, so :class:`_Locator` scans the text once and records
the line of every table header, key and array element (by its path, e.g.
``("query", 1, "filter", 0, "op")``); a semantic error about a path is reported at the line of
its longest recorded prefix (a missing key: the line of its table's header).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dpframe._validation import (
    check_column,
    check_count,
    check_delta,
    check_epsilon,
    check_names,
)
from dpframe.errors import DPFrameError, SpecError
from dpframe.mechanisms.quantiles import DEFAULT_MAX_CELLS
from dpframe.provenance._protect import check_key_list, validate_bounds, validate_missing
from dpframe.query.registry import StatisticArguments, spec_statistics
from dpframe.query.statistics import Query
from dpframe.release._request import MECHANISMS as RELEASE_MECHANISMS

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

ENGINES = ("polars", "duckdb", "spark", "dask")
FORMATS = ("parquet", "csv")
#: The statistics a spec names and the parameters each takes, as its builder does
#: (``dpf.mean(column)``, ``dpf.histogram(column, bins=B)``, ``dpf.value_counts(column,
#: keys=None)``, ``dpf.cov(columns)``, ...): the release spec's vocabulary is the registry's
#: (:func:`dpframe.query.registry.spec_statistics`), so a statistic registered there is a
#: word here too; built by :func:`library_query`.
SPEC_PARAMETERS: dict[str, tuple[str, ...]] = {e.name: e.parameters for e in spec_statistics()}
#: The statistics that take parameters besides one column (histogram, value counts,
#: proportions, cov, corr).
PARAMETERS: dict[str, tuple[str, ...]] = {
    k: ps for k, ps in SPEC_PARAMETERS.items() if ps not in ((), ("column",))}
KINDS = tuple(SPEC_PARAMETERS)
#: Each word's query from its parameters, as its builder builds it.
STATISTIC_BUILDERS: dict[str, Callable[[StatisticArguments], Query]] = {
    e.name: e.build for e in spec_statistics() if e.build is not None}
#: The library's mechanisms (:data:`dpframe.release._pipeline.MECHANISMS`). A spec's δ goes to the
# queries
#: whose mechanism can use it: ``"bounded"``, and ``"auto"`` (the default), which may choose it.
MECHANISMS = RELEASE_MECHANISMS
#: The mechanisms a query's share of δ goes to.
DELTA_MECHANISMS = ("bounded", "auto")
#: Filter operators: comparisons, membership, a closed range and missing-value tests.
FILTER_OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "between", "is null",
              "is not null")
_ORDER_OPS = ("<", "<=", ">", ">=", "between")
_NO_VALUE_OPS = ("is null", "is not null")
#: Shares of ε must add up to 1 within this (they are written as decimals).
SHARE_TOLERANCE = 1e-9

Path_ = tuple[str | int, ...]

_TOP_KEYS = ("version", "input", "privacy", "bounds", "keys", "missing", "query", "output")
_INPUT_KEYS = ("path", "format", "engine", "columns")
#: Column types a CSV input declares (``[input.columns]``); a value that does not parse as its
#: column's type is read as missing, in every engine.
CSV_TYPES = ("float64", "int64", "string", "bool", "date")
_PRIVACY_KEYS = ("unit", "epsilon", "delta", "ledger", "run_epsilon", "run_delta", "mechanism")
_QUERY_KEYS = ("name", "share", "accuracy", "level", "kind", "column", "columns", "bins",
               "statistics", "group_by", "keys", "filter", "mechanism")
_STAT_KEYS = ("kind", "column", "columns", "bins", "keys", "weight", "accuracy")
#: the keys of a statistic other than its kind, weight and accuracy
_PARAM_KEYS = ("column", "columns", "bins", "keys")
#: Default probability that a released value is within its target accuracy of the truth.
DEFAULT_LEVEL = 0.95
_COND_KEYS = ("column", "op", "value")
_OUTPUT_KEYS = ("path", "overwrite")
_SHORTHAND = re.compile(
    rf"^\s*({'|'.join(map(re.escape, KINDS))})\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


# -- where is a key? -------------------------------------------------------------------------
class _Locator:
    """Line numbers of every header, key and array element of a TOML text, by path.

    A lenient scanner: :mod:`tomllib` has already accepted the text, so it only needs to
    follow TOML's structure (headers, dotted keys, strings, arrays, inline tables)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.lines: dict[Path_, int] = {}
        self._arrays: dict[Path_, int] = {}  # array-of-tables path -> current index
        self._scan()

    def line_of(self, path: Path_) -> int | None:
        """The line of ``path`` or of its longest recorded prefix (None for the root)."""
        for k in range(len(path), 0, -1):
            found = self.lines.get(tuple(path[:k]))
            if found is not None:
                return found
        return None

    # scanning
    def _peek(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def _skip(self, newlines: bool) -> None:
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\n" and newlines:
                self.line += 1
                self.i += 1
            elif c == "#":
                while self.i < len(t) and t[self.i] != "\n":
                    self.i += 1
            else:
                return

    def _to_eol(self) -> None:
        while self.i < len(self.text) and self.text[self.i] != "\n":
            self.i += 1

    def _string(self) -> str:
        t = self.text
        for quote in ('"""', "'''"):
            if self._peek(quote):
                end = t.find(quote, self.i + 3)
                end = len(t) if end < 0 else end
                while t.startswith(quote[0], end + 3) and end + 3 < len(t):
                    end += 1  # up to two quotes may end a multi-line string's body
                body = t[self.i + 3:end]
                self.line += body.count("\n")
                self.i = end + 3
                return body
        quote = t[self.i]
        j = self.i + 1
        out = []
        while j < len(t) and t[j] != quote:
            if quote == '"' and t[j] == "\\" and j + 1 < len(t):
                out.append(t[j:j + 2])
                j += 2
                continue
            out.append(t[j])
            j += 1
        self.i = j + 1
        return "".join(out)

    def _key(self, stop: str) -> list[str]:
        """A (dotted) key, up to ``stop`` (``=`` or ``]``)."""
        parts: list[str] = []
        current = ""
        t = self.text
        while self.i < len(t) and t[self.i] not in stop and t[self.i] != "\n":
            c = t[self.i]
            if c in "\"'":
                current += self._string()
                continue
            if c == ".":
                parts.append(current.strip())
                current = ""
            else:
                current += c
            self.i += 1
        parts.append(current.strip())
        return parts

    def _resolve(self, keys: Sequence[str]) -> Path_:
        out: Path_ = ()
        for k in keys:
            out = (*out, k)
            if out in self._arrays:
                out = (*out, self._arrays[out])
        return out

    def _scan(self) -> None:
        t = self.text
        table: Path_ = ()
        while True:
            self._skip(newlines=True)
            if self.i >= len(t):
                return
            if self._peek("[["):
                self.i += 2
                keys = self._key("]")
                parent = self._resolve(keys[:-1])
                base = (*parent, keys[-1])
                index = self._arrays.get(base, -1) + 1
                self._arrays[base] = index
                table = (*base, index)
                self.lines.setdefault(base, self.line)
                self.lines[table] = self.line
                self._to_eol()
            elif self._peek("["):
                self.i += 1
                table = self._resolve(self._key("]"))
                self.lines.setdefault(table, self.line)
                self._to_eol()
            else:
                path = (*table, *self._key("="))
                self.lines.setdefault(path, self.line)
                self.i += 1  # '='
                self._value(path)
                self._to_eol()

    def _value(self, path: Path_) -> None:
        t = self.text
        self._skip(newlines=False)
        if self.i >= len(t):
            return
        c = t[self.i]
        if c in "\"'":
            self._string()
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self._skip(newlines=True)
                if self.i >= len(t) or t[self.i] == "]":
                    self.i += 1
                    return
                self.lines.setdefault((*path, index), self.line)
                self._value((*path, index))
                self._skip(newlines=True)
                if self.i < len(t) and t[self.i] == ",":
                    self.i += 1
                    index += 1
        elif c == "{":
            self.i += 1
            while True:
                self._skip(newlines=True)
                if self.i >= len(t) or t[self.i] == "}":
                    self.i += 1
                    return
                sub = (*path, *self._key("="))
                self.lines.setdefault(sub, self.line)
                self.i += 1
                self._value(sub)
                self._skip(newlines=True)
                if self.i < len(t) and t[self.i] == ",":
                    self.i += 1
        else:
            while self.i < len(t) and t[self.i] not in ",]}\n#":
                self.i += 1


# -- the spec --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One filter condition: ``column op value``, or (``any_of``) the disjunction of several
    conditions lists (``{any = [[...], [...]]}`` is not needed: each element of ``any`` is one
    condition). ``path``: where it is in the spec."""

    column: str | None
    op: str | None
    value: Any
    any_of: tuple[Condition, ...] = ()
    path: Path_ = ()


@dataclass(frozen=True)
class StatisticSpec:
    """One statistic of a query: ``kind`` (one of :data:`KINDS`) of ``column`` (or of
    ``columns``: cov, corr), with ``bins`` (histogram) or public ``keys`` (value_counts,
    proportions; None: the column's keys under ``[keys]``), with a relative ``weight`` of the
    query's ε, or (``target``) the half-width it must reach at its query's ``level``, which
    sets its ε (:mod:`dpframe.spec._plan`)."""

    name: str
    kind: str
    column: str | None
    weight: float
    path: Path_ = ()
    target: float | None = None
    bins: int | None = None
    keys: tuple[Any, ...] | None = None
    columns: tuple[str, ...] = ()

    def describe(self) -> str:
        """The statistic as a spec writes it, e.g. ``mean(income)``,
        ``histogram(age, bins=10)``, ``cov(age, income)``."""
        if self.columns:
            return f"{self.kind}({', '.join(self.columns)})"
        if self.bins is not None:
            return f"{self.kind}({self.column}, bins={self.bins})"
        if self.keys is not None:
            return f"{self.kind}({self.column}, {len(self.keys)} keys)"
        return f"{self.kind}({self.column or ''})"

    def columns_named(self) -> tuple[str, ...]:
        """Every column the statistic names."""
        return (self.column,) if self.column is not None else self.columns


def library_query(stat: StatisticSpec) -> Query:
    """The library's query object of a statistic, built as its builder builds it
    (``dpf.mean(column)``, ``dpf.histogram(column, bins=...)``, ``dpf.cov(columns)``, ...;
    the builder checks its arguments, raising :class:`~dpframe.errors.ParameterError`)."""
    build = STATISTIC_BUILDERS[stat.kind]
    return build(StatisticArguments(stat.column, stat.columns, stat.bins, stat.keys))


@dataclass(frozen=True)
class QuerySpec:
    """One ``[[query]]``: one release (one pass over the data), its ``share`` of the run's ε
    and δ — or, with ``share`` None, target accuracies on its statistics (each within its
    ``target`` of the truth with probability ≥ ``level``), which set its ε — and optional
    ``group_by`` (with public ``keys``) and ``filter``."""

    name: str
    share: float | None
    statistics: tuple[StatisticSpec, ...]
    group_by: str | None
    keys: tuple[Any, ...] | None
    filter: tuple[Condition, ...]
    mechanism: str
    path: Path_ = ()
    level: float = DEFAULT_LEVEL

    @property
    def targeted(self) -> bool:
        """The query's ε comes from target accuracies, not from a share."""
        return self.share is None

    def columns_read(self) -> tuple[str, ...]:
        """The columns the statistics name."""
        return tuple(dict.fromkeys(c for s in self.statistics for c in s.columns_named()))


@dataclass(frozen=True)
class InputSpec:
    """Where the data is: ``path`` (a file or a glob, absolute), its ``format``, the
    ``engine`` that reads it lazily and, for CSV, the declared ``columns`` types (column ->
    one of :data:`CSV_TYPES`; undeclared columns are strings)."""

    path: str
    format: str
    engine: str
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReleaseSpec:
    """A checked release spec. Paths are absolute (relative ones are resolved against the
    spec file's folder). ``epsilon``/``delta``: the data set's total budget (the ledger's);
    ``run_epsilon``/``run_delta``: what one run of this spec spends, split by the queries'
    shares."""

    source: str
    text: str
    input: InputSpec
    unit: str
    epsilon: float
    delta: float
    ledger: Path
    run_epsilon: float
    run_delta: float
    mechanism: str
    bounds: dict[str, tuple[float, float]]
    keys: dict[str, tuple[Any, ...]]
    missing: dict[str, str | float]
    queries: tuple[QuerySpec, ...]
    output: Path
    overwrite: bool
    locator: _Locator = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def line_of(self, path: Path_) -> int | None:
        """The spec line of a key path (see :class:`_Locator`)."""
        return self.locator.line_of(path) if self.locator is not None else None

    def error(self, path: Path_, message: str) -> SpecError:
        """A :class:`SpecError` about ``path``, naming its line."""
        return SpecError(message, source=self.source, line=self.line_of(path))

    def query_epsilon(self, q: QuerySpec, targeted_epsilon: float = 0.0) -> float:
        """The ε of a query with a share: its share of what the run's ε leaves after the
        ``targeted_epsilon`` the queries with target accuracies need (:mod:`dpframe.spec._plan`
        computes those; they depend on the public n)."""
        assert q.share is not None, "a query with target accuracies gets its ε from the plan"
        return (self.run_epsilon - targeted_epsilon) * q.share

    def query_delta(self, q: QuerySpec) -> float:
        """The δ of one query's release: its share of the run's δ when its mechanism is
        ``"bounded"`` or ``"auto"`` (which may choose bounded), else 0 (that part of δ is left
        unspent).
        Queries with target accuracies spend no δ (their ε is found for δ = 0)."""
        if q.share is None:
            return 0.0
        return self.run_delta * q.share if q.mechanism in DELTA_MECHANISMS else 0.0


class _Checker:
    """Reads values out of the parsed TOML, raising :class:`SpecError` with lines."""

    def __init__(self, locator: _Locator, source: str) -> None:
        self.locator = locator
        self.source = source

    def fail(self, path: Path_, message: str) -> SpecError:
        return SpecError(message, source=self.source, line=self.locator.line_of(path))

    def table(self, data: Any, path: Path_, what: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(path, f"{what} must be a table, got {_tname(data)}")
        return data

    def known(self, data: Mapping[str, Any], path: Path_, allowed: Sequence[str],
              what: str) -> None:
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.fail((*path, key), f"unknown key {key!r} in {what}{hint}; "
                                f"allowed: {', '.join(allowed)}")

    def required(self, data: Mapping[str, Any], key: str, path: Path_, what: str,
                 example: str) -> Any:
        if key not in data:
            raise self.fail(path, f"{what} needs {key!r}, e.g. {example}")
        return data[key]

    def string(self, value: Any, path: Path_, what: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, f"{what} must be a non-empty string, got {value!r}")
        return value

    def choice(self, value: Any, path: Path_, what: str, options: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in options:
            raise self.fail(path, f"{what} must be one of {', '.join(map(repr, options))}; "
                            f"got {value!r}")
        return value

    def number(self, value: Any, path: Path_, what: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"{what} must be a number, got {value!r}")
        x = float(value)
        if not math.isfinite(x):
            raise self.fail(path, f"{what} must be finite, got {value!r}")
        return x

    def positive(self, value: Any, path: Path_, what: str) -> float:
        x = self.number(value, path, what)
        if x <= 0:
            raise self.fail(path, f"{what} must be > 0, got {value!r}")
        return x

    def library(self, check: Callable[[Any], Any], value: Any, path: Path_, what: str) -> Any:
        """``check(value)``: one of the library's own checks (:mod:`dpframe._validation`,
        :mod:`dpframe.provenance._protect`), its refusal naming ``what`` and the line of
        ``path``."""
        try:
            return check(value)
        except DPFrameError as exc:
            raise self.fail(path, f"{what}: {exc}") from None


def _tname(value: Any) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a float"}.get(type(value), type(value).__name__)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        raise SpecError(f"TOML syntax error: {msg}", source=source, line=line) from None
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

    bounds = _bounds(c, data["bounds"])
    keys = _keys(c, data.get("keys", {}), ("keys",))
    missing = _missing(c, data.get("missing", {}), bounds)
    queries = _queries(c, data["query"], bounds, keys, mech)
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
    )


def _input(c: _Checker, raw: Any, base: Path) -> InputSpec:
    t = c.table(raw, ("input",), "[input]")
    c.known(t, ("input",), _INPUT_KEYS, "[input]")
    path = c.string(c.required(t, "path", ("input",), "[input]", 'path = "data/*.parquet"'),
                    ("input", "path"), "input.path")
    if "format" in t:
        fmt = c.choice(t["format"], ("input", "format"), "input.format", FORMATS)
    else:
        suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        if suffix not in FORMATS:
            raise c.fail(("input", "path"), f"cannot tell the format of {path!r} from its name; "
                         'add format = "parquet" or format = "csv"')
        fmt = suffix
    engine = c.choice(t.get("engine", "polars"), ("input", "engine"), "input.engine", ENGINES)
    columns: tuple[tuple[str, str], ...] = ()
    if "columns" in t:
        if fmt != "csv":
            raise c.fail(("input", "columns"), "input.columns declares the types of a CSV "
                         "input; Parquet files carry their own")
        table = c.table(t["columns"], ("input", "columns"), "[input.columns]")
        columns = tuple((str(name), c.choice(kind, ("input", "columns", name),
                                             f"input.columns.{name}", CSV_TYPES))
                        for name, kind in table.items())
    elif fmt == "csv":
        raise c.fail(("input", "path"), "a CSV input declares its column types, e.g. "
                     '[input.columns] age = "float64", region = "string" (one of '
                     f"{', '.join(CSV_TYPES)}); a value that does not parse is then missing. "
                     "Types inferred from a sample of the rows would make a later value fail "
                     "a release")
    return InputSpec(str((base / path).absolute()), fmt, engine, columns)


def _bounds(c: _Checker, raw: Any) -> dict[str, tuple[float, float]]:
    """``[bounds]``, each checked by :func:`dpframe.provenance._protect.validate_bounds`."""
    t = c.table(raw, ("bounds",), "[bounds]")
    if not t:
        raise c.fail(("bounds",), "[bounds] is empty; declare public bounds, e.g. age = [0, 120]")
    return {col: c.library(functools.partial(_one, validate_bounds, col), pair,
                           ("bounds", col), f"bounds.{col}") for col, pair in t.items()}


def _one(check: Callable[..., Mapping[str, Any]], column: str, value: Any,
         extra: tuple[Any, ...] = ()) -> Any:
    """``check({column: value}, *extra)[column]``: a library check of one column's entry."""
    return check({column: value}, *extra)[column]


def _key_list(c: _Checker, raw: Any, path: Path_, column: str) -> tuple[Any, ...]:
    """Public keys: :func:`dpframe.provenance._protect.check_key_list`, and TOML values of one
    kind."""
    raw = c.library(functools.partial(check_key_list, column), raw, path, f"keys of {column!r}")
    for i, k in enumerate(raw):
        if not isinstance(k, str | int | float | bool) or (isinstance(k, float)
                                                          and not math.isfinite(k)):
            raise c.fail((*path, i), f"key {k!r} of {column!r} must be a string or a finite "
                         "number")
    kinds = {str if isinstance(k, str) else bool if isinstance(k, bool) else float for k in raw}
    if len(kinds) > 1:
        raise c.fail(path, f"keys of {column!r} mix types: {raw!r}")
    return tuple(raw)


def _keys(c: _Checker, raw: Any, path: Path_) -> dict[str, tuple[Any, ...]]:
    t = c.table(raw, path, "[keys]")
    return {col: _key_list(c, keys, (*path, col), col) for col, keys in t.items()}


def _missing(c: _Checker, raw: Any, bounds: Mapping[str, tuple[float, float]]
             ) -> dict[str, str | float]:
    """``[missing]``, each rule checked by :func:`dpframe.provenance._protect.validate_missing`."""
    t = c.table(raw, ("missing",), "[missing]")
    return {col: c.library(functools.partial(_one, validate_missing, col, extra=(bounds,)), rule,
                           ("missing", col), f"missing.{col}") for col, rule in t.items()}


def _statistic(c: _Checker, name: str, raw: Any, path: Path_,
               bounds: Mapping[str, tuple[float, float]],
               declared: Mapping[str, tuple[Any, ...]]) -> StatisticSpec:
    """One statistic: ``"mean(income)"``, ``"cov(age, income)"``, or a table
    ``{ kind = ..., column = ..., bins = ..., keys = [...], columns = [...], weight = ... }``
    (``declared``: the ``[keys]`` table, the default keys of value_counts/proportions)."""
    given: dict[str, Any] = {}
    if isinstance(raw, str):
        m = _SHORTHAND.match(raw)
        if m is None:
            kind_word = raw.split("(")[0].strip()
            close = difflib.get_close_matches(kind_word, KINDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise c.fail(path, f"unknown query kind {raw!r} for {name!r}{hint}; write "
                         '"count", "mean(income)", ... or { kind = "mean", column = "income" }')
        kind, arg = m.group(1), (m.group(2) or None)
        if arg is not None and "columns" in PARAMETERS.get(kind, ()):
            given["columns"] = [a.strip() for a in arg.split(",")]
        elif arg is not None:
            given["column"] = arg
        weight = 1.0
        target: float | None = None
    else:
        t = c.table(raw, path, f"statistic {name!r}")
        c.known(t, path, _STAT_KEYS, f"statistic {name!r}")
        kind_raw = c.required(t, "kind", path, f"statistic {name!r}", 'kind = "mean"')
        target = None
        if not isinstance(kind_raw, str) or kind_raw not in KINDS:
            close = difflib.get_close_matches(str(kind_raw), KINDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise c.fail((*path, "kind"), f"unknown query kind {kind_raw!r}{hint}; choose one "
                         f"of {', '.join(KINDS)}")
        kind = kind_raw
        given = {k: t[k] for k in _PARAM_KEYS if k in t}
        weight = c.positive(t.get("weight", 1.0), (*path, "weight"), f"weight of {name!r}")
        if "accuracy" in t:
            if "weight" in t:
                raise c.fail((*path, "weight"), f"{name!r}: give a weight (its part of the "
                             "query's share) or an accuracy (which sets its ε), not both")
            target = c.positive(t["accuracy"], (*path, "accuracy"), f"accuracy of {name!r}")
    stat = _parameters(c, StatisticSpec(name, kind, None, weight, path, target), given,
                       isinstance(raw, str), bounds, declared)
    c.library(lambda _: library_query(stat), None, path, f"statistic {name!r}")  # the builder's
    return stat


#: how each statistic with parameters is written, for messages
_EXAMPLES = {
    "histogram": '{ kind = "histogram", column = "age", bins = 10 }',
    "value_counts": '{ kind = "value_counts", column = "region", keys = ["a", "b"] }',
    "proportions": '{ kind = "proportions", column = "region", keys = ["a", "b"] }',
    "cov": '"cov(age, income)" or { kind = "cov", columns = ["age", "income"] }',
    "corr": '"corr(age, income)" or { kind = "corr", columns = ["age", "income"] }',
}


def _parameters(c: _Checker, stat: StatisticSpec, given: Mapping[str, Any], shorthand: bool,
                bounds: Mapping[str, tuple[float, float]],
                declared: Mapping[str, tuple[Any, ...]]) -> StatisticSpec:
    """``stat`` with the parameters its kind takes (:data:`PARAMETERS`; a column for the
    statistics of one column), each checked by the library's check: bins by
    :func:`dpframe._validation.check_count`, columns by ``check_names``/``check_column``,
    keys by :func:`dpframe.provenance._protect.check_key_list`. A column a statistic reads values of
    needs bounds; a key column needs public keys."""
    name, kind, path = stat.name, stat.kind, stat.path

    def at(*key: str | int) -> Path_:
        return path if shorthand else (*path, *key)

    allowed = SPEC_PARAMETERS[kind]
    keyed = "keys" in allowed  # a key column: public keys, no bounds
    for key in given:
        if key not in allowed:
            if key == "column" and not allowed:
                raise c.fail(at(key), f"{name!r}: {kind} counts rows and takes no column")
            takes = [k for k, ps in PARAMETERS.items() if key in ps]
            raise c.fail(at(key), f"{name!r}: {kind} takes no {key}" + (
                f" ({key} goes with {', '.join(takes)})" if takes else "")
                + (f"; it takes {', '.join(allowed)}" if allowed else ""))
    for key in allowed:
        if key not in given and key != "keys":
            example = _EXAMPLES.get(kind, f'{{ kind = "{kind}", column = "income" }}')
            raise c.fail(path, f"{name!r}: {kind} needs "
                         f"{'a column' if key == 'column' else key}, e.g. {example}")
    column = None
    if "column" in given:
        column = c.string(given["column"], at("column"), f"column of {name!r}")
        if not keyed:
            _need_bounds(c, name, column, at("column"), bounds)
    columns: tuple[str, ...] = ()
    if "columns" in given:
        names = c.library(functools.partial(check_names, "columns"), given["columns"],
                          at("columns"), f"columns of {name!r}")
        for i, col in enumerate(names):
            c.library(functools.partial(check_column, name="columns"), col, at("columns", i),
                      f"columns of {name!r}")
            _need_bounds(c, name, col, at("columns", i), bounds)
        columns = tuple(names)
    bins = None
    if "bins" in given:
        bins = c.library(functools.partial(check_count, "bins", minimum=1,
                                           maximum=DEFAULT_MAX_CELLS),
                         given["bins"], at("bins"), f"bins of {name!r}")
    keys = None
    if "keys" in given:
        assert column is not None
        keys = _key_list(c, given["keys"], at("keys"), column)
    elif keyed and column not in declared:
        raise c.fail(at("column"), f"{name!r}: {kind} of {column!r} needs public keys: "
                     f"declare them under [keys] ({column} = [...]) or give the statistic "
                     f"keys = [...], e.g. {_EXAMPLES[kind]}; keys are never read from the data")
    return replace(stat, column=column, bins=bins, keys=keys, columns=columns)


def _need_bounds(c: _Checker, name: str, column: str, path: Path_,
                 bounds: Mapping[str, tuple[float, float]]) -> None:
    if column not in bounds:
        raise c.fail(path, f"{name!r}: column {column!r} has no bounds; declare public "
                     f"bounds for it under [bounds] ({column} = [lower, upper]); bounds are "
                     "never read from the data")


def _condition(c: _Checker, raw: Any, path: Path_) -> Condition:
    t = c.table(raw, path, "a filter condition")
    if "any" in t:
        if set(t) != {"any"}:
            raise c.fail(path, "a condition with 'any' takes nothing else")
        items = t["any"]
        if not isinstance(items, list) or not items:
            raise c.fail((*path, "any"), "'any' must be a non-empty array of conditions")
        return Condition(None, None, None, tuple(_condition(c, x, (*path, "any", i))
                                                 for i, x in enumerate(items)), path)
    c.known(t, path, (*_COND_KEYS, "any"), "a filter condition")
    column = c.string(c.required(t, "column", path, "a filter condition", 'column = "age"'),
                      (*path, "column"), "filter column")
    op = t.get("op")
    if op not in FILTER_OPS:
        raise c.fail((*path, "op") if "op" in t else path,
                     f"filter op must be one of {', '.join(map(repr, FILTER_OPS))}; got {op!r}")
    vpath: Path_ = (*path, "value") if "value" in t else path
    if op in _NO_VALUE_OPS:
        if "value" in t:
            raise c.fail(vpath, f"op {op!r} takes no value")
        return Condition(column, op, None, (), path)
    if "value" not in t:
        raise c.fail(path, f"op {op!r} needs a value")
    value = t["value"]
    if op in ("in", "not in"):
        if not isinstance(value, list) or not value or not all(map(_is_scalar, value)):
            raise c.fail(vpath, f"op {op!r} needs a non-empty array of values, got {value!r}")
    elif op == "between":
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool)
                           for v in value) or not value[0] <= value[1]):
            raise c.fail(vpath, f"op 'between' needs [lower, upper] numbers, got {value!r}")
    elif not _is_scalar(value):
        raise c.fail(vpath, f"op {op!r} needs a single value, got {value!r}")
    elif op in _ORDER_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise c.fail(vpath, f"op {op!r} compares numbers, got {value!r}")
    return Condition(column, op, value, (), path)


def _queries(c: _Checker, raw: Any, bounds: Mapping[str, tuple[float, float]],
             keys: Mapping[str, tuple[Any, ...]], default_mech: str) -> tuple[QuerySpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise c.fail(("query",), "write the queries as [[query]] tables")
    out: list[QuerySpec] = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        path: Path_ = ("query", i)
        t = c.table(item, path, "[[query]]")
        c.known(t, path, _QUERY_KEYS, "[[query]]")
        name = c.string(c.required(t, "name", path, "[[query]]", 'name = "overall"'),
                        (*path, "name"), "query name")
        if name in names:
            raise c.fail((*path, "name"), f"query name {name!r} is used twice")
        names.add(name)
        share: float | None = None
        if "share" in t:
            share = c.positive(t["share"], (*path, "share"), f"share of {name!r}")
            if share > 1:
                raise c.fail((*path, "share"), f"share of {name!r} is {share:g}; shares are "
                             "parts of the run's epsilon and add up to 1")
        if "statistics" in t and any(k in t for k in ("kind", "column", "columns", "bins")):
            raise c.fail(path, f"query {name!r}: give either kind/column (one statistic) or "
                         "[query.statistics] (several), not both")
        if "statistics" in t:
            st = c.table(t["statistics"], (*path, "statistics"), "[query.statistics]")
            if not st:
                raise c.fail((*path, "statistics"), f"query {name!r} has no statistics")
            stats = tuple(_statistic(c, sname, sraw, (*path, "statistics", sname), bounds, keys)
                          for sname, sraw in st.items())
        elif "kind" in t:
            one = {k: t[k] for k in ("kind", "column", "columns", "bins") if k in t}
            stats = (_statistic(c, name, one, path, bounds, keys),)
            if "accuracy" in t:
                target = c.positive(t["accuracy"], (*path, "accuracy"), f"accuracy of {name!r}")
                stats = (replace(stats[0], path=(*path, "accuracy"), target=target),)
        else:
            raise c.fail(path, f'query {name!r} needs kind = "count" / "mean" / ... (with '
                         "column = ...) or a [query.statistics] table")
        group_by = t.get("group_by")
        qkeys: tuple[Any, ...] | None = None
        if group_by is not None:
            group_by = c.string(group_by, (*path, "group_by"), "group_by")
            if "keys" in t:
                qkeys = _key_list(c, t["keys"], (*path, "keys"), group_by)
            elif group_by in keys:
                qkeys = keys[group_by]
            else:
                raise c.fail((*path, "group_by"), f"group_by {group_by!r} has no public keys: "
                             f"declare them under [keys] ({group_by} = [...]) or in the query "
                             "(keys = [...]); keys are never read from the data")
            if any(s.name == group_by for s in stats):
                raise c.fail((*path, "group_by"), f"a statistic is named like the group_by "
                             f"column {group_by!r}; rename it")
        elif "keys" in t:
            raise c.fail((*path, "keys"), "keys without group_by (a query's keys are its "
                         "group_by's; the keys of a value_counts or proportions statistic go "
                         "under [keys] or in its own table, e.g. "
                         f"{_EXAMPLES['value_counts']})")
        flt: tuple[Condition, ...] = ()
        if "filter" in t:
            raw_f = t["filter"]
            if isinstance(raw_f, dict):
                raw_f = [raw_f]
            if not isinstance(raw_f, list) or not raw_f:
                raise c.fail((*path, "filter"), "filter must be an array of conditions, e.g. "
                             'filter = [{ column = "age", op = ">=", value = 18 }]')
            flt = tuple(_condition(c, x, (*path, "filter", j)) for j, x in enumerate(raw_f))
        mech = c.choice(t.get("mechanism", default_mech), (*path, "mechanism"),
                        f"mechanism of {name!r}", MECHANISMS)
        level = _budget_mode(c, t, path, name, share, stats)
        if share is None and mech == "auto":  # targets invert one mechanism; auto picks per ε
            mech = "bounded"
        out.append(QuerySpec(name, share, stats, group_by, qkeys, flt, mech, path, level))
    shared = [(i, q) for i, q in enumerate(out) if q.share is not None]
    total = math.fsum(q.share for _, q in shared if q.share is not None)
    if shared and abs(total - 1.0) > SHARE_TOLERANCE:
        listing = ", ".join(f"{q.name} {q.share:g}" for _, q in shared)
        rest = " after the queries with target accuracies" if len(shared) < len(out) else ""
        raise c.fail(("query", shared[-1][0], "share"),
                     f"the queries' shares add up to {total:.12g}, not 1 ({listing}); shares "
                     f"split the run's epsilon (privacy.run_epsilon){rest} and must add up "
                     "to 1")
    return tuple(out)


def _budget_mode(c: _Checker, t: Mapping[str, Any], path: Path_, name: str,
                 share: float | None, stats: tuple[StatisticSpec, ...]) -> float:
    """Check that a query has a share or target accuracies (not both, not neither); return
    its level (the probability of being within the targets)."""
    targets = [s.target is not None for s in stats]
    if share is not None:
        if any(targets) or "accuracy" in t:
            where = (*path, "accuracy") if "accuracy" in t else next(
                s.path for s in stats if s.target is not None)
            raise c.fail(where, f"query {name!r}: give a share of the run's epsilon or target "
                         "accuracies (which set the epsilon they need), not both")
        if "level" in t:
            raise c.fail((*path, "level"), f"query {name!r}: level goes with accuracy targets")
        return DEFAULT_LEVEL
    if "accuracy" in t and "statistics" in t:
        raise c.fail((*path, "accuracy"), f"query {name!r} has several statistics: give each "
                     'its own target, e.g. mean_income = { kind = "mean", column = "income", '
                     "accuracy = 500 }")
    if not any(targets):
        raise c.fail(path, f"query {name!r} needs share = 0.25 (its part of the run's "
                     "epsilon) or accuracy = ... (a target half-width that sets its epsilon)")
    if not all(targets):
        missing = next(s for s in stats if s.target is None)
        raise c.fail(missing.path, f"query {name!r} has target accuracies, so every statistic "
                     f"needs one; {missing.name!r} has none")
    level = c.number(t.get("level", DEFAULT_LEVEL), (*path, "level"), f"level of {name!r}")
    if not 0 < level < 1:
        raise c.fail((*path, "level"), f"level of {name!r} must be in (0, 1), e.g. 0.95; got "
                     f"{t.get('level')!r}")
    return level

"""The ``[input]`` table of a release spec: where the data is, its format, the engine that reads
it and, for CSV, its declared column types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpframe.spec._model import InputSpec
from dpframe.spec._toml import _Checker

ENGINES = ("polars", "duckdb", "spark", "dask")
FORMATS = ("parquet", "csv")
_INPUT_KEYS = ("path", "format", "engine", "columns")
#: Column types a CSV input declares (``[input.columns]``); a value that does not parse as its
#: column's type is read as missing, in every engine.
CSV_TYPES = ("float64", "int64", "string", "bool", "date")


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

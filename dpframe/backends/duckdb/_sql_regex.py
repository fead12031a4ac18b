"""DuckDB row-wise SQL: regular expressions.

Regular expressions run on RE2: a pattern is accepted only if RE2 compiles it (tried on a
throwaway connection) and it uses none of the classes RE2 reads as ASCII and Polars as Unicode
(``\\d \\w \\s \\b``); Polars' replacement syntax (``$1``, ``${name}``) is rewritten for RE2.
"""

from __future__ import annotations

import functools
import re

from dpframe.backends.duckdb._sql_types import _polars, _RefusalError

#: Escapes whose meaning differs between Polars' regex engine (Unicode classes) and RE2
#: (ASCII classes).
_UNICODE_CLASSES = frozenset("dDsSwWbB")


def _check_regex(pattern: str) -> None:
    """Refuse a pattern RE2 cannot compile or reads differently from Polars."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] in _UNICODE_CLASSES:
                raise _RefusalError(
                    f"the regular expression {pattern!r} uses \\{pattern[i + 1]}, which "
                    "DuckDB (RE2) reads as an ASCII class and Polars as a Unicode class",
                    "spell the class out ([0-9], [A-Za-z0-9_], [ \\t\\n], ...)")
            i += 2
            continue
        i += 1
    if not _re2_compiles(pattern):
        raise _RefusalError(f"the regular expression {pattern!r} (DuckDB's RE2 engine does not "
                            "compile it)", "rewrite it in the syntax RE2 and Polars share, or pass "
                            "literal=True")


@functools.lru_cache(maxsize=256)
def _re2_compiles(pattern: str) -> bool:
    """Whether RE2 compiles ``pattern``: tried on a throwaway connection, on no data."""
    import duckdb

    connection = duckdb.connect()
    try:
        connection.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except Exception:
        return False
    finally:
        connection.close()
    return True


def _re2_quote(text: str) -> str:
    """A regular expression matching ``text`` literally (RE2 syntax)."""
    out = []
    for ch in text:
        if ch == "\x00":
            out.append("\\x00")
        elif ord(ch) < 128 and not ch.isalnum() and ch != "_":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _regex_groups(pattern: str) -> tuple[str, ...]:
    """The capture groups of ``pattern`` as Polars numbers and names them (one entry per
    group, its name or its number)."""
    pl = _polars()
    fields = pl.Series([""], dtype=pl.String).str.extract_groups(pattern).struct.fields
    return tuple(fields)


_GROUP_NAME = re.compile(r"[_0-9A-Za-z]+")


def _rewrite(pattern: str, value: str) -> str:
    """A Polars (Rust ``regex``) replacement string as an RE2 rewrite string: ``$n``,
    ``${n}``, ``$name`` and ``${name}`` become ``\\n``; ``$$`` is a dollar; a group that does
    not exist is empty (as in Polars); backslashes are escaped."""
    groups = _regex_groups(pattern)
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch != "$":
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
            continue
        if value.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if value.startswith("${", i):
            end = value.find("}", i + 2)
            name = value[i + 2:end] if end >= 0 else ""
            if end < 0 or not name or not _GROUP_NAME.fullmatch(name):
                out.append("$")
                i += 1
                continue
            i = end + 1
        else:
            match = _GROUP_NAME.match(value, i + 1)
            if match is None:
                out.append("$")
                i += 1
                continue
            name = match.group(0)
            i = match.end()
        index = int(name) if name.isdigit() else (
            groups.index(name) + 1 if name in groups else None)
        if index is None or index > len(groups):
            continue  # a group that does not exist is replaced by nothing
        if index > 9:
            raise _RefusalError(f"the replacement {value!r} refers to group {index} (RE2 "
                                "rewrites reach groups 0-9 only)", "use at most nine groups")
        out.append(f"\\{index}")
    return "".join(out)

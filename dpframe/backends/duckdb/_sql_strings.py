"""DuckDB row-wise SQL: string functions.

String functions count characters (code points) and report byte offsets where Polars does;
their regular expressions are checked and rewritten by :mod:`._sql_regex`.
"""

from __future__ import annotations

from typing import Any

from dpframe.backends.duckdb._sql_compiler import Handler, _Compiler
from dpframe.backends.duckdb._sql_numeric import _lit_value, _one_type
from dpframe.backends.duckdb._sql_regex import _check_regex, _re2_quote, _rewrite
from dpframe.backends.duckdb._sql_types import (
    _WHITESPACE,
    _dtype,
    _duck,
    _kind,
    _null,
    _RefusalError,
    _signed,
    _text,
)
from dpframe.rowwise.nodes import Call


def _subject(c: _Compiler, node: Call) -> str:
    return c.operand(node.args[0], _dtype("String"))


def _string_fn(template: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return template.format(_subject(c, node))
    return handler


def _text_arg(c: _Compiler, node: Call, i: int) -> str | None:
    value = _lit_value(node, i)
    return None if value is None else str(value)


def _contains(c: _Compiler, node: Call) -> str:
    pattern = _text_arg(c, node, 1)
    s = _subject(c, node)
    if pattern is None:
        return "CAST(NULL AS BOOLEAN)"
    if bool(node.params[0]):
        return f"contains({s}, {_text(pattern)})"
    _check_regex(pattern)
    return f"regexp_matches({s}, {_text(pattern)})"


def _starts_ends(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        affix = _text_arg(c, node, 1)
        if affix is None:
            return "CAST(NULL AS BOOLEAN)"
        return f"{fn}({_subject(c, node)}, {_text(affix)})"
    return handler


def _length(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return f"TRY_CAST({fn}({_subject(c, node)}) AS {_duck(c.t(node))})"
    return handler


#: DuckDB's ``substring``/``left`` accept positions and lengths up to 2^32 − 1 and raise
#: beyond; a VARCHAR holds at most 4 GiB, so clamping there changes no result.
_STRING_MAX = 2**32 - 2


def _clamped(value: Any) -> int:
    return max(-_STRING_MAX, min(_STRING_MAX, int(value)))


def _slice(c: _Compiler, node: Call) -> str:
    """Polars' ``str.slice``: characters from ``offset`` (from the end if negative, the range
    clipped to the string), at most ``length`` of them."""
    offset, length = _lit_value(node, 1), _lit_value(node, 2)
    s = _subject(c, node)
    if offset is None:
        return "CAST(NULL AS VARCHAR)"
    offset = _clamped(offset)
    length = None if length is None else max(0, _clamped(length))
    if offset >= 0:
        if length is None:
            return f"substring({s}, {offset + 1})"
        return f"substring({s}, {offset + 1}, {length})"

    def body(v: str) -> str:
        start = f"greatest(length({v}) + ({offset}), 0)"
        end = (f"length({v})" if length is None
               else f"least(greatest(length({v}) + ({offset + length}), 0), length({v}))")
        return f"substring({v}, {start} + 1, greatest({end} - {start}, 0))"
    return c.let(s, body)


def _head_tail(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        n = _lit_value(node, 1)
        if n is None:
            return "CAST(NULL AS VARCHAR)"
        return f"{fn}({_subject(c, node)}, {_clamped(n)})"
    return handler


def _strip(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        chars = _text_arg(c, node, 1)
        return f"{fn}({_subject(c, node)}, {_text(_WHITESPACE if chars is None else chars)})"
    return handler


def _strip_prefix(c: _Compiler, node: Call) -> str:
    prefix = _text_arg(c, node, 1)
    if prefix is None:
        return "CAST(NULL AS VARCHAR)"
    p = _text(prefix)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN starts_with({v}, {p}) THEN substring({v}, {len(prefix) + 1}) "
        f"ELSE {v} END)"))


def _strip_suffix(c: _Compiler, node: Call) -> str:
    suffix = _text_arg(c, node, 1)
    if suffix is None:
        return "CAST(NULL AS VARCHAR)"
    p = _text(suffix)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN ends_with({v}, {p}) THEN left({v}, length({v}) - {len(suffix)}) "
        f"ELSE {v} END)"))


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _to_integer(c: _Compiler, node: Call) -> str:
    """Rust's ``i64::from_str_radix`` (Polars' ``str.to_integer``): an optional sign, then
    digits of the base (either case), nothing else; a value that does not fit is missing."""
    base = _lit_value(node, 1)
    out = c.t(node)
    if base is None:
        return _null(out)
    base = int(base)
    digits = _DIGITS[:base]
    letters = digits[10:]
    cls = "0-" + digits[min(base, 10) - 1]
    if letters:
        cls += f"a-{letters[-1]}A-{letters[-1].upper()}"
    sign = "[+-]?" if _signed(out) or _kind(out) != "int" else "[+]?"
    pattern = _text(f"{sign}[{cls}]+")
    if base == 10:
        value = "TRY_CAST({v} AS HUGEINT)"
    else:
        value = ("(CASE WHEN starts_with({v}, '-') THEN -1 ELSE 1 END) * "
                 "TRY(list_reduce(list_transform(string_split(lower(ltrim({v}, '+-')), ''), "
                 "lambda __dp_d: CAST(strpos('" + _DIGITS + "', __dp_d) - 1 AS HUGEINT)), "
                 f"lambda __dp_a, __dp_b: __dp_a * {base} + __dp_b, CAST(0 AS HUGEINT)))")
    return c.let(_subject(c, node), lambda v: (
        f"TRY_CAST((CASE WHEN regexp_full_match({v}, {pattern}) "
        f"THEN {value.format(v=v)} END) AS {_duck(out)})"))


def _replace_string(c: _Compiler, node: Call) -> str:
    n, literal = int(node.params[0]), bool(node.params[1])
    if n not in (1, -1):
        raise _RefusalError(f"str.replace(n={n})", "replace the first match or all of them")
    pattern, value = _text_arg(c, node, 1), _text_arg(c, node, 2)
    s = _subject(c, node)
    if pattern is None or value is None:
        return "CAST(NULL AS VARCHAR)"
    if literal:
        if n == -1 and pattern:
            return f"replace({s}, {_text(pattern)}, {_text(value)})"
        regex, rewrite = _re2_quote(pattern), value.replace("\\", "\\\\")
    else:
        _check_regex(pattern)
        regex, rewrite = pattern, _rewrite(pattern, value)
    flags = ", 'g'" if n == -1 else ""
    return f"regexp_replace({s}, {_text(regex)}, {_text(rewrite)}{flags})"


def _concat(c: _Compiler, node: Call) -> str:
    separator, ignore_nulls = str(node.params[0]), bool(node.params[1])
    args = _one_type(c, node, _dtype("String"))
    if ignore_nulls:
        return f"concat_ws({_text(separator)}, {', '.join(args)})"
    return "(" + f" || {_text(separator)} || ".join(args) + ")" if separator else (
        "(" + " || ".join(args) + ")")


def _zfill(c: _Compiler, node: Call) -> str:
    """Zeros in front to ``width`` characters, after a leading sign (``-`` or ``+``)."""
    width = _lit_value(node, 1)
    if width is None:
        return "CAST(NULL AS VARCHAR)"
    w = int(width)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN length({v}) >= {w} THEN {v} "
        f"WHEN left({v}, 1) IN ('-', '+') THEN left({v}, 1) || "
        f"lpad(substring({v}, 2), {max(w - 1, 0)}, '0') "
        f"ELSE lpad({v}, {w}, '0') END)"))


def _pad(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        width = _lit_value(node, 1)
        if width is None:
            return "CAST(NULL AS VARCHAR)"
        w, fill = int(width), _text(str(node.params[0]))
        return c.let(_subject(c, node), lambda v: (
            f"(CASE WHEN length({v}) >= {w} THEN {v} ELSE {fn}({v}, {w}, {fill}) END)"))
    return handler


def _pattern_call(c: _Compiler, node: Call) -> tuple[str | None, str, str]:
    """``(pattern, result type, subject)`` of a string function taking a literal pattern
    (the pattern is None when the literal is missing: the result is then missing)."""
    return _text_arg(c, node, 1), _duck(c.t(node)), _subject(c, node)


def _count_matches(c: _Compiler, node: Call) -> str:
    """Non-overlapping matches, left to right. A regex match is counted by marking each
    match with one extra character (RE2's global replace walks the matches the way Polars
    does, including empty ones)."""
    pattern, out, s = _pattern_call(c, node)
    if pattern is None:
        return f"CAST(NULL AS {out})"
    if bool(node.params[0]):
        if not pattern:
            return f"TRY_CAST(length({s}) + 1 AS {out})"
        p = _text(pattern)
        return c.let(s, lambda v: (
            f"TRY_CAST((strlen({v}) - strlen(replace({v}, {p}, ''))) // {len(pattern.encode())}"
            f" AS {out})"))
    _check_regex(pattern)
    return c.let(s, lambda v: (
        f"TRY_CAST(length(regexp_replace({v}, {_text(pattern)}, '_\\0', 'g')) - length({v}) "
        f"AS {out})"))


def _find(c: _Compiler, node: Call) -> str:
    """Byte offset of the first match (missing if none)."""
    pattern, out, s = _pattern_call(c, node)
    if pattern is None:
        return f"CAST(NULL AS {out})"
    if bool(node.params[0]):
        if not pattern:
            return f"(CASE WHEN {s} IS NOT NULL THEN CAST(0 AS {out}) END)"
        p = _text(pattern)
        return c.let(s, lambda v: (f"(CASE WHEN contains({v}, {p}) "
                                   f"THEN TRY_CAST(strlen(split_part({v}, {p}, 1)) AS {out}) "
                                   "END)"))
    _check_regex(pattern)
    prefixed = _text(f"^(?s:(.*?))(?:{pattern})")
    return c.let(s, lambda v: (
        f"(CASE WHEN regexp_matches({v}, {_text(pattern)}) "
        f"THEN TRY_CAST(strlen(regexp_extract({v}, {prefixed}, 1)) AS {out}) END)"))

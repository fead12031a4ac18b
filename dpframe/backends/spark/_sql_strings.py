"""Spark row-wise SQL: string functions."""

from __future__ import annotations

from collections.abc import Callable

from dpframe.backends.spark._sql_compiler import _arg, _literal_arg, _subject, _typed_null
from dpframe.backends.spark._sql_types import _INT_TEXT, _fit, _info, _name, _refuse, _string
from dpframe.rowwise.nodes import Call

#: The characters Rust's ``char::is_whitespace`` (Unicode White_Space) accepts, which Polars'
#: ``strip_chars()`` removes by default.
_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_REGEX_META = frozenset("\\.+*?()|[]{}^$")
_MAX_INT = 2**31 - 1


def _string_subject(node: Call) -> str:
    x, info = _subject(node)
    if info.kind not in ("str", "null"):
        raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "cast to String first")
    return x


def _pattern(node: Call, literal_flag: int | None) -> str | None:
    """A literal pattern argument; a regular expression is accepted only when it has no
    metacharacter (then it matches literally in every regex engine)."""
    value = _literal_arg(node, 1)
    if value is None:
        return None
    pattern = str(value)
    literal = literal_flag is None or bool(node.params[literal_flag])
    if not literal and any(c in _REGEX_META for c in pattern):
        raise _refuse(f"the regular expression {pattern!r} in {node.name!r} (Java's regex "
                      "engine can read it differently from Polars')",
                      "pass literal=True, or a pattern without regex metacharacters")
    return pattern


def _contains(node: Call) -> str:
    s = _string_subject(node)
    p = _pattern(node, 0)
    return _typed_null(node.dtype) if p is None else f"contains({s}, {_string(p)})"


def _affix(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        s = _string_subject(node)
        p = _literal_arg(node, 1)
        return _typed_null(node.dtype) if p is None else f"{fn}({s}, {_string(str(p))})"
    return build


def _length(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return f"CAST({fn}({_string_subject(node)}) AS {_info(node.dtype).sql})"
    return build


def _clamp(value: int) -> int:
    """A literal position or length clamped to ±2^40: strings have fewer than 2^31
    characters, so the result is the same and no arithmetic overflows."""
    return max(-(2**40), min(2**40, int(value)))


def _substring(s: str, start: str, end: str) -> str:
    """Characters [start, end) of s, with start and end BIGINT expressions already within
    [0, char_length(s)]."""
    return f"substr({s}, CAST({start} + 1 AS INT), CAST(greatest({end} - {start}, 0) AS INT))"


def _slice(node: Call) -> str:
    """Polars' ``str.slice``: a negative offset counts from the end; start and end
    (start + length) are clipped to the string."""
    s = _string_subject(node)
    offset, length = _literal_arg(node, 1), _literal_arg(node, 2)
    if offset is None:
        return _typed_null(node.dtype)
    if length is not None and int(length) < 0:
        raise _refuse("str.slice with a negative length (the reference raises)",
                      "give a length ≥ 0")
    n = f"CAST(char_length({s}) AS BIGINT)"
    off = _clamp(offset)
    begin = f"CAST({off} AS BIGINT)" if off >= 0 else f"({n} + {off})"
    stop = n if length is None else f"({begin} + {_clamp(length)})"
    start = f"least(greatest({begin}, 0), {n})"
    end = f"least(greatest({stop}, 0), {n})"
    # least/greatest skip NULLs: a missing string must not reach the casts to INT
    return f"(CASE WHEN {s} IS NOT NULL THEN {_substring(s, start, end)} END)"


def _head_tail(node: Call) -> str:
    s = _string_subject(node)
    count = _literal_arg(node, 1)
    if count is None:
        return _typed_null(node.dtype)
    k = _clamp(count)
    n = f"CAST(char_length({s}) AS BIGINT)"
    head = node.name.endswith("Head")
    if k >= 0:
        width = min(k, _MAX_INT)
        return f"left({s}, {width})" if head else f"right({s}, {width})"
    if head:  # all but the last |k| characters
        return f"substr({s}, 1, CAST(greatest({n} + {k}, 0) AS INT))"
    return f"substr({s}, {min(-k, _MAX_INT - 1) + 1})"  # all but the first |k|


def _strip(where: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        s = _string_subject(node)
        chars = _literal_arg(node, 1)
        chars = _WHITESPACE if chars is None else str(chars)
        return f"trim({where} {_string(chars)} FROM {s})"
    return build


def _strip_affix(node: Call) -> str:
    s = _string_subject(node)
    p = _literal_arg(node, 1)
    if p is None:
        return _typed_null(node.dtype)
    p = str(p)
    lit, n = _string(p), len(p)
    if node.name.endswith("Prefix"):
        return f"(CASE WHEN startswith({s}, {lit}) THEN substr({s}, {n + 1}) ELSE {s} END)"
    return (f"(CASE WHEN endswith({s}, {lit}) THEN substr({s}, 1, char_length({s}) - {n}) "
            f"ELSE {s} END)")


def _str_to_integer(node: Call) -> str:
    """Polars' ``str.to_integer(base)``: an optional sign and at least one digit of the base
    (ASCII, either case), nothing else; out of Int64 range → NULL. Base 10 uses Spark's cast
    after the same check; other bases convert with ``conv`` in pieces that cannot overflow."""
    s = _string_subject(node)
    base = int(_literal_arg(node, 1))
    if base == 10:
        value = f"(CASE WHEN {s} RLIKE {_string(_INT_TEXT)} THEN try_cast({s} AS BIGINT) END)"
        return value if _name(node.dtype) == "Int64" else _fit(value, node.dtype)
    digits = f"0-{base - 1}" if base <= 10 else (
        f"0-9a-{chr(ord('a') + base - 11)}A-{chr(ord('A') + base - 11)}")
    shape = _string(rf"^[+-]?[{digits}]+\z")
    body = (f"(CASE WHEN startswith({s}, '+') OR startswith({s}, '-') THEN substr({s}, 2) "
            f"ELSE {s} END)")
    d = f"trim(LEADING '0' FROM {body})"
    most = 1  # the most digits whose value always fits 64 unsigned bits (conv's range)
    while base ** (most + 1) <= 2**64:
        most += 1
    dec = "DECIMAL(21,0)"
    value = (f"(CASE WHEN char_length({d}) = 0 THEN CAST(0 AS {dec}) "
             f"WHEN char_length({d}) <= {most} THEN CAST(conv({d}, {base}, 10) AS {dec}) "
             f"WHEN char_length({d}) = {most + 1} THEN "
             f"CAST(conv(left({d}, 1), {base}, 10) AS {dec}) * CAST({base**most} AS {dec}) + "
             f"CAST(conv(substr({d}, 2), {base}, 10) AS {dec}) END)")
    signed = f"(CASE WHEN startswith({s}, '-') THEN negative({value}) ELSE {value} END)"
    return _fit(f"(CASE WHEN {s} RLIKE {shape} THEN try_cast({signed} AS BIGINT) END)",
                node.dtype)


def _replace_str(node: Call) -> str:
    s = _string_subject(node)
    n = int(node.params[0])
    pattern = _pattern(node, 1)
    value = _literal_arg(node, 2)
    if pattern is None or value is None:
        raise _refuse("str.replace with a missing pattern or value", "give literal strings")
    value = str(value)
    if not bool(node.params[1]) and "$" in value:
        raise _refuse("str.replace with '$' in the replacement of a regex pattern (group "
                      "references)", "pass literal=True")
    if pattern == "":
        raise _refuse("str.replace with an empty pattern", "give a non-empty pattern")
    p, v = _string(pattern), _string(value)
    if n < 0:
        return f"replace({s}, {p}, {v})"
    if n != 1:
        raise _refuse(f"str.replace(n={n})", "replace the first (n=1) or every match")
    at = f"instr({s}, {p})"
    return (f"(CASE WHEN {at} = 0 THEN {s} ELSE concat(substr({s}, 1, {at} - 1), {v}, "
            f"substr({s}, {at} + {len(pattern)})) END)")


def _concat_str(node: Call) -> str:
    separator, ignore_nulls = str(node.params[0]), bool(node.params[1])
    args = [_arg(a, node.dtype) for a in node.args]
    if ignore_nulls:
        return f"concat_ws({_string(separator)}, {', '.join(args)})"
    sep = _string(separator)
    parts = []
    for i, a in enumerate(args):
        if i and separator:
            parts.append(sep)
        parts.append(a)
    return f"concat({', '.join(parts)})"


def _width(node: Call) -> int:
    width = _literal_arg(node, 1)
    if not isinstance(width, int) or not 0 <= width <= 4096:
        raise _refuse(f"{node.name!r} to width {width!r}", "use a literal width ≤ 4096")
    return width


def _zfill(node: Call) -> str:
    """Zeros after a leading sign; strings at least ``width`` characters long unchanged."""
    s = _string_subject(node)
    w = _width(node)
    return (f"(CASE WHEN char_length({s}) >= {w} THEN {s} "
            f"WHEN startswith({s}, '-') OR startswith({s}, '+') "
            f"THEN concat(left({s}, 1), lpad(substr({s}, 2), {max(w - 1, 0)}, '0')) "
            f"ELSE lpad({s}, {w}, '0') END)")


def _pad(node: Call) -> str:
    s = _string_subject(node)
    w = _width(node)
    fill = str(node.params[0])
    if len(fill) != 1:
        raise _refuse(f"padding with {fill!r}", "pad with one character")
    fn = "lpad" if node.name.endswith("PadStart") else "rpad"
    return f"(CASE WHEN char_length({s}) >= {w} THEN {s} ELSE {fn}({s}, {w}, {_string(fill)}) END)"


def _count_matches(node: Call) -> str:
    s = _string_subject(node)
    p = _pattern(node, 0)
    if p is None:
        return _typed_null(node.dtype)
    if p == "":
        count = f"(char_length({s}) + 1)"
    else:  # the non-overlapping matches are what replace() removes, left to right
        count = f"((char_length({s}) - char_length(replace({s}, {_string(p)}, ''))) div {len(p)})"
    return f"CAST({count} AS {_info(node.dtype).sql})"


def _find(node: Call) -> str:
    """Byte offset (UTF-8) of the first match, NULL when there is none."""
    s = _string_subject(node)
    p = _pattern(node, 0)
    sql = _info(node.dtype).sql
    if p is None:
        return _typed_null(node.dtype)
    if p == "":
        return f"(CASE WHEN {s} IS NULL THEN NULL ELSE CAST(0 AS {sql}) END)"
    at = f"instr({s}, {_string(p)})"
    return (f"(CASE WHEN {at} = 0 THEN NULL "
            f"ELSE CAST(octet_length(substr({s}, 1, {at} - 1)) AS {sql}) END)")


def _case(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return f"{fn}({_string_subject(node)})"
    return build

"""The catalogue of row-wise operators and functions dpframe accepts, with their total meaning.

One entry per operator or function as it appears in a Polars plan. Each says what users write,
what dpframe computes (in every engine, the same rule), and which arguments must be literals.
``docs/frames.md`` ("What each function computes") shows this table; a test keeps the two equal.

The rules that make every entry total (DESIGN §2, "Total after the read"):

* integer ``+``, ``-``, ``*``, ``//``, ``%``, negation and ``abs`` are *checked*: a result that
  does not fit the result type is missing (never a wrapped value, never an error);
* division, floor division and modulo by zero give a missing value, for integers and floats;
* ``**`` of integers is the exact power, checked like the other operators (a negative exponent
  gives a missing value, as it has no integer result); of floats, the IEEE power;
* every cast is non-strict: a value that does not convert (overflow, unparseable string) is
  missing;
* widths and repeat counts are literals no larger than :data:`MAX_WIDTH`, patterns and time
  units are literals checked before anything is read;
* arithmetic on Decimal, 128-bit integer or temporal operands is refused (cast to Float64 or
  Int64 first): no engine can check it row by row.

A value that cannot be computed therefore becomes missing and then follows the column's
declared missing-value rule (``missing=`` at protect or ``with_columns``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FUNCTIONS", "INTERNAL", "MAX_WIDTH", "OPERATORS", "SEARCH_EDGES", "Function",
           "search_steps"]

#: The largest width ``str.zfill`` / ``str.pad_start`` / ``str.pad_end`` accept (a public cap:
#: a width taken from the data could allocate or fail depending on a value; Polars itself
#: panics above 65,535).
MAX_WIDTH = 4096


@dataclass(frozen=True)
class Function:
    """One accepted element-wise function.

    ``name``: as in the Polars plan; ``api``: what users write (narwhals / Polars);
    ``meaning``: what dpframe computes, in every engine; ``literal_args``: the arguments after
    the subject must be literals; ``group``: the heading it is listed under in the docs."""

    name: str
    api: str
    meaning: str
    group: str
    literal_args: bool = False


#: Binary operators (Polars' ``Operator`` names) and their total meaning.
OPERATORS: dict[str, str] = {
    "Plus": "`+`: numbers (integers checked: overflow gives a missing value); strings are "
            "concatenated",
    "Minus": "`-`: integers checked (overflow gives a missing value)",
    "Multiply": "`*`: integers checked (overflow gives a missing value)",
    "TrueDivide": "`/`: Float64 result; a zero divisor gives a missing value",
    "FloorDivide": "`//`: integers: rounds toward −∞ (Python's rule), exactly; floats: "
                   "⌊a / b⌋ of the IEEE quotient; a zero divisor or an overflow (`MIN // -1`) "
                   "gives a missing value",
    "Modulus": "`%`: integers: the sign of the divisor (Python's rule), exactly; floats: "
               "a − b·⌊a / b⌋ evaluated in IEEE doubles as written (bit-identical in every "
               "engine; it can differ from Python's fmod-based remainder in the last bits); "
               "a zero divisor gives a missing value",
    **{op: f"`{sym}`: comparison (NaN equals NaN and sorts above every number); a missing "
       "side gives a missing result" for op, sym in (
           ("Eq", "=="), ("NotEq", "!="), ("Lt", "<"), ("LtEq", "<="), ("Gt", ">"),
           ("GtEq", ">="))},
    "EqValidity": "`eq_missing`: equality where missing equals missing",
    "NotEqValidity": "`ne_missing`: its negation",
    "And": "`&`: Kleene logic on booleans; bitwise on integers",
    "Or": "`|`: Kleene logic on booleans; bitwise on integers",
    "Xor": "`^`: exclusive or",
    "LogicalAnd": "`all_horizontal(...)`: all of the row's booleans (Kleene logic)",
    "LogicalOr": "`any_horizontal(...)`: any of them (Kleene logic)",
}

_NUM = "numbers"
_MISS = "missing values and tables"
_HOR = "across the columns of one row"
_PRED = "predicates"
_STR = "strings"
_TIME = "dates and times"
_LIST = "lists held in one row"


def _f(name: str, api: str, meaning: str, group: str, literal_args: bool = False
       ) -> tuple[str, Function]:
    return name, Function(name, api, meaning, group, literal_args)


#: Every accepted element-wise function, by its plan name.
FUNCTIONS: dict[str, Function] = dict([
    _f("abs", "abs()", "absolute value; integers checked (`abs(MIN)` is missing)", _NUM),
    _f("negate", "-x", "negation; integers checked (`-MIN` is missing)", _NUM),
    _f("clip", "clip(lower, upper)", "limits to [lower, upper]", _NUM),
    _f("round", "round(decimals)", "rounds floats to `decimals` places, half to even; "
       "integers unchanged", _NUM),
    _f("round_sig_figs", "round_sig_figs(digits)", "rounds to `digits` (1 to 300) "
       "significant figures", _NUM),
    _f("floor", "floor()", "largest integral value ≤ x (floats stay floats)", _NUM),
    _f("ceil", "ceil()", "smallest integral value ≥ x (floats stay floats)", _NUM),
    _f("sqrt", "sqrt()", "square root, Float64; NaN for negative values", _NUM),
    _f("cbrt", "cbrt()", "cube root, Float64", _NUM),
    _f("exp", "exp()", "eˣ, Float64 (inf on overflow)", _NUM),
    _f("log", "log(base)", "logarithm, Float64; −inf at 0, NaN below", _NUM),
    _f("log1p", "log1p()", "ln(1 + x), Float64", _NUM),
    _f("pow", "x ** y, pow(y)", "floats: the IEEE power; integers: the exact power, checked "
       "(a negative exponent, or a result that does not fit, gives a missing value)", _NUM),
    _f("sign", "sign()", "−1, 0 or 1 (NaN stays NaN)", _NUM),
    *(_f(t, f"{t}()", f"{t}, Float64", _NUM) for t in (
        "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
        "degrees", "radians")),
    _f("fill_null", "fill_null(value)", "a missing value replaced by `value` (a literal or a "
       "row-wise expression)", _MISS),
    _f("replace", "replace(old, new)", "values found in the literal table `old` replaced by "
       "the matching `new`; others unchanged", _MISS, literal_args=True),
    _f("coalesce", "coalesce(a, b, ...)", "the first non-missing argument", _MISS),
    _f("max_horizontal", "max_horizontal(...)", "largest non-missing value of the row's "
       "arguments", _HOR),
    _f("min_horizontal", "min_horizontal(...)", "smallest non-missing value", _HOR),
    _f("sum_horizontal", "sum_horizontal(...)", "sum of the row's arguments, numbers or "
       "booleans (integers checked: overflow gives a missing value)", _HOR),
    _f("mean_horizontal", "mean_horizontal(...)", "mean of the non-missing arguments, numbers "
       "or booleans, computed in Float64", _HOR),
    _f("BooleanFunction.IsNull", "is_null()", "the value is missing (null)", _PRED),
    _f("BooleanFunction.IsNotNull", "is_not_null()", "the value is present", _PRED),
    _f("BooleanFunction.IsNan", "is_nan()", "the float is NaN", _PRED),
    _f("BooleanFunction.IsNotNan", "is_not_nan()", "the float is not NaN", _PRED),
    _f("BooleanFunction.IsFinite", "is_finite()", "neither infinite nor NaN", _PRED),
    _f("BooleanFunction.IsInfinite", "is_infinite()", "±inf", _PRED),
    _f("BooleanFunction.Not", "~x, not_()", "logical not (bitwise on integers)", _PRED),
    _f("BooleanFunction.IsBetween", "is_between(lower, upper, closed)", "lower ≤ x ≤ upper "
       "(ends as `closed` says)", _PRED),
    _f("BooleanFunction.IsIn", "is_in([...])", "the value is in the literal list", _PRED,
       literal_args=True),
    _f("StringFunction.Uppercase", "str.to_uppercase()", "upper case", _STR),
    _f("StringFunction.Lowercase", "str.to_lowercase()", "lower case", _STR),
    _f("StringFunction.Titlecase", "str.to_titlecase()", "title case", _STR),
    _f("StringFunction.Contains", "str.contains(pattern, literal)", "contains the literal "
       "pattern (a regular expression checked before anything is read, Polars' syntax)",
       _STR, literal_args=True),
    _f("StringFunction.StartsWith", "str.starts_with(prefix)", "starts with the literal",
       _STR, literal_args=True),
    _f("StringFunction.EndsWith", "str.ends_with(suffix)", "ends with the literal", _STR,
       literal_args=True),
    _f("StringFunction.LenChars", "str.len_chars()", "number of characters", _STR),
    _f("StringFunction.LenBytes", "str.len_bytes()", "number of UTF-8 bytes", _STR),
    _f("StringFunction.Slice", "str.slice(offset, length)", "characters from `offset` "
       "(negative: from the end), at most `length`", _STR, literal_args=True),
    _f("StringFunction.Head", "str.head(n)", "the first n characters", _STR,
       literal_args=True),
    _f("StringFunction.Tail", "str.tail(n)", "the last n characters", _STR,
       literal_args=True),
    _f("StringFunction.StripChars", "str.strip_chars(chars)", "strip both ends (whitespace "
       "by default)", _STR, literal_args=True),
    _f("StringFunction.StripCharsStart", "str.strip_chars_start(chars)", "strip the start",
       _STR, literal_args=True),
    _f("StringFunction.StripCharsEnd", "str.strip_chars_end(chars)", "strip the end", _STR,
       literal_args=True),
    _f("StringFunction.StripPrefix", "str.strip_prefix(prefix)", "remove the literal prefix",
       _STR, literal_args=True),
    _f("StringFunction.StripSuffix", "str.strip_suffix(suffix)", "remove the literal suffix",
       _STR, literal_args=True),
    _f("StringFunction.ToInteger", "str.to_integer(base)", "parses an integer; an "
       "unparseable value is missing (always non-strict)", _STR, literal_args=True),
    _f("StringFunction.Replace", "str.replace(pattern, value), str.replace_all(...)",
       "replaces the first (or every) match of the literal pattern", _STR,
       literal_args=True),
    _f("StringFunction.ConcatHorizontal", "concat_str([...], separator)", "joins the row's "
       "strings", _STR),
    _f("StringFunction.ZFill", "str.zfill(width)", f"pads with zeros to `width` ≤ {MAX_WIDTH}",
       _STR, literal_args=True),
    _f("StringFunction.PadStart", "str.pad_start(width, char)", f"pads the start to `width` "
       f"≤ {MAX_WIDTH}", _STR, literal_args=True),
    _f("StringFunction.PadEnd", "str.pad_end(width, char)", f"pads the end to `width` ≤ "
       f"{MAX_WIDTH}", _STR, literal_args=True),
    _f("StringFunction.Reverse", "str.reverse()", "characters in reverse order", _STR),
    _f("StringFunction.CountMatches", "str.count_matches(pattern)", "number of matches of the "
       "literal pattern", _STR, literal_args=True),
    _f("StringFunction.Find", "str.find(pattern)", "index of the first match (missing if "
       "none)", _STR, literal_args=True),
    *(_f(f"TemporalFunction.{t}", f"dt.{api}()", what, _TIME) for t, api, what in (
        ("Year", "year", "the year"), ("Month", "month", "the month (1-12)"),
        ("Day", "day", "the day of the month"), ("Hour", "hour", "the hour"),
        ("Minute", "minute", "the minute"), ("Second", "second", "the second"),
        ("Millisecond", "millisecond", "the millisecond"),
        ("Microsecond", "microsecond", "the microsecond"),
        ("Nanosecond", "nanosecond", "the nanosecond"),
        ("WeekDay", "weekday", "ISO weekday (Monday = 1)"),
        ("Week", "week", "ISO week number"), ("Quarter", "quarter", "the quarter (1-4)"),
        ("OrdinalDay", "ordinal_day", "day of the year"),
        ("IsoYear", "iso_year", "ISO year"), ("Date", "date", "the date part"),
        ("Time", "time", "the time part"), ("IsLeapYear", "is_leap_year", "leap year"))),
    _f("TemporalFunction.Truncate", "dt.truncate(every)", "rounds down to a literal "
       "interval of at most a year (checked before anything is read); a value beyond ±200,000 "
       "years, or within 1,000 days of its type's range, is missing", _TIME,
       literal_args=True),
    _f("TemporalFunction.Round", "dt.round(every)", "rounds to a literal interval of at most "
       "a year; the same values are missing", _TIME, literal_args=True),
    _f("ListFunction.Length", "list.len()", "number of elements", _LIST),
    _f("ListFunction.Sum", "list.sum()", "sum of the elements, numbers or booleans (integers "
       "checked)", _LIST),
    _f("ListFunction.Mean", "list.mean()", "mean of the elements, numbers or booleans", _LIST),
    _f("ListFunction.Max", "list.max()", "largest element (not of nested lists)", _LIST),
    _f("ListFunction.Min", "list.min()", "smallest element (not of nested lists)", _LIST),
    _f("ListFunction.Contains", "list.contains(item)", "the list holds the literal", _LIST,
       literal_args=True),
])


#: dpframe's own row-wise function behind ``histogram``: the bin index of a Float64 value over
#: public, strictly increasing finite edges ``params[0]`` (the inner edges of the histogram),
#: computed as the number of those edges ``e`` with ``e ≤ x`` (IEEE comparison, so ``-0.0``
#: equals ``0.0``; ``+inf`` is above every edge, ``-inf`` below). A NaN counts as above every
#: edge and a missing value gives 0 (``histogram`` masks both by the column's missing rule
#: before they are counted). Every engine computes it as a binary search (Polars'
#: ``search_sorted``; DuckDB and Spark: ⌈log₂ k⌉ comparisons against a list literal), so the
#: cost per row grows with log k, not k. No user expression can produce it: the plan reader
#: accepts only :data:`FUNCTIONS`.
SEARCH_EDGES = "dpframe.search_edges"

#: dpframe's internal row-wise functions (never read from a user's plan; not in the docs'
#: catalogue).
INTERNAL: dict[str, Function] = dict([
    _f(SEARCH_EDGES, "histogram bins", "the number of public edges at or below the value",
       "internal", literal_args=True),
])


def search_steps(count: int) -> list[int]:
    """The step sizes of a branch-free binary search over ``count`` sorted edges: the powers
    of two from the largest ≤ ``count`` down to 1. Starting at ``i = 0``, each step adds ``s``
    when ``i + s ≤ count`` and the ``(i + s)``-th edge (1-based) is ≤ x; the final ``i`` is the
    number of edges ≤ x (every count 0..``count`` is a unique sum of distinct powers)."""
    steps: list[int] = []
    s = 1
    while s * 2 <= count:
        s *= 2
    while s >= 1 and count > 0:
        steps.append(s)
        s //= 2
    return steps

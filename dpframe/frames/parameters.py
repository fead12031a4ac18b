"""One source for the text of the parameters the ``.dp`` methods share.

A method's docstring documents only what is its own (its summary, the parameters whose meaning
is particular to it, Returns, Examples); :func:`shared_parameters` completes its *Parameters*
section from the tables below, in the order of the method's signature, so ``help()``, IDEs and
the rendered docs show every parameter in full while each shared text is written once.

A table is written as a numpydoc *Parameters* section (an entry is a ``name : type`` line and
its indented description), and is read with the same parser as the docstrings.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["CATEGORICAL", "COMMON", "DESCRIBE", "GROUPED", "GROUPED_QUANTILE", "HISTOGRAM",
           "MATRIX", "PLANNER", "QUANTILE", "entries", "missing_parameters", "parameter_names",
           "shared_parameters", "with_parameters"]

F = TypeVar("F", bound=Callable[..., Any])

_HEADER = "Parameters"


def entries(text: str) -> dict[str, str]:
    """The entries of a numpydoc parameter list, by name: ``{"epsilon": "epsilon : float\\n
    <indented description>"}``. An entry starts at a line without indentation; the name is
    what precedes ``" : "`` (``*predicates`` for a variadic parameter)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in textwrap.dedent(text).strip("\n").splitlines():
        if line and not line[0].isspace():
            current = out.setdefault(line.split(" : ")[0].strip(), [])
        if current is not None:
            current.append(line)
    return {name: "\n".join(lines).rstrip() for name, lines in out.items()}


#: Parameters of every release and planning method.
COMMON = entries("""
column : str
    A column with declared bounds.
queries : dict of str to query
    Names to queries built with ``dpf.count()``, ``dpf.mean(col)``, ...
epsilon : float
    The privacy budget this release spends (> 0).
delta : float, default 0.0
    The most δ it may spend: only the bounded mechanism uses δ, and "auto" runs it at δ
    only where that lowers the worst-case RMSE by at least 1 % (``DELTA_MIN_GAIN``);
    a measurement that uses no δ is charged none.
weights : dict or list of float, optional
    Relative shares of ε (and δ); even by default.
mechanism : {"auto", "bounded", "truncated", "laplace"}, default "auto"
    How noise stays in the output domain: "auto" takes, per measurement, the one with
    the smaller worst-case error from public facts (the log's ``mechanism`` and
    ``mechanism_choice`` say which and why); "bounded" conditions the noise on the
    domain (Holohan), "truncated" clamps, "laplace" does neither.
keys : list, optional
    Public keys (default: those declared at protect time).
total : int, optional
    A public (or already released) total: counts are apportioned to add up to it
    (largest remainders; each stays within 1 of its noisy value's share).
random_state : None, int or numpy.random.Generator, default None
    None draws from the operating system's secure source; a seed is for tests and
    simulations only and is recorded in the log.
session : dpf.Session or str, optional
    Asserts which ledger is meant; it must be this frame's own (else ``LedgerError``).
ci : float, optional
    A confidence level (e.g. 0.95): also release an interval for each answer, exact for one
    mechanism's output and conservative for composed statistics (post-processing: no
    extra ε; the log records it). Single statistics then return a ``dpf.Estimate``
    (value, lower, upper, level); tables get ``<name>_lower`` / ``<name>_upper`` columns.
alpha : float, default 0.05
    Each half-width holds with probability at least ``1 − alpha``, whatever the data.
min_rows : int, optional
    A public lower bound on the rows behind a private-size mean.
query : query
    One query built with ``dpf.count()``, ``dpf.mean(col)``, ...
half_width : float
    The target half-width of the answer's interval.
targets : dict of str to (query, float)
    Names to a query and its target half-width.
""")

#: Parameters of the quantiles (the exponential mechanism; docs/privacy.md, section Q), which
#: take precedence over :data:`COMMON` where a method names this table.
QUANTILE = entries("""
q : float or list of float, default 0.5
    Level(s) in [0, 1].
epsilon : float
    The privacy budget this release spends (> 0), for all levels together.
delta : float, default 0.0
    Under "auto", accepted as everywhere and never charged: the exponential mechanism is
    pure ε-DP. With "exponential" named, only 0 (as "truncated" takes no δ).
mechanism : {"auto", "exponential"}, default "auto"
    The exponential mechanism is the only one for quantiles (both names select it); the
    Laplace names ("bounded", "truncated", "laplace") are refused with a ParameterError.
bins : int, optional
    Number of equal public bins of the bounds (the resolution: (upper − lower)/bins).
ci : float, optional
    A confidence level: also release an interval in the column's units that contains the
    sample quantile with probability ≥ ``ci`` for every data set (two bracketing releases
    at ``ci_share`` of ``epsilon``), and the point's *rank* interval ``rank_error``
    (post-processing, no ε): docs/privacy.md, section Q.6.
ci_share : float, default 0.5
    With ``ci``, the share of ``epsilon`` spent on the value interval (a quarter each side by
    default; the point keeps the rest). 0: no ε for it, the interval is the declared bounds.
    Ignored without ``ci``.
""")

#: The counts of a numeric column over public bins (``histogram``).
HISTOGRAM = entries("""
column : str
    A numeric column.
edges : list of float, optional
    Public, strictly increasing, finite bin edges (at least two).
bins : int, optional
    Instead of ``edges``: that many equal-width bins over the column's declared bounds
    ``[l, u]``, with edges ``e_j = l + (u − l)·j/bins`` computed exactly and rounded once
    to the nearest double (``e_0 = l``, ``e_bins = u``; refused if two edges would round
    to the same double).
""")

#: The counts and proportions of a categorical column (``value_counts``, ``proportions``).
CATEGORICAL = entries("""
column : str
    The categorical column.
""")

#: The analyses of several bounded columns.
MATRIX = entries("""
columns : list of str
    Two or more bounded columns.
""")
DESCRIBE = entries("""
columns : list of str, optional
    Bounded columns to describe (default: all of them).
""")

#: The planner's inverses (``epsilon_for``, ``split``): of one named mechanism.
PLANNER = entries("""
mechanism : {"bounded", "truncated", "laplace"}, default "bounded"
    The mechanism the answer is for ("auto", the releases' default, picks one per ε and has
    no inverse): pass the same to the release, and check it with ``accuracy`` at the ε found.
""")

#: The planner's forecast (``accuracy``): the ``ci=`` the release will be asked with.
ACCURACY = entries("""
ci : float, optional
    The ``ci=`` the release will be asked with: a quantile's value interval then takes
    ``ci_share`` of its ε, and its row reports the point's accuracy at the
    ``ε·(1 − ci_share)`` the point gets (its note states the interval's share).
""")

#: The parameters whose meaning per group differs from the frame's.
GROUPED = entries("""
min_rows : int, optional
    A public lower bound on every group's rows, for means.
""")

#: The quantiles per group: δ only pays for selecting keys, and the rank interval has no
#: levels (a group's size is private).
GROUPED_QUANTILE = entries("""
delta : float, default 0.0
    Charged only to select the keys from the data (none declared for the group column(s));
    the quantiles themselves are pure ε-DP and charged no δ. With "exponential" named, only 0.
ci : float, optional
    A confidence level: also release the rank interval's half-width per group, a column
    ``<name>_rank_error`` (post-processing, no ε; group sizes are private, so no levels).
""")


def parameter_names(function: Callable[..., Any]) -> list[str]:
    """The names ``function``'s docstring must document: its parameters but ``self``, a
    variadic one as ``*name``."""
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.name == "self":
            continue
        out.append(f"*{p.name}" if p.kind is p.VAR_POSITIONAL else p.name)
    return out


def _section(lines: list[str]) -> tuple[int, int] | None:
    """Where the *Parameters* section's entries start and end in ``lines`` (cleaned)."""
    for i, line in enumerate(lines[:-1]):
        if line == _HEADER and set(lines[i + 1]) == {"-"}:
            end = i + 2
            while end < len(lines) and not (
                    end + 1 < len(lines) and lines[end] and not lines[end][0].isspace()
                    and lines[end + 1] and set(lines[end + 1]) == {"-"}):
                end += 1
            return i, end
    return None


def _first_section(lines: list[str]) -> int:
    """The line of the first numpydoc section header (or the end)."""
    for i, line in enumerate(lines[:-1]):
        if line and not line[0].isspace() and lines[i + 1] and set(lines[i + 1]) == {"-"}:
            return i
    return len(lines)


def with_parameters(doc: str | None, names: Sequence[str],
                    tables: Sequence[Mapping[str, str]]) -> str:
    """``doc`` (cleaned) with a *Parameters* section listing ``names`` in this order: the
    docstring's own entry where it has one, else the first of ``tables`` that has it. Names
    no table has are left out (:func:`missing_parameters` finds them); the docstring's own
    entries for names outside ``names`` are kept after them."""
    lines = inspect.cleandoc(doc or "").splitlines()
    found = _section(lines)
    if found is None:
        at = _first_section(lines)
        head, own, tail = lines[:at], {}, lines[at:]
    else:
        start, end = found
        head, tail = lines[:start], lines[end:]
        own = entries("\n".join(lines[start + 2:end]))
    chosen = [own.get(n) or next((t[n] for t in tables if n in t), None) for n in names]
    body = [e for e in chosen if e is not None] + [e for n, e in own.items() if n not in names]
    while head and not head[-1]:
        head.pop()
    section = [_HEADER, "-" * len(_HEADER), *"\n".join(body).splitlines()]
    return "\n".join([*head, "", *section, *(["", *tail] if tail else [])]).rstrip() + "\n"


def shared_parameters(*tables: Mapping[str, str]) -> Callable[[F], F]:
    """Complete the decorated function's *Parameters* section from ``tables`` (first match
    wins), then :data:`COMMON`; the function itself is returned unchanged otherwise."""
    chain = (*tables, COMMON)

    def apply(function: F) -> F:
        function.__doc__ = with_parameters(function.__doc__, parameter_names(function), chain)
        return function

    return apply


def missing_parameters(function: Callable[..., Any]) -> list[str]:
    """The parameters of ``function`` its docstring (``inspect.getdoc``) does not list."""
    doc = inspect.getdoc(function) or ""
    lines = doc.splitlines()
    found = _section(lines)
    listed = entries("\n".join(lines[found[0] + 2:found[1]])) if found else {}
    return [n for n in parameter_names(function) if n not in listed]

"""Reading a release spec's TOML, and where each of its keys is (for errors at lines).

Every error is a :class:`SpecError` naming the line of the spec it is about. :mod:`tomllib`
reports positions for syntax errors only, so :class:`_Locator` scans the text once and records
the line of every table header, key and array element (by its path, e.g.
``("query", 1, "filter", 0, "op")``); a semantic error about a path is reported at the line of
its longest recorded prefix (a missing key: the line of its table's header).
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dpframe.errors import DPFrameError, SpecError

Path_ = tuple[str | int, ...]


def read_toml(text: str, source: str) -> dict[str, Any]:
    """The TOML of a spec given as text; a syntax error is a :class:`SpecError` at its line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        raise SpecError(f"TOML syntax error: {msg}", source=source, line=line) from None


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

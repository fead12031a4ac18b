"""Where each column of a Parquet file lives: the byte ranges of its column chunks, read from
the file's own footer (:func:`read_layout`), so that a release can hash only the bytes it can
read (:mod:`dpframe.provenance._binding`).

A Parquet file is ``PAR1``, the column chunks (one per row group and column: each holds that
column's pages for the row group's rows), then anything else a writer put there (page
indexes, bloom filters), the footer (a Thrift ``FileMetaData``), the footer's length (4 bytes,
little-endian) and ``PAR1`` again. Each chunk's ``ColumnMetaData`` gives where it starts
(``dictionary_page_offset`` when there is a dictionary, else ``data_page_offset``) and its
length (``total_compressed_size``); a reader of a column reads exactly those ranges, plus the
footer (and may read the page indexes and bloom filters). A dictionary offset that is zero or
not before the data pages, which readers interpret differently, gives the file no layout.

The layout splits the file into the chunks of each top-level column and **the rest**: every
byte in no chunk (both magics, the footer and its length, indexes, bloom filters, any gap).
The footer is parsed from the very bytes hashed as part of the rest (:func:`read_layout`
returns the rest's digest computed from the buffers it parsed), so as long as the rest's
digest is unchanged, so is the footer, hence every range. A file whose layout is not plain —
chunks that overlap one another or an index, a chunk in another file (``file_path``), an
encrypted footer or column, a page-index entry pointing outside its own chunk, a footer this
parser does not read — gets no layout (None): it is hashed whole.

The Thrift compact protocol reader below is generic (any struct into ``field id → value``),
used only on footers and offset indexes; it refuses (``ValueError``) anything malformed,
which makes the file hashed whole.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dpframe.provenance._digests import new_hasher

__all__ = ["ParquetLayout", "read_layout"]

Ranges = tuple[tuple[int, int], ...]  # (start, end) byte ranges, end exclusive, ascending

_MAGIC = b"PAR1"
#: a footer longer than this is not parsed (the file is hashed whole): this reader parses
#: about 6 MB of footer per second (2.4 ms for the benchmarks' 15 kB footer), once, at protect
_MAX_FOOTER = 8 << 20
#: the bytes outside every chunk are read into memory at protect; more than this: hashed whole
_MAX_REST = 64 << 20
_MAX_DEPTH = 24


@dataclass(frozen=True)
class ParquetLayout:
    """A Parquet file's bytes split in parts: ``columns`` maps each top-level column name to
    the byte ranges of its chunks (all row groups, in file order); ``rest`` holds every other
    byte. The parts are disjoint and cover the file's ``size`` bytes."""

    size: int
    columns: dict[str, Ranges]
    rest: Ranges


def read_layout(path: str, digest_name: str) -> tuple[ParquetLayout, bytes] | None:
    """The layout of the Parquet file at ``path`` and the ``digest_name`` digest
    (:func:`~dpframe.provenance._digests.new_hasher`) of its rest
    (taken from the same bytes the footer and offset indexes were parsed from); None when the
    file is not a Parquet file with a plain layout (see the module's docstring) or cannot be
    read."""
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if size < 12:
                return None
            tail = os.pread(f.fileno(), 8, size - 8)
            footer_len = struct.unpack("<I", tail[:4])[0]
            footer_start = size - 8 - footer_len
            if tail[4:] != _MAGIC or footer_len > _MAX_FOOTER or footer_start < 4:
                return None
            footer = os.pread(f.fileno(), footer_len, footer_start)
            if len(footer) != footer_len:
                return None
            meta, _ = _struct(footer, 0, 0)
            chunks = _chunks(meta, footer_start)
            if chunks is None:
                return None
            rest = _complement([r for _c, r, _i in chunks], size)
            if sum(e - s for s, e in rest) > _MAX_REST:
                return None
            parts = {s: (footer + tail if s == footer_start else _pread(f.fileno(), s, e))
                     for s, e in _split_at(rest, footer_start)}
    except (OSError, ValueError, IndexError, KeyError, TypeError, struct.error):
        return None
    if not all(_pages_inside(parts, r, index) for _c, r, index in chunks):
        return None
    columns: dict[str, list[tuple[int, int]]] = {}
    for name, r, _index in chunks:
        columns.setdefault(name, []).append(r)
    digest = new_hasher(digest_name)
    for start in sorted(parts):
        digest.update(parts[start])
    layout = ParquetLayout(size, {c: tuple(sorted(r)) for c, r in columns.items()}, rest)
    return layout, digest.digest()


def _pread(fd: int, start: int, end: int) -> bytes:
    data = os.pread(fd, end - start, start)
    if len(data) != end - start:
        raise ValueError("short read")
    return data


def _chunks(meta: dict[int, Any], footer_start: int
            ) -> list[tuple[str, tuple[int, int], tuple[int, int] | None]] | None:
    """Each column chunk's top-level column, byte range and offset-index range, from the
    ``FileMetaData``; None when the layout is not plain (the file is hashed whole)."""
    out: list[tuple[str, tuple[int, int], tuple[int, int] | None]] = []
    others: list[tuple[int, int]] = []  # page indexes and bloom filters
    leaves = _leaf_paths(meta.get(2, []))
    for group in meta.get(4, []):
        chunks = group.get(1, [])
        if len(chunks) != len(leaves):
            return None  # a reader pairs the i-th chunk with the i-th leaf of the schema
        for chunk, leaf in zip(chunks, leaves, strict=True):
            cmd = chunk.get(3)
            if cmd is None or 1 in chunk or 8 in chunk or 9 in chunk:
                return None  # another file's chunk, or an encrypted one
            path = cmd[3]
            if list(path) != list(leaf):
                return None  # its own path disagrees with the schema's leaf at its position
            start, length = cmd.get(11, cmd[9]), cmd[7]
            end = start + length
            # a dictionary offset at or after the data pages (or a zero one, as some writers
            # leave it) is read differently by different readers: no layout then
            if not (isinstance(path[0], bytes) and 4 <= start <= cmd[9] and length >= 0
                    and end <= footer_start):
                return None
            index = _extent(chunk, 4, 5)
            others += [r for r in (index, _extent(chunk, 6, 7), _extent(cmd, 14, 15)) if r]
            out.append((path[0].decode("utf-8"), (start, end), index))
    ranges = sorted(r for _c, r, _i in out)
    if any(a[1] > b[0] for a, b in itertools.pairwise(ranges)):
        return None  # overlapping chunks
    if any(_overlaps(o, ranges) or o[1] > footer_start for o in others):
        return None
    return out


def _leaf_paths(schema: list[dict[int, Any]]) -> list[tuple[bytes, ...]]:
    """The path (names from the top-level column down) of each leaf of the flattened schema
    (``SchemaElement`` list in depth-first order: element 0 the root, ``num_children``
    field 5, ``name`` field 4), in order: the i-th column chunk of every row group holds the
    i-th leaf, whatever its own ``path_in_schema`` says (readers go by position). Raises
    ``ValueError`` on a schema whose tree does not close or nests too deep."""
    if not schema:
        raise ValueError("no schema")
    leaves: list[tuple[bytes, ...]] = []
    stack: list[tuple[tuple[bytes, ...], int]] = []  # (group's path, children left)
    for i, element in enumerate(schema):
        children = element.get(5, 0)
        if i == 0:
            path: tuple[bytes, ...] = ()
        else:
            if not stack:
                raise ValueError("schema elements after the tree closed")
            parent, left = stack.pop()
            if left > 1:
                stack.append((parent, left - 1))
            name = element.get(4)
            if not isinstance(name, bytes):
                raise ValueError("a schema element without a name")
            path = (*parent, name)
        if not isinstance(children, int) or children < 0:
            raise ValueError("a schema element with a bad child count")
        if children:
            if len(stack) >= _MAX_DEPTH:
                raise ValueError("schema nested too deep")
            stack.append((path, children))
        elif i > 0:
            leaves.append(path)
    if stack:
        raise ValueError("the schema tree does not close")
    return leaves


def _extent(fields: dict[int, Any], offset_id: int, length_id: int) -> tuple[int, int] | None:
    if offset_id not in fields:
        return None
    start = fields[offset_id]
    length = fields.get(length_id)
    if length is None or start < 4 or length < 0:
        raise ValueError("an index or filter without a plain extent")
    return (start, start + length)


def _overlaps(r: tuple[int, int], ranges: list[tuple[int, int]]) -> bool:
    return any(r[0] < e and s < r[1] for s, e in ranges)


def _pages_inside(parts: dict[int, bytes], chunk: tuple[int, int],
                  index: tuple[int, int] | None) -> bool:
    """Each page an offset index lists lies within its own chunk (a reader may seek pages
    through it)."""
    if index is None:
        return True
    data = _slice(parts, *index)
    if data is None:
        return False
    try:
        located, _ = _struct(data, 0, 0)
        for page in located.get(1, []):
            start, length = page[1], page[2]
            if not (chunk[0] <= start and start + length <= chunk[1] and length >= 0):
                return False
    except (ValueError, IndexError, KeyError, TypeError, struct.error):
        return False
    return True


def _slice(parts: dict[int, bytes], start: int, end: int) -> bytes | None:
    for s, data in parts.items():
        if s <= start and end <= s + len(data):
            return data[start - s:end - s]
    return None


def _complement(ranges: list[tuple[int, int]], size: int) -> Ranges:
    """The byte ranges of ``[0, size)`` in none of ``ranges`` (disjoint)."""
    out: list[tuple[int, int]] = []
    at = 0
    for s, e in sorted(ranges):
        if s > at:
            out.append((at, s))
        at = max(at, e)
    if at < size:
        out.append((at, size))
    return tuple(out)


def _split_at(ranges: Ranges, cut: int) -> Iterator[tuple[int, int]]:
    """``ranges`` with the one holding ``cut`` split there (the footer is its own part)."""
    for s, e in ranges:
        if s < cut < e:
            yield (s, cut)
            yield (cut, e)
        else:
            yield (s, e)


# -- Thrift compact protocol -------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        out |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    n, pos = _varint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def _value(buf: bytes, pos: int, kind: int, depth: int) -> tuple[Any, int]:
    """One value of compact type ``kind`` at ``pos``."""
    if kind in (1, 2):  # a boolean field (its value is the type)
        return kind == 1, pos
    if kind == 3:
        return buf[pos], pos + 1
    if kind in (4, 5, 6):
        return _zigzag(buf, pos)
    if kind == 7:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == 8:
        n, pos = _varint(buf, pos)
        if pos + n > len(buf):
            raise ValueError("binary past the end")
        return bytes(buf[pos:pos + n]), pos + n
    if kind in (9, 10):
        return _list(buf, pos, depth)
    if kind == 11:
        return _map(buf, pos, depth)
    if kind == 12:
        return _struct(buf, pos, depth + 1)
    raise ValueError(f"compact type {kind}")


def _list(buf: bytes, pos: int, depth: int) -> tuple[list[Any], int]:
    head = buf[pos]
    pos += 1
    n, kind = head >> 4, head & 0x0F
    if n == 15:
        n, pos = _varint(buf, pos)
    if n > len(buf):
        raise ValueError("list longer than the buffer")
    out = []
    for _ in range(n):
        if kind in (1, 2):  # booleans in a list: one byte each
            out.append(buf[pos] == 1)
            pos += 1
            continue
        item, pos = _value(buf, pos, kind, depth + 1)
        out.append(item)
    return out, pos


def _map(buf: bytes, pos: int, depth: int) -> tuple[dict[Any, Any], int]:
    n, pos = _varint(buf, pos)
    if n == 0:
        return {}, pos
    kinds = buf[pos]
    pos += 1
    out = {}
    for _ in range(n):
        key, pos = _value(buf, pos, kinds >> 4, depth + 1)
        out[key], pos = _value(buf, pos, kinds & 0x0F, depth + 1)
    return out, pos


def _struct(buf: bytes, pos: int, depth: int) -> tuple[dict[int, Any], int]:
    """A struct at ``pos``: field id → value (nested structs as dicts, lists as lists)."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deep")
    out: dict[int, Any] = {}
    field = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return out, pos
        delta, kind = head >> 4, head & 0x0F
        if delta:
            field += delta
        else:
            field, pos = _zigzag(buf, pos)
        out[field], pos = _value(buf, pos, kind, depth)

"""The keys and small values of an OCDBT database, decoded here without tensorstore.

An orbax checkpoint keeps each array's zarr metadata (`.zarray` / `zarr.json`, hence its
shape and dtype) inside the item's OCDBT database. Reading structure needs only those few
values, so this module decodes the database's manifest and B+tree nodes itself, as
tensorstore's format documents them (`kvstore/ocdbt/index.rst`: varint columns, prefix-
compressed keys, zstd-compressed bodies): no `import tensorstore` (~50 ms) and no asyncio on
the `ls` path. Array data is still read by tensorstore. Databases written by tensorstore
0.1.35 and before (an older layout, told by its manifest's header: `_legacy_header`) are
read too, by `_LegacyWalk`; current tensorstore no longer reads them.

`zarr_metadata(item, read_range, size, read_many)` returns `{array name: metadata bytes}`, or
None when this decoder does not apply (no zstd decoder installed, a format version it does not
know): the caller then walks the database with tensorstore. Every length, count, offset and
path is checked against the bytes that hold it; a node may not decompress past the database's
own `max_decoded_node_bytes` (nor all nodes past 1 GiB or 1024x the bytes read), data file
paths stay inside the item, no two ranges read share a byte, the tree's height is bounded.
CRC-32C footers are not verified (the values read here are metadata; tensorstore verifies
the array reads).

Example:
    >>> _varints(b"\\x05\\xac\\x02\\x01", 0, 3)
    ([5, 300, 1], 4)
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from itertools import accumulate, pairwise
from typing import Any

from treetool._errors import LoadError
from treetool.io._orbax._data import check_component

__all__ = ["zarr_metadata"]

_MANIFEST_MAGIC = 0x0CDB3A2A
_BTREE_MAGIC = 0x0CDB20DE
_ZARR_META = (b"/.zarray", b"/zarr.json")
_ZARR_NAMES = (b".zarray", b"zarr.json")
#: B+tree levels walked at most (a database of 1e12 keys is ~10 levels deep)
_MAX_HEIGHT = 32
#: bytes of one encoded manifest or node read at most
_MAX_ENCODED = 256 << 20
#: decoded bytes of one node at most, whatever the database's configuration says
_MAX_DECODED = 256 << 20
#: decoded bytes of all nodes at most: this, or 1024 times the encoded bytes read if more
#: (real nodes decode to 4-50 times their size; the ranges read never share a byte)
_MAX_DECODED_TOTAL = 1 << 30
#: nodes read at most in one walk
_MAX_NODES = 1 << 20
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
#: the end of a zarr metadata key in NUL-separated keys
_META_END = re.compile("/(?:\\.zarray|zarr\\.json)\0")

#: read_range(path relative to the item, offset, length) -> exactly those bytes
ReadRange = Callable[[str, int, int], bytes]
#: reads of many ranges at once (remotely in parallel): [(path, offset, length)] -> bytes
ReadMany = Callable[[list[tuple[str, int, int]]], list[bytes]]


class _Bad(Exception):
    """The bytes do not follow the format (turned into one `LoadError` line)."""


class _Unsupported(Exception):
    """A database this decoder does not read (the caller falls back to tensorstore)."""


def _varints(buf: bytes, pos: int, n: int) -> tuple[list[int], int]:
    """`n` unsigned LEB128 varints from `pos`; the position after them."""
    if n < 0 or pos + n > len(buf):
        raise _Bad("truncated")
    head = buf[pos : pos + n]
    if _HIGH_BYTE.search(head) is None:  # every value below 128: one byte each
        return list(head), pos + n
    out: list[int] = []
    append = out.append
    end = len(buf)
    for _ in range(n):
        if pos >= end:
            raise _Bad("truncated")
        b = buf[pos]
        pos += 1
        if b < 0x80:
            append(b)
            continue
        value, shift = b & 0x7F, 7
        while True:
            if pos >= end or shift > 63:
                raise _Bad("bad varint")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        append(value)
    return out, pos


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    (value,), pos = _varints(buf, pos, 1)
    return value, pos


def _take(buf: bytes, pos: int, n: int) -> tuple[bytes, int]:
    if n < 0 or pos + n > len(buf):
        raise _Bad("truncated")
    return buf[pos : pos + n], pos + n


class _Zstd:
    """One zstd decoder: the standard library's (Python 3.14+) or the `zstandard` package."""

    def __init__(self) -> None:
        try:
            from compression import zstd  # type: ignore[import-not-found]

            self._std: Any = zstd
            self._pkg: Any = None
        except ImportError:
            try:
                import zstandard
            except ImportError:
                raise _Unsupported("no zstd decoder") from None
            self._std, self._pkg = None, zstandard

    def decompress(self, data: bytes, limit: int) -> bytes:
        try:
            if self._pkg is not None:
                size = self._pkg.frame_content_size(data)
                if size > limit:
                    raise _Bad(f"a node that decodes to more than {limit} bytes ({size})")
                out = self._pkg.ZstdDecompressor().decompress(data, max_output_size=limit)
            else:
                d = self._std.ZstdDecompressor()
                out = d.decompress(data, max_length=limit)
                if not d.eof:
                    raise _Bad(f"a node decoded past {limit} bytes, or truncated")
        except _Bad:
            raise
        except Exception as e:  # the decoders' own error classes
            raise _Bad(
                f"bad zstd data, or a node that decodes to more than {limit} bytes "
                f"({type(e).__name__})"
            ) from None
        return bytes(out)


def _body(blob: bytes, magic: int, what: str, zstd: _Zstd | None, limit: int) -> bytes:
    """The decoded body of a manifest or B+tree node (header checked, footer dropped)."""
    if len(blob) < 18:
        raise _Bad(f"{what} of {len(blob)} bytes")
    got, length = struct.unpack_from(">I", blob)[0], struct.unpack_from("<Q", blob, 4)[0]
    if got != magic:
        raise _Bad(f"{what} has magic {got:#010x}, expected {magic:#010x}")
    if length != len(blob):
        raise _Bad(f"{what} says {length} bytes, holds {len(blob)}")
    version, pos = _varint(blob, 12)
    compression, pos = _varint(blob, pos)
    if version != 0 or compression not in (0, 1):
        raise _Unsupported(f"{what} version {version}, compression {compression}")
    body = blob[pos:-4]
    if compression == 0:
        return body
    if zstd is None:
        raise _Unsupported("zstd")
    return zstd.decompress(body, limit)


def _legacy_header(blob: bytes, magic: int) -> bool:
    """Whether an encoded manifest has the header of tensorstore 0.1.35 and before: magic,
    then version (0) and compression (0 or 1) as one byte each. From 0.1.36 on (the release
    that also added `manifest_kind` to the configuration), the magic is followed by the
    length of the whole encoding (uint64le) and the encoding ends in a CRC-32C; the format
    version stayed 0. A length that is the blob's own tells the new header from the old one
    (an old manifest whose next 8 bytes spelled its own length would need its zstd frame
    magic, or its uuid, to be zeros)."""
    if len(blob) < 6 or struct.unpack_from(">I", blob)[0] != magic:
        return False
    if len(blob) >= 12 and struct.unpack_from("<Q", blob, 4)[0] == len(blob):
        return False
    return blob[4] == 0 and blob[5] in (0, 1)


def _legacy_body(blob: bytes, magic: int, what: str, zstd: _Zstd | None, limit: int) -> bytes:
    """The decoded body of an old manifest or node (`_legacy_header`: no length, no footer)."""
    if not _legacy_header(blob, magic):
        raise _Bad(f"{what} of tensorstore 0.1.35 or before expected, a newer one there")
    body = blob[6:]
    if blob[5] == 0:
        return body
    if zstd is None:
        raise _Unsupported("zstd")
    return zstd.decompress(body, limit)


def _file_table(buf: bytes, pos: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """The data file table: [(base_path, relative_path)]."""
    n, pos = _varint(buf, pos)
    if n > len(buf):
        raise _Bad(f"{n} data files")
    prefix, pos = _varints(buf, pos, max(n - 1, 0))
    suffix, pos = _varints(buf, pos, n)
    base, pos = _varints(buf, pos, n)
    out = []
    prev = b""
    for i in range(n):
        keep = prefix[i - 1] if i else 0
        if keep > len(prev):
            raise _Bad("bad data file path prefix")
        tail, pos = _take(buf, pos, suffix[i])
        path = prev[:keep] + tail
        if base[i] > len(path):
            raise _Bad("bad data file base path")
        out.append((path[: base[i]], path[base[i] :]))
        prev = path
    return out, pos


class _Walk:
    """The B+tree of the latest version, level by level, keeping the zarr metadata entries."""

    def __init__(self, read_many: ReadMany, zstd: _Zstd | None, limit: int) -> None:
        self._read_many, self._zstd, self._limit = read_many, zstd, limit
        self._encoded = self._decoded = 0
        self.found: dict[str, bytes] = {}
        self.indirect: list[tuple[str, tuple[str, int, int]]] = []
        self._nodes = 0

    def run(self, root: tuple[str, str, int, int], height: int) -> None:
        # a level: [(transitive path, (path, offset, length), key prefix)]
        level = [(root[0], (root[1], root[2], root[3]), b"")]
        for expect in range(height, -1, -1):
            self._nodes += len(level)
            if self._nodes > _MAX_NODES:
                raise _Bad(f"more than {_MAX_NODES} B+tree nodes")
            blobs = self._read_many([where for _, where, _ in level])
            below: list[tuple[str, tuple[str, int, int], bytes]] = []
            for (transitive, _, prefix), blob in zip(level, blobs):
                self._encoded += len(blob)
                left = max(_MAX_DECODED_TOTAL, 1024 * self._encoded) - self._decoded
                body = self._body(blob, min(self._limit, left))
                self._decoded += len(body)
                if not body or body[0] != expect:
                    raise _Bad(f"a B+tree node of height {body[0] if body else '?'}, "
                               f"expected {expect}")  # fmt: skip
                files, pos = self._files(body)
                n, pos = _varint(body, pos)
                if n > len(body):
                    raise _Bad(f"a B+tree node of {n} entries")
                if expect:
                    below += self._interior(body, pos, n, files, transitive, prefix)
                else:
                    self._leaf(body, pos, n, files, transitive, prefix)
            level = below
            if not level:
                break

    def _body(self, blob: bytes, limit: int) -> bytes:
        return _body(blob, _BTREE_MAGIC, "B+tree node", self._zstd, limit)

    def _files(self, body: bytes) -> tuple[list[tuple[bytes, bytes]], int]:
        """The node's data file table, after its height byte."""
        return _file_table(body, 1)

    def _interior(
        self, body: bytes, pos: int, n: int, files: list, transitive: str, prefix: bytes
    ) -> list[tuple[str, tuple[str, int, int], bytes]]:
        keep, pos = _varints(body, pos, max(n - 1, 0))
        suffix, pos = _varints(body, pos, n)
        common, pos = _varints(body, pos, n)
        keys, pos = _prefixed_keys(body, pos, keep, suffix)
        ids, pos = _varints(body, pos, n)
        offsets, pos = _varints(body, pos, n)
        lengths, pos = _varints(body, pos, n)
        places = [_locate(files, i, transitive) for i in ids]
        return _children(prefix, keys, common, places, offsets, lengths)

    def _leaf(
        self, body: bytes, pos: int, n: int, files: list, transitive: str, prefix: bytes
    ) -> None:
        keys, pos = _node_keys(body, pos, n)
        lengths, pos = _varints(body, pos, n)
        kinds, pos = _varints(body, pos, n)
        if max(kinds, default=0) > 1:
            raise _Bad("bad value kind")
        n_indirect = sum(kinds)
        ids, pos = _varints(body, pos, n_indirect)
        offsets, pos = _varints(body, pos, n_indirect)

        def where(j: int) -> str:  # the data file of indirect value j (asked for hits only)
            return _locate(files, ids[j], transitive)[0]

        self._keep(body, pos, prefix, keys, lengths, kinds, (where, offsets))

    def _keep(
        self,
        body: bytes,
        pos: int,
        prefix: bytes,
        keys: list[bytes],
        lengths: list[int],
        kinds: list[int],
        indirect: tuple[Callable[[int], str], list[int]],
    ) -> None:
        """Keep the zarr metadata entries of a leaf node: inline values (stored from `pos`
        on) in `found`, values stored elsewhere (`indirect`: the data file path of the j-th
        of them, and their offsets) in `indirect`, to be read next."""
        # where each inline value starts (indirect entries take no bytes here)
        starts = list(accumulate([0 if k else v for k, v in zip(kinds, lengths)], initial=pos))
        if starts[-1] > len(body):
            raise _Bad("values past the end of their node")
        if prefix:  # the key's slash may be in the prefix (`layer0.w/` + `.zarray`)
            hits = [
                i
                for i, key in enumerate(keys)
                if key.endswith(_ZARR_NAMES) and (prefix + key).endswith(_ZARR_META)
            ]
        else:
            hits = [i for i, key in enumerate(keys) if key.endswith(_ZARR_META)]
        if not hits:
            return
        where, offsets = indirect
        inline = [i for i in hits if not kinds[i]] if offsets else hits
        names = _names([keys[i] for i in inline], prefix)
        self.found.update(zip(names, _values(body, starts, inline)))
        if len(inline) < len(hits):
            rank = list(accumulate(kinds))  # indirect entries up to each entry
            for i in hits:
                if kinds[i]:
                    j = rank[i] - 1
                    self.indirect.append(
                        (_name(prefix + keys[i]), (where(j), offsets[j], lengths[i]))
                    )


class _LegacyWalk(_Walk):
    """The walk of a database written by tensorstore 0.1.35 or older (`_legacy_header`).

    Its nodes have the old header (no length, no CRC-32C footer) and no data file table: a
    data file is named by 16 raw bytes, `d/` and their hex in the database's directory. A
    leaf stores each value's kind as the low bit of its length (1: stored elsewhere), an
    interior node its subtree common prefix lengths first.
    """

    def _body(self, blob: bytes, limit: int) -> bytes:
        return _legacy_body(blob, _BTREE_MAGIC, "B+tree node", self._zstd, limit)

    def _files(self, body: bytes) -> tuple[list[tuple[bytes, bytes]], int]:
        return [], 1

    def _interior(
        self, body: bytes, pos: int, n: int, files: list, transitive: str, prefix: bytes
    ) -> list[tuple[str, tuple[str, int, int], bytes]]:
        common, pos = _varints(body, pos, n)
        keys, pos = _node_keys(body, pos, n)
        paths, pos = _file_ids(body, pos, n)
        offsets, pos = _varints(body, pos, n)
        lengths, pos = _varints(body, pos, n)
        places = [(path, "") for path in paths]
        return _children(prefix, keys, common, places, offsets, lengths)

    def _leaf(
        self, body: bytes, pos: int, n: int, files: list, transitive: str, prefix: bytes
    ) -> None:
        keys, pos = _node_keys(body, pos, n)
        encoded, pos = _varints(body, pos, n)
        kinds = [e & 1 for e in encoded]
        n_indirect = sum(kinds)
        ids, pos = _take(body, pos, 16 * n_indirect)
        offsets, pos = _varints(body, pos, n_indirect)
        lengths = [e >> 1 for e in encoded]

        def where(j: int) -> str:  # the data file of indirect value j (asked for hits only)
            return _file_path(ids, j)

        self._keep(body, pos, prefix, keys, lengths, kinds, (where, offsets))


def _node_keys(body: bytes, pos: int, n: int) -> tuple[list[bytes], int]:
    """A node's `n` keys: the bytes each keeps of the previous key, its new bytes' lengths,
    then the new bytes (`_prefixed_keys`)."""
    keep, pos = _varints(body, pos, max(n - 1, 0))
    suffix, pos = _varints(body, pos, n)
    return _prefixed_keys(body, pos, keep, suffix)


def _children(
    prefix: bytes,
    keys: list[bytes],
    common: list[int],
    places: list[tuple[str, str]],
    offsets: list[int],
    lengths: list[int],
) -> list[tuple[str, tuple[str, int, int], bytes]]:
    """An interior node's children: (the transitive path below, (data file, offset, length)
    of the child node, the prefix its keys share: `prefix` + the first `common` bytes of its
    key). `places` are (data file, transitive path) of each child."""
    out = []
    for key, n_common, (path, below), offset, length in zip(keys, common, places, offsets, lengths):
        if n_common > len(key):
            raise _Bad("bad subtree common prefix")
        out.append((below, (path, offset, length), prefix + key[:n_common]))
    return out


def _file_ids(body: bytes, pos: int, n: int) -> tuple[list[str], int]:
    """`n` data file ids of the old layout (16 bytes each) as their paths in the database."""
    raw, pos = _take(body, pos, 16 * n)
    return [_file_path(raw, j) for j in range(n)], pos


def _file_path(ids: bytes, j: int) -> str:
    """The path of the `j`-th data file id of the old layout in `ids` (16 bytes each)."""
    return f"d/{ids[16 * j : 16 * j + 16].hex()}"


def _prefixed_keys(
    body: bytes, pos: int, keep: list[int], suffix: list[int]
) -> tuple[list[bytes], int]:
    """Keys stored as (bytes kept from the previous key, new bytes): the full keys."""
    total = sum(suffix)
    end = pos + total
    if end > len(body):
        raise _Bad("truncated")
    keys: list[bytes] = []
    append = keys.append
    prev = b""
    for k, s in zip([0, *keep], suffix):
        nxt = pos + s
        prev = prev[:k] + body[pos:nxt]
        pos = nxt
        append(prev)
    if sum(map(len, keys)) != sum(keep) + total:
        raise _Bad("bad key prefix")  # a prefix longer than the key before it
    return keys, end


def _values(body: bytes, starts: list[int], picked: list[int]) -> list[bytes]:
    """The inline values `picked` (`body[starts[i]:starts[i + 1]]`), a value equal to the one
    before it given as that same object (arrays of one shape and dtype have one metadata
    text: later its hash is computed once, and its copies are not made)."""
    out: list[bytes] = []
    append = out.append
    last = b""
    size = 0
    for i in picked:
        start = starts[i]
        if starts[i + 1] - start == size and body.startswith(last, start):
            append(last)
            continue
        last = body[start : starts[i + 1]]
        size = len(last)
        append(last)
    return out


def _names(keys: list[bytes], prefix: bytes) -> list[str]:
    """The array names of zarr metadata keys (`prefix + key` less its `/.zarray` or
    `/zarr.json`), decoded as one text: keys joined by NUL, the suffix dropped before each
    NUL in one left-to-right pass (keys holding a NUL are decoded one by one)."""
    sep = b"\0" + prefix
    joined = prefix + sep.join(keys) + b"\0"
    if joined.count(b"\0") != len(keys):
        return [_name(prefix + key) for key in keys]
    try:
        text = joined.decode()
    except UnicodeDecodeError:
        raise _Bad("a key that is not UTF-8") from None
    return _META_END.sub("\0", text).split("\0")[:-1]


def _name(key: bytes) -> str:
    try:
        return key[: key.rindex(b"/")].decode()
    except UnicodeDecodeError:
        raise _Bad("a key that is not UTF-8") from None


def _locate(files: list[tuple[bytes, bytes]], i: int, transitive: str) -> tuple[str, str]:
    """(the data file's path in the item, the transitive path of what it references)."""
    if i >= len(files):
        raise _Bad(f"data file {i} of {len(files)}")
    base, rel = files[i]
    try:
        below = transitive + base.decode()
        return below + rel.decode(), below
    except UnicodeDecodeError:
        raise _Bad("a data file path that is not UTF-8") from None


def zarr_metadata(
    item: str, read_range: ReadRange, size: int, read_many: ReadMany
) -> dict[str, bytes] | None:
    """array name -> the bytes of its `.zarray` / `zarr.json`, from the latest version of the
    OCDBT database at `item` (`size`: the bytes of its `manifest.ocdbt`); None when this
    decoder cannot read it (the caller uses tensorstore).

    Paths given to `read_range` / `read_many` are relative to `item` and checked to stay in it.
    """
    try:
        try:
            zstd: _Zstd | None = _Zstd()
        except _Unsupported:
            zstd = None
        if size > _MAX_ENCODED:
            raise _Bad(f"a manifest of {size} bytes")
        blob = read_range("manifest.ocdbt", 0, size)
        legacy = _legacy_header(blob, _MANIFEST_MAGIC)
        if legacy:  # tensorstore 0.1.35 or before: no manifest kind, no data file table
            body = _legacy_body(blob, _MANIFEST_MAGIC, "manifest", zstd, _MAX_DECODED)
            kind, pos = 0, 16  # after the database's uuid
        else:
            body = _body(blob, _MANIFEST_MAGIC, "manifest", zstd, _MAX_DECODED)
            if len(body) <= 16:
                raise _Bad("truncated")
            kind, pos = body[16], 17  # one byte, after the database's uuid
        if kind == 1:
            raise _Unsupported("numbered manifests")  # the versions are in other files
        if kind != 0:
            raise _Bad(f"manifest kind {kind}, expected 0 or 1")
        (_, max_node), pos = _varints(body, pos, 2)  # the inline value limit, the node limit
        if pos + 1 > len(body):
            raise _Bad("truncated")
        method, pos = _varint(body, pos + 1)  # after version_tree_arity_log2
        if method == 1:
            pos += 4  # the zstd level
        elif method != 0:
            raise _Unsupported(f"compression method {method}")
        files, pos = ([], pos) if legacy else _file_table(body, pos)
        n, pos = _varint(body, pos)
        if n == 0 or n > len(body):
            raise _Unsupported("no inline versions")
        _, pos = _varints(body, pos, n)  # generation numbers, increasing: the last is newest
        heights, pos = _take(body, pos, n)
        if legacy:
            paths, pos = _file_ids(body, pos, n)
        else:
            ids, pos = _varints(body, pos, n)
        offsets, pos = _varints(body, pos, n)
        lengths, pos = _varints(body, pos, n)
        num_keys, pos = _varints(body, pos, n)
        if num_keys[-1] == 0:
            return {}  # an empty database
        height = heights[-1]
        if height > _MAX_HEIGHT:
            raise _Bad(f"a B+tree {height} levels high")
        path, transitive = (paths[-1], "") if legacy else _locate(files, ids[-1], "")
        checked = _checked(read_many, item)
        limit = min(max_node or _MAX_DECODED, _MAX_DECODED)
        walk = (_LegacyWalk if legacy else _Walk)(checked, zstd, limit)
        walk.run((transitive, path, offsets[-1], lengths[-1]), height)
        found = walk.found
        if walk.indirect:
            values = checked([where for _, where in walk.indirect])
            for (name, _), value in zip(walk.indirect, values):
                found[name] = value
        return found
    except _Unsupported:
        return None
    except _Bad as e:
        raise LoadError(f"{item}: the OCDBT database: {e}") from None


def _checked(read_many: ReadMany, item: str) -> ReadMany:
    """`read_many` refusing paths that leave the item, ranges beyond the read limit, and
    ranges that share bytes with one read before (B+tree nodes and values never do, so each
    byte of the data files is read at most once)."""
    spans: dict[str, list[tuple[int, int]]] = {}

    def read(ranges: list[tuple[str, int, int]]) -> list[bytes]:
        for path, offset, n in ranges:
            try:
                check_component(path, item)
            except LoadError:
                raise _Bad(f"data file {path!r:.80} leaves the checkpoint") from None
            if n > _MAX_ENCODED:
                raise _Bad(f"a read of {n} bytes from {path}")
            spans.setdefault(path, []).append((offset, offset + n))
        for path in {path for path, _, _ in ranges}:
            known = spans[path]
            known.sort()
            for (start, end), (start2, end2) in pairwise(known):
                if start2 < end:
                    raise _Bad(f"{path}: bytes {start}-{end} and {start2}-{end2} overlap")
        return read_many(ranges)

    return read

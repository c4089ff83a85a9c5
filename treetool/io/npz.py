"""`.npy` and `.npz` files: headers only; payloads stay on disk as `LazyArray` leaves.

In an `.npz`, stored members point straight into the zip file; compressed members are
decompressed only when the leaf is read. Object arrays (a pickle inside the `.npy`) go through
treetool's safe unpickler.

A `.npy` header is the magic `\x93NUMPY`, a version, a length and a Python dict literal. A
standard dtype description (`<f4`, `|b1`, `<V2`) stays a string, described without numpy
(`_dtypes.spec_facts`: listing an `.npz` does not import numpy); any other is turned into a
dtype by `numpy.lib.format.descr_to_dtype`. The dict text itself is parsed here,
with `ast.literal_eval` (never evaluated), and not by `numpy.lib.format.read_array_header_1_0`
/ `_2_0`, because those are not safe on hostile headers:

- they read the whole claimed header (up to 4 GiB for version 2) before `max_header_size` is
  checked; here the length is checked first, against `_MAX_HEADER`;
- when `literal_eval` fails on a version 1 or 2 header they retry it through a Python 2
  filter built on `tokenize`: measured on a 1 MiB header of unclosed brackets, 18-72 s and up
  to 600 MB (seconds at 64 KiB, about a second at numpy's own 10 KB limit, for each member of
  an `.npz`), and the filter's `tokenize.TokenError` escapes as an error that is not a
  `ValueError`;
- they run `descr_to_dtype` on any descr, where a list of 60,000 fields costs seconds; here a
  descr is a short string or a list of at most 1,000 fields, and a shape of more than
  `MAX_NDIM` dimensions is refused before `literal_eval` runs.

Parsed headers are cached by their bytes: the arrays of one shape and dtype share a header.
"""

from __future__ import annotations

import ast
import io
import itertools
import math
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._leaves._dtypes import spec_facts
from treetool._leaves._streams import ByteStream
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._keys import tree_from_keystrs
from treetool.io._loaded import Loaded
from treetool.io._safety._limits import (
    MAX_NDIM,
    ZIP_BYTES_PER_MEMBER,
    Budget,
    check_dtype,
    check_shape,
    check_zip_directory,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FORMAT",
    "NPY_FORMAT",
    "NpyHeader",
    "is_npy_sequence",
    "parse_npy_header",
    "read_npy_at",
]

_MAGIC = b"\x93NUMPY"  # numpy.lib.format.MAGIC_PREFIX
_MAGIC_LEN = len(_MAGIC) + 2  # and the major and minor version bytes
_MAX_HEADER = 1 << 20
#: .npy major version -> the struct format and size of its header length field, and the
#: header's text encoding (numpy.lib.format keeps this table private)
_VERSIONS = {1: ("<H", 2, "latin1"), 2: ("<I", 4, "latin1"), 3: ("<I", 4, "utf-8")}


class NpyHeader:
    """The parsed header of one `.npy` record: shape, dtype, order and where the data starts.

    `dtype` is the descr string of a standard dtype (`"<f4"`: `LazyArray` takes it, numpy is
    not needed to list it), else a numpy dtype; `name` and `itemsize` are numpy's.

    Example:
        >>> h = NpyHeader((2, 3), "<f4", False, 128)
        >>> h.name, h.nbytes, h.hasobject
        ('float32', 24, False)
    """

    __slots__ = ("data_offset", "dtype", "fortran_order", "hasobject", "itemsize", "name", "shape")

    def __init__(
        self, shape: tuple[int, ...], dtype: str | np.dtype, fortran_order: bool, data_offset: int
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self.fortran_order = fortran_order
        self.data_offset = data_offset
        facts = spec_facts(dtype) if isinstance(dtype, str) else None
        if facts is not None:
            self.name, self.itemsize = facts
            self.hasobject = False
        else:
            assert not isinstance(dtype, str)  # _descr_dtype keeps only standard descrs
            self.name, self.itemsize, self.hasobject = dtype.name, dtype.itemsize, dtype.hasobject

    @property
    def nbytes(self) -> int:
        """Bytes of the payload (0 for object arrays, whose size is unknown up front)."""
        return 0 if self.hasobject else math.prod(self.shape) * self.itemsize


_header_cache: dict[bytes, tuple[tuple[int, ...], str | np.dtype, bool]] = {}
_SHAPE_TEXT = re.compile(rb"""['"]shape['"]\s*:\s*\(([^)]*)\)""")


def parse_npy_header(fh: IO[bytes], where: str) -> NpyHeader:
    """Parse the header at the current position of `fh` (data_offset is relative to it)."""
    magic = fh.read(_MAGIC_LEN)
    if len(magic) != _MAGIC_LEN or magic[: len(_MAGIC)] != _MAGIC:  # short, or not the magic
        raise LoadError(f"{where}: not a .npy record (bad magic)")
    major = magic[len(_MAGIC)]
    version = _VERSIONS.get(major)
    if version is None:
        raise LoadError(f"{where}: unsupported .npy version {major}")
    length_format, length_size, encoding = version
    raw = fh.read(length_size)
    if len(raw) < length_size:
        raise LoadError(f"{where}: truncated .npy header")
    hlen = struct.unpack(length_format, raw)[0]
    start = _MAGIC_LEN + length_size
    if hlen > _MAX_HEADER:
        raise LoadError(f"{where}: .npy header of {hlen} bytes is too long")
    text = fh.read(hlen)
    if len(text) < hlen:
        raise LoadError(f"{where}: truncated .npy header")
    key = bytes((major,)) + text
    known = _header_cache.get(key)  # arrays of one shape and dtype repeat their header
    if known is None:
        m = _SHAPE_TEXT.search(text)
        if m is not None and m.group(1).count(b",") > MAX_NDIM:  # before literal_eval runs
            ndim = m.group(1).rstrip(b", ").count(b",") + 1
            raise LoadError(f"{where}: .npy header: {ndim} dimensions, more than {MAX_NDIM}")
        known = _parse_header_text(text, encoding, where)
        if len(_header_cache) < 4096:
            _header_cache[key] = known
    shape, dtype, fortran = known
    return NpyHeader(shape, dtype, fortran, start + hlen)


def _parse_header_text(
    text: bytes, encoding: str, where: str
) -> tuple[tuple[int, ...], str | np.dtype, bool]:
    try:
        header = ast.literal_eval(text.decode(encoding))
    except Exception:  # SyntaxError, ValueError (huge ints), OverflowError (complex), ...
        raise LoadError(f"{where}: malformed .npy header") from None
    if type(header) is not dict or not {"descr", "fortran_order", "shape"} <= header.keys():
        raise LoadError(f"{where}: malformed .npy header")
    shape = header["shape"]
    if type(shape) is not tuple:
        raise LoadError(f"{where}: bad shape in .npy header: not a tuple")
    shape = check_shape(shape, f"{where}: .npy header")
    dtype = _descr_dtype(header["descr"], where)
    if not isinstance(dtype, str) and not dtype.hasobject:
        check_dtype(dtype, f"{where}: .npy header")
    fortran = header["fortran_order"]
    if type(fortran) is not bool:
        raise LoadError(f"{where}: bad fortran_order in .npy header")
    return shape, dtype, fortran


def _descr_dtype(descr: Any, where: str) -> str | np.dtype:
    if isinstance(descr, str) and spec_facts(descr) is not None:
        return descr  # a standard dtype: numpy makes it when the data is read
    import numpy as np
    from numpy.lib import format as np_format

    if isinstance(descr, str) and len(descr) <= 32:
        try:
            return np.dtype(descr)
        except Exception:  # TypeError, SyntaxError and ValueError for odd strings
            pass
    if isinstance(descr, list) and len(descr) <= 1000:  # structured, or void-padded (bfloat16)
        try:
            return np_format.descr_to_dtype(descr)
        except Exception:
            pass
    shown = repr(descr) if len(repr(descr)) <= 80 else repr(descr)[:77] + "..."
    raise LoadError(f"{where}: unsupported dtype {shown} in .npy header")


#: an object array's pickle is copied out of its member before it is read: at most this many
#: bytes, or 32 times the file's size if that is more (deflate expands at most ~1,000 times)
_OBJECT_COPY_MIN = 64 << 20


def object_copy_limit(file_size: int) -> int:
    """The most bytes an object array's pickle may take, for a file of `file_size` bytes."""
    return max(_OBJECT_COPY_MIN, 32 * file_size)


def _object_array(
    fh: IO[bytes], hdr: NpyHeader, where: str, lazy: bool, partial: bool, limit: int
) -> tuple[Any, list[str]]:
    """An object array holds a pickle: read it with the safe unpickler.

    The pickle is copied (at most `limit` bytes) to an anonymous in-memory file where the
    system has them, else to a temporary file that is removed whatever happens.
    """
    from treetool.io.pickle import read_pickle

    fd, name = _scratch_file()
    try:
        copied = 0
        with os.fdopen(os.dup(fd), "wb") as out:
            while chunk := fh.read(1 << 20):
                copied += len(chunk)
                if copied > limit:
                    raise LoadError(
                        f"{where}: object array pickle is larger than {limit} bytes "
                        "(a decompression bomb?)"
                    )
                out.write(chunk)
        try:
            r = read_pickle(name, lazy=False, partial=partial)
        except LoadError as e:
            raise LoadError(f"{where}: object array: {str(e).split(': ', 1)[-1]}") from None
    finally:
        os.close(fd)
        if not name.startswith("/proc/"):
            os.unlink(name)
    return r.tree, r.blocked


def _scratch_file() -> tuple[int, str]:
    """(fd, a path that opens it): a memfd on Linux, else a temporary file."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("treetool-npz-object")
        return fd, f"/proc/self/fd/{fd}"
    import tempfile  # (imports random): only where there is no memfd

    fd, name = tempfile.mkstemp(suffix=".pkl")
    return fd, name


def read_npy_at(
    path: str,
    offset: int = 0,
    lazy: bool = True,
    fh: IO[bytes] | None = None,
    src: Source | None = None,
) -> tuple[Any, int]:
    """One `.npy` record starting at `offset`; returns (array or LazyArray, offset after it).

    `fh`, an open handle on `path` (and `src`, its Source), saves opening the file for each of
    many records.
    """
    src = source_for(path) if src is None else src
    if fh is None:
        with src.open() as own:
            return read_npy_at(path, offset, lazy, own, src)
    size = src.size
    fh.seek(offset)
    hdr = parse_npy_header(fh, path)
    if hdr.hasobject:
        raise LoadError(f"{path}: object arrays inside an equinox leaf file are not supported")
    start = offset + hdr.data_offset
    stop = start + hdr.nbytes
    if stop > size:
        raise LoadError(
            f"{path}: truncated .npy data: {hdr.name}{list(hdr.shape)} needs {hdr.nbytes} bytes at offset {start}, {size - start} left"
        )
    arr = LazyArray(
        hdr.shape, hdr.dtype, path, start, fortran_order=hdr.fortran_order, source=_remote(src)
    )
    return (arr if lazy else arr.read().copy()), stop


def _remote(src: Source) -> Source | None:
    return src if src.remote else None


def is_npy_sequence(path: str) -> bool:
    """Whether the file holds more than one `.npy` record (equinox `tree_serialise_leaves`)."""
    try:
        _, end = read_npy_at(path, 0)
    except LoadError:
        return False
    src = source_for(path)
    if end + 6 > src.size:
        return False
    return src.read(end, 6) == _MAGIC


def _read_file(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for `.npy` and `.npz` files."""
    path, trust, lazy, partial = src.name, opts.trust, opts.lazy, opts.partial
    head = src.read(0, min(6, src.size))
    if head == _MAGIC:
        format = "npy"
        with src.open() as fh:
            hdr = parse_npy_header(fh, path)
            if hdr.hasobject:
                if trust:
                    fh.seek(0)
                    import numpy as np

                    return Loaded(np.load(fh, allow_pickle=True), format)
                limit = object_copy_limit(src.size)
                tree, blocked = _object_array(fh, hdr, path, lazy, partial, limit)
                return Loaded(tree, format, blocked)
        arr, _ = read_npy_at(path, 0, lazy)
        return Loaded(arr, format)
    out = _read_npz(path, trust=trust, lazy=lazy, partial=partial, format="npz")
    if out.error is None:
        out.tree = _with_record(path, out.tree)
    if opts.like is not None:
        from treetool.io._structure import fit_like

        flat = out.tree if isinstance(out.tree, dict) else None
        out.tree = fit_like(path, opts.like, out.tree, flat)
    return out


#: the member `tt.save` writes its structure record to (`treetool.io._save.NPZ_RECORD`)
_RECORD_MEMBER = "__treetool_tree__"


def _with_record(path: str, tree: Any) -> Any:
    """The tree a structure record (`tt.save`'s `__treetool_tree__` member, uint8 JSON)
    describes, on top of the other members; the tree as read when there is no record."""
    if type(tree) is not dict or _RECORD_MEMBER not in tree:
        return tree
    rec = tree[_RECORD_MEMBER]
    if str(getattr(rec, "dtype", "")) != "uint8" or len(getattr(rec, "shape", ())) != 1:
        return tree
    import numpy as np

    from treetool.io import _structure

    text = np.asarray(rec).tobytes()
    node = _structure.parse(path, text)
    rest = {k: v for k, v in tree.items() if k != _RECORD_MEMBER}
    return _structure.rebuild(path, node, rest)


def _sniff_npy(probe: Probe) -> bool:
    return probe.head.startswith(_MAGIC)


def _sniff_npz(probe: Probe) -> bool:
    """A zip (a torch zip, also one, was claimed before: its table row comes first)."""
    return probe.head[:4] in (b"PK\x03\x04", b"PK\x05\x06")


NPY_FORMAT = Format("npy", sniff=_sniff_npy, read=_read_file)
FORMAT = Format("npz", sniff=_sniff_npz, read=_read_file)


def _zip_directory(src: Source, size: int) -> tuple[int, int] | None:
    """(members, central directory bytes) the zip's end record claims (zip64 too), read
    before zipfile reads (and allocates) the directory; None when there is no end record."""
    tail_len = min(size, 22 + 65535)
    tail = src.read(size - tail_len, tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        return None
    count, cd_size = struct.unpack_from("<HI", tail, at + 10)
    zip64 = at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07"
    if not zip64 or (count != 0xFFFF and cd_size != 0xFFFFFFFF):
        return count, cd_size
    start = struct.unpack_from("<Q", tail, at - 20 + 8)[0]
    rec = src.read(start, 56) if start + 56 <= size else b""
    if len(rec) < 56 or rec[:4] != b"PK\x06\x06":
        return None
    count, cd_size = struct.unpack_from("<QQ", rec, 32)
    return count, cd_size


def _read_npz(path: str, *, trust: bool, lazy: bool, partial: bool, format: str) -> Loaded:
    src = source_for(path)
    with src.open() as zfh:
        return _read_zip(src, zfh, trust=trust, lazy=lazy, partial=partial, format=format)


def _read_zip(
    src: Source, zfh: IO[bytes], *, trust: bool, lazy: bool, partial: bool, format: str
) -> Loaded:
    path = src.name
    size = src.size
    claimed = _zip_directory(src, size)
    limit = 1000 + size // ZIP_BYTES_PER_MEMBER
    if claimed is not None:  # what the end record claims, before zipfile reads the directory
        check_zip_directory(path, size, *claimed)
    members = Budget(path, "zip members", limit)
    try:
        zf = zipfile.ZipFile(zfh)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OverflowError) as e:
        raise LoadError(f"{path}: not a valid npz (zip) file: {e}") from None
    flat: dict[str, Any] = {}
    blocked: set[str] = set()
    error: str | None = None
    with zf, src.open() as raw:
        for info in zf.infolist():
            members.take()
            name = info.filename
            key = name[:-4] if name.endswith(".npy") else name
            where = f"{path}[{name}]"
            try:
                if key in flat:  # zipfile keeps both; the tree cannot
                    raise LoadError(f"{where}: a second member named {key!r:.120}")
                leaf = _member(zf, src, raw, info, where, size, trust, lazy, partial, blocked)
            except (LoadError, *_DAMAGE) as e:
                # what zipfile and zlib raise on damage is one LoadError too
                err = e if isinstance(e, LoadError) else _damaged(where, e)
                if not partial:
                    raise err from None
                error = str(err)  # --partial: the members before the damaged one
                break
            flat[key] = leaf
    if error is None:
        _check_overlaps(path, flat)
    return Loaded(tree_from_keystrs(flat), format, sorted(blocked), error)


def _check_overlaps(path: str, flat: dict[str, Any]) -> None:
    """Refuse stored members whose array bytes overlap (a zip whose directory points several
    members at the same data): one sort of the spans, each checked against the one before."""
    spans = sorted(
        (leaf.offset, leaf.offset + leaf.nbytes, key)
        for key, leaf in flat.items()
        if type(leaf) is LazyArray and leaf.nbytes and leaf.file == path and leaf._opener is None
    )
    for (a0, a1, a), (b0, b1, b) in itertools.pairwise(spans):
        if b0 < a1:
            raise LoadError(
                f"{path}: members {a[:120]!r} (bytes {a0}-{a1}) and {b[:120]!r} "
                f"(bytes {b0}-{b1}) overlap"
            )


#: what zipfile, zlib and struct raise on a damaged member
_DAMAGE = (
    zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError,
    ValueError, OverflowError, struct.error,
)  # fmt: skip


def _damaged(where: str, e: BaseException) -> LoadError:
    return LoadError(f"{where}: damaged member: {_damage(e)}")


def _member(
    zf: zipfile.ZipFile,
    src: Source,
    raw: IO[bytes],
    info: zipfile.ZipInfo,
    where: str,
    size: int,
    trust: bool,
    lazy: bool,
    partial: bool,
    blocked: set[str],
) -> Any:
    """One member of an npz: a LazyArray into the file, or an object array's tree."""
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise LoadError(f"{where}: unsupported zip compression {info.compress_type}")
    if info.compress_type == zipfile.ZIP_STORED and info.flag_bits & 0x1 == 0:
        start = _stored_data_offset(raw, info, where)
        raw.seek(start)
        hdr = parse_npy_header(raw, where)
        if hdr.hasobject:
            return _object_member(zf, info, where, size, trust, lazy, partial, blocked)
        _check_member_size(info, hdr, where)
        offset = start + hdr.data_offset
        if offset + hdr.nbytes > size:
            raise LoadError(f"{where}: truncated member data")
        leaf = LazyArray(
            hdr.shape,
            hdr.dtype,
            src.name,
            offset,
            fortran_order=hdr.fortran_order,
            source=_remote(src),
        )
        return leaf if lazy else leaf.read().copy()
    with zf.open(info) as member:
        hdr = parse_npy_header(member, where)
    if hdr.hasobject:
        return _object_member(zf, info, where, size, trust, lazy, partial, blocked)
    _check_member_size(info, hdr, where)
    leaf = LazyArray(
        hdr.shape,
        hdr.dtype,
        src.name,
        hdr.data_offset,
        fortran_order=hdr.fortran_order,
        opener=_member_opener(src, info, hdr.data_offset),
        seekable=False,
    )
    return leaf if lazy else leaf.read().copy()


def _object_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    where: str,
    size: int,
    trust: bool,
    lazy: bool,
    partial: bool,
    blocked: set[str],
) -> Any:
    if trust:
        return _trusted_member(zf, info)
    limit = object_copy_limit(size)
    if info.file_size > limit:  # zipfile never reads past the size the directory gives
        raise LoadError(
            f"{where}: object array member expands to {info.file_size} bytes, more than "
            f"{limit} for a file of {size} bytes (a decompression bomb?)"
        )
    with zf.open(info) as member:
        hdr = parse_npy_header(member, where)
        tree, b = _object_array(member, hdr, where, lazy, partial, limit)
    blocked.update(b)
    return tree


def _damage(e: BaseException) -> str:
    if isinstance(e, EOFError):
        return "the file ends inside its compressed data"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _check_member_size(info: zipfile.ZipInfo, hdr: NpyHeader, where: str) -> None:
    expected = hdr.data_offset + hdr.nbytes
    if info.file_size != expected:
        raise LoadError(
            f"{where}: member is {info.file_size} bytes but its header says {expected} "
            f"({hdr.name}{list(hdr.shape)})"
        )


def _trusted_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    import numpy as np

    with zf.open(info) as member:
        return np.load(member, allow_pickle=True)


def _stored_data_offset(raw: IO[bytes], info: zipfile.ZipInfo, where: str) -> int:
    """File offset of a stored member's data: after its local header and extra field."""
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise LoadError(f"{where}: bad zip local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _member_opener(src: Source, info: zipfile.ZipInfo, skip: int) -> Callable[[], ByteStream]:
    """Open a compressed member positioned at its array data (decompresses on read)."""

    def opener() -> ByteStream:
        fh = src.open()
        zf = zipfile.ZipFile(fh)
        member = zf.open(info)
        member.read(skip)
        return _Closing(member, zf, fh)

    return opener


class _Closing:
    """A member stream that also closes its zip file."""

    def __init__(self, member: IO[bytes], zf: zipfile.ZipFile, fh: IO[bytes]) -> None:
        self._member = member
        self._zf = zf
        self._fh = fh

    def read(self, n: int = -1) -> bytes:
        try:
            return self._member.read(n)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
            name = getattr(self._member, "name", "?")
            raise LoadError(f"{self._zf.filename}[{name}]: damaged member: {_damage(e)}") from None

    def close(self) -> None:
        self._member.close()
        self._zf.close()
        self._fh.close()

    def seek(self, offset: int, whence: int = 0, /) -> int:
        raise io.UnsupportedOperation("a one-way stream: read it from the start")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a stream over a part of a file has no descriptor")

    def __enter__(self) -> _Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

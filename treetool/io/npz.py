"""`.npy` and `.npz` files: headers only; payloads stay on disk as `LazyArray` leaves.

A `.npy` header is a Python literal; it is parsed with `ast.literal_eval`, never evaluated. In
an `.npz`, stored members point straight into the zip file; compressed members are decompressed
only when the leaf is read. Object arrays (a pickle inside the `.npy`) go through treetool's
safe unpickler.
"""

from __future__ import annotations

import ast
import math
import os
import struct
import tempfile
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from .._arrays import LazyArray
from .._errors import LoadError
from ._keys import tree_from_keystrs
from ._source import Source, source_for

__all__ = ["NpyHeader", "is_npy_sequence", "parse_npy_header", "read"]

_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 20


class NpyHeader:
    """The parsed header of one `.npy` record: shape, dtype, order and where the data starts."""

    __slots__ = ("data_offset", "dtype", "fortran_order", "shape")

    def __init__(
        self, shape: tuple[int, ...], dtype: np.dtype, fortran_order: bool, data_offset: int
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self.fortran_order = fortran_order
        self.data_offset = data_offset

    @property
    def nbytes(self) -> int:
        """Bytes of the payload (0 for object arrays, whose size is unknown up front)."""
        return 0 if self.dtype.hasobject else math.prod(self.shape) * self.dtype.itemsize


def parse_npy_header(fh: IO[bytes], where: str) -> NpyHeader:
    """Parse the header at the current position of `fh` (data_offset is relative to it)."""
    magic = fh.read(8)
    if len(magic) < 8 or magic[:6] != _MAGIC:
        raise LoadError(f"{where}: not a .npy record (bad magic)")
    major = magic[6]
    if major == 1:
        raw = fh.read(2)
        if len(raw) < 2:
            raise LoadError(f"{where}: truncated .npy header")
        hlen, start = struct.unpack("<H", raw)[0], 10
    elif major in (2, 3):
        raw = fh.read(4)
        if len(raw) < 4:
            raise LoadError(f"{where}: truncated .npy header")
        hlen, start = struct.unpack("<I", raw)[0], 12
    else:
        raise LoadError(f"{where}: unsupported .npy version {major}")
    if hlen > _MAX_HEADER:
        raise LoadError(f"{where}: .npy header of {hlen} bytes is too long")
    text = fh.read(hlen)
    if len(text) < hlen:
        raise LoadError(f"{where}: truncated .npy header")
    try:
        header = ast.literal_eval(text.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        raise LoadError(f"{where}: malformed .npy header") from None
    if not isinstance(header, dict) or not {"descr", "fortran_order", "shape"} <= header.keys():
        raise LoadError(f"{where}: malformed .npy header")
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise LoadError(f"{where}: bad shape {shape!r} in .npy header")
    dtype = _descr_dtype(header["descr"], where)
    return NpyHeader(shape, dtype, bool(header["fortran_order"]), start + hlen)


def _descr_dtype(descr: Any, where: str) -> np.dtype:
    if isinstance(descr, str) and len(descr) <= 32:
        try:
            return np.dtype(descr)
        except TypeError:
            pass
    if isinstance(descr, list):  # structured, or void-padded (how bfloat16 is saved: |V2)
        try:
            from numpy.lib.format import descr_to_dtype

            return descr_to_dtype(descr)
        except (TypeError, ValueError):
            pass
    raise LoadError(f"{where}: unsupported dtype {descr!r} in .npy header")


def _object_array(
    fh: IO[bytes], hdr: NpyHeader, where: str, lazy: bool, partial: bool
) -> tuple[Any, list[str]]:
    """An object array holds a pickle: read it with the safe unpickler."""
    from .pickle import read_pickle

    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as tmp:
        while chunk := fh.read(1 << 20):
            tmp.write(chunk)
    try:
        r = read_pickle(tmp.name, lazy=False, partial=partial)
    except LoadError as e:
        raise LoadError(f"{where}: object array: {str(e).split(': ', 1)[-1]}") from None
    finally:
        os.unlink(tmp.name)
    return r.tree, r.blocked


def read_npy_at(path: str, offset: int = 0, lazy: bool = True) -> tuple[Any, int]:
    """One `.npy` record starting at `offset`; returns (array or LazyArray, offset after it)."""
    src = source_for(path)
    size = src.size
    with src.open() as fh:
        fh.seek(offset)
        hdr = parse_npy_header(fh, path)
        if hdr.dtype.hasobject:
            raise LoadError(f"{path}: object arrays inside an equinox leaf file are not supported")
        start = offset + hdr.data_offset
        stop = start + hdr.nbytes
        if stop > size:
            raise LoadError(
                f"{path}: truncated .npy data: {hdr.dtype.name}{list(hdr.shape)} needs {hdr.nbytes} bytes at offset {start}, {size - start} left"
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


def read(
    path: str,
    *,
    trust: bool = False,
    lazy: bool = True,
    like: Any = None,
    partial: bool = False,
    format: str = "npz",
) -> Any:
    """`treetool.io.read` for `.npy` and `.npz` files."""
    from . import Loaded

    src = source_for(path)
    head = src.read(0, min(6, src.size))
    if head == _MAGIC:
        with src.open() as fh:
            hdr = parse_npy_header(fh, path)
            if hdr.dtype.hasobject:
                if trust:
                    fh.seek(0)
                    return Loaded(np.load(fh, allow_pickle=True), format)
                tree, blocked = _object_array(fh, hdr, path, lazy, partial)
                return Loaded(tree, format, blocked)
        arr, _ = read_npy_at(path, 0, lazy)
        return Loaded(arr, format)
    return _read_npz(path, trust=trust, lazy=lazy, partial=partial, format=format)


def _read_npz(path: str, *, trust: bool, lazy: bool, partial: bool, format: str) -> Any:
    src = source_for(path)
    with src.open() as zfh:
        return _read_zip(src, zfh, trust=trust, lazy=lazy, partial=partial, format=format)


def _read_zip(
    src: Source, zfh: IO[bytes], *, trust: bool, lazy: bool, partial: bool, format: str
) -> Any:
    from . import Loaded

    path = src.name
    try:
        zf = zipfile.ZipFile(zfh)
    except zipfile.BadZipFile as e:
        raise LoadError(f"{path}: not a valid npz (zip) file: {e}") from None
    flat: dict[str, Any] = {}
    blocked: set[str] = set()
    size = src.size
    with zf:
        for info in zf.infolist():
            name = info.filename
            key = name[:-4] if name.endswith(".npy") else name
            where = f"{path}[{name}]"
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise LoadError(f"{where}: unsupported zip compression {info.compress_type}")
            try:
                with zf.open(info) as member:
                    hdr = parse_npy_header(member, where)
                    if hdr.dtype.hasobject:
                        if trust:
                            flat[key] = _trusted_member(zf, info)
                            continue
                        tree, b = _object_array(member, hdr, where, lazy, partial)
                        flat[key] = tree
                        blocked.update(b)
                        continue
            except zipfile.BadZipFile as e:
                raise LoadError(f"{where}: {e}") from None
            expected = hdr.data_offset + hdr.nbytes
            if info.file_size != expected:
                raise LoadError(
                    f"{where}: member is {info.file_size} bytes but its header says {expected} "
                    f"({hdr.dtype.name}{list(hdr.shape)})"
                )
            if info.compress_type == zipfile.ZIP_STORED:
                offset = _stored_data_offset(src, zfh, info) + hdr.data_offset
                if offset + hdr.nbytes > size:
                    raise LoadError(f"{where}: truncated member data")
                leaf = LazyArray(
                    hdr.shape,
                    hdr.dtype,
                    path,
                    offset,
                    fortran_order=hdr.fortran_order,
                    source=_remote(src),
                )
            else:
                leaf = LazyArray(
                    hdr.shape,
                    hdr.dtype,
                    path,
                    hdr.data_offset,
                    fortran_order=hdr.fortran_order,
                    opener=_member_opener(src, info, hdr.data_offset),
                    seekable=False,
                )
            flat[key] = leaf if lazy else leaf.read().copy()
    return Loaded(tree_from_keystrs(flat), format, sorted(blocked))


def _trusted_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    with zf.open(info) as member:
        return np.load(member, allow_pickle=True)


def _stored_data_offset(src: Source, fh: IO[bytes], info: zipfile.ZipInfo) -> int:
    """File offset of a stored member's data: after its local header and extra field."""
    fh.seek(info.header_offset)
    local = fh.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise LoadError(f"{src.name}[{info.filename}]: bad zip local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _member_opener(src: Source, info: zipfile.ZipInfo, skip: int) -> Callable[[], IO[bytes]]:
    """Open a compressed member positioned at its array data (decompresses on read)."""

    def opener() -> IO[bytes]:
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
        return self._member.read(n)

    def close(self) -> None:
        self._member.close()
        self._zf.close()
        self._fh.close()

    def __enter__(self) -> _Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

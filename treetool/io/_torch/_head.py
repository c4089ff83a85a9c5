"""A remote shard listed in one request: `data.pkl` taken from the first block's local header.

torch writes `<root>/data.pkl` first, stored; its sizes are in its local header or (torch's
writer sets bit 3) in the data descriptor right after it, confirmed by the descriptor's CRC
and sizes matching the bytes before it. The zip directory (needed for the storages' record
offsets) is read, and checked like `read_archive` checks it, when a value is first read:
`Deferred.records`. Any doubt (a deflated data.pkl, no descriptor in the block) returns None
and the caller reads the directory first, as for any zip.
"""

from __future__ import annotations

import io
import struct
import threading
import zlib
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._torch._zip import ZipDir, read_zip_dir

__all__ = ["Deferred", "DeferredRecord", "first_pkl"]

_FIRST = 64 << 10
_LOCAL = b"PK\x03\x04"
_DESCRIPTOR = b"PK\x07\x08"


def _u(fmt: str, b: bytes, at: int) -> int:
    return int(struct.unpack_from(fmt, b, at)[0])


def first_pkl(src: Source) -> tuple[str, int, bytes] | None:
    """(root, data offset, bytes) of a stored `<root>/data.pkl` that is the file's first
    record and lies whole in its first 64 KiB, else None."""
    b = src.read(0, min(src.size, _FIRST))
    if len(b) < 30 or b[:4] != _LOCAL:
        return None
    flags, method = _u("<H", b, 6), _u("<H", b, 8)
    crc, csize, usize = _u("<I", b, 14), _u("<I", b, 18), _u("<I", b, 22)
    nlen, xlen = _u("<H", b, 26), _u("<H", b, 28)
    if method != 0 or flags & 1:
        return None
    try:
        name = b[30 : 30 + nlen].decode("utf-8" if flags & 0x800 else "cp437")
    except UnicodeDecodeError:
        return None
    root, _, rest = name.partition("/")
    start = 30 + nlen + xlen
    if not root or rest != "data.pkl" or "\x00" in root or start > len(b):
        return None
    if flags & 8:
        size = _described(b, start)
        if size is None:
            return None
    else:
        size = csize
        if csize != usize or start + size > len(b) or zlib.crc32(b[start : start + size]) != crc:
            return None
    return root, start, bytes(b[start : start + size])


def _described(b: bytes, start: int) -> int | None:
    """The size of the record data at `start`, from the first data descriptor after it whose
    CRC and sizes (32- or 64-bit) match the bytes before it."""
    pos = b.find(_DESCRIPTOR, start)
    while pos >= 0:
        n = pos - start
        if pos + 24 <= len(b) and _u("<Q", b, pos + 8) == n == _u("<Q", b, pos + 16):
            pass
        elif not (pos + 16 <= len(b) and _u("<I", b, pos + 8) == n == _u("<I", b, pos + 12)):
            pos = b.find(_DESCRIPTOR, pos + 1)
            continue
        if zlib.crc32(b[start:pos]) == _u("<I", b, pos + 4):
            return n
        pos = b.find(_DESCRIPTOR, pos + 1)
    return None


class Deferred:
    """The zip directory of a shard listed from its first block, read and checked once, when
    a value is first read; `check(zd)` is `read_archive`'s checks of it and of every storage
    the pickle named."""

    def __init__(self, src: Source, check: Any) -> None:
        self.src = src
        self._check = check
        self._zd: ZipDir | None = None
        self._lock = threading.Lock()

    def records(self) -> ZipDir:
        with self._lock:
            if self._zd is None:
                zd = read_zip_dir(self.src)
                self._check(zd)
                self._zd = zd
            return self._zd


class DeferredRecord(Source):
    """The bytes of storage record `name`, found (and checked) through `Deferred` on first use."""

    remote = True

    def __init__(self, deferred: Deferred, name: str) -> None:
        self.name = deferred.src.name
        self._deferred, self._record = deferred, name
        self._inner: Any = None

    def _resolve(self) -> Any:
        if self._inner is None:
            from treetool.io._torch._record_io import RecordSource, inflating_opener

            zd = self._deferred.records()
            rec = zd.records[self._record]
            if rec.method == 0:
                self._inner = RecordSource(zd.src, rec)
            else:  # a repacked shard: the record inflated (bounded by its checked size)
                with inflating_opener(zd.src, rec, 0)() as fh:
                    self._inner = _Bytes(self.name, fh.read(rec.size))
        return self._inner

    @property
    def size(self) -> int:
        return int(self._resolve().size)

    def read(self, offset: int, n: int) -> bytes:
        return bytes(self._resolve().read(offset, n))

    def open(self) -> Any:
        return self._resolve().open()


class _Bytes(Source):
    remote = True

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self._data = name, data

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or offset + n > len(self._data):
            raise LoadError(f"{self.name}: read past a record's end")
        return self._data[offset : offset + n]

    def open(self) -> Any:
        return io.BytesIO(self._data)

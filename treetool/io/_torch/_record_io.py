"""Streams over one record of a zip: a stored record of a remote file as a `Source` of its
own (its local header read on first open), and a deflated record through a bounded inflater."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source
from treetool.io._torch._zip import Record, local_data_offset

__all__ = ["RecordSource", "inflating_opener"]


class RecordSource(Source):
    """The bytes of one stored record of a remote zip, as a `Source` of its own: offsets are
    from the record's data start, found from its local header on first open (one request)."""

    remote = True

    def __init__(self, src: Source, rec: Record) -> None:
        self.name = src.name
        self._src, self._rec = src, rec

    @property
    def size(self) -> int:
        return self._rec.size

    def read(self, offset: int, n: int) -> bytes:
        return self._src.read(local_data_offset(self._src, self._rec) + offset, n)

    def open(self) -> Any:
        return _Window(self._src.open(), local_data_offset(self._src, self._rec))


class _Window:
    """A file object over another, shifted by `base` bytes (`limit` too)."""

    def __init__(self, fh: Any, base: int) -> None:
        self._fh, self._base = fh, base

    @property
    def limit(self) -> Any:
        return self._fh.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._fh.limit = self._base + value

    def seek(self, offset: int, whence: int = 0, /) -> int:
        if whence == 0:
            offset += self._base
        return int(self._fh.seek(offset, whence)) - self._base

    def tell(self) -> int:
        return int(self._fh.tell()) - self._base

    def read(self, n: int = -1) -> bytes:
        return bytes(self._fh.read(n))

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a window of a remote file has no descriptor")

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Inflating:
    """A one-way stream over a deflated record, from its start, never past its size."""

    def __init__(self, src: Source, rec: Record, where: str) -> None:
        self._fh = src.open()
        self._fh.seek(local_data_offset(src, rec))
        self._left_in = rec.csize
        self._left_out = rec.size
        self._d = zlib.decompressobj(-15)
        self._where = where

    def read(self, n: int = -1) -> bytes:
        n = self._left_out if n < 0 else min(n, self._left_out)
        out: list[bytes] = []
        got = 0
        d = self._d
        while got < n:
            if d.unconsumed_tail:
                chunk = d.unconsumed_tail
            else:
                chunk = self._fh.read(min(self._left_in, 1 << 20))
                self._left_in -= len(chunk)
                if not chunk:
                    break
            try:
                more = d.decompress(chunk, n - got)
            except zlib.error as e:
                raise LoadError(f"{self._where}: damaged deflated record: {e}") from None
            out.append(more)
            got += len(more)
            if not more and not d.unconsumed_tail and self._left_in <= 0:
                break
        self._left_out -= got
        return b"".join(out)

    def seek(self, offset: int, whence: int = 0, /) -> int:
        raise io.UnsupportedOperation("a one-way stream: read it from the start")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a stream over a part of a file has no descriptor")

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> _Inflating:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inflating_opener(src: Source, rec: Record, skip: int) -> Callable[[], Any]:
    """An opener for a `LazyArray` over a deflated record, `skip` bytes in."""
    where = f"{src.name}[{rec.name}]"

    def opener() -> Any:
        s = _Inflating(src, rec, where)
        left = skip
        while left > 0:
            got = s.read(min(left, 1 << 20))
            if not got:
                break
            left -= len(got)
        return s

    return opener

"""`ReadAhead`: parts of many remote `LazyArray`s read ahead of their use, in the order they
are used, in requests of a bounded size, with a bounded number of bytes held (the value diff
of two remote checkpoints reads through one).

A `LazyArray` reads its own bytes when asked (`_lazy_array`); this module plans the reads of
many of them at once: neighbouring parts of one file share a request, requests run in
parallel on a few threads, and at most `READ_WINDOW` bytes of them are held.
"""

from __future__ import annotations

from typing import Any

from treetool._errors import LoadError
from treetool._leaves._lazy_array import LazyArray
from treetool._source import source_for

__all__ = ["READ_REQUEST", "READ_WINDOW", "READ_WORKERS", "ReadAhead", "is_remote"]

#: one request of a `ReadAhead`: at most this many bytes (parts of several arrays, or of one).
#: Object stores serve each connection at a bounded rate (S3: about 100 MB/s), so a read goes
#: as fast as the requests in flight: 4 MB requests keep 8 of them within the window. (16 in a
#: 64 MB window measured 5-15% faster on the shaped S3 link on a loaded machine, not in a
#: quiet full run, and its peak RSS passed 10% of two 1 GB checkpoints: 222 MB)
READ_REQUEST = 4 << 20
#: the most bytes of requests a `ReadAhead` holds (sent, and not yet wholly taken): the
#: diff's memory bound
READ_WINDOW = 32 << 20
#: requests in flight at once (each on its own connection)
READ_WORKERS = 8
#: parts of arrays at most this far apart in one file share a request (the gap is not read)
_READ_GAP = 64 << 10
_URL_SCHEMES = ("s3://", "gs://", "gcs://", "http://", "https://")


def is_remote(x: Any) -> bool:
    """Whether `x` is a `LazyArray` whose bytes are read over the network, in C order, by
    ranged reads of its source (what a `ReadAhead` can plan; not a subclass that reads its
    own way, such as an orbax array read through tensorstore)."""
    if type(x) is not LazyArray or x._opener is not None or x.fortran_order:
        return False
    if x.source is not None:
        return bool(getattr(x.source, "remote", False))
    return x.file.startswith(_URL_SCHEMES)


class _Request:
    """One `read_many` call: ranges of one source, the tickets they serve, its future."""

    __slots__ = ("source", "ranges", "start", "end", "size", "left", "future")

    def __init__(self, source: Any, offset: int, n: int) -> None:
        self.source = source
        self.ranges = [(offset, n)]
        self.start, self.end, self.size = offset, offset + n, n
        self.left = 1  # tickets not yet taken
        self.future: Any = None


class ReadAhead:
    """Reads parts of remote `LazyArray`s ahead of their use, in the order they are used.

    `plan(x, start, count)` names `count` elements of `x` from element `start` and returns a
    ticket; once every part is planned, `take(ticket)` (in ticket order) returns their bytes.
    Parts that lie close together in one file share a request (`Source.read_many`, at most
    `request` bytes); requests are sent in the order they are needed, on `workers` threads,
    while the requests sent and not yet wholly taken hold at most `window` bytes (`held`, and
    its high-water mark `peak`, count them: the memory bound). `close` cancels what was not
    sent and waits for the threads (use it as a context manager).

    Example:
        >>> import numpy as np, tempfile, os
        >>> from treetool._leaves._lazy_array import LazyArray
        >>> f = tempfile.NamedTemporaryFile(delete=False)
        >>> _ = f.write(np.arange(8, dtype=np.int32).tobytes()); f.close()
        >>> from treetool._source import LocalSource
        >>> x = LazyArray((8,), "int32", f.name, source=LocalSource(f.name))
        >>> with ReadAhead(request=16) as ra:
        ...     tickets = [ra.plan(x, 0, 4), ra.plan(x, 4, 4)]
        ...     [np.frombuffer(ra.take(t), np.int32).tolist() for t in tickets]
        [[0, 1, 2, 3], [4, 5, 6, 7]]
        >>> os.unlink(f.name)
    """

    def __init__(
        self,
        *,
        request: int | None = None,
        window: int | None = None,
        workers: int | None = None,
    ) -> None:
        """Defaults: `READ_REQUEST`, `READ_WINDOW`, `READ_WORKERS`."""
        self.request = max(1, READ_REQUEST if request is None else request)
        # three requests may be open at once (a part of each side, and the next one)
        self.window = max(READ_WINDOW if window is None else window, 3 * self.request)
        self._workers = READ_WORKERS if workers is None else max(1, workers)
        self._tickets: list[tuple[int, int] | LoadError] = []  # (request, range) or an error
        self._reqs: list[_Request] = []
        self._sent = 0  # requests sent so far (in order)
        self._pool: Any = None
        #: bytes of the requests sent and not yet wholly taken; `peak`: the most it held
        self.held = 0
        self.peak = 0

    def plan(self, x: LazyArray, start: int, count: int) -> int:
        """A ticket for `count` elements of `x` from element `start` (C order)."""
        itemsize = x.dtype.itemsize
        offset, n = x.offset + start * itemsize, count * itemsize
        if x.source is None:
            x.source = source_for(x.file, reuse=True)
        src = x.source
        ticket = len(self._tickets)
        size = src.size
        if x.offset + x.nbytes > size:
            self._tickets.append(
                LoadError(
                    f"{x.file}: array data is truncated: expected {x.nbytes} bytes at offset "
                    f"{x.offset}, the file has {size}"
                )
            )
            return ticket
        reqs = self._reqs
        # join one of the last two requests (each side's), when not sent and close enough
        for r in range(len(reqs) - 1, max(len(reqs) - 3, self._sent - 1), -1):
            req = reqs[r]
            if req.source is src:
                if (
                    req.end <= offset <= req.end + _READ_GAP
                    and offset + n - req.start <= self.request
                ):
                    req.ranges.append((offset, n))
                    req.end, req.size = offset + n, req.size + n
                    req.left += 1
                    self._tickets.append((r, len(req.ranges) - 1))
                    return ticket
                break
        reqs.append(_Request(src, offset, n))
        self._tickets.append((len(reqs) - 1, 0))
        return ticket

    def _send(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self._workers, thread_name_prefix="treetool-readahead-diff"
            )
        req = self._reqs[self._sent]
        req.future = self._pool.submit(req.source.read_many, req.ranges)
        self._sent += 1
        self.held += req.size
        self.peak = max(self.peak, self.held)

    def _fill(self) -> None:
        reqs = self._reqs
        while self._sent < len(reqs) and (
            self.held == 0 or self.held + reqs[self._sent].size <= self.window
        ):
            self._send()

    def take(self, ticket: int) -> bytes:
        """The bytes of a planned part (waits for its request; `LoadError` as a read)."""
        entry = self._tickets[ticket]
        if isinstance(entry, LoadError):
            raise entry
        r, i = entry
        while self._sent <= r:  # a part needed now is always sent
            self._send()
        self._fill()
        req = self._reqs[r]
        data = req.future.result()
        piece = data[i]
        data[i] = b""
        req.left -= 1
        if req.left == 0:  # wholly taken: its bytes leave the window
            req.future = None
            self.held -= req.size
            self._fill()
        return piece

    def close(self, wait: bool = True) -> None:
        """Cancel the requests not yet running; wait for the running ones (unless `wait` is
        False: Ctrl-C) and end the threads."""
        for req in self._reqs:
            if req.future is not None:
                req.future.cancel()
                req.future = None
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        self.close(wait=kind is None or issubclass(kind, Exception))

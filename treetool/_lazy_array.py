"""`LazyArray`: an array leaf whose bytes stay in its file until they are read.

Readers make one per array payload (shape, dtype, file offset); `np.asarray(lazy)` reads it,
`x[i]`/`x[a:b]` read rows, `iter_chunks` streams it. A URL-backed one reads through the
source `treetool.io` installs (`set_url_source`): the readers sit above the leaf types.
A standard dtype given by name or `descr` (`"bfloat16"`, `"<f4"`) is kept as its name and
itemsize: numpy is imported when `.dtype` or the data is first asked for, so listing a
file's leaves (`dtype_name`, `itemsize`, `nbytes`) does not import it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ._dtypes import _as_dtype, loaded_numpy, name_bits, short_dtype, spec_facts
from ._errors import LoadError
from ._streams import ByteStream

if TYPE_CHECKING:
    import numpy as np

__all__ = ["LazyArray", "set_url_source"]

_CHUNK_ELEMS = 1 << 20

#: `source_for(url, reuse=True)` of `treetool.io`, installed by `set_url_source` when the
#: readers are imported (they sit above the leaf types and make every URL-backed LazyArray)
_URL_SOURCES: list[Callable[..., Any]] = []


def set_url_source(source_for: Callable[..., Any]) -> None:
    """Install how a URL-backed `LazyArray` opens its bytes (called by `treetool.io`)."""
    _URL_SOURCES[:] = [source_for]


def _url_source(url: str) -> Any:
    if not _URL_SOURCES:
        raise LoadError(
            f"{url}: a remote array is read through treetool.io's sources; "
            "import treetool.io (or load the file with tt.load) first"
        )
    return _URL_SOURCES[0](url, reuse=True)


# --- lazily read arrays ---------------------------------------------------------------------


class LazyArray:
    """An array whose data stays in a file until asked for.

    Loaders make these for payloads above a small threshold. `np.asarray(x)` reads the whole
    array; `x[i]` / `x[a:b]` on a C-ordered array reads only those rows; `iter_chunks` streams
    it for stats and diffs.

    Example:
        >>> import numpy as np, tempfile, os
        >>> f = tempfile.NamedTemporaryFile(delete=False); _ = f.write(b"xx" + np.arange(6, dtype=np.float32).tobytes()); f.close()
        >>> x = LazyArray((2, 3), "float32", f.name, offset=2)
        >>> x.shape, x.dtype, x.nbytes
        ((2, 3), dtype('float32'), 24)
        >>> np.asarray(x)[1].tolist()
        [3.0, 4.0, 5.0]
        >>> os.unlink(f.name)
    """

    __slots__ = (
        "shape", "_dt", "_dtname", "_itemsize", "_dtspec", "file", "offset", "fortran_order",
        "_opener", "_seekable", "source",
    )  # fmt: skip

    _dt: np.dtype | None  # the numpy dtype, once made
    _dtname: str
    _itemsize: int
    _dtspec: str  # the name or descr given, "" when a numpy dtype was given

    @property
    def listed_as(self) -> tuple[str, str | None, str]:
        """How leaf facts show it: (kind, type name or None for the class's, device); a
        subclass that stands for an array held in memory says ("array", "ndarray", "host")."""
        return ("lazy", None, "file")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        file: str,
        offset: int = 0,
        *,
        fortran_order: bool = False,
        opener: Callable[[], ByteStream] | None = None,
        seekable: bool = True,
        source: Any = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.file = str(file)
        self.offset = int(offset)
        self.fortran_order = bool(fortran_order)
        self._opener = opener
        self._seekable = seekable
        self.source = source  # a remote `treetool.io._source.Source` (None: the local `file`)

    # numpy-like metadata
    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype (numpy is imported on first use when a name or descr was given)."""
        dt = self._dt
        if dt is None:
            dt = self._dt = _as_dtype(self._dtspec)
        return dt

    @dtype.setter
    def dtype(self, dtype: Any) -> None:
        # a name or descr of a standard dtype stays a string until numpy is needed
        facts = spec_facts(dtype) if type(dtype) is str else None
        if facts is not None:
            self._dt = None
            self._dtname, self._itemsize = facts
            self._dtspec = dtype
            return
        dt = _as_dtype(dtype)
        self._dt, self._dtname, self._itemsize, self._dtspec = dt, dt.name, dt.itemsize, ""

    @property
    def dtype_name(self) -> str:
        """numpy's name of the dtype (`float32`, `bfloat16`), without importing numpy.

        Example:
            >>> LazyArray((2,), ">i8", "f.bin").dtype_name
            'int64'
        """
        return self._dtname

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (without importing numpy)."""
        return self._itemsize

    @property
    def dtype_arg(self) -> Any:
        """The dtype as another `LazyArray` takes it: the name or descr it was given (numpy
        not needed yet), else the numpy dtype."""
        return self._dtspec or self.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return (math.prod(self.shape) * name_bits(self._dtname, self._itemsize) + 7) // 8

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d LazyArray")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"LazyArray({short_dtype(self._dtname)}[{dims}], file={self.file!r}, offset={self.offset})"

    def _open(self) -> ByteStream:
        if self._opener is not None:
            fh = self._opener()
            if not self._seekable:
                return fh
        elif self.source is not None or self.file.startswith(
            ("s3://", "gs://", "gcs://", "http://", "https://")
        ):
            if self.source is None:  # a URL: read through its remote source
                self.source = _url_source(self.file)
            fh = self.source.open()
            fh.limit = self.offset + self.nbytes  # no read-ahead past it
        else:
            fh = open(self.file, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        fh.seek(self.offset)
        return fh

    def where(self) -> dict[str, Any]:
        """Where the bytes live: `file` (path or URL of the file or shard), `offset`, `nbytes`.

        Example:
            >>> LazyArray((2, 3), "float32", "s3://b/model-00001-of-00002.safetensors", 80).where()
            {'file': 's3://b/model-00001-of-00002.safetensors', 'offset': 80, 'nbytes': 24}
        """
        return {"file": self.file, "offset": self.offset, "nbytes": self.nbytes}

    def _read(self, fh: ByteStream, start_byte: int, nbytes: int) -> bytes:
        if self._opener is None:  # a plain file: refuse to allocate bytes it does not hold
            size = self.source.size if self.source is not None else os.fstat(fh.fileno()).st_size
            if self.offset + start_byte + nbytes > size:
                from ._errors import LoadError

                raise LoadError(
                    f"{self.file}: array data is truncated: expected {nbytes} bytes at offset "
                    f"{self.offset + start_byte}, the file has {size}"
                )
        if start_byte:
            if self._seekable:
                fh.seek(self.offset + start_byte)
            else:
                _skip(fh, start_byte)
        data = fh.read(nbytes)
        if len(data) != nbytes:
            from ._errors import LoadError

            raise LoadError(
                f"{self.file}: array data is truncated: expected {nbytes} bytes at offset "
                f"{self.offset + start_byte}, found {len(data)}"
            )
        return data

    def read(self) -> np.ndarray:
        """Read the whole array from the file."""
        import numpy as np

        with self._open() as fh:
            data = self._read(fh, 0, self.size * self.dtype.itemsize)
        arr = np.frombuffer(data, dtype=self.dtype)
        return arr.reshape(self.shape, order="F" if self.fortran_order else "C")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.read()
        return arr if dtype is None else arr.astype(dtype)

    # --- use in computations: numpy and jnp.asarray read the data through __array__ (so do
    # flax layers, which convert their params with jnp.asarray); operators read it and give a
    # numpy array, or a jax array when the other operand is one (`==` stays identity: leaves
    # are looked up in lists and dicts). jax's own entry points (jit arguments, lax
    # primitives) accept only real arrays; their error shows str(leaf), which names the fix.
    # (No __jax_array__: jax 0.10 refuses it in abstractification with a message naming
    # neither the type nor the fix.)

    def __str__(self) -> str:
        return (
            f"{self!r}: its data is still in the file; load with lazy=False or call "
            "treetool.materialize(tree) to get arrays"
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(x.read() if isinstance(x, LazyArray) else x for x in inputs)
        out = kwargs.get("out")
        if out:
            kwargs["out"] = tuple(x.read() if isinstance(x, LazyArray) else x for x in out)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def _value_for(self, other: Any) -> Any:
        """The data, as a jax array when `other` is a jax value (array or tracer)."""
        if "jax" in sys.modules:
            import jax

            if isinstance(other, jax.Array):
                return jax.numpy.asarray(self.read())
        return self.read()

    def __add__(self, o: Any) -> Any:
        return self._value_for(o) + o

    def __radd__(self, o: Any) -> Any:
        return o + self._value_for(o)

    def __sub__(self, o: Any) -> Any:
        return self._value_for(o) - o

    def __rsub__(self, o: Any) -> Any:
        return o - self._value_for(o)

    def __mul__(self, o: Any) -> Any:
        return self._value_for(o) * o

    def __rmul__(self, o: Any) -> Any:
        return o * self._value_for(o)

    def __truediv__(self, o: Any) -> Any:
        return self._value_for(o) / o

    def __rtruediv__(self, o: Any) -> Any:
        return o / self._value_for(o)

    def __matmul__(self, o: Any) -> Any:
        return self._value_for(o) @ o

    def __rmatmul__(self, o: Any) -> Any:
        return o @ self._value_for(o)

    def __pow__(self, o: Any) -> Any:
        return self._value_for(o) ** o

    def __neg__(self) -> Any:
        return -self.read()

    def __lt__(self, o: Any) -> Any:
        return self._value_for(o) < o

    def __le__(self, o: Any) -> Any:
        return self._value_for(o) <= o

    def __gt__(self, o: Any) -> Any:
        return self._value_for(o) > o

    def __ge__(self, o: Any) -> Any:
        return self._value_for(o) >= o

    @property
    def T(self) -> np.ndarray:
        return self.read().T

    def astype(self, dtype: Any) -> np.ndarray:
        """The data converted to `dtype` (a numpy array)."""
        return self.read().astype(dtype)

    def reshape(self, *shape: Any) -> np.ndarray:
        """The data reshaped (a numpy array)."""
        return self.read().reshape(*shape)

    def __getitem__(self, index: Any) -> np.ndarray:
        if not self.fortran_order and self.shape:
            rows = _row_range(index, self.shape[0])
            if rows is not None:
                import numpy as np

                start, stop, squeeze = rows
                row_bytes = math.prod(self.shape[1:]) * self.dtype.itemsize
                with self._open() as fh:
                    data = self._read(fh, start * row_bytes, (stop - start) * row_bytes)
                arr = np.frombuffer(data, dtype=self.dtype).reshape((stop - start, *self.shape[1:]))
                return arr[0] if squeeze else arr
        return self.read()[index]

    def corners(self, edge: int = 3) -> np.ndarray | None:
        """The first and last `edge` entries along every axis, reading only those elements.

        What a summarised print of the array shows, as a small array (at most `2 * edge` per
        axis); None for arrays of more than 4 axes, whose corners are too many to read.

        Example:
            >>> import numpy as np, tempfile, os
            >>> f = tempfile.NamedTemporaryFile(delete=False)
            >>> _ = f.write(np.arange(100, dtype=np.int32).tobytes()); f.close()
            >>> LazyArray((10, 10), "int32", f.name).corners(2).tolist()
            [[0, 1, 8, 9], [10, 11, 18, 19], [80, 81, 88, 89], [90, 91, 98, 99]]
            >>> os.unlink(f.name)
        """
        if self.ndim > 4:
            return None
        if self.ndim == 0:
            return self.read()
        import numpy as np

        picks = [_edge_indices(n, edge) for n in self.shape]
        grid = np.meshgrid(*[np.array(p, dtype=np.int64) for p in picks], indexing="ij")
        if self.fortran_order:
            strides = np.cumprod([1, *self.shape[:-1]], dtype=np.int64)
        else:
            strides = np.cumprod([1, *self.shape[::-1][:-1]], dtype=np.int64)[::-1]
        flat = sum((g * st for g, st in zip(grid, strides)), np.zeros(grid[0].shape, np.int64))
        order = np.argsort(flat, axis=None)
        itemsize = self.dtype.itemsize
        values = bytearray(flat.size * itemsize)
        with self._open() as fh:
            pos = 0  # bytes from the array's start the stream is at
            for k in order.tolist():
                at = int(flat.flat[k]) * itemsize
                if self._seekable:
                    fh.seek(self.offset + at)
                else:
                    _skip(fh, at - pos)
                data = fh.read(itemsize)
                if len(data) != itemsize:
                    from ._errors import LoadError

                    raise LoadError(f"{self.file}: array data is truncated at element {at}")
                pos = at + itemsize
                values[k * itemsize : (k + 1) * itemsize] = data
        return np.frombuffer(bytes(values), dtype=self.dtype).reshape(flat.shape)

    def iter_chunks(self, max_elems: int = _CHUNK_ELEMS) -> Iterator[np.ndarray]:
        """Yield the elements in file order as 1-D chunks of at most `max_elems`."""
        import numpy as np

        itemsize = self.dtype.itemsize
        total = self.size
        with self._open() as fh:
            done = 0
            while done < total:
                n = min(max_elems, total - done)
                data = fh.read(n * itemsize)
                if len(data) != n * itemsize:
                    from ._errors import LoadError

                    raise LoadError(f"{self.file}: array data is truncated at element {done}")
                yield np.frombuffer(data, dtype=self.dtype)
                done += n


def _edge_indices(n: int, edge: int) -> list[int]:
    return list(range(n)) if n <= 2 * edge else [*range(edge), *range(n - edge, n)]


def _skip(fh: ByteStream, n: int) -> None:
    while n > 0:
        got = fh.read(min(n, 1 << 20))
        if not got:
            return
        n -= len(got)


def _row_range(index: Any, n: int) -> tuple[int, int, bool] | None:
    np = loaded_numpy()  # no numpy imported: no numpy integer exists
    if (isinstance(index, int) or (np is not None and isinstance(index, np.integer))) and (
        not isinstance(index, bool)
    ):
        i = int(index)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise IndexError(f"index {index} is out of bounds for axis 0 with size {n}")
        return i, i + 1, True
    if isinstance(index, slice) and index.step in (None, 1):
        start, stop, _ = index.indices(n)
        return start, max(start, stop), False
    return None


# --- reading parts of many remote arrays ahead ----------------------------------------------

#: one request of a `ReadAhead`: at most this many bytes (parts of several arrays, or of one)
READ_REQUEST = 8 << 20
#: the most bytes of requests a `ReadAhead` holds (sent, and not yet wholly taken)
READ_WINDOW = 32 << 20
#: requests in flight at once
READ_WORKERS = 6
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
        >>> f = tempfile.NamedTemporaryFile(delete=False)
        >>> _ = f.write(np.arange(8, dtype=np.int32).tobytes()); f.close()
        >>> from treetool.io._source import LocalSource
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
            x.source = _url_source(x.file)
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

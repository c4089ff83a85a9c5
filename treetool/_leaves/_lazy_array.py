"""`LazyArray`: an array leaf whose bytes stay in its file until they are read.

Readers make one per array payload (shape, dtype, file offset); `np.asarray(lazy)` reads it,
`x[i]`/`x[a:b]` read rows, `iter_chunks` streams it. A URL-backed one reads through the
`Source` of its URL's scheme (`treetool._source`, below the leaf types: the remote source
modules register their schemes there when first used), whether or not `treetool.io` was imported.
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

from treetool._leaves._dtypes import _as_dtype, loaded_numpy, name_bits, short_dtype, spec_facts
from treetool._leaves._streams import ByteStream
from treetool._public import set_module
from treetool._source import is_url, source_for

if TYPE_CHECKING:
    import numpy as np

__all__ = ["LazyArray"]

_CHUNK_ELEMS = 1 << 20

# --- lazily read arrays ---------------------------------------------------------------------


@set_module("treetool")
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
        "_opener", "_seekable", "source", "view_of",
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
        view_of: tuple[Any, int] | None = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.file = str(file)
        self.offset = int(offset)
        self.fortran_order = bool(fortran_order)
        self._opener = opener
        self._seekable = seekable
        self.source = source  # a `treetool._source.Source` (None: the local `file`, or a URL opened on first read)
        #: `(buffer, byte offset)` when this is one of several views of one buffer of its file
        #: (torch tensors viewing one storage): `buffer` names it by identity, the offset is
        #: where this view's first element lies in it; totals count the bytes they cover once
        self.view_of = view_of

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
        elif self.source is not None or is_url(self.file):
            if self.source is None:  # a URL: read through the source of its scheme
                self.source = source_for(self.file, reuse=True)
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
                from treetool._errors import LoadError

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
            from treetool._errors import LoadError

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
                    from treetool._errors import LoadError

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
                    from treetool._errors import LoadError

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

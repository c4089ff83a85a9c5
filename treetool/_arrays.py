"""Leaf facts: shape, dtype, bytes, devices, keys, stats, and file-backed `LazyArray` leaves.

Facts come from metadata only; array data is read by `stats` (in chunks) and by
`np.asarray(lazy_array)`. jax is never imported here: a jax array can only exist when jax
has already been imported, so `sys.modules` tells whether to look for one.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from ._errors import LoadError
from ._prng import KeyArray
from ._typetests import is_shape_struct

__all__ = [
    "LazyArray",
    "LeafInfo",
    "Stats",
    "dtype_bits",
    "dtype_name",
    "is_array",
    "is_key",
    "has_stats",
    "leaf_info",
    "may_be_raw_key",
    "scalar_value",
    "values_list",
    "short_dtype",
    "stats",
]

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


# --- dtypes -------------------------------------------------------------------------------

_SHORT = [
    (re.compile(r"^bfloat(\d+)$"), r"bf\1"),
    (re.compile(r"^float(\d.*)$"), r"f\1"),
    (re.compile(r"^uint(\d+)$"), r"u\1"),
    (re.compile(r"^int(\d+)$"), r"i\1"),
    (re.compile(r"^complex(\d+)$"), r"c\1"),
]
_short_cache: dict[str, str] = {}


_name_cache: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """numpy's name of a dtype (`float32`, `bfloat16`, `key<fry>` for typed PRNG keys)."""
    try:
        return _name_cache[dtype]
    except (KeyError, TypeError):
        pass
    if dtype is None:
        return "object"
    name = getattr(dtype, "name", None)
    name = name if isinstance(name, str) else str(dtype)
    try:
        _name_cache[dtype] = name  # numpy computes .name in Python: 20x slower than a lookup
    except TypeError:
        pass
    return name


def short_dtype(dtype: Any) -> str:
    """jax's short spelling of a dtype: `f32`, `bf16`, `i8`, `u32`, `c64`, `bool`, `key<fry>`."""
    name = dtype if isinstance(dtype, str) else dtype_name(dtype)
    out = _short_cache.get(name)
    if out is None:
        out = name
        for rx, rep in _SHORT:
            if rx.match(name):
                out = rx.sub(rep, name)
                break
        _short_cache[name] = out
    return out


_SUBBYTE = re.compile(r"^(?:u?int(\d)|float(\d)_.*)$")


def dtype_bits(dtype: Any) -> int:
    """Bits per element, with the real width of sub-byte dtypes (int4 is 4, not 8)."""
    name = dtype_name(dtype)
    m = _SUBBYTE.match(name)
    if m:
        return int(m.group(1) or m.group(2))
    itemsize = getattr(dtype, "itemsize", None)
    return 8 * int(itemsize) if itemsize else 0


def _nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return (math.prod(shape) * dtype_bits(dtype) + 7) // 8


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
        "shape", "dtype", "file", "offset", "fortran_order", "_opener", "_seekable", "source",
    )  # fmt: skip

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        file: str,
        offset: int = 0,
        *,
        fortran_order: bool = False,
        opener: Callable[[], IO[bytes]] | None = None,
        seekable: bool = True,
        source: Any = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = _as_dtype(dtype)
        self.file = str(file)
        self.offset = int(offset)
        self.fortran_order = bool(fortran_order)
        self._opener = opener
        self._seekable = seekable
        self.source = source  # a remote `treetool.io._source.Source` (None: the local `file`)

    # numpy-like metadata
    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d LazyArray")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"LazyArray({short_dtype(self.dtype)}[{dims}], file={self.file!r}, offset={self.offset})"

    def _open(self) -> IO[bytes]:
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
            fh.limit = self.offset + self.nbytes  # type: ignore[attr-defined]  # no read-ahead past it
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

    def _read(self, fh: IO[bytes], start_byte: int, nbytes: int) -> bytes:
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


def scalar_value(x: Any) -> Any:
    """The Python value of a one-element array, with the digits of its own dtype.

    A float32 shows the shortest decimal that reads back as the same float32, not the
    float64 expansion of its bits (`-0.07974771410226822`).

    Example:
        >>> scalar_value(np.float32(-0.07974771410226822))
        -0.079747714
    """
    v = np.asarray(x).reshape(())[()]
    item = v.item()
    if isinstance(item, float) and v.dtype.itemsize < 8:
        return float(str(v))
    return item


def values_list(arr: np.ndarray) -> Any:
    """`arr.tolist()`, with float16/32 (and bfloat16) values in their own shortest digits.

    Example:
        >>> values_list(np.array([0.1, -0.0797477], np.float32))
        [0.1, -0.0797477]
    """
    name = arr.dtype.name
    if arr.dtype.itemsize >= 8 or not (
        arr.dtype.kind == "f" or name.startswith(("bfloat", "float"))
    ):
        return arr.tolist()
    short = [float(str(v)) for v in arr.flat]  # numpy scalars: str() is their shortest form
    if arr.ndim == 0:
        return short[0]
    out = np.empty(len(short), dtype=object)
    out[:] = short
    return out.reshape(arr.shape).tolist()


def _skip(fh: IO[bytes], n: int) -> None:
    while n > 0:
        got = fh.read(min(n, 1 << 20))
        if not got:
            return
        n -= len(got)


def _row_range(index: Any, n: int) -> tuple[int, int, bool] | None:
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        i = int(index)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise IndexError(f"index {index} is out of bounds for axis 0 with size {n}")
        return i, i + 1, True
    if isinstance(index, slice) and index.step in (None, 1):
        start, stop, _ = index.indices(n)
        return start, max(start, stop), False
    return None


def _as_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(dtype)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, str(dtype)))


# --- facts --------------------------------------------------------------------------------


def _jax_array_type() -> type | None:
    jax = sys.modules.get("jax")
    return getattr(jax, "Array", None) if jax is not None else None


def is_array(x: Any) -> bool:
    """Whether `x` is an array leaf (numpy, jax, LazyArray or a ShapeDtypeStruct)."""
    if isinstance(x, (np.ndarray, np.generic, LazyArray, KeyArray)):
        return True
    jarr = _jax_array_type()
    if jarr is not None and isinstance(x, jarr):
        return True
    return is_shape_struct(x)


def _is_typed_key_dtype(dtype: Any) -> bool:
    return dtype_name(dtype).startswith("key<")


def is_key(x: Any) -> bool:
    """Whether `x` is a typed PRNG key array (a `key<...>` dtype: live jax or loaded).

    The answer comes from the type, never from a shape: a legacy raw key
    (`jax.random.PRNGKey(0)`, `uint32[2]`) is a uint32 array like an edge list of pairs.

    Example:
        >>> import numpy as np
        >>> is_key(KeyArray(np.zeros(2, np.uint32), "threefry2x32", "fry"))
        True
        >>> is_key(np.zeros((1000, 2), np.uint32))
        False
    """
    dtype = getattr(x, "dtype", None)
    return dtype is not None and _is_typed_key_dtype(dtype)


def may_be_raw_key(x: Any) -> bool:
    """A hint only: `x` has the shape and dtype of legacy raw keys (`uint32[..., 2]`).

    Such an array may as well be an edge list; nothing counts it as a key.
    """
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", ())
    return (
        dtype is not None and dtype_name(dtype) == "uint32" and len(shape) >= 1 and shape[-1] == 2
    )


@dataclass(slots=True)
class LeafInfo:
    """What treetool knows about a leaf without reading its data.

    `kind` is one of "array" (numpy), "jax", "lazy" (file-backed), "abstract"
    (ShapeDtypeStruct), "scalar" (a Python number), "none" or "object".
    `params` is the element count of array leaves (0 for everything else).
    """

    kind: str
    type_name: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    nbytes: int = 0
    params: int = 0
    is_key: bool = False
    device: str | None = None
    weak_type: bool = False

    @property
    def label(self) -> str:
        """`f32[128,784]` for arrays; a short repr for other leaves."""
        if self.shape is not None and self.dtype is not None:
            return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"
        return self.type_name


def leaf_info(x: Any) -> LeafInfo:
    """Facts about one leaf, from metadata only.

    Example:
        >>> import numpy as np
        >>> info = leaf_info(np.zeros((128, 784), np.float32))
        >>> info.label, info.params, info.nbytes
        ('f32[128,784]', 100352, 401408)
    """
    t = type(x)
    if t is np.ndarray:
        return _array_info("array", "ndarray", x.shape, x.dtype, device="host")
    tname = t.__name__
    if x is None:
        return LeafInfo("none", "None")
    if isinstance(x, LazyArray):
        return _array_info("lazy", tname, x.shape, x.dtype, device="file")
    if t is KeyArray:
        lazy = isinstance(x.data, LazyArray)
        return _array_info(
            "lazy" if lazy else "array", tname, x.shape, x.dtype, "file" if lazy else "host"
        )
    if isinstance(x, np.ndarray):
        return _array_info("array", tname, x.shape, x.dtype, device="host")
    if isinstance(x, np.generic):
        return _array_info("array", tname, (), x.dtype, device="host")
    jarr = _jax_array_type()
    if jarr is not None and isinstance(x, jarr):
        return _jax_info(x, tname)
    if is_shape_struct(x):
        return _array_info("abstract", tname, tuple(x.shape), x.dtype, device=None)
    if isinstance(x, (bool, int, float, complex)):
        return LeafInfo("scalar", tname)
    return LeafInfo("object", tname)


_facts_cache: dict[Any, tuple[str, int, bool]] = {}


def _dtype_facts(dtype: Any) -> tuple[str, int, bool]:
    """`(name, bits per element, is a typed key dtype)`, cached per dtype."""
    try:
        return _facts_cache[dtype]
    except (KeyError, TypeError):
        pass
    name = dtype_name(dtype)
    typed_key = name.startswith("key<")
    bits = 8 * int(getattr(dtype, "itemsize", 0) or 8) if typed_key else dtype_bits(dtype)
    facts = (name, bits, typed_key)
    try:
        _facts_cache[dtype] = facts
    except TypeError:
        pass
    return facts


def _array_info(kind: str, tname: str, shape: tuple, dtype: Any, device: str | None) -> LeafInfo:
    if type(shape) is not tuple:
        shape = tuple(map(int, shape))
    name, bits, typed_key = _dtype_facts(dtype)
    size = math.prod(shape)
    return LeafInfo(
        kind,
        tname,
        shape,
        name,
        (size * bits + 7) // 8,
        0 if typed_key else size,
        typed_key,
        device,
    )


def _jax_info(x: Any, tname: str) -> LeafInfo:
    try:
        devices = x.devices()
    except Exception:  # deleted or donated buffers, tracers
        devices = set()
    if len(devices) == 1:
        d = next(iter(devices))
        device = f"{d.platform}:{d.id}"
    elif devices:
        device = f"{len(devices)} devices"
    else:
        device = None
    info = _array_info("jax", tname, x.shape, x.dtype, device)
    if getattr(x, "weak_type", False):
        info.weak_type = True
    return info


# --- stats --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Summary statistics of an array leaf, over its finite values.

    `histogram` is `(counts, edges)` with `bins` bins between the finite min and max.
    For complex arrays the statistics are of the magnitudes.
    """

    size: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int
    inf: int
    zeros: int
    histogram: tuple[list[int], list[float]] | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "size": self.size,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "std": self.std,
            "nan": self.nan,
            "inf": self.inf,
            "zeros": self.zeros,
            "histogram": None
            if self.histogram is None
            else {"counts": self.histogram[0], "edges": self.histogram[1]},
        }


def _chunks(x: Any, max_elems: int = _CHUNK_ELEMS) -> Iterator[np.ndarray]:
    if isinstance(x, LazyArray):
        yield from x.iter_chunks(max_elems)
        return
    arr = np.asarray(x)
    flat = arr.reshape(-1)
    for i in range(0, max(flat.size, 1), max_elems):
        part = flat[i : i + max_elems]
        if part.size:
            yield part


def _as_float(chunk: np.ndarray) -> np.ndarray:
    if chunk.dtype.kind == "c":
        return np.abs(chunk)
    if chunk.dtype.kind in "fiub":
        return chunk.astype(np.float64, copy=False) if chunk.dtype.kind != "f" else chunk
    return chunk.astype(np.float32)  # ml_dtypes (bfloat16, float8, int4 …)


def has_stats(x: Any) -> bool:
    """Whether `stats` is defined for `x`'s dtype: numbers (bool, ints, floats incl. ml_dtypes,
    complex), not strings, records, objects, datetimes or PRNG keys.

    Example:
        >>> import numpy as np
        >>> has_stats(np.zeros(2, np.float32)), has_stats(np.array(["a"])), has_stats(np.zeros(1, "M8[s]"))
        (True, False, False)
    """
    try:
        dt = np.dtype(getattr(x, "dtype", None))
    except TypeError:  # typed PRNG keys and other dtypes numpy does not know
        return False
    return dt.kind in "biufc" or (dt.kind == "V" and dt.type is not np.void)


def stats(x: Any, bins: int = 20) -> Stats:
    """Min, max, mean, std, NaN/Inf/zero counts and a histogram, read in chunks.

    Works on numpy and jax arrays and on `LazyArray` leaves (streamed from the file, never
    held whole in memory).

    Example:
        >>> import numpy as np
        >>> s = stats(np.array([0.0, 1.0, 2.0, np.nan]))
        >>> s.min, s.max, s.mean, s.nan, s.zeros
        (0.0, 2.0, 1.0, 1, 1)
    """
    if is_key(x) and _is_typed_key_dtype(getattr(x, "dtype", None)):
        raise TypeError("stats of a PRNG key array are not defined; use jax.random.key_data")
    if not has_stats(x):
        raise TypeError(f"stats of a {getattr(x, 'dtype', type(x).__name__)} array are not defined")
    size = n = nan = inf = zeros = 0
    lo, hi = math.inf, -math.inf
    mean = m2 = 0.0
    for raw in _chunks(x):
        c = _as_float(raw)
        size += c.size
        finite = np.isfinite(c)
        nf = int(np.count_nonzero(finite))
        nnan = int(np.count_nonzero(np.isnan(c)))
        nan += nnan
        inf += c.size - nf - nnan
        zeros += int(np.count_nonzero(c == 0))
        if nf == 0:
            continue
        v = c[finite] if nf != c.size else c
        lo = min(lo, float(v.min()))
        hi = max(hi, float(v.max()))
        cm = float(v.mean(dtype=np.float64))
        cm2 = float(((v - cm) ** 2).sum(dtype=np.float64))
        delta = cm - mean
        tot = n + nf
        mean += delta * nf / tot
        m2 += cm2 + delta * delta * n * nf / tot
        n = tot
    if n == 0:
        return Stats(size, None, None, None, None, nan, inf, zeros, None)
    hist = _histogram(x, lo, hi, bins)
    return Stats(size, lo, hi, mean, math.sqrt(m2 / n), nan, inf, zeros, hist)


def _histogram(x: Any, lo: float, hi: float, bins: int) -> tuple[list[int], list[float]]:
    if hi == lo:
        hi = lo + 1.0
    counts = np.zeros(bins, dtype=np.int64)
    edges = np.linspace(lo, hi, bins + 1)
    for raw in _chunks(x):
        c = _as_float(raw)
        c = c[np.isfinite(c)]
        if c.size:
            counts += np.histogram(c, bins=edges)[0]
    return counts.tolist(), edges.tolist()

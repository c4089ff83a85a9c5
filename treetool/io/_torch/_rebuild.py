"""torch's tensor reconstructors, imitated: storages, `_rebuild_tensor_v2/_v3`, parameters.

Nothing of torch is imported or run. A storage (a persistent id of the pickle) is a
`TorchStorage`: a uint8 `LazyArray` over its bytes in the file, with torch's storage facts.
A tensor over it becomes a `LazyArray` leaf (contiguous in C or Fortran order) or a
`StridedArray` (any other view, read through a checked window of its storage), after its
offset and strides (in elements) are checked against the storage: no negative strides, no
overflow, `offset + sum((size - 1) * stride) < numel`. Two tensors that are the same view of
the same storage are one leaf object (tied weights count once); every leaf names its storage
(`view_of`), so that the totals count the bytes of different views of one storage (a slice and
its base, a transpose) once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from treetool._errors import LoadError
from treetool._leaves._lazy_array import LazyArray
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._safety._limits import MAX_DIM, MAX_NDIM
from treetool.io._torch._view import StridedArray

__all__ = [
    "DTYPES",
    "STORAGE_DTYPES",
    "TorchStorage",
    "TensorMaker",
]

#: torch's legacy storage classes -> numpy dtype names (None: quantized, not readable)
STORAGE_DTYPES: dict[str, str | None] = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8",
    "QInt8Storage": None,
    "QUInt8Storage": None,
    "QInt32Storage": None,
    "QUInt4x2Storage": None,
    "QUInt2x4Storage": None,
}

#: `torch.<dtype>` globals -> numpy dtype names (float8 and uint16/32/64 through ml_dtypes/numpy)
DTYPES: dict[str, str] = {
    "float32": "float32",
    "float64": "float64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "complex64": "complex64",
    "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu",
}
_ITEMSIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
    "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
    "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
}  # fmt: skip


#: a view (stride 0 repeats elements) may hold at most this many bytes per byte of its storage,
#: plus `_VIEW_SLACK`: reading it allocates its whole size
_VIEW_PER_BYTE = 1024
_VIEW_SLACK = 64 << 20


class TorchStorage(LazyArray):
    """A torch storage: its bytes in the file as a uint8 `LazyArray`, and torch's facts.

    Attributes:
        key: the storage's key in the file (`data/<key>` in a zip).
        storage_dtype: the dtype its class names (`float32` for `FloatStorage`; `uint8` for
            `UntypedStorage`; None for a quantized storage).
        location: the device it was saved from (`cpu`, `cuda:0`).
        root: `(key, byte offset)` of the storage it lies in: its own key and 0, but for a
            legacy storage view (`view_metadata`), its root storage's key and where it starts.
    """

    __slots__ = ("key", "location", "root", "storage_dtype", "storage_type")

    def __init__(
        self,
        key: str,
        storage_type: str,
        location: str,
        nbytes: int,
        file: str,
        offset: int,
        *,
        opener: Callable[[], Any] | None = None,
        source: Any = None,
    ) -> None:
        super().__init__(
            (nbytes,), "uint8", file, offset, opener=opener, seekable=opener is None, source=source
        )
        self.key = key
        self.storage_type = storage_type
        self.storage_dtype = STORAGE_DTYPES.get(storage_type.rsplit(".", 1)[-1], "uint8")
        self.location = location
        self.root = (key, 0)


def _ints(x: Any, what: str, where: str) -> tuple[int, ...]:
    if type(x) is not tuple or len(x) > MAX_NDIM or any(type(v) is not int for v in x):
        raise LoadError(f"{where}: a tensor's {what} is not a tuple of at most {MAX_NDIM} ints")
    if any(v < 0 or v > MAX_DIM for v in x):
        raise LoadError(f"{where}: a tensor's {what} {list(x)} holds a negative or huge value")
    return x


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _same_layout(shape: tuple[int, ...], strides: tuple[int, ...], want: tuple[int, ...]) -> bool:
    return all(d == 1 or s == w for d, s, w in zip(shape, strides, want))


class TensorMaker:
    """Makes the leaves of one file's tensors; the same view of one storage is one object."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._made: dict[tuple, Any] = {}
        self._buffers: dict[str, TorchStorage] = {}  # root key -> the storage naming its bytes
        self.storage_of: dict[int, str] = {}  # id of a leaf -> its storage's key
        self.locations: dict[str, None] = {}  # the devices its tensors were saved from, in order

    def tensor(
        self, storage: Any, offset: Any, size: Any, stride: Any, dtype: str | None = None
    ) -> Any:
        """The leaf of `storage[offset:]` viewed as `size` with `stride` (elements)."""
        where = self.where
        if type(storage) is not TorchStorage:
            raise LoadError(
                f"{where}: a tensor whose storage is not a storage: {type(storage).__name__}"
            )
        if type(offset) is not int or offset < 0:
            raise LoadError(f"{where}: a tensor's storage offset {offset!r} is not an int >= 0")
        shape = _ints(size, "size", where)
        strides = _ints(stride, "stride", where)
        if len(shape) != len(strides):
            raise LoadError(f"{where}: a tensor of {len(shape)} dims with {len(strides)} strides")
        self.locations.setdefault(storage.location)
        dt = dtype or storage.storage_dtype
        if dt is None:
            return Opaque("torch.quantized_tensor", (storage.storage_type, shape))
        itemsize = _ITEMSIZE[dt]
        numel = storage.shape[0] // itemsize
        count = math.prod(shape)
        if count:
            last = offset + sum((d - 1) * s for d, s in zip(shape, strides))
            if last >= numel:
                raise LoadError(
                    f"{where}: storage {storage.key!r}: a view of size {list(shape)}, stride "
                    f"{list(strides)} at offset {offset} reaches element {last}, past the "
                    f"storage's {numel} elements"
                )
        nbytes = count * itemsize
        if nbytes > _VIEW_PER_BYTE * storage.shape[0] + _VIEW_SLACK:
            raise LoadError(
                f"{where}: storage {storage.key!r}: a view of size {list(shape)} ({nbytes} bytes) "
                f"over {storage.shape[0]} bytes of storage (a stride-0 bomb?)"
            )
        key = (storage.key, offset, shape, strides, dt)
        leaf = self._made.get(key)
        if leaf is not None:
            return leaf  # the same tensor again: tied, counted once
        start = storage.offset + offset * itemsize
        kw: dict[str, Any] = (
            {"opener": _skip_opener(storage, offset * itemsize), "seekable": False}
            if storage._opener
            else {}
        )
        root_key, root_at = storage.root
        buffer = self._buffers.setdefault(root_key, storage)  # views of one storage: counted once
        kw["view_of"] = (buffer, root_at + offset * itemsize)
        if count == 0 or _same_layout(shape, strides, _c_strides(shape)):
            leaf = LazyArray(shape, dt, storage.file, start, source=storage.source, **kw)
        elif _same_layout(shape, strides, _c_strides(shape[::-1])[::-1]):
            leaf = LazyArray(
                shape, dt, storage.file, start, fortran_order=True, source=storage.source, **kw
            )
        else:
            leaf = StridedArray(
                shape, dt, storage.file, start, strides=strides, source=storage.source, **kw
            )
        self._made[key] = leaf
        self.storage_of[id(leaf)] = root_key
        return leaf


def _skip_opener(storage: TorchStorage, skip: int) -> Callable[[], Any] | None:
    base = storage._opener
    if base is None:
        return None

    def opener() -> Any:
        fh = base()
        left = skip
        while left > 0:
            got = fh.read(min(left, 1 << 20))
            if not got:
                break
            left -= len(got)
        return fh

    return opener


def dtype_of(g: Any) -> str | None:
    """The numpy name of a `torch.<dtype>` global, or None."""
    if type(g) is GlobalRef and g.module == "torch":
        return DTYPES.get(g.name)
    return None

"""The allow-listed reconstructors of pickled numpy and jax arrays, imitated by treetool.

The unpickler never looks these up by name and calls them: it recognises the names and runs
the functions below, which only ever build dtypes, numpy arrays or `LazyArray` leaves from
plain data.

numpy is imported only when an array is made in memory or a dtype is not a standard one: a
standard dtype (`numpy.dtype('f4')` with its byte order, `ml_dtypes.bfloat16`) is a
`PlainDtype` (numpy's name and itemsize, and the spec that makes it), so reading the structure
of a pickle whose arrays stay in the file does not import numpy. Within `listing()` (the
CLI's listing commands), an array whose bytes the pickle holds inline (a small one, or any in
protocol 2) is a `HostArray`, which lists as the numpy array it stands for: then no array is
made in memory either. `numpy()` imports numpy and adds its array type to the type sets the
reader's walks keep (`ARRAY_SETS`).
"""

from __future__ import annotations

import functools
import io
import math
import re
import sys
import threading
import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool._leaves._dtypes import ITEMSIZES, ML_DTYPE_NAMES, _as_dtype, loaded_numpy, spec_facts
from treetool.io._listing import in_listing as in_listing
from treetool.io._listing import listing as listing
from treetool.io._safety._bigint import HugeInt
from treetool.io._safety._budget import Budget

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ARRAY_SETS",
    "HostArray",
    "HostScalar",
    "PendingArray",
    "PendingDtype",
    "PlainDtype",
    "array_from_state",
    "dtype_of",
    "in_listing",
    "is_object_array",
    "listing",
    "make_dtype",
    "numpy",
    "plain_dtypes",
    "plain_escaped",
]

#: sets of types that hold numpy's ndarray once numpy is imported (the reader's shareable and
#: walked types): a numpy array exists only after `numpy()` ran
ARRAY_SETS: list[set[type]] = []


_NUMPY: list[ModuleType] = []  # numpy, once `numpy()` imported it


def numpy() -> ModuleType:
    """numpy, imported now if it was not; the reader's type sets learn its array type."""
    if _NUMPY:
        return _NUMPY[0]
    import numpy as np

    for s in ARRAY_SETS:
        s.add(np.ndarray)
    _NUMPY.append(np)
    return np


def is_object_array(x: Any) -> bool:
    """Whether `x` is a numpy array of Python objects (never true before numpy is imported)."""
    np = loaded_numpy()
    return np is not None and type(x) is np.ndarray and x.dtype.hasobject


#: numpy's own names of the standard dtypes (ml_dtypes' names are not numpy dtype strings)
_NUMPY_NAMES = frozenset(
    n for n in ITEMSIZES if re.fullmatch(r"bool|u?int\d+|float\d+|complex\d+", n)
)
_LITTLE = sys.byteorder == "little"
_DESCR = re.compile(r"[a-zA-Z?]\d{0,4}")  # a descr without its byte order: `f4`, `b1`, `V2`


# per thread: whether the read under way may keep standard dtypes as `PlainDtype`, and the
# ones it made (weakly: one still alive once the reader is gone is in the tree)
_READ = threading.local()


class HostArray(LazyArray):
    """An array whose bytes a pickle holds inline, made within `listing()`: its leaf facts are
    those of the numpy array the reader makes otherwise (`ndarray`, on the host), without
    numpy; its values are read from the bytes it keeps (`np.asarray(x)`)."""

    __slots__ = ()

    def __init__(self, shape: tuple[int, ...], dtype: Any, data: bytes, fortran: bool) -> None:
        opener = functools.partial(io.BytesIO, data)
        super().__init__(shape, dtype, "<pickle bytes>", 0, fortran_order=fortran, opener=opener)

    @property
    def listed_as(self) -> tuple[str, str | None, str]:
        """Listed as the numpy array it stands for."""
        return ("array", "ndarray", "host")


class HostScalar(HostArray):
    """A numpy scalar a file holds (a pickle's `numpy.core.multiarray.scalar`, flax msgpack's
    scalar extension) of a standard dtype (`spec`), made within `listing()`: listed as the
    numpy scalar (its type is named as its dtype: `float32`, `int64`), 0-d."""

    __slots__ = ()

    def __init__(self, spec: str, data: bytes) -> None:
        super().__init__((), spec, data, False)

    @property
    def listed_as(self) -> tuple[str, str | None, str]:
        """Listed as the numpy scalar it stands for."""
        return ("array", self.dtype_name, "host")


def plain_dtypes(allow: bool) -> None:
    """Start a read: may it keep standard dtypes as `PlainDtype` (numpy not imported)?

    A dtype object the file puts in the tree itself (not as an array's dtype) must be
    numpy's: after the read, `plain_escaped` says whether one of them is still alive, and the
    reader then reads the file again with `plain_dtypes(False)`.
    """
    _READ.allow = allow
    _READ.made = weakref.WeakSet() if allow else None


def plain_escaped() -> bool:
    """Whether a `PlainDtype` of the read that `plain_dtypes` started is still alive (in the
    tree, once the reader's memo and stack are gone); ends the read's tracking."""
    made = getattr(_READ, "made", None)
    _READ.allow, _READ.made = False, None
    return bool(made)


def _new_plain(spec: str, name: str, itemsize: int) -> PlainDtype:
    dt = PlainDtype(spec, name, itemsize)
    _READ.made.add(dt)
    return dt


class PlainDtype:
    """A standard dtype a pickle names, kept without numpy: numpy's `name` and `itemsize`, and
    `spec`, what makes the numpy dtype (`f4`, `>i8`, `bfloat16`); `numpy()` makes it.

    Example:
        >>> dt = PlainDtype(">i8", "int64", 8)
        >>> dt.name, dt.itemsize, dt.numpy().str
        ('int64', 8, '>i8')
    """

    __slots__ = ("__weakref__", "_np", "itemsize", "name", "spec")
    hasobject = False

    def __init__(self, spec: str, name: str, itemsize: int) -> None:
        self.spec, self.name, self.itemsize = spec, name, itemsize
        self._np: Any = None

    def numpy(self) -> np.dtype:
        """The numpy dtype (imports numpy)."""
        if self._np is None:
            numpy()
            self._np = _as_dtype(self.spec)
        return self._np

    def with_order(self, order: str) -> Any:
        """The dtype after a BUILD state's byte order, as numpy's `__setstate__` makes it."""
        if order != ">" or self.itemsize == 1 or self.name.startswith("void"):
            return self  # native (this is a little-endian host), or no byte order
        if self.spec not in ITEMSIZES and self.spec[:1] not in "<>|=":  # a descr: `f4`
            return _new_plain(">" + self.spec, self.name, self.itemsize)
        return PendingDtype(self.numpy()).build((3, order))  # anything else: numpy's way

    def __repr__(self) -> str:
        return repr(self.numpy())


def _plain(spec: str) -> PlainDtype | None:
    """The `PlainDtype` of a `numpy.dtype(spec)` argument, or None (ask numpy)."""
    if not _plain_ok() or not (spec in _NUMPY_NAMES or _DESCR.fullmatch(spec)):
        return None
    facts = spec_facts(spec)
    return None if facts is None else _new_plain(spec, *facts)


def _plain_ok() -> bool:
    return _LITTLE and getattr(_READ, "allow", False)


class MlDtypeType:
    """The `ml_dtypes.<name>` scalar type named by a file (only names ml_dtypes defines)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class PendingDtype:
    """A dtype built by `numpy.dtype(...)`, waiting for its BUILD state (byte order)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: np.dtype | PlainDtype) -> None:
        self.dtype = dtype

    def build(self, state: Any) -> Any:
        if isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "="):
            if isinstance(self.dtype, PlainDtype):
                return self.dtype.with_order(state[1])
            if state[1] in ("<", ">") and self.dtype.byteorder != "|":
                new = self.dtype.newbyteorder(state[1])
                return self.dtype if new == self.dtype else new
            return self.dtype
        raise LoadError(f"unsupported dtype state {_short(state)}")


class PendingArray:
    """An ndarray made by `numpy.core.multiarray._reconstruct`, waiting for its BUILD state."""

    __slots__ = ()


_SCALARS = (bool, float, complex, type(None))


def _short(x: Any) -> str:
    """A short description of a value read from a file, in bounded time and memory.

    Never the repr of a container (a file can nest them a million deep, or share one a million
    times), nor of a huge int (its decimal digits cost quadratic time).
    """
    t = type(x)
    if t is str or t is bytes or t is bytearray:
        r = repr(x[:60])
    elif t is int:
        r = repr(x) if x.bit_length() <= 128 else f"an int of {x.bit_length()} bits"
    elif t is HugeInt:
        r = f"an int of {x.value.bit_length()} bits"
    elif t in _SCALARS or t is PlainDtype or _is_numpy_dtype_or_scalar(x):
        r = repr(x)
    elif isinstance(x, tuple | list | dict | set | frozenset):
        r = f"a {t.__name__} of {len(x)} items"
    elif t is MlDtypeType:
        r = f"ml_dtypes.{x.name}"
    else:
        r = f"a {getattr(t, '__name__', 'value')}"
    return r if len(r) < 80 else r[:77] + "..."


def _is_numpy_dtype_or_scalar(x: Any) -> bool:
    np = loaded_numpy()
    return np is not None and isinstance(x, np.dtype | np.generic)


def make_dtype(args: Any) -> PendingDtype:
    """`numpy.dtype(obj, align, copy)` for a type-string or an ml_dtypes type."""
    if not isinstance(args, tuple) or not args:
        raise LoadError(f"bad numpy.dtype arguments {_short(args)}")
    spec = args[0]
    if isinstance(spec, MlDtypeType):
        size = ITEMSIZES.get(spec.name) if _plain_ok() else None
        if size is not None:
            return PendingDtype(_new_plain(spec.name, spec.name, size))
        import ml_dtypes

        np = numpy()
        return PendingDtype(np.dtype(getattr(ml_dtypes, spec.name)))
    if isinstance(spec, str) and len(spec) <= 16 and spec.isascii():
        plain = _plain(spec)
        if plain is not None:
            return PendingDtype(plain)
        np = numpy()
        try:
            dt = np.dtype(spec)
        except Exception:  # TypeError, and SyntaxError/ValueError from numpy's shape parser
            raise LoadError(f"unknown dtype {spec!r}") from None
        if dt.fields is not None or dt.subdtype is not None:
            raise LoadError(f"structured dtype {spec!r} is not supported")
        if dt.itemsize == 0:
            raise LoadError(f"dtype {spec!r} has no size (itemsize 0)")
        return PendingDtype(dt)
    raise LoadError(f"unsupported numpy.dtype argument {_short(spec)}")


#: the largest item a file's dtype may have (`S`/`U`/`V` of a few KiB in real files): a bigger
#: one would be allocated whole for a scalar (`V2147483647`: 2 GiB for a few bytes of file)
MAX_ITEMSIZE = 1 << 20


def dtype_of(x: Any) -> Any:
    """The dtype of a dtype argument found in a file: a `PlainDtype` or a numpy dtype, its
    item at most `MAX_ITEMSIZE` bytes."""
    t = type(x)
    if t is PendingDtype:
        x, t = x.dtype, type(x.dtype)
    np = loaded_numpy()  # no numpy imported: no numpy dtype exists
    if t is PlainDtype or (np is not None and isinstance(x, np.dtype)):
        if x.itemsize > MAX_ITEMSIZE:
            raise LoadError(
                f"dtype {x.name} has items of {x.itemsize} bytes, more than {MAX_ITEMSIZE}"
            )
        return x
    raise LoadError(f"expected a dtype, found {_short(x)}")


_MAX_DIM = 2**62


def _shape(x: Any) -> tuple[int, ...]:
    if type(x) is not tuple or len(x) > 64:
        raise LoadError(f"bad array shape {_short(x)}")
    for d in x:
        if type(d) is not int or d < 0 or d > _MAX_DIM:
            raise LoadError(f"bad array shape: dimension {_short(d)}")
    return x


def _latin1(s: str) -> bytes:
    try:
        return s.encode("latin1")
    except UnicodeEncodeError:
        raise LoadError("array data is text that is not latin-1") from None


def array_from_data(
    shape: tuple[int, ...],
    dtype: Any,
    data: Any,
    fortran: bool,
    lazy: bool,
    budget: Budget | None = None,
) -> Any:
    """An array from raw data: bytes/bytearray (in memory) or a LazyArray of raw bytes.

    `dtype` is a `PlainDtype` or a numpy dtype. `budget` is charged for what is copied (object
    arrays, payloads read with `lazy=False`).
    """
    shape = _shape(shape)
    plain = type(dtype) is PlainDtype
    if not plain and dtype.itemsize == 0:
        raise LoadError(f"dtype {dtype.str!r} has no size (itemsize 0)")
    nbytes = math.prod(shape) * dtype.itemsize
    if not plain and dtype.kind == "O":
        np = numpy()
        if not isinstance(data, list) or len(data) != math.prod(shape):
            raise LoadError("object array data does not match its shape")
        if budget is not None:
            budget.charge_alloc(8 * len(data))
        # element by element: numpy's sequence discovery (arr[:] = data) would read every
        # lazy element and build an (n, ...) array of them
        arr = np.fromiter(data, dtype=object, count=len(data))
        return arr.reshape(shape)  # numpy lists object items in C order, fortran flag or not
    if isinstance(data, LazyArray):
        if data.nbytes != nbytes:
            raise LoadError(
                f"array payload of {data.nbytes} bytes does not match {dtype.name}{list(shape)} "
                f"({nbytes} bytes)"
            )
        out = LazyArray(
            shape, dtype.spec if plain else dtype, data.file, data.offset, fortran_order=fortran
        )
        if lazy:
            return out
        if budget is not None:  # one payload may be shared by many arrays
            budget.charge_alloc(nbytes)
        return out.read().copy()
    if isinstance(data, str):  # protocol 0-2 pickles of numpy < 1.x store latin-1 text
        data = _latin1(data)
    if not isinstance(data, bytes | bytearray):
        raise LoadError(f"bad array data {_short(data)}")
    if len(data) != nbytes:
        raise LoadError(
            f"array payload of {len(data)} bytes does not match {dtype.name}{list(shape)} "
            f"({nbytes} bytes)"
        )
    if in_listing():  # listing: the bytes, and what they are
        return HostArray(shape, dtype.spec if plain else dtype, bytes(data), fortran)
    # a read-only view of the bytes read from the file (they are not shared with anything)
    arr = numpy().frombuffer(data, dtype=dtype.numpy() if plain else dtype)
    return arr.reshape(shape, order="F" if fortran else "C")


def array_from_state(state: Any, lazy: bool, budget: Budget | None = None) -> Any:
    """`ndarray.__setstate__((version, shape, dtype, is_fortran, rawdata))`, imitated."""
    if not isinstance(state, tuple) or len(state) not in (4, 5):
        raise LoadError(f"bad ndarray state {_short(state)}")
    if len(state) == 5:
        state = state[1:]
    shape, dtype, fortran, data = state
    return array_from_data(shape, dtype_of(dtype), data, bool(fortran), lazy, budget)


def frombuffer(args: Any, lazy: bool, budget: Budget | None = None) -> Any:
    """`numpy.core.numeric._frombuffer(buf, dtype, shape, order)`, imitated (protocol 5)."""
    if not isinstance(args, tuple) or len(args) != 4:
        raise LoadError(f"bad _frombuffer arguments {_short(args)}")
    buf, dtype, shape, order = args
    return array_from_data(shape, dtype_of(dtype), buf, order == "F", lazy, budget)


def scalar(args: Any) -> Any:
    """`numpy.core.multiarray.scalar(dtype, bytes)`, imitated."""
    if not isinstance(args, tuple) or len(args) not in (1, 2):
        raise LoadError(f"bad numpy scalar arguments {_short(args)}")
    dt = dtype_of(args[0])
    if type(dt) is PlainDtype and in_listing() and not dt.name.startswith("void"):
        data = args[1] if len(args) == 2 else b"\0" * dt.itemsize
        if isinstance(data, str):
            data = _latin1(data)
        if not isinstance(data, bytes | bytearray) or len(data) != dt.itemsize:
            raise LoadError(f"bad numpy scalar data for {dt.name}")
        return HostScalar(dt.spec, bytes(data))  # listing: the bytes, and what they are
    np = numpy()
    if type(dt) is PlainDtype:
        dt = dt.numpy()
    if dt.kind == "O":
        raise LoadError("numpy object scalars are not supported")
    if dt.itemsize == 0:
        raise LoadError(f"dtype {dt.str!r} has no size (itemsize 0)")
    data = args[1] if len(args) == 2 else b"\0" * dt.itemsize
    if isinstance(data, str):
        data = _latin1(data)
    if not isinstance(data, bytes | bytearray) or len(data) != dt.itemsize:
        raise LoadError(f"bad numpy scalar data for {dt.name}")
    return np.frombuffer(bytes(data), dtype=dt)[0]


def is_ml_dtype(name: str) -> bool:
    """Whether `ml_dtypes.<name>` is a dtype type the unpickler may name."""
    return name in ML_DTYPE_NAMES


# --- typed PRNG keys ------------------------------------------------------------------------

#: the tag jax names each known implementation's dtype with (`key<fry>`)
_KEY_TAGS = {"threefry2x32": "fry", "rbg": "rbg", "unsafe_rbg": "urbg"}


_KEY_NAME = re.compile(r"[A-Za-z0-9_.\-?]{1,64}")


def _key_text(x: Any) -> str | None:
    """An impl name or tag from a file when it looks like one (`threefry2x32`, `fry`), or None."""
    if type(x) is str and _KEY_NAME.fullmatch(x):
        return x
    return None


def is_numpy_uint32(x: Any) -> bool:
    """Whether `x` is a numpy array of native uint32 (never true before numpy is imported)."""
    np = loaded_numpy()
    return np is not None and isinstance(x, np.ndarray) and x.dtype == np.uint32


def key_array(base: Any, impl_args: tuple) -> Any:
    """A `KeyArray` from a pickled key's data and its `PRNGImpl(...)` arguments, or None.

    `PRNGImpl(key_shape, seed, split, random_bits, fold_in, name, tag)`: the functions are
    never looked at; the name, tag and key shape give the dtype jax shows (`key<fry>`).
    """
    from treetool._leaves._prng import KeyArray

    if isinstance(base, LazyArray):
        if base.dtype_name != "uint32" or str(base.dtype_arg).startswith(">"):
            return None
    elif not is_numpy_uint32(base):
        return None
    if len(impl_args) < 7:
        return None
    key_shape, name, tag = impl_args[0], _key_text(impl_args[5]), _key_text(impl_args[6])
    if type(key_shape) is not tuple or not all(type(d) is int and d > 0 for d in key_shape):
        return None
    if name is None or (tag is None and name not in _KEY_TAGS):
        return None
    try:
        return KeyArray(base, name, tag or _KEY_TAGS[name], key_shape)
    except ValueError:  # the data does not end with the key shape
        return None

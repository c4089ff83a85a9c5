"""The allow-listed reconstructors of pickled numpy and jax arrays, imitated by treetool.

The unpickler never looks these up by name and calls them: it recognises the names and runs
the functions below, which only ever build dtypes, numpy arrays or `LazyArray` leaves from
plain data.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .._arrays import LazyArray
from .._errors import LoadError
from ._budget import Budget

__all__ = ["PendingArray", "PendingDtype", "array_from_state", "dtype_of", "make_dtype"]

_ML_DTYPES = frozenset(
    {
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3b11fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e3m4",
        "float8_e4m3",
        "float8_e8m0fnu",
        "float4_e2m1fn",
        "float6_e2m3fn",
        "float6_e3m2fn",
        "int2",
        "int4",
        "uint2",
        "uint4",
    }
)


class MlDtypeType:
    """The `ml_dtypes.<name>` scalar type named by a file (only names ml_dtypes defines)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class PendingDtype:
    """A dtype built by `numpy.dtype(...)`, waiting for its BUILD state (byte order)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype

    def build(self, state: Any) -> np.dtype:
        if isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "="):
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
    elif t in _SCALARS or isinstance(x, np.dtype | np.generic):
        r = repr(x)
    elif isinstance(x, tuple | list | dict | set | frozenset):
        r = f"a {t.__name__} of {len(x)} items"
    elif t is MlDtypeType:
        r = f"ml_dtypes.{x.name}"
    else:
        r = f"a {getattr(t, '__name__', 'value')}"
    return r if len(r) < 80 else r[:77] + "..."


def make_dtype(args: Any) -> PendingDtype:
    """`numpy.dtype(obj, align, copy)` for a type-string or an ml_dtypes type."""
    if not isinstance(args, tuple) or not args:
        raise LoadError(f"bad numpy.dtype arguments {_short(args)}")
    spec = args[0]
    if isinstance(spec, MlDtypeType):
        import ml_dtypes

        return PendingDtype(np.dtype(getattr(ml_dtypes, spec.name)))
    if isinstance(spec, str) and len(spec) <= 16 and spec.isascii():
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


def dtype_of(x: Any) -> np.dtype:
    """The np.dtype of a dtype argument found in a file."""
    if isinstance(x, np.dtype):
        return x
    if isinstance(x, PendingDtype):
        return x.dtype
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
    dtype: np.dtype,
    data: Any,
    fortran: bool,
    lazy: bool,
    budget: Budget | None = None,
) -> Any:
    """An array from raw data: bytes/bytearray (in memory) or a LazyArray of raw bytes.

    `budget` is charged for what is copied (object arrays, payloads read with `lazy=False`).
    """
    shape = _shape(shape)
    if dtype.itemsize == 0:
        raise LoadError(f"dtype {dtype.str!r} has no size (itemsize 0)")
    nbytes = math.prod(shape) * dtype.itemsize
    if dtype.kind == "O":
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
        out = LazyArray(shape, dtype, data.file, data.offset, fortran_order=fortran)
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
    # a read-only view of the bytes read from the file (they are not shared with anything)
    arr = np.frombuffer(data, dtype=dtype)
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
    return name in _ML_DTYPES


# --- typed PRNG keys ------------------------------------------------------------------------

#: the tag jax names each known implementation's dtype with (`key<fry>`)
_KEY_TAGS = {"threefry2x32": "fry", "rbg": "rbg", "unsafe_rbg": "urbg"}


_KEY_NAME = re.compile(r"[A-Za-z0-9_.\-?]{1,64}")


def _key_text(x: Any) -> str | None:
    """An impl name or tag from a file when it looks like one (`threefry2x32`, `fry`), or None."""
    if type(x) is str and _KEY_NAME.fullmatch(x):
        return x
    return None


def key_array(base: Any, impl_args: tuple) -> Any:
    """A `KeyArray` from a pickled key's data and its `PRNGImpl(...)` arguments, or None.

    `PRNGImpl(key_shape, seed, split, random_bits, fold_in, name, tag)`: the functions are
    never looked at; the name, tag and key shape give the dtype jax shows (`key<fry>`).
    """
    from .._prng import KeyArray

    if not isinstance(base, np.ndarray | LazyArray) or base.dtype != np.uint32:
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

"""dtypes in words and values in their own digits: `f32`, `bf16`, `key<fry>`, `-0.079747714`.

Names come from numpy and ml_dtypes without importing jax; a float32 value shows the shortest
decimal that reads back as the same float32.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["dtype_bits", "dtype_name", "scalar_value", "short_dtype", "values_list"]

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


def _as_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(dtype)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, str(dtype)))

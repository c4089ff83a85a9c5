"""dtypes in words and values in their own digits: `f32`, `bf16`, `key<fry>`, `-0.079747714`.

Names come from numpy and ml_dtypes without importing jax; a float32 value shows the shortest
decimal that reads back as the same float32. The standard dtypes checkpoint formats carry
(bool, ints, floats, complex, bfloat16, the float8 family) are also described without numpy
(`spec_facts`: numpy's name and itemsize from a name or a `descr` such as `<f4`), so reading
a file's structure does not import numpy; numpy is imported where values or a real
`np.dtype` are needed.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "dtype_bits",
    "dtype_name",
    "loaded_numpy",
    "name_bits",
    "scalar_value",
    "short_dtype",
    "spec_facts",
    "values_list",
]


def loaded_numpy() -> Any:
    """numpy's module when it is imported and initialised, else None: no numpy array,
    dtype or scalar can exist yet, so a check against numpy's types needs no import.

    A module another thread is still importing is in `sys.modules` half-built (reading
    `np.ndarray` from it raises "partially initialized module"): it counts as not imported.

    Example:
        >>> import numpy
        >>> loaded_numpy() is numpy
        True
    """
    global _numpy
    if _numpy is not None:
        return _numpy
    np = sys.modules.get("numpy")
    if np is None or getattr(getattr(np, "__spec__", None), "_initializing", False):
        return None
    _numpy = np  # once whole, for good (asked once per leaf by leaf facts)
    return np


_numpy: Any = None


#: ml_dtypes' types numpy knows by name only once ml_dtypes is imported
ML_DTYPE_NAMES = frozenset(
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

#: numpy's name -> itemsize of the dtypes described without numpy (ml_dtypes' sub-byte types
#: take one byte per element in memory; `name_bits` gives their real width)
ITEMSIZES: dict[str, int] = {
    "bool": 1,
    **{f"int{b}": b // 8 for b in (8, 16, 32, 64)},
    **{f"uint{b}": b // 8 for b in (8, 16, 32, 64)},
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
    "bfloat16": 2,
    **dict.fromkeys(sorted(ML_DTYPE_NAMES - {"bfloat16"}), 1),  # one byte each in memory
}

# numpy `descr` kind + itemsize -> name (the byte order changes neither the name nor the size)
_DESCR_NAMES = {
    "b1": "bool",
    "?": "bool",
    **{f"i{n}": f"int{8 * n}" for n in (1, 2, 4, 8)},
    **{f"u{n}": f"uint{8 * n}" for n in (1, 2, 4, 8)},
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
    "c8": "complex64",
    "c16": "complex128",
}
_DESCR = re.compile(r"([<>|=]?)([a-zA-Z?])(\d{0,4})")
_spec_cache: dict[str, tuple[str, int] | None] = {}


def spec_facts(spec: str) -> tuple[str, int] | None:
    """numpy's `(name, itemsize)` of a dtype name or `descr`, without numpy; None when the
    dtype is not a standard one (structured, datetime, long double...: ask numpy).

    Example:
        >>> spec_facts("bfloat16"), spec_facts(">i8"), spec_facts("|b1"), spec_facts("<V2")
        (('bfloat16', 2), ('int64', 8), ('bool', 1), ('void16', 2))
        >>> spec_facts("<M8[ns]") is None
        True
    """
    try:
        return _spec_cache[spec]
    except KeyError:
        pass
    out: tuple[str, int] | None = None
    size = ITEMSIZES.get(spec)
    if size is not None:
        out = (spec, size)
    else:
        m = _DESCR.fullmatch(spec)
        if m is not None:
            kind, digits = m.group(2), m.group(3)
            name = _DESCR_NAMES.get(kind + digits)
            if name is not None:
                out = (name, ITEMSIZES[name])
            elif kind == "V" and digits and 0 < int(digits) <= 4096:
                out = (f"void{8 * int(digits)}", int(digits))
    if len(_spec_cache) < 256:
        _spec_cache[spec] = out
    return out


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
    itemsize = getattr(dtype, "itemsize", None)
    return name_bits(dtype_name(dtype), int(itemsize) if itemsize else 0)


def name_bits(name: str, itemsize: int) -> int:
    """Bits per element of the dtype `name` of `itemsize` bytes (int4 is 4, not 8).

    Example:
        >>> name_bits("int4", 1), name_bits("bfloat16", 2)
        (4, 16)
    """
    key = (name, itemsize)
    bits = _bits_cache.get(key)
    if bits is None:
        m = _SUBBYTE.match(name)
        bits = int(m.group(1) or m.group(2)) if m else 8 * itemsize
        if len(_bits_cache) < 1024:
            _bits_cache[key] = bits
    return bits


_bits_cache: dict[tuple[str, int], int] = {}


def scalar_value(x: Any) -> Any:
    """The Python value of a one-element array, with the digits of its own dtype.

    A float32 shows the shortest decimal that reads back as the same float32, not the
    float64 expansion of its bits (`-0.07974771410226822`).

    Example:
        >>> import numpy as np
        >>> scalar_value(np.float32(-0.07974771410226822))
        -0.079747714
    """
    import numpy as np

    v = np.asarray(x).reshape(())[()]
    item = v.item()
    if isinstance(item, float) and v.dtype.itemsize < 8:
        return float(str(v))
    return item


def values_list(arr: np.ndarray) -> Any:
    """`arr.tolist()`, with float16/32 (and bfloat16) values in their own shortest digits.

    Example:
        >>> import numpy as np
        >>> values_list(np.array([0.1, -0.0797477], np.float32))
        [0.1, -0.0797477]
    """
    import numpy as np

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
    import numpy as np

    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(dtype)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, str(dtype)))

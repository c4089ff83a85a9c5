"""Leaf facts from metadata only: is it an array, a PRNG key; shape, dtype, bytes, device.

jax is never imported here: a jax array can only exist when jax has already been imported,
so `sys.modules` tells whether to look for one; numpy likewise, through `loaded_numpy()` (a
file's `LazyArray` leaves give their dtype's name and itemsize without it).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from treetool._leaves._dtypes import dtype_bits, dtype_name, loaded_numpy, name_bits, short_dtype
from treetool._leaves._lazy_array import LazyArray
from treetool._leaves._prng import KeyArray
from treetool._public import set_module
from treetool._typetests import is_shape_struct

__all__ = ["LeafInfo", "is_array", "is_key", "leaf_info", "may_be_raw_key"]

# --- facts --------------------------------------------------------------------------------


def _jax_array_type() -> type | None:
    jax = sys.modules.get("jax")
    return getattr(jax, "Array", None) if jax is not None else None


def is_array(x: Any) -> bool:
    """Whether `x` is an array leaf (numpy, jax, LazyArray or a ShapeDtypeStruct)."""
    if isinstance(x, (LazyArray, KeyArray)):
        return True
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    if np is not None and isinstance(x, (np.ndarray, np.generic)):
        return True
    jarr = _jax_array_type()
    if jarr is not None and isinstance(x, jarr):
        return True
    return is_shape_struct(x)


def _is_typed_key_dtype(dtype: Any) -> bool:
    return dtype_name(dtype).startswith("key<")


@set_module("treetool")
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
    if isinstance(x, LazyArray):
        return x._dtname.startswith("key<")
    dtype = getattr(x, "dtype", None)
    return dtype is not None and _is_typed_key_dtype(dtype)


def may_be_raw_key(x: Any) -> bool:
    """A hint only: `x` has the shape and dtype of legacy raw keys (`uint32[..., 2]`).

    Such an array may as well be an edge list; nothing counts it as a key.
    """
    if isinstance(x, LazyArray):
        name: str | None = x._dtname
    else:
        dtype = getattr(x, "dtype", None)
        name = None if dtype is None else dtype_name(dtype)
    shape: tuple[int, ...] = getattr(x, "shape", ())
    return name == "uint32" and len(shape) >= 1 and shape[-1] == 2


@set_module("treetool")
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


@set_module("treetool")
def leaf_info(x: Any) -> LeafInfo:
    """Facts about one leaf, from metadata only.

    Example:
        >>> import numpy as np
        >>> info = leaf_info(np.zeros((128, 784), np.float32))
        >>> info.label, info.params, info.nbytes
        ('f32[128,784]', 100352, 401408)
    """
    t = type(x)
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    if np is not None and t is np.ndarray:
        return _array_info("array", "ndarray", x.shape, x.dtype, device="host")
    tname = t.__name__
    if x is None:
        return LeafInfo("none", "None")
    if isinstance(x, LazyArray):
        return _lazy_info(x, tname)
    if t is KeyArray:
        lazy = isinstance(x.data, LazyArray) and x.data.listed_as[0] == "lazy"
        return _array_info(
            "lazy" if lazy else "array", tname, x.shape, x.dtype, "file" if lazy else "host"
        )
    if np is not None and isinstance(x, np.ndarray):
        return _array_info("array", tname, x.shape, x.dtype, device="host")
    if np is not None and isinstance(x, np.generic):
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


_lazy_bits: dict[str, int] = {}  # bits per element by dtype name, for plain LazyArrays


def _lazy_info(x: LazyArray, tname: str) -> LeafInfo:
    # the dtype's name and itemsize, without making the numpy dtype
    shape, name = x.shape, x._dtname
    if type(x) is LazyArray:
        kind, device = "lazy", "file"
    else:
        kind, listed_type, device = x.listed_as
        tname = listed_type or tname
    bits = _lazy_bits.get(name)
    if bits is None:
        if name.startswith("key<"):
            return _array_info(kind, tname, shape, x.dtype, device=device)
        bits = name_bits(name, x._itemsize)
        if len(_lazy_bits) < 1024:
            _lazy_bits[name] = bits
    size = math.prod(shape)
    nbytes = (size * bits + 7) // 8
    if kind == "lazy" and type(x) is not LazyArray:  # block-quantized storage: bytes on disk
        nbytes = getattr(x, "disk_nbytes", nbytes)
    return LeafInfo(kind, tname, shape, name, nbytes, size, False, device)


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

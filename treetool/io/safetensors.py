"""safetensors files: the JSON header only; every tensor is a `LazyArray` into the file.

Layout: 8 bytes little-endian header length N, N bytes of JSON
(`{"name": {"dtype": "F32", "shape": [..], "data_offsets": [a, b]}, "__metadata__": {...}}`),
then the data; offsets are relative to the end of the header.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

from .._arrays import LazyArray
from .._errors import LoadError
from ._keys import tree_from_keystrs
from ._source import Source, source_for

__all__ = ["DTYPES", "looks_like_safetensors", "read", "write"]

_MAX_HEADER = 100 << 20

#: safetensors dtype name -> numpy dtype name (ml_dtypes names for the small floats)
DTYPES: dict[str, str] = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
_NAMES = {v: k for k, v in DTYPES.items()}


def _np_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def looks_like_safetensors(path: str, head: bytes) -> bool:
    """Header length that fits the file, followed by a JSON object."""
    if len(head) < 10:
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 2 <= n <= min(_MAX_HEADER, source_for(path).size - 8) and head[8:9] == b"{"


def read(
    path: str,
    *,
    trust: bool = False,
    lazy: bool = True,
    like: Any = None,
    partial: bool = False,
    format: str = "safetensors",
) -> Any:
    """`treetool.io.read` for safetensors files."""
    from . import Loaded

    return Loaded(tree_from_keystrs(read_flat(source_for(path), lazy)), format)


def read_flat(src: Source, lazy: bool = True) -> dict[str, Any]:
    """`{tensor name: LazyArray}` of one safetensors file (one ranged read remotely)."""
    path, size = src.name, src.size
    with src.open() as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise LoadError(f"{path}: truncated safetensors file")
        n = struct.unpack("<Q", raw)[0]
        if n > min(_MAX_HEADER, size - 8):
            raise LoadError(f"{path}: safetensors header claims {n} bytes, the file has {size - 8}")
        text = fh.read(n)
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):
        raise LoadError(f"{path}: safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise LoadError(f"{path}: safetensors header is not a JSON object")
    base = 8 + n
    flat: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        flat[name] = _leaf(src, name, entry, base, size, lazy)
    return flat


def _leaf(src: Source, name: str, entry: Any, base: int, size: int, lazy: bool) -> Any:
    path = src.name
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise LoadError(f"{where}: header entry is not an object")
    dt, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dt not in DTYPES:
        raise LoadError(f"{where}: unsupported dtype {dt!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise LoadError(f"{where}: bad shape {shape!r}")
    if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)):
        raise LoadError(f"{where}: bad data_offsets {offs!r}")
    dtype = _np_dtype(DTYPES[dt])
    nbytes = math.prod(shape) * dtype.itemsize
    start, stop = offs
    if stop - start != nbytes or start < 0:
        raise LoadError(f"{where}: data_offsets {offs} do not match {dt}{shape} ({nbytes} bytes)")
    if base + stop > size:
        raise LoadError(f"{where}: data ends at byte {base + stop}, the file has {size}")
    leaf = LazyArray(tuple(shape), dtype, path, base + start, source=src if src.remote else None)
    return leaf if lazy else leaf.read().copy()


def write(flat: dict[str, Any], path: str) -> None:
    """Write `{name: array}` as a safetensors file (arrays are read if they are lazy)."""
    header: dict[str, Any] = {}
    arrays = []
    offset = 0
    for name, leaf in flat.items():
        arr = np.ascontiguousarray(np.asarray(leaf))
        dt = _NAMES.get(arr.dtype.name)
        if dt is None:
            raise LoadError(f"{path}: safetensors cannot store dtype {arr.dtype.name} (at {name})")
        header[name] = {
            "dtype": dt,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
        arrays.append(arr)
    header["__metadata__"] = {"format": "treetool"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for arr in arrays:
            fh.write(arr.tobytes())

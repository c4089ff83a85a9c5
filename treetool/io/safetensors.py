"""safetensors files: the JSON header only; every tensor is a `LazyArray` into the file.

Layout: 8 bytes little-endian header length N, N bytes of JSON
(`{"name": {"dtype": "F32", "shape": [..], "data_offsets": [a, b]}, "__metadata__": {...}}`),
then the data; offsets are relative to the end of the header.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from typing import Any

from treetool._errors import LoadError, SaveError
from treetool._leaves._arrays import LazyArray
from treetool._leaves._dtypes import ITEMSIZES
from treetool._source import Source, source_for
from treetool.io._formats import Format, Probe, ReadOptions
from treetool.io._keys import tree_from_keystrs
from treetool.io._loaded import Loaded
from treetool.io._safety._limits import check_json_text, check_shape

__all__ = ["DTYPES", "FORMAT", "PATHS_KEY", "looks_like_safetensors", "read_flat", "write"]

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


def looks_like_safetensors(path: str, head: bytes) -> bool:
    """A header length that fits the file, and a header that starts with `{` and ends with `}`.

    The three checks together cannot be met by the other formats' first bytes (a pickle's
    `0x80 PROTO`, a msgpack map), whatever byte the header length starts with.
    """
    if len(head) < 10 or head[8:9] != b"{":
        return False
    n = struct.unpack("<Q", head[:8])[0]
    src = source_for(path)
    if not 2 <= n <= min(_MAX_HEADER, src.size - 8):
        return False
    # the header's last bytes: `}` then optional space padding
    tail = src.read(8 + max(n - 4096, 0), min(n, 4096)).rstrip(b" ")
    return tail.endswith(b"}")


def _sniff(probe: Probe) -> bool:
    return looks_like_safetensors(probe.path, probe.head)


def _read_file(src: Source, opts: ReadOptions) -> Loaded:
    """`treetool.io.read` for safetensors files.

    A file `tt.save` wrote has a structure record (`_structure`) in its `__metadata__`: the
    tree is rebuilt from it on top of the tensors' own names (`layers.0.bias`), with jax's
    paths (`.layers[0].bias`). Other files are the flat dict of their names. With `like=`,
    the leaves fill `like`'s structure (by path, or by the dotted names other tools write);
    a mismatch is one line naming the paths.
    """
    from treetool.io import _structure

    flat, meta = _read(src, opts.lazy)
    tree: Any = None
    text = meta.get(_structure.RECORD_KEY) if meta else None
    if isinstance(text, str):
        node = _structure.parse(src.name, text)
        tree = _structure.rebuild(src.name, node, flat)
        meta = {**(meta or {}), _structure.RECORD_KEY: _structure.summary(node, text)}
    else:
        paths = _saved_paths(meta, flat) if meta else None
        if paths is not None:  # written by an older tt.save: the key paths by name
            tree = tree_from_keystrs({paths[name]: leaf for name, leaf in flat.items()})
        else:
            tree = tree_from_keystrs(flat)
    if opts.like is not None:
        tree = _structure.fit_like(src.name, opts.like, tree, flat)
    return Loaded(tree, "safetensors", metadata=meta)


def read_flat(src: Source, lazy: bool = True) -> dict[str, Any]:
    """`{tensor name: LazyArray}` of one safetensors file (one ranged read remotely)."""
    return _read(src, lazy)[0]


def _read(src: Source, lazy: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The tensors by name and the `__metadata__` dict (None when absent) of one file."""
    path, size = src.name, src.size
    with src.open() as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise LoadError(f"{path}: truncated safetensors file")
        n = struct.unpack("<Q", raw)[0]
        if n > min(_MAX_HEADER, size - 8):
            raise LoadError(f"{path}: safetensors header claims {n} bytes, the file has {size - 8}")
        text = fh.read(n)
    # a header of names with tiny entries is fine; one of bare [] or {} is an allocation bomb
    # an entry is 3 objects in 50+ bytes: one per 16 bytes bounds the header's memory
    check_json_text(text, f"{path}: safetensors header", bytes_per_container=16)
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
        flat[name] = _leaf(src, name, entry, base, size)
    _check_overlaps(path, header, flat)
    if not lazy:
        flat = {name: leaf.read().copy() for name, leaf in flat.items()}
    meta = header.get("__metadata__")
    return flat, (meta if isinstance(meta, dict) else None)


def _check_overlaps(path: str, header: dict[str, Any], flat: dict[str, Any]) -> None:
    """Refuse tensors whose bytes overlap (the safetensors library refuses them too): one
    sort of the spans, then each against the one before it; never a check of every pair.

    Example:
        >>> h = {"a": {"data_offsets": [0, 8]}, "b": {"data_offsets": [4, 12]}}
        >>> _check_overlaps("w.safetensors", h, {"a": 0, "b": 0})
        Traceback (most recent call last):
        ...
        treetool.LoadError: w.safetensors: tensors 'a' (bytes 0-8) and 'b' (bytes 4-12) overlap
    """
    spans = sorted(
        (header[name]["data_offsets"][0], header[name]["data_offsets"][1], name)
        for name in flat
        if header[name]["data_offsets"][1] > header[name]["data_offsets"][0]
    )
    for (a0, a1, a), (b0, b1, b) in itertools.pairwise(spans):
        if b0 < a1:
            raise LoadError(
                f"{path}: tensors {a[:120]!r} (bytes {a0}-{a1}) and {b[:120]!r} "
                f"(bytes {b0}-{b1}) overlap"
            )


#: `__metadata__` key under which `tt.save` records `{dotted name: key path}` as JSON
PATHS_KEY = "treetool_paths"


def _saved_paths(meta: dict[str, Any], flat: dict[str, Any]) -> dict[str, str] | None:
    """The name -> key path map `tt.save` wrote, if it is there and names every tensor."""
    text = meta.get(PATHS_KEY)
    if not isinstance(text, str):
        return None
    try:
        paths = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(paths, dict) or set(paths) != set(flat):
        return None
    if not all(isinstance(v, str) for v in paths.values()) or len(set(paths.values())) != len(
        paths
    ):
        return None
    return paths


def _leaf(src: Source, name: str, entry: Any, base: int, size: int) -> Any:
    path = src.name
    shown = name if len(name) <= 120 else name[:117] + "..."
    where = f"{path}: tensor {shown!r}"
    if not isinstance(entry, dict):
        raise LoadError(f"{where}: header entry is not an object")
    dt, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dt not in DTYPES:
        raise LoadError(f"{where}: unsupported dtype {dt!r:.40}")
    if type(shape) is not list:
        raise LoadError(f"{where}: bad shape: not a list")
    shape = check_shape(shape, where)
    if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)):
        raise LoadError(f"{where}: bad data_offsets {offs!r:.80}")
    dtype = DTYPES[dt]  # a name: numpy makes the dtype when the data is read
    nbytes = math.prod(shape) * ITEMSIZES[dtype]
    start, stop = offs
    if stop - start != nbytes or start < 0:
        raise LoadError(
            f"{where}: data_offsets {offs} do not match {dt}{list(shape)} ({nbytes} bytes)"
        )
    if base + stop > size:
        raise LoadError(f"{where}: data ends at byte {base + stop}, the file has {size}")
    return LazyArray(tuple(shape), dtype, path, base + start, source=src if src.remote else None)


def write(
    flat: dict[str, Any],
    path: str,
    metadata: dict[str, str] | None = None,
    *,
    overwrite: bool = True,
) -> None:
    """Write `{name: array}` as a safetensors file (arrays are read if they are lazy), through
    a temporary file beside `path` moved into place whole (`overwrite=False` refuses an
    existing name).

    `metadata` (strings) is stored in `__metadata__`, next to `"format": "treetool"`.
    """
    import numpy as np

    from treetool.io._atomic import atomic_write

    header: dict[str, Any] = {}
    arrays = []
    offset = 0
    for name, leaf in flat.items():
        try:
            arr = np.asarray(leaf, order="C")  # (np.ascontiguousarray makes a 0-d array 1-d)
        except (TypeError, ValueError) as e:
            raise SaveError(f"{path}: {name} is not an array ({e})") from None
        dt = _NAMES.get(arr.dtype.name)
        if dt is None:
            raise SaveError(f"{path}: safetensors cannot store dtype {arr.dtype.name} (at {name})")
        header[name] = {
            "dtype": dt,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
        arrays.append(arr)
    header["__metadata__"] = {"format": "treetool", **(metadata or {})}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with atomic_write(path, overwrite=overwrite) as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for arr in arrays:
            fh.write(arr.tobytes())


FORMAT = Format("safetensors", sniff=_sniff, read=_read_file)

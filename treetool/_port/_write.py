"""`Plan.write`: the filled tree saved by extension, safetensors streamed leaf by leaf.

Every format goes through `treetool.io._atomic.atomic_write`: the file appears whole under its
name or not at all (a failure midway leaves the previous export in place), a link planted at the
name is replaced rather than followed, and an existing file is refused unless `overwrite`."""

from __future__ import annotations

import json
import math
import os
import struct
from typing import TYPE_CHECKING, Any

from treetool._errors import SaveError
from treetool._port._error import PortError
from treetool.io._atomic import atomic_write

if TYPE_CHECKING:
    from treetool._port._plan import Plan

__all__ = ["write_plan"]


_HINT = "pass overwrite=True to replace it"


def write_plan(
    plan: Plan, path: str, *, cast: bool = False, overwrite: bool = False, hint: str = _HINT
) -> None:
    """Write what `plan` fills to `path` (`.safetensors`, `.npz`, `.eqx`, `.msgpack`),
    atomically; an existing `path` is refused (one-line `SaveError`, `hint` says what to do)
    unless `overwrite`."""
    if plan.ambiguous or plan.unmatched_target:
        raise PortError(
            f"{path}: not written: the plan is incomplete ({'; '.join(plan.problems()[:3])})"
        )
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".safetensors", ".npz", ".eqx", ".msgpack"):
        raise SaveError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; use "
            ".safetensors, .npz, .eqx or .msgpack"
        )
    with atomic_write(path, overwrite=overwrite, hint=hint) as fh:
        if ext == ".safetensors":
            _write_safetensors(plan, path, cast, fh)
        elif ext == ".npz":
            import numpy as np

            from treetool.io._save import _flat

            flat = _flat(plan.apply(lazy=True, cast=cast), path, arrays_only=True)
            arrays: dict[str, Any] = {k: np.asarray(v) for k, v in flat.items()}
            np.savez(fh, **arrays)
        elif ext == ".eqx":
            import equinox as eqx

            eqx.tree_serialise_leaves(fh, plan.apply(lazy=False, cast=cast))
        else:
            from flax import serialization

            fh.write(serialization.to_bytes(plan.apply(lazy=False, cast=cast)))


def _write_safetensors(plan: Plan, path: str, cast: bool, fh: Any) -> None:
    """The header from shapes and dtypes alone, then each leaf read, transformed, written and
    let go: peak memory is about one leaf (two while a transform copies it)."""
    from treetool._paths._path import Path
    from treetool.io._structure import dotted_names
    from treetool.io.safetensors import DTYPES, PATHS_KEY

    names_by_dtype = {v: k for k, v in DTYPES.items()}
    dst = plan._target_side
    first_src = {r.target: plan._source.arrays[r.sources[0]] for r in plan.rows}
    # shard by shard, each in file order: every source file is read front to back once
    order = sorted(
        (t for t in dst.order if t in first_src),
        key=lambda t: (str(getattr(first_src[t], "file", "")), getattr(first_src[t], "offset", 0)),
    )
    names = dotted_names([Path.parse(t) for t in order])
    header: dict[str, Any] = {}
    offset = 0
    first = {r.target: r.sources[0] for r in plan.rows}
    for target, name in zip(order, names):
        leaf = dst.arrays[target] if cast else plan._source.arrays[first[target]]
        dtype = dst.dtypes[target] if cast else plan._source.dtypes[first[target]]
        code = names_by_dtype.get(dtype)
        if code is None:
            raise SaveError(f"{path}: safetensors cannot store dtype {dtype} (at {target})")
        nbytes = math.prod(dst.shapes[target]) * int(leaf.dtype.itemsize)
        header[name] = {
            "dtype": code,
            "shape": list(dst.shapes[target]),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    # "pt": what Hugging Face expects of a torch-layout file; the key paths, as tt.save keeps
    # them, so that tt.load gives back the target's nesting
    keystrs = json.dumps(dict(zip(names, order)), separators=(",", ":"))
    header["__metadata__"] = {"format": "pt", PATHS_KEY: keystrs}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    fh.write(struct.pack("<Q", len(text)))
    fh.write(text)
    write_values(plan, fh, order, cast)


_BLOCK = 16 << 20  # bytes copied out of a transposed view at a time


def write_values(plan: Plan, fh: Any, order: list[str], cast: bool) -> None:
    """Each leaf of `order` read, transformed and written in turn; a transposed one copied
    out in blocks of rows, so that memory holds one source array and one block."""
    import numpy as np

    for _, arr in plan.iter_filled(cast=cast, order=order, contiguous=False):
        if arr.flags.c_contiguous or arr.ndim == 0:
            fh.write(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
        else:
            row = max(arr.nbytes // max(arr.shape[0], 1), 1)
            step = max(_BLOCK // row, 1)
            for i in range(0, arr.shape[0], step):
                fh.write(np.ascontiguousarray(arr[i : i + step]).reshape(-1).view(np.uint8))
        del arr

"""Device placement and sharding: where every leaf lives, and how memory is spread.

`placement(tree)` answers, for a whole tree, what `jax.debug.visualize_array_sharding` answers
for one 2-D array: which leaves are replicated, which are split along which mesh axis, how many
bytes land on each device, and which leaves make one device heavier than the others.

Facts come from each array's sharding, never from its data. The block layout of a sharding
(`devices_indices_map`) is computed once per `(sharding, shape, dtype)` and shared by every leaf
that has it, so a 100,000-leaf model with a handful of PartitionSpecs costs one walk.

Checkpoint arrays whose sharding the checkpoint recorded (orbax's `_sharding`, carried by the
loader's `OrbaxArray.sharding`) are laid out from that record with jax's block rule, without
jax. jax is never imported here: a jax array can only exist once jax has been imported.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from treetool._errors import TreetoolError
from treetool._leaves._arrays import LazyArray, dtype_name
from treetool._paths._path import Path
from treetool._public import set_module
from treetool._sharding._layout import (  # the layout half of placement
    ABSTRACT,
    DELETED,
    FILE,
    HOST,
    LIVE,
    OBJECT,
    PLANNED,
    RECORDED,
    TRACED,
    Layout,
    RecordedDevice,
    _build_layout,
    _freeze,
    _recorded_layout,
)
from treetool._sharding._leaf_placement import AxisUsage as AxisUsage
from treetool._sharding._leaf_placement import DeviceUsage as DeviceUsage
from treetool._sharding._leaf_placement import LeafPlacement as LeafPlacement
from treetool._sharding._leaf_placement import PlacementWarning as PlacementWarning
from treetool._sharding._leaf_placement import layout_label as layout_label
from treetool._sharding._placement import Placement as Placement
from treetool._tree._model import IsLeaf, no_gc
from treetool._tree._views import iter_leaves_with_paths
from treetool._typetests import is_shape_struct

__all__ = [
    "AxisUsage",
    "DeviceUsage",
    "LeafPlacement",
    "Placement",
    "PlacementWarning",
    "RecordedDevice",
    "placement",
]


# --- the walk ----------------------------------------------------------------------------------


class _Placer:
    """Turns leaves into LeafPlacements, caching layouts per (sharding, shape, dtype)."""

    def __init__(self) -> None:
        jax = sys.modules.get("jax")
        self.jax_array = getattr(jax, "Array", None) if jax is not None else None
        core = getattr(jax, "core", None) if jax is not None else None
        self.tracer = getattr(core, "Tracer", None) if core is not None else None
        self.layouts: dict[Any, tuple[Layout, str, int]] = {}

    def layout(
        self, path: Path, sharding: Any, shape: tuple[int, ...], dtype: Any
    ) -> tuple[Layout, str, int]:
        """`(layout, dtype name, nbytes)` of an array, computed once per distinct triple."""
        key = (sharding, shape, dtype)
        try:
            hit = self.layouts.get(key)
        except TypeError:  # an unhashable custom sharding
            key = (id(sharding), shape, dtype)
            hit = self.layouts.get(key)
        if hit is None:
            itemsize = _itemsize(dtype)
            try:
                lay = _build_layout(sharding, shape, itemsize)
            except Exception as e:
                raise TreetoolError(
                    f"{path}: cannot lay out shape {shape} with {sharding!r}: {e}"
                ) from e
            hit = self.layouts[key] = (lay, dtype_name(dtype), math.prod(shape) * itemsize)
        return hit

    def recorded(
        self, path: Path, meta: dict[str, Any], shape: tuple[int, ...], dtype: Any
    ) -> tuple[Layout, str, int]:
        """`(layout, dtype name, nbytes)` of a sharding recorded in checkpoint metadata."""
        key = (_freeze(meta), shape, dtype)
        hit = self.layouts.get(key)
        if hit is None:
            itemsize = _itemsize(dtype)
            try:
                lay = _recorded_layout(meta, shape, itemsize)
            except (KeyError, TypeError, ValueError) as e:
                raise TreetoolError(
                    f"{path}: cannot lay out shape {shape} with the recorded sharding "
                    f"{meta.get('sharding_type')!r}: {e}"
                ) from e
            hit = self.layouts[key] = (lay, dtype_name(dtype), math.prod(shape) * itemsize)
        return hit

    def leaf(self, path: Path, x: Any) -> LeafPlacement:
        jarr = self.jax_array
        if jarr is not None and isinstance(x, jarr):
            if self.tracer is not None and isinstance(x, self.tracer):
                return LeafPlacement(path, TRACED, _shape(x), _dname(x), 0)
            if x.is_deleted():
                shape = x.shape
                nbytes = math.prod(shape) * _itemsize(x.dtype)
                return LeafPlacement(path, DELETED, shape, dtype_name(x.dtype), nbytes)
            sharding = x.sharding
            shape = x.shape
            lay, dname, nbytes = self.layout(path, sharding, shape, x.dtype)
            return LeafPlacement(
                path, lay.kind, shape, dname, nbytes, x.committed, LIVE, sharding, lay
            )
        if isinstance(x, (np.ndarray, np.generic)):
            return LeafPlacement(path, HOST, tuple(x.shape), dtype_name(x.dtype), int(x.nbytes))
        if isinstance(x, LazyArray):
            meta = getattr(x, "sharding", None)
            if isinstance(meta, dict) and "sharding_type" in meta:
                lay, dname, nbytes = self.recorded(path, meta, x.shape, x.dtype)
                return LeafPlacement(
                    path, lay.kind, x.shape, dname, nbytes, None, RECORDED, meta, lay
                )
            return LeafPlacement(path, FILE, x.shape, dtype_name(x.dtype), x.nbytes)
        if self.tracer is not None and isinstance(x, self.tracer):
            return LeafPlacement(path, TRACED, _shape(x), _dname(x), 0)
        if is_shape_struct(x):
            shape = tuple(int(s) for s in x.shape)
            sharding = getattr(x, "sharding", None)
            if sharding is not None and hasattr(sharding, "devices_indices_map"):
                lay, dname, nbytes = self.layout(path, sharding, shape, x.dtype)
                return LeafPlacement(
                    path, lay.kind, shape, dname, nbytes, None, PLANNED, sharding, lay
                )
            nbytes = math.prod(shape) * _itemsize(x.dtype)
            return LeafPlacement(path, ABSTRACT, shape, dtype_name(x.dtype), nbytes)
        return LeafPlacement(path, OBJECT)


def _itemsize(dtype: Any) -> int:
    size = getattr(dtype, "itemsize", None)
    if size:
        return int(size)
    return max(1, (np.dtype(dtype).itemsize))


def _shape(x: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(s) for s in x.shape)
    except Exception:
        return None


def _dname(x: Any) -> str | None:
    dtype = getattr(x, "dtype", None)
    return dtype_name(dtype) if dtype is not None else None


@set_module("treetool.sharding")
def placement(
    tree: Any,
    *,
    is_leaf: IsLeaf = None,
    large: int = 1 << 20,
    imbalance: float = 1.25,
) -> Placement:
    """Where every leaf of `tree` lives: devices, shardings, and bytes per device.

    Works on live jax arrays (any sharding), on `ShapeDtypeStruct`s that carry a sharding
    (planned placements, e.g. from `jax.eval_shape` or checkpoint metadata), on numpy arrays
    ("host") and on file-backed `LazyArray` leaves ("file"). Shards on devices of other
    processes are reported from the sharding (their `DeviceUsage.addressable` is False),
    never read.

    Args:
        tree: any pytree.
        is_leaf: treat the nodes it returns True for as leaves.
        large: leaves of at least this many bytes that are fully replicated over several
            devices are reported in `warnings`.
        imbalance: warn when the heaviest device holds more than this times the mean.

    Example:
        >>> import jax, numpy as np
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> n = len(jax.devices())
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> w = jax.device_put(np.zeros((8 * n, 4), np.float32), NamedSharding(mesh, P("data")))
        >>> p = placement({"w": w, "b": np.zeros(4, np.float32)})
        >>> p["w"].kind, p["w"].shard_shape, p["w"].replication, p["w"].dim_axes
        ('named', (8, 4), 1, (('data',), ()))
        >>> {u.bytes for u in p.per_device.values()}, p.host_bytes, p["b"].kind
        ({128}, 16, 'host')
    """
    placer = _Placer()
    with no_gc():
        leaves = [placer.leaf(path, x) for path, x in iter_leaves_with_paths(tree, is_leaf)]
    return Placement(leaves, large=large, imbalance=imbalance)

"""Block layouts of shardings: which device holds which block of an array.

A `Layout` is computed once per `(sharding, shape, itemsize)` from jax's `devices_indices_map`,
or, for checkpoint arrays whose sharding was recorded (orbax's `_sharding`), from that record
with jax's block rule and `RecordedDevice`s, without importing jax. `_devices.placement` shares
one Layout between every leaf that has it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from treetool._leaves._arrays import short_dtype
from treetool._typetests import is_single_device_sharding

if TYPE_CHECKING:
    from treetool._sharding._leaf_placement import LeafPlacement

__all__ = ["Layout", "RecordedDevice", "device_name", "layout_label"]

#: `LeafPlacement.kind` values
SINGLE, NAMED, POSITIONAL = "single", "named", "positional"
HOST, FILE, ABSTRACT, TRACED, DELETED, OBJECT = (
    "host",
    "file",
    "abstract",
    "traced",
    "deleted",
    "object",
)
#: `LeafPlacement.source` values
LIVE, PLANNED, RECORDED = "live", "planned", "recorded"


def device_name(device: Any) -> str:
    """`cpu:0`, `gpu:3`, `tpu:12`: the platform and the global id of a jax device."""
    return f"{device.platform}:{device.id}"


def _device_order(device: Any) -> tuple[int, str, int]:
    return (getattr(device, "process_index", 0), device.platform, device.id)


def layout_label(lp: LeafPlacement) -> str:
    """`f32[8,16]` of a leaf placement (its kind, `host`, `file`…, without shape or dtype)."""
    if lp.shape is None or lp.dtype is None:
        return lp.kind
    return f"{short_dtype(lp.dtype)}[{','.join(map(str, lp.shape))}]"


# --- the layout of one (sharding, shape, dtype) --------------------------------------------


@dataclass(frozen=True, eq=False)
class Layout:
    """How a sharding cuts one array shape into blocks, and the bytes each device holds.

    Shared by every leaf with the same sharding, shape and dtype.
    """

    kind: str
    devices: tuple[Any, ...]
    blocks: tuple[tuple[tuple[tuple[int, int], ...], tuple[Any, ...]], ...]
    bytes_per_device: dict[Any, int]
    shard_shape: tuple[int, ...]
    replication: int
    fully_addressable: bool
    platform: str
    memory_kind: str | None
    mesh_shape: dict[str, int] | None
    spec: tuple[Any, ...] | None
    dim_axes: tuple[tuple[str, ...], ...]
    description: str = ""

    @cached_property
    def dict_part(self) -> dict[str, Any]:
        """The JSON-friendly facts of the layout (shared by `LeafPlacement.to_dict`)."""
        return {
            "devices": [device_name(d) for d in self.devices],
            "platform": self.platform,
            "memory_kind": self.memory_kind,
            "mesh": dict(self.mesh_shape) if self.mesh_shape else None,
            "spec": [list(e) if isinstance(e, tuple) else e for e in self.spec]
            if self.spec is not None
            else None,
            "shard_shape": list(self.shard_shape),
            "replication": self.replication,
            "fully_addressable": self.fully_addressable,
            "bytes_per_device": {device_name(d): b for d, b in self.bytes_per_device.items()},
        }

    @property
    def sharded_dims(self) -> tuple[int, ...]:
        """Dimensions cut into more than one block."""
        ndim = len(self.shard_shape)
        out = []
        for d in range(ndim):
            if len({idx[d] for idx, _ in self.blocks}) > 1:
                out.append(d)
        return tuple(out)


def _norm_index(index: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    out = []
    for sl, n in zip(index, shape):
        start, stop, _ = sl.indices(n) if isinstance(sl, slice) else (int(sl), int(sl) + 1, 1)
        out.append((start, stop))
    # jax may give fewer slices than dims for scalars
    out.extend((0, n) for n in shape[len(out) :])
    return tuple(out)


def _spec_axes(spec: Any, ndim: int) -> tuple[tuple[str, ...], ...]:
    """Per dimension, the mesh axes it is split over (a PartitionSpec padded to `ndim`)."""
    out: list[tuple[str, ...]] = []
    for entry in tuple(spec)[:ndim]:
        if entry is None:
            out.append(())
        elif isinstance(entry, str):
            out.append((entry,))
        elif isinstance(entry, (tuple, list)):
            out.append(tuple(str(e) for e in entry))
        else:  # P.UNCONSTRAINED and friends
            out.append(())
    out.extend(() for _ in range(ndim - len(out)))
    return tuple(out)


def _spec_entry(entry: Any) -> Any:
    if entry is None or isinstance(entry, str):
        return entry
    if isinstance(entry, (tuple, list)):
        return tuple(str(e) for e in entry)
    return str(entry)


def _build_layout(sharding: Any, shape: tuple[int, ...], itemsize: int) -> Layout:
    """The layout of a live jax sharding, from its `devices_indices_map`."""
    devmap = sharding.devices_indices_map(shape)
    norm = {dev: _norm_index(devmap[dev], shape) for dev in devmap}
    try:
        shard_shape: tuple[int, ...] | None = tuple(int(s) for s in sharding.shard_shape(shape))
    except Exception:  # uneven custom shardings: the largest block is shown
        shard_shape = None
    tname = type(sharding).__name__
    mesh_shape = spec = None
    if is_single_device_sharding(sharding) or (len(norm) == 1 and not hasattr(sharding, "spec")):
        kind = SINGLE
    elif hasattr(sharding, "mesh") and hasattr(sharding, "spec"):
        kind = NAMED
        mesh_shape = {str(k): int(v) for k, v in sharding.mesh.shape.items()}
        spec = tuple(_spec_entry(e) for e in sharding.spec)
    else:
        kind = POSITIONAL
    return _make_layout(
        norm,
        shape,
        itemsize,
        kind=kind,
        mesh_shape=mesh_shape,
        spec=spec,
        shard_shape=shard_shape,
        fully_addressable=bool(getattr(sharding, "is_fully_addressable", True)),
        memory_kind=getattr(sharding, "memory_kind", None),
        type_name=tname,
    )


def _make_layout(
    devmap: dict[Any, tuple[tuple[int, int], ...]],
    shape: tuple[int, ...],
    itemsize: int,
    *,
    kind: str,
    mesh_shape: dict[str, int] | None = None,
    spec: tuple[Any, ...] | None = None,
    shard_shape: tuple[int, ...] | None = None,
    fully_addressable: bool = True,
    memory_kind: str | None = None,
    type_name: str = "",
) -> Layout:
    groups: dict[tuple[tuple[int, int], ...], list[Any]] = {}
    per_dev: dict[Any, int] = {}
    for dev in sorted(devmap, key=_device_order):
        idx = devmap[dev]
        groups.setdefault(idx, []).append(dev)
        per_dev[dev] = math.prod(b - a for a, b in idx) * itemsize
    devices = tuple(per_dev)
    blocks = tuple((idx, tuple(devs)) for idx, devs in groups.items())
    if shard_shape is None:
        shard_shape = tuple(
            max(b - a for a, b in (idx[d] for idx, _ in blocks)) for d in range(len(shape))
        )
    dim_axes = _spec_axes(spec, len(shape)) if spec is not None else ((),) * len(shape)
    mem = f" [{memory_kind}]" if memory_kind not in (None, "device") else ""
    if kind == SINGLE:
        description = device_name(devices[0]) + mem
    elif kind == NAMED:
        description = f"{spec_text(spec)} on {mesh_text(mesh_shape)}{mem}"
    else:
        description = f"{type_name} over {len(devices)} devices{mem}"
    return Layout(
        kind=kind,
        devices=devices,
        blocks=blocks,
        bytes_per_device=per_dev,
        shard_shape=shard_shape,
        replication=max(1, len(devices) // max(1, len(blocks))),
        fully_addressable=fully_addressable,
        platform=devices[0].platform if devices else "",
        memory_kind=memory_kind,
        mesh_shape=mesh_shape,
        spec=spec,
        dim_axes=dim_axes,
        description=description,
    )


# --- shardings recorded in checkpoint metadata (orbax `_sharding`) ---------------------------


#: the platform of a recorded device whose platform the checkpoint does not name
UNKNOWN_PLATFORM = "device"


@dataclass(frozen=True)
class RecordedDevice:
    """A device named by checkpoint metadata: orbax records device ids, not live devices.

    A NamedSharding's record has no platform, so its devices are `device:0`, `device:1`…;
    a SingleDeviceSharding's record names it (`cpu:3`).
    """

    id: int
    platform: str = UNKNOWN_PLATFORM
    process_index: int = 0

    def __repr__(self) -> str:
        return f"RecordedDevice({self.platform}:{self.id})"


def _ids(mesh: Any) -> list[int]:
    if isinstance(mesh, dict):
        return [int(mesh["id"])]
    out: list[int] = []
    for m in mesh:
        out.extend(_ids(m))
    return out


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


def _recorded_layout(meta: dict[str, Any], shape: tuple[int, ...], itemsize: int) -> Layout:
    """The layout orbax recorded (`{"sharding_type": "NamedSharding", ...}`), without jax.

    NamedSharding blocks follow jax's rule: dimension `d` split over mesh axes `(a, b)` is cut
    into `size(a) * size(b)` blocks, and the device at mesh coordinate `c` holds block
    `c[a] * size(b) + c[b]`.
    """
    kind = meta.get("sharding_type")
    full = tuple((0, n) for n in shape)
    if kind == "SingleDeviceSharding":
        platform, _, idx = str(meta.get("device_str", "")).rpartition(":")
        dev = RecordedDevice(int(idx), platform or UNKNOWN_PLATFORM)
        return _make_layout({dev: full}, shape, itemsize, kind=SINGLE)
    if kind != "NamedSharding":
        raise ValueError(f"sharding_type {kind!r} is not understood")
    sizes = [int(n) for n in meta["shape"]]
    names = [str(n) for n in meta["axis_names"]]
    mesh_shape = dict(zip(names, sizes))
    spec = tuple(_spec_entry(e) for e in meta.get("partition_spec", []))
    ids = np.array(_ids(meta["device_mesh"]["mesh"]), dtype=np.int64).reshape(sizes)
    dim_axes = _spec_axes(spec, len(shape))
    pos = {n: i for i, n in enumerate(names)}
    devmap: dict[Any, tuple[tuple[int, int], ...]] = {}
    for coord in np.ndindex(*sizes):
        block: list[tuple[int, int]] = []
        for d, axes in enumerate(dim_axes):
            parts, k = 1, 0
            for a in axes:
                k = k * mesh_shape[a] + coord[pos[a]]
                parts *= mesh_shape[a]
            if shape[d] % parts:
                raise ValueError(f"dimension {d} of {shape} does not split into {parts} blocks")
            step = shape[d] // parts
            block.append((k * step, (k + 1) * step))
        devmap[RecordedDevice(int(ids[coord]))] = tuple(block)
    return _make_layout(devmap, shape, itemsize, kind=NAMED, mesh_shape=mesh_shape, spec=spec)


def spec_text(spec: tuple[Any, ...] | None) -> str:
    """`P('data', None)`, `P(('data', 'model'),)`, `P()`: the repr jax gives a PartitionSpec."""
    if spec is None:
        return "P()"
    parts = [repr(e) for e in spec]
    if len(parts) == 1:
        return f"P({parts[0]},)"
    return f"P({', '.join(parts)})"


def mesh_text(mesh_shape: dict[str, int] | None) -> str:
    """`data=2×model=4`."""
    if not mesh_shape:
        return "no mesh"
    return "×".join(f"{k}={v}" for k, v in mesh_shape.items())

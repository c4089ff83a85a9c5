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
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._arrays import LazyArray, dtype_name, short_dtype
from ._errors import PathError, TreetoolError
from ._format import fmt_bytes as _fmt_bytes
from ._layout import (  # the layout half of placement
    ABSTRACT,
    DELETED,
    FILE,
    HOST,
    LIVE,
    OBJECT,
    PLANNED,
    RECORDED,
    TRACED,
    UNKNOWN_PLATFORM,
    Layout,
    RecordedDevice,
    _build_layout,
    _device_order,
    _freeze,
    _recorded_layout,
    device_name,
)
from ._model import IsLeaf, no_gc
from ._paths import Path
from ._repr import RichMixin, lower
from ._typetests import is_shape_struct
from ._views import iter_leaves_with_paths

__all__ = [
    "AxisUsage",
    "DeviceUsage",
    "LeafPlacement",
    "Placement",
    "PlacementWarning",
    "RecordedDevice",
    "placement",
]

# --- per-leaf and per-device facts -----------------------------------------------------------


@dataclass(eq=False, slots=True)
class LeafPlacement:
    """Where one leaf lives: its devices, sharding, shard shape and bytes per device.

    `kind` is "single" (one device), "named" (a `NamedSharding` over a mesh), "positional"
    (any other sharding: GSPMD, custom), "host" (a numpy array), "file" (a `LazyArray` still
    in its file, no sharding recorded), "abstract" (a `ShapeDtypeStruct` without a sharding),
    "traced", "deleted"
    (a donated or deleted jax array) or "object" (not an array). A `ShapeDtypeStruct` that
    carries a sharding gets the kind of its sharding and `source="planned"`; a checkpoint
    array whose sharding the checkpoint recorded (orbax) gets it with `source="recorded"`.
    `source` is "live" for jax arrays and "" for leaves on no device.

    Example:
        >>> import numpy as np
        >>> leaf = placement({"w": np.zeros((2, 3), np.float32)}).leaves[Path.parse("['w']")]
        >>> leaf.kind, leaf.nbytes, leaf.devices
        ('host', 24, ())
    """

    path: Path
    kind: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    nbytes: int = 0
    committed: bool | None = None
    source: str = ""
    sharding: Any = field(default=None, repr=False)
    layout: Layout | None = field(default=None, repr=False)

    # ---- facts of the sharding (shared by every leaf with the same layout) ----
    @property
    def abstract(self) -> bool:
        """Whether the placement is planned or recorded rather than held by live arrays."""
        return self.source in (PLANNED, RECORDED)

    @property
    def on_device(self) -> bool:
        """Whether the leaf's bytes are on jax devices (single, named or positional)."""
        return self.layout is not None

    @property
    def devices(self) -> tuple[Any, ...]:
        """The jax devices holding a block of this leaf (all processes), ordered by id."""
        return self.layout.devices if self.layout is not None else ()

    @property
    def bytes_per_device(self) -> dict[Any, int]:
        """`{device: bytes}` of this leaf's block on each device (replicas counted)."""
        return self.layout.bytes_per_device if self.layout is not None else {}

    @property
    def shard_shape(self) -> tuple[int, ...] | None:
        """The shape of the block each device holds (the full shape for one device)."""
        return self.layout.shard_shape if self.layout is not None else self.shape

    @property
    def replication(self) -> int:
        """How many devices hold each element (1: no copies; 8 on 8 devices: fully replicated)."""
        return self.layout.replication if self.layout is not None else 1

    @property
    def fully_addressable(self) -> bool:
        """Whether every block lives on a device of this process."""
        return self.layout.fully_addressable if self.layout is not None else True

    @property
    def replicated(self) -> bool:
        """Whether every device holds the whole leaf, on more than one device."""
        lay = self.layout
        return lay is not None and len(lay.devices) > 1 and len(lay.blocks) == 1

    @property
    def platform(self) -> str | None:
        """`cpu`, `gpu`, `tpu`; None for leaves that are not on a jax device."""
        return self.layout.platform if self.layout is not None else None

    @property
    def memory_kind(self) -> str | None:
        """The sharding's memory kind (`device`, `pinned_host`), when jax records one."""
        return self.layout.memory_kind if self.layout is not None else None

    @property
    def mesh_shape(self) -> dict[str, int] | None:
        """`{axis name: size}` of a NamedSharding's mesh; None for other kinds."""
        return self.layout.mesh_shape if self.layout is not None else None

    @property
    def spec(self) -> tuple[Any, ...] | None:
        """The PartitionSpec's entries (`('data', None)`); None for other kinds."""
        return self.layout.spec if self.layout is not None else None

    @property
    def dim_axes(self) -> tuple[tuple[str, ...], ...]:
        """Per dimension, the mesh axes it is split over (`()` for an unsplit dimension)."""
        if self.layout is not None:
            return self.layout.dim_axes
        return ((),) * len(self.shape or ())

    @property
    def sharded_dims(self) -> tuple[int, ...]:
        """Dimensions that are cut into more than one block."""
        return self.layout.sharded_dims if self.layout is not None else ()

    @property
    def description(self) -> str:
        """One line about the placement: `P('data', None) on data=2×model=4`, `cpu:0`, `host`.

        Leaves with the same description are grouped together in the sharding table.
        """
        lay = self.layout
        if lay is None:
            return self.kind
        return (self.source + " " if self.abstract else "") + lay.description

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (devices as `cpu:0` names).

        The sharding's part is built once per layout and shared between leaves: treat the
        lists and dicts in it as read-only.
        """
        out = {
            "path": str(self.path),
            "kind": self.kind,
            "shape": list(self.shape) if self.shape is not None else None,
            "dtype": self.dtype,
            "nbytes": self.nbytes,
            "committed": self.committed,
            "source": self.source,
        }
        lay = self.layout
        if lay is not None:
            out.update(lay.dict_part)
        else:
            out.update(
                {
                    "devices": [],
                    "platform": None,
                    "memory_kind": None,
                    "mesh": None,
                    "spec": None,
                    "shard_shape": list(self.shape) if self.shape is not None else None,
                    "replication": 1,
                    "fully_addressable": True,
                    "bytes_per_device": {},
                }
            )
        return out

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        yield lower(self, "rich")


@dataclass
class DeviceUsage:
    """What one device holds: bytes (replicas counted where they live) and leaf count.

    `addressable` is False for a device of another process (multi-host): its bytes come from
    the sharding, which every process knows.

    Example:
        >>> DeviceUsage(1024, 3).bytes
        1024
    """

    bytes: int
    leaves: int
    device: Any = None
    addressable: bool = True

    @property
    def name(self) -> str:
        """`cpu:0`."""
        return device_name(self.device) if self.device is not None else "?"


@dataclass(frozen=True)
class AxisUsage:
    """What is sharded over one mesh axis: leaf count and their (global) bytes."""

    name: str
    size: int
    leaves: int
    nbytes: int


@dataclass(frozen=True)
class PlacementWarning:
    """Something about a placement worth a look.

    `kind` is "platforms" (leaves on more than one platform), "replicated" (large leaves
    copied whole onto every device of a mesh), "uncommitted" (arrays jax may move, in a tree
    that spans several devices) or "imbalance" (one device holds much more than the mean).
    """

    kind: str
    message: str
    paths: tuple[Path, ...] = ()

    def __str__(self) -> str:
        return self.message


# --- the placement of a tree -----------------------------------------------------------------


class Placement(RichMixin):
    """Where the leaves of a tree live, per leaf, per device and per mesh axis.

    Attributes:
        leaves: `{Path: LeafPlacement}` for every leaf, in jax's leaf order.
        per_device: `{jax Device: DeviceUsage}` for every device holding a block, ordered by
            process and id.
        warnings: `PlacementWarning`s: mixed platforms, large replicated leaves, uncommitted
            arrays, uneven bytes.

    A Placement is a rich renderable (`tt.render(p)`, `rich.print(p)`): per-device bars,
    the leaves grouped by sharding, and the warnings. `p.grid(path)` draws one leaf's blocks.

    Example:
        >>> import numpy as np
        >>> p = placement({"a": np.zeros(4, np.float32), "b": 1.0})
        >>> p.host_bytes, len(p.leaves), p.per_device
        (16, 2, {})
    """

    def __init__(
        self,
        leaves: Iterable[LeafPlacement],
        *,
        large: int = 1 << 20,
        imbalance: float = 1.25,
    ) -> None:
        self.leaves: dict[Path, LeafPlacement] = {lp.path: lp for lp in leaves}
        self.large = large
        self.imbalance_threshold = imbalance
        self.per_device: dict[Any, DeviceUsage] = {}
        self._count_devices()
        self.warnings: list[PlacementWarning] = self._warnings()

    # ---- construction ----
    def _count_devices(self) -> None:
        per_layout: Counter[int] = Counter()
        layouts: dict[int, Layout] = {}
        host = files = 0
        for lp in self.leaves.values():
            lay = lp.layout
            if lay is not None:
                key = id(lay)
                per_layout[key] += 1
                layouts[key] = lay
            elif lp.kind == HOST:
                host += lp.nbytes
            elif lp.kind == FILE:
                files += lp.nbytes
        self.host_bytes = host
        self.file_bytes = files
        usage: dict[Any, DeviceUsage] = {}
        for key, n in per_layout.items():
            lay = layouts[key]
            for dev, b in lay.bytes_per_device.items():
                u = usage.get(dev)
                if u is None:
                    u = usage[dev] = DeviceUsage(0, 0, dev, _addressable(dev))
                u.bytes += b * n
                u.leaves += n
        self.per_device = {d: usage[d] for d in sorted(usage, key=_device_order)}

    def _warnings(self) -> list[PlacementWarning]:
        out = []
        on_dev = [lp for lp in self.leaves.values() if lp.layout is not None]
        # a recorded NamedSharding names no platform: it cannot disagree with the others
        platforms = Counter(lp.platform for lp in on_dev if lp.platform != UNKNOWN_PLATFORM)
        if len(platforms) > 1:
            major = platforms.most_common(1)[0][0]
            odd = tuple(lp.path for lp in on_dev if lp.platform not in (major, UNKNOWN_PLATFORM))
            counts = ", ".join(
                f"{p} ({n} {_plural(n, 'leaf', 'leaves')})" for p, n in platforms.most_common()
            )
            out.append(
                PlacementWarning(
                    "platforms",
                    f"leaves live on {len(platforms)} platforms: {counts}; "
                    f"not on {major}: {_paths_text(odd)}",
                    odd,
                )
            )
        big = tuple(lp.path for lp in on_dev if lp.replicated and lp.nbytes >= self.large)
        if big:
            ndev = max(len(self.leaves[p].devices) for p in big)
            copies = sum(self.leaves[p].nbytes * (len(self.leaves[p].devices) - 1) for p in big)
            out.append(
                PlacementWarning(
                    "replicated",
                    f"{len(big)} large {_plural(len(big), 'leaf', 'leaves')} (>= "
                    f"{_fmt_bytes(self.large)}) fully replicated on up to {ndev} devices, "
                    f"{_fmt_bytes(copies)} in extra copies: {_paths_text(big)}",
                    big,
                )
            )
        if len(self.per_device) > 1:
            loose = tuple(lp.path for lp in on_dev if lp.committed is False)
            if loose:
                out.append(
                    PlacementWarning(
                        "uncommitted",
                        f"{len(loose)} uncommitted {_plural(len(loose), 'array', 'arrays')} "
                        f"in a tree on {len(self.per_device)} devices (jax may move them to "
                        f"the default device): {_paths_text(loose)}",
                        loose,
                    )
                )
        ratio = self.imbalance
        if ratio is not None and ratio > self.imbalance_threshold:
            heavy = max(self.per_device.values(), key=lambda u: u.bytes)
            light = min(self.per_device.values(), key=lambda u: u.bytes)
            mean = sum(u.bytes for u in self.per_device.values()) / len(self.per_device)
            nall = len(self.per_device)
            culprits = tuple(
                lp.path
                for lp in on_dev
                if len(lp.devices) < nall and heavy.device in lp.bytes_per_device
            )
            out.append(
                PlacementWarning(
                    "imbalance",
                    f"bytes are uneven across devices: {heavy.name} holds "
                    f"{_fmt_bytes(heavy.bytes)}, {ratio:.2f}x the mean ({_fmt_bytes(int(mean))}); "
                    f"{light.name} holds {_fmt_bytes(light.bytes)}"
                    + (
                        f"; on {heavy.name}, not spread over every device: {_paths_text(culprits)}"
                        if culprits
                        else ""
                    ),
                    culprits,
                )
            )
        return out

    # ---- derived views ----
    @property
    def devices(self) -> list[Any]:
        """Every device holding a block, ordered by process and id."""
        return list(self.per_device)

    @property
    def total_bytes(self) -> int:
        """Logical bytes of the leaves on devices (each leaf once)."""
        return sum(lp.nbytes for lp in self.leaves.values() if lp.layout is not None)

    @property
    def device_bytes(self) -> int:
        """Bytes held over all devices, replicas counted where they live."""
        return sum(u.bytes for u in self.per_device.values())

    @property
    def imbalance(self) -> float | None:
        """The heaviest device's bytes over the mean; None with fewer than two devices."""
        if len(self.per_device) < 2:
            return None
        total = self.device_bytes
        if total == 0:
            return 1.0
        heavy = max(u.bytes for u in self.per_device.values())
        return heavy * len(self.per_device) / total

    @property
    def meshes(self) -> list[dict[str, int]]:
        """The distinct mesh shapes of the tree's NamedShardings, in first-seen order."""
        seen: list[dict[str, int]] = []
        for lay in self._layouts():
            if lay.mesh_shape and lay.mesh_shape not in seen:
                seen.append(lay.mesh_shape)
        return seen

    @property
    def mesh(self) -> dict[str, int] | None:
        """The mesh shape when all NamedShardings share one mesh shape, else None."""
        m = self.meshes
        return m[0] if len(m) == 1 else None

    @property
    def shardings(self) -> dict[str, list[Path]]:
        """`{description: [paths]}`: the leaves grouped by sharding, largest groups first."""
        groups: dict[str, list[Path]] = {}
        for lp in self.leaves.values():
            groups.setdefault(lp.description, []).append(lp.path)
        return dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))

    @property
    def axes(self) -> dict[str, AxisUsage]:
        """Per mesh axis: its size, how many leaves are split over it, and their bytes."""
        sizes: dict[str, int] = {}
        leaves: Counter[str] = Counter()
        nbytes: Counter[str] = Counter()
        for lp in self.leaves.values():
            lay = lp.layout
            if lay is None or lay.mesh_shape is None:
                continue
            for k, v in lay.mesh_shape.items():
                sizes.setdefault(k, v)
            for name in {a for axes in lay.dim_axes for a in axes}:
                leaves[name] += 1
                nbytes[name] += lp.nbytes
        return {k: AxisUsage(k, v, leaves[k], nbytes[k]) for k, v in sizes.items()}

    def on_axis(self, name: str) -> list[tuple[Path, int]]:
        """`[(path, dim)]` for every leaf dimension split over mesh axis `name`."""
        out = []
        for lp in self.leaves.values():
            for d, axes in enumerate(lp.dim_axes):
                if name in axes:
                    out.append((lp.path, d))
        return out

    def on(self, device: Any) -> list[LeafPlacement]:
        """The leaves holding a block on `device` (a jax Device or its name, `"cpu:3"`)."""
        dev = self._device(device)
        return [
            lp
            for lp in self.leaves.values()
            if lp.layout is not None and dev in lp.layout.bytes_per_device
        ]

    def __getitem__(self, path: str | Path) -> LeafPlacement:
        p = path if isinstance(path, Path) else Path.parse(path)
        try:
            return self.leaves[p]
        except KeyError:
            pass
        for q, lp in self.leaves.items():  # dotted form: `params.w`
            if len(q) == len(p) and all(_loose(a, b) for a, b in zip(p, q)):
                return lp
        from ._paths import suggest

        close = suggest(str(p), [str(q) for q in self.leaves])
        hint = (" Did you mean " + " or ".join(map(repr, close)) + "?") if close else ""
        raise PathError(f"no leaf {str(p)!r} in the placement.{hint}")

    def grid(self, path: str | Path) -> Any:
        """A rich renderable of one leaf's blocks: which device holds which block."""
        return lower(self[path], "rich")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: leaves, devices, axes, shardings, warnings.

        Example:
            >>> import json, numpy as np
            >>> d = placement({"a": np.zeros(2, np.int8)}).to_dict()
            >>> d["leaves"][0]["path"], d["leaves"][0]["kind"], d["host_bytes"]
            ("['a']", 'host', 2)
            >>> json.loads(json.dumps(d)) == d
            True
        """
        return {
            "leaves": [lp.to_dict() for lp in self.leaves.values()],
            "devices": [
                {
                    "device": u.name,
                    "platform": u.device.platform,
                    "process": getattr(u.device, "process_index", 0),
                    "addressable": u.addressable,
                    "bytes": u.bytes,
                    "leaves": u.leaves,
                }
                for u in self.per_device.values()
            ],
            "host_bytes": self.host_bytes,
            "file_bytes": self.file_bytes,
            "total_bytes": self.total_bytes,
            "device_bytes": self.device_bytes,
            "imbalance": self.imbalance,
            "meshes": [dict(m) for m in self.meshes],
            "axes": {
                k: {"size": a.size, "leaves": a.leaves, "nbytes": a.nbytes}
                for k, a in self.axes.items()
            },
            "shardings": {k: [str(p) for p in v] for k, v in self.shardings.items()},
            "warnings": [
                {"kind": w.kind, "message": w.message, "paths": [str(p) for p in w.paths]}
                for w in self.warnings
            ],
        }

    def __repr__(self) -> str:
        return (
            f"Placement({len(self.leaves)} leaves, {len(self.per_device)} devices, "
            f"{_fmt_bytes(self.device_bytes)} on devices, {len(self.warnings)} warnings)"
        )

    # ---- helpers ----
    def _layouts(self) -> list[Layout]:
        seen: dict[int, Layout] = {}
        for lp in self.leaves.values():
            if lp.layout is not None:
                seen.setdefault(id(lp.layout), lp.layout)
        return list(seen.values())

    def _device(self, device: Any) -> Any:
        if not isinstance(device, str):
            return device
        for d in self.per_device:
            if device_name(d) == device:
                return d
        names = [device_name(d) for d in self.per_device]
        raise KeyError(f"no device {device!r} in the placement; devices: {', '.join(names)}")


def _loose(q: Any, k: Any) -> bool:
    from ._paths import key_matches

    return q == k or key_matches(q, k)


def _addressable(device: Any) -> bool:
    if isinstance(device, RecordedDevice):
        return True
    jax = sys.modules.get("jax")
    if jax is None:
        return True
    return getattr(device, "process_index", 0) == jax.process_index()


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _paths_text(paths: tuple[Path, ...], limit: int = 3) -> str:
    shown = ", ".join(str(p) for p in paths[:limit])
    return shown + (f", … ({len(paths)} in all)" if len(paths) > limit else "")


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


def layout_label(lp: LeafPlacement) -> str:
    """`f32[8,16]` of a leaf placement."""
    if lp.shape is None or lp.dtype is None:
        return lp.kind
    return f"{short_dtype(lp.dtype)}[{','.join(map(str, lp.shape))}]"

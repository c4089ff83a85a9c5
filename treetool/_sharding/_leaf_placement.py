"""Placement facts of one leaf (`LeafPlacement`) and of one device, mesh axis or warning.

`treetool._sharding._devices.placement(tree)` makes them in its walk; `Placement` gathers them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from treetool._paths._path import Path
from treetool._public import set_module
from treetool._sharding._layout import (  # the layout half of placement
    PLANNED,
    RECORDED,
    Layout,
    device_name,
)
from treetool._sharding._layout import layout_label as layout_label

__all__ = ["AxisUsage", "DeviceUsage", "LeafPlacement", "PlacementWarning", "layout_label"]


# --- per-leaf and per-device facts -----------------------------------------------------------


@set_module("treetool.sharding")
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
        >>> import numpy as np, treetool as tt
        >>> leaf = tt.placement({"w": np.zeros((2, 3), np.float32)}).leaves[Path.parse("['w']")]
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
        out: dict[str, Any] = {
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
        yield self.__treetool_lower__("rich")

    def __treetool_lower__(self, medium: str, **options: Any) -> Any:
        """Its block grid (`_sharding/_rich.py`), in rich or as plain text; no HTML of its own
        (NotImplemented: `to_html` draws it as a tree)."""
        if medium == "html":
            return NotImplemented
        from treetool._sharding._rich import ShardingGrid

        if medium == "text":
            from treetool._lowering._plain import to_text

            return to_text(ShardingGrid(self))
        return ShardingGrid(self)


@set_module("treetool.sharding")
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

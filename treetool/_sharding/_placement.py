"""`Placement`: where every leaf of a tree lives, per leaf, per device and per mesh axis.

Made by `treetool._sharding._devices.placement(tree)`; drawn by its own lowerings, `_sharding/_rich.py` and `_sharding/_html.py`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from treetool._errors import PathError
from treetool._format import fmt_bytes as _fmt_bytes
from treetool._lowering._drawn import RichDrawn
from treetool._paths._path import Path
from treetool._public import set_module
from treetool._sharding._layout import (  # the layout half of placement
    FILE,
    HOST,
    UNKNOWN_PLATFORM,
    Layout,
    RecordedDevice,
    _device_order,
    device_name,
)
from treetool._sharding._leaf_placement import (
    AxisUsage,
    DeviceUsage,
    LeafPlacement,
    PlacementWarning,
)

__all__ = ["Placement"]


# --- the placement of a tree -----------------------------------------------------------------


@set_module("treetool.sharding")
class Placement(RichDrawn):
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
        >>> import numpy as np, treetool as tt
        >>> p = tt.placement({"a": np.zeros(4, np.float32), "b": 1.0})
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
        from treetool._paths._path import suggest

        close = suggest(str(p), [str(q) for q in self.leaves])
        hint = (" Did you mean " + " or ".join(map(repr, close)) + "?") if close else ""
        raise PathError(f"no leaf {str(p)!r} in the placement.{hint}")

    def grid(self, path: str | Path) -> Any:
        """A rich renderable of one leaf's blocks: which device holds which block."""
        return self[path].__treetool_lower__("rich")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: leaves, devices, axes, shardings, warnings.

        Example:
            >>> import json, numpy as np, treetool as tt
            >>> d = tt.placement({"a": np.zeros(2, np.int8)}).to_dict()
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

    def __treetool_lower__(self, medium: str, **options: Any) -> Any:
        """Its own lowerings: `_sharding/_rich.py` (rich, text) and `_sharding/_html.py`."""
        if medium == "html":
            from treetool._sharding._html import placement_html

            return placement_html(self)
        from treetool._sharding._rich import PlacementView

        if medium == "text":
            from treetool._lowering._plain import to_text

            return to_text(PlacementView(self))
        return PlacementView(self)

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
        raise PathError(f"no device {device!r} in the placement; devices: {', '.join(names)}")


def _loose(q: Any, k: Any) -> bool:
    from treetool._paths._path import key_matches

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

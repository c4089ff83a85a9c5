"""Rich renderings of a `Placement`: per-device bars, leaves by sharding, one leaf's blocks.

`PlacementView` is what `tt.render(tt.placement(tree))` draws; `ShardingGrid` draws which
device holds which block of one leaf, for any rank (the dimensions that are cut become the
rows and columns), like `jax.debug.visualize_array_sharding` does for 2-D arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from treetool._lowering._labels import devices_text as devices_text
from treetool._lowering._labels import fmt_bytes
from treetool._sharding._layout import layout_label, mesh_text
from treetool._text import safe

if TYPE_CHECKING:  # the result module imports this one, never the other way round
    from treetool._sharding._leaf_placement import LeafPlacement
    from treetool._sharding._placement import Placement

__all__ = ["DeviceBars", "PlacementView", "ShardingGrid", "ShardingTable", "devices_text"]

_EIGHTHS = " ▏▎▍▌▋▊▉"
_PALETTE = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "red",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_red",
)


def bar(value: int, top: int, width: int) -> str:
    """A horizontal bar of `width` cells filled in proportion `value / top` (eighths).

    Example:
        >>> bar(1, 2, 8), bar(0, 2, 4), bar(3, 3, 3)
        ('████    ', '    ', '███')
    """
    if top <= 0 or width <= 0:
        return " " * max(width, 0)
    eighths = round(8 * width * value / top)
    full, rest = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[rest] if rest else "")
    return text.ljust(width)


class DeviceBars:
    """One bar per device: bytes held (replicas counted) and leaf count; host and file rows.

    Example:
        >>> import numpy as np, io
        >>> from rich.console import Console
        >>> from treetool._sharding._devices import placement
        >>> c = Console(width=60, color_system=None, file=io.StringIO())
        >>> c.print(DeviceBars(placement({"a": np.zeros(4)})))
        >>> print(c.file.getvalue().rstrip())
        host  ██████████████████████████████  32 B  1 leaf
    """

    def __init__(self, placement: Placement, *, width: int = 30, max_devices: int = 64) -> None:
        self.placement = placement
        self.width = width
        self.max_devices = max_devices

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        p = self.placement
        rows: list[tuple[str, int, int, str]] = []
        for u in list(p.per_device.values())[: self.max_devices]:
            style = "" if u.addressable else "dim"
            rows.append((u.name + ("" if u.addressable else "*"), u.bytes, u.leaves, style))
        host = [lp for lp in p.leaves.values() if lp.kind == "host"]
        files = [lp for lp in p.leaves.values() if lp.kind == "file"]
        if host:
            rows.append(("host", p.host_bytes, len(host), "italic"))
        if files:
            rows.append(("file", p.file_bytes, len(files), "italic"))
        if not rows:
            yield Text("no arrays on devices, on the host or in files", style="dim")
            return
        top = max(r[1] for r in rows)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(no_wrap=True)
        for name, nbytes, leaves, style in rows:
            grid.add_row(
                Text(name, style=style or "bold"),
                Text(bar(nbytes, top, self.width), style=style or "green"),
                Text(fmt_bytes(nbytes), style=style),
                Text(f"{leaves:,} {'leaf' if leaves == 1 else 'leaves'}", style="dim"),
            )
        yield grid
        hidden = len(p.per_device) - self.max_devices
        if hidden > 0:
            yield Text(f"… {hidden} more devices", style="dim")
        if any(not u.addressable for u in p.per_device.values()):
            yield Text("* not addressable from this process (bytes from the sharding)", style="dim")


class ShardingTable:
    """The leaves grouped by sharding: one header row per sharding, then its leaves.

    At most `per_group` leaves are listed under each sharding, and `max_groups` shardings.
    """

    def __init__(self, placement: Placement, *, per_group: int = 8, max_groups: int = 20) -> None:
        self.placement = placement
        self.per_group = per_group
        self.max_groups = max_groups

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        p = self.placement
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        table.add_column("sharding / leaf", no_wrap=False, overflow="fold")
        table.add_column("array", no_wrap=True)
        table.add_column("block", no_wrap=True)
        table.add_column("copies", justify="right", no_wrap=True)
        table.add_column("bytes", justify="right", no_wrap=True)
        groups = list(p.shardings.items())
        for desc, paths in groups[: self.max_groups]:
            leaves = [p.leaves[q] for q in paths]
            total = sum(lp.nbytes for lp in leaves)
            n = len(leaves)
            table.add_row(
                Text(safe(desc), style="bold"),
                Text(f"{n:,} {'leaf' if n == 1 else 'leaves'}", style="dim"),
                "",
                "",
                Text(fmt_bytes(total), style="bold"),
            )
            for lp in leaves[: self.per_group]:
                block = lp.shard_shape
                table.add_row(
                    Text("  " + safe(str(lp.path))),
                    Text(safe(layout_label(lp)), style="cyan"),
                    Text(
                        ""
                        if block is None or not lp.on_device
                        else f"[{','.join(map(str, block))}]"
                    ),
                    Text(f"×{lp.replication}" if lp.on_device else ""),
                    fmt_bytes(lp.nbytes),
                )
            if n > self.per_group:
                table.add_row(Text(f"  … {n - self.per_group:,} more", style="dim"), "", "", "", "")
            table.add_section()
        yield table
        if len(groups) > self.max_groups:
            yield Text(f"… {len(groups) - self.max_groups} more shardings", style="dim")


def _range(a: int, b: int) -> str:
    return f"{a}:{b}"


class ShardingGrid:
    """Which device holds which block of one leaf, for any rank.

    The dimensions cut into blocks become the grid: with one, a row of blocks; with two or
    more, the first is the rows and the others the columns. Each cell names the devices that
    hold that block (several when the block is replicated).

    Example:
        >>> import numpy as np, io
        >>> from rich.console import Console
        >>> from treetool._sharding._devices import placement
        >>> c = Console(width=60, color_system=None, file=io.StringIO())
        >>> c.print(ShardingGrid(placement({"a": np.zeros(4)})["a"]))
        >>> print(c.file.getvalue().rstrip())
        ['a']  f64[4]  host: in this process's memory, on no jax device
    """

    def __init__(self, leaf: LeafPlacement, *, max_rows: int = 32, max_cols: int = 16) -> None:
        self.leaf = leaf
        self.max_rows = max_rows
        self.max_cols = max_cols

    def _title(self) -> Text:
        lp = self.leaf
        t = Text()
        t.append(safe(str(lp.path)) or "<root>", style="bold")
        t.append("  ")
        t.append(safe(layout_label(lp)), style="cyan")
        t.append("  ")
        t.append(safe(lp.description))
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lp = self.leaf
        lay = lp.layout
        if lay is None:
            place = {
                "host": "host: in this process's memory, on no jax device",
                "file": "file: still in its file, on no jax device",
                "abstract": "abstract: no sharding recorded",
                "traced": "traced: a tracer has no placement",
                "deleted": "deleted: its buffers were donated or deleted",
            }.get(lp.kind, "not an array")
            yield Text.assemble(
                (str(lp.path) or "<root>", "bold"), "  ", (layout_label(lp), "cyan"), "  ", place
            )
            return
        yield self._title()
        dims = lay.sharded_dims
        colours: dict[tuple[Any, ...], str] = {}

        def cell(devs: tuple[Any, ...]) -> Text:
            colour = colours.setdefault(devs, _PALETTE[len(colours) % len(_PALETTE)])
            remote = any(getattr(d, "process_index", 0) != _process() for d in devs)
            return Text(devices_text(devs) + ("*" if remote else ""), style=f"bold {colour}")

        if not dims:
            table = Table(box=box.SQUARE, show_header=False)
            table.add_column(justify="center")
            table.add_row(cell(lay.blocks[0][1]))
            yield table
        else:
            row_dim = dims[0] if len(dims) >= 2 else None
            col_dims = dims[1:] if len(dims) >= 2 else dims
            rows = (
                sorted({idx[row_dim] for idx, _ in lay.blocks}) if row_dim is not None else [None]
            )
            cols = sorted({tuple(idx[d] for d in col_dims) for idx, _ in lay.blocks})
            where = {
                (
                    idx[row_dim] if row_dim is not None else None,
                    tuple(idx[d] for d in col_dims),
                ): devs
                for idx, devs in lay.blocks
            }
            shown_cols = cols[: self.max_cols]
            table = Table(box=box.SQUARE, show_lines=True, pad_edge=True)
            corner = f"dim {row_dim} \\ " if row_dim is not None else ""
            table.add_column(
                Text(corner + "dim " + ",".join(map(str, col_dims)), style="dim"), no_wrap=True
            )
            for c in shown_cols:
                table.add_column(
                    Text(", ".join(_range(a, b) for a, b in c), style="dim"),
                    justify="center",
                    no_wrap=True,
                )
            for r in rows[: self.max_rows]:
                head = Text(_range(*r) if r is not None else "", style="dim")
                table.add_row(head, *(cell(where.get((r, c), ())) for c in shown_cols))
            yield table
            more = []
            if len(rows) > self.max_rows:
                more.append(f"{len(rows) - self.max_rows} more rows")
            if len(cols) > self.max_cols:
                more.append(f"{len(cols) - self.max_cols} more columns")
            if more:
                yield Text("… " + ", ".join(more), style="dim")
        notes = [
            f"block [{','.join(map(str, lay.shard_shape))}]",
            f"{len(lay.blocks)} {'block' if len(lay.blocks) == 1 else 'blocks'}",
            f"×{lay.replication} {'copy' if lay.replication == 1 else 'copies'}",
        ]
        split = [f"dim {d} over {'×'.join(axes)}" for d, axes in enumerate(lay.dim_axes) if axes]
        notes.extend(split)
        if not lay.fully_addressable:
            notes.append("* not addressable from this process")
        yield Text(" · ".join(notes), style="dim")


def _process() -> int:
    import sys

    jax = sys.modules.get("jax")
    return jax.process_index() if jax is not None else 0


class PlacementView:
    """The whole placement: a summary line, per-device bars, leaves by sharding, warnings."""

    def __init__(self, placement: Placement, *, per_group: int = 8, bar_width: int = 30) -> None:
        self.placement = placement
        self.per_group = per_group
        self.bar_width = bar_width

    def summary(self) -> Text:
        """`12 leaves · 8 devices (cpu) · 2.8 KB on devices (1.0 KB logical) · mesh data=2×model=4`."""
        p = self.placement
        n = len(p.leaves)
        parts = [f"{n:,} {'leaf' if n == 1 else 'leaves'}"]
        if p.per_device:
            plats = sorted({d.platform for d in p.per_device})
            parts.append(
                f"{len(p.per_device)} device{'' if len(p.per_device) == 1 else 's'} ({', '.join(plats)})"
            )
            parts.append(
                f"{fmt_bytes(p.device_bytes)} on devices ({fmt_bytes(p.total_bytes)} logical)"
            )
        for m in p.meshes:
            parts.append(f"mesh {mesh_text(m)}")
        if p.host_bytes:
            parts.append(f"host {fmt_bytes(p.host_bytes)}")
        if p.file_bytes:
            parts.append(f"file {fmt_bytes(p.file_bytes)}")
        ratio = p.imbalance
        if ratio is not None:
            parts.append(f"max/mean {ratio:.2f}")
        return Text(safe(" · ".join(parts)), style="bold")  # mesh axis names may be a file's

    def axes(self) -> Text | None:
        """`data (2): 3 leaves, 1.7 KB · model (4): 3 leaves, 1.6 KB` or None without a mesh."""
        ax = self.placement.axes
        if not ax:
            return None
        return Text(
            "split over "
            + safe(
                " · ".join(
                    f"{a.name} ({a.size}): {a.leaves:,} {'leaf' if a.leaves == 1 else 'leaves'}, "
                    f"{fmt_bytes(a.nbytes)}"
                    for a in ax.values()
                )
            ),
            style="dim",
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        p = self.placement
        parts: list[Any] = [self.summary(), Text("")]
        parts.append(DeviceBars(p, width=self.bar_width))
        axes = self.axes()
        if axes is not None:
            parts.append(axes)
        parts.append(Text(""))
        parts.append(ShardingTable(p, per_group=self.per_group))
        for w in p.warnings:
            parts.append(Text(f"⚠ {safe(w.message)}", style="yellow"))
        yield Group(*parts)

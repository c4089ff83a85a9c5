"""The Devices tab: bytes per device, the leaves a device holds, and one leaf's blocks.

The placement is computed in a thread worker (group `devices`), never on the UI thread.
Moving the cursor in the device list filters the leaves to those with a block on that device;
moving it in the leaves list draws that leaf's sharding grid; enter on a leaf shows it in the
Tree tab.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import ItemFocused, LeafChosen, TabItem

from treetool._lowering._labels import fmt_bytes
from treetool._sharding._devices import LeafPlacement, Placement, layout_label, placement
from treetool._sharding._layout import NAMED, device_name, spec_text
from treetool._sharding._rich import PlacementView, ShardingGrid, bar
from treetool._text import safe, safe_text

__all__ = ["ALL", "DevicesTab"]

#: the device-list row that shows every leaf
ALL = "all"
#: most leaf rows listed at once (a DataTable holds its rows in memory)
MAX_ROWS = 1_000
_BAR = 16


class DevicesTab(Vertical):
    """Per-device bars; the leaves on the highlighted device; the grid of the highlighted leaf.

    Attributes:
        placement: the `Placement`, once the worker has computed it (None before).
        device: the device-list row shown: `"all"`, `"cpu:3"`, `"host"` or `"file"`.
        shown: the paths (keystr) listed in the leaves table, in order.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a",
            "all_devices",
            "All devices",
            tooltip="List the leaves of every device",
            id="devices.all",
        ),
        Binding(
            "g",
            "focus_leaves",
            "Leaves",
            tooltip="Move the focus to the leaves of the device",
            id="devices.leaves",
        ),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | up/down (device list) | Show the leaves with a block on that device. |
    | up/down (leaves) | Draw that leaf's sharding grid. |
    | enter (leaves) | Show the leaf in the Tree tab. |
    | a | List the leaves of every device. |
    | g | Focus the leaves list. |
    """

    DEFAULT_CSS = """
    DevicesTab { height: 1fr; }
    DevicesTab #devices-summary { height: auto; padding: 0 1; }
    DevicesTab #devices-body { height: 1fr; }
    DevicesTab #devices-table { width: 46; height: 1fr; }
    DevicesTab #devices-right { width: 1fr; height: 1fr; }
    DevicesTab #devices-leaves { height: 1fr; min-height: 4; }
    DevicesTab #devices-grid-box { height: auto; max-height: 16; padding: 0 1; }
    DevicesTab #devices-warnings { height: auto; max-height: 4; padding: 0 1; color: $warning; }
    DevicesTab.-narrow #devices-body { layout: vertical; }
    DevicesTab.-narrow #devices-table { width: 1fr; height: auto; max-height: 12; }
    """
    #: below this width the device list goes above the leaves instead of beside them
    NARROW = 110

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def show_failure(self, text: str) -> None:
        """Show a failed worker's one-line error in this tab."""
        self.query_one("#devices-summary", Static).update(Text(text, style="bold red"))

    def __init__(self, obj: Any, *, is_leaf: Any = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.obj = obj
        self.is_leaf = is_leaf
        self.placement: Placement | None = None
        self.device: str = ALL
        self.shown: list[str] = []
        self._devices: dict[str, Any] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text("computing placement…", style="dim italic"), id="devices-summary")
        with Horizontal(id="devices-body"):
            yield DataTable(id="devices-table", cursor_type="row")
            with Vertical(id="devices-right"):
                yield DataTable(id="devices-leaves", cursor_type="row")
                with VerticalScroll(id="devices-grid-box"):
                    yield Static("", id="devices-grid")
        yield Static("", id="devices-warnings")

    class Computed(Message, bubble=False):
        """The placement worker's answer: the placement, or the error it failed with."""

        def __init__(self, result: Placement | None, error: Exception | None = None) -> None:
            super().__init__()
            self.result = result
            self.error = error

    def on_mount(self) -> None:
        devices = self.query_one("#devices-table", DataTable)
        devices.add_columns("device", "bytes", "held", "leaves")
        leaves = self.query_one("#devices-leaves", DataTable)
        leaves.add_columns("leaf", "array", "sharding", "block", "bytes here")
        self._compute()

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-narrow")

    # --- the worker -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="devices", exit_on_error=False)
    def _compute(self) -> None:
        worker = get_current_worker()
        try:
            result = placement(self.obj, is_leaf=self.is_leaf)
        except Exception as e:  # shown in the tab; the rest of the app keeps working
            if not worker.is_cancelled:
                self.post_message(self.Computed(None, e))
            return
        if not worker.is_cancelled:
            self.post_message(self.Computed(result))

    def on_devices_tab_computed(self, message: Computed) -> None:
        if message.error is not None:
            self._failed(message.error)
        elif message.result is not None:
            self._set_placement(message.result)

    def _failed(self, error: Exception) -> None:
        msg = safe(f"placement failed: {type(error).__name__}: {error}")
        self.query_one("#devices-summary", Static).update(Text(msg, style="bold red"))
        self.app.notify(msg, severity="error", timeout=8, markup=False)

    def _set_placement(self, p: Placement) -> None:
        self.placement = p
        self.query_one("#devices-summary", Static).update(PlacementView(p).summary())
        table = self.query_one("#devices-table", DataTable)
        table.clear()
        rows: list[tuple[str, int, int, bool]] = [
            (u.name, u.bytes, u.leaves, u.addressable) for u in p.per_device.values()
        ]
        self._devices = {device_name(d): d for d in p.per_device}
        n_host = sum(1 for lp in p.leaves.values() if lp.kind == "host")
        n_file = sum(1 for lp in p.leaves.values() if lp.kind == "file")
        if n_host:
            rows.append(("host", p.host_bytes, n_host, True))
        if n_file:
            rows.append(("file", p.file_bytes, n_file, True))
        top = max((r[1] for r in rows), default=0)
        n = len(p.leaves)
        table.add_row(Text(ALL, style="bold"), "", fmt_bytes(p.device_bytes), f"{n:,}", key=ALL)
        for name, nbytes, count, addressable in rows:
            table.add_row(
                Text(name + ("" if addressable else "*"), style="bold" if addressable else "dim"),
                Text(bar(nbytes, top, _BAR), style="green"),
                Text(fmt_bytes(nbytes), justify="right"),
                Text(f"{count:,}", justify="right"),
                key=name,
            )
        warnings = Text("\n".join(f"⚠ {safe(w.message)}" for w in p.warnings))
        self.query_one("#devices-warnings", Static).update(warnings)
        self.show_device(self.device)

    # --- filtering ----------------------------------------------------------------------------

    def leaves_for(self, name: str) -> list[LeafPlacement]:
        """The leaves the device-list row `name` stands for."""
        p = self.placement
        if p is None:
            return []
        if name == ALL:
            return list(p.leaves.values())
        if name in ("host", "file"):
            return [lp for lp in p.leaves.values() if lp.kind == name]
        return p.on(self._devices[name])

    def show_device(self, name: str) -> None:
        """List the leaves of one device-list row (`"all"`, `"cpu:3"`, `"host"`, `"file"`)."""
        if self.placement is None:
            return
        if name != ALL and name not in ("host", "file") and name not in self._devices:
            name = ALL
        self.device = name
        leaves = self.leaves_for(name)
        dev = self._devices.get(name)
        table = self.query_one("#devices-leaves", DataTable)
        table.clear()
        self.shown = []
        for lp in leaves[:MAX_ROWS]:
            key = str(lp.path)
            here = lp.bytes_per_device.get(dev, 0) if dev is not None else lp.nbytes
            block = lp.shard_shape if lp.on_device else None
            table.add_row(  # file-derived cells are plain Text: `[/oops]` is a name, not markup
                safe_text(key or "<root>"),
                safe_text(layout_label(lp), "cyan"),
                safe_text(_short_description(lp)),
                Text("" if block is None else f"[{','.join(map(str, block))}]"),
                Text(fmt_bytes(here), justify="right"),
                key=key,
            )
            self.shown.append(key)
        if len(leaves) > MAX_ROWS:
            table.add_row(
                Text(f"… {len(leaves) - MAX_ROWS:,} more leaves", style="dim"), "", "", "", ""
            )
        self._draw_grid(self.shown[0] if self.shown else None)

    def _draw_grid(self, key: str | None) -> None:
        grid = self.query_one("#devices-grid", Static)
        if key is None or self.placement is None:
            grid.update(Text("no leaves", style="dim"))
            return
        grid.update(ShardingGrid(self.placement[key]))

    # --- events and actions -------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        key = event.row_key.value
        if key is None:
            return
        if event.data_table.id == "devices-table":
            if key != self.device:
                self.show_device(key)
            self.post_message(ItemFocused.of(self, self.device_item(key)))
        elif event.data_table.id == "devices-leaves":
            self._draw_grid(key)
            item = self.leaf_item(key) if event.data_table.has_focus else None
            if item is not None:  # (a list refilled for another device says nothing)
                self.post_message(ItemFocused.of(self, item))

    def device_item(self, name: str) -> TabItem:
        """A device-list row for the details pane: its bytes and leaves; `y` copies its name."""
        p = self.placement
        leaves = self.leaves_for(name)
        dev = self._devices.get(name)
        if p is not None and dev is not None:
            usage = p.per_device[dev]
            nbytes, count = usage.bytes, usage.leaves
            where = "this process" if usage.addressable else "another process"
        else:
            nbytes = sum(lp.nbytes for lp in leaves) if name != ALL else p.device_bytes if p else 0
            count, where = len(leaves), ""
        rows: list[tuple[str, Any]] = [
            ("device", name),
            ("bytes", f"{nbytes:,} ({fmt_bytes(nbytes)})"),
            ("leaves", f"{count:,}"),
        ]
        if where:
            rows.append(("held by", where))
        largest = sorted(leaves, key=lambda lp: -lp.nbytes)[:5]
        for i, lp in enumerate(largest):
            rows.append(
                ("largest" if i == 0 else "", f"{safe(str(lp.path))}  {fmt_bytes(lp.nbytes)}")
            )
        return TabItem(f"device {name}", rows, name, name)

    def leaf_item(self, key: str) -> TabItem | None:
        """A leaf row for the details pane: its layout and bytes; `y` copies its path."""
        from treetool._tree._chain import expression

        p = self.placement
        if p is None:
            return None
        try:
            lp = p[key]
        except (KeyError, ValueError, TypeError):
            return None
        rows: list[tuple[str, Any]] = [
            ("layout", layout_label(lp)),
            ("sharding", _short_description(lp)),
            ("bytes", f"{lp.nbytes:,} ({fmt_bytes(lp.nbytes)})"),
            ("devices", f"{len(lp.devices):,}"),
        ]
        root = getattr(self.app, "root_name", "tree")
        return TabItem(safe(key) or "(root)", rows, expression(root, safe(key)), safe(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "devices-leaves" and event.row_key.value is not None:
            self.post_message(LeafChosen(event.row_key.value))
        elif event.data_table.id == "devices-table":
            self.action_focus_leaves()

    def action_all_devices(self) -> None:
        """List the leaves of every device."""
        table = self.query_one("#devices-table", DataTable)
        if table.row_count:
            table.move_cursor(row=0)
        self.show_device(ALL)

    def action_focus_leaves(self) -> None:
        """Move the focus to the leaves list."""
        self.query_one("#devices-leaves", DataTable).focus()


def _short_description(lp: LeafPlacement) -> str:
    """The PartitionSpec alone for a NamedSharding (the mesh is in the summary line)."""
    if lp.kind == NAMED and lp.spec is not None:
        return ("planned " if lp.abstract else "") + spec_text(lp.spec)
    return lp.description

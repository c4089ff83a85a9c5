"""The Devices tab: registered through the tab hook, filters leaves by device, draws grids."""

from __future__ import annotations

import asyncio

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static, TabbedContent, TabPane
from treetool.tui import TreetoolApp
from treetool.tui.tab_devices import applies
from treetool.tui.widgets.devices_tab import ALL, DevicesTab
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool as tt

P = PartitionSpec


pytestmark = pytest.mark.usefixtures("no_delays")


@pytest.fixture(scope="module")
def tree():
    mesh = jax.make_mesh((2, 4), ("data", "model"))

    def put(shape, spec):
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        return jax.device_put(x, NamedSharding(mesh, spec))

    return {
        "layers": [
            {"w": put((8, 16), P("data", "model")), "b": put((16,), P("model"))},
            {"w": put((16, 8), P("model", None)), "b": put((8,), P())},
        ],
        "head": jax.device_put(np.ones((4, 4), np.float32), jax.devices()[3]),
        "host": np.zeros(3, np.float32),
    }


def test_applies_only_to_trees_with_jax_arrays(tree):
    assert applies(tree) is True
    assert applies({"w": np.zeros(3)}) is False
    assert applies([1, "a", None]) is False
    planned = jax.ShapeDtypeStruct((8,), np.float32, sharding=tree["layers"][0]["b"].sharding)
    assert applies({"p": planned}) is True


def test_applies_to_orbax_checkpoints_with_recorded_shardings(tree, tmp_path):
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    ckpt.save(tmp_path / "ckpt", {"w": tree["layers"][0]["w"], "host": tree["host"]})
    ckpt.wait_until_finished()
    loaded = tt.load(str(tmp_path / "ckpt"))
    assert applies(loaded) is True
    assert applies({"host": loaded["host"]}) is False


def _leaves_table(app) -> DataTable:
    return app.query_one("#devices-leaves", DataTable)


def test_pilot_device_filter_grid_and_jump(tree):
    expected = tt.placement(tree)

    async def run() -> None:
        app = TreetoolApp(tree, title="model")
        async with app.run_test(size=(150, 44)) as pilot:
            await settle(pilot)
            assert "devices" in [pane.id for pane in app.query(TabPane)]
            app.query_one(TabbedContent).active = "devices"
            await settle(pilot)
            tab = app.query_one(DevicesTab)
            assert tab.placement is not None
            devices = app.query_one("#devices-table", DataTable)
            # all, cpu:0..7, host
            assert devices.row_count == 10
            assert tab.device == ALL
            assert tab.shown == [str(p) for p in expected.leaves]

            devices.focus()
            await pilot.press("down")  # cpu:0
            await pilot.pause()
            assert tab.device == "cpu:0"
            on0 = [str(lp.path) for lp in expected.on(jax.devices()[0])]
            assert (
                tab.shown
                == on0
                == [
                    "['layers'][0]['b']",
                    "['layers'][0]['w']",
                    "['layers'][1]['b']",
                    "['layers'][1]['w']",
                ]
            )
            for _ in range(3):
                await pilot.press("down")  # cpu:3 also holds ['head']
            await pilot.pause()
            assert tab.device == "cpu:3"
            assert "['head']" in tab.shown and len(tab.shown) == 5
            # bytes on cpu:3 of ['layers'][0]['w'] (a 4x4 f32 block)
            row = _leaves_table(app).get_row("['layers'][0]['w']")
            assert str(row[-1]) == "64 B"

            await pilot.press(*["down"] * 5)  # cpu:4 … cpu:7, then the host row
            await pilot.pause()
            assert tab.device == "host" and tab.shown == ["['host']"]

            await pilot.press("a")
            await pilot.pause()
            assert tab.device == ALL and len(tab.shown) == 6

            # the grid follows the highlighted leaf
            await pilot.press("g")
            leaves = _leaves_table(app)
            assert leaves.has_focus
            await pilot.press("down", "down", "down")  # head, host, [0].b, [0].w
            await pilot.pause()
            grid = app.query_one("#devices-grid", Static)
            text = _plain(grid, app)
            assert text.splitlines()[0] == (
                "['layers'][0]['w']  f32[8,16]  P('data', 'model') on data=2×model=4"
            )
            assert "cpu 4" in text and "dim 0 \\ dim 1" in text

            # enter shows the leaf in the Tree tab
            await pilot.press("enter")
            await pilot.pause()
            assert app.query_one(TabbedContent).active == "tree"

    asyncio.run(run())


def _plain(widget: Static, app) -> str:
    from io import StringIO

    from rich.console import Console

    console = Console(width=120, color_system=None, file=StringIO())
    console.print(widget.content)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines())


def test_no_devices_tab_for_numpy_trees():
    async def run() -> None:
        app = TreetoolApp({"w": np.zeros(3)}, title="np")
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert "devices" not in [pane.id for pane in app.query(TabPane)]

    asyncio.run(run())


class _DevicesApp(App[None]):
    """Just the Devices tab, so the snapshot shows this tab's own looks."""

    def __init__(self, tree) -> None:
        super().__init__()
        self.pytree = tree

    def compose(self) -> ComposeResult:
        yield DevicesTab(self.pytree, id="devices-tab")


def test_snapshot_devices_tab(tree, snap_compare):
    async def before(pilot) -> None:
        await settle(pilot)
        pilot.app.query_one("#devices-table", DataTable).focus()
        await pilot.press("down", "down", "down", "down")  # cpu:3
        await pilot.pause()

    assert snap_compare(_DevicesApp(tree), terminal_size=(130, 34), run_before=before)


def test_snapshot_devices_tab_narrow(tree, snap_compare):
    """Below 110 columns the device list goes above the leaves (the app's details pane
    takes a third of the screen)."""

    async def before(pilot) -> None:
        await settle(pilot)
        pilot.app.query_one("#devices-table", DataTable).focus()
        await pilot.press("down")  # cpu:0
        pilot.app.query_one("#devices-leaves", DataTable).focus()
        await pilot.press("down")  # the second leaf of cpu:0
        await pilot.pause()
        assert pilot.app.query_one(DevicesTab).has_class("-narrow")

    assert snap_compare(_DevicesApp(tree), terminal_size=(90, 40), run_before=before)

"""Every tab owns what its cursor points at (issue 40, point 3): in the Diff, Devices and Port
tabs the details pane and `y`/`Y` follow that tab's cursor, and back in the Tree tab they follow
the tree again; a port plan opens on its Port tab, a navigable table."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import DataTable, TabbedContent
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool as tt

pytestmark = pytest.mark.usefixtures("no_delays")


def _text(widget) -> str:
    console = Console(width=120, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return console.file.getvalue()


def _pane(app: TreetoolApp) -> tuple[str, str]:
    pane = app.query_one(DetailsPane)
    return _text(pane.query_one("#details-path")), _text(pane.query_one("#details-facts"))


def test_the_diff_tab_details_and_copy_follow_its_cursor() -> None:
    before = {"a": np.zeros(3, np.float32), "b": np.ones(2, np.float32)}
    after = {"a": np.zeros(4, np.float32), "b": np.full(2, 2.0, np.float32)}
    app = TreetoolApp(before, other=after, title="model")

    async def run():
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await pilot.press("3")  # Tree, Leaves, Diff
            await settle(pilot)
            assert app.query_one(TabbedContent).active == "diff"
            first = _pane(app)
            await pilot.press("y")
            copied_first = app.clipboard
            await pilot.press("down")
            await settle(pilot)
            second = _pane(app)
            await pilot.press("Y")
            copied_second = app.clipboard
            await pilot.press("t")  # the Tree tab: the pane follows the tree again
            await settle(pilot)
            tree_path = _pane(app)[0]
            return first, copied_first, second, copied_second, tree_path

    first, copied_first, second, copied_second, tree_path = asyncio.run(run())
    assert first[0].splitlines()[0] == "['a']"
    assert "shape" in first[1] and "(3,)" in first[1] and "(4,)" in first[1]
    assert copied_first == "model['a']"  # was `params`/the root whatever the change
    assert second[0].splitlines()[0] == "['b']"
    assert "value" in second[1]
    assert copied_second == "['b']"
    assert "(root)" in tree_path


def test_a_plan_opens_on_its_port_tab_as_a_table() -> None:
    src = {"a.weight": np.ones((4, 4), np.float32), "head.weight": np.ones((2, 4), np.float32)}
    target = {
        "params": {
            "Dense_0": {"kernel": np.zeros((4, 4), np.float32)},
            "head": {"kernel": np.zeros((4, 2), np.float32)},
        }
    }
    plan = tt.port(src, target)
    app = TreetoolApp(plan, title="plan")

    async def run():
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            active = app.query_one(TabbedContent).active
            table = app.query_one("#port-table", DataTable)
            rows = table.row_count
            panes = []
            copies = []
            for _ in range(rows):
                panes.append(_pane(app))
                await pilot.press("y")
                copies.append(app.clipboard)
                await pilot.press("down")
                await settle(pilot)
            return active, rows, panes, copies, table.has_focus

    active, rows, panes, copies, focused = asyncio.run(run())
    assert active == "port" and focused
    targets = sorted(r.target for r in plan.rows)
    assert rows == len(plan.rows) + len(plan.unmatched_target) + len(plan.unmatched_source) + sum(
        len(a.targets) for a in plan.ambiguous
    ) + len(plan.dropped)
    filled = [c for c, (_, facts) in zip(copies, panes) if "filled" in facts]
    assert sorted(filled) == targets
    for (path, facts), copied in zip(panes, copies):
        assert path.splitlines()[0] in (copied, *(s for r in plan.rows for s in r.sources))
        assert "status" in facts


def test_the_devices_tab_details_follow_the_device_row() -> None:
    import jax

    tree = {"w": jax.numpy.zeros((4, 4)), "b": jax.numpy.ones(4)}
    app = TreetoolApp(tree, title="params")

    async def run():
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            ids = app.tab_ids()
            await pilot.press(str(ids.index("devices") + 1))
            await settle(pilot)
            table = app.query_one("#devices-table", DataTable)
            table.focus()
            await pilot.press("down")  # from "all" onto the first device
            await settle(pilot)
            pane = _pane(app)
            await pilot.press("y")
            return pane, app.clipboard

    (path, facts), copied = asyncio.run(run())
    name = str(jax.devices()[0].platform) + ":0"
    assert path.splitlines()[0] == f"device {name}"
    assert "bytes" in facts and "80 (80 B)" in facts and "leaves  2" in facts.replace("   ", "  ")
    assert copied == name


def test_treetool_diff_opens_on_the_diff_tab_and_no_tui_prints(tmp_path) -> None:
    from cli_runner import treetool

    a = {"w": np.zeros(3, np.float32)}
    b = {"w": np.zeros(4, np.float32)}
    app = TreetoolApp(a, other=b, title="a → b", tab="diff")  # what `treetool diff` opens

    async def run():
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            return app.query_one(TabbedContent).active, _pane(app)[0]

    active, path = asyncio.run(run())
    assert active == "diff"
    assert path.splitlines()[0] == "['w']"  # the first change, in the details pane
    np.savez(tmp_path / "a.npz", **a)
    np.savez(tmp_path / "b.npz", **b)
    out = treetool("diff", tmp_path / "a.npz", tmp_path / "b.npz", "--no-tui")
    assert out.returncode == 1, out.stderr
    assert "['w']" in out.stdout and "shape" in out.stdout


def test_the_jaxpr_tab_details_and_copy_follow_its_equation() -> None:
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    def loss(model, x):
        return jnp.sum(jax.vmap(model)(x))

    model = eqx.nn.MLP(2, 1, 4, 1, key=jax.random.key(0))
    view = tt.jaxpr(loss, model, jnp.ones((3, 2)))
    dots = view.search("dot_general")
    app = TreetoolApp(view, title="loss")

    async def run():
        async with app.run_test(size=(160, 44)) as pilot:
            await settle(pilot)
            tab = app.query_one("JaxprTab")
            tab.reveal(dots[0])
            await settle(pilot)
            pane = _pane(app)
            await pilot.press("y")
            copied = app.clipboard
            await pilot.press("Y")
            return pane, copied, app.clipboard

    (path, facts), copied, keystr = asyncio.run(run())
    assert path.splitlines()[0] == f"equation {dots[0].id} dot_general"
    assert "dot_general" in facts and ".args[0].layers[0].weight" in facts
    # the paths of the parameters it reads: the layer's weight and the input x
    assert keystr == ".args[0].layers[0].weight, .args[1]"
    assert copied == "loss.args[0].layers[0].weight, loss.args[1]"

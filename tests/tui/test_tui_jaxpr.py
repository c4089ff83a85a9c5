"""The Jaxpr tab: registered through the tab hook; tree, details, search, uses, producers."""

from __future__ import annotations

import asyncio

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from jax import lax
from textual.app import App, ComposeResult
from textual.widgets import Input, Static, TabbedContent, TabPane, Tree
from treetool.tui import TreetoolApp
from treetool.tui.tab_jaxpr import applies
from treetool.tui.widgets.jaxpr_tab import PAGE, JaxprTab
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool as tt

pytestmark = pytest.mark.usefixtures("no_delays")


def _loss(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def _scan_fn(w, xs):
    def body(c, x):
        return c + jnp.sin(x * w), c

    return lax.scan(body, jnp.float32(0), xs)


@pytest.fixture(scope="module")
def grad_view():
    model = eqx.nn.MLP(2, 1, 4, 2, key=jax.random.key(0))
    return tt.jaxpr(eqx.filter_value_and_grad(_loss), model, jnp.ones((5, 2)), jnp.zeros((5, 1)))


@pytest.fixture(scope="module")
def scan_view():
    return tt.jaxpr(_scan_fn, jnp.float32(2), jnp.ones(3))


def _details(app) -> str:
    return str(app.query_one("#jaxpr-details", Static).render())


def test_applies_to_views_and_jaxprs_only(scan_view):
    assert applies(scan_view) is True
    assert applies(scan_view.closed_jaxpr) is True
    assert applies(scan_view.closed_jaxpr.jaxpr) is True
    assert applies({"w": jnp.ones(2)}) is False
    assert applies(42) is False


def test_pilot_search_uses_and_producer(grad_view):
    async def run() -> None:
        app = TreetoolApp(grad_view, title="loss")
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(pilot)
            assert "jaxpr" in [p.id for p in app.query(TabPane)]
            # opened on a jaxpr, the app starts on the Jaxpr tab with its tree focused
            assert app.query_one(TabbedContent).active == "jaxpr"
            tab = app.query_one(JaxprTab)
            assert app.focused is tab.query_one("#jaxpr-tree", Tree)

            await pilot.press("slash")
            assert app.focused is tab.query_one("#jaxpr-search", Input)
            await pilot.press(*"dot_general", "enter")
            await pilot.pause()
            dots = [e.id for e in grad_view.search("dot_general")]
            assert [e.id for e in tab.matches] == dots and len(dots) == 8
            assert tab.selected == ("eqn", grad_view.equation(dots[0]))
            await pilot.press("n")
            assert tab.selected == ("eqn", grad_view.equation(dots[1]))
            assert str(tab.query_one("#jaxpr-count", Static).render()) == "2/8"
            details = _details(app)
            assert details.startswith(f"equation {dots[1]}  dot_general\nsource  ")
            assert "  c  f32[4,4]  .args[0].layers[1].weight\n" in details

            # u: the equations that read this dot_general's result
            await pilot.press("u")
            eq = grad_view.equation(dots[1])
            assert tab.matches == grad_view.uses(eq.outputs[0], deep=True)
            assert tab.selected == ("eqn", tab.matches[0])
            # p: back to the producer of its first operand
            await pilot.press("p")
            assert tab.selected == ("eqn", eq)

            # search by input path: the equations that read that weight
            await pilot.press("slash", *".args[0].layers[2].weight", "enter")
            await pilot.pause()
            assert [e.id for e in tab.matches] == ["16", "33"]

    asyncio.run(run())


def test_pilot_nested_jaxprs_open_and_reveal(scan_view):
    async def run() -> None:
        app = TreetoolApp(scan_view, title="scan")
        async with app.run_test(size=(140, 44)) as pilot:
            await settle(pilot)
            tab = app.query_one(JaxprTab)
            # deep uses of the weight go into the scan body; revealing opens the scan
            await pilot.press("slash", *".args[0]", "enter")
            await pilot.pause()
            assert [(e.id, e.primitive) for e in tab.matches] == [
                ("0", "scan"),
                ("0/jaxpr/0", "mul"),
            ]
            await pilot.press("n")
            await pilot.pause()
            assert tab.selected == ("eqn", scan_view.equation("0/jaxpr/0"))
            tree = tab.query_one("#jaxpr-tree", Tree)
            assert tree.cursor_node.parent.data[0] == "scope"
            assert tree.cursor_node.parent.parent.data == ("eqn", scan_view.equation("0"))
            await pilot.press("escape")
            # an input row: its details name the path and the uses
            node = tree.root.children[0].children[0]
            tree.root.children[0].expand()
            await pilot.pause()
            tree.move_cursor(node)
            await pilot.pause()
            assert _details(app) == "\n".join(
                [".args[0]", "a  f32[]", "used by 2: 0 scan, 0/jaxpr/0 mul"]
            )

    asyncio.run(run())


def test_pilot_long_jaxpr_loads_in_pages():
    def f(x):
        for _ in range(PAGE):
            x = jnp.sin(x) + 1.0
        return x

    closed = jax.make_jaxpr(f)(jnp.ones(2))

    async def run() -> None:
        app = TreetoolApp(closed, title="f")  # a raw jaxpr: the view is built in a worker
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            tab = app.query_one(JaxprTab)
            assert tab.view is not None and len(tab.view.equations) == 2 * PAGE
            eqns = tab.query_one("#jaxpr-tree", Tree).root.children[-1]
            assert len(eqns.children) == PAGE + 1
            assert str(eqns.children[-1].label) == f"… {PAGE:,} more equations (enter to load)"
            last = tab.view.equations[-1]
            tab.reveal(last)
            await pilot.pause()
            assert len(eqns.children) == 2 * PAGE
            assert tab.selected == ("eqn", last)

    asyncio.run(run())


class _JaxprApp(App[None]):
    """Just the Jaxpr tab, so the snapshot shows this tab's own looks."""

    def __init__(self, view) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield JaxprTab(self.view, id="jaxpr-tab")


def test_snapshot_jaxpr_tab(scan_view, snap_compare):
    async def before(pilot) -> None:
        await settle(pilot)
        tab = pilot.app.query_one(JaxprTab)
        tree = tab.query_one("#jaxpr-tree", Tree)
        tree.focus()
        tab.reveal(scan_view.equation("0/jaxpr/1"))
        tree.root.children[0].expand()
        await pilot.pause()
        tree.move_cursor(tree.root.children[0].children[1])  # the input .args[1]
        await pilot.pause()

    assert snap_compare(_JaxprApp(scan_view), terminal_size=(100, 30), run_before=before)

"""Pilot tests of the terminal UI on real trees: an equinox MLP, an optax state, a loaded file."""

from __future__ import annotations

import asyncio
import functools
import io

import numpy as np
import pytest
from rich.console import Console
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane, LeavesTable, PytreeTree
from treetool.tui.widgets.tree_view import PAGE
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")

SIZE = (120, 40)


def _sync(fn):
    """Run an async Pilot test with asyncio (no async pytest plugin is installed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture(scope="module")
def mlp():
    import equinox as eqx
    import jax

    return eqx.nn.MLP(3, 2, 4, 1, key=jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def adam_state():
    import optax

    params = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    return optax.adam(1e-3).init(params)


def _text(widget) -> str:
    """A Static's content as plain text, as a 100-column console prints it."""
    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return console.file.getvalue()


def _rows(tree: PytreeTree) -> list[str]:
    """The labels of the visible rows, depth first."""
    out = []
    stack = [tree.root]
    while stack:
        tn = stack.pop()
        out.append(str(tn.label))
        if tn.is_expanded:
            stack.extend(reversed(tn.children))
    return out


@_sync
async def test_open_expand_navigate_equinox(mlp):
    app = TreetoolApp(mlp, title="model")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(PytreeTree)
        assert _rows(tree) == [
            "model  MLP  26 params · 104 B",
            ".layers  tuple[2]  26 params · 104 B",
            ".activation  <custom_jvp relu>",
            ".final_activation  <function <lambda>>",
        ]
        assert (
            str(app.query_one("#totals").render()) == "6 leaves · 26 params · 104 B · f32×4 · cpu:0"
        )
        await pilot.press("down", "right")
        await settle(pilot)
        assert _rows(tree)[2:4] == [
            "[0]  Linear  16 params · 64 B",
            "[1]  Linear  10 params · 40 B",
        ]
        await pilot.press("right", "right", "right")  # into [0], expand it, into .weight
        await settle(pilot)
        assert str(app.node.path) == ".layers[0].weight"
        assert app.node.info.shape == (4, 3)
        assert app.query_one(DetailsPane).node is app.node
        await pilot.press("left")  # to the parent
        await settle(pilot)
        assert str(app.node.path) == ".layers[0]"


@_sync
async def test_copy_path_both_forms(mlp):
    app = TreetoolApp(mlp, title="model")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.query_one(PytreeTree).reveal(".layers[1].bias")
        await settle(pilot)
        await pilot.press("y")
        assert app.clipboard == "model.layers[1].bias"
        await pilot.press("Y")
        assert app.clipboard == ".layers[1].bias"


@_sync
async def test_search_glob_next_prev(mlp):
    app = TreetoolApp(mlp, title="model")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"**.bias")
        await settle(pilot)
        assert app.matches == [".layers[0].bias", ".layers[1].bias"]
        assert str(app.query_one("#search-count").render()) == "2 matches"
        assert str(app.node.path) == ".layers[0].bias"  # revealed while typing
        assert app.query_one("#search-input").has_focus
        await pilot.press("enter")
        await settle(pilot)
        assert str(app.node.path) == ".layers[0].bias"
        assert app.query_one(PytreeTree).has_focus
        await pilot.press("n")
        await settle(pilot)
        assert str(app.node.path) == ".layers[1].bias"
        await pilot.press("n")  # wraps around
        await settle(pilot)
        assert str(app.node.path) == ".layers[0].bias"
        await pilot.press("N")
        await settle(pilot)
        assert str(app.node.path) == ".layers[1].bias"
        assert str(app.query_one("#search-count").render()) == "2/2"
        await pilot.press("escape")  # from the tree: clears the search too
        await settle(pilot)
        assert app.matches == []
        assert not app.query_one("#search").has_class("-open")


@_sync
async def test_search_substring_filters_leaves_table(adam_state):
    app = TreetoolApp(adam_state, title="opt_state")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(LeavesTable)
        assert table.row_count == 5
        await pilot.press("slash", *".mu")
        await settle(pilot)
        assert app.matches == ["[0].mu['b']", "[0].mu['w']"]
        assert [table.path_at(i) for i in range(table.row_count)] == app.matches
        await pilot.press("escape")
        await settle(pilot)
        assert app.matches == []
        assert table.row_count == 5


@_sync
async def test_optax_state_tree_and_leaves_tab_sort(adam_state):
    app = TreetoolApp(adam_state, title="opt_state")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tree = app.query_one(PytreeTree)
        assert _rows(tree) == [
            "opt_state  tuple[2]  19 params · 76 B",
            "[0]  ScaleByAdamState  19 params · 76 B",
            "[1]  EmptyState",
        ]
        await pilot.press("L")
        await settle(pilot)
        table = app.query_one(LeavesTable)
        assert table.has_focus
        paths = [table.path_at(i) for i in range(table.row_count)]
        assert paths == ["[0].count", "[0].mu['b']", "[0].mu['w']", "[0].nu['b']", "[0].nu['w']"]
        table.sort_by("params", reverse=True)
        await settle(pilot)
        paths = [table.path_at(i) for i in range(table.row_count)]
        assert paths == ["[0].mu['w']", "[0].nu['w']", "[0].mu['b']", "[0].nu['b']", "[0].count"]
        await pilot.press("s")  # params -> bytes
        await settle(pilot)
        assert table.sort_column == "nbytes"
        await pilot.press("r")  # ascending bytes: count (i32 scalar) first
        await settle(pilot)
        assert table.path_at(0) == "[0].count"
        await pilot.press("down")
        await settle(pilot)
        assert str(app.node.path) == table.path_at(1)
        await pilot.press("enter")  # show it in the tree
        await settle(pilot)
        assert app.query_one("#tabs").active == "tree"
        assert str(tree.cursor_node.data.node.path) == table.path_at(1)


@_sync
async def test_loaded_npz_file(tmp_path):
    import treetool as tt

    path = tmp_path / "ckpt.npz"
    np.savez(path, w=np.arange(12, dtype=np.float32).reshape(3, 4), b=np.zeros(4, np.float64))
    tree = tt.load(path)
    app = TreetoolApp(tree, title=str(path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _rows(app.query_one(PytreeTree)) == [
            "tree  dict[2]  16 params · 80 B",
            "['b']  f64[4]  4 params · 32 B  [lazy]",
            "['w']  f32[3,4]  12 params · 48 B  [lazy]",
        ]
        await pilot.press("down", "down")
        await settle(pilot)
        details = app.query_one(DetailsPane)
        assert details.node is app.node
        assert str(app.node.path) == "['w']"
        stats = _text(details.query_one("#details-stats"))
        assert "max    11" in stats
        assert "mean   5.5" in stats
        preview = _text(details.query_one("#details-preview"))
        assert "[ 8.  9. 10. 11.]" in preview
        await pilot.press("y")
        assert app.clipboard == "tree['w']"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


@_sync
async def test_wide_node_is_paged_and_reveal_loads_pages():
    shapes = [(i % 5 + 1,) for i in range(1000)]  # neighbours differ: nothing folds
    tree = {"wide": [np.zeros(s, np.float32) for s in shapes]}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        await pilot.press("down", "right")
        await settle(pilot)
        wide = tv.root.children[0]
        assert len(wide.children) == PAGE + 1
        assert str(wide.children[-1].label) == f"… {1000 - PAGE:,} more (enter to show {PAGE})"
        tv.move_cursor(wide.children[-1])
        await pilot.press("enter")
        await settle(pilot)
        assert len(wide.children) == 2 * PAGE + 1
        assert str(tv.cursor_node.data.node.path) == f"['wide'][{PAGE}]"
        tv.reveal("['wide'][950]")
        await settle(pilot)
        assert str(app.node.path) == "['wide'][950]"
        # only the page holding [950] is added; the pages before it stay one row
        assert len(wide.children) == 2 * PAGE + 1 + PAGE
        gap = wide.children[2 * PAGE]
        assert (
            str(gap.label)
            == f"… {PAGE * 2:,} more [{2 * PAGE}..{4 * PAGE - 1}] (enter to show {PAGE})"
        )
        assert str(wide.children[-1].data.node.path) == "['wide'][999]"


@_sync
async def test_folded_runs_open_onto_members():
    tree = {"blocks": [{"w": np.ones((2, 2), np.float32)} for _ in range(6)]}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "right", "down")
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        assert str(tv.cursor_node.label) == "[0..5]  ×6 dict[1]  24 params · 96 B"
        await pilot.press("right", "down")
        await settle(pilot)
        assert str(app.node.path) == "['blocks'][0]"
        assert len(tv.cursor_node.parent.children) == 6


@_sync
async def test_help_screen_and_command_palette_list_actions():
    app = TreetoolApp({"a": np.zeros(2)})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        text = _text(app.screen.query_one("#help-keys"))
        for words in (
            "Copy the path as an expression",
            "Sort by the next column",
            "Jump to the next match",
        ):
            assert words in text
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "Screen"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Search paths", "Copy path as expression", "Show Leaves tab", "Help"):
            assert title in titles


@_sync
async def test_other_opens_a_diff_tab():
    a = {"w": np.zeros(3, np.float32), "b": np.ones(2)}
    b = {"w": np.zeros(4, np.float32), "b": np.ones(2)}
    app = TreetoolApp(a, other=b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("right")  # focus is on the tree: switch through the tab bar instead
        app.query_one("#tabs").active = "diff"
        await settle(pilot)
        result = app.query_one("#diff-tab").result
        assert [(c.path, c.kind) for c in result.changes] == [("['w']", "shape")]


@_sync
async def test_registered_tab_shown_only_when_it_applies():
    from textual.widgets import Static
    from treetool.tui.tabs import TabSpec, register_tab, unregister_tab

    register_tab(
        TabSpec("has-b", "Has b", lambda o: "b" in o, lambda o: Static("b!", id="has-b-body"))
    )
    register_tab(TabSpec("broken", "Broken", lambda o: 1 / 0, lambda o: Static()))
    try:
        app = TreetoolApp({"b": np.zeros(1)})
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.query("#has-b-body")
            assert not app.query("#broken")
            assert any("tab broken: division by zero" in n.message for n in app._notifications)
        app2 = TreetoolApp({"a": np.zeros(1)})
        async with app2.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert not app2.query("#has-b-body")
    finally:
        unregister_tab("has-b")
        unregister_tab("broken")


class Secret:
    """A class the pickle names; loading without trust must not run it."""

    def __init__(self) -> None:
        self.w = np.ones(3, np.float32)


@_sync
async def test_opaque_pickle_objects_are_marked(tmp_path):
    import pickle

    import treetool as tt

    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps({"model": Secret(), "step": 3}))
    tree = tt.load(path)
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        assert _rows(tv)[1] == "['model']  Secret  3 params · 12 B  [not executed]"
        await pilot.press("down")
        await settle(pilot)
        facts = _text(app.query_one("#details-facts"))
        assert "not executed  test_tui.Secret (not run: pass --trust" in facts


@_sync
async def test_mouse_click_sorts_and_moves_the_leaves_cursor():
    tree = {"a": np.zeros(5, np.float32), "b": np.zeros(2, np.int8), "c": np.zeros(9, np.float64)}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)
        table = app.query_one(LeavesTable)
        params_x = sum(w + 1 for col, w in table._widths() if col in ("path", "type", "dtype"))
        await pilot.click(LeavesTable, offset=(params_x + 2, 0))  # the Params header
        await settle(pilot)
        assert table.sort_column == "params"
        assert [table.path_at(i) for i in range(3)] == ["['b']", "['a']", "['c']"]
        await pilot.click(LeavesTable, offset=(3, 3))  # third row
        await settle(pilot)
        assert table.cursor == 2
        assert str(app.node.path) == "['c']"


@_sync
async def test_tiny_terminal_hides_details_and_keeps_the_tree():
    app = TreetoolApp({"w": np.zeros((2, 3), np.float32)})
    async with app.run_test(size=(50, 10)) as pilot:
        await settle(pilot)
        assert not app.query_one(DetailsPane).display
        assert app.query_one(PytreeTree).size.width > 40
        await pilot.press("down", "y")
        assert app.clipboard == "tree['w']"


@_sync
async def test_big_leaf_stats_wait_for_S(tmp_path):
    from treetool import LazyArray

    missing = tmp_path / "gone.bin"  # a 400 MB leaf whose file is gone: nothing is read unasked
    app = TreetoolApp({"big": LazyArray((100_000, 1_000), "float32", str(missing))})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        stats = app.query_one("#details-stats")
        assert _text(stats).strip() == "press S to compute stats (reads 400.0 MB)"
        await pilot.press("S")
        await settle(pilot)
        assert _text(stats).startswith("stats failed: FileNotFoundError")


@_sync
async def test_huge_subtrees_are_not_totalled_in_the_pane(monkeypatch):
    from treetool.tui.widgets import details, tree_view

    monkeypatch.setattr(details, "TOTAL_LIMIT", 2)
    monkeypatch.setattr(tree_view, "LABEL_BUDGET", 1)
    monkeypatch.setattr(tree_view, "FILL_LIMIT", 1)
    tree = {"big": [np.zeros(2, np.float32), np.zeros(3, np.float32), np.zeros(1, np.int8)]}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        text = _text(app.query_one("#details-stats"))
        assert text.startswith("more than 2 leaves: not totalled here")
        assert "[1]                 3         12 B" in text

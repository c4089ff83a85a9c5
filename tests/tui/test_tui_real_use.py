"""Pilot tests of the TUI under real use: wide, deep and cyclic trees, failing workers,
crashes, the node that details and copy refer to, tabs, resize (issue 19)."""

from __future__ import annotations

import asyncio
import functools
from typing import ClassVar

import jax
import numpy as np
import pytest
from textual.binding import Binding
from textual.widgets import TabbedContent
from treetool.tui import AppCrashed, TreetoolApp
from treetool.tui import _finish as finish_run
from treetool.tui.widgets import DetailsPane, DiffTab, LeavesTable, PytreeTree, TotalsBar
from treetool.tui.widgets.tree_view import PAGE
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

from treetool import leaves_with_path
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._model import Cycle

pytestmark = pytest.mark.usefixtures("no_delays")

SIZE = (120, 40)


def _sync(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def _plain(widget) -> str:
    """A Static's content as plain text."""
    import io

    from rich.console import Console

    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return console.file.getvalue()


def _rows(tree: PytreeTree) -> int:
    n, stack = 0, [tree.root]
    while stack:
        tn = stack.pop()
        n += 1
        if tn.is_expanded:
            stack.extend(tn.children)
    return n


@jax.tree_util.register_pytree_with_keys_class
class Broken:
    """A registered node whose flatten raises."""

    def tree_flatten_with_keys(self):
        raise RuntimeError("flatten exploded")

    def tree_flatten(self):
        raise RuntimeError("flatten exploded")

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls()


# --- 1: a crash exits non-zero, one line ----------------------------------------------------


class _Crashing(TreetoolApp):
    BINDINGS: ClassVar = [Binding("x", "boom", "Boom")]

    def action_boom(self) -> None:
        raise ZeroDivisionError("the handler divided by zero")


def test_a_crash_exits_non_zero_with_one_line():
    app = _Crashing({"w": np.zeros(3)})

    async def press(pilot) -> None:
        await pilot.pause()
        await pilot.press("x")

    app.run(headless=True, size=SIZE, auto_pilot=press)
    assert app.return_code == 1
    assert app.crash == "ZeroDivisionError: the handler divided by zero"
    with pytest.raises(AppCrashed, match=r"^the terminal UI stopped: ZeroDivisionError: the"):
        finish_run(app)


def test_a_clean_quit_is_not_a_crash():
    app = TreetoolApp({"w": np.zeros(3)})

    async def quit_(pilot) -> None:
        await pilot.pause()
        await pilot.press("q")

    app.run(headless=True, size=SIZE, auto_pilot=quit_)
    assert app.return_code == 0 and app.crash is None
    finish_run(app)  # no exception


# --- 6: a failing flatten in the leaf-index worker ------------------------------------------


@_sync
async def test_failing_flatten_is_an_index_entry_at_its_path():
    tree = {"ok": np.ones(3, np.float32), "zbad": Broken()}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running
        assert app.index is not None and app.index.paths == ["['ok']", "['zbad']"]
        # the tree still browses, with the error on the broken row
        await pilot.press("down", "down")
        await settle(pilot)
        assert str(app.node.path) == "['zbad']"
        assert "flatten exploded" in str(app.query_one(PytreeTree).cursor_node.label)


class _Marked:
    """A leaf that a test's `is_leaf` refuses to judge."""


@_sync
async def test_a_failing_index_worker_keeps_the_app():
    def is_leaf(x) -> bool:
        if isinstance(x, _Marked):
            raise RuntimeError("is_leaf exploded")
        return False

    app = TreetoolApp({"ok": np.ones(3, np.float32), "zbad": _Marked()}, is_leaf=is_leaf)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running
        assert app.index is None
        bar = _plain(app.query_one(TotalsBar))
        assert "index failed: RuntimeError: is_leaf exploded" in bar
        assert any("is_leaf exploded" in n.message for n in app._notifications)
        await pilot.press("down", "down")
        await settle(pilot)
        assert str(app.node.path) == "['zbad']"
        assert "is_leaf exploded" in str(app.query_one(PytreeTree).cursor_node.label)


# --- 3, 15: search in a worker, reveal by page, search semantics ----------------------------


@_sync
async def test_search_in_a_wide_dict_reveals_one_page():
    n = 10_000  # 50 pages of PAGE children; k9999 is the last key in either order
    tree = {f"k{i}": np.zeros(1, np.float32) for i in range(n)}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *f"k{n - 1}")
        await settle(pilot)
        assert app.matches == [f"['k{n - 1}']"]
        assert app.query_one(LeavesTable).row_count == 1
        tv = app.query_one(PytreeTree)
        assert str(tv.cursor_node.data.node.path) == f"['k{n - 1}']"
        # each keystroke revealed its first match by adding the one page holding it (plus
        # the first page): never the pages in between (50 pages for 10,000 children)
        pages = [c for c in tv.root.children if c.data.kind != "more"]
        assert len(pages) <= 7 * PAGE
        assert _rows(tv) <= 7 * (PAGE + 1) + 1
        assert str(app.query_one(DetailsPane).node.path) == f"['k{n - 1}']"


@_sync
async def test_leaves_tab_end_enter_reveals_the_last_of_a_wide_root_by_its_page_only():
    n = 10_000  # 50 pages of PAGE children; k9999 is the last key in either order
    tree = {f"k{i}": np.zeros(1, np.float32) for i in range(n)}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        assert [c.data.kind for c in tv.root.children] == ["node"] * PAGE + ["more"]
        await pilot.press("L", "end")  # nothing searched or opened before
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.query_one(TabbedContent).active == "tree"
        last = f"['k{n - 1}']"  # numeric-aware order: the last leaf is also the last child
        assert str(tv.cursor_node.data.node.path) == last
        # the first page (shown at mount), one `… more` row for the 499 pages between, the
        # page that holds the last child: nothing else was added
        kinds = [c.data.kind for c in tv.root.children]
        assert kinds == ["node"] * PAGE + ["more"] + ["node"] * PAGE
        gap = tv.root.children[PAGE].data
        assert (gap.index, gap.stop) == (PAGE, n - PAGE)
        assert str(tv.root.children[-1].data.node.path) == last


@_sync
async def test_leaves_tab_search_enter_enter_reveals_a_middle_leaf_in_one_paint():
    from treetool.tui.messages import LeafChosen

    n = 5 * PAGE + 3
    tree = {f"k{i}": np.zeros(1, np.float32) for i in range(n)}
    app = TreetoolApp(tree)
    mid = f"['k{n // 2}']"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("L", "slash", *f"k{n // 2}")
        await settle(pilot)
        assert app.matches == [mid]
        await pilot.press("enter")  # the table's cursor onto the match
        await settle(pilot)
        table = app.query_one(LeavesTable)
        assert app.query_one(TabbedContent).active == "leaves"
        assert table.path_at(table.cursor) == mid
        # one look-up: the path -> row map of every leaf (0.35 s at 1e6) was not built for it
        assert app.index is not None and app.index._rows is None
        tv = app.query_one(PytreeTree)
        assert tv.region.height == 0  # hidden behind the Leaves tab
        # Enter on the row: the tab, the rows, the cursor and the scroll all change before
        # the screen is drawn again (no refresh in between: the handler runs to its end here)
        app.on_leaf_chosen(LeafChosen(mid))
        assert app.query_one(TabbedContent).active == "tree"
        assert not app.query_one("#main").has_class("-wide")
        row = tv.cursor_node
        assert row is not None and str(row.data.node.path) == mid
        top, height = tv.scroll_offset.y, tv.outer_size.height
        assert top <= row.line < top + height - 1
        await settle(pilot)
        # and the layout that follows keeps it: same row, on screen, in the details pane
        assert tv.cursor_node is row
        top, height = tv.scroll_offset.y, tv.scrollable_content_region.height
        assert top <= row.line < top + height
        assert str(app.query_one(DetailsPane).node.path) == mid


@_sync
async def test_search_semantics():
    tree = {
        "encoder": {"layers": [{"weight": np.ones(2), "bias": np.zeros(2)} for _ in range(3)]},
        "group9": {"p9999": np.ones(1), "P1": np.ones(1)},
    }
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        from textual.widgets import Input

        box = app.query_one("#search-input", Input)
        cases = {
            "layers[*].weight": [f"['encoder']['layers'][{i}]['weight']" for i in range(3)],
            "group9.p9999": ["['group9']['p9999']"],
            "GROUP9": [],  # an upper-case letter: case-sensitive
            "p1": ["['group9']['P1']"],  # lower case: any case
            "**.bias": [f"['encoder']['layers'][{i}]['bias']" for i in range(3)],
        }
        for query, want in cases.items():
            box.value = query
            await settle(pilot)
            assert app.matches == want, query


# --- 4: deep trees --------------------------------------------------------------------------


@_sync
async def test_three_thousand_levels_reveal_on_one_row():
    depth = 3_000  # three times Python's recursion limit: a recursive walk fails
    tree: object = np.arange(3, dtype=np.int32)
    for _ in range(depth):
        tree = {"a": tree}
    path = "['a']" * depth
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        row = tv.reveal(path)
        await settle(pilot)
        assert row is not None
        assert len(app.node.path) == depth
        assert app.node.info.label == "i32[3]"
        # the root, one row for the chain of 2,999 single-child dicts, the leaf
        assert _rows(tv) == 3
        chain = tv.root.children[0]
        assert str(chain.label).startswith("['a']…(2,998 levels)…['a']  dict[1]")
        assert row.parent is chain and str(row.label).startswith("['a']  i32[3]")
        assert app.index is not None and app.index.totals.params == 3


@_sync
async def test_a_thousand_levels_of_two_children_reveal_without_recursion():
    depth = 1_000
    tree: object = np.zeros(1)
    for _ in range(depth):
        tree = [np.zeros(1), tree]
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        assert tv.reveal("[1]" * depth) is not None
        await settle(pilot)
        assert len(app.node.path) == depth
        assert _rows(tv) == 2 * depth + 1


# --- 5: cycles ------------------------------------------------------------------------------


def test_cycles_are_leaves_in_every_view():
    inner = [np.ones(2, np.float32)]
    inner.append(inner)
    tree = {"a": inner, "b": np.zeros(3, np.float32)}
    pairs = leaves_with_path(tree)
    assert [str(p) for p, _ in pairs] == ["['a'][0]", "['a'][1]", "['b']"]
    cyc = pairs[1][1]
    assert isinstance(cyc, Cycle) and str(cyc.path) == "['a']"
    assert repr(cyc) == "↻ same object as ['a']"
    from treetool._tree._views import find

    found = [(str(p), x) for p, x in find(tree, "**")]
    assert [p for p, _ in found] == ["", "['a']", "['a'][0]", "['a'][1]", "['b']"]
    assert isinstance(found[3][1], Cycle) and str(found[3][1].path) == "['a']"
    index = LeafIndex.build(tree)
    assert index.paths == ["['a'][0]", "['a'][1]", "['b']"]
    assert index.totals.params == 5
    assert inner[1] is inner  # not mutated
    # a wide node that contains itself: the index walks the Node model instead
    wide = [np.ones(1) for _ in range(1000)]
    wide.append(wide)
    index = LeafIndex.build({"w": wide})
    assert len(index) == 1001 and index.types[-1] == "Cycle"


@_sync
async def test_cycle_in_the_tui():
    inner = [np.ones(2, np.float32)]
    inner.append(inner)
    app = TreetoolApp({"a": inner})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        row = tv.reveal("['a'][1]")
        await settle(pilot)
        assert "↻ same object as ['a']" in str(row.label)
        assert not row.allow_expand
        assert app.index is not None and len(app.index) == 2


# --- 7, 10: details and copy follow the visible cursor --------------------------------------


@_sync
async def test_details_and_copy_follow_the_cursor():
    tree = {
        "blocks": [{"w": np.full((i % 7 + 1,), i, np.float32)} for i in range(PAGE + 50)],
        "opt_state": {"mu": np.zeros(2)},
    }
    app = TreetoolApp(tree, title="state")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        await pilot.press("down", "right")
        await settle(pilot)
        blocks = tv.root.children[0]
        more = blocks.children[-1]
        assert more.data.kind == "more"
        tv.move_cursor(more)
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert str(app.query_one(DetailsPane).node.path) == f"['blocks'][{PAGE}]"
        # L moves to the Leaves table; back on the tree, y copies the tree's cursor node
        tv.move_cursor(tv.root.children[1])
        await settle(pilot)
        await pilot.press("L", "down", "down")
        await settle(pilot)
        assert str(app.node.path) == "['blocks'][2]['w']"
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert app.clipboard == "state['opt_state']"
        assert str(app.query_one(DetailsPane).node.path) == "['opt_state']"
        toast = list(app._notifications)[-1]
        assert "OSC 52" in toast.message and "state['opt_state']" in toast.message


# --- 13, 14: tabs by key, palette and mouse; resize -----------------------------------------


async def _until(app, pilot, holds, turns: int = 2000) -> bool:
    """Let the app run (message-loop turns, its workers, its timers) until `holds()`; no
    fixed sleep: on a loaded machine it takes more turns, never a different answer."""
    for _ in range(turns):
        if holds():
            return True
        await pilot.pause()
        await app.workers.wait_for_complete()
        await asyncio.sleep(0.001)  # a timer due (the details pane's) gets its turn
    return holds()


@_sync
async def test_every_tab_by_key_palette_and_mouse_takes_focus():
    a = {"w": np.zeros(3, np.float32)}
    b = {"w": np.ones(3, np.float32)}
    app = TreetoolApp(a, other=b)
    async with app.run_test(size=SIZE) as pilot:
        tabs = app.query_one(TabbedContent)
        diff = app.query_one("#diff")
        tv = app.query_one(PytreeTree)

        def diff_focused() -> bool:
            return app.focused is not None and diff in app.focused.ancestors_with_self

        def shown(tab: str, focused) -> bool:
            # the tab, its focus, and the details pane done with its own timer and worker
            return tabs.active == tab and focused() and app._details_timer is None

        # the app as it opened: the diff computed, the tree focused
        assert await _until(app, pilot, lambda: shown("tree", lambda: app.focused is tv))
        assert await _until(app, pilot, lambda: app.query_one(DiffTab).result is not None)
        ids = app.tab_ids()
        assert ids[:3] == ["tree", "leaves", "diff"]
        await pilot.press("3")
        assert await _until(app, pilot, lambda: shown("diff", diff_focused))
        await pilot.press("1")
        assert await _until(app, pilot, lambda: shown("tree", lambda: app.focused is tv))
        await pilot.click("#--content-tab-diff")
        assert await _until(app, pilot, lambda: shown("diff", diff_focused))
        # and it stays there: nothing queued moves the focus or the tab afterwards
        await settle(pilot)
        assert tabs.active == "diff" and diff_focused()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Show Diff tab" in titles


@_sync
async def test_details_pane_follows_the_new_size():
    app = TreetoolApp({"w": np.zeros(3)})
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        pane = app.query_one(DetailsPane)
        assert not pane.has_class("-narrow")
        await pilot.resize_terminal(40, 12)
        await settle(pilot)
        assert pane.has_class("-narrow")
        await pilot.resize_terminal(200, 60)
        await settle(pilot)
        assert not pane.has_class("-narrow")


# --- 8, 9: folds across pages; largest children from every child ---------------------------


@_sync
async def test_identical_layers_fold_across_pages():
    import equinox as eqx

    lin = eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0))
    layers = [jax.tree_util.tree_map(np.asarray, lin) for _ in range(3 * PAGE + 17)]
    app = TreetoolApp({"layers": layers})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "right")
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        rows = tv.root.children[0].children
        assert len(rows) == 1
        assert str(rows[0].label).startswith(f"[0..{3 * PAGE + 16}]  ×{3 * PAGE + 17} Linear")
        # its members come a page at a time too; revealing the last adds only its page (the
        # members before it stay one `… more` row: not even the fold's first page is added)
        row = tv.reveal(f"['layers'][{3 * PAGE + 16}]")
        await settle(pilot)
        assert row is not None and str(app.node.path) == f"['layers'][{3 * PAGE + 16}]"
        members = rows[0].children
        kinds = [m.data.kind for m in members]
        assert kinds == ["more"] + ["node"] * 17
        assert str(members[0].label).startswith(f"… {3 * PAGE:,} more [0..{3 * PAGE - 1}]")
        assert [m.data.index for m in members[1:]] == list(range(3 * PAGE, 3 * PAGE + 17))
        # the `… more` row above adds its first page (a page at a time, in place)
        await pilot.press(*["up"] * 17)
        await settle(pilot)
        assert tv.cursor_node is members[0]
        await pilot.press("enter")
        await settle(pilot)
        kinds = [m.data.kind for m in rows[0].children]
        assert kinds == ["node"] * PAGE + ["more"] + ["node"] * 17


def test_largest_children_see_every_child():
    from treetool.tui.widgets.details import compute_parts

    from treetool._tree._model import view

    tree = {f"k{i:04d}": np.zeros(10, np.float32) for i in range(5000)}
    tree["k4999"] = np.zeros(100_000, np.float32)  # 99.5% of the bytes, past the 2,000th child
    parts = compute_parts(view(tree))
    assert parts["largest"][0] == ("['k4999']", 100_000, 400_000)
    assert parts["scanned"] == parts["children"] == 5000


# --- 12: the Leaves tab does no per-row work on the UI thread -------------------------------


# --- 16: the small things --------------------------------------------------------------------


def test_numeric_path_order_and_plurals():
    from collections import Counter

    from treetool.tui.widgets.totals import totals_text

    from treetool._tree._model import Aggregates

    index = LeafIndex.build({"a": [0.0] * 1001})
    order = [index.paths[i] for i in index.order("path")]
    assert order[:3] == ["['a'][0]", "['a'][1]", "['a'][2]"] and order[-1] == "['a'][1000]"
    one = Aggregates(leaves=1, arrays=1, params=1, nbytes=4, dtypes=Counter(float32=1))
    assert totals_text(one, {"host": 1}).plain.startswith("1 leaf · 1 params")


@_sync
async def test_constant_leaf_has_no_invented_histogram_range_and_stats_are_kept():
    tree = {"c": np.full((64,), 3.5, np.float32), "v": np.arange(64, dtype=np.float32)}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        pane = app.query_one(DetailsPane)
        stats = _plain(pane.query_one("#details-stats"))
        assert "every finite value is 3.5" in stats
        assert "4.0" not in stats and "3.0" not in stats  # no [x-0.5, x+0.5] range
        kept = pane._kept[id(tree["c"])][1]
        await pilot.press("down", "up")
        await settle(pilot)
        assert pane._kept[id(tree["c"])][1] is kept  # shown again, not computed again


def test_progress_line_on_a_terminal(tmp_path):
    import os
    import pickle

    from treetool._progress import ReadProgress

    path = tmp_path / "big.pkl"
    path.write_bytes(pickle.dumps({"w": np.zeros(1 << 18, np.float32)}))
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        with ReadProgress(str(path), stream=tty, min_bytes=1) as p:
            data = path.read_bytes()
        os.set_blocking(master, False)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        out = b"".join(chunks).decode()
    os.close(master)
    assert len(data) == path.stat().st_size
    assert p.drawn >= 1
    assert "reading big.pkl" in out and "MB" in out
    assert out.endswith("\r\x1b[2K")  # the line is cleared when the read is done


def test_cli_no_tui_shows_a_cycle_and_ends(tmp_path):
    import subprocess
    import sys

    (tmp_path / "cyclic.py").write_text(
        "import numpy as np\ninner = [np.ones(2, np.float32)]\ninner.append(inner)\n"
        "tree = {'a': inner, 'b': np.zeros(3, np.float32)}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "treetool.cli", "inspect", "cyclic:tree", "--no-tui"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "[1]  ↻ same object as ['a']" in run.stdout
    assert "5 params" in run.stdout


@_sync
async def test_diff_tab_lists_every_change_and_shows_one_in_the_tree():
    n = 3000
    a = {f"p{i}": np.zeros(2, np.float32) for i in range(n)}
    b = {f"p{i}": np.full(2, 1.0, np.float32) for i in range(n)}
    app = TreetoolApp(a, other=b)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        from treetool.tui.widgets.diff_tab import ChangeList

        changes = app.query_one(ChangeList)
        assert app.focused is changes
        assert len(changes.changes) == n  # no "… N more changes": every one is a row
        await pilot.press("end")
        await settle(pilot)
        last = changes.changes[-1]
        assert changes.cursor == n - 1 and last.kind == "value"
        assert last.path in changes.line_text(n - 1).plain
        await pilot.press("enter")
        await settle(pilot)
        assert app.query_one(TabbedContent).active == "tree"
        assert str(app.node.path) == last.path

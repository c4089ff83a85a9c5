"""RowTree, the Line-API tree under the TUI's Tree tab: rows, lines, keys, mouse and messages
as Textual's Tree has them, with no recursion per level (issue 31)."""

from __future__ import annotations

import asyncio
import functools

from rich.text import Text
from textual.app import App, ComposeResult
from treetool.tui.widgets.row_tree import MAX_GUIDES, RowTree, TreeRow


def _sync(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


class _Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield RowTree("root", "r")

    def on_row_tree_node_expanded(self, m: RowTree.NodeExpanded[str]) -> None:
        self.seen.append(("expanded", m.node.label.plain))

    def on_row_tree_node_collapsed(self, m: RowTree.NodeCollapsed[str]) -> None:
        self.seen.append(("collapsed", m.node.label.plain))

    def on_row_tree_node_selected(self, m: RowTree.NodeSelected[str]) -> None:
        self.seen.append(("selected", m.node.label.plain))

    def on_row_tree_node_highlighted(self, m: RowTree.NodeHighlighted[str]) -> None:
        self.seen.append(("highlighted", m.node.label.plain))


def _plain(tree: RowTree[str]) -> list[str]:
    return [tree.draw_line(y, 60).text.rstrip() for y in range(len(tree.lines))]


@_sync
async def test_rows_lines_keys_and_messages_as_textuals_tree():
    app = _Host()
    async with app.run_test(size=(60, 20)) as pilot:
        tree = app.query_one(RowTree)
        root = tree.root
        a = root.add("a", "a")
        a.add_leaf("a0", "a0")
        a.add_leaf("a1", "a1")
        root.add_leaf(Text("b"), "b")
        root.expand()
        await pilot.pause()
        assert _plain(tree) == ["▼ root", "├── ▶ a", "└── b"]
        assert [r.line for r in (root, a, a.children[0])] == [0, 1, -1]  # a0: a is closed
        assert tree.cursor_node is root and tree.cursor_line == 0
        await pilot.press("down", "space")  # onto a, open it
        await pilot.pause()
        assert _plain(tree) == ["▼ root", "├── ▼ a", "│   ├── a0", "│   └── a1", "└── b"]
        await pilot.press("down", "shift+down")  # a0, its next sibling a1
        assert tree.cursor_node is a.children[1]
        await pilot.press("shift+left")  # the parent
        assert tree.cursor_node is a
        await pilot.press("shift+down")  # a's next sibling
        assert tree.cursor_node is root.children[1]
        await pilot.press("enter")  # a leaf: selected, nothing opens
        await pilot.pause()
        assert app.seen == [
            ("highlighted", "root"),
            ("expanded", "root"),
            ("highlighted", "a"),
            ("expanded", "a"),
            ("highlighted", "a0"),
            ("highlighted", "a1"),
            ("highlighted", "a"),
            ("highlighted", "b"),
            ("selected", "b"),
        ]
        await pilot.click(RowTree, offset=(4, 1))  # a's icon: it closes
        await pilot.pause()
        assert not a.is_expanded and app.seen[-1] == ("collapsed", "a")
        assert _plain(tree) == ["▼ root", "├── ▶ a", "└── b"]
        a.children[0].remove()
        assert [c.label.plain for c in a.children] == ["a1"]


@_sync
async def test_deep_rows_are_built_without_recursion_and_indented_no_further():
    app = _Host()
    async with app.run_test(size=(60, 20)) as pilot:
        tree = app.query_one(RowTree)
        row: TreeRow[str] = tree.root
        for depth in range(3000):  # far past Python's recursion limit
            row = row.add(f"d{depth}", "x").expand()
        tree.root.expand()
        await pilot.pause()
        assert len(tree.lines) == 3001 and row.line == 3000
        region = tree.label_region(3000)
        assert region is not None and region.x == (MAX_GUIDES - 1) * tree.guide_depth
        tree.move_cursor(row)
        await pilot.pause()
        assert tree.cursor_line == 3000 and tree.scroll_offset.y > 2900

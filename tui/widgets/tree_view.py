"""The lazy pytree tree: rows are added only when a node is expanded, in pages.

A node's children are added a page (`PAGE` rows) at a time, followed by a `… N more` row that
adds the next page when selected. Runs of structurally identical siblings fold into one row
(`[0..31] ×32 Block`) that opens onto its members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from ..._model import Aggregates, Node
from ..._text import safe_text
from ...render.labels import Budget, label
from ...render.text import fold_children, label_text
from ..leaf_index import node_chain
from ..messages import NodeFocused

__all__ = ["Entry", "PytreeTree"]

#: children added per page; 10,000 Textual tree nodes take ~0.6 s to add, 200 take ~12 ms
PAGE = 200
#: leaves that the labels of one page may walk on the UI thread to total params/bytes of inner
#: rows; bigger subtrees get their totals from a background worker (`_fill_labels`)
LABEL_BUDGET = 500
#: the background worker totals subtrees of at most this many leaves
FILL_LIMIT = 300_000


@dataclass
class Entry:
    """What a tree row stands for.

    kind is "node" (one pytree node), "fold" (children `index:stop` of `node.parent`, all alike)
    or "more" (the rest of `node`'s children, from `index`).
    """

    kind: str
    node: Node
    index: int = 0
    stop: int = 0
    loaded: bool = False


class PytreeTree(Tree[Entry]):
    """A Textual Tree over the Node model that loads children on expand, page by page."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "open", "Expand", tooltip="Expand the node", id="tree.open"),
        Binding(
            "left,h", "close", "Collapse", tooltip="Collapse, or go to the parent", id="tree.close"
        ),
        Binding("j", "cursor_down", "Down", show=False, tooltip="Cursor down", id="tree.down"),
        Binding("k", "cursor_up", "Up", show=False, tooltip="Cursor up", id="tree.up"),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | right, l | Expand the node under the cursor (or move into it). |
    | left, h | Collapse the node, or move to its parent. |
    | j, k | Cursor down, up. |
    | enter, space | Toggle; on `… more` rows, add the next page. |
    """

    DEFAULT_CSS = """
    PytreeTree { scrollbar-gutter: stable; }
    PytreeTree > .tree--highlight { text-style: bold; }
    """

    def __init__(self, root: Node, root_name: str, *, id: str | None = None) -> None:
        super().__init__(safe_text(root_name), Entry("node", root), id=id)
        self.model = root
        self.root_name = root_name
        self.matches: frozenset[str] = frozenset()
        self.totals: Aggregates | None = None
        self._pending_fill: list[TreeNode[Entry]] = []
        self.guide_depth = 3

    # --- labels ------------------------------------------------------------------------

    def _label(self, entry: Entry, budget: Budget) -> Text:
        node = entry.node
        if entry.kind == "more":
            left = node.num_children - entry.index
            return Text(f"… {left:,} more (enter to show {min(left, PAGE)})", style="dim italic")
        try:
            if node is self.model or (not node.is_leaf and node.num_children > budget.leaves):
                # too big to total here for sure: the leaf index / `_fill_labels` will
                budget = Budget(0)
        except Exception:  # label() reports the error on the row
            pass
        lbl = label(node, budget)
        if node is self.model:
            lbl.key = self.root_name
            if self.totals is not None:
                lbl.params, lbl.nbytes = self.totals.params, self.totals.nbytes
        if entry.kind == "fold":
            count = entry.stop - entry.index
            last = node.parent.child_range(entry.stop - 1, entry.stop)[0]  # type: ignore[union-attr]
            lbl.key = f"[{node.key.idx}..{last.key.idx}]"  # type: ignore[union-attr]
            lbl.type = f"×{count} {lbl.type}"
            if lbl.params:
                lbl.params *= count
            if lbl.nbytes:
                lbl.nbytes *= count
        return label_text(lbl, root=node is self.model)

    def set_totals(self, totals: Aggregates) -> None:
        """Totals of the whole tree (from the leaf index): shown on the root row."""
        self.totals = totals
        if self.root.data is not None:
            self.root.set_label(self._label(self.root.data, Budget(0)))
        pending, self._pending_fill = self._pending_fill, []
        if pending:
            self._fill_labels(pending)

    @work(thread=True, group="labels")
    def _fill_labels(self, rows: list[TreeNode[Entry]]) -> None:
        """Total the subtrees of freshly added rows off the UI thread, then relabel them."""
        worker = get_current_worker()
        for tn in rows:
            if worker.is_cancelled:
                return
            entry = tn.data
            if entry is None or entry.kind == "more" or entry.node is self.model:
                continue
            try:
                agg = entry.node.aggregates_within(FILL_LIMIT)
            except Exception:  # the label shows the error itself
                continue
            if agg is not None and not worker.is_cancelled:
                self.app.call_from_thread(self._relabel, tn)

    def _relabel(self, tn: TreeNode[Entry]) -> None:
        if tn.data is not None:
            tn.set_label(self._label(tn.data, Budget(0)))

    def on_mount(self) -> None:
        self.root.set_label(self._label(self.root.data, Budget(LABEL_BUDGET)))  # type: ignore[arg-type]
        self.root.expand()
        self.load(self.root)

    def render_label(self, node: TreeNode[Entry], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        entry = node.data
        if (
            self.matches
            and entry is not None
            and entry.kind == "node"
            and str(entry.node.path) in self.matches
        ):
            text.stylize("reverse")
        return text

    # --- lazy loading ------------------------------------------------------------------

    def _add_entries(self, parent: TreeNode[Entry], node: Node, start: int) -> None:
        total = node.num_children
        stop = min(total, start + PAGE)
        kids = node.child_range(start, stop)
        budget = Budget(LABEL_BUDGET)
        rows = fold_children(kids, budget)
        i = start
        added = []
        for row in rows:
            if row.count > 1:
                entry = Entry("fold", row.node, i, i + row.count)
                added.append(parent.add(self._label(entry, budget), entry))
            else:
                added.append(self._add_child(parent, Entry("node", row.node, i), budget))
            i += row.count
        if stop < total:
            entry = Entry("more", node, stop)
            parent.add_leaf(self._label(entry, budget), entry)
        self._fill_missing(added)

    def _fill_missing(self, rows: list[TreeNode[Entry]]) -> None:
        todo = [tn for tn in rows if tn.data is not None and tn.allow_expand]
        if not todo:
            return
        if self.totals is None:  # still indexing: don't compete with it for the GIL
            self._pending_fill.extend(todo)
        else:
            self._fill_labels(todo)

    def _add_child(self, parent: TreeNode[Entry], entry: Entry, budget: Budget) -> TreeNode[Entry]:
        text = self._label(entry, budget)
        try:
            openable = not entry.node.is_leaf and entry.node.num_children > 0
        except Exception:
            openable = False
        if openable:
            return parent.add(text, entry)
        return parent.add_leaf(text, entry)

    def load(self, tn: TreeNode[Entry]) -> None:
        """Add the first page of a row's children, once."""
        entry = tn.data
        if entry is None or entry.loaded:
            return
        entry.loaded = True
        if entry.kind == "node":
            try:
                self._add_entries(tn, entry.node, 0)
            except Exception as e:
                tn.add_leaf(safe_text(f"⚠ cannot open: {type(e).__name__}: {e}", "bold red"))
        elif entry.kind == "fold":
            parent = entry.node.parent
            budget = Budget(LABEL_BUDGET)
            added = [
                self._add_child(tn, Entry("node", child, i), budget)
                for i, child in enumerate(parent.child_range(entry.index, entry.stop), entry.index)  # type: ignore[union-attr]
            ]
            self._fill_missing(added)

    def more(self, tn: TreeNode[Entry]) -> TreeNode[Entry] | None:
        """Replace a `… more` row by the next page; returns the first new row."""
        entry = tn.data
        parent = tn.parent
        if entry is None or entry.kind != "more" or parent is None:
            return None
        before = len(parent.children)
        tn.remove()
        self._add_entries(parent, entry.node, entry.index)
        return parent.children[before - 1] if len(parent.children) >= before else None

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Entry]) -> None:
        event.stop()
        self.load(event.node)

    def on_tree_node_selected(self, event: Tree.NodeSelected[Entry]) -> None:
        entry = event.node.data
        if entry is not None and entry.kind == "more":
            event.stop()
            first = self.more(event.node)
            if first is not None:
                self.call_after_refresh(self._place_cursor, first)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Entry]) -> None:
        event.stop()
        entry = event.node.data
        if entry is not None and entry.kind != "more":
            self.post_message(NodeFocused(entry.node))

    def action_open(self) -> None:
        """Expand the node under the cursor, or step into it when it is open."""
        tn = self.cursor_node
        if tn is None:
            return
        if tn.allow_expand and not tn.is_expanded:
            tn.expand()
        elif tn.is_expanded and tn.children:
            self.move_cursor(tn.children[0])

    def action_close(self) -> None:
        """Collapse the node under the cursor, or move to its parent."""
        tn = self.cursor_node
        if tn is None:
            return
        if tn.is_expanded and tn.allow_expand:
            tn.collapse()
        elif tn.parent is not None:
            self.move_cursor(tn.parent)

    # --- reveal ------------------------------------------------------------------------

    def reveal(self, path: str) -> TreeNode[Entry] | None:
        """Expand the rows down to the node at `path` (loading pages as needed), move the
        cursor onto it and return its row; None when the path is not in the tree."""
        try:
            chain = node_chain(self.model, path)
        except KeyError:
            return None
        tn = self.root
        for _, idx in chain:
            self.load(tn)
            tn.expand()
            nxt = self._find_child(tn, idx)
            if nxt is None:
                return None
            if nxt.data is not None and nxt.data.kind == "fold":
                self.load(nxt)
                nxt.expand()
                nxt = self._find_child(nxt, idx)
                if nxt is None:
                    return None
            tn = nxt
        self.call_after_refresh(self._place_cursor, tn)
        return tn

    def _place_cursor(self, tn: TreeNode[Entry]) -> None:
        # rows added in this tick have no line number until the tree is rebuilt on refresh
        self.move_cursor(tn)
        self.scroll_to_node(tn, animate=False)

    def _find_child(self, tn: TreeNode[Entry], idx: int) -> TreeNode[Entry] | None:
        while True:
            more = None
            for child in tn.children:
                e = child.data
                if e is None:
                    continue
                if e.kind == "node" and e.index == idx:
                    return child
                if e.kind == "fold" and e.index <= idx < e.stop:
                    return child
                if e.kind == "more":
                    more = child
            if more is None or more.data is None or more.data.index > idx:
                return None
            self.more(more)

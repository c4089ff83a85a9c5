"""The lazy pytree tree: rows are added only when a node is expanded, in pages.

A node's children are added a page (`PAGE` rows) at a time, followed by a `… N more` row that
adds the next page when selected. Runs of structurally identical siblings fold into one row
(`[0..31] ×32 Block`) that opens onto its members.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from time import monotonic
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import var
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import NodeFocused
from treetool.tui.widgets.row_tree import RowTree, TreeRow

from treetool._lowering._labels import Budget, label, signature
from treetool._lowering._rows import Row, fold_children, label_text
from treetool._text import safe_text
from treetool._tree._chain import node_chain
from treetool._tree._model import Aggregates, Node

__all__ = ["Entry", "PytreeTree"]

#: children added per page; 10,000 Textual tree nodes take ~0.6 s to add, 200 take ~12 ms
PAGE = 200
#: leaves that the labels of one page may walk on the UI thread to total params/bytes of inner
#: rows; bigger subtrees get their totals from a background worker (`_fill_labels`)
LABEL_BUDGET = 500
#: the background worker totals subtrees of at most this many leaves
FILL_LIMIT = 300_000
#: a chain of at least this many single-child levels is shown on one row (deep trees)
CHAIN_MIN = 16
#: leaves the signatures of one page may walk to fold runs of identical siblings
FOLD_BUDGET = 50_000
#: open rows that a new tree (the next snapshot of a file being read) opens again
KEEP_OPEN = 32
#: rows `e` (expand all) adds at most: a 1e6-leaf subtree is opened a level at a time
EXPAND_ALL_ROWS = 5000


@dataclass
class Entry:
    """What a tree row stands for.

    kind is "node" (one pytree node), "fold" (children `index:stop` of `node.parent`, all alike),
    "more" (`node`'s children `index:stop`, not shown yet) or "chain" (a run of `stop` levels of
    single-child nodes from `top`, child `index` of its parent, down to `node`, on one row).
    """

    kind: str
    node: Node
    index: int = 0
    stop: int = 0
    loaded: bool = False
    top: Node | None = None
    #: a "more" row of a fold's members: its pages are not folded again
    flat: bool = False


class PytreeTree(RowTree[Entry]):
    """A `RowTree` over the Node model that loads children on expand, page by page."""

    #: the whole tree's totals (the app binds it to its own `totals`; None: not counted yet)
    totals: var[Aggregates | None] = var(None, init=False)
    #: the paths lit as search matches (a new set redraws the rows; sets are not compared)
    matches: var[AbstractSet[str]] = var(frozenset, init=False, always_update=True)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "open", "Expand", tooltip="Expand the node", id="tree.open"),
        Binding(
            "left,h", "close", "Collapse", tooltip="Collapse, or go to the parent", id="tree.close"
        ),
        Binding("j", "cursor_down", "Down", show=False, tooltip="Cursor down", id="tree.down"),
        Binding("k", "cursor_up", "Up", show=False, tooltip="Cursor up", id="tree.up"),
        Binding(
            "e,E",
            "expand_all",
            "Expand all",
            tooltip="Expand the node and everything below it",
            id="tree.expand_all",
        ),
        Binding(
            "c,C",
            "collapse_all",
            "Collapse all",
            show=False,
            tooltip="Collapse the node and everything below it",
            id="tree.collapse_all",
        ),
        Binding("g", "g_prefix", "Top", show=False, tooltip="g g: the first row", id="tree.gg"),
        Binding("G", "scroll_end", "Bottom", show=False, tooltip="The last row", id="tree.end"),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | right, l | Expand the node under the cursor (or move into it). |
    | left, h | Collapse the node, or move to its parent. |
    | j, k | Cursor down, up. |
    | e, E / c, C | Expand / collapse the node and everything below it. |
    | g g, G | The first row, the last row (also home, end). |
    | enter, space | Toggle; on `… more` rows, add the next page. |
    """

    DEFAULT_CSS = """
    PytreeTree { scrollbar-gutter: stable; }
    PytreeTree > .tree--highlight { text-style: bold; }
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def __init__(self, root: Node, root_name: str, *, id: str | None = None) -> None:
        super().__init__(safe_text(root_name), Entry("node", root), id=id)
        self.model = root
        self.root_name = root_name
        self._pending_fill: list[TreeRow[Entry]] = []
        #: while revealing, one label budget for every level opened (not one per level)
        self._budget: Budget | None = None
        #: the row `set_model` puts the cursor on once the new rows are laid out
        self._cursor_to: TreeRow[Entry] | None = None
        self.guide_depth = 3
        #: when `g` was last pressed (`g g` goes to the first row)
        self._last_g = 0.0

    # --- labels ------------------------------------------------------------------------

    def _label(self, entry: Entry, budget: Budget) -> Text:
        node = entry.node
        if entry.kind == "more":
            left = entry.stop - entry.index
            where = "" if entry.stop == node.num_children else f" [{entry.index}..{entry.stop - 1}]"
            return Text(
                f"… {left:,} more{where} (enter to show {min(left, PAGE)})", style="dim italic"
            )
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
        if entry.kind == "chain" and entry.top is not None:
            first = str(entry.top.key)
            last = str(node.key)
            lbl.key = f"{first}…({entry.stop - 1:,} levels)…{last}"
        return label_text(lbl, root=node is self.model)

    def watch_matches(self) -> None:
        self.invalidate(layout=False)

    def watch_totals(self, totals: Aggregates | None) -> None:
        """Totals of the whole tree (from the leaf index): shown on the root row."""
        if totals is None:
            return
        if self.root.data is not None:
            self.root.set_label(self._label(self.root.data, Budget(0)))
        pending, self._pending_fill = self._pending_fill, []
        if pending:
            self._fill_labels(pending)

    class Totalled(Message, bubble=False):
        """The labels worker totalled the subtree of `row`: its label shows the totals."""

        def __init__(self, row: TreeRow[Entry]) -> None:
            super().__init__()
            self.row = row

    # (described: not by the repr of its rows, as Textual would)
    @work(thread=True, group="labels", exit_on_error=False, description="row labels")
    def _fill_labels(self, rows: list[TreeRow[Entry]]) -> None:
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
                self.post_message(self.Totalled(tn))

    def on_pytree_tree_totalled(self, message: Totalled) -> None:
        tn = message.row
        if tn.data is not None:
            tn.set_label(self._label(tn.data, Budget(0)))

    def on_mount(self) -> None:
        self.root.set_label(self._label(self.root.data, Budget(LABEL_BUDGET)))  # type: ignore[arg-type]
        self.root.expand()
        self.load(self.root)

    def get_label_width(self, node: TreeRow[Entry]) -> int:
        """The width `render_label` gives, without rendering it: the icon and the label's
        cells (the line building asks this of every row, each time rows change)."""
        icon = (
            (self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE)
            if node.allow_expand
            else ""
        )
        label = node.label
        return cell_len(icon) + (label.cell_len if isinstance(label, Text) else cell_len(label))

    def render_label(self, node: TreeRow[Entry], base_style: Style, style: Style) -> Text:
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

    def _add_entries(
        self,
        parent: TreeRow[Entry],
        node: Node,
        start: int,
        end: int | None = None,
        before: TreeRow[Entry] | None = None,
        fold: bool = True,
    ) -> None:
        """Add rows for children `start:` (a page, up to `end`), then a `… more` row for the
        rest of `start:end`; rows go before `before` when given (a page inside a gap)."""
        total = node.num_children
        end = total if end is None else end
        stop = min(end, start + PAGE)
        kids = node.child_range(start, stop)
        budget = self._budget or Budget(LABEL_BUDGET)
        if len(kids) < 3 or not fold:  # runs start at 3; a fold's members are not refolded
            rows = [Row(k) for k in kids]
        else:
            rows = fold_children(kids, Budget(FOLD_BUDGET), scan=PAGE)
            stop = self._extend_run(node, rows, stop, end)
        i = start
        added = []
        for row in rows:
            if row.count > 1:
                entry = Entry("fold", row.node, i, i + row.count)
                added.append(parent.add(self._label(entry, budget), entry, before=before))
            else:
                added.append(self._add_entry(parent, Entry("node", row.node, i), budget, before))
            i += row.count
        if stop < end:
            entry = Entry("more", node, stop, end, flat=not fold)
            parent.add_leaf(self._label(entry, budget), entry, before=before)
        self._fill_missing(added)

    def _extend_run(self, node: Node, rows: list[Row], stop: int, end: int) -> int:
        """A run of identical siblings that reaches the end of the page goes on past it:
        extend the last row while the next children are alike; returns the new page end."""
        if not rows or rows[-1].count < 2 or stop >= end:
            return stop
        run = rows[-1]
        budget = Budget(FOLD_BUDGET)
        sig = signature(run.node, budget=budget)
        if sig is None:
            return stop
        while stop < end and budget.leaves > 0:
            chunk = node.child_range(stop, min(end, stop + PAGE))
            for c in chunk:
                if signature(c, budget=budget) != sig:
                    return stop
                run.count += 1
                run.last = c
                stop += 1
        return stop

    def _fill_missing(self, rows: list[TreeRow[Entry]]) -> None:
        todo = [tn for tn in rows if tn.data is not None and tn.allow_expand]
        if not todo:
            return
        if self.totals is None:  # still indexing: don't compete with it for the GIL
            self._pending_fill.extend(todo)
        else:
            self._fill_labels(todo)

    def _add_entry(  # not `_add_child`: that name is textual.DOMNode's
        self,
        parent: TreeRow[Entry],
        entry: Entry,
        budget: Budget,
        before: TreeRow[Entry] | None = None,
    ) -> TreeRow[Entry]:
        try:
            openable = not entry.node.is_leaf and entry.node.num_children > 0
        except Exception:
            openable = False
        if openable and entry.node.num_children == 1:
            entry = self._chain(entry)
        text = self._label(entry, budget)
        if openable:
            return parent.add(text, entry, before=before)
        return parent.add_leaf(text, entry, before=before)

    @staticmethod
    def _chain(entry: Entry) -> Entry:
        """A node with one child that has one child…: CHAIN_MIN levels or more become one
        row (10,000-level trees open in one step and the tree stays shallow)."""
        node, levels = entry.node, 0
        try:
            while not node.is_leaf and node.num_children == 1:
                child = node.child_range(0, 1)[0]
                if child.is_leaf or child.num_children != 1:
                    break
                node, levels = child, levels + 1
        except Exception:  # the row of the node that fails shows the error
            pass
        if levels + 1 < CHAIN_MIN:
            return entry
        return Entry("chain", node, entry.index, levels + 1, top=entry.node)

    def load(self, tn: TreeRow[Entry]) -> None:
        """Add the first page of a row's children, once."""
        entry = tn.data
        if entry is None or entry.loaded:
            return
        entry.loaded = True
        if entry.kind in ("node", "chain"):
            try:
                self._add_entries(tn, entry.node, 0)
            except Exception as e:
                tn.add_leaf(safe_text(f"⚠ cannot open: {type(e).__name__}: {e}", "bold red"))
        elif entry.kind == "fold":  # its members, a page at a time
            parent = entry.node.parent
            if parent is not None:
                self._add_entries(tn, parent, entry.index, entry.stop, fold=False)

    def more(self, tn: TreeRow[Entry]) -> TreeRow[Entry] | None:
        """Replace a `… more` row by the next page; returns the first new row."""
        entry = tn.data
        parent = tn.parent
        if entry is None or entry.kind != "more" or parent is None:
            return None
        at = parent.children.index(tn)
        self._add_entries(
            parent, entry.node, entry.index, entry.stop, before=tn, fold=not entry.flat
        )
        tn.remove()
        return parent.children[at] if len(parent.children) > at else None

    def on_row_tree_node_expanded(self, event: RowTree.NodeExpanded[Entry]) -> None:
        event.stop()
        self.load(event.node)

    def on_row_tree_node_selected(self, event: RowTree.NodeSelected[Entry]) -> None:
        entry = event.node.data
        if entry is not None and entry.kind == "more":
            event.stop()
            first = self.more(event.node)
            if first is not None:
                self.call_after_refresh(self._place_cursor, first)

    def on_row_tree_node_highlighted(self, event: RowTree.NodeHighlighted[Entry]) -> None:
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

    def action_expand_all(self) -> None:
        """Open the node under the cursor and every node below it, breadth first, until
        `EXPAND_ALL_ROWS` rows were added (wide nodes keep their `… more` rows)."""
        tn = self.cursor_node
        if tn is None:
            return
        queue, added = deque([tn]), 0
        while queue and added < EXPAND_ALL_ROWS:
            row = queue.popleft()
            e = row.data
            if e is None or e.kind == "more" or not row.allow_expand:
                continue
            self.load(row)
            row.expand()
            added += len(row.children)
            queue.extend(row.children)
        if queue:
            self.notify(
                f"opened {added:,} rows; nodes below them stay closed (press e on one)",
                timeout=4,
                markup=False,
            )

    def action_collapse_all(self) -> None:
        """Close the node under the cursor and every open node below it."""
        tn = self.cursor_node
        if tn is None:
            return
        stack = [tn]
        while stack:
            row = stack.pop()
            if row.is_expanded:
                stack.extend(row.children)
                row.collapse()

    def action_g_prefix(self) -> None:
        """`g g` (twice within half a second): the first row, as in vim and less."""
        now = monotonic()
        if now - self._last_g < 0.5:
            self._last_g = 0.0
            self.action_scroll_home()
        else:
            self._last_g = now

    def action_close(self) -> None:
        """Collapse the node under the cursor, or move to its parent."""
        tn = self.cursor_node
        if tn is None:
            return
        if tn.is_expanded and tn.allow_expand:
            tn.collapse()
        elif tn.parent is not None:
            self.move_cursor(tn.parent)

    # --- another tree (a file being read: its snapshots, then the whole) -----------------

    def kept_paths(self, limit: int = KEEP_OPEN) -> tuple[list[str], str | None]:
        """The paths of the open rows (at most `limit`, shallowest first) and of the cursor's
        row: what `set_model` opens again in the next tree."""
        opened: list[str] = []
        stack = list(reversed(self.root.children))
        while stack and len(opened) < limit:
            tn = stack.pop()
            e = tn.data
            if e is None or e.kind == "more" or not tn.is_expanded:
                continue
            if e.kind in ("node", "chain"):
                opened.append(str(e.node.path))
            stack.extend(reversed(tn.children))
        # a new tree's cursor goes to its row after the next refresh: that row until then
        cur = self._cursor_to or self.cursor_node
        e = cur.data if cur is not None else None
        at = str(e.node.path) if e is not None and e.kind in ("node", "chain") else None
        return opened, at

    def set_model(
        self,
        model: Node,
        opened: dict[str, list[tuple[Node, int]]] | None = None,
        cursor: list[tuple[Node, int]] | None = None,
    ) -> None:
        """Show `model` instead: the next snapshot of a file being read, or the whole tree.

        `opened` maps the open rows' paths (from `kept_paths`) to their `node_chain` in
        `model` (resolved in a worker): those rows open again; the cursor goes to the row of
        the `cursor` chain (the root for an empty chain).
        """
        self._drop_rows()
        self.model = model
        self._pending_fill = []
        self.totals = None
        root = Entry("node", model)
        self.reset(self._label(root, Budget(LABEL_BUDGET)), root)
        self.root.expand()
        self.load(self.root)
        self._budget = Budget(LABEL_BUDGET)
        try:
            for chain in (opened or {}).values():
                tn = self._reveal(chain)
                if tn is not None:
                    self.load(tn)
                    tn.expand()
            back = self._reveal(cursor) if cursor is not None else None
        finally:
            self._budget = None
        self._cursor_to = back or self.root
        self.call_after_refresh(self._place_cursor, self._cursor_to)

    def _drop_rows(self) -> None:
        """Let go of the tree shown until now: its rows' entries are emptied.

        The rows that go are cyclic garbage the collector may not see for long (the app freezes what
        it keeps, see `_gc`): through their entries, a snapshot of a file being read (its
        view, a copy of its widest container) stayed alive after the whole tree replaced it.
        """
        stack = [self.root]
        while stack:
            tn = stack.pop()
            tn.data = None
            stack.extend(tn.children)

    # --- reveal ------------------------------------------------------------------------

    def reveal(self, path: str) -> TreeRow[Entry] | None:
        """Expand the rows down to the node at `path`, move the cursor onto it and return its
        row; None when the path is not in the tree.

        Only the ancestors are opened, and in a wide node only the page that holds the next
        step is added (the pages before it stay one `… more` row): revealing the last of
        1,000,000 children adds one page, not 5,000.
        """
        try:
            chain = node_chain(self.model, path)
        except KeyError:
            return None
        return self.reveal_chain(chain)

    def reveal_chain(self, chain: list[tuple[Node, int]]) -> TreeRow[Entry] | None:
        """`reveal` of a path already resolved by `node_chain` (in a worker)."""
        self._budget = Budget(LABEL_BUDGET)
        try:
            tn = self._reveal(chain)
        finally:
            self._budget = None
        if tn is not None:
            if self.outer_size.height:  # it has been laid out: placed in this same paint
                self._place_cursor(tn, now=True)
            # again once the screen is laid out (a resize while the tree was hidden); a
            # placement that holds changes nothing and paints nothing
            self.call_after_refresh(self._place_cursor, tn)
        return tn

    def _reveal(self, chain: list[tuple[Node, int]]) -> TreeRow[Entry] | None:
        tn = self.root
        pos = 0
        while pos < len(chain):
            idx = chain[pos][1]
            self._load_at(tn, idx)
            tn.expand()
            nxt = self._find_child(tn, idx)
            if nxt is None:
                return None
            if nxt.data is not None and nxt.data.kind == "fold":
                self._load_at(nxt, idx)
                nxt.expand()
                nxt = self._find_child(nxt, idx)
                if nxt is None:
                    return None
            tn = nxt
            entry = tn.data
            # a chain row stands for `stop` levels: the next step is under its last node
            pos += entry.stop if entry is not None and entry.kind == "chain" else 1
        return tn

    def _load_at(self, tn: TreeRow[Entry], idx: int) -> None:
        """`load` a row on the way to its child `idx`: when that child is past the first
        page, the first page is not added (one `… more` row stands for every child, and
        `_find_child` adds the page that holds `idx` only)."""
        entry = tn.data
        if entry is None or entry.loaded:
            return
        first = entry.index if entry.kind == "fold" else 0
        if entry.kind not in ("node", "chain", "fold") or idx < first + PAGE:
            self.load(tn)
            return
        if entry.kind == "fold":
            node, stop, flat = entry.node.parent, entry.stop, True
        else:
            node, stop, flat = entry.node, entry.node.num_children, False
        if node is None:
            self.load(tn)
            return
        entry.loaded = True
        gap = Entry("more", node, first, stop, flat=flat)
        tn.add_leaf(self._label(gap, self._budget or Budget(LABEL_BUDGET)), gap)

    def _place_cursor(self, tn: TreeRow[Entry], now: bool = False) -> None:
        if tn is self._cursor_to:
            self._cursor_to = None
        # rows added in this tick have no line number until the tree's lines are rebuilt:
        # `lines` rebuilds them now rather than on the next refresh
        self.lines  # noqa: B018 (the property builds the lines when rows changed)
        if now and tn.line < 0:
            return
        self.move_cursor(tn)
        # scrolled now, not after the next refresh: the row is in the first paint
        region = self.label_region(tn.line) if tn.line >= 0 else None
        if region is not None and not self.region.height:
            # hidden this tick (its tab is being shown): the height it had when last shown,
            # less a row for a scrollbar; the pass after the refresh corrects it if need be
            height = max(1, self.outer_size.height - 1)
            y = min(self.scroll_offset.y, tn.line)
            y = max(y, tn.line - height + 1)
            self.scroll_to(y=y, animate=False, force=True, immediate=True)
        elif region is not None:
            self.scroll_to_region(
                region,
                animate=False,
                force=True,
                center=self.center_scroll,
                origin_visible=False,
                x_axis=False,
                immediate=True,
            )
        # the cursor line may not change (a `… more` row replaced by its first row): say it
        if tn.data is not None and tn.data.kind != "more":
            self.post_message(NodeFocused(tn.data.node))

    def _find_child(self, tn: TreeRow[Entry], idx: int) -> TreeRow[Entry] | None:
        """The row of child `idx` of `tn` (a node, chain or fold row), adding the one page
        that holds it when it is inside a `… more` row."""
        for child in tn.children:
            e = child.data
            if e is None:
                continue
            if e.kind in ("node", "chain") and e.index == idx:
                return child
            if e.kind == "fold" and e.index <= idx < e.stop:
                return child
            if e.kind == "more" and e.index <= idx < e.stop:
                return self._open_gap(child, idx)
        return None

    def _open_gap(self, gap: TreeRow[Entry], idx: int) -> TreeRow[Entry] | None:
        """Split a `… more` row around the page that holds child `idx` and add that page."""
        entry = gap.data
        parent = gap.parent
        if entry is None or parent is None:
            return None
        page = max(entry.index, idx - idx % PAGE)
        budget = self._budget or Budget(LABEL_BUDGET)
        if page > entry.index:
            head = Entry("more", entry.node, entry.index, page, flat=entry.flat)
            parent.add_leaf(self._label(head, budget), head, before=gap)
        self._add_entries(parent, entry.node, page, entry.stop, before=gap, fold=not entry.flat)
        gap.remove()
        for child in parent.children:
            e = child.data
            if e is None or e.kind == "more":
                continue
            if e.kind == "fold" and e.index <= idx < e.stop:
                return child
            if e.index == idx and e.kind in ("node", "chain"):
                return child
        return None

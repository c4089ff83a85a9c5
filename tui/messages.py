"""Messages the treetool app's widgets send each other (one place, dataclass-style)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from rich.text import Text
from textual.message import Message

from treetool._reading._read import Read
from treetool._reading._snapshots import Snapshot
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._model import Node

__all__ = [
    "DetailsReady",
    "ItemFocused",
    "TabItem",
    "IndexReady",
    "LeafChosen",
    "NodeFocused",
    "ReadDone",
    "ReadFailed",
    "ReadKept",
    "ReadProgress",
    "SearchDone",
    "SnapshotReady",
]


class TabItem:
    """What the cursor of a tab other than Tree and Leaves points at (a change, an equation,
    a device, a plan row): the details pane's title and rows, and what `y`/`Y` copy.

    `rows` are (label, value) pairs, the values plain `str` (escaped by the pane) or `Text`.

    Example:
        >>> TabItem("~ ['w']", [("kind", "shape")], "model['w']", "['w']").keystr
        "['w']"
    """

    __slots__ = ("expression", "keystr", "rows", "title")

    def __init__(
        self, title: str, rows: list[tuple[str, Any]], expression: str, keystr: str
    ) -> None:
        self.title = title
        self.rows = rows
        self.expression = expression
        self.keystr = keystr


class ItemFocused(Message):
    """A tab's cursor moved onto `item`; `tab` is the id of its pane (`diff`, `port`, …)."""

    def __init__(self, tab: str, item: TabItem) -> None:
        super().__init__()
        self.tab = tab
        self.item = item

    @classmethod
    def of(cls, widget: Any, item: TabItem) -> ItemFocused:
        """The message for `item` from `widget`, which sits in a tab pane."""
        from textual.widgets import TabPane

        pane = next((a for a in widget.ancestors if isinstance(a, TabPane)), None)
        return cls(pane.id if pane is not None and pane.id else "", item)


class NodeFocused(Message):
    """The cursor moved onto a node (tree or leaves table); handled by `on_node_focused`."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node


class LeafChosen(Message):
    """A leaf row was chosen (enter/click) in the Leaves table; handled by `on_leaf_chosen`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path


class DetailsReady(Message):
    """A stats worker finished for `node`; handled by `on_details_ready` in the details pane."""

    def __init__(self, node: Node, parts: dict[str, Any]) -> None:
        super().__init__()
        self.node = node
        self.parts = parts


# --- what the app's workers post (from their threads; handled on the UI thread) -----------


class IndexReady(Message):
    """The leaf index of the whole tree is built; handled by the app's `on_index_ready`."""

    def __init__(self, index: LeafIndex) -> None:
        super().__init__()
        self.index = index


class SearchDone(Message):
    """A search's answer, for `query`: `found` paths (None: the text search waits for the
    index), the Leaves table's `rows`, the `matched` set, an `error` line, and `chain`, the
    way to the first match. A newer answer replaces one not handled yet."""

    def __init__(
        self,
        query: str,
        found: list[str] | None,
        rows: Any = None,
        matched: AbstractSet[str] = frozenset(),
        error: str = "",
        chain: list[tuple[Node, int]] | None = None,
    ) -> None:
        super().__init__()
        self.query = query
        self.found = found
        self.rows = rows
        self.matched = matched
        self.error = error
        self.chain = chain

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SearchDone)


class ReadProgress(Message):
    """The progress line of the file being read; a newer line replaces one not shown yet."""

    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReadProgress)


class SnapshotReady(Message):
    """A snapshot of the file being read is ready to show (see `treetool._reading`)."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class ReadDone(Message):
    """The whole file is read: `read`, and its view `model` (root opened)."""

    def __init__(self, read: Read, model: Node) -> None:
        super().__init__()
        self.read = read
        self.model = model


class ReadKept(Message):
    """The whole tree with the open rows and the cursor of the tree shown until now resolved
    in it (`treetool._reading._snapshots.resolve`): it replaces that tree."""

    def __init__(
        self,
        read: Read,
        model: Node,
        opened: dict[str, list[tuple[Node, int]]],
        cursor: list[tuple[Node, int]] | None,
    ) -> None:
        super().__init__()
        self.read = read
        self.model = model
        self.opened = opened
        self.cursor = cursor


class ReadFailed(Message):
    """The file could not be read: the app exits and `treetool.tui.run` raises `error`."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

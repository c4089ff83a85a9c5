"""Messages the treetool app's widgets send each other (one place, dataclass-style)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from .._model import Node

__all__ = ["DetailsReady", "LeafChosen", "NodeFocused"]


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

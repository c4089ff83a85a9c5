"""The rows of a drawn tree: labels as rich Text, and runs of identical siblings folded.

Runs of structurally identical siblings fold into one row (`[0..31] ×32 Block`) whose
children are those of the first member. The tree's rich view (`_tree/_rich.py`), its HTML
(`_tree/_html.py`) and the TUI's tree draw their rows with these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from treetool._lowering._labels import Budget, NodeLabel, dtype_style, label, signature
from treetool._paths._path import SequenceKey
from treetool._text import safe

if TYPE_CHECKING:  # the kit sits below the tree: it takes a Node and calls its methods
    from treetool._tree._model import Node

__all__ = ["Row", "fold_children", "label_text", "row_label"]

_MIN_RUN = 3


def label_text(lbl: NodeLabel, *, root: bool = False) -> Text:
    """A label as styled rich Text (the same words as `NodeLabel.plain`), never markup.

    `label` already escapes file text; `safe` runs again here (it is idempotent and cheap)
    for keys a caller set itself, such as a root named after a file.
    """
    t = Text()
    if lbl.key:
        t.append(safe(lbl.key), style="bold")
        t.append("  ")
    t.append(safe(lbl.type), style="bold magenta" if root else dtype_style(lbl.dtype))
    stats = lbl.stats_text
    if stats:
        t.append("  ")
        t.append(stats, style="dim")
    for f in lbl.flags:
        t.append("  ")
        t.append(f"[{f}]", style="bold red" if f == "not executed" else "yellow")
    if lbl.error:
        t.append("  ")
        t.append(f"⚠ {safe(lbl.error)}", style="bold red")
    return t


@dataclass
class Row:
    """One shown row: a node, or a run of `count` identical siblings starting at `node`."""

    node: Node
    count: int = 1
    last: Node | None = None

    @property
    def key(self) -> str:
        """`[0]`, or `[0..31]` for a folded run."""
        if self.count == 1 or self.last is None:
            return str(self.node.key) if self.node.key is not None else ""
        return f"[{self.node.key.idx}..{self.last.key.idx}]"  # type: ignore[union-attr]


def fold_children(kids: list[Node], budget: Budget | None = None, scan: int = 256) -> list[Row]:
    """Group consecutive indexed siblings with equal signatures into folded rows."""
    rows: list[Row] = []
    sigs: list[Any] = []
    for i, c in enumerate(kids):
        sig = None
        if i < scan and isinstance(c.key, SequenceKey) and (budget is None or budget.leaves > 0):
            sig = signature(c, budget=budget)
        if rows and sig is not None and sigs[-1] == sig:
            r = rows[-1]
            r.count += 1
            r.last = c
            continue
        rows.append(Row(c))
        sigs.append(sig)
    out: list[Row] = []
    for r in rows:
        if 1 < r.count < _MIN_RUN:
            start = kids.index(r.node)
            out.extend(Row(k) for k in kids[start : start + r.count])
        else:
            out.append(r)
    return out


def row_label(row: Row, budget: Budget) -> NodeLabel:
    """The label of a row; a folded run (`[0..31] ×32 Block`) counts params and bytes of all."""
    lbl = label(row.node, budget)
    if row.count > 1:
        lbl.key = row.key
        lbl.type = f"×{row.count} {lbl.type}"
        if lbl.params:
            lbl.params *= row.count
        if lbl.nbytes:
            lbl.nbytes *= row.count
    return lbl

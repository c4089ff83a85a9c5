"""Rich rendering of the Node model: a tree with depth and width limits and folded runs.

The renderable builds only the rows it shows. Runs of structurally identical siblings fold
into one row (`[0..31] ×32 Block`) whose children are those of the first member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from rich.tree import Tree

from treetool._paths._path import SequenceKey
from treetool._text import safe
from treetool._tree._model import Node, no_gc, view
from treetool.render.labels import Budget, NodeLabel, dtype_style, label, signature

__all__ = ["Row", "TreeView", "fold_children", "label_text"]

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


class TreeView:
    """A rich renderable of a pytree (or a Node) as a tree.

    Args:
        obj: a pytree or a `Node`.
        depth: how many levels below the root to show.
        width: how many rows per node before `… N more`.
        fold: fold runs of identical siblings into one row.
        budget: how many leaves may be walked for params/bytes totals (huge trees stay fast).

    Example:
        >>> import io, numpy as np
        >>> from rich.console import Console
        >>> c = Console(file=io.StringIO(), width=60, color_system=None)
        >>> c.print(TreeView({"w": np.zeros((2, 3), np.float32), "b": [1, 2]}))
        >>> print(c.file.getvalue(), end="")
        dict[2]  6 params · 24 B
        ├── ['b']  list[2]
        │   ├── [0]  1
        │   └── [1]  2
        └── ['w']  f32[2,3]  6 params · 24 B
    """

    def __init__(
        self,
        obj: Any,
        *,
        depth: int = 3,
        width: int = 20,
        fold: bool = True,
        budget: int = 10_000,
        is_leaf: Any = None,
    ) -> None:
        self.node = obj if isinstance(obj, Node) else view(obj, is_leaf=is_leaf)
        self.depth = depth
        self.width = width
        self.fold = fold
        self.budget = budget

    def build(self) -> Tree:
        """The rich Tree of the shown rows."""
        budget = Budget(self.budget)
        rows: list[tuple[Row, Tree | None, int]] = []  # (row, parent rich tree, depth)
        root = Tree("")
        pending: list[tuple[Row, Tree | None, int, Tree]] = [(Row(self.node), None, 0, root)]
        shown: list[tuple[Row, Tree]] = []
        while pending:
            row, _, d, rt = pending.pop()
            shown.append((row, rt))
            n = row.node
            if d >= self.depth:
                continue
            try:
                if n.is_leaf:
                    continue
                total = n.num_children
                kids = n.child_range(0, min(total, max(self.width * 8, 256)))
            except Exception:
                continue
            child_rows = fold_children(kids, budget) if self.fold else [Row(k) for k in kids]
            visible = child_rows[: self.width]
            covered = sum(r.count for r in visible)
            branches = []
            for r in visible:
                branches.append((r, rt.add("")))
            if covered < total:
                rt.add(Text(f"… {total - covered} more", style="dim italic"))
            for r, b in reversed(branches):
                pending.append((r, rt, d + 1, b))
            rows.append((row, rt, d))
        # labels last, deepest first, so small subtrees get aggregates before the budget ends
        for row, rt in sorted(shown, key=lambda x: -len(x[0].node.path)):
            rt.label = self._row_label(row, budget, root=row.node is self.node)
        return root

    def _row_label(self, row: Row, budget: Budget, root: bool) -> Text:
        return label_text(row_label(row, budget), root=root)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        with no_gc():
            tree = self.build()
        yield tree

    def __str__(self) -> str:
        """The tree as plain text: `print(tt.render(x))` draws it."""
        from treetool.render.plain import to_text

        return to_text(self)


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

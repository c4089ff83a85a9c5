"""The rich view of the Node model: a tree with depth and width limits and folded runs.

The renderable builds only the rows it shows (`_lowering._rows` folds runs of identical
siblings). Imported by `Node` itself, the first time it is drawn; it never imports the model
back (types only under TYPE_CHECKING): `tt.render` makes the Node of a plain pytree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from rich.tree import Tree

from treetool._lowering._labels import Budget
from treetool._lowering._rows import Row, fold_children, label_text, row_label
from treetool._tree._node_table import no_gc

if TYPE_CHECKING:
    from treetool._tree._model import Node

__all__ = ["TreeView"]


class TreeView:
    """A rich renderable of a `Node` as a tree (`tt.render` makes the Node of a pytree).

    Args:
        node: the root `Node`.
        depth: how many levels below the root to show.
        width: how many rows per node before `… N more`.
        fold: fold runs of identical siblings into one row.
        budget: how many leaves may be walked for params/bytes totals (huge trees stay fast).

    Example:
        >>> import io, numpy as np
        >>> from rich.console import Console
        >>> c = Console(file=io.StringIO(), width=60, color_system=None)
        >>> import treetool as tt
        >>> c.print(TreeView(tt.view({"w": np.zeros((2, 3), np.float32), "b": [1, 2]})))
        >>> print(c.file.getvalue(), end="")
        dict[2]  6 params · 24 B
        ├── ['b']  list[2]
        │   ├── [0]  1
        │   └── [1]  2
        └── ['w']  f32[2,3]  6 params · 24 B
    """

    def __init__(
        self,
        node: Node,
        *,
        depth: int = 3,
        width: int = 20,
        fold: bool = True,
        budget: int = 10_000,
    ) -> None:
        self.node = node
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
        from treetool._lowering._plain import to_text

        return to_text(self)

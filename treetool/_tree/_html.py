"""HTML of the Node model: nested `<details>` that fold with no script, within a budget.

The rows to draw are chosen breadth first, so the levels that open first are complete before
deeper ones are drawn: levels above `depth` are open, deeper ones are present but closed, until
`ROWS` rows (or about `ROW_BYTES` of them) are drawn; past that, or `EXTRA_DEPTH` levels below
`depth`, a node holds a `… N more` row instead of its children. Labels, folding of identical siblings and `… N more`
are the rich view's (`_lowering._rows.fold_children`, `_lowering._labels.label`), so both say the
same thing. Imported by `Node` itself, the first time it is drawn as HTML; it never imports the
model back (types only under TYPE_CHECKING).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treetool._leaves._arrays import Stats, is_key, stats
from treetool._lowering._html_base import (
    PATH_LIMIT,
    copy_button,
    label_html,
    stats_html,
    totals_html,
    wrap,
)
from treetool._lowering._labels import Budget, NodeLabel, devices_text, inner_type, key_text, label
from treetool._lowering._rows import Row, fold_children, row_label
from treetool._tree._node_table import no_gc
from treetool._tree._totals import Aggregates, totals

if TYPE_CHECKING:
    from treetool._tree._model import Node

__all__ = ["tree_html"]

#: rows drawn per view (open or folded away), then `… N more`
ROWS = 2000
#: about how many bytes of HTML those rows may take (long keys make long paths on every row)
ROW_BYTES = 1_200_000
#: levels drawn (closed) below `depth`, budget permitting
EXTRA_DEPTH = 8
#: leaves walked for the header's totals; bigger trees show their size without totals
TOTALS_LEAVES = 100_000
#: leaves walked for the params/bytes of inner rows (deepest rows first), as in the rich view
LABEL_LEAVES = 50_000
#: nodes visited to find runs of identical siblings
FOLD_NODES = 20_000
#: leaves given stats and a histogram, in the order they are drawn (top levels first)
STATS_LEAVES = 200
#: bytes of in-memory arrays read for stats per view, and the largest leaf that gets stats
STATS_BYTES = 16_000_000
STATS_LEAF_BYTES = 4_000_000
#: bytes of file-backed (`LazyArray`) leaves read for stats per view: 0 never reads a file
LAZY_BYTES = 0

_STATS_KINDS = ("array", "jax")


@dataclass(slots=True)
class _Item:
    """A drawn row: a node (or a folded run) and what is drawn inside it."""

    row: Row
    depth: int
    kids: list[_Item] | None = None
    more: int = 0
    stats: Stats | None = None
    #: under a folded run: its rows are the first member's (no stats, they would mislead)
    folded: bool = False
    #: rows past `width`, drawn inside the closed `… N more` fold while the budget lasts
    extra: list[_Item] | None = None
    rest: list[Row] | None = None


def _where(t: Aggregates) -> str:
    """`cpu:0`, `8 devices: cpu 0-7 + host`, `file`: where the arrays live.

    Example:
        >>> import numpy as np
        >>> _where(totals({"a": np.zeros(3), "c": "relu"}))
        'host'
    """
    devices = [d for d in t.devices if not isinstance(d, str)]
    parts = []
    if len(devices) == 1:
        parts.append(f"{devices[0].platform}:{devices[0].id}")
    elif devices:
        parts.append(f"{len(devices)} devices: {devices_text(devices)}")
    if "host" in t.devices:
        parts.append("host")
    if "file" in t.devices:
        parts.append("file")
    return " + ".join(parts)


class _Plan:
    """Which rows to draw, breadth first, within the row budget."""

    def __init__(self, root: Node, depth: int, width: int, fold: bool) -> None:
        self.root = _Item(Row(root), 0)
        self.items: list[_Item] = [self.root]
        fold_budget = Budget(FOLD_NODES)
        queue = deque([self.root])
        self.rows = 1
        self.bytes = 0
        max_depth = depth + EXTRA_DEPTH
        while queue:
            it = queue.popleft()
            n = it.row.node
            try:
                if n.is_leaf:
                    continue
                total = n.num_children
            except Exception:  # unopenable: drawn as a leaf with its error
                continue
            if total == 0:
                continue
            if it.depth >= max_depth or self.full:
                it.more = total
                continue
            kids = n.child_range(0, min(total, max(width * 8, 256)))
            rows_ = fold_children(kids, fold_budget) if fold else [Row(k) for k in kids]
            visible = self._take(rows_[: max(width, 0)])
            folded = it.folded or it.row.count > 1
            it.kids = [_Item(r, it.depth + 1, folded=folded) for r in visible]
            it.more = total - sum(r.count for r in visible)
            if len(rows_) > len(visible):
                it.rest = rows_[len(visible) :]
            self.items.extend(it.kids)
            queue.extend(it.kids)
        self._add_extra()

    @property
    def full(self) -> bool:
        """Whether the row or byte budget is spent."""
        return self.rows >= ROWS or self.bytes >= ROW_BYTES

    def _take(self, rows: list[Row]) -> list[Row]:
        """The first of `rows` that fit in the budgets (a row costs ~250 B plus its path)."""
        out = []
        for r in rows:
            if self.full:
                break
            self.rows += 1
            self.bytes += 250 + 2 * min(len(str(r.node.path)), PATH_LIMIT)
            out.append(r)
        return out

    def _add_extra(self) -> None:
        """Rows past `width` go in the `… N more` fold (closed), with what budget is left."""
        for it in list(self.items):
            rest, it.rest = it.rest, None
            if not rest or self.full:
                continue
            folded = it.folded or it.row.count > 1
            it.extra = [_Item(r, it.depth + 1, folded=folded) for r in self._take(rest)]
            for e in it.extra:
                n = e.row.node
                try:
                    e.more = 0 if n.is_leaf else n.num_children  # drawn, not opened
                except Exception:  # unopenable: drawn as a leaf with its error
                    pass
            self.items.extend(it.extra)

    def add_stats(self) -> None:
        """Stats for the first drawn array leaves, within the leaf and byte budgets."""
        left, mem, lazy = STATS_LEAVES, STATS_BYTES, LAZY_BYTES
        for it in self.items:
            if left <= 0:
                return
            n = it.row.node
            if it.folded or it.row.count != 1 or n.error is not None or not n.is_leaf:
                continue
            info = n.info
            if info.shape is None or info.params <= 1 or info.is_key:
                continue
            if info.kind in _STATS_KINDS:
                if info.nbytes > STATS_LEAF_BYTES or info.nbytes > mem:
                    continue
                mem -= info.nbytes
            elif info.kind == "lazy":
                if info.nbytes > lazy:
                    continue
                lazy -= info.nbytes
            else:
                continue
            if is_key(n.obj):
                continue
            try:
                it.stats = stats(n.obj)
            except Exception:  # deleted buffers, object arrays: the row shows facts only
                continue
            left -= 1


def _row_label(it: _Item, budget: Budget) -> NodeLabel:
    return row_label(it.row, budget)


def _is_value(n: Node) -> bool:
    """A leaf that is not an array (`'relu'`, `3`, a function): drawn as a value, not a badge."""
    try:
        return n.error is None and n.is_leaf and n.info.shape is None
    except Exception:  # unopenable: the row shows its error
        return False


def _root_label(node: Node, t: Aggregates) -> str:
    """The header: the root's type and the tree's totals (or its size, past the budget)."""
    if node.is_leaf or node.error is not None:
        return label_html(label(node), str(node.path), value=_is_value(node))
    lbl = NodeLabel(key_text(node), inner_type(node), flags=label(node, Budget(0)).flags)
    head = label_html(lbl, str(node.path), root=True)
    if t.complete:
        return head + totals_html(
            leaves=t.leaves,
            arrays=t.arrays,
            params=t.params,
            nbytes=t.nbytes,
            dtypes=t.dtypes,
            where=_where(t),
        )
    return head + (
        f'<span class="tt-m">more than {TOTALS_LEAVES:,} leaves: '
        "not counted here (tt.summary counts them)</span>"
    )


def tree_html(
    node: Node, *, depth: int = 3, width: int = 20, stats: bool = True, fold: bool = True
) -> str:
    """The HTML fragment of a Node (see `treetool._display.to_html`)."""
    with no_gc():
        try:
            node.is_leaf  # noqa: B018 - opens the root; an error is shown on its row
        except Exception:
            pass
        t = totals(node.obj, node.is_leaf_fn, TOTALS_LEAVES) if node.error is None else Aggregates()
        plan = _Plan(node, depth, width, fold)
        if stats:
            plan.add_stats()
        budget = Budget(LABEL_LEAVES)
        labels: dict[int, str] = {}
        for it in sorted(plan.items[1:], key=lambda i: -i.depth):  # deepest first
            n = it.row.node
            text = label_html(_row_label(it, budget), str(n.path), value=_is_value(n))
            if it.stats is not None:
                text += stats_html(it.stats, n.info.dtype)
            labels[id(it)] = text + copy_button(str(n.path))
        head = _root_label(node, t)
        if plan.root.stats is not None:
            head += stats_html(plan.root.stats, node.info.dtype)
        labels[id(plan.root)] = head
        body = _emit(plan.root, labels, depth)
    return wrap("tree", body)


def _emit(root: _Item, labels: dict[int, str], depth: int) -> str:
    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        it = stack.pop()
        if isinstance(it, str):
            out.append(it)
            continue
        text = labels[id(it)]
        if not it.kids and not it.more:
            out.append(f'<div class="tt-l">{text}</div>')
            continue
        is_open = " open" if it.depth < depth else ""
        out.append(f'<details{is_open}><summary>{text}</summary><div class="tt-c">')
        more = f"… {it.more:,} more"
        if it.extra:  # the rows past `width`, in a fold that reads `… N more` when closed
            left = it.more - sum(e.row.count for e in it.extra)
            tail = f'<div class="tt-more">… {left:,} more</div>' if left else ""
            stack.append(f"{tail}</details></div></details>")
            stack.extend(reversed(it.extra))
            stack.append(f'<details class="tt-mf"><summary class="tt-more">{more}</summary>')
        else:
            stack.append(
                (f'<div class="tt-more">{more}</div>' if it.more else "") + "</div></details>"
            )
        if it.kids:
            stack.extend(reversed(it.kids))
    return "".join(out)

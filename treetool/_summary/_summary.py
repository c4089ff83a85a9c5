"""`summary(tree, depth)`: parameters, bytes and dtypes per subtree, with honest totals.

An array that appears at several paths (tied weights) is counted once in the totals and the
summary lists where it appears; sub-byte dtypes (int4) count their real bytes. A node whose
flatten raises is counted as an error in its row and listed with its path and message.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from treetool._leaves._arrays import LazyArray, LeafInfo, leaf_info
from treetool._leaves._dtypes import loaded_numpy
from treetool._lowering._drawn import RichDrawn
from treetool._public import set_module
from treetool._tree._model import IsLeaf, Unopened, no_gc, view
from treetool._tree._totals import Tally
from treetool._tree._views import _walk

__all__ = ["MAX_ROWS", "Summary", "SummaryRow", "summary"]

#: the most rows a summary lists; the subtrees past them are added up in one "N more" row (a
#: file of 200,000 empty containers made a table of 200,000 rows: 16 s and 600 MB)
MAX_ROWS = 1000


@dataclass
class SummaryRow:
    """Totals of one subtree."""

    path: str
    type: str
    leaves: int = 0
    params: int = 0
    nbytes: int = 0
    dtypes: collections.Counter = field(default_factory=collections.Counter)
    #: nodes in this subtree that could not be opened (their flatten raised)
    errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict; `errors` is there only when some node could not be opened."""
        d = {
            "path": self.path,
            "type": self.type,
            "leaves": self.leaves,
            "params": self.params,
            "bytes": self.nbytes,
            "dtypes": dict(self.dtypes),
        }
        if self.errors:
            d["errors"] = self.errors
        return d


@set_module("treetool")
@dataclass
class Summary(RichDrawn):
    """Per-subtree totals at one depth, plus totals over the whole tree.

    `tied` lists arrays found at more than one path: `(paths, params)`; they are counted once
    in `total`, but in every row they appear in. `errors` lists the nodes that could not be
    opened (their flatten raised): `(path, "Type: message")`; their leaves are not counted.
    """

    depth: int
    rows: list[SummaryRow]
    total: SummaryRow
    tied: list[tuple[list[str], int]]
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: the subtrees past the first `MAX_ROWS` rows, added up (its `path` says how many)
    more: SummaryRow | None = None
    #: how many subtrees `more` adds up (0: every subtree has its row)
    more_rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: `{"depth", "rows", "totals", "tied", "errors"}`, and `"more"`
        (the totals of the subtrees past the listed rows, with their count as `"rows"`) when
        the rows were capped."""
        d = {
            "depth": self.depth,
            "rows": [r.to_dict() for r in self.rows],
            "totals": self.total.to_dict(),
            "tied": [{"paths": p, "params": n} for p, n in self.tied],
            "errors": [{"path": p, "error": m} for p, m in self.errors],
        }
        if self.more is not None:
            d["more"] = {**self.more.to_dict(), "rows": self.more_rows}
        return d

    def __str__(self) -> str:
        return str(self.__treetool_lower__("text"))

    def __treetool_lower__(self, medium: str, **options: Any) -> Any:
        """Its own lowerings: `_summary/_rich.py` (rich, text) and `_summary/_html.py`."""
        if medium == "html":
            from treetool._summary._html import summary_html

            return summary_html(self)
        from rich.console import Group

        from treetool._summary._rich import summary_table

        if medium == "text":
            from treetool._lowering._plain import to_text

            return to_text(Group(*summary_table(self)))
        return Group(*summary_table(self))


@set_module("treetool")
def summary(
    tree: Any, depth: int = 1, is_leaf: IsLeaf = None, *, max_rows: int = MAX_ROWS
) -> Summary:
    """Parameters, bytes and dtypes of every subtree at `depth`, with totals.

    At most `max_rows` rows are listed; the subtrees past them are added up in `more` (one
    row, "N more"), and the totals count everything.

    Example:
        >>> import numpy as np
        >>> w = np.ones((4, 4), np.float32)
        >>> s = summary({"enc": {"w": w}, "dec": {"w": w, "b": np.zeros(4, np.float32)}})
        >>> [(r.path, r.params) for r in s.rows], s.total.params
        ([("['dec']", 20), ("['enc']", 16)], 20)
        >>> s.tied
        [(["['dec']['w']", "['enc']['w']"], 16)]
    """
    if depth < 0:
        raise ValueError(f"summary: depth must be >= 0, got {depth}")
    if max_rows < 1:
        raise ValueError(f"summary: max_rows must be >= 1, got {max_rows}")
    root = view(tree, is_leaf)
    rows: dict[str, SummaryRow] = {}
    order: list[str] = []
    stack = [(root, 0)]
    more_rows = 0
    while stack:  # the nodes at `depth` (and leaves or empty nodes above it), in tree order
        n, d = stack.pop()
        if d == depth or n.is_leaf or n.num_children == 0:
            if len(order) >= max_rows:  # past the cap: counted, neither named nor opened
                more_rows += 1
                continue
            key = str(n.path)
            rows[key] = SummaryRow(key, n.info.label if n.is_leaf else n.type_name)
            order.append(key)
            continue
        stack.extend((c, d + 1) for c in reversed(n.children))
    tally = Tally(paths=True)  # the totals row: every array once, tied ones with their paths
    add, error = tally.add, tally.error
    facts: dict[tuple[Any, Any, Any], LeafInfo] = {}  # numpy/lazy facts by type, shape, dtype
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    ndarray = np.ndarray if np is not None else LazyArray
    more = SummaryRow(f"... {more_rows:,} more", "") if more_rows else None
    find = rows.get
    with no_gc():
        for p, x in (px for chunk in _walk(tree, is_leaf, False, True) for px in chunk):
            row = find(str(p[:depth]) if len(p) >= depth else str(p)) or more
            assert row is not None  # (every leaf is in a listed row when none is left out)
            t = type(x)
            if t is Unopened:  # a node whose flatten raised: an error at its path
                row.errors += 1
                error(p, x.error)
                continue
            if t is ndarray or t is LazyArray:
                # a LazyArray's dtype name: its numpy dtype is made only when needed
                fk = (t, x.shape, x.dtype if t is not LazyArray else x.dtype_name)
                cached = facts.get(fk)
                info = cached if cached is not None else facts.setdefault(fk, leaf_info(x))
            else:
                info = leaf_info(x)
            row.leaves += 1
            add(x, info, p)
            if info.shape is None:
                continue
            row.params += info.params
            row.nbytes += info.nbytes
            row.dtypes[info.dtype] += 1
    agg = tally.finish()
    total = SummaryRow("total", root.type_name, agg.leaves, agg.params, agg.nbytes, agg.dtypes)
    total.errors = agg.errors
    rows_ = [rows[k] for k in order]
    return Summary(depth, rows_, total, tally.tied_paths(), agg.error_entries, more, more_rows)

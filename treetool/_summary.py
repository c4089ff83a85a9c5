"""`summary(tree, depth)`: parameters, bytes and dtypes per subtree, with honest totals.

An array that appears at several paths (tied weights) is counted once in the totals and the
summary lists where it appears; sub-byte dtypes (int4) count their real bytes.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from ._arrays import leaf_info
from ._model import IsLeaf, no_gc, view
from ._repr import ReprMixin
from ._views import iter_leaves_with_paths

__all__ = ["Summary", "SummaryRow", "summary"]


@dataclass
class SummaryRow:
    """Totals of one subtree."""

    path: str
    type: str
    leaves: int = 0
    params: int = 0
    nbytes: int = 0
    dtypes: collections.Counter = field(default_factory=collections.Counter)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "path": self.path,
            "type": self.type,
            "leaves": self.leaves,
            "params": self.params,
            "bytes": self.nbytes,
            "dtypes": dict(self.dtypes),
        }


@dataclass
class Summary(ReprMixin):
    """Per-subtree totals at one depth, plus totals over the whole tree.

    `tied` lists arrays found at more than one path: `(paths, params)`; they are counted once
    in `total`, but in every row they appear in.
    """

    depth: int
    rows: list[SummaryRow]
    total: SummaryRow
    tied: list[tuple[list[str], int]]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: `{"depth", "rows", "totals", "tied"}`."""
        return {
            "depth": self.depth,
            "rows": [r.to_dict() for r in self.rows],
            "totals": self.total.to_dict(),
            "tied": [{"paths": p, "params": n} for p, n in self.tied],
        }

    def __str__(self) -> str:
        from .render.plain import to_text

        return to_text(self)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from .render.summary import summary_table

        yield from summary_table(self)


def summary(tree: Any, depth: int = 1, is_leaf: IsLeaf = None) -> Summary:
    """Parameters, bytes and dtypes of every subtree at `depth`, with totals.

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
    root = view(tree, is_leaf)
    rows: dict[str, SummaryRow] = {}
    order: list[str] = []
    stack = [(root, 0)]
    while stack:  # the nodes at `depth` (and leaves or empty nodes above it), in tree order
        n, d = stack.pop()
        if d == depth or n.is_leaf or n.num_children == 0:
            key = str(n.path)
            rows[key] = SummaryRow(key, n.info.label if n.is_leaf else n.type_name)
            order.append(key)
            continue
        stack.extend((c, d + 1) for c in reversed(n.children))
    total = SummaryRow("total", root.type_name)
    by_id: dict[int, list[str]] = {}
    params_of: dict[int, int] = {}
    with no_gc():
        for p, x in iter_leaves_with_paths(tree, is_leaf):
            info = leaf_info(x)
            row = rows[str(p[:depth])] if len(p) >= depth else rows[str(p)]
            row.leaves += 1
            total.leaves += 1
            if info.shape is None:
                continue
            row.params += info.params
            row.nbytes += info.nbytes
            row.dtypes[info.dtype] += 1
            ids = by_id.setdefault(id(x), [])
            ids.append(str(p))
            if len(ids) == 1:
                params_of[id(x)] = info.params
                total.params += info.params
                total.nbytes += info.nbytes
                total.dtypes[info.dtype] += 1
    tied = [(paths, params_of[i]) for i, paths in by_id.items() if len(paths) > 1]
    return Summary(depth, [rows[k] for k in order], total, tied)

"""A flat, lazily built index of every leaf: the TUI's Leaves table and search, `treetool ls --search`.

The index is built once (the TUI: in a worker thread), with one iterative walk
(`iter_leaves_with_paths`, GC paused). It keeps columns, not objects: the path text, the leaf
itself, an interned label (`f32[128,784]`), dtype and device, and numpy arrays of params and
bytes, about 100 bytes per leaf. Nothing here imports Textual: the CLI uses it as the TUI does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from treetool._format import fmt_bytes, fmt_count
from treetool._leaves._arrays import LazyArray, LeafInfo, leaf_info
from treetool._tree._haystack import Cancelled, Haystack, build_haystack
from treetool._tree._model import Aggregates, Unopened, no_gc
from treetool._tree._totals import Tally
from treetool._tree._views import CycleDiverged, _walk, _walk_nodes

__all__ = ["COLUMNS", "Cancelled", "LeafIndex"]

#: (column id, title) of the Leaves table, in display order
COLUMNS: tuple[tuple[str, str], ...] = (
    ("path", "Path"),
    ("type", "Type"),
    ("dtype", "Dtype"),
    ("params", "Params"),
    ("nbytes", "Bytes"),
    ("device", "Device"),
)

_DIGITS = re.compile(r"(\d+)")


@dataclass
class LeafIndex:
    """Columns over every leaf of a tree, in jax's leaf order.

    Example:
        >>> import numpy as np
        >>> idx = LeafIndex.build({"b": np.zeros(3, np.int32), "a": [np.ones((2, 2))]})
        >>> idx.paths, idx.types, idx.params.tolist()
        (["['a'][0]", "['b']"], ['f64[2,2]', 'i32[3]'], [4, 3])
        >>> [idx.paths[i] for i in idx.order("params")]
        ["['b']", "['a'][0]"]
        >>> big = LeafIndex.build([0.0] * 1001)
        >>> [big.paths[i] for i in big.order("path")][:3], [big.paths[i] for i in big.order("path")][-1]
        (['[0]', '[1]', '[2]'], '[1000]')
    """

    paths: list[str]
    leaves: list[Any]
    types: list[str]
    dtypes: list[str]
    devices: list[str]
    params: np.ndarray
    nbytes: np.ndarray
    totals: Aggregates
    _rows: dict[str, int] | None = field(default=None, repr=False)
    _haystacks: dict[tuple[bool, bool], Haystack] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.paths)

    @classmethod
    def build(
        cls,
        tree: Any,
        is_leaf: Callable[[Any], bool] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> LeafIndex:
        """Walk `tree` once; `cancelled()` is polled every 4096 leaves (raises `Cancelled`).

        A cycle (a list that contains itself) is one leaf, a `Cycle`, at the repeated node; a
        node whose flatten raises is one leaf, an `Unopened` carrying its error, at its path.
        """
        pairs = (px for chunk in _walk(tree, is_leaf, False, True) for px in chunk)
        try:
            return cls._build(pairs, cancelled)
        except CycleDiverged:
            # a cycle in a wide node that the fast walk cannot take back: walk the Node model
            return cls._build(_careful_pairs(tree, is_leaf), cancelled)

    @classmethod
    def _build(
        cls, pairs: Iterator[tuple[Any, Any]], cancelled: Callable[[], bool] | None
    ) -> LeafIndex:
        paths: list[str] = []
        leaves: list[Any] = []
        types: list[str] = []
        dtypes: list[str] = []
        devices: list[str] = []
        params: list[int] = []
        nbytes: list[int] = []
        intern: dict[str, str] = {}
        facts: dict[tuple, LeafInfo] = {}
        tally = Tally()  # the one totals pass, fed as the columns are built
        add = tally.add
        with no_gc():
            for i, (path, leaf) in enumerate(pairs):
                if cancelled is not None and not i & 4095 and cancelled():
                    raise Cancelled
                t = type(leaf)
                if t is np.ndarray or t is LazyArray:
                    # leaf_info is metadata-only but not free (dtype.name); cache it per kind
                    k = (t, leaf.dtype, leaf.shape)
                    info = facts.get(k)
                    if info is None:
                        info = facts[k] = leaf_info(leaf)
                else:
                    info = leaf_info(leaf)
                if t is Unopened:  # a node whose flatten raised: a row, counted as an error
                    tally.error(path, leaf.error)
                else:
                    add(leaf, info)
                paths.append(str(path))
                leaves.append(leaf)
                label = info.label if info.shape is not None else info.type_name
                if t is Unopened:  # a node whose flatten raised: its error is its type cell
                    label = f"⚠ {leaf.error}"
                types.append(intern.setdefault(label, label))
                dt = info.dtype or ""
                dtypes.append(intern.setdefault(dt, dt))
                dev = info.device or ""
                devices.append(intern.setdefault(dev, dev))
                params.append(info.params)
                nbytes.append(info.nbytes)
        return cls(
            paths,
            leaves,
            types,
            dtypes,
            devices,
            np.asarray(params, dtype=np.int64),
            np.asarray(nbytes, dtype=np.int64),
            tally.finish(),
        )

    def column(self, name: str) -> list[str] | np.ndarray:
        """One column by id (see `COLUMNS`)."""
        columns: dict[str, list[str] | np.ndarray] = {
            "path": self.paths,
            "type": self.types,
            "dtype": self.dtypes,
            "params": self.params,
            "nbytes": self.nbytes,
            "device": self.devices,
        }
        return columns[name]

    def cell(self, name: str, row: int) -> str:
        """The text of one cell."""
        if name == "params":
            return fmt_count(int(self.params[row]))
        if name == "nbytes":
            return fmt_bytes(int(self.nbytes[row]))
        return self.column(name)[row]

    def order(self, name: str, reverse: bool = False, rows: np.ndarray | None = None) -> np.ndarray:
        """Row numbers sorted by a column (stable: ties keep leaf order), optionally a subset."""
        rows = np.arange(len(self), dtype=np.int64) if rows is None else rows
        col = self.column(name)
        if isinstance(col, np.ndarray):
            keys = col[rows]
            perm = np.argsort(-keys if reverse else keys, kind="stable")
            return rows[perm]
        key: Callable[[int], Any] = col.__getitem__
        if name == "path":  # numeric-aware: [2] before [1000]
            split, paths = _DIGITS.split, col
            key = lambda i: [int(t) if n & 1 else t for n, t in enumerate(split(paths[i]))]  # noqa: E731
        out = sorted(rows.tolist(), key=key, reverse=reverse)
        if reverse:  # keep ties in leaf order
            out = sorted(out, key=key, reverse=True)
        return np.asarray(out, dtype=np.int64)

    def row_of(self, path: str) -> int | None:
        """The row of leaf `path`, or None when it is not a leaf.

        One look-up does not build the map `rows_of` keeps (0.35 s for 1e6 leaves, on the UI
        thread when the Leaves tab jumps to a match): the paths are scanned in C (5 ms).

            >>> LeafIndex.build({"a": 1, "b": 2}).row_of("['b']")
            1
        """
        if self._rows is not None:
            return self._rows.get(path)
        try:
            return self.paths.index(path)
        except ValueError:
            return None

    def rows_of(self, paths: list[str]) -> np.ndarray:
        """The rows of these paths (paths that are not leaves are skipped), in leaf order."""
        if self._rows is None:
            self._rows = {p: i for i, p in enumerate(self.paths)}
        get = self._rows.get
        found = [r for r in map(get, paths) if r is not None]
        found.sort()
        return np.asarray(found, dtype=np.int64)

    def haystack(
        self, dotted: bool = True, fold: bool = True, cancelled: Callable[[], bool] | None = None
    ) -> Haystack:
        """The paths prepared for a text search (built once per form, in chunks: a worker
        calls it; `cancelled()` is polled between chunks)."""
        hay = self._haystacks.get((dotted, fold))
        if hay is None:
            hay = self._haystacks[(dotted, fold)] = build_haystack(
                self.paths, dotted, fold, cancelled
            )
        return hay

    def devices_count(self) -> dict[str, int]:
        """How many leaves sit on each device (`cpu:0`, `host`, `file`…)."""
        out: dict[str, int] = {}
        for d in self.devices:
            if d:
                out[d] = out.get(d, 0) + 1
        return out


def _careful_pairs(tree: Any, is_leaf: Callable[[Any], bool] | None) -> Any:
    """Every leaf through the Node model: a `Cycle` where a node is its own ancestor."""
    for chunk in _walk_nodes(tree, is_leaf, False, True):
        yield from chunk

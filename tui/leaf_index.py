"""A flat, lazily built index of every leaf, for the Leaves table and for search.

The index is built once, in a worker thread, with one iterative walk (`iter_leaves_with_paths`,
GC paused). It keeps columns, not objects: the path text, the leaf itself, an interned label
(`f32[128,784]`), dtype and device, and numpy arrays of params and bytes, about 100 bytes
per leaf. Nothing here imports Textual, so it is tested and benchmarked on its own.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from treetool._leaves._arrays import LazyArray, LeafInfo, leaf_info
from treetool._tree._model import Aggregates, Node, Unopened, no_gc
from treetool._tree._totals import Tally
from treetool._tree._views import CycleDiverged, _walk, _walk_nodes, find

__all__ = [
    "COLUMNS",
    "LeafIndex",
    "expression",
    "glob_query",
    "match_paths",
    "node_chain",
    "search",
]

#: (column id, title) of the Leaves table, in display order
COLUMNS: tuple[tuple[str, str], ...] = (
    ("path", "Path"),
    ("type", "Type"),
    ("dtype", "Dtype"),
    ("params", "Params"),
    ("nbytes", "Bytes"),
    ("device", "Device"),
)

_GLOB_CHARS = frozenset("*?")
_DIGITS = re.compile(r"(\d+)")


class Cancelled(Exception):
    """The walk was stopped because its worker was cancelled."""


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
    _haystacks: dict[tuple[bool, bool], _Haystack] = field(default_factory=dict, repr=False)

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
        from treetool._lowering._labels import fmt_bytes, fmt_count

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
    ) -> _Haystack:
        """The paths prepared for a text search (built once per form, in chunks: a worker
        calls it; `cancelled()` is polled between chunks)."""
        hay = self._haystacks.get((dotted, fold))
        if hay is None:
            hay = self._haystacks[(dotted, fold)] = _haystack(self.paths, dotted, fold, cancelled)
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


def is_glob(query: str) -> bool:
    """Whether a search query is a glob (`**.bias`, `layers[*]`) rather than a substring."""
    return any(c in _GLOB_CHARS for c in query)


def glob_query(query: str) -> str:
    """A search glob as `find` takes it: one without a leading `**` matches at any depth.

    Example:
        >>> glob_query("layers[*].weight"), glob_query("[0].w*"), glob_query("**.bias")
        ('**.layers[*].weight', '**[0].w*', '**.bias')
    """
    q = query.strip()
    if q.startswith("**"):
        return q
    return "**" + q if q[:1] in ("[", ".") else "**." + q


#: rows whose text is prepared (joined, translated, encoded) per call: each call is a few ms
#: of C work, so a search worker gives the GIL back to the UI thread between them
_CHUNK = 1 << 16
#: what separates rows in a haystack (a path holding it gets U+FFFD in its place)
_SEP = "\x00"


@dataclass
class _Haystack:
    """Every leaf path in one byte buffer (`_SEP` after each), in a search's form (dotted:
    `['a'][0]` -> `.a.0`; folded: lower case), with the offset where each row starts."""

    buf: np.ndarray
    starts: np.ndarray


def _haystack(
    paths: list[str], dotted: bool, fold: bool, cancelled: Callable[[], bool] | None
) -> _Haystack:
    parts: list[bytes] = []
    for start in range(0, len(paths), _CHUNK):
        if cancelled is not None and cancelled():
            raise Cancelled
        chunk = paths[start : start + _CHUNK]
        text = _SEP.join(chunk)
        if text.count(_SEP) != len(chunk) - 1:  # a path that holds the separator itself
            text = _SEP.join(p.replace(_SEP, "\ufffd") for p in chunk)
        if dotted:  # the same as str.translate(_DOTTED), at C speed
            text = text.replace("[", ".").replace("]", "").replace("'", "").replace('"', "")
        if fold:
            text = text.lower()
        parts.append(text.encode("utf-8", "surrogatepass") + _SEP.encode())
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
    ends = np.flatnonzero(buf == 0)
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    return _Haystack(buf, starts)


def _find_rows(hay: _Haystack, query: bytes, cancelled: Callable[[], bool] | None) -> np.ndarray:
    """Rows whose text holds `query`: the offsets of its first byte, narrowed byte by byte
    with numpy (which releases the GIL), then mapped to rows."""
    buf, m = hay.buf, len(query)
    if not m or m > len(buf):
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(buf[: len(buf) - m + 1] == query[0])
    for j in range(1, m):
        if not len(at):
            break
        if cancelled is not None and cancelled():
            raise Cancelled
        at = at[buf[at + j] == query[j]]
    rows = np.searchsorted(hay.starts, at, side="right") - 1
    if len(rows) < 2:
        return rows
    # offsets ascend, so rows do: a row found twice is next to itself (np.unique hashes: 2 s
    # for 1e6 rows)
    first = np.empty(len(rows), dtype=bool)
    first[0] = True
    np.not_equal(rows[1:], rows[:-1], out=first[1:])
    return rows[first]


def _text_rows(query: str, index: LeafIndex, cancelled: Callable[[], bool] | None) -> np.ndarray:
    """Rows whose path contains `query`: smart case, dotted form unless it has brackets."""
    dotted = not any(c in query for c in "[]'\"")
    fold = query == query.lower()
    q = query.lower() if fold else query
    if _SEP in q:
        return np.zeros(0, dtype=np.int64)
    hay = index.haystack(dotted, fold, cancelled)
    return _find_rows(hay, q.encode("utf-8", "surrogatepass"), cancelled)


def _paths_of(
    paths: list[str], rows: np.ndarray, cancelled: Callable[[], bool] | None
) -> list[str]:
    out: list[str] = []
    for start in range(0, len(rows), _CHUNK):
        if cancelled is not None and cancelled():
            raise Cancelled
        chunk = rows[start : start + _CHUNK].tolist()
        if len(chunk) == 1:
            out.append(paths[chunk[0]])
        else:  # one C call per chunk, not a bytecode loop per row
            out.extend(itemgetter(*chunk)(paths))
    return out


def search(
    query: str,
    index: LeafIndex | None,
    tree: Any,
    is_leaf: Callable[[Any], bool] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[list[str], np.ndarray | None]:
    """A search: the matching paths, and the matching rows of `index` (for its filter).

    A glob (`*`, `?`) matches nodes at any depth unless it starts with `**`; text matches
    leaf paths as a substring, case-insensitive unless the query has an upper-case letter,
    and a query without brackets also matches the dotted form (`group9.p9999` finds
    `['group9']['p9999']`). `cancelled()` is polled as it goes (raises `Cancelled`).

    Example:
        >>> t = {"enc": {"w": 1.0, "b": 2.0}, "dec": {"w": 3.0}}
        >>> idx = LeafIndex.build(t)
        >>> search("w", idx, t)[0], search("enc.b", idx, t)[1].tolist()
        (["['dec']['w']", "['enc']['w']"], [1])
    """
    query = query.strip()
    if not query:
        return [], None
    if is_glob(query):
        found = [str(p) for p, _ in find(tree, glob_query(query), is_leaf) if p]
        if index is None:
            return found, None
        if cancelled is not None and cancelled():
            raise Cancelled
        rows = index.rows_of(found)
        return found, rows
    if index is None:
        raise ValueError("a text search needs the leaf index")
    rows = _text_rows(query, index, cancelled)
    return _paths_of(index.paths, rows, cancelled), rows


def match_paths(
    query: str, index: LeafIndex | None, tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> list[str]:
    """Paths matching a search (see `search`).

    Example:
        >>> t = {"enc": {"w": 1.0, "b": 2.0}, "dec": {"w": 3.0}}
        >>> match_paths("*.w", None, t)
        ["['dec']['w']", "['enc']['w']"]
        >>> match_paths("ENC", LeafIndex.build(t), t), match_paths("enc']['b", LeafIndex.build(t), t)
        ([], ["['enc']['b']"])
    """
    return search(query, index, tree, is_leaf)[0]


_ROOT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def expression(root_name: str, path: str) -> str:
    """A Python expression for a path: `model.layers[0].weight`, `params['dense']['kernel']`.

    Example:
        >>> expression("model", ".layers[0].weight"), expression("state", "[0].mu['w']")
        ('model.layers[0].weight', "state[0].mu['w']")
    """
    name = root_name if _ROOT_NAME.match(root_name) else "tree"
    return name + path


def node_chain(root: Node, path: str) -> list[tuple[Node, int]]:
    """The nodes from the root's child down to the node at `path`, each with its index in
    its parent. Raises KeyError when no such node exists.

    Example:
        >>> from treetool._tree._model import view
        >>> chain = node_chain(view({"a": [1, {"b": 2}]}), "['a'][1]['b']")
        >>> [(str(n.path), i) for n, i in chain]
        [("['a']", 0), ("['a'][1]", 1), ("['a'][1]['b']", 0)]
    """
    out: list[tuple[Node, int]] = []
    node, rest = root, path
    while rest:
        idx = _child_index(node, rest)
        if idx is None:
            raise KeyError(
                f"no node at {path!r}: nothing matches {rest!r} under {str(node.path)!r}"
            )
        # one child only: a 100,000-wide list is not turned into 100,000 Nodes to find one
        node = node.child_range(idx, idx + 1)[0]
        rest = rest[len(str(node.key)) :]
        out.append((node, idx))
    return out


#: id(node) -> (a weak reference to the node, {key text: child index}), for the wide dicts
#: the cursor and search walk through (the last 64). The node is held weakly: a strong
#: reference kept its whole tree alive after the app had let it go (a snapshot of a file
#: being read, replaced by the next one; the tree of an app that has exited); an entry
#: leaves with its node.
_KEY_MAPS: dict[int, tuple[weakref.ref[Node], dict[str, int]]] = {}


def _key_map(node: Node) -> dict[str, int]:
    key = id(node)
    hit = _KEY_MAPS.get(key)
    if hit is not None and hit[0]() is node:
        return hit[1]
    keys = {str(k): i for i, (k, _) in enumerate(node._open())}
    if len(_KEY_MAPS) >= 64:
        _KEY_MAPS.pop(next(iter(_KEY_MAPS)), None)
    _KEY_MAPS[key] = (weakref.ref(node, lambda ref: _forget(key, ref)), keys)
    return keys


def _forget(key: int, ref: weakref.ref[Node]) -> None:
    """A node has gone: drop its key map (unless a newer node's took the place)."""
    hit = _KEY_MAPS.get(key)
    if hit is not None and hit[0] is ref:
        _KEY_MAPS.pop(key, None)


def _child_index(node: Node, rest: str) -> int | None:
    if node.is_leaf:
        return None
    if node.node_kind in ("list", "tuple") and rest.startswith("["):
        end = rest.find("]")
        if end > 1 and rest[1:end].isdigit():
            i = int(rest[1:end])
            return i if i < node.num_children else None
    if rest.startswith("['") and node.node_kind == "dict":
        # a dict key: look it up (the map is built once per node, then O(1) per step)
        keys = _key_map(node)
        end = rest.find("']", 2)
        while end != -1:
            hit = keys.get(rest[: end + 2])
            if hit is not None and (len(rest) == end + 2 or rest[end + 2] in ".["):
                return hit
            end = rest.find("']", end + 1)
    best, best_len = None, -1
    for i, child in enumerate(node.children):
        ks = str(child.key)
        n = len(ks)
        if n > best_len and rest.startswith(ks) and (len(rest) == n or rest[n] in ".["):
            best, best_len = i, n
    return best

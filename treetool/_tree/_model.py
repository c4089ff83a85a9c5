"""The Node model: one lazy view of any pytree, shared by every renderer.

`view(tree)` is O(1). A node's children are computed the first time they are asked for, one
level at a time; aggregates (leaf count, parameters, bytes, dtypes) are computed once per node
and cached. Nothing here reads array data.

What is a container is jax's decision; how each type opens one level is the node table's
(`_node_table`), which every walk and view shares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from treetool._errors import PathError, TreetoolError
from treetool._leaves._arrays import LeafInfo, leaf_info
from treetool._lowering._drawn import Drawn
from treetool._paths._path import Key, Path
from treetool._public import set_module
from treetool._text import safe
from treetool._tree._node_table import (
    CUSTOM,
    DICT,
    LEAF,
    LEAF_TYPES,
    LIST,
    NAMEDTUPLE,
    NONE,
    TUPLE,
    UNSORTABLE,
    NodeKind,
    children,
    jax_children,
    no_gc,
    node_data,
    register_flattener,
)
from treetool._tree._totals import Aggregates as Aggregates
from treetool._tree._totals import totals
from treetool._typetests import is_opaque

__all__ = [
    "CUSTOM",
    "DICT",
    "LEAF",
    "LEAF_TYPES",
    "LIST",
    "NAMEDTUPLE",
    "NONE",
    "TUPLE",
    "Aggregates",
    "Cycle",
    "Node",
    "NodeError",
    "UnsortableKeysError",
    "NodeKind",
    "Unopened",
    "children",
    "jax_children",
    "node_data",
    "register_flattener",
    "view",
]

IsLeaf = Callable[[Any], bool] | None


@set_module("treetool")
class NodeError(TreetoolError):
    """A node whose flatten raised, met by a view that cannot show it in place.

    The views that show a tree (`render`, HTML, `summary`, the TUI, `diff`) show such a node
    as an error entry at its path; the flat views (`leaves_with_path`, `flatten`,
    `to_flat_dict`), which cannot leave a leaf out, raise this instead, naming the path.
    For a dict whose keys cannot be sorted it is an `UnsortableKeysError`, also a
    `ValueError` (what jax raises there).

    Example:
        >>> str(NodeError("['bad']", "RuntimeError: flatten exploded"))
        "['bad']: cannot open this node: RuntimeError: flatten exploded"
    """

    def __new__(cls, path: str, message: str) -> NodeError:
        # a dict whose keys cannot be sorted: also the ValueError jax raises for it
        if cls is NodeError and UNSORTABLE in message:
            cls = UnsortableKeysError
        return super().__new__(cls, path, message)

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or '<root>'}: cannot open this node: {message}")
        self.path = path
        self.message = message


class UnsortableKeysError(NodeError, ValueError):
    """The `NodeError` of a dict whose keys cannot be sorted; a `ValueError` too, as jax's
    own error for such a dict is, so `except ValueError` catches it from every view.

    Example:
        >>> e = NodeError("['x']", "ValueError: the keys of this dict cannot be sorted, ...")
        >>> type(e).__name__, isinstance(e, ValueError), e.path
        ('UnsortableKeysError', True, "['x']")
    """


class Unopened:
    """A node that could not be opened (its flatten raised), in place of its leaves.

    The tolerant walks put one where the node was, so a count can list it as an error.

    Example:
        >>> Unopened("RuntimeError: flatten exploded")
        ⚠ RuntimeError: flatten exploded
    """

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error

    def __repr__(self) -> str:
        return safe(f"⚠ {self.error}")


class Cycle:
    """A reference back to an ancestor (a list that contains itself): shown as a leaf.

    The flat views put one in place of the repeated node, so no walk loops forever.

    Example:
        >>> from treetool._paths._path import Path
        >>> Cycle(Path.parse("['a']"))
        ↻ same object as ['a']
    """

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"↻ same object as {str(self.path) or '(root)'}"


#: ancestors checked for a cycle on every node; deeper, only at depths that are powers of 2
#: (a cycle is then found within twice its depth, and a 10,000-level chain stays linear)
_CYCLE_NEAR = 64


# --- aggregates ---------------------------------------------------------------------------


def aggregate(
    obj: Any,
    is_leaf: IsLeaf = None,
    limit: int | None = None,
    kids: list[tuple[Key, Any]] | None = None,
) -> Aggregates:
    """Totals over a subtree (`treetool._tree._totals.totals`: one walk, never raises for a broken
    node, which is an error entry); stop after `limit` leaves (complete=False).

    `kids` are `obj`'s children when the caller already has them.

    Example:
        >>> aggregate({"a": [1.0, 2.0]}).leaves
        2
    """
    return totals(obj, is_leaf, limit, kids)


_ROOT = Path()


# --- nodes --------------------------------------------------------------------------------


@set_module("treetool")
class Node(Drawn):
    """A lazily expanded view of one position in a pytree.

    Example:
        >>> import numpy as np
        >>> root = view({"w": np.zeros((2, 3), np.float32), "b": None})
        >>> [str(c.path) for c in root.children]
        ["['b']", "['w']"]
        >>> leaf = root.child("w")
        >>> leaf.is_leaf, leaf.info.label, root.aggregates.params
        (True, 'f32[2,3]', 6)
    """

    __slots__ = (
        "_agg",
        "_children",
        "_info",
        "_kids",
        "_path",
        "cycle",
        "depth",
        "error",
        "is_leaf_fn",
        "key",
        "kind",
        "obj",
        "parent",
        "__weakref__",  # a cache may hold a node weakly (the TUI's key maps of wide dicts)
    )

    def __init__(
        self,
        obj: Any,
        path: Path | None = _ROOT,
        key: Key | None = None,
        parent: Node | None = None,
        is_leaf: IsLeaf = None,
    ) -> None:
        self.obj = obj
        self._path = path
        self.key = key
        self.parent = parent
        self.is_leaf_fn = is_leaf
        self.kind: NodeKind | None = None
        self._kids: list[tuple[Key, Any]] | None = None
        self._children: list[Node] | None = None
        self._info: LeafInfo | None = None
        self._agg: Aggregates | None = None
        #: "Type: message" when opening this node failed; it is then shown as a leaf.
        self.error: str | None = None
        #: the ancestor this node is the same object as (a cycle); it is then a leaf
        self.cycle: Node | None = None
        self.depth: int = 0 if parent is None else parent.depth + 1

    def __repr__(self) -> str:
        return safe(f"Node({str(self.path) or '<root>'}, {self.type_name})")  # a file's names

    def __treetool_lower__(
        self,
        medium: str,
        *,
        depth: int = 3,
        width: int = 20,
        fold: bool = True,
        stats: bool = True,
        **_: Any,
    ) -> Any:
        """The tree below this node: `_tree/_rich.py` (rich, text) or `_tree/_html.py`."""
        if medium == "html":
            from treetool._tree._html import tree_html

            return tree_html(self, depth=depth, width=width, stats=stats, fold=fold)
        from treetool._tree._rich import TreeView

        tree = TreeView(self, depth=depth, width=width, fold=fold)
        if medium == "text":
            from treetool._lowering._plain import to_text

            return to_text(tree)
        return tree

    @property
    def path(self) -> Path:
        """The path from the root, built on first access (deep trees stay linear)."""
        if self._path is None:
            chain = []
            n: Node | None = self
            while n is not None and n._path is None:
                chain.append(n)
                n = n.parent
            base = n._path if n is not None else _ROOT
            for m in reversed(chain):
                base = m._path = base + m.key  # type: ignore[operator]
        return self._path  # type: ignore[return-value]

    def _open(self) -> list[tuple[Key, Any]]:
        if self._kids is None:
            try:
                with no_gc():  # a wide node makes many small objects: no GC passes meanwhile
                    self.kind, self._kids = children(self.obj, self.is_leaf_fn)
            except Exception as e:
                # A node that cannot be opened is shown as a leaf; renderers show the error.
                self.kind, self._kids = LEAF, []
                self.error = f"{type(e).__name__}: {e}"
            if self.kind != LEAF and self.parent is not None:
                d = self.depth
                if d <= _CYCLE_NEAR or not d & (d - 1):
                    self._check_cycle()
        return self._kids

    def _check_cycle(self) -> None:
        obj = self.obj
        n = self.parent
        while n is not None:
            if n.obj is obj:
                self.cycle, self.kind, self._kids = n, LEAF, []
                return
            n = n.parent

    @property
    def node_kind(self) -> NodeKind:
        """dict, list, tuple, namedtuple, none, custom or leaf."""
        self._open()
        return self.kind  # type: ignore[return-value]

    @property
    def is_leaf(self) -> bool:
        """True for a leaf of the pytree (None is an empty node, not a leaf)."""
        return self.node_kind == LEAF

    @property
    def type_name(self) -> str:
        """The class name of the object (`dict`, `Linear`, `ndarray`, `ArrayImpl`…)."""
        t = type(self.obj)
        name = getattr(t, "__name__", str(t))
        return getattr(self.obj, "class_name", name) if is_opaque(self.obj) else name

    @property
    def num_children(self) -> int:
        """How many children this node has (cheap: one level)."""
        return len(self._open())

    @property
    def children(self) -> list[Node]:
        """The child nodes, built on first access."""
        if self._children is None:
            fn = self.is_leaf_fn
            self._children = [Node(c, None, k, self, fn) for k, c in self._open()]
        return self._children

    def child_range(self, start: int, stop: int) -> list[Node]:
        """Children `start:stop` only; wide nodes are paged with this."""
        if self._children is not None:
            return self._children[start:stop]
        fn = self.is_leaf_fn
        return [Node(c, None, k, self, fn) for k, c in self._open()[start:stop]]

    def child(self, key: Any) -> Node:
        """The child under `key`: a Key, an index, a name or a dict key."""
        for c in self.children:
            if c.key == key or (
                not isinstance(key, Key) and c.key is not None and c.key.text == str(key)
            ):
                return c
        have = ", ".join(str(c.key) for c in self.children[:8])
        more = f" and {self.num_children - 8} more" if self.num_children > 8 else ""
        where = str(self.path) or "the root"
        raise PathError(f"{where} has no child {key!r}; it has {have or 'none'}{more}")

    @property
    def info(self) -> LeafInfo:
        """Leaf facts (metadata only); for inner nodes, kind is the node kind."""
        if self._info is None:
            self._info = (
                leaf_info(self.obj) if self.is_leaf else LeafInfo(self.node_kind, self.type_name)
            )
        return self._info

    @property
    def aggregates(self) -> Aggregates:
        """Totals over the subtree, computed once and cached."""
        if self._agg is None:
            self._agg = aggregate(self.obj, self.is_leaf_fn)
        return self._agg

    def aggregates_within(self, limit: int) -> Aggregates | None:
        """The aggregates if they are cached or the subtree has at most `limit` leaves."""
        if self._agg is not None:
            return self._agg
        if self._kids is not None and self.kind != LEAF:
            agg = aggregate(self.obj, self.is_leaf_fn, limit=limit, kids=self._kids)
        else:
            agg = aggregate(self.obj, self.is_leaf_fn, limit=limit)
        if agg.complete:
            self._agg = agg
            return agg
        return None

    def walk(self) -> Iterator[Node]:
        """Every node of the subtree, depth first, iteratively (deep trees are fine)."""
        stack = [self]
        while stack:
            n = stack.pop()
            yield n
            if not n.is_leaf:
                stack.extend(reversed(n.children))


@set_module("treetool")
def view(tree: Any, is_leaf: IsLeaf = None) -> Node:
    """The lazy Node model of a pytree, in O(1).

    Args:
        tree: any pytree: a model, an optimizer state, a loaded checkpoint.
        is_leaf: treat the nodes it returns True for as leaves (e.g. every equinox Module,
            for a layer-level view).

    Example:
        >>> root = view({"layers": [{"w": 1.0}, {"w": 2.0}]})
        >>> root.num_children, str(root.children[0].children[1].path)
        (1, "['layers'][1]")
    """
    return Node(tree, Path(), None, None, is_leaf)

"""Model surgery: the public names, and selections that edit.

`select(tree, sel)` picks nodes by path, glob, type or predicate (`_selectors`); a `Selection`
edits them all at once (`set`, `apply`, `delete`) and returns a new tree, rebuilding only the
spines of the picked nodes (`_edit`). `tree_at` is equinox's, with paths and globs
(`_tree_at`, `_recorder`); `insert`, `rename`, `partition` and `combine` live in
`_restructure`. Every public name of the surgery API is importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from treetool._errors import PathError, SelectionError
from treetool._leaves._arrays import leaf_info
from treetool._paths._path import GetAttrKey, Path
from treetool._public import set_module
from treetool._surgery._edit import DELETE, SET, Edit, Levels, apply_edits, kind_phrase, open_level
from treetool._surgery._restructure import combine, insert, partition, rename
from treetool._surgery._selectors import Selector, find_all, is_paths, on_path_and_node, predicate
from treetool._surgery._tree_at import tree_at
from treetool._tree._model import DICT, LEAF, LIST, TUPLE, IsLeaf
from treetool._tree._views import leaves_with_path

if TYPE_CHECKING:
    from treetool._diff._tree_diff import TreeDiff

__all__ = [
    "Selection",
    "combine",
    "delete",
    "insert",
    "partition",
    "rename",
    "select",
    "tree_at",
]

log = logging.getLogger("treetool")


@set_module("treetool")
def select(tree: Any, sel: Selector, is_leaf: IsLeaf = None) -> Selection:
    """Pick nodes of a tree, to look at or to edit them all at once.

    `sel` is a path (`"layers[0].weight"`), a glob (`"**.bias"`, `"layers[*].weight"`), a list
    of paths and globs, a type (every `eqx.nn.Linear`), or a predicate on `(path, node)` or on
    `node` alone. Globs, types and predicates pick the outermost matches: a picked node's own
    descendants are not tested (so edits never overlap).

    Example:
        >>> tree = {"enc": {"w": 1.0, "b": 0.0}, "dec": {"w": 2.0, "b": 0.0}}
        >>> sel = select(tree, "**.b")
        >>> [str(p) for p in sel.paths]
        ["['dec']['b']", "['enc']['b']"]
        >>> sel.set(0.5)
        {'enc': {'w': 1.0, 'b': 0.5}, 'dec': {'w': 2.0, 'b': 0.5}}
        >>> select(tree, lambda path, x: x == 2.0).get()
        [2.0]
    """
    levels: Levels = {}
    return Selection(tree, find_all(tree, sel, is_leaf, levels), is_leaf, levels)


@set_module("treetool")
class Selection:
    """Nodes picked from a tree by `select`; its edits return new trees.

    Iterating gives `(path, node)` pairs in depth-first (jax) order.

    Example:
        >>> tree = {"a": [1.0, 2.0], "b": {"c": 3.0}}
        >>> sel = select(tree, "a[*]")
        >>> len(sel), sel.get()
        (2, [1.0, 2.0])
        >>> sel.apply(lambda x: x * 10)
        {'a': [10.0, 20.0], 'b': {'c': 3.0}}
        >>> sel.where(lambda path, x: path[-1].idx == 0).delete()
        {'a': [2.0], 'b': {'c': 3.0}}
        >>> tree  # never changed
        {'a': [1.0, 2.0], 'b': {'c': 3.0}}
    """

    __slots__ = ("_items", "_levels", "is_leaf", "tree")

    def __init__(
        self,
        tree: Any,
        items: list[tuple[Path, Any]],
        is_leaf: IsLeaf = None,
        levels: Levels | None = None,
    ) -> None:
        self.tree = tree
        self.is_leaf = is_leaf
        self._items = items
        self._levels: Levels = {} if levels is None else levels

    # --- looking ------------------------------------------------------------------------
    @property
    def paths(self) -> list[Path]:
        """The paths of the picked nodes."""
        return [p for p, _ in self._items]

    def get(self) -> list[Any]:
        """The picked nodes, in the order of `paths`."""
        return [x for _, x in self._items]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[Path, Any]]:
        return iter(self._items)

    def __repr__(self) -> str:
        shown = ", ".join(str(p) or "<root>" for p in self.paths[:3])
        more = f", … ({len(self)} in all)" if len(self) > 3 else ""
        return f"Selection({len(self)} nodes: {shown}{more})"

    def assert_count_is(self, n: int) -> Selection:
        """Raise SelectionError unless exactly `n` nodes are picked; returns the selection."""
        if len(self) != n:
            raise SelectionError(f"expected {n} selected nodes, got {len(self)}: {self!r}")
        return self

    # --- narrowing ----------------------------------------------------------------------
    def where(self, sel: Selector) -> Selection:
        """Keep the picked nodes that also match `sel` (glob on the path, type or predicate).

        Example:
            >>> sel = select({"a": 1, "b": 2.0, "c": 3}, "*")
            >>> sel.where(int).paths
            [Path("['a']"), Path("['c']")]
        """
        if is_paths(sel):
            pats = [Path.parse(s) for s in ([sel] if isinstance(sel, (str, Path)) else sel)]
            keep = [(p, x) for p, x in self._items if any(q.match(p) for q in pats)]
        else:
            pred = predicate(sel)
            keep = [(p, x) for p, x in self._items if pred(p, x)]
        return Selection(self.tree, keep, self.is_leaf, self._levels)

    def at(self, sel: Selector) -> Selection:
        """Select inside each picked node; `sel` is relative to it (path, glob, type, predicate).

        Example:
            >>> tree = {"l1": {"w": 1, "b": 2}, "l2": {"w": 3, "b": 4}}
            >>> select(tree, "*").at("w").get()
            [1, 3]
        """
        out: list[tuple[Path, Any]] = []
        for base, node in self._items:
            try:
                found = find_all(node, sel, self.is_leaf, self._levels)
            except PathError as e:
                raise PathError(f"inside {str(base) or 'the root'}: {e}") from None
            out.extend((base + p, x) for p, x in found)
        return Selection(self.tree, out, self.is_leaf, self._levels)

    # --- editing ------------------------------------------------------------------------
    def set(self, value: Any, *, check: bool = True) -> Any:
        """A new tree with every picked node replaced by `value`.

        With `check=True` a replacement whose array leaves differ in shape or dtype from the
        old ones is refused (SelectionError naming the path and both shapes); a replacement
        with a different structure is allowed and logged (logger "treetool", INFO).
        """
        edits = [Edit(p, SET, value) for p in self.paths]
        return self._apply(edits, check)

    def apply(self, fn: Callable[..., Any], *, check: bool = True) -> Any:
        """A new tree with every picked node replaced by `fn(node)` or `fn(path, node)`.

        `check` as in `set`.
        """
        f = on_path_and_node(fn)
        edits = [Edit(p, SET, f(p, x)) for p, x in self._items]
        return self._apply(edits, check)

    def delete(self) -> Any:
        """A new tree without the picked nodes (they must be dict entries or list/tuple items).

        Fields of dataclasses, namedtuples and modules cannot be deleted: the error says
        so and shows how to replace them with None instead.
        """
        for p, _ in self._items:
            self._check_deletable(p)
        return apply_edits(
            self.tree, [Edit(p, DELETE) for p in self.paths], self.is_leaf, self._levels
        )

    def preview(
        self, edit: str | Callable[..., Any] = "set", *args: Any, **kwargs: Any
    ) -> TreeDiff:
        """The TreeDiff an edit would make: `preview("apply", fn)`, `preview("delete")`,
        `preview("set", value)` or `preview(lambda sel: ...)` (a function of the selection).

        Example:
            >>> sel = select({"w": 1.0, "b": 0.0}, "b")
            >>> [(c.path, c.kind) for c in sel.preview("set", 0.5).changes]
            [("['b']", 'value')]
        """
        from treetool._diff._tree_diff import diff

        if isinstance(edit, str):
            if edit not in ("set", "apply", "delete"):
                raise ValueError(f"preview: edit must be 'set', 'apply' or 'delete', got {edit!r}")
            new = getattr(self, edit)(*args, **kwargs)
        else:
            new = edit(self, *args, **kwargs)
        return diff(self.tree, new, is_leaf=self.is_leaf)

    def _apply(self, edits: list[Edit], check: bool) -> Any:
        on_replace = _checker(self.is_leaf) if check else None
        return apply_edits(self.tree, edits, self.is_leaf, self._levels, on_replace)

    def _check_deletable(self, path: Path) -> None:
        if not path:
            raise SelectionError("cannot delete the root of the tree")
        parent = self.tree
        for k in path.parent:
            parent = open_level(parent, self.is_leaf, self._levels).child(k)
        lv = open_level(parent, self.is_leaf, self._levels)
        if lv.kind in (DICT, LIST, TUPLE):
            return
        what = "a field" if type(path[-1]) is GetAttrKey else "a child (its structure is fixed)"
        raise SelectionError(
            f"cannot delete {path}: {kind_phrase(parent, lv.kind)} cannot lose {what}. "
            f"Replace it with None instead: tt.tree_at({str(path)!r}, tree, None)"
        )


def _checker(is_leaf: IsLeaf) -> Callable[[Path, Any, Any], None]:
    def check(path: Path, old: Any, new: Any) -> None:
        if old is new:
            return
        if open_level(old, is_leaf).kind == LEAF and open_level(new, is_leaf).kind == LEAF:
            _check_leaf(path, old, new)
            return
        # Same leaf paths (static fields may differ): the leaves are checked one by one.
        olds, news = leaves_with_path(old, is_leaf), leaves_with_path(new, is_leaf)
        if type(old) is not type(new) or [p for p, _ in olds] != [p for p, _ in news]:
            log.info(
                "%s: replaced %s with %s of a different structure",
                str(path) or "<root>",
                type(old).__name__,
                type(new).__name__,
            )
            return
        for (sub, a), (_, b) in zip(olds, news):
            _check_leaf(path + sub, a, b)

    return check


def _check_leaf(path: Path, old: Any, new: Any) -> None:
    a = leaf_info(old)
    if a.shape is None:
        return
    b = leaf_info(new)
    if (a.shape, a.dtype) != (b.shape, b.dtype):
        raise SelectionError(
            f"{str(path) or '<root>'}: the new value is {b.label} but the old one is {a.label}; "
            "pass check=False to allow a change of shape or dtype"
        )


@set_module("treetool")
def delete(tree: Any, where: Selector, is_leaf: IsLeaf = None) -> Any:
    """A new tree without the nodes `where` names (a path, a glob, a list, a type, a predicate).

    Dict entries and list/tuple items can be deleted; a glob, type or predicate that picks
    nothing is an error.

    Example:
        >>> delete({"layers": [1, 2, 3], "head": 4}, ["layers[-1]", "head"])
        {'layers': [1, 2]}
    """
    sel = select(tree, where, is_leaf)
    if not len(sel):
        raise SelectionError(f"delete: {where!r} picks nothing in the tree")
    return sel.delete()

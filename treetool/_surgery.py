"""Model surgery: selections that edit, structural edits tree_at cannot express, partition.

`select(tree, sel)` picks nodes by path, glob, type or predicate; a `Selection` edits them all
at once (`set`, `apply`, `delete`) and returns a new tree, rebuilding only the spines of the
picked nodes. `insert`, `rename` and `delete` change the structure of dicts, lists and tuples.
`partition` and `combine` split a tree in two and put it back together (freeze a part of a
model). `tree_at` is equinox's, with paths and globs (see `_tree_at`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._arrays import leaf_info
from ._edit import (
    DELETE,
    INSERT,
    RENAME,
    SET,
    Edit,
    Levels,
    apply_edits,
    kind_phrase,
    locate,
    open_level,
)
from ._errors import PathError, SelectionError, StructureMismatch
from ._model import DICT, LEAF, LIST, TUPLE, IsLeaf, children, no_gc
from ._paths import DictKey, GetAttrKey, Path, SequenceKey
from ._tree_at import outermost, tree_at
from ._views import find, leaves_with_paths

if TYPE_CHECKING:
    from ._diff import TreeDiff

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

Selector = str | Path | type | tuple | Callable[..., bool] | Sequence[str | Path]


def _two_args(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes `(path, node)` rather than `(node)`."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) >= 2 or (
        len(positional) < 2 and any(p.kind is p.VAR_POSITIONAL for p in params)
    )


def _on_path_and_node(fn: Callable[..., Any]) -> Callable[[Path, Any], Any]:
    return fn if _two_args(fn) else (lambda _p, x: fn(x))


def _is_paths(sel: Any) -> bool:
    return isinstance(sel, (str, Path)) or (
        isinstance(sel, list) and all(isinstance(s, (str, Path)) for s in sel)
    )


def _predicate(sel: Any) -> Callable[[Path, Any], bool]:
    if isinstance(sel, type) or (
        isinstance(sel, tuple) and sel and all(isinstance(t, type) for t in sel)
    ):
        return lambda _p, x: isinstance(x, sel)
    if callable(sel):
        return _on_path_and_node(sel)
    raise TypeError(
        "select: expected a path or glob string, a list of them, a type, or a predicate on "
        f"(path, node); got {type(sel).__name__}"
    )


def _walk_select(
    tree: Any, pred: Callable[[Path, Any], bool], is_leaf: IsLeaf, leaves_only: bool = False
) -> list[tuple[Path, Any]]:
    """Outermost nodes (or leaves) for which `pred(path, node)` holds, in depth-first order."""
    out: list[tuple[Path, Any]] = []
    stack: list[tuple[Any, Path]] = [(tree, Path())]
    with no_gc():
        while stack:
            obj, path = stack.pop()
            kind, kids = children(obj, is_leaf)
            if (not leaves_only or kind == LEAF) and pred(path, obj):
                out.append((path, obj))
                continue
            stack.extend((c, path + k) for k, c in reversed(kids))
    return out


def _find_all(tree: Any, sel: Any, is_leaf: IsLeaf, levels: Levels) -> list[tuple[Path, Any]]:
    if _is_paths(sel):
        items = [sel] if isinstance(sel, (str, Path)) else sel
        found: list[tuple[Path, Any]] = []
        for item in items:
            q = Path.parse(item)
            if q.is_pattern:
                found.extend(outermost(find(tree, q, is_leaf)))
            else:
                found.append(locate(tree, q, is_leaf, levels))
        return found
    return _walk_select(tree, _predicate(sel), is_leaf)


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
    return Selection(tree, _find_all(tree, sel, is_leaf, levels), is_leaf, levels)


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
        if _is_paths(sel):
            pats = [Path.parse(s) for s in ([sel] if isinstance(sel, (str, Path)) else sel)]
            keep = [(p, x) for p, x in self._items if any(q.match(p) for q in pats)]
        else:
            pred = _predicate(sel)
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
                found = _find_all(node, sel, self.is_leaf, self._levels)
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
        f = _on_path_and_node(fn)
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
        from ._diff import diff

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
        olds, news = leaves_with_paths(old, is_leaf), leaves_with_paths(new, is_leaf)
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


# --- structural edits ---------------------------------------------------------------------


def insert(tree: Any, path: str | Path, value: Any, is_leaf: IsLeaf = None) -> Any:
    """A new tree with `value` added at `path`: a new dict key, or a list/tuple item at an index.

    In a list or a tuple the items from that index on move one place up; an index equal to the
    length appends, and negative indices count from the end as in `list.insert`.

    Raises:
        SelectionError: the dict key exists already, the index is out of range, or the parent
            is a node with a fixed set of fields (a module, a dataclass, a namedtuple).

    Example:
        >>> insert({"a": [1, 2]}, "a[1]", 9)
        {'a': [1, 9, 2]}
        >>> insert({"a": [1, 2]}, "b", None)
        {'a': [1, 2], 'b': None}
    """
    levels: Levels = {}
    query = Path.parse(path)
    if query.is_pattern or not query:
        raise SelectionError(f"insert: expected the path of a new node, got {str(path)!r}")
    base, parent = locate(tree, query.parent, is_leaf, levels)
    lv = open_level(parent, is_leaf, levels)
    last = query[-1]
    where = str(base) or "the root"
    if lv.kind == DICT:
        key = (
            last.key
            if type(last) is DictKey
            else last.idx
            if type(last) is SequenceKey
            else last.text
        )
        if lv.has(DictKey(key)):
            raise SelectionError(
                f"insert: {base + DictKey(key)} exists already; replace it with "
                f"tt.tree_at({str(base + DictKey(key))!r}, tree, value)"
            )
        edit = Edit(base + DictKey(key), INSERT, value)
    elif lv.kind in (LIST, TUPLE):
        try:
            i = last.idx if type(last) is SequenceKey else int(last.text)
        except ValueError:
            raise SelectionError(
                f"insert: {where} is a {lv.kind}; expected an index, got {str(last)!r}"
            ) from None
        n = len(parent)
        if i < 0:
            i = max(0, n + i)
        if i > n:
            raise SelectionError(
                f"insert: index {i} is out of range for {where}, a {lv.kind} of length {n}"
            )
        edit = Edit(base + SequenceKey(i), INSERT, value)
    else:
        raise SelectionError(
            f"insert: {where} is {kind_phrase(parent, lv.kind)}, whose fields are fixed; insert "
            "adds dict keys and list/tuple items. Build a new node and put it in place with "
            f"tt.tree_at({str(base)!r}, tree, new_node)"
        )
    return apply_edits(tree, [edit], is_leaf, levels)


def rename(tree: Any, path: str | Path, new_key: Any, is_leaf: IsLeaf = None) -> Any:
    """A new tree where the dict entry at `path` has the key `new_key` (same place, same value).

    Raises:
        SelectionError: the node is not a dict entry, or `new_key` exists already.

    Example:
        >>> rename({"params": {"Dense_0": 1, "Dense_1": 2}}, "params.Dense_1", "head")
        {'params': {'Dense_0': 1, 'head': 2}}
    """
    levels: Levels = {}
    exact, _ = locate(tree, path, is_leaf, levels)
    if not exact:
        raise SelectionError("rename: the root has no key to rename")
    base = exact.parent
    parent = tree
    for k in base:
        parent = open_level(parent, is_leaf, levels).child(k)
    lv = open_level(parent, is_leaf, levels)
    if lv.kind != DICT:
        what = kind_phrase(parent, lv.kind)
        raise SelectionError(
            f"rename: {exact} is not a dict entry: {str(base) or 'the root'} is {what}, whose "
            "field names are fixed; only dict keys can be renamed"
        )
    if exact[-1] != DictKey(new_key) and lv.has(DictKey(new_key)):
        raise SelectionError(f"rename: {base + DictKey(new_key)} exists already")
    return apply_edits(tree, [Edit(exact, RENAME, new_key)], is_leaf, levels)


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


def partition(
    tree: Any, sel: Selector, is_leaf: IsLeaf = None, replace: Any = None
) -> tuple[Any, Any]:
    """Split a tree in two of the same structure: `(selected, rest)`; `combine` undoes it.

    Leaves outside the selection are `replace` (None) in `selected`, and the other way round
    in `rest`. `sel` picks subtrees as in `select` (path, glob, type); a predicate is applied to
    the leaves, as `eqx.partition` does with a filter function.

    Example:
        >>> tree = {"adapter": {"a": 1.0}, "base": {"w": 2.0}}
        >>> trainable, frozen = partition(tree, "adapter")
        >>> trainable, frozen
        ({'adapter': {'a': 1.0}, 'base': {'w': None}}, {'adapter': {'a': None}, 'base': {'w': 2.0}})
        >>> combine(trainable, frozen) == tree
        True
    """
    import jax

    tu = jax.tree_util
    levels: Levels = {}
    if _is_paths(sel) or isinstance(sel, (type, tuple)):
        found = _find_all(tree, sel, is_leaf, levels)
    else:
        found = _walk_select(tree, _predicate(sel), is_leaf, leaves_only=True)
    blank = tu.tree_map(lambda _: replace, tree, is_leaf=is_leaf)
    rest = apply_edits(
        tree,
        [Edit(p, SET, tu.tree_map(lambda _: replace, x, is_leaf=is_leaf)) for p, x in found],
        is_leaf,
        levels,
    )
    selected = apply_edits(blank, [Edit(p, SET, x) for p, x in found], is_leaf)
    return selected, rest


def combine(*trees: Any, is_leaf: IsLeaf = None) -> Any:
    """Merge trees of the same structure leaf by leaf: the first leaf that is not None wins.

    The inverse of `partition` (and `eqx.combine`).

    Raises:
        StructureMismatch: the trees do not have the same structure.

    Example:
        >>> combine({"a": 1, "b": None}, {"a": None, "b": 2})
        {'a': 1, 'b': 2}
    """
    import jax

    if not trees:
        raise TypeError("combine: expected at least one tree")

    def first(*xs: Any) -> Any:
        for x in xs:
            if x is not None:
                return x
        return None

    def leaf(x: Any) -> bool:
        return x is None or (is_leaf is not None and is_leaf(x))

    try:
        return jax.tree_util.tree_map(first, *trees, is_leaf=leaf)
    except ValueError as e:
        raise StructureMismatch(
            f"combine: the trees do not have the same structure ({str(e).splitlines()[0]})"
        ) from None

"""Structural edits that `tree_at` cannot express: insert, rename; partition and combine.

`insert` adds a dict key or a list/tuple item (shifting the rest), `rename` changes a dict key
in place; both rebuild only the spine to the edited container. `partition` splits a tree in two
of the same structure (to freeze a part of a model) and `combine` puts it back together.
"""

from __future__ import annotations

from typing import Any

from treetool._errors import SelectionError, StructureMismatch
from treetool._paths._path import DictKey, Path, SequenceKey
from treetool._public import set_module
from treetool._surgery._edit import (
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
from treetool._surgery._selectors import Selector, find_all, is_paths, predicate, walk_select
from treetool._tree._model import DICT, LIST, TUPLE, IsLeaf

__all__ = ["combine", "insert", "partition", "rename"]


@set_module("treetool")
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


@set_module("treetool")
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


@set_module("treetool")
def partition(
    tree: Any, sel: Selector, replace: Any = None, is_leaf: IsLeaf = None
) -> tuple[Any, Any]:
    """Split a tree in two of the same structure: `(selected, rest)`; `combine` undoes it.

    Leaves outside the selection are `replace` (None) in `selected`, and the other way round
    in `rest`. `sel` picks subtrees as in `select` (path, glob, type); a predicate is applied to
    the leaves, as `eqx.partition` does with a filter function. The arguments are
    `eqx.partition`'s, in its order: `partition(tree, sel, replace, is_leaf)`.

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
    if is_paths(sel) or isinstance(sel, (type, tuple)):
        found = find_all(tree, sel, is_leaf, levels)
    else:
        found = walk_select(tree, predicate(sel), is_leaf, leaves_only=True)
    blank = tu.tree_map(lambda _: replace, tree, is_leaf=is_leaf)
    rest = apply_edits(
        tree,
        [Edit(p, SET, tu.tree_map(lambda _: replace, x, is_leaf=is_leaf)) for p, x in found],
        is_leaf,
        levels,
    )
    selected = apply_edits(blank, [Edit(p, SET, x) for p, x in found], is_leaf)
    return selected, rest


@set_module("treetool")
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

"""`tree_at`: equinox's `tree_at`, plus path strings and globs, editing only the spines.

With a callable `where` the results and the errors are equinox's. The function is first
replayed on a recording proxy (`_recorder`) to learn the paths of the nodes it picks; only a
function that does more than walk the structure goes through the general method, which
flattens the whole tree the way `eqx.tree_at` does. Either way, the result is rebuilt along the
spines of the picked nodes only (`_edit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from treetool._errors import PathError, SelectionError
from treetool._paths._path import Path
from treetool._public import set_module
from treetool._surgery._edit import FN, SET, Edit, Levels, OverlapError, apply_edits, locate
from treetool._surgery._recorder import Fallback, record
from treetool._tree._model import IsLeaf, no_gc
from treetool._tree._views import find

__all__ = ["MISSING", "tree_at"]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


#: the default of `replace` and `replace_fn`: "not given"
MISSING: Any = _Missing()

_NONE_HINT = (
    "`where` does not uniquely identify a single element of `pytree`. This usually occurs "
    "when trying to replace a `None` value:\n\n"
    "  >>> tt.tree_at(lambda t: t[0], (None, None, 1), True)\n\n"
    "for which the fix is to specify that `None`s should be treated as leaves:\n\n"
    "  >>> tt.tree_at(lambda t: t[0], (None, None, 1), True,\n"
    "  ...           is_leaf=lambda x: x is None)\n\n"
    "or to name the node by its path, which is never ambiguous:\n\n"
    "  >>> tt.tree_at('[0]', (None, None, 1), True)"
)
_NOT_IN_TREE = "`where` does not specify an element or elements of `pytree`."
_ONE_OF = "Precisely one of `replace` and `replace_fn` must be specified."
_LENGTHS = "`where` must return a sequence of leaves of the same length as `replace`."
_LEAF_DEPENDENT = (
    "`where` must use just the PyTree structure of `pytree`. `where` must not depend on the "
    "leaves in `pytree`."
)


def _is_path_like(where: Any) -> bool:
    return isinstance(where, (str, Path))


@set_module("treetool")
def tree_at(
    where: Callable[[Any], Any] | str | Path | Sequence[str | Path],
    pytree: Any,
    replace: Any = MISSING,
    replace_fn: Callable[[Any], Any] = MISSING,
    is_leaf: IsLeaf = None,
) -> Any:
    """Replace nodes of a pytree; a new tree is returned and the input is left unchanged.

    With a callable `where` this is `equinox.tree_at`: same results, same errors. `where`
    may also name the nodes by path: a path string (`".layers[0].weight"`, `"layers.0.weight"`),
    a glob (`"**.bias"`: every match gets `replace`), or a list of paths and globs (then
    `replace` is a sequence with one entry per item). Only the spine from the root to each
    replaced node is rebuilt, so one replacement costs microseconds on any size of tree.

    Args:
        where: a function `tree -> node` or `tree -> sequence of nodes`, a path, a glob, or a
            list of paths/globs.
        pytree: the tree to edit.
        replace: the new node, or a sequence of new nodes when `where` gives several.
        replace_fn: a function `node -> new node`, instead of `replace`.
        is_leaf: as in `jax.tree_util`; `is_leaf=lambda x: x is None` lets a callable
            `where` pick `None` nodes.

    Raises:
        SelectionError: (a ValueError) the messages of `eqx.tree_at` for callable `where`;
            a glob that matches nothing, overlapping paths.
        PathError: (a KeyError) a path that is not in the tree, with the nearest ones; a
            callable `where` that raises KeyError or IndexError on the tree (equinox's message;
            an IndexError stays one too).

    Example:
        >>> tree = {"layers": [{"w": 1.0, "b": 0.0}, {"w": 2.0, "b": 0.0}]}
        >>> tree_at(lambda t: t["layers"][1]["w"], tree, 5.0)["layers"][1]
        {'w': 5.0, 'b': 0.0}
        >>> tree_at("layers[0].w", tree, replace_fn=lambda w: w * 10)["layers"][0]
        {'w': 10.0, 'b': 0.0}
        >>> tree_at("**.b", tree, 1.0)
        {'layers': [{'w': 1.0, 'b': 1.0}, {'w': 2.0, 'b': 1.0}]}
    """
    levels: Levels = {}
    if _is_path_like(where) or (
        isinstance(where, (list, tuple)) and where and all(_is_path_like(w) for w in where)
    ):
        return _tree_at_paths(where, pytree, replace, replace_fn, is_leaf, levels)
    if not callable(where):
        raise TypeError(
            f"tree_at: `where` must be a function, a path string or a list of paths, "
            f"got {type(where).__name__}"
        )
    try:
        with no_gc():
            picked = record(where, pytree, is_leaf, levels)
    except Fallback:
        return _tree_at_general(where, pytree, replace, replace_fn, is_leaf)
    if isinstance(picked, Path):
        paths = [picked]
        if replace is not MISSING:
            replace = (replace,)
    else:
        paths = picked
    edits = _edits(paths, replace, replace_fn)
    try:
        return apply_edits(pytree, edits, is_leaf, levels)
    except OverlapError:
        # equinox never reaches a node inside another picked node
        raise SelectionError(_NOT_IN_TREE) from None


class _PastTheEnd(PathError, IndexError):
    """A callable `where` indexed past the end of a sequence: a `PathError` that is still
    the `IndexError` equinox raises, with its message."""


def _edits(paths: list[Path], replace: Any, replace_fn: Any) -> list[Edit]:
    if replace is MISSING:
        if replace_fn is MISSING:
            raise SelectionError(_ONE_OF)
        return [Edit(p, FN, replace_fn) for p in paths]
    if replace_fn is not MISSING:
        raise SelectionError(_ONE_OF)
    if len(paths) != len(replace):
        raise SelectionError(_LENGTHS)
    return [Edit(p, SET, r) for p, r in zip(paths, replace)]


def _tree_at_paths(
    where: Any, pytree: Any, replace: Any, replace_fn: Any, is_leaf: IsLeaf, levels: Levels
) -> Any:
    if (replace is MISSING) == (replace_fn is MISSING):
        raise SelectionError(_ONE_OF)
    single = _is_path_like(where)
    items = [where] if single else list(where)
    if (
        replace is not MISSING
        and not single
        and (not isinstance(replace, Sequence) or len(replace) != len(items))
    ):
        n = len(replace) if isinstance(replace, Sequence) else "not a sequence"
        raise SelectionError(
            f"tree_at: `where` lists {len(items)} paths, so `replace` must be a sequence "
            f"of {len(items)} values (one per path); got {n}"
        )
    edits: list[Edit] = []
    for i, item in enumerate(items):
        value = replace if single else (replace[i] if replace is not MISSING else MISSING)
        for p in expand(pytree, item, is_leaf, levels):
            if replace is MISSING:
                edits.append(Edit(p, FN, replace_fn))
            else:
                edits.append(Edit(p, SET, value))
    return apply_edits(pytree, edits, is_leaf, levels)


def expand(tree: Any, item: str | Path, is_leaf: IsLeaf, levels: Levels) -> list[Path]:
    """The exact paths a path or a glob names (outermost matches of a glob)."""
    query = Path.parse(item)
    if not query.is_pattern:
        return [locate(tree, query, is_leaf, levels)[0]]
    found = outermost(find(tree, query, is_leaf))
    if not found:
        raise SelectionError(f"the glob {str(item)!r} matches nothing in the tree")
    return [p for p, _ in found]


def outermost(found: list[tuple[Path, Any]]) -> list[tuple[Path, Any]]:
    """Drop the matches inside other matches (`found` is in depth-first order)."""
    out: list[tuple[Path, Any]] = []
    last: tuple | None = None
    for p, x in found:
        keys = p.keys
        if last is not None and keys[: len(last)] == last:
            continue
        out.append((p, x))
        last = keys
    return out


# --- the general method: what eqx.tree_at does, for `where` functions we cannot replay ------


class _Boxed:
    """A leaf in a box of its own: a unique object, so that it can be found by identity."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _EmptyTuple(tuple):
    """An empty tuple that is not the `()` singleton (so each one has its own identity)."""

    __slots__ = ()


def _unbox(x: Any) -> Any:
    if type(x) is not _Boxed:
        raise TypeError(f"Operation undefined, {x} is not a leaf of the pytree.")
    return x.value


def _is_plain_empty_tuple(x: Any) -> bool:
    return isinstance(x, tuple) and not hasattr(x, "_fields") and x == ()


def _tree_at_general(
    where: Callable[[Any], Any], pytree: Any, replace: Any, replace_fn: Any, is_leaf: IsLeaf
) -> Any:
    import jax

    tu = jax.tree_util
    # A copy in which every inner node is a fresh object, and every empty tuple a distinct one.
    fresh = tu.tree_map(
        lambda x: _EmptyTuple() if _is_plain_empty_tuple(x) else x,
        pytree,
        is_leaf=_is_plain_empty_tuple,
    )
    try:
        plain = where(fresh)
    except KeyError as e:  # `where` looks up what is not there: equinox's message, a PathError
        raise PathError(str(e)) from e
    except IndexError as e:
        raise _PastTheEnd(str(e)) from e
    boxed_tree = tu.tree_map(_Boxed, fresh, is_leaf=is_leaf)
    try:
        picked = where(boxed_tree)
    except Exception as e:
        e.add_note(
            "(tt.tree_at calls `where` on a copy of the tree whose leaves are boxed, as "
            "eqx.tree_at does: `where` may pick nodes, not compute with leaves)"
        )
        raise
    plain_leaves, plain_def = tu.tree_flatten(plain, is_leaf=is_leaf)
    boxed_leaves, boxed_def = tu.tree_flatten(picked)
    boxed_leaves = [_unbox(x) for x in boxed_leaves]
    if (
        cast(Any, plain_def) != boxed_def  # mypy cannot resolve jaxlib's PyTreeDef
        or len(plain_leaves) != len(boxed_leaves)
        or any(a is not b for a, b in zip(plain_leaves, boxed_leaves))
    ):
        raise SelectionError(_LEAF_DEPENDENT)
    del plain, plain_leaves, boxed_leaves

    found = [False]

    def _spot(x: Any) -> Any:
        if x is picked:
            found[0] = True
        return x

    tu.tree_map(_spot, boxed_tree, is_leaf=lambda x: x is picked)
    nodes = (picked,) if found[0] else picked
    if found[0] and replace is not MISSING:
        replace = (replace,)

    fns: list[Callable[[Any], Any]]
    if replace is MISSING:
        if replace_fn is MISSING:
            raise SelectionError(_ONE_OF)
        fns = [lambda x: replace_fn(tu.tree_map(_unbox, x))] * len(nodes)
    else:
        if replace_fn is not MISSING:
            raise SelectionError(_ONE_OF)
        if len(nodes) != len(replace):
            raise SelectionError(_LENGTHS)
        fns = [_constant(r) for r in replace]
    by_id = {id(n): f for n, f in zip(nodes, fns)}
    hits = dict.fromkeys(by_id, 0)

    def _replace(x: Any) -> Any:
        f = by_id.get(id(x))
        if f is None:
            return _unbox(x)
        hits[id(x)] += 1
        return f(x)

    out = tu.tree_map(_replace, boxed_tree, is_leaf=lambda x: id(x) in by_id)
    for n in nodes:
        count = hits[id(n)]
        if count == 0:
            raise SelectionError(_NOT_IN_TREE)
        if count > 1:
            raise SelectionError(_NONE_HINT)
    return tu.tree_map(
        lambda x: () if type(x) is _EmptyTuple else x,
        out,
        is_leaf=lambda x: type(x) is _EmptyTuple,
    )


def _constant(value: Any) -> Callable[[Any], Any]:
    """`lambda _: value`, one per replacement (a closure per call, not a shared loop variable)."""
    return lambda _: value

"""Selectors: what `select`, `partition` and `delete` accept, and finding what they pick.

A selector is a path (`"layers[0].weight"`), a glob (`"**.bias"`), a list of paths and globs,
a type (or a tuple of types), or a predicate on `(path, node)` or on `node` alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

from treetool._paths._path import Path
from treetool._surgery._edit import Levels, locate
from treetool._surgery._tree_at import outermost
from treetool._tree._model import LEAF, IsLeaf, children, no_gc
from treetool._tree._views import find

__all__ = ["Selector", "find_all", "is_paths", "on_path_and_node", "predicate", "walk_select"]

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


def on_path_and_node(fn: Callable[..., Any]) -> Callable[[Path, Any], Any]:
    """`fn` as a function of `(path, node)`, whether it takes both or the node alone."""
    return fn if _two_args(fn) else (lambda _p, x: fn(x))


def is_paths(sel: Any) -> TypeGuard[str | Path | list[str | Path]]:
    """Whether `sel` is a path or glob, or a list of them."""
    return isinstance(sel, (str, Path)) or (
        isinstance(sel, list) and all(isinstance(s, (str, Path)) for s in sel)
    )


def predicate(sel: Any) -> Callable[[Path, Any], bool]:
    """A type, a tuple of types or a predicate, as a predicate on `(path, node)`."""
    if isinstance(sel, type) or (
        isinstance(sel, tuple) and sel and all(isinstance(t, type) for t in sel)
    ):
        return lambda _p, x: isinstance(x, sel)
    if callable(sel):
        return on_path_and_node(sel)
    raise TypeError(
        "select: expected a path or glob string, a list of them, a type, or a predicate on "
        f"(path, node); got {type(sel).__name__}"
    )


def walk_select(
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


def find_all(tree: Any, sel: Any, is_leaf: IsLeaf, levels: Levels) -> list[tuple[Path, Any]]:
    """`(path, node)` of everything `sel` picks: outermost matches of globs, types, predicates.

    A plain path that is not in the tree raises PathError (with the nearest paths).
    """
    if is_paths(sel):
        items = [sel] if isinstance(sel, (str, Path)) else sel
        found: list[tuple[Path, Any]] = []
        for item in items:
            q = Path.parse(item)
            if q.is_pattern:
                found.extend(outermost(find(tree, q, is_leaf)))
            else:
                found.append(locate(tree, q, is_leaf, levels))
        return found
    return walk_select(tree, predicate(sel), is_leaf)

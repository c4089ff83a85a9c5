"""Flat views of pytrees: leaves with paths, flatten/unflatten, flat dicts, non-finite leaves.

The walks behind them are in `_walk`, path lookups (`get`, `resolve`, `find`) in `_lookup`;
this module re-exports those names, so `from ._views import get` keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from treetool._errors import PathError, StructureMismatch, TreetoolError
from treetool._paths._path import Path
from treetool._public import set_module
from treetool._tree._lookup import find, get, resolve, unopened_or_leaf
from treetool._tree._model import IsLeaf, NodeError, no_gc
from treetool._tree._walk import CycleDiverged, iter_leaves_with_paths, leaf_text_chunks
from treetool._tree._walk import (
    _walk as _walk,  # the TUI's leaf index and the CLI walk with these two
)
from treetool._tree._walk import _walk_nodes as _walk_nodes

__all__ = [
    "CycleDiverged",
    "find",
    "flatten",
    "from_flat_dict",
    "get",
    "iter_leaves_with_paths",
    "leaf_text_chunks",
    "leaves_with_path",
    "leaves_with_paths",
    "nonfinite",
    "resolve",
    "to_flat_dict",
    "unflatten",
    "unopened_or_leaf",
]


@set_module("treetool")
def leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[Path, Any]]:
    """Every leaf with its path, in jax's order; `str(path)` equals jax's `keystr`.

    The name and order of `jax.tree_util.tree_leaves_with_path`, with a `Path` for each key
    path (`leaves_with_paths`, the old name, is a deprecated alias).

    One iterative walk (any depth), each path string built once per edge of the tree, key
    entries built only when a path is asked for them.

    A node whose flatten raises cannot give its leaves: this raises `NodeError` (a
    `TreetoolError`) naming its path; `render`, `summary` and `view` show it in place.

    Example:
        >>> [(str(p), x) for p, x in leaves_with_path({"b": (1, 2), "a": None})]
        [("['b'][0]", 1), ("['b'][1]", 2)]
    """
    out: list[tuple[Path, Any]] = []
    with no_gc():
        for chunk in _walk(tree, is_leaf, False):
            out += chunk
    return out


@set_module("treetool")
def leaves_with_paths(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[Path, Any]]:
    """Deprecated: `leaves_with_path` (jax's name, `jax.tree_util.tree_leaves_with_path`).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     pairs = leaves_with_paths({"a": 1})
        >>> [(str(p), x) for p, x in pairs], str(caught[0].message)
        ([("['a']", 1)], 'treetool.leaves_with_paths is deprecated: use treetool.leaves_with_path')
    """
    import warnings

    warnings.warn(
        "treetool.leaves_with_paths is deprecated: use treetool.leaves_with_path",
        DeprecationWarning,
        stacklevel=2,
    )
    return leaves_with_path(tree, is_leaf)


@set_module("treetool")
def flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], Any]:
    """`(leaves, treedef)`, exactly as `jax.tree_util.tree_flatten`.

    Where jax's flatten raises in a node, this raises `NodeError` naming the node's path.

    Example:
        >>> leaves, treedef = flatten({"a": 1, "b": [2, 3]})
        >>> leaves
        [1, 2, 3]
        >>> unflatten(treedef, [10, 20, 30])
        {'a': 10, 'b': [20, 30]}
    """
    import jax

    try:
        return jax.tree_util.tree_flatten(tree, is_leaf=is_leaf)
    except TreetoolError:
        raise
    except Exception as e:
        raise _where_flatten_fails(tree, is_leaf, e) from e


def _where_flatten_fails(tree: Any, is_leaf: IsLeaf, e: Exception) -> NodeError:
    """The `NodeError` of the first node whose flatten raises (found by walking again)."""
    try:
        for _ in _walk(tree, is_leaf, True):
            pass
    except NodeError as found:
        return found
    return NodeError("", f"{type(e).__name__}: {e}")


@set_module("treetool")
def unflatten(treedef: Any, leaves: Any) -> Any:
    """Rebuild a tree from a treedef and its leaves (`jax.tree_util.tree_unflatten`)."""
    import jax

    leaves = list(leaves)
    if treedef.num_leaves != len(leaves):
        raise StructureMismatch(
            f"unflatten: the treedef has {treedef.num_leaves} leaves, but {len(leaves)} were given"
        )
    return jax.tree_util.tree_unflatten(treedef, leaves)


@set_module("treetool")
def to_flat_dict(tree: Any, is_leaf: IsLeaf = None) -> dict[str, Any]:
    """`{keystr path: leaf}` for every leaf.

    Example:
        >>> to_flat_dict({"params": {"w": 1.0, "b": 0.0}})
        {"['params']['b']": 0.0, "['params']['w']": 1.0}
    """
    with no_gc():
        return {str(p): x for p, x in iter_leaves_with_paths(tree, is_leaf)}


@set_module("treetool")
def from_flat_dict(flat: dict[Any, Any], like: Any, is_leaf: IsLeaf = None) -> Any:
    """Rebuild a tree shaped like `like` from a flat dict keyed by path strings or Paths.

    Keys may be in keystr form or any form `Path.parse` accepts (`params.w`).

    Raises:
        StructureMismatch: a path of `like` is missing from `flat`, or `flat` has extra keys.

    Example:
        >>> from_flat_dict({"['a']": 5, "['b'][0]": 6}, like={"a": 0, "b": [0]})
        {'a': 5, 'b': [6]}
    """
    import jax

    paths = [p for p, _ in iter_leaves_with_paths(like, is_leaf)]
    norm: dict[str, Any] = {}
    for k, v in flat.items():
        norm[str(k)] = v
    wanted = {str(p) for p in paths}
    extra = [k for k in norm if k not in wanted]
    if extra:
        # accept other spellings (dotted form) by resolving them against `like`
        for k in extra:
            try:
                real = str(resolve(like, k, is_leaf))
            except (PathError, TypeError):
                continue
            norm.setdefault(real, norm.pop(k))
        extra = [k for k in norm if k not in wanted]
    missing = [str(p) for p in paths if str(p) not in norm]
    if missing or extra:
        lines = ["from_flat_dict: the flat dict does not match the structure of `like`"]
        if missing:
            lines.append(f"  missing {len(missing)}: {', '.join(missing[:5])}")
        if extra:
            lines.append(f"  unexpected {len(extra)}: {', '.join(map(str, extra[:5]))}")
        raise StructureMismatch("\n".join(lines))
    treedef = jax.tree_util.tree_structure(like, is_leaf=is_leaf)
    return jax.tree_util.tree_unflatten(treedef, [norm[str(p)] for p in paths])


# --- numbers ------------------------------------------------------------------------------


@set_module("treetool")
def nonfinite(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[Path, int, int]]:
    """Every floating or complex array leaf holding NaN or Inf: `(path, nan_count, inf_count)`.

    Example:
        >>> import numpy as np
        >>> [(str(p), n, i) for p, n, i in nonfinite({"a": np.array([np.nan, np.inf, 1.0]), "b": np.ones(2)})]
        [("['a']", 1, 1)]
    """
    import numpy as np

    from treetool._leaves._arrays import _as_float, _chunks, is_array, is_key

    out = []
    for p, x in leaves_with_path(tree, is_leaf):
        if not is_array(x) or is_key(x):
            continue
        kind = getattr(getattr(x, "dtype", None), "kind", "V")
        if kind in "iub":
            continue
        n_nan = n_inf = 0
        for raw in _values_of(p, x, _chunks):
            c = _as_float(raw)
            nan = int(np.count_nonzero(np.isnan(c)))
            n_nan += nan
            n_inf += int(c.size - np.count_nonzero(np.isfinite(c)) - nan)
        if n_nan or n_inf:
            out.append((p, n_nan, n_inf))
    return out


def _values_of(path: Path, x: Any, chunks: Any) -> Iterator[Any]:
    """`chunks(x)`; a leaf whose values cannot be read (a deleted jax array) is a `StatsError`
    naming its path, a damaged or vanished file its own `LoadError` or `OSError`."""
    from treetool._errors import StatsError

    try:
        yield from chunks(x)
    except (TreetoolError, OSError):
        raise
    except Exception as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise StatsError(f"{path}: cannot read its values: {type(e).__name__}: {text}") from e

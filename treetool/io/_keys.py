"""Flat files (npz, safetensors) store leaves under key-path strings; rebuild nested trees.

`tt.save` writes each npz leaf under `str(path)` (`['params']['dense']['kernel']`, `['layers'][0]`),
and each safetensors leaf under its dotted path with `str(path)` in the file's metadata.
When every name in a file is such a path made of dict keys and list indices, loading rebuilds
the nested dicts and lists; otherwise (names from other tools, `layers.0.weight`) the tree is a
flat dict of names.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from treetool._errors import PathError
from treetool._paths._path import DictKey, Path, SequenceKey
from treetool.io._safety._limits import MAX_DEPTH

__all__ = ["tree_from_keystrs"]


class _Flat(Exception):
    pass


_LIST = object()  # marks a dict that stands for a list while building


def _parse(name: str) -> tuple[DictKey | SequenceKey, ...] | None:
    if not name.startswith("[") or name.count("[") > MAX_DEPTH:
        return None  # a name nested deeper than any tree treetool builds stays a flat key
    try:
        path = Path.parse(name)
    except PathError:
        return None
    keys = tuple(k for k in path if type(k) is DictKey or type(k) is SequenceKey)
    if str(path) != name or len(keys) != len(path):
        return None
    return keys


def tree_from_keystrs(flat: dict[str, Any]) -> Any:
    """Nested dicts/lists from `{keystr: leaf}`, or the flat dict if the names are not paths.

    Example:
        >>> tree_from_keystrs({"['a'][0]": 1, "['a'][1]": 2, "['b']": 3})
        {'a': [1, 2], 'b': 3}
        >>> tree_from_keystrs({"layers.0.w": 1})
        {'layers.0.w': 1}
    """
    if not flat:
        return {}
    paths = []
    n = len(flat)
    for name in flat:
        p = _parse(name)
        if p is None or len(p) == 0:
            return dict(flat)
        # a list of a tree of n leaves has fewer than n items: an index past that is no list
        # (and big ints could be chosen to share a hash: n**2 comparisons to insert them)
        if any(type(k) is SequenceKey and not 0 <= k.idx < n for k in p):
            return dict(flat)
        paths.append(p)
    root: dict = {}
    try:
        for p, leaf in zip(paths, flat.values()):
            node: Any = root
            for k, nxt in pairwise(p):
                key = k.key if isinstance(k, DictKey) else k.idx
                child = node.get(key) if isinstance(node, dict) else None
                if child is None:
                    child = {} if type(nxt) is DictKey else {_LIST: True}
                    node[key] = child
                elif not isinstance(child, dict) or (_LIST in child) != (type(nxt) is SequenceKey):
                    raise _Flat
                node = child
            last = p[-1]
            key = last.key if isinstance(last, DictKey) else last.idx
            if key in node or (_LIST in node) != (type(last) is SequenceKey):
                raise _Flat
            node[key] = leaf
        if _LIST in root:
            raise _Flat
        return _lists(root)
    except (_Flat, TypeError, RecursionError):
        return dict(flat)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if _LIST in node:
        idx = sorted(k for k in node if k is not _LIST)
        if idx != list(range(len(idx))):
            raise _Flat
        return [_lists(node[i]) for i in idx]
    return {k: _lists(v) for k, v in node.items()}

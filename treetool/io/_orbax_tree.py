"""Building an orbax item's tree from its flat `_METADATA` entries, without recursion.

Entries name their key path (`key_metadata`); `_insert` puts each leaf under dicts and
sequences made on the way (`_Map`, `_Seq`), `_convert` turns those into plain dicts and lists.

Example:
    >>> root = _insert(None, [("layers", 0), ("0", 1)], "w", "item")
    >>> _convert(root, "item")
    {'layers': ['w']}
"""

from __future__ import annotations

from typing import Any

from .._errors import LoadError

__all__ = ["_Map", "_Seq", "_convert", "_insert"]


class _Seq(dict):
    """A dict standing for a list while the tree is built (orbax key_type 1)."""


class _Map(dict):
    """A dict made while the tree is built (leaves that are dicts are left alone)."""


def _insert(root: Any, keys: list[tuple[str, Any]], leaf: Any, item: str) -> Any:
    if not keys:
        return leaf
    if root is None:
        root = _Seq() if keys[0][1] == 1 else _Map()
    node = root
    last = len(keys) - 1
    for i, (k, _) in enumerate(keys):
        key: Any = k
        if type(node) is _Seq:
            try:
                key = int(k)
            except ValueError:
                raise LoadError(f"{item}/_METADATA: {k!r} is not a sequence index") from None
        if i == last:
            node[key] = leaf
        else:
            nxt = node.get(key)
            if nxt is None:
                nxt = node[key] = _Seq() if keys[i + 1][1] == 1 else _Map()
            elif type(nxt) is not _Seq and type(nxt) is not _Map:
                raise LoadError(
                    f"{item}/_METADATA: {'.'.join(k for k, _ in keys)} conflicts with a leaf"
                )
            node = nxt
    return root


def _convert(root: Any, item: str) -> Any:
    """The built tree with plain dicts and lists, converted children first (no recursion)."""
    made = (_Seq, _Map)
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        if type(node) in made:
            order.append(node)
            stack.extend(node.values())
    done: dict[int, Any] = {}
    for node in reversed(order):
        if type(node) is _Seq:
            n = max(node) + 1 if node else 0
            if n > 2 * len(node) + 16 or (node and min(node) < 0):
                raise LoadError(
                    f"{item}/_METADATA: sequence indices {min(node)}..{n - 1} "
                    f"for {len(node)} entries"
                )
            done[id(node)] = [
                done[id(v)] if type(v) in made else v for v in map(node.get, range(n))
            ]
        else:
            done[id(node)] = {k: done[id(v)] if type(v) in made else v for k, v in node.items()}
    return done.get(id(root), root)

"""Where a path is in the Node model (`node_chain`), and its Python expression (`expression`).

The cursor, search and the Leaves tab jump to a path by its text: `node_chain` walks down the
Node model one child at a time, never opening a wide node whole.
"""

from __future__ import annotations

import re
import weakref

from treetool._tree._model import Node

__all__ = ["expression", "node_chain"]

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

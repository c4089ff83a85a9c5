"""Building an orbax item's tree from its flat `_METADATA` entries, without recursion.

Entries name their key path (`key_metadata`: each key with its type, 1 for a sequence
index); `_Builder.insert` puts each leaf under dicts
and sequences made on the way: plain dicts (told from dict leaves by their ids) and `_Seq`
(a dict of index -> value standing for a list), which `_Builder.tree` turns into lists.

Example:
    >>> b = _Builder("item")
    >>> b.insert([("layers", 2), ("1", 1)], "v")
    >>> b.insert([("layers", 2), ("0", 1)], "w")
    >>> b.pair("head", "w", 2, "u")
    >>> b.tree()
    {'layers': ['w', 'v'], 'head': {'w': 'u'}}
"""

from __future__ import annotations

from typing import Any

from treetool._errors import LoadError

__all__ = ["_Builder", "_Seq"]


class _Seq(dict):
    """A dict standing for a list while the tree is built (orbax key_type 1)."""


class _Builder:
    """The tree of one item, entry by entry; `tree()` gives it with plain dicts and lists."""

    __slots__ = ("_item", "_made", "_seqs", "root")

    def __init__(self, item: str) -> None:
        self._item = item
        self.root: Any = None
        self._made: set[int] = set()  # ids of the dicts and _Seqs made here (not leaves)
        self._seqs = False

    def _new(self, key_type: Any) -> Any:
        node: Any = _Seq() if key_type == 1 else {}
        self._seqs = self._seqs or key_type == 1
        self._made.add(id(node))
        return node

    def made(self, node: Any) -> bool:
        """Whether `node` is a dict or sequence made here (not a leaf that is a dict)."""
        return id(node) in self._made

    def flat(self, key: str, leaf: Any) -> bool:
        """`root[key] = leaf` when the root is a dict made here (False: use `insert`)."""
        root = self.root
        if type(root) is not dict or id(root) not in self._made:
            return False
        root[key] = leaf
        return True

    def pair(self, outer: str, inner: str, inner_type: Any, leaf: Any) -> None:
        """`root[outer][inner] = leaf` for dicts (most two-key entries); `insert` otherwise."""
        root = self.root
        if type(root) is dict and inner_type != 1 and id(root) in self._made:
            node = root.get(outer)
            if node is None:
                node = root[outer] = {}
                self._made.add(id(node))
                node[inner] = leaf
                return
            if type(node) is dict and id(node) in self._made:
                node[inner] = leaf
                return
        self.insert([(outer, 2), (inner, inner_type)], leaf)

    def insert(self, keys: Any, leaf: Any) -> None:
        """Put `leaf` at the key path `keys`: [(key, orbax key_type)] (1: a sequence)."""
        if not keys:
            self.root = leaf
            return
        if self.root is None:
            self.root = self._new(keys[0][1])
        node = self.root
        made = self._made
        if id(node) not in made:  # the root is a leaf (an entry with no keys came first)
            raise LoadError(f"{self._item}/_METADATA: {keys[0][0]!r:.80} conflicts with a leaf")
        last = len(keys) - 1
        for i, (k, _) in enumerate(keys):
            key: Any = k
            if type(node) is _Seq:
                try:
                    key = int(k)
                except ValueError:
                    raise LoadError(
                        f"{self._item}/_METADATA: {k!r} is not a sequence index"
                    ) from None
            if i == last:
                node[key] = leaf
            else:
                nxt = node.get(key)
                if nxt is None:
                    nxt = node[key] = self._new(keys[i + 1][1])
                elif id(nxt) not in made:
                    raise LoadError(
                        f"{self._item}/_METADATA: {'.'.join(k for k, _ in keys)} "
                        "conflicts with a leaf"
                    )
                node = nxt

    def tree(self) -> Any:
        """The built tree, its `_Seq`s turned into lists, children first (no recursion)."""
        root = self.root
        if root is None:
            return {}
        if not self._seqs:
            return root  # dicts only: built as they stay
        made = self._made
        order, stack = [], [root]
        while stack:
            node = stack.pop()
            if id(node) in made:
                order.append(node)
                stack.extend(v for v in node.values() if type(v) in (dict, _Seq))
        lists: dict[int, list] = {}
        for node in reversed(order):
            if type(node) is _Seq:
                n = max(node) + 1 if node else 0
                if n > 2 * len(node) + 16 or (node and min(node) < 0):
                    raise LoadError(
                        f"{self._item}/_METADATA: sequence indices {min(node)}..{n - 1} "
                        f"for {len(node)} entries"
                    )
                lists[id(node)] = [lists.get(id(v), v) for v in map(node.get, range(n))]
            else:
                for k, v in node.items():
                    if type(v) is _Seq and id(v) in made:
                        node[k] = lists[id(v)]
        return lists.get(id(root), root)

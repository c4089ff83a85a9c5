"""Snapshots of a file being read: made ready off the UI thread (`prepare`), counted (`LeafCounter`).

A reader hands over snapshots of the tree read so far (`treetool.io._partial.PartialWatch`);
`prepare` turns one into what a front end shows: its Node view with the root opened, its
leaves counted (only what is new since the last one: `LeafCounter`), the rows that were open
and the cursor found again in it (`resolve`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from treetool._tree._chain import node_chain
from treetool._tree._model import Node, aggregate, no_gc, view

__all__ = ["COUNT_LIMIT", "LeafCounter", "Snapshot", "prepare", "resolve"]

#: a snapshot's leaves are counted up to this many (past it: "over N")
COUNT_LIMIT = 5_000_000


@dataclass
class Snapshot:
    """A snapshot made ready off the UI thread: its Node view (root opened), its count."""

    tree: Any
    model: Node
    fraction: float
    leaves: int
    complete: bool
    seconds: float
    #: the open rows and the cursor of the tree shown before, resolved in this one
    opened: dict[str, list[tuple[Node, int]]] = field(default_factory=dict)
    cursor: list[tuple[Node, int]] | None = None


def resolve(
    model: Node, kept: tuple[list[str], str | None]
) -> tuple[dict[str, list[tuple[Node, int]]], list[tuple[Node, int]] | None]:
    """`node_chain` of the open rows' paths and of the cursor's path in `model` (the paths
    that are not there, not yet, are left out).

    Example:
        >>> opened, cursor = resolve(view({"a": {"b": 1}}), (["['a']", "['z']"], "['a']['b']"))
        >>> list(opened), [str(n.path) for n, _ in cursor]
        (["['a']"], ["['a']", "['a']['b']"])
    """
    paths, at = kept
    opened: dict[str, list[tuple[Node, int]]] = {}
    for p in paths:
        try:
            opened[p] = node_chain(model, p)
        except Exception:  # not read yet (KeyError), or a node that fails to open
            continue
    cursor = None
    if at is not None:
        try:
            cursor = node_chain(model, at)
        except Exception:
            cursor = None
    return opened, cursor


class LeafCounter:
    """Counts the leaves of successive snapshots, walking only what is new in each.

    A snapshot shares every complete subtree with the next one (only the containers still
    being filled are copies), so the count of each of the root's children is kept by identity
    and reused. Plain dicts, lists and tuples are walked here (None is no leaf, as in jax;
    whether a value of another type is a leaf is asked once per type), other nodes by
    `aggregate`.

    Example:
        >>> c = LeafCounter()
        >>> done = {"w": [1.0, 2.0], "b": None}
        >>> c.count({"a": done, "c": (3, 4)}), c.count({"a": done, "c": (3, 4), "d": 5})
        ((4, True), (5, True))
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, int]] = {}
        self._leafy: dict[type, bool] = {}

    def count(self, tree: Any, limit: int = COUNT_LIMIT) -> tuple[int, bool]:
        """(leaves, complete): past `limit` leaves the count stops (complete is False)."""
        t = type(tree)
        if t is not dict and t is not list and t is not tuple:
            return self._walk(tree, limit)
        known, seen = self._known, {}
        total = 0
        for v in tree.values() if t is dict else tree:
            vt = type(v)
            if vt is dict or vt is list or vt is tuple:
                hit = known.get(id(v))
                if hit is not None and hit[0] is v:
                    n, ok = hit[1], True
                else:
                    n, ok = self._walk(v, limit - total)
                if not ok:
                    return total + n, False
                seen[id(v)] = (v, n)
                total += n
            elif v is not None:
                is_leaf = self._leafy.get(vt)
                if is_leaf is None:
                    is_leaf = self._leafy[vt] = _plain_leaf(v)
                if is_leaf:  # the common case at the root of a wide dict: no call per leaf
                    total += 1
                    continue
                n, ok = self._walk(v, limit - total)
                total += n
                if not ok:
                    return total, False
        self._known = seen
        return total, True

    def _walk(self, tree: Any, limit: int) -> tuple[int, bool]:
        leafy = self._leafy
        total = 0
        stack = [tree]
        while stack:
            obj = stack.pop()
            t = type(obj)
            if t is dict or t is list or t is tuple:
                for v in obj.values() if t is dict else obj:
                    vt = type(v)
                    if vt is dict or vt is list or vt is tuple:
                        stack.append(v)
                    elif v is not None:
                        is_leaf = leafy.get(vt)
                        if is_leaf is None:
                            is_leaf = leafy[vt] = _plain_leaf(v)
                        if is_leaf:
                            total += 1
                        else:
                            stack.append(v)
                if total > limit:
                    return total, False
            elif obj is not None:
                is_leaf = leafy.get(t)
                if is_leaf is None:
                    is_leaf = leafy[t] = _plain_leaf(obj)
                if is_leaf:
                    total += 1
                    continue
                agg = aggregate(obj, None, limit=max(limit - total, 1))
                total += agg.leaves
                if not agg.complete:
                    return total, False
        return total, True


def _plain_leaf(v: Any) -> bool:
    """Whether `v` is a leaf (for the count: asked once per type)."""
    from treetool._tree._model import LEAF, children

    try:
        kind, _ = children(v, None)
    except Exception:  # its count is `aggregate`'s to tell
        return False
    return kind == LEAF


def prepare(
    tree: Any,
    fraction: float,
    kept: tuple[list[str], str | None] = ([], None),
    counter: LeafCounter | None = None,
    as_finished: Callable[[Any, float], Any] | None = None,
) -> Snapshot:
    """The view of a snapshot with its root opened, and its leaves counted (a worker's job).
    With `as_finished` (the watch's), the snapshot is shown as the finished tree will be
    (functions as one leaf each, never the containers the reader still writes to).

    Example:
        >>> s = prepare({"a": [1.0, 2.0], "b": 3.0}, 0.5)
        >>> s.leaves, s.model.num_children, s.fraction
        (3, 2, 0.5)
    """
    t0 = time.perf_counter()
    if as_finished is not None:
        try:
            tree = as_finished(tree, fraction)
        except Exception:  # shown as read: its functions' rows open into `Opaque` parts
            pass
    model = view(tree)
    with no_gc():  # many small objects, soon garbage: no GC passes
        try:
            model.is_leaf  # noqa: B018  (opens the root: its first page is shown)
            leaves, complete = (counter or LeafCounter()).count(tree)
        except Exception:  # a snapshot that cannot be walked: its rows show the error
            leaves, complete = 0, False
        opened, cursor = resolve(model, kept)
    return Snapshot(
        tree, model, fraction, leaves, complete, time.perf_counter() - t0, opened, cursor
    )

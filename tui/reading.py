"""The app reading its file itself: open at once, show the tree as it grows, then the whole.

`treetool inspect big.pkl` does not read first and open the app after: it opens the app on a
`Reading`, and the app reads the file in a thread. It asks the reader for a snapshot
(`PartialWatch.request`) at once, then after `SNAPSHOT_EVERY` seconds, then twice as long
each time (up to `SNAPSHOT_MAX`); a snapshot is shown as a read-only tree, with the share of
the file read and the leaves so far in the totals line. When the read ends, the whole tree
takes its place, keeping the rows that were open and the cursor. Keys that
need the whole tree (search, the Leaves tab, stats) say "still reading" meanwhile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from treetool.tui._gc import frozen_after

from treetool._tree._model import Node, aggregate, view

__all__ = ["NotReadYet", "Read", "Reading", "progress_text"]

#: seconds between snapshot requests (at least: a snapshot that took long spaces them out)
SNAPSHOT_EVERY = 0.3
#: the longest wait between two snapshots (each snapshot of a wide node costs the reader
#: time: the first shows the top levels, later ones come less and less often)
SNAPSHOT_MAX = 4.0
#: seconds between redraws of the progress line
PROGRESS_EVERY = 0.2
#: the next snapshot is asked for this many times the last one's preparing time later at
#: the earliest (preparing holds the GIL the reader needs: at most ~1/11 of the read's time)
SPACING = 10
#: a snapshot's leaves are counted up to this many (past it: "over N")
COUNT_LIMIT = 5_000_000


@dataclass
class Read:
    """What a finished read gives the app: the tree, the header note, the file's facts."""

    tree: Any
    note: str | None = None
    file_facts: dict[str, Any] | None = None


@dataclass
class Reading:
    """A file for the app to read itself.

    Args:
        path: the file (its name and size show in the progress line).
        read: `read(watch)` reads the whole file and returns a `Read`; it raises on bad
            input (the app exits and `run` raises that error).
        watch: what `read` is given and the app asks for snapshots: a
            `treetool.io._partial.PartialWatch` (`request()`, `latest() -> (tree so far,
            fraction read) | None`, `as_finished(tree)`: the tree shown, `release()` once
            the whole tree has replaced the snapshots), or None (no snapshots: a progress
            line only).

    Example:
        >>> r = Reading("ckpt.pkl", lambda watch: Read({"w": 1.0}))
        >>> r.read(None).tree
        {'w': 1.0}
    """

    path: str
    read: Callable[[Any], Read]
    watch: Any = None
    #: the error that ended the read (set by the app; `treetool.tui.run` raises it)
    error: BaseException | None = field(default=None, repr=False)
    #: the finished read (set by the app)
    result: Read | None = field(default=None, repr=False)


class NotReadYet:
    """The root the app shows before the first snapshot of a file being read."""

    def __repr__(self) -> str:
        return "not read yet"


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
    from treetool._tree._chain import node_chain

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
    with frozen_after(keep=lambda: False):  # many small objects, soon garbage: no GC passes
        try:
            model.is_leaf  # noqa: B018  (opens the root: its first page is shown)
            leaves, complete = (counter or LeafCounter()).count(tree)
        except Exception:  # a snapshot that cannot be walked: its rows show the error
            leaves, complete = 0, False
        opened, cursor = resolve(model, kept)
    return Snapshot(
        tree, model, fraction, leaves, complete, time.perf_counter() - t0, opened, cursor
    )


def progress_text(
    name: str, fraction: float | None, leaves: int | None, complete: bool, seconds: float
) -> Text:
    """The totals line while the file is read.

    Example:
        >>> progress_text("ckpt.pkl", 0.43, 431_000, True, 2.5).plain
        'reading ckpt.pkl ━━━━━━━━╺━━━━━━━━━━━ 43% · 431,000 of ~1,002,326 leaves so far · 2.5 s'
        >>> progress_text("ckpt.pkl", None, None, True, 0.1).plain
        'reading ckpt.pkl ╺━━━━━━━━━━━━━━━━━━━ · 0.1 s'
    """
    width = 20
    frac = min(max(fraction or 0.0, 0.0), 0.99)
    full = int(frac * width)
    t = Text()
    t.append(f"reading {name} ", style="bold")
    t.append("━" * full, style="magenta")
    t.append(("╺" if full < width else "") + "━" * max(width - full - 1, 0), style="dim")
    if fraction is not None:
        t.append(f" {frac:.0%}")
    if leaves is not None:
        t.append(" · ")
        if not complete:
            t.append(f"over {leaves:,} leaves so far")
        elif fraction and fraction >= 0.01:
            t.append(f"{leaves:,} of ~{round(leaves / fraction):,} leaves so far")
        else:
            t.append(f"{leaves:,} leaves so far")
    t.append(f" · {seconds:.1f} s", style="dim")
    return t


def plain_name(path: str) -> str:
    """The file's base name without control characters (file-derived text)."""
    from treetool._progress import _plain_name

    return _plain_name(path)


def file_size(path: str) -> int:
    """The size of `path` in bytes, 0 when it cannot be known."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

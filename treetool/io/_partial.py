"""Snapshots of a tree while a reader builds it in another thread (`PartialWatch`).

A UI that reads a big file in a worker thread hands the reader a `PartialWatch`; it calls
`request()` whenever it wants to show progress (at most a few times a second) and `latest()`
to get the newest snapshot. The reader checks `_wanted()` at its safe points (the pickle reader:
after each batch of dict or list items and at each 64 KiB frame) and, when asked, builds a
snapshot in its own thread and hands it over whole with `_offer`: the root container with the
items read so far, where the containers still under construction are shallow copies and every
complete subtree is shared, never copied. The UI never sees an object the reader still
changes. Formats other than pickle read fast and ignore the watch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PartialWatch"]


class PartialWatch:
    """Snapshots of a tree while a reader builds it in another thread.

    `request()` and `latest()` may be called from any thread; the reader calls `_wanted()` at
    its safe points and `_offer(tree, fraction)` with each snapshot it builds. A snapshot is
    `(tree so far, fraction of the file read)`; its leaves are complete (an array still waiting
    for its data is left out), and it passed the same checks as a finished tree (no cycles,
    depth and expanded size within the file's budget). Building snapshots takes at most
    `share` of the read's time (10%): a request made sooner is answered later in the read.

    Example:
        >>> import pickle, tempfile, os, threading, numpy as np
        >>> from treetool.io import read
        >>> p = os.path.join(tempfile.mkdtemp(), "big.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({f"k{i}": np.full(1, i, np.float32) for i in range(5000)}, fh)
        >>> watch = PartialWatch()
        >>> watch.request()  # answered at the reader's first safe point
        >>> loaded = read(p, watch=watch)
        >>> tree, fraction = watch.latest()
        >>> 0 < len(tree) <= 5000, 0.0 < fraction <= 1.0
        (True, True)
    """

    __slots__ = ("_latest", "_want", "share")

    def __init__(self, share: float = 0.1) -> None:
        self._want = False
        self._latest: tuple[Any, float] | None = None
        #: the most of the read's time its snapshots may take (a request beyond it waits)
        self.share = share

    def request(self) -> None:
        """Ask for a snapshot at the reader's next safe point (any thread)."""
        self._want = True

    def latest(self) -> tuple[Any, float] | None:
        """The newest snapshot: (tree so far, fraction of the file read), or None (any thread)."""
        return self._latest

    def release(self) -> None:
        """Forget the newest snapshot (the whole tree has taken its place): the watch no
        longer keeps the tree read so far alive (any thread)."""
        self._latest = None

    def _wanted(self) -> bool:
        return self._want

    def _decline(self) -> None:
        # the snapshot failed the checks a finished tree must pass: none is offered
        self._want = False

    def _offer(self, tree: Any, fraction: float) -> None:
        self._want = False
        self._latest = (tree, fraction)  # one reference assignment: the UI sees all or nothing

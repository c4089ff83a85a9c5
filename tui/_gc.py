"""Keep the cyclic garbage collector off the app's bulk, long-lived objects.

A 1e6-leaf tree and its leaf index are millions of small tracked objects (path tuples, keys,
key maps), made with the collector paused. The first collections after that walk all of them,
once per generation: 0.3-0.8 s each with the GIL held, so the app froze at a random keystroke
a second after opening. The app moves them out of the collector's sight instead
(`gc.freeze`, which costs nothing), and gives them back when it exits.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["freeze", "frozen_after", "hand_back", "take_over"]

#: apps running now in this process (a notebook may open several in turn): objects are frozen
#: only while one runs, and everything is handed back when the last one exits, so a worker
#: that finishes after its app has gone cannot leave objects frozen for good
_running = 0


def take_over() -> None:
    """An app starts: freeze what exists now (the tree, its Node view).

    Example:
        >>> import gc
        >>> take_over()
        >>> gc.get_freeze_count() > 0
        True
        >>> hand_back()
        >>> gc.get_freeze_count()
        0
    """
    global _running
    _running += 1
    gc.freeze()


def hand_back() -> None:
    """An app exits: when it was the last one running, give every frozen object back to the
    collector (objects frozen by other code too: unfreezing only lets the collector see them)."""
    global _running
    _running = max(0, _running - 1)
    if _running == 0:
        gc.unfreeze()


def freeze() -> None:
    """Freeze what exists now, while an app runs (a no-op after the last one exited)."""
    if _running:
        gc.freeze()


@contextmanager
def frozen_after(keep: Callable[[], bool] | None = None) -> Iterator[None]:
    """Run a bulk build with the collector paused, then freeze what it made (when an app runs
    and `keep` is None or `keep()` is true at the end: a cancelled build's objects are left to
    the collector).

    Example:
        >>> with frozen_after():
        ...     table = [(i, str(i)) for i in range(1000)]
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep is None or keep():
            freeze()
    finally:
        if was:
            gc.enable()

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

__all__ = ["frozen_after", "hand_back", "take_over"]


def take_over() -> bool:
    """Freeze what exists now (the tree, its Node view); True when the app is the one to
    unfreeze at exit (nothing else had frozen objects).

    Example:
        >>> import gc
        >>> ours = take_over()
        >>> gc.get_freeze_count() > 0
        True
        >>> hand_back(ours)
    """
    ours = gc.get_freeze_count() == 0
    gc.freeze()
    return ours


def hand_back(ours: bool) -> None:
    """Give the frozen objects back to the collector (when `take_over` said they are ours)."""
    if ours:
        gc.unfreeze()


@contextmanager
def frozen_after(keep: Callable[[], bool] | None = None) -> Iterator[None]:
    """Run a bulk build with the collector paused, then freeze what it made (when `keep`
    is None or `keep()` is true at the end: a cancelled build's objects are left to the
    collector).

    Example:
        >>> with frozen_after():
        ...     table = [(i, str(i)) for i in range(1000)]
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep is None or keep():
            gc.freeze()
    finally:
        if was:
            gc.enable()

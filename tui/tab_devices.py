"""Registers the Devices tab: shown when the tree holds jax arrays, ShapeDtypeStructs with a
sharding, or checkpoint arrays whose sharding the checkpoint recorded (orbax)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

from textual.widget import Widget
from treetool.tui.tabs import TabSpec, register_tab

from treetool._leaves._arrays import LazyArray
from treetool._tree._model import LEAF, children
from treetool._typetests import is_shape_struct

__all__ = ["applies", "make"]

#: leaves looked at to decide whether the tab applies (keeps `applies` cheap on huge trees)
SCAN = 5_000


def applies(obj: Any) -> bool:
    """Whether one of the first `SCAN` leaves of `obj` has a placement worth a tab: a jax
    array, a ShapeDtypeStruct with a sharding, or a checkpoint array with a recorded sharding.

    Example:
        >>> import numpy as np
        >>> applies({"w": np.zeros(3)})
        False
    """
    jax = sys.modules.get("jax")  # no jax array can exist before jax is imported
    jax_array = getattr(jax, "Array", None) if jax is not None else None
    for x in itertools.islice(_some_leaves(obj), SCAN):
        if jax_array is not None and isinstance(x, jax_array):
            return True
        sharding = getattr(x, "sharding", None)
        if sharding is None:
            continue
        if is_shape_struct(x):
            return True
        if isinstance(x, LazyArray) and isinstance(sharding, dict) and "sharding_type" in sharding:
            return True
    return False


def _some_leaves(obj: Any) -> Iterator[Any]:
    """Leaves of `obj`, depth first, in no particular order: wide lists and dicts are read
    lazily (no key sorting, no list of children), so looking at the first few is cheap."""
    stack: list[Iterator[Any]] = [iter((obj,))]
    while stack:
        x: Any = next(stack[-1], _DONE)
        if x is _DONE:
            stack.pop()
            continue
        t = type(x)
        if t is list or t is tuple:
            stack.append(iter(x))
        elif t is dict:
            stack.append(iter(x.values()))
        else:
            try:
                kind, kids = children(x)  # the node table's one level
            except Exception:  # a node that cannot be opened has no leaves to look at
                continue
            if kind == LEAF:
                yield x
            else:
                stack.append(c for _, c in kids)


_DONE = object()


def make(obj: Any) -> Widget:
    """The Devices tab's widget for `obj`."""
    from treetool.tui.widgets.devices_tab import DevicesTab

    return DevicesTab(obj, id="devices-tab")


register_tab(TabSpec(id="devices", title="Devices", applies=applies, make=make, order=30))

"""Registers the Devices tab: shown when the tree holds jax arrays or sharded abstract arrays."""

from __future__ import annotations

import itertools
import sys
from typing import Any

from textual.widget import Widget

from .._views import iter_leaves_with_paths
from .tabs import TabSpec, register_tab

__all__ = ["applies", "make"]

#: leaves looked at to decide whether the tab applies (keeps `applies` cheap on huge trees)
SCAN = 5_000


def applies(obj: Any) -> bool:
    """Whether `obj` holds a jax array (or a ShapeDtypeStruct with a sharding) among its first
    `SCAN` leaves.

    Example:
        >>> import numpy as np
        >>> applies({"w": np.zeros(3)})
        False
    """
    jax = sys.modules.get("jax")
    if jax is None:  # no jax array can exist before jax is imported
        return False
    for _, x in itertools.islice(iter_leaves_with_paths(obj), SCAN):
        if isinstance(x, jax.Array):
            return True
        if type(x).__name__ == "ShapeDtypeStruct" and getattr(x, "sharding", None) is not None:
            return True
    return False


def make(obj: Any) -> Widget:
    """The Devices tab's widget for `obj`."""
    from .widgets.devices_tab import DevicesTab

    return DevicesTab(obj, id="devices-tab")


register_tab(TabSpec(id="devices", title="Devices", applies=applies, make=make, order=30))

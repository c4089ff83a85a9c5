"""Registers the Devices tab: shown when the tree holds jax arrays, ShapeDtypeStructs with a
sharding, or checkpoint arrays whose sharding the checkpoint recorded (orbax)."""

from __future__ import annotations

import itertools
import sys
from typing import Any

from textual.widget import Widget

from .._arrays import LazyArray
from .._views import iter_leaves
from .tabs import TabSpec, register_tab

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
    for x in itertools.islice(iter_leaves(obj), SCAN):
        if jax_array is not None and isinstance(x, jax_array):
            return True
        sharding = getattr(x, "sharding", None)
        if sharding is None:
            continue
        if type(x).__name__ == "ShapeDtypeStruct":
            return True
        if isinstance(x, LazyArray) and isinstance(sharding, dict) and "sharding_type" in sharding:
            return True
    return False


def make(obj: Any) -> Widget:
    """The Devices tab's widget for `obj`."""
    from .widgets.devices_tab import DevicesTab

    return DevicesTab(obj, id="devices-tab")


register_tab(TabSpec(id="devices", title="Devices", applies=applies, make=make, order=30))

"""Registers the Jaxpr tab: shown when the app is opened on a `JaxprView` or a jax jaxpr
(`ClosedJaxpr`, `Jaxpr`), e.g. `treetool.tui.run(tt.jaxpr(loss, model, x, y))`."""

from __future__ import annotations

import sys
from typing import Any

from textual.widget import Widget
from treetool.tui.tabs import TabSpec, register_tab

__all__ = ["applies", "make"]


def applies(obj: Any) -> bool:
    """Whether `obj` is a `JaxprView` or a jax `ClosedJaxpr`/`Jaxpr` (never imports jax).

    Example:
        >>> applies({"w": 1.0})
        False
    """
    from treetool._jaxpr._view import JaxprView

    if isinstance(obj, JaxprView):
        return True
    if "jax" not in sys.modules:  # no jaxpr can exist before jax is imported
        return False
    from jax.extend.core import ClosedJaxpr, Jaxpr

    return isinstance(obj, (ClosedJaxpr, Jaxpr))


def make(obj: Any) -> Widget:
    """The Jaxpr tab's widget for `obj`."""
    from treetool.tui.widgets.jaxpr_tab import JaxprTab

    return JaxprTab(obj, id="jaxpr-tab")


register_tab(TabSpec(id="jaxpr", title="Jaxpr", applies=applies, make=make, order=20))

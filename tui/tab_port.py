"""Registers the Port tab: shown when the app is opened on a `tt.port` plan (`tt.show(plan)`).

The tab draws the plan as `rich.print(plan)` does (rows folded per block, ambiguities with
their candidates, what was dropped and why, the verdict), scrollable.
"""

from __future__ import annotations

import sys
from typing import Any

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static
from treetool.tui.tabs import TabSpec, register_tab

__all__ = ["applies", "make"]


def applies(obj: Any) -> bool:
    """Whether `obj` is a port plan (without importing the port machinery).

    Example:
        >>> applies({"w": 1})
        False
    """
    plan_module = sys.modules.get("treetool._port._plan")
    return plan_module is not None and isinstance(obj, plan_module.Plan)


def make(obj: Any) -> Widget:
    """The Port tab's widget for the plan `obj`."""
    from treetool._port._rich import plan_renderable

    plan = plan_renderable(obj)  # plain: rich Text objects of sanitised text, never markup
    return VerticalScroll(Static(plan, id="port-plan", markup=False), id="port-tab")


register_tab(TabSpec(id="port", title="Port", applies=applies, make=make, order=40))

"""The tab registry: how other parts of treetool add a tab to the TUI.

The app always shows a Tree tab and a Leaves tab. Any other tab (Jaxpr, Devices, …) is
registered here and shown only when its `applies(obj)` returns True for the object the app
was opened on, so a tab never appears empty or fake.

To add a tab, write a module `tui/tab_<name>.py` (importable as `treetool.tui.tab_<name>`)
that calls `register_tab` at import time; the app imports every `treetool.tui.tab_*` module
when it starts. A tab registered from anywhere else works too, as long as it is registered
before the app is created.

Rules for tab authors:

- `applies(obj)` must be cheap (no walk over a huge tree, no jax compile) and must not raise;
  an exception counts as False (and is reported with `notify`).
- `make(obj)` returns a new Textual widget; it is mounted inside a `TabPane`. Do heavy work in
  a Textual worker inside the widget (`@work(thread=True)`), never in `make` itself.
- `id` must be unique and a valid Textual id (letters, digits, `-`, `_`); registering the same
  id again replaces the earlier spec (notebook re-runs, tests).
- `order` sorts the tabs after Tree (0) and Leaves (10); lower comes first.

Example:
    >>> from textual.widgets import Static
    >>> spec = register_tab(
    ...     TabSpec(
    ...         id="strings",
    ...         title="Strings",
    ...         applies=lambda obj: isinstance(obj, str),
    ...         make=lambda obj: Static(obj),
    ...     )
    ... )
    >>> [s.id for s in tabs_for("hello")]
    ['strings']
    >>> tabs_for(42)
    []
    >>> unregister_tab("strings")
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.widget import Widget

__all__ = [
    "TabSpec",
    "load_tab_modules",
    "register_tab",
    "registered_tabs",
    "tabs_for",
    "unregister_tab",
]

_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_RESERVED = frozenset({"tree", "leaves", "diff"})
_REGISTRY: dict[str, TabSpec] = {}


@dataclass(frozen=True)
class TabSpec:
    """One optional tab of the app.

    Attributes:
        id: unique Textual id of the tab pane (`"jaxpr"`, `"devices"`).
        title: the text on the tab (`"Jaxpr"`).
        applies: `applies(obj) -> bool`: whether the tab has content for `obj`.
        make: `make(obj) -> Widget`: builds the tab's content.
        order: position among the optional tabs; lower comes first.

    Example:
        >>> from textual.widgets import Static
        >>> TabSpec("notes", "Notes", lambda obj: True, lambda obj: Static("hi")).order
        100
    """

    id: str
    title: str
    applies: Callable[[Any], bool]
    make: Callable[[Any], Widget]
    order: int = 100

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(
                f"TabSpec id {self.id!r} is not a valid Textual id: "
                "use letters, digits, '-' and '_', starting with a letter"
            )
        if self.id in _RESERVED:
            raise ValueError(f"TabSpec id {self.id!r} is reserved for a built-in tab")


def register_tab(spec: TabSpec) -> TabSpec:
    """Add (or replace, by id) an optional tab; returns `spec` so it can be used as a value.

    Example:
        >>> from textual.widgets import Static
        >>> _ = register_tab(TabSpec("demo-tab", "Demo", lambda o: False, lambda o: Static()))
        >>> "demo-tab" in [s.id for s in registered_tabs()]
        True
        >>> unregister_tab("demo-tab")
    """
    if not isinstance(spec, TabSpec):
        raise TypeError(f"register_tab expects a TabSpec, got {type(spec).__name__}")
    _REGISTRY[spec.id] = spec
    return spec


def unregister_tab(tab_id: str) -> None:
    """Remove a registered tab (no error if it is not registered).

    Example:
        >>> unregister_tab("never-registered")
    """
    _REGISTRY.pop(tab_id, None)


def registered_tabs() -> list[TabSpec]:
    """Every registered tab, sorted by `order` then `id`.

    Example:
        >>> isinstance(registered_tabs(), list)
        True
    """
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.id))


def tabs_for(
    obj: Any, on_error: Callable[[TabSpec, Exception], None] | None = None
) -> list[TabSpec]:
    """The registered tabs whose `applies(obj)` is True, in display order.

    An `applies` that raises counts as False; `on_error(spec, exc)` is told about it.

    Example:
        >>> tabs_for(object()) == [s for s in registered_tabs() if s.applies(object())]
        True
    """
    out = []
    for spec in registered_tabs():
        try:
            ok = bool(spec.applies(obj))
        except Exception as e:  # a broken tab must not stop the app from opening
            if on_error is not None:
                on_error(spec, e)
            continue
        if ok:
            out.append(spec)
    return out


def load_tab_modules(on_error: Callable[[str, Exception], None] | None = None) -> list[str]:
    """Import every `treetool.tui.tab_*` module (each registers its tabs); returns their names.

    A module that fails to import is passed to `on_error(name, exc)` when given (the app
    notifies and opens without that tab); without `on_error` the exception propagates.

    Example:
        >>> all(name.startswith("treetool.tui.tab_") for name in load_tab_modules())
        True
    """
    # the tab modules sit beside this one: listed from this file's folder, not by importing
    # the package (whose `run` imports the app, which imports this module: a cycle)
    package = __name__.rpartition(".")[0]
    names = []
    for info in pkgutil.iter_modules([os.path.dirname(__file__)]):
        if info.name.startswith("tab_"):
            name = f"{package}.{info.name}"
            try:
                importlib.import_module(name)
            except Exception as e:
                if on_error is None:
                    raise
                on_error(name, e)
                continue
            names.append(name)
    return sorted(names)

"""Lowerings by class: which renderer draws which treetool result, in which medium.

Result objects (`TreeDiff`, `Summary`, `Placement`, `JaxprView`…) are data and never import a
renderer. Each renderer module registers, when it is imported, the lowerings it provides for
the result classes it knows: `register(TreeDiff, rich=..., text=...)`. A lookup walks the
object's class `__mro__` (a subclass is drawn as its base), as treescope's type registries do.

A renderer module is imported only when something is drawn, and only when the core module of
the class it lowers has been imported (a `JaxprView` cannot exist before `treetool._jaxpr._view` is
loaded): `_PROVIDERS` names, per medium, the renderer module that registers lowerings for the
classes of each core module, the way treescope's `_LAZY_MODULE_SETUP_FUNCTIONS` set up jax
support only once jax is in `sys.modules`.

Example:
    >>> import treetool as tt
    >>> from treetool.render._registry import lowering
    >>> lowering(tt.TreeDiff, "text").__name__
    '_diff_text'
    >>> lowering(dict, "rich") is None  # a pytree: drawn as a tree by `render`
    True
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from treetool._repr import Medium

__all__ = ["MEDIA", "Lowering", "Medium", "lowering", "register"]

MEDIA: tuple[Medium, ...] = ("rich", "text", "html")

#: a lowering takes the object and the drawing options it understands (others are ignored):
#: "rich" returns a rich renderable, "text" a str, "html" a self-contained HTML fragment
Lowering = Callable[..., Any]

_TABLES: dict[str, dict[type, Lowering]] = {m: {} for m in MEDIA}

_RICH_PROVIDERS = {
    "treetool._diff._tree_diff": "treetool.render.diff",
    "treetool._summary._summary": "treetool.render.summary",
    "treetool._sharding._placement": "treetool.render.devices",
    "treetool._sharding._leaf_placement": "treetool.render.devices",
    "treetool._jaxpr._view": "treetool.render.jaxpr",
}

#: medium -> {core module: the renderer module that registers lowerings of its classes}
_PROVIDERS: dict[str, dict[str, str]] = {
    "rich": _RICH_PROVIDERS,
    "text": _RICH_PROVIDERS,
    "html": {
        "treetool._diff._tree_diff": "treetool.render.html_diff",
        "treetool._summary._summary": "treetool.render.html_results",
        "treetool._sharding._placement": "treetool.render.html_results",
        "treetool._jaxpr._view": "treetool.render.html_jaxpr",
    },
}


def register(
    cls: type,
    *,
    rich: Lowering | None = None,
    text: Lowering | None = None,
    html: Lowering | None = None,
) -> None:
    """Make `cls` (and its subclasses) drawn by the given lowerings.

    Args:
        cls: the result class.
        rich: `rich(obj, **options)` -> a rich renderable (`render`, the terminal).
        text: `text(obj, **options)` -> str (`str(obj)`); without it, the rich lowering
            drawn as plain text.
        html: `html(obj, **options)` -> an HTML fragment (notebooks, `--html`).

    Example:
        >>> from rich.text import Text
        >>> class Tally:
        ...     n = 3
        >>> register(Tally, rich=lambda t, **_: Text(f"{t.n} items"))
        >>> lowering(Tally, "rich")(Tally()).plain
        '3 items'
        >>> import treetool as tt
        >>> tt.render(Tally())  # the registry first, then the tree view
        <text '3 items' [] ''>
    """
    for medium, fn in (("rich", rich), ("text", text), ("html", html)):
        if fn is not None:
            _TABLES[medium][cls] = fn


def lowering(cls: type, medium: Medium) -> Lowering | None:
    """The lowering registered for `cls` (or its nearest base) in `medium`, or None."""
    table = _TABLES[medium]
    for _ in range(2):
        for c in cls.__mro__:
            fn = table.get(c)
            if fn is not None:
                return fn
        if not _load_providers(medium):
            return None
    return None


def _load_providers(medium: str) -> bool:
    """Import the renderer modules whose core module is loaded; True if any was new."""
    new = False
    for core, provider in _PROVIDERS[medium].items():
        if core in sys.modules and provider not in sys.modules:
            importlib.import_module(provider)
            new = True
    return new

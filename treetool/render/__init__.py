"""Renderings of the Node model and of treetool's result objects.

`render(obj)` returns a rich renderable: result objects (TreeDiff, Summary, JaxprView,
Placement) are lowered by the renderer registered for their class (`register`, in
`_registry`); anything else is drawn as a tree of its Node model. `lower(obj, medium)` is the
one entry the core reaches (through `treetool._repr`) for rich, plain-text and HTML drawings.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from treetool._typetests import is_raw_jaxpr
from treetool.render._registry import Medium, lowering, register

__all__ = ["lower", "register", "render"]


def render(
    obj: Any, *, depth: int = 3, width: int = 20, fold: bool = True, is_leaf: Any = None
) -> Any:
    """A rich renderable of a pytree, a Node, or a treetool result object.

    Args:
        obj: a pytree, a `Node`, a `TreeDiff`, a `Summary`, a `JaxprView`, a `Placement`.
        depth: levels of a tree to show.
        width: rows per node before `… N more`.
        fold: fold runs of structurally identical siblings (`[0..31] ×32 Block`).
        is_leaf: treat the nodes it returns True for as leaves.

    Example:
        >>> import rich, treetool as tt
        >>> rich.print(tt.render({"a": [1, 2]}, depth=1))
        dict[1]
        └── ['a']  list[2]
    """
    if is_raw_jaxpr(obj):
        from treetool._jaxpr._view import JaxprView

        obj = JaxprView(obj)
    fn = lowering(type(obj), "rich")
    if fn is not None:
        return fn(obj, depth=depth, width=width, fold=fold, is_leaf=is_leaf)
    if _renders_itself(obj):
        return obj
    from treetool.render.text import TreeView

    return TreeView(obj, depth=depth, width=width, fold=fold, is_leaf=is_leaf)


def lower(obj: Any, medium: Medium, **options: Any) -> Any:
    """`obj` drawn in `medium`: a rich renderable (`"rich"`), a str (`"text"`) or HTML.

    The one entry point the core modules reach, through `treetool._repr.lower`: a result
    object's `__rich_console__`, `__str__` and `_repr_html_` call it and never name a
    renderer. The lowering is found by class (`_registry`); an object without one is drawn as
    a tree (`"rich"`, `"html"`) or as its rich lowering in plain text (`"text"`).

    Example:
        >>> import treetool as tt
        >>> d = tt.diff({"a": 1}, {"a": 2})
        >>> print(lower(d, "text"))
        1 change  ~1 changed (1 value)
        dict[1]
        └── ~ ['a']  value  1 → 2
        >>> lower(d.changes[0], "text")
        '1 → 2'
        >>> lower(d, "html").startswith('<div class="treetool"')
        True
    """
    if medium == "html":
        from treetool.render.html import to_html

        return to_html(obj, **options)
    if medium == "text":
        fn = lowering(type(obj), "text")
        if fn is not None:
            return fn(obj, **options)
        from treetool.render.plain import to_text

        return to_text(lower(obj, "rich", **options))
    fn = lowering(type(obj), "rich")
    if fn is not None:
        return fn(obj, **options)
    return render(obj, **options)


def _renders_itself(obj: Any) -> bool:
    t = type(obj)
    if t.__module__.startswith("treetool") or t.__module__.startswith("rich"):
        return hasattr(t, "__rich_console__") or hasattr(t, "__rich__")
    return False


class _CallableModule(types.ModuleType):
    """`treetool.render` is both this package and the `render()` function.

    Importing any `treetool.render.*` module makes Python bind the package to the name
    `render` on `treetool`, which would hide the function; calling the package calls it.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return render(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

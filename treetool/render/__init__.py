"""Renderings of the Node model and of treetool's result objects.

`render(obj)` returns a rich renderable: result objects (TreeDiff, Summary, JaxprView,
Placement) render themselves; anything else is drawn as a tree of its Node model.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["render"]


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
    if _is_raw_jaxpr(obj):
        from .._jaxpr import JaxprView

        obj = JaxprView(obj)
    if type(obj).__name__ == "JaxprView" and hasattr(obj, "render"):
        return obj.render(depth=depth, width=width)
    if _renders_itself(obj):
        return obj
    from .text import TreeView

    return TreeView(obj, depth=depth, width=width, fold=fold, is_leaf=is_leaf)


def _is_raw_jaxpr(obj: Any) -> bool:
    """A `ClosedJaxpr` or `Jaxpr` from jax (drawn as a JaxprView, without paths)."""
    t = type(obj)
    return t.__name__ in ("ClosedJaxpr", "Jaxpr") and t.__module__.startswith("jax")


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

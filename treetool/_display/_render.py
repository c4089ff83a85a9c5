"""`render(obj)` and `lower(obj, medium)`: the front door to every drawing.

A result object (`TreeDiff`, `Summary`, `JaxprView`, `Placement`, `LeafPlacement`, a `Node`)
owns its lowerings (`__treetool_lower__`, see `_lowering._drawn`); anything else is drawn as
the tree of its Node model (`tt.view`). Nothing here is imported by the layers below.
"""

from __future__ import annotations

from typing import Any

from treetool._lowering._drawn import Medium
from treetool._public import set_module
from treetool._typetests import is_raw_jaxpr

__all__ = ["lower", "lowers_itself", "render"]


@set_module("treetool")
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
    return lower(obj, "rich", depth=depth, width=width, fold=fold, is_leaf=is_leaf)


def lower(obj: Any, medium: Medium, **options: Any) -> Any:
    """`obj` drawn in `medium`: a rich renderable (`"rich"`), a str (`"text"`) or HTML.

    A result draws itself (`__treetool_lower__`); a raw jaxpr is drawn as its `JaxprView`;
    any other object as a tree, or (in `"rich"`) as itself when it is one of treetool's or
    rich's renderables.

    Example:
        >>> import treetool as tt
        >>> d = tt.diff({"a": 1}, {"a": 2})
        >>> print(lower(d, "text"))
        1 change  ~1 changed (1 value)
        dict[1]
        └── ~ ['a']  value  1 → 2
        >>> lower(d, "html").startswith('<div class="treetool"')
        True
        >>> print(lower([1, 2], "text", depth=1))
        list[2]
        ├── [0]  1
        └── [1]  2
    """
    if is_raw_jaxpr(obj):
        from treetool._jaxpr._view import JaxprView

        obj = JaxprView(obj)
    if lowers_itself(obj):
        out = obj.__treetool_lower__(medium, **options)
        if out is not NotImplemented:
            return out
    elif medium == "rich" and _renders_itself(obj):
        return obj
    from treetool._tree._model import view

    is_leaf = options.pop("is_leaf", None)
    return view(obj, is_leaf=is_leaf).__treetool_lower__(medium, **options)


def lowers_itself(obj: Any) -> bool:
    """Whether `obj`'s class draws itself (`__treetool_lower__`), as treetool's results do.

    Example:
        >>> import treetool as tt
        >>> lowers_itself(tt.diff(1, 2)), lowers_itself({"a": 1})
        (True, False)
    """
    return callable(getattr(type(obj), "__treetool_lower__", None))


def _renders_itself(obj: Any) -> bool:
    t = type(obj)
    if t.__module__.startswith("treetool") or t.__module__.startswith("rich"):
        return hasattr(t, "__rich_console__") or hasattr(t, "__rich__")
    return False

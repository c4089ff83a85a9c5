"""The one seam between the core and the renderers: how a result object draws itself.

Core modules never import `render/`. A result object that draws itself (`__rich_console__`,
`__str__`, `_repr_html_`) calls `lower(obj, medium)` here, which imports `treetool.render`
on first use (the only core-to-render import, allowed by name in the import-linter contracts)
and finds the lowering registered for the object's class.

`ReprMixin` gives a class `_repr_html_` and `_repr_mimebundle_` (Jupyter, VS Code and
JupyterLab pick these up when the object is a cell's last line); `RichMixin` adds
`__rich_console__` for result classes a renderer registers a lowering for. Both are built on
demand from the same renderers as `tt.show`: nothing is imported or computed until asked.
"""

from __future__ import annotations

import io
from typing import Any, Literal

__all__ = ["Medium", "ReprMixin", "RichMixin", "lower", "plain_text"]

#: what a lowering draws to: a rich renderable, plain text, or an HTML fragment
Medium = Literal["rich", "text", "html"]

#: Width of the text/plain fallback (a notebook cell or a log, not a terminal).
TEXT_WIDTH = 100


def lower(obj: Any, medium: Medium, **options: Any) -> Any:
    """`obj` drawn by its registered lowering: `"rich"` (a renderable), `"text"` or `"html"`.

    Example:
        >>> import treetool as tt
        >>> print(lower(tt.diff([1], [1, 2]), "text"))
        1 change  +1 added
        list[2]
        ├── + [1]  int
        └── · 1 unchanged
    """
    from treetool.render import lower as render_lower  # the one core-to-render import (module doc)

    return render_lower(obj, medium, **options)


def plain_text(obj: Any, *, depth: int = 3, width: int = 20, is_leaf: Any = None) -> str:
    """The rich rendering of `obj` as plain text (no colour codes), for logs and text frontends.

    Example:
        >>> print(plain_text({"a": [1, 2]}, depth=1))
        dict[1]
        └── ['a']  list[2]
    """
    from rich.console import Console

    out = io.StringIO()
    console = Console(
        file=out,
        width=TEXT_WIDTH,
        color_system=None,
        force_terminal=False,
        force_jupyter=False,
        soft_wrap=False,
        markup=False,  # file text is never markup
    )
    console.print(lower(obj, "rich", depth=depth, width=width, is_leaf=is_leaf))
    return out.getvalue().rstrip("\n")


class ReprMixin:
    """`_repr_html_` and `_repr_mimebundle_` (text/html with a text/plain fallback).

    Example:
        >>> import treetool as tt
        >>> bundle = tt.view({"w": [1.0, 2.0]})._repr_mimebundle_()
        >>> sorted(bundle), bundle["text/html"].startswith('<div class="treetool"')
        (['text/html', 'text/plain'], True)
    """

    __slots__ = ()

    def _repr_html_(self) -> str:
        return str(lower(self, "html"))

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, str]:
        bundle = {"text/plain": plain_text(self), "text/html": self._repr_html_()}
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle


class RichMixin(ReprMixin):
    """`ReprMixin` plus `__rich_console__`: `rich.print(obj)` draws the registered lowering.

    Example:
        >>> import rich, treetool as tt
        >>> rich.print(tt.diff({"a": 1}, {"a": 2}))
        1 change  ~1 changed (1 value)
        dict[1]
        └── ~ ['a']  value  1 → 2
    """

    __slots__ = ()

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield lower(self, "rich")

"""Notebook display for treetool's objects: HTML where it renders, readable text elsewhere.

`ReprMixin` gives a class `_repr_html_` and `_repr_mimebundle_` (Jupyter, VS Code and
JupyterLab pick these up when the object is a cell's last line). Both are built on demand from
the same renderers as `tt.show`: nothing is imported or computed until a frontend asks.
"""

from __future__ import annotations

import io
from typing import Any

__all__ = ["ReprMixin", "plain_text"]

#: Width of the text/plain fallback (a notebook cell or a log, not a terminal).
TEXT_WIDTH = 100


def plain_text(obj: Any, *, depth: int = 3, width: int = 20, is_leaf: Any = None) -> str:
    """The rich rendering of `obj` as plain text (no colour codes), for logs and text frontends.

    Example:
        >>> print(plain_text({"a": [1, 2]}, depth=1))
        dict[1]
        └── ['a']  list[2]
    """
    from rich.console import Console

    from .render import render

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
    console.print(render(obj, depth=depth, width=width, is_leaf=is_leaf))
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
        from .render.html import to_html

        return to_html(self)

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, str]:
        bundle = {"text/plain": plain_text(self), "text/html": self._repr_html_()}
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

"""How a result draws itself: the `__treetool_lower__` protocol and the mixins built on it.

Each result class (`TreeDiff`, `Summary`, `Placement`, `JaxprView`, the `Node` model…) owns its
lowerings, as penzai's objects own their `__treescope_repr__`: its method
`__treetool_lower__(medium, **options)` imports its own lowering modules (`_diff/_rich.py`,
`_diff/_html.py`…) on first use and returns a rich renderable (`"rich"`), a str (`"text"`) or
an HTML fragment (`"html"`). Options it does not understand are ignored. A lowering module
never imports its result module back at run time, so no import cycle closes.

`Drawn` gives such a class `_repr_html_` and `_repr_mimebundle_` (Jupyter, VS Code and
JupyterLab pick these up when the object is a cell's last line); `RichDrawn` adds
`__rich_console__`. Nothing is imported or computed until asked.
"""

from __future__ import annotations

import io
from typing import Any, Literal

__all__ = ["TEXT_WIDTH", "Drawn", "Medium", "RichDrawn", "plain_text"]

#: what a lowering draws to: a rich renderable, plain text, or an HTML fragment
Medium = Literal["rich", "text", "html"]

#: Width of the text/plain fallback (a notebook cell or a log, not a terminal).
TEXT_WIDTH = 100


def plain_text(renderable: Any) -> str:
    """A rich renderable as plain text at `TEXT_WIDTH` (a notebook's text/plain, a log).

    Example:
        >>> import treetool as tt
        >>> print(plain_text(tt.view({"a": [1, 2]}).__treetool_lower__("rich", depth=1)))
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
    console.print(renderable)
    return out.getvalue().rstrip("\n")


class Drawn:
    """`_repr_html_` and `_repr_mimebundle_` (text/html with a text/plain fallback).

    A subclass defines `__treetool_lower__(medium, **options)`.

    Example:
        >>> import treetool as tt
        >>> bundle = tt.view({"w": [1.0, 2.0]})._repr_mimebundle_()
        >>> sorted(bundle), bundle["text/html"].startswith('<div class="treetool"')
        (['text/html', 'text/plain'], True)
    """

    __slots__ = ()

    def __treetool_lower__(self, medium: Medium, **options: Any) -> Any:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return str(self.__treetool_lower__("html"))

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, str]:
        text = plain_text(self.__treetool_lower__("rich", depth=3, width=20, is_leaf=None))
        bundle = {"text/plain": text, "text/html": self._repr_html_()}
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle


class RichDrawn(Drawn):
    """`Drawn` plus `__rich_console__`: `rich.print(obj)` draws its rich lowering.

    Example:
        >>> import rich, treetool as tt
        >>> rich.print(tt.diff({"a": 1}, {"a": 2}))
        1 change  ~1 changed (1 value)
        dict[1]
        └── ~ ['a']  value  1 → 2
    """

    __slots__ = ()

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.__treetool_lower__("rich")

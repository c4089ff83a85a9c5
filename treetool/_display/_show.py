"""`show()`: one call that does the right thing wherever it runs.

In a Jupyter kernel (JupyterLab, classic Notebook, VS Code, Colab) it displays a foldable HTML
view in the cell output; in an interactive terminal (python, IPython) it opens the TUI and
returns when you quit; anywhere else (scripts, pipes, CI logs) it prints the rich rendering.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from treetool._public import set_module

__all__ = ["environment", "show"]

Mode = Literal["html", "tui", "text"]
MODES = ("html", "tui", "text")


def environment() -> Mode:
    """Where `show()` would draw right now: `"html"`, `"tui"` or `"text"`.

    `"html"` inside a Jupyter kernel (any frontend that talks to ipykernel); `"tui"` in an
    interactive session (the python or IPython prompt) whose stdin and stdout are terminals;
    `"text"` otherwise. `TREETOOL_SHOW=html|tui|text` in the environment overrides it.

    Example:
        >>> environment()  # under pytest: not a kernel, not an interactive prompt
        'text'
    """
    forced = os.environ.get("TREETOOL_SHOW", "").strip().lower()
    if forced in MODES:
        return forced  # type: ignore[return-value]
    shell = _ipython_shell()
    if shell is not None and _is_kernel(shell):
        return "html"
    interactive = shell is not None or hasattr(sys, "ps1") or bool(sys.flags.interactive)
    if interactive and _is_terminal():
        return "tui"
    return "text"


@set_module("treetool")
def show(
    obj: Any,
    *,
    other: Any = None,
    mode: Mode | None = None,
    depth: int = 3,
    width: int = 20,
    is_leaf: Any = None,
    title: str | None = None,
) -> None:
    """Show a pytree, a `Node`, a `TreeDiff`, a `Summary`, a `JaxprView`, a `Placement` or a jaxpr.

    Args:
        obj: what to show.
        other: a second tree; shows `tt.diff(obj, other)` (in the TUI: `obj` with a Diff tab).
        mode: `"html"`, `"tui"` or `"text"`; by default `environment()` decides.
        depth: levels shown (open, in HTML) before folding.
        width: rows per node before `… N more`.
        is_leaf: treat the nodes it returns True for as leaves.
        title: the TUI's title; an identifier also names the root in copied paths. By
            default the TUI names the root as the calling code named `obj` (`tt.show(params)`
            copies `params['dense']['kernel']`), else `model`.

    `mode="html"` outside a notebook prints the HTML fragment (to save or pipe it).
    Summaries and placements have no TUI of their own: in `"tui"` mode they print.

    Example:
        >>> import numpy as np, treetool as tt
        >>> tt.show({"w": np.zeros((2, 3), np.float32)}, mode="text")
        dict[1]  6 params · 24 B
        └── ['w']  f32[2,3]  6 params · 24 B
    """
    if mode is None:
        mode = environment()
    elif mode not in MODES:
        raise ValueError(f"show: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if other is not None and mode != "tui":
        from treetool._diff._tree_diff import diff

        obj = diff(obj, other, is_leaf=is_leaf)
    if mode == "html":
        _show_html(obj, depth=depth, width=width, is_leaf=is_leaf)
    elif mode == "tui" and _tui_can_show(obj):
        if title is None:  # the root is named as the caller named it: `y` copies `model.w`
            title = _caller_name(obj, sys._getframe(1))
        _show_tui(obj, other=other, title=title)
    else:
        _show_text(obj, depth=depth, width=width, is_leaf=is_leaf)


def _caller_name(obj: Any, frame: Any) -> str:
    """The name the caller's frame binds to `obj` (its locals, then its globals), so the
    TUI's copied paths paste back into that code; `model` when no name holds it.

    Example:
        >>> params = {"w": 1}
        >>> _caller_name(params, sys._getframe()), _caller_name({"w": 2}, sys._getframe())
        ('params', 'model')
    """
    try:
        for scope in (frame.f_locals, frame.f_globals):
            for name, value in scope.items():
                if value is obj and name.isidentifier() and not name.startswith("_"):
                    return name
    except Exception:  # a frame whose locals cannot be read: the default name
        pass
    return "model"


# --- the three ways to draw ---------------------------------------------------------------


def _show_html(obj: Any, *, depth: int, width: int, is_leaf: Any) -> None:
    from treetool._display._html import to_html
    from treetool._display._render import lower
    from treetool._lowering._drawn import plain_text

    html = to_html(obj, depth=depth, width=width, is_leaf=is_leaf)
    display = _ipython_display()
    if display is None:
        sys.stdout.write(html + "\n")
        return
    text = plain_text(lower(obj, "rich", depth=depth, width=width, is_leaf=is_leaf))
    display({"text/html": html, "text/plain": text}, raw=True)


def _show_tui(obj: Any, *, other: Any, title: str | None) -> None:
    from treetool._diff._tree_diff import TreeDiff
    from treetool.tui import run

    if isinstance(obj, TreeDiff):
        obj, other = obj.a, obj.b  # the Diff tab recomputes it next to both trees
    run(obj, title=title, other=other)


def _show_text(obj: Any, *, depth: int, width: int, is_leaf: Any) -> None:
    from rich.console import Console

    from treetool._display._render import render
    from treetool._lowering._plain import output_width

    # COLUMNS, the terminal's width, or no wrapping (a pipe, a log): never 80 columns mid-line
    Console(soft_wrap=False, markup=False, emoji=False, width=output_width()).print(
        render(obj, depth=depth, width=width, is_leaf=is_leaf)
    )


def _tui_can_show(obj: Any) -> bool:
    """Whether the TUI has a view for `obj` (any pytree, a Node, a diff or a jaxpr)."""
    from treetool._diff._tree_diff import TreeDiff
    from treetool._sharding._devices import LeafPlacement, Placement
    from treetool._summary._summary import Summary, SummaryRow

    if isinstance(obj, (Summary, SummaryRow, Placement, LeafPlacement)):
        return False
    return not (isinstance(obj, TreeDiff) and obj.a is None and obj.b is None)


# --- environment probes -------------------------------------------------------------------


def _ipython_shell() -> Any:
    """The running IPython shell, without importing IPython when it is not already loaded."""
    mod = sys.modules.get("IPython")
    if mod is None:
        return None
    try:
        return mod.get_ipython()
    except Exception:  # a half-initialised IPython: treat as absent
        return None


def _is_kernel(shell: Any) -> bool:
    """A Jupyter kernel (ZMQ shell, Colab's, VS Code's) rather than a terminal IPython."""
    terminal = _loaded_class("IPython.terminal.interactiveshell", "TerminalInteractiveShell")
    if terminal is not None and isinstance(shell, terminal):
        return False
    return "ipykernel" in sys.modules or hasattr(shell, "kernel")


def _loaded_class(module: str, name: str) -> type | None:
    """`module.name` if that module is already imported (a shell's class: nothing imported)."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls if isinstance(cls, type) else None


def _is_terminal() -> bool:
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def _ipython_display() -> Any:
    """IPython's `display`, when an IPython shell is running."""
    if _ipython_shell() is None:
        return None
    from IPython.display import display

    return display

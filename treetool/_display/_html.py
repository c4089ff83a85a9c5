"""HTML views for notebooks: one self-contained fragment per object, foldable without script.

`to_html(obj)` draws a pytree (or a `Node`), a `TreeDiff`, a `Summary`, a `JaxprView` (or a
raw jax `ClosedJaxpr`/`Jaxpr`) or a `Placement` (through the HTML lowering the result owns,
`_diff/_html.py`, `_tree/_html.py`…) as one `<div class="treetool">` holding its own
scoped `<style>`: nothing is fetched, and it reads the same in JupyterLab, classic Notebook
and VS Code, light or dark. The words are the terminal's (`_lowering._labels.label`, `fmt_bytes`,
the diff's signs); every text taken from the tree is escaped.
"""

from __future__ import annotations

from typing import Any

from treetool._display._render import lower

__all__ = ["to_html"]


def to_html(
    obj: Any, *, depth: int = 3, width: int = 20, is_leaf: Any = None, stats: bool = True
) -> str:
    """A self-contained HTML fragment of a pytree, a Node or a treetool result object.

    Args:
        obj: a pytree, a `Node`, a `TreeDiff`, a `Summary`, a `JaxprView`, a jax
            `ClosedJaxpr`/`Jaxpr`, or a `Placement`.
        depth: levels open at first (deeper levels are drawn folded, within a budget); for a
            jaxpr, levels of nested jaxprs open. A diff is drawn whole (up to 1000 changes).
        width: rows per node before `… N more` (the rest sit in that closed fold, within the
            budget); for a jaxpr, equations per jaxpr before `… N more equations`.
        is_leaf: treat the nodes it returns True for as leaves.
        stats: min/max/mean/std and a histogram on array leaves (in-memory arrays within a
            byte budget; file-backed leaves are never read).

    Returns:
        One `<div class="treetool">` with a scoped `<style>` and an optional copy-path
        script; it folds and reads fine with scripts disabled.

    Example:
        >>> import numpy as np
        >>> page = to_html({"w": np.ones((2, 3), np.float32), "<b>": "x"})
        >>> page.startswith('<div class="treetool"'), "f32[2,3]" in page
        (True, True)
        >>> "['&lt;b&gt;']" in page.replace("&#x27;", "'"), "<b>" in page
        (True, False)
    """
    return str(lower(obj, "html", depth=depth, width=width, is_leaf=is_leaf, stats=stats))

"""The treetool terminal UI (Textual), installed as `treetool.tui`.

`run(obj)` opens the app on any pytree (a model, an optimizer state, a loaded checkpoint) and
returns when the user quits. Importing `treetool` never imports Textual; importing
`treetool.tui` does, and the app module itself is loaded on first use.

Other parts of treetool add tabs through `treetool.tui.tabs.register_tab`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import TreetoolApp

__all__ = ["TreetoolApp", "run"]


def run(
    obj: Any,
    *,
    title: str | None = None,
    other: object | None = None,
    file_facts: dict[str, Any] | None = None,
) -> None:
    """Open the terminal UI on `obj` and return when the user quits.

    Args:
        obj: any pytree: a model, an optimizer state, a loaded checkpoint.
        title: shown in the header; an identifier (`"model"`) is also the root name of the
            copied path expressions (`model.layers[0].weight`).
        other: a second tree; when given, a Diff tab shows `treetool.diff(obj, other)`.
        file_facts: what the file says about itself (`metadata`: safetensors `__metadata__`;
            `step`/`steps`: an orbax run), shown in the root's details.

    Example:
        >>> import treetool.tui
        >>> callable(treetool.tui.run)
        True
    """
    from .app import TreetoolApp

    TreetoolApp(obj, title=title, other=other, file_facts=file_facts).run()


def __getattr__(name: str) -> Any:
    if name == "TreetoolApp":
        from .app import TreetoolApp

        return TreetoolApp
    raise AttributeError(f"module 'treetool.tui' has no attribute {name!r}")

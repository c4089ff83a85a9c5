"""The treetool terminal UI (Textual), installed as `treetool.tui`.

`run(obj)` opens the app on any pytree (a model, an optimizer state, a loaded checkpoint) and
returns when the user quits. Importing `treetool` never imports Textual; importing
`treetool.tui` does, and the app module itself is loaded on first use.

Other parts of treetool add tabs through `treetool.tui.tabs.register_tab`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treetool.tui.app import TreetoolApp

    from treetool._reading._read import Reading

from treetool._errors import TreetoolError

__all__ = ["AppCrashed", "TreetoolApp", "run"]


class AppCrashed(TreetoolError):
    """The terminal UI stopped on an unexpected error; the message is that error, one line."""


def run(
    obj: Any,
    *,
    title: str | None = None,
    other: object | None = None,
    file_facts: dict[str, Any] | None = None,
    note: str | None = None,
    reading: Reading | None = None,
    stats_limit: int | None = None,
    tab: str | None = None,
) -> None:
    """Open the terminal UI on `obj` and return when the user quits.

    Args:
        obj: any pytree: a model, an optimizer state, a loaded checkpoint.
        title: shown in the header; an identifier (`"model"`) is also the root name of the
            copied path expressions (`model.layers[0].weight`).
        other: a second tree; when given, a Diff tab shows `treetool.diff(obj, other)`.
        file_facts: what the file says about itself (`metadata`: safetensors `__metadata__`;
            `step`/`steps`: an orbax run), shown in the root's details.
        note: one line shown in the header and as a toast (the CLI's "not executed: pass
            --trust" note).
        reading: a file for the app to read itself (`obj` is then ignored): the app opens at
            once and shows the tree as it is read (`treetool._reading._read.Reading`); the
            read's error, if any, is raised once the app has closed.
        stats_limit: remote leaves over this many bytes get their stats only on `S`
            (None: 8 MB); each leaf is read once for all its stats and its preview.
        tab: the tab to open on (`"diff"` with `other`); None: the Tree tab.

    Raises:
        AppCrashed: the app stopped on an error (the `treetool` command prints it as one line
            and exits with status 2).

    Example:
        >>> import treetool.tui
        >>> callable(treetool.tui.run)
        True
    """
    from treetool.tui.app import TreetoolApp

    app = TreetoolApp(
        obj,
        title=title,
        other=other,
        file_facts=file_facts,
        note=note,
        reading=reading,
        stats_limit=stats_limit,
        tab=tab,
    )
    app.run()
    if reading is not None and reading.error is not None:
        raise reading.error
    _finish(app)


def _finish(app: TreetoolApp) -> None:
    """Raise `AppCrashed` when the app ended on an error (status 1, one line in `crash`)."""
    if app.crash is not None or (app.return_code or 0) != 0:
        what = app.crash or f"exit status {app.return_code}"
        raise AppCrashed(f"the terminal UI stopped: {what}")


def __getattr__(name: str) -> Any:
    if name == "TreetoolApp":
        from treetool.tui.app import TreetoolApp

        return TreetoolApp
    raise AttributeError(f"module 'treetool.tui' has no attribute {name!r}")

"""The `?` help screen: every key binding of the app and its widgets, from their BINDINGS."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen", "bindings_table"]

_INTRO = (
    "treetool browses a pytree lazily: children are added when a node is opened, wide nodes "
    "in pages (select '… more'), runs of identical siblings fold into one row. Search takes a "
    "glob (**.bias, layers[*].weight) or plain text. Ctrl+P opens the command palette."
)


def key_display(key: str) -> str:
    """How a key is shown: `?` for question_mark, `/` for slash, `shift+left`, `enter`.

    Example:
        >>> key_display("question_mark"), key_display("slash"), key_display("ctrl+p")
        ('?', '/', '^p')
    """
    modifiers, _, name = key.rpartition("+")
    shown = format_key(name)
    if modifiers == "ctrl":
        return f"^{shown}"
    return f"{modifiers}+{shown}" if modifiers else shown


def bindings_table(groups: list[tuple[str, list[BindingType]]]) -> Table:
    """A table of (key, description) per group of bindings; a key is listed once per group,
    and the numbered tab keys are one row (`1…6`).

    Example:
        >>> from textual.binding import Binding
        >>> keys = [Binding(str(n), f"tab_number({n})", f"Tab {n}", tooltip="Nth tab") for n in (1, 2)]
        >>> t = bindings_table([("Tabs", keys + [Binding("q", "quit", "Quit")])])
        >>> [str(c) for c in t.columns[0].cells]
        ['Tabs', '1…2', 'q', '']
    """
    t = Table(box=None, padding=(0, 2), show_header=False, expand=True)
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column()
    for title, bindings in groups:
        seen: set[str] = set()
        rows: list[tuple[str, str]] = []
        numbered: list[Binding] = []
        for b in bindings:
            if not isinstance(b, Binding):
                continue
            if b.action.startswith("tab_number("):
                numbered.append(b)
                continue
            keys = [k.strip() for k in b.key.split(",")]
            fresh = [k for k in keys if k not in seen]
            if not fresh:
                continue
            seen |= set(fresh)
            rows.append((", ".join(key_display(k) for k in fresh), b.tooltip or b.description))
        if numbered and numbered[0].key not in seen:
            seen |= {b.key for b in numbered}
            tip = "Show the Nth tab (1 Tree, 2 Leaves, then Diff, Jaxpr, Devices, Port when shown)"
            rows.insert(0, (f"{numbered[0].key}…{numbered[-1].key}", tip))
        if not rows:
            continue
        t.add_row(Text(title, style="bold underline"), "")
        for keys_text, tip in rows:
            t.add_row(Text(keys_text), Text(tip))  # `[` is a key, not markup
        t.add_row("", "")
    return t


class HelpScreen(ModalScreen[None]):
    """Lists every binding; escape, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape,q,question_mark",
            "dismiss",
            "Close help",
            tooltip="Close this screen",
            id="help.close",
        ),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 100%; height: 90%; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    HelpScreen #help-intro { margin-bottom: 1; color: $text-muted; }
    """

    def __init__(self, groups: list[tuple[str, list[BindingType]]]) -> None:
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with VerticalScroll() as v:
            v.border_title = "treetool help"
            v.border_subtitle = "escape to close"
            yield Static(_INTRO, id="help-intro")
            yield Static(bindings_table(self.groups), id="help-keys")

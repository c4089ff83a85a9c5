"""The search bar: `/` opens it; a glob or a substring; results update as you type."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import var
from textual.widgets import Input, Label

from treetool._text import safe

__all__ = ["SearchBar"]


class SearchBar(Horizontal):
    """An input plus a match counter above the footer, hidden until `/`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "close",
            "Close search",
            tooltip="Close the search bar and clear it",
            id="search.close",
        ),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | enter | Jump to the first match and go back to the tree. |
    | escape | Close the search and clear the matches. |
    """

    DEFAULT_CSS = """
    SearchBar { height: 1; display: none; background: $panel; }
    SearchBar.-open { display: block; }
    SearchBar > Label { width: auto; padding: 0 1; color: $text-muted; }
    SearchBar > Input { border: none; height: 1; width: 1fr; padding: 0; background: $panel; }
    SearchBar > Input:focus { border: none; }
    """

    def compose(self) -> ComposeResult:
        yield Label("/", id="search-prompt")
        yield Input(placeholder="glob (**.bias, layers[*].weight) or text", id="search-input")
        yield Label("", id="search-count")

    def open(self) -> None:
        """Show the bar and focus its input."""
        self.add_class("-open")
        # focus now, not after a refresh: keys typed right after `/` go to the input
        self.screen.set_focus(self.query_one(Input))

    def action_close(self) -> None:
        """Hide the bar and clear the search."""
        self.remove_class("-open")
        self.query_one(Input).value = ""
        self.app.action_focus_tree()  # type: ignore[attr-defined]

    #: the match counter (`3/12`, `no match`, `searching…`); the app binds it to its
    #: `search_count`
    count: var[str] = var("", init=False)

    def watch_count(self, text: str) -> None:
        # plain Content: a glob error quoting `[` or file text is shown, never parsed
        self.query_one("#search-count", Label).update(Content(safe(text)))

"""The app's command-palette entries and the Tree keys the help screen lists."""

from __future__ import annotations

from textual.binding import Binding

__all__ = ["COMMANDS", "TREE_KEYS"]


#: keys of Textual's Tree that the help screen lists with ours
TREE_KEYS: tuple[Binding, ...] = (
    Binding("up,down", "", "Move", tooltip="Move the cursor"),
    Binding(
        "enter,space", "", "Toggle", tooltip="Open or close a node; on '… more', add the next page"
    ),
    Binding("shift+left", "", "Parent", tooltip="Cursor to the parent"),
    Binding("shift+up,shift+down", "", "Siblings", tooltip="Previous, next sibling"),
)

#: (title, help, action) of the command palette's entries (tabs beyond Leaves are added
#: by the app, one per tab shown)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("Search paths", "Filter and highlight paths by glob or text (/)", "search"),
    ("Next match", "Jump to the next search match (n)", "next_match"),
    ("Previous match", "Jump to the previous search match (N)", "prev_match"),
    ("Copy path as expression", "Copy model.layers[0].weight-style path (y)", "copy_path"),
    ("Copy keystr path", "Copy the jax keystr form .layers[0].weight (Y)", "copy_keystr"),
    ("Show Tree tab", "The lazy tree (t)", "show_tab('tree')"),
    ("Show Leaves tab", "Every leaf in a sortable table (L)", "show_tab('leaves')"),
    ("Toggle details pane", "Show or hide the details pane (d)", "toggle_details"),
    ("Compute stats", "Stats of the selected leaf, even a big one (S)", "stats"),
    ("Clear search", "Close the search and clear its matches (escape)", "clear_search"),
    ("Sort leaves by next column", "In the Leaves tab (s)", "sort_leaves"),
    ("Help", "Every key binding (?)", "help"),
)

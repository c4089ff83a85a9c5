"""The app's command-palette entries and the Tree keys the help screen lists."""

from __future__ import annotations

from textual.binding import Binding, BindingType

__all__ = ["APP_BINDINGS", "COMMANDS", "TREE_KEYS"]


#: keys of the tree (RowTree's, as Textual's Tree has them) that the help screen lists with ours
TREE_KEYS: tuple[Binding, ...] = (
    Binding("up,down", "", "Move", tooltip="Move the cursor"),
    Binding(
        "enter,space", "", "Toggle", tooltip="Open or close a node; on '… more', add the next page"
    ),
    Binding("shift+left", "", "Parent", tooltip="Cursor to the parent"),
    Binding("shift+up,shift+down", "", "Siblings", tooltip="Previous, next sibling"),
    Binding("home,end", "", "First, last", tooltip="The first row, the last row"),
    Binding("pageup,pagedown", "", "Page", tooltip="One page up, one page down"),
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

#: the app's own keys (`TreetoolApp.BINDINGS`; its docstring has the table)
APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", tooltip="Quit treetool", id="app.quit"),
    Binding("question_mark", "help", "Help", tooltip="Show every key", id="app.help"),
    Binding("slash", "search", "Search", tooltip="Search paths by glob or text", id="app.search"),
    Binding("n", "next_match", "Next", tooltip="Jump to the next match", id="app.next"),
    Binding(
        "N",
        "prev_match",
        "Prev",
        show=False,
        tooltip="Jump to the previous match",
        id="app.prev",
    ),
    Binding(
        "y",
        "copy_path",
        "Copy path",
        tooltip="Copy the path as an expression (model.layers[0].w)",
        id="app.copy",
    ),
    Binding(
        "Y",
        "copy_keystr",
        "Copy keystr",
        show=False,
        tooltip="Copy the path in keystr form (.layers[0].w)",
        id="app.copy_keystr",
    ),
    Binding(
        "t",
        "show_tab('tree')",
        "Tree",
        show=False,
        tooltip="Show the Tree tab",
        id="app.tab_tree",
    ),
    Binding(
        "L",
        "show_tab('leaves')",
        "Leaves",
        tooltip="Show the Leaves tab",
        id="app.tab_leaves",
    ),
    *(
        Binding(
            str(n),
            f"tab_number({n})",
            f"Tab {n}",
            show=False,
            tooltip=f"Show tab {n} (1 Tree, 2 Leaves, then Diff, Jaxpr, Devices…)",
            id=f"app.tab_{n}",
        )
        for n in range(1, 7)
    ),
    Binding(
        "escape",
        "clear_search",
        "Clear search",
        show=False,
        tooltip="Clear the search and its matches",
        id="app.clear_search",
    ),
    Binding(
        "S",
        "stats",
        "Stats",
        show=False,
        tooltip="Compute stats of a big leaf (reads its data)",
        id="app.stats",
    ),
    Binding(
        "d",
        "toggle_details",
        "Details",
        tooltip="Show or hide the details pane",
        id="app.details",
    ),
]

"""The treetool Textual app: a lazy tree, a details pane, a Leaves table, search and tabs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path as FilePath
from typing import Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane
from textual.worker import Worker, get_current_worker
from treetool.tui._app_reading import ReadingApp
from treetool.tui._crash import CrashLog
from treetool.tui._file_reader import FileReader
from treetool.tui._gc import freeze, frozen_after, hand_back, take_over
from treetool.tui._workers import report_failure
from treetool.tui.commands import APP_BINDINGS, COMMANDS, TREE_KEYS
from treetool.tui.messages import (
    IndexReady,
    ItemFocused,
    LeafChosen,
    NodeFocused,
    SearchDone,
    TabItem,
)
from treetool.tui.screens import HelpScreen
from treetool.tui.tabs import TabSpec, load_tab_modules, tabs_for
from treetool.tui.widgets import DetailsPane, DiffTab, LeavesTable, PytreeTree, SearchBar, TotalsBar
from treetool.tui.widgets.totals import totals_text

from treetool._reading._read import NotReadYet, Reading
from treetool._text import safe
from treetool._tree._chain import expression, node_chain
from treetool._tree._leaf_index import Cancelled, LeafIndex
from treetool._tree._model import Aggregates, Node, view

__all__ = ["TreetoolApp", "root_name_for"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def root_name_for(title: str | None) -> str:
    """The name copied path expressions start with: `model` for title "model" or
    "pkg.mod:model", else `tree`.

    Example:
        >>> root_name_for("model"), root_name_for("examples.mlp:params"), root_name_for("a.npz")
        ('model', 'params', 'tree')
    """
    if not title:
        return "tree"
    name = title.rsplit(":", 1)[-1] if ":" in title else title
    return name if _IDENT.match(name) else "tree"


def weights_only_verdict(file_facts: dict[str, Any] | None) -> str:
    """The header's word on a torch file: `weights_only: accepted` or `weights_only: refused`
    (the root's details say why); "" for other files.

    Example:
        >>> weights_only_verdict({"torch": {"weights_only": {"accepted": True}}})
        'weights_only=True: accepted'
        >>> weights_only_verdict({"torch": {"weights_only": {"accepted": False}}}), weights_only_verdict(None)
        ('weights_only=True: refused (see the root)', '')
    """
    torch = (file_facts or {}).get("torch")
    if not isinstance(torch, dict) or not isinstance(torch.get("weights_only"), dict):
        return ""
    if torch["weights_only"].get("accepted"):
        return "weights_only=True: accepted"
    return "weights_only=True: refused (see the root)"


class TreetoolApp(ReadingApp):
    """Browse a pytree: `TreetoolApp(tree).run()`, or `treetool.tui.run(tree)`.

    Args:
        obj: any pytree.
        title: shown in the header; also names the root in copied expressions.
        other: a second tree: a Diff tab shows `treetool.diff(obj, other)`.
        is_leaf: treat the nodes it returns True for as leaves.
        note: a line shown in the header and as a toast when the app opens.
        reading: a file for the app to read itself (`obj` is then ignored): the app opens at
            once and shows the tree as the file is read (see `treetool._reading`).
        stats_limit: remote leaves over this many bytes show their facts and get their stats
            only when asked (key S); None: 8 MB. Local leaves: 256 MB.
        tab: the id of the tab to open on (`"diff"`, `"leaves"`); None: the Tree tab.
    """

    CSS_PATH = str(FilePath(__file__).with_name("app.tcss"))  # absolute: subclasses live elsewhere
    TITLE = "treetool"
    #: seconds the cursor must rest on a node before the details pane follows it
    DETAILS_DELAY: ClassVar[float] = 0.06
    #: seconds typing must pause before the tree follows the search (lights, opens)
    FOLLOW_DELAY: ClassVar[float] = 0.12

    #: the leaf index of the whole tree (None until built): the Leaves table is bound to it
    index: var[LeafIndex | None] = var(None, init=False)
    #: its totals: the tree's root row and the details pane are bound to them
    totals: var[Aggregates | None] = var(None, init=False, always_update=True)
    #: the totals line (or the progress of a read, or a failure): the totals bar is bound to it
    totals_line: var[Text] = var(lambda: totals_text(None, None), init=False)
    #: the search bar's match counter
    search_count: var[str] = var("", init=False)

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS
    """
    | Key(s) | Description |
    | :- | :- |
    | q | Quit. |
    | ? | Help: every key. |
    | / | Search by glob (`**.bias`) or text; enter jumps to the first match. |
    | n, N | Next, previous match. |
    | escape | Clear the search. |
    | y, Y | Copy the path: as an expression (`model.layers[0].weight`), in keystr form. |
    | t, L | Tree tab, Leaves tab. |
    | 1 … 6 | The Nth tab (Tree, Leaves, then Diff, Jaxpr, Devices when shown). |
    | d | Show or hide the details pane. |
    | S | Compute the stats of a leaf over 256 MB (not automatic). |
    | ctrl+p | Command palette: every action. |
    """

    def __init__(
        self,
        obj: Any,
        *,
        title: str | None = None,
        other: object | None = None,
        is_leaf: Any = None,
        file_facts: dict[str, Any] | None = None,
        note: str | None = None,
        reading: Reading | None = None,
        stats_limit: int | None = None,
        tab: str | None = None,
    ) -> None:
        super().__init__()
        #: the tab shown first (`"diff"` for `treetool diff`); None: Tree
        self.initial_tab = tab
        #: remote leaves over this many bytes get stats only on `S` (None: the pane's 8 MB)
        self.stats_limit = stats_limit
        #: the file the app reads itself (None: `obj` is the whole tree)
        self.reader: FileReader | None = None
        if reading is not None:
            obj = NotReadYet()
            self.reader = FileReader(self, reading)
        self.obj = obj
        self.file_facts = file_facts
        self.other = other
        self.is_leaf = is_leaf
        self.root_name = root_name_for(title)
        self.title = "treetool"
        self.sub_title = safe(title or type(obj).__name__)  # a file name: plain, escaped
        #: a line for the header and a toast (the CLI's "not executed: pass --trust")
        self.note = note
        if note:
            self.sub_title = f"{self.sub_title} · ⚠ {note}"
        verdict = weights_only_verdict(file_facts)
        if verdict:  # a torch file: what torch.load(weights_only=True) would do, in the header
            self.sub_title = f"{self.sub_title} · {verdict}"
        self.model: Node = view(obj, is_leaf)
        #: the tree is frozen out of the collector's sight here (see `_gc`): unfrozen at exit
        take_over()
        with frozen_after():  # open the root now: a wide one is millions of small objects
            try:
                self.model.is_leaf  # noqa: B018
            except Exception:  # its row shows the error
                pass
        self.matches: list[str] = []
        self.match_pos = -1
        self.node: Node = self.model
        #: Textual's traceback of an error that ends the app, kept for `crash`
        self.crash_log = CrashLog()
        self.error_console = self.crash_log.console
        self._tab_errors: list[str] = []
        #: tab id -> what its cursor points at (Diff, Jaxpr, Devices, Port: not tree nodes)
        self.tab_items: dict[str, TabItem] = {}
        self._details_timer: Timer | None = None
        #: the search's matches and the way to its first, for the tree once typing pauses
        self._follow: tuple[AbstractSet[str], list[tuple[Node, int]] | None] | None = None
        self._follow_timer: Timer | None = None
        load_tab_modules(on_error=lambda name, e: self._tab_errors.append(f"{name}: {e}"))
        self.extra_tabs: list[TabSpec] = tabs_for(
            obj, on_error=lambda spec, e: self._tab_errors.append(f"tab {spec.id}: {e}")
        )

    # --- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="🌳")
        yield TotalsBar(totals_text(None, None), id="totals").data_bind(
            line=TreetoolApp.totals_line
        )
        with Horizontal(id="main"):
            with TabbedContent(id="tabs", initial="tree"):
                with TabPane("Tree", id="tree"):
                    yield PytreeTree(self.model, self.root_name, id="tree-view").data_bind(
                        TreetoolApp.totals
                    )
                with TabPane("Leaves", id="leaves"):
                    yield LeavesTable(id="leaves-table").data_bind(TreetoolApp.index)
                if self.other is not None:
                    with TabPane("Diff", id="diff"):
                        yield DiffTab(self.obj, self.other, id="diff-tab")
                for spec in self.extra_tabs:
                    with TabPane(spec.title, id=spec.id):
                        yield spec.make(self.obj)
            yield DetailsPane(
                self.root_name,
                self.model,
                id="details",
                file_facts=self.file_facts,
                stats_limit=self.stats_limit,
            ).data_bind(TreetoolApp.totals)
        yield SearchBar(id="search").data_bind(count=TreetoolApp.search_count)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(PytreeTree).focus()
        self.query_one(DetailsPane).show(self.model)
        if self.initial_tab and self.initial_tab in self.tab_ids():
            self.call_after_refresh(self.action_show_tab, self.initial_tab)
        if self.reader is not None:
            self.reader.start()
        if self.note:
            self.notify(self.note, severity="warning", timeout=8, markup=False)
        for err in self._tab_errors:
            self.notify(
                safe(f"a tab failed and is left out: {err}"),
                severity="error",
                timeout=8,
                markup=False,
            )

    def on_ready(self) -> None:
        # the first frame is on screen: now index every leaf, off the UI thread
        if self.reader is None:
            self._build_index()

    def on_unmount(self) -> None:
        hand_back()

    def on_resize(self, event: events.Resize) -> None:
        # the new size, not `self.size`, which can still be the previous one here
        self.query_one("#details").set_class(event.size.width < 80, "-narrow")

    # --- workers ---------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def _build_index(self) -> None:
        worker = get_current_worker()
        # millions of small objects that live as long as the app: out of the collector's sight
        with frozen_after(keep=lambda: not worker.is_cancelled):
            try:
                index = LeafIndex.build(
                    self.obj, self.is_leaf, cancelled=lambda: worker.is_cancelled
                )
            except Cancelled:
                return
            if len(index):  # warm the key maps of the wide nodes (cursor moves use them)
                try:
                    node_chain(self.model, index.paths[-1])
                except KeyError:
                    pass
        if worker.is_cancelled:
            return
        self.post_message(IndexReady(index))
        try:  # the text search's haystack, so the first keystroke is answered at once
            index.haystack(cancelled=lambda: worker.is_cancelled)
        except Cancelled:
            return

    def on_index_ready(self, message: IndexReady) -> None:
        self.index = message.index

    def watch_index(self, index: LeafIndex | None) -> None:
        freeze()  # what the first paint and the first workers made lives on too (see `_gc`)
        if index is None or not self._alive():
            return
        self.totals_line = totals_text(index.totals, index.devices_count())
        self.totals = index.totals
        query = self.query_one("#search-input", Input).value
        if query:
            self._search(query)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def _search(self, query: str) -> None:
        """Match in a worker; the next keystroke cancels it (`exclusive`)."""
        from treetool._tree._search import is_glob, search

        worker = get_current_worker()
        index = self.index
        if not is_glob(query) and index is None:
            self.post_message(SearchDone(query, None))
            return
        try:
            found, rows = search(
                query, index, self.obj, self.is_leaf, cancelled=lambda: worker.is_cancelled
            )
        except Cancelled:
            return
        except Exception as e:  # a malformed glob: say why in the bar
            if not worker.is_cancelled:
                self.post_message(SearchDone(query, [], error=f"{e}"))
            return
        matched: set[str] = set()
        for start in range(0, len(found), 1 << 16):  # a few ms a step: the UI thread gets the GIL
            if worker.is_cancelled:
                return
            matched |= set(found[start : start + (1 << 16)])
        chain = None
        if found:  # the way to the first match, found here rather than on the UI thread
            try:
                chain = node_chain(self.model, found[0])
            except KeyError:
                chain = None
        if not worker.is_cancelled:
            self.post_message(SearchDone(query, found, rows, matched, "", chain))

    def on_search_done(self, message: SearchDone) -> None:
        query, found, rows, matched = message.query, message.found, message.rows, message.matched
        error, chain = message.error, message.chain
        if not self._alive() or query != self.query_one("#search-input", Input).value:
            return
        if found is None:
            self.search_count = "indexing…"
            return
        self.matches = found
        self.match_pos = -1
        self.query_one(LeavesTable).set_filter_rows(rows if query.strip() else None)
        # the tree lights the matches and opens onto the first once typing pauses: a page
        # added and the tree redrawn per key held up the echo of the next key
        self._follow = (matched, chain if found else None)
        if self._follow_timer is not None:
            self._follow_timer.stop()
        self._follow_timer = self._after(self.FOLLOW_DELAY, self._follow_search)
        if error:
            self.search_count = error
        else:
            self.search_count = f"{len(found):,} match{'es' if len(found) != 1 else ''}"

    def _follow_search(self, reveal: bool = True) -> None:
        """Light the matches in the tree and (with `reveal`) open it onto the first match."""
        if self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None
        follow, self._follow = self._follow, None
        if follow is None or not self._alive():
            return
        matched, chain = follow
        tree = self.query_one(PytreeTree)
        tree.matches = matched
        if reveal and chain is not None and self.query_one(TabbedContent).active == "tree":
            tree.reveal_chain(chain)  # incremental: only the page that holds it is added

    def _after(self, delay: float, callback: Callable[[], object]) -> Timer | None:
        """`callback` in `delay` seconds (a timer to stop), or at the next pass of the message
        loop for a delay of 0 (what the tests set)."""
        if delay > 0:
            return self.set_timer(delay, callback)
        self.call_later(callback)
        return None

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def show_failure(self, text: str) -> None:
        """A failed app worker (the leaf index, a search): say it where its result goes."""
        if not self._alive():
            return
        if text.startswith("index"):
            self.totals_line = Text(text, style="bold red")
        else:
            self.search_count = text

    # --- crashes -----------------------------------------------------------------------------

    @property
    def crash(self) -> str | None:
        """ "Type: message" of the error that ended the app (exit status 1), None when none did.

        `treetool.tui.run` raises it, so the CLI prints one line and exits non-zero;
        `TREETOOL_DEBUG=1` also prints Textual's full traceback (see `_crash`).
        """
        return self.crash_log.line()

    # --- events ----------------------------------------------------------------------------

    def on_node_focused(self, message: NodeFocused) -> None:
        self._focus(message.node)

    def on_item_focused(self, message: ItemFocused) -> None:
        """A tab's cursor moved (a change, an equation, a device, a plan row): the details
        pane and `y`/`Y` follow it while that tab is the visible one."""
        self.tab_items[message.tab] = message.item
        if self._alive() and self.query_one(TabbedContent).active == message.tab:
            self.query_one(DetailsPane).show_item(message.item)

    def tab_item(self) -> TabItem | None:
        """What the visible tab's cursor points at, when it is not a tree node."""
        active = self.query_one(TabbedContent).active
        return None if active in ("tree", "leaves", "") else self.tab_items.get(active)

    def _focus(self, node: Node) -> None:
        # The pane follows the cursor once it rests: holding a key down only repaints rows.
        self.node = node
        if self._details_timer is not None:
            self._details_timer.stop()
        self._details_timer = self._after(self.DETAILS_DELAY, self._show_details)

    def _show_details(self) -> None:
        self._details_timer = None
        if not self._alive():
            return
        pane = self.query_one(DetailsPane)
        if pane.node is not self.node:
            pane.show(self.node)

    def on_leaves_table_highlighted(self, message: LeavesTable.Highlighted) -> None:
        from treetool._tree._chain import node_chain

        try:
            chain = node_chain(self.model, message.path)
        except KeyError:
            return
        self._focus(chain[-1][0] if chain else self.model)

    def on_leaf_chosen(self, message: LeafChosen) -> None:
        # one layout and one paint: the Tree tab's layout (not the Leaves tab's wide one),
        # the tab, the rows and the cursor all change before the screen is drawn again
        with self.batch_update():
            self.query_one("#main").set_class(False, "-wide")
            self.query_one(TabbedContent).active = "tree"
            tree = self.query_one(PytreeTree)
            tree.reveal(message.path)
            tree.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "search-input":
            return
        if self._follow_timer is not None:  # the tree waits for typing to pause
            self._follow_timer.stop()
            self._follow_timer = None
        if not event.value.strip():
            self.workers.cancel_group(self, "search")
            self.on_search_done(SearchDone(event.value, []))
            self.search_count = ""
            return
        self.search_count = "searching…"
        self._search(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search-input":
            return
        self._follow_search(reveal=False)  # the jump below opens the tree
        self.action_focus_tree()
        if self.matches:
            self.match_pos = -1
            self.action_next_match()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = event.pane.id
        if pane == "leaves" and self.still_reading("the Leaves tab opens"):
            self.query_one(TabbedContent).active = "tree"  # a click on the tab: back
            return
        self.query_one("#main").set_class(pane == "leaves", "-wide")
        if pane == "leaves":
            self.query_one(LeavesTable).focus()
        elif pane == "tree":
            self.query_one(PytreeTree).focus()
        else:  # Diff, Jaxpr, Devices…: the first focusable widget of the pane
            focusable = [w for w in event.pane.query("*") if w.focusable]
            if focusable:
                focusable[0].focus()
            else:
                self.set_focus(None)
        item = self.tab_item()
        if item is not None:
            self.query_one(DetailsPane).show_item(item)
            return
        node = self.cursor_node()
        if node is not None:
            self._focus(node)

    def cursor_node(self) -> Node | None:
        """The node under the cursor of the visible tab (Tree or Leaves); None elsewhere."""
        from treetool._tree._chain import node_chain

        active = self.query_one(TabbedContent).active
        if active == "tree":
            tn = self.query_one(PytreeTree).cursor_node
            entry = tn.data if tn is not None else None
            if entry is None or entry.kind == "more":
                return None
            return entry.node
        if active == "leaves":
            path = self.query_one(LeavesTable).node_path()
            if path is None:
                return None
            try:
                chain = node_chain(self.model, path)
            except KeyError:
                return None
            return chain[-1][0] if chain else self.model
        return None

    # --- actions ---------------------------------------------------------------------------

    def action_help(self) -> None:
        """Show every key binding: the focused panel's first, then the app's, then the rest."""
        panels: list[tuple[str, list[BindingType]]] = [
            ("Tree", list(PytreeTree.BINDINGS) + list(TREE_KEYS)),
            ("Leaves table", list(LeavesTable.BINDINGS)),
            ("Search bar", list(SearchBar.BINDINGS)),
        ]
        focused = self.focused
        first: tuple[str, list[BindingType]] | None = None
        if isinstance(focused, PytreeTree):
            first = panels.pop(0)
        elif isinstance(focused, LeavesTable):
            first = panels.pop(1)
        elif focused is not None and focused.id == "search-input":
            first = panels.pop(2)
        elif focused is not None:  # a tab's widget: its own keys and its tab's
            own: list[BindingType] = []
            for w in (focused, *focused.ancestors):
                if isinstance(w, TabbedContent):
                    break
                own.extend(getattr(w, "BINDINGS", []))
            tab = self.query_one(TabbedContent).active
            first = (f"This tab ({tab})", own) if own else None
        groups = ([first] if first else []) + [("Everywhere", list(self.BINDINGS)), *panels]
        self.push_screen(HelpScreen(groups))

    def action_search(self) -> None:
        """Open the search bar."""
        if self.still_reading("search works"):
            return
        self.query_one(SearchBar).open()

    def action_focus_tree(self) -> None:
        """Give the focus back to the active tab's main widget."""
        active = self.query_one(TabbedContent).active
        if active == "leaves":
            self.query_one(LeavesTable).focus()
        else:
            self.query_one(TabbedContent).active = "tree" if active in ("tree", "") else active
            if active in ("tree", ""):
                self.query_one(PytreeTree).focus()

    def action_clear_search(self) -> None:
        """Close the search bar and clear the matches."""
        bar = self.query_one(SearchBar)
        if bar.has_class("-open") or self.matches:
            bar.action_close()

    def _jump(self, step: int) -> None:
        if not self.matches:
            self.notify(
                "no matches: press / to search", severity="warning", timeout=3, markup=False
            )
            return
        self.match_pos = (self.match_pos + step) % len(self.matches)
        path = self.matches[self.match_pos]
        tabs = self.query_one(TabbedContent)
        if tabs.active == "leaves":
            table = self.query_one(LeavesTable)
            row = table.row_for(path)
            if row is not None:
                table.cursor = row
        else:
            tabs.active = "tree"
            tree = self.query_one(PytreeTree)
            tree.reveal(path)
            tree.focus()
        self.search_count = f"{self.match_pos + 1}/{len(self.matches):,}"

    def action_next_match(self) -> None:
        """Jump to the next search match."""
        self._jump(1)

    def action_prev_match(self) -> None:
        """Jump to the previous search match."""
        self._jump(-1)

    def _copy(self, text: str, what: str) -> None:
        """Send `text` to the terminal's clipboard (OSC 52) and show it, selectable by hand.

        Textual has no way to know whether the terminal (or tmux, whose default is to drop
        OSC 52) accepted it: the toast says what was sent, and shows the text itself.
        """
        self.copy_to_clipboard(text)
        self.notify(
            f"sent to the terminal clipboard (OSC 52; tmux needs set-clipboard on): {what}\n"
            f"{text or '(root: empty path)'}",
            timeout=8,
            markup=False,
        )

    def _copy_node(self) -> Node:
        node = self.cursor_node()
        if node is not None and node is not self.node:
            self.node = node  # the pane follows too
            self._show_details()
        return self.node

    def action_copy_path(self) -> None:
        """Copy the path under the cursor as an expression: `model.layers[0].weight`."""
        item = self.tab_item()
        if item is not None:  # a change, an equation, a device, a plan row
            self._copy(item.expression, "what the cursor is on (Y: keystr)")
            return
        keystr = safe(str(self._copy_node().path))  # never a file's raw escapes
        self._copy(expression(self.root_name, keystr), "path as an expression (Y: keystr)")

    def action_copy_keystr(self) -> None:
        """Copy the path under the cursor in keystr form: `.layers[0].weight`."""
        item = self.tab_item()
        if item is not None:
            self._copy(item.keystr, "what the cursor is on, in keystr form")
            return
        self._copy(safe(str(self._copy_node().path)), "path in keystr form")

    def action_show_tab(self, tab: str) -> None:
        """Switch to a tab by id."""
        if tab == "leaves" and self.still_reading("the Leaves tab opens"):
            return
        self.query_one(TabbedContent).active = tab

    def tab_ids(self) -> list[str]:
        """The ids of the tabs, in the order they are shown."""
        return [p.id for p in self.query_one(TabbedContent).query(TabPane) if p.id]

    def action_tab_number(self, n: int) -> None:
        """Show the Nth tab (1 is Tree); a number past the last tab does nothing."""
        ids = self.tab_ids()
        if 1 <= n <= len(ids):
            self.action_show_tab(ids[n - 1])

    def action_sort_leaves(self) -> None:
        """Show the Leaves tab sorted by the next column."""
        if self.still_reading("the Leaves tab opens"):
            return
        self.query_one(TabbedContent).active = "leaves"
        self.query_one(LeavesTable).action_sort_next()

    def action_stats(self) -> None:
        """Compute the stats of the selected leaf, however big it is."""
        if self.still_reading("stats are computed"):
            return
        self.query_one(DetailsPane).show(self.node, force=True)

    def action_toggle_details(self) -> None:
        """Show or hide the details pane."""
        self.query_one(DetailsPane).toggle_class("-hidden")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, action in COMMANDS:
            yield SystemCommand(
                title, help_text, lambda a=action: self.call_later(self.run_action, a)
            )
        if screen is not self.screen or not self.query(TabbedContent):
            return
        tabs = self.query_one(TabbedContent)
        for n, pane in enumerate(tabs.query(TabPane), 1):
            if pane.id in ("tree", "leaves") or not pane.id:
                continue  # listed above with their letter keys
            title = str(tabs.get_tab(pane.id).label.plain)
            yield SystemCommand(
                f"Show {title} tab",
                f"The {title} tab ({n})" if n <= 6 else f"The {title} tab",
                lambda i=pane.id: self.call_later(self.action_show_tab, i),
            )

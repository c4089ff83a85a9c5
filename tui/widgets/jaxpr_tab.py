"""The Jaxpr tab: the equation tree of a `JaxprView`, variable details, uses and search.

The tree shows the inputs (with their pytree paths), the outputs, and the equations; an
equation that holds sub-jaxprs (pjit, scan, cond branches, while cond/body, custom_vjp,
remat, shard_map) opens into them, and long jaxprs load in pages. The pane below the tree
describes the highlighted row: params, source, each operand's path or producer, each result's
uses. `u` jumps through the uses of the highlighted variable, `p` to the producer of its first
operand, `/` searches by primitive (`dot_general`, `conv*`) or by input path (`**.weight`).
Building a view from a raw jaxpr and XLA's cost analysis run in thread workers.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, Static, TabbedContent, TabPane, Tree
from textual.widgets.tree import TreeNode
from textual.worker import Worker, get_current_worker
from treetool.tui._workers import report_failure
from treetool.tui.messages import ItemFocused, TabItem

from treetool._jaxpr._rich import counts_text, eqn_text, scope_text
from treetool._jaxpr._view import Equation, JaxprView, Scope
from treetool._lowering._labels import fmt_bytes, fmt_count
from treetool._text import safe
from treetool._typetests import is_drop_var

__all__ = ["JaxprTab"]

#: equations added to the tree at a time under one jaxpr
PAGE = 200

_INPUTS, _OUTPUTS, _EQNS, _EQN, _SCOPE, _VAR, _MORE = (
    "inputs",
    "outputs",
    "equations",
    "eqn",
    "scope",
    "var",
    "more",
)


def _n(n: int, word: str) -> str:
    """`1 output`, `3 outputs`."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


class JaxprTab(Vertical):
    """A browsable `JaxprView`: equation tree, details, jump to uses and producers, search.

    Args:
        obj: a `JaxprView`, or a jax `ClosedJaxpr`/`Jaxpr` (its view is built in a worker).

    Attributes:
        view: the `JaxprView` (None until the worker has built it).
        matches: the equations the last search or `u` found; `n`/`N` move through them.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash",
            "search",
            "Search",
            tooltip="Search equations by primitive (dot_general, conv*) or input path (**.weight)",
            id="jaxpr.search",
        ),
        Binding(
            "u",
            "uses",
            "Uses",
            tooltip="Jump through the equations that read the highlighted variable",
            id="jaxpr.uses",
        ),
        Binding(
            "p",
            "producer",
            "Producer",
            tooltip="Jump to the equation that produces the first operand",
            id="jaxpr.producer",
        ),
        Binding("n", "next_match", "Next", tooltip="Next match or use", id="jaxpr.next"),
        Binding(
            "N",
            "prev_match",
            "Prev",
            show=False,
            tooltip="Previous match or use",
            id="jaxpr.prev",
        ),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | up/down, enter | Move; open or close an equation's sub-jaxprs; load the next page. |
    | / | Search by primitive (`dot_general`, `conv*`) or input path (`**.weight`). |
    | u | The equations that read the highlighted variable (deep: into sub-jaxprs). |
    | p | The equation that produces the first operand of the highlighted equation. |
    | n, N | Next, previous match or use. |
    """

    DEFAULT_CSS = """
    JaxprTab { height: 1fr; }
    JaxprTab #jaxpr-summary { height: auto; padding: 0 1; }
    JaxprTab #jaxpr-tree { height: 2fr; }
    JaxprTab #jaxpr-details-box { height: 1fr; min-height: 6; border-top: hkey $foreground 20%; }
    JaxprTab #jaxpr-details { padding: 0 1; }
    JaxprTab #jaxpr-search { display: none; }
    JaxprTab #jaxpr-search.-open { display: block; }
    JaxprTab #jaxpr-count { height: 1; padding: 0 1; color: $text-muted; }
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failure(self, event)

    def show_failure(self, text: str) -> None:
        """Show a failed worker's one-line error in this tab."""
        self.query_one("#jaxpr-summary", Static).update(Text(text, style="bold red"))

    def __init__(self, obj: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.obj = obj
        self.view: JaxprView | None = obj if isinstance(obj, JaxprView) else None
        self.matches: list[Equation] = []
        self.match_pos = -1
        self._eqn_nodes: dict[int, TreeNode] = {}
        self._scope_nodes: dict[int, TreeNode] = {}
        self._loaded: dict[int, int] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text("building the jaxpr view…", style="dim italic"), id="jaxpr-summary")
        tree: Tree[tuple[str, Any]] = Tree("jaxpr", id="jaxpr-tree")
        tree.show_root = False
        tree.guide_depth = 3
        yield tree
        yield Static("", id="jaxpr-count")
        yield Input(
            placeholder="primitive (dot_general, conv*) or path (**.weight); esc closes",
            id="jaxpr-search",
        )
        with VerticalScroll(id="jaxpr-details-box"):
            yield Static("", id="jaxpr-details")

    def on_mount(self) -> None:
        if self.view is None:
            self._build_view()
        else:
            self._set_view(self.view)
        if getattr(self.app, "obj", None) is self.obj:
            # the app was opened on this jaxpr: its Tree tab holds one leaf, so start here
            self.call_after_refresh(self._activate)

    def _activate(self) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, TabPane)), None)
        tabs = next((a for a in self.ancestors if isinstance(a, TabbedContent)), None)
        if pane is not None and tabs is not None and pane.id:
            tabs.active = pane.id
            self.query_one("#jaxpr-tree", Tree).focus()

    # --- workers ------------------------------------------------------------------------------

    class ViewBuilt(Message, bubble=False):
        """The view worker's answer: the jaxpr's view, or why it could not be read."""

        def __init__(self, view: JaxprView | None, error: str = "") -> None:
            super().__init__()
            self.view = view
            self.error = error

    class CostReady(Message, bubble=False):
        """The cost worker lowered the jaxpr: the summary shows its cost."""

    def on_jaxpr_tab_view_built(self, message: ViewBuilt) -> None:
        if message.view is None:
            self._failed(message.error)
        else:
            self._set_view(message.view)

    def on_jaxpr_tab_cost_ready(self) -> None:
        self._show_summary()

    @work(thread=True, exclusive=True, group="jaxpr-view", exit_on_error=False)
    def _build_view(self) -> None:
        worker = get_current_worker()
        try:
            v = JaxprView(self.obj)
        except Exception as e:  # shown in the tab; the rest of the app keeps working
            if not worker.is_cancelled:
                self.post_message(self.ViewBuilt(None, f"could not read the jaxpr: {e}"))
            return
        if not worker.is_cancelled:
            self.post_message(self.ViewBuilt(v))

    @work(thread=True, exclusive=True, group="jaxpr-cost", exit_on_error=False)
    def _compute_cost(self) -> None:
        view = self.view
        if view is None:
            return
        _ = view.cost  # lowers once; cached on the view
        if not get_current_worker().is_cancelled:
            self.post_message(self.CostReady())

    def _failed(self, msg: str) -> None:
        msg = safe(msg)
        self.query_one("#jaxpr-summary", Static).update(Text(msg, style="bold red"))
        self.app.notify(msg, severity="error", timeout=8, markup=False)

    # --- building the tree ----------------------------------------------------------------------

    def _set_view(self, view: JaxprView) -> None:
        self.view = view
        self._show_summary()
        tree = self.query_one("#jaxpr-tree", Tree)
        tree.clear()
        self._eqn_nodes.clear()
        self._scope_nodes.clear()
        self._loaded.clear()
        if view.inputs:
            group = tree.root.add(
                Text(f"inputs ({len(view.inputs)})", style="bold"), (_INPUTS, None)
            )
            for path, var in view.inputs:
                group.add_leaf(self._var_label(var, safe(str(path))), (_VAR, (path, var)))
        if view.outputs:
            group = tree.root.add(
                Text(f"outputs ({len(view.outputs)})", style="bold"), (_OUTPUTS, None)
            )
            for path, var in view.outputs:
                group.add_leaf(self._var_label(var, safe(str(path))), (_VAR, (path, var)))
        n = len(view.top.equations)
        eqns = tree.root.add(
            Text(f"equations ({n:,})", style="bold"), (_EQNS, view.top), expand=True
        )
        self._scope_nodes[id(view.top)] = eqns
        self._load_page(eqns, view.top)
        tree.root.expand()
        self._compute_cost()

    def _show_summary(self) -> None:
        v = self.view
        if v is None:
            return
        t = Text()
        t.append("jaxpr", style="bold magenta")
        if v.name:
            t.append(f" {v.name}", style="bold")
        t.append(
            f": {_n(len(v.inputs), 'input')} → {_n(len(v.outputs), 'output')}, "
            f"{_n(len(v.equations), 'equation')}"
        )
        if v.equations:
            t.append(f"  {counts_text(v.counts(), limit=5)}", style="dim")
        c = v.cached_cost
        if c is not None:
            parts = []
            if c.flops is not None:
                parts.append(f"{fmt_count(round(c.flops))} FLOPs")
            if c.bytes_accessed is not None:
                parts.append(f"{fmt_bytes(round(c.bytes_accessed))} accessed")
            if parts:
                t.append(f"  (XLA: {', '.join(parts)})", style="dim")
        self.query_one("#jaxpr-summary", Static).update(t)

    def _var_label(self, var: Any, path: str) -> Text:
        v = self.view
        assert v is not None
        t = Text()
        t.append(v.name_of(var), style="bold")
        t.append(f"  {v.type_of(var)}  ")
        t.append(path, style="cyan")
        return t

    def _load_page(self, node: TreeNode, scope: Scope) -> None:
        """Add the next `PAGE` equations of `scope` under `node` (and a `… more` row)."""
        v = self.view
        assert v is not None
        start = self._loaded.get(id(scope), 0)
        last = node.children[-1].data if node.children else None
        if start and last is not None and last[0] == _MORE:
            node.children[-1].remove()
        end = min(start + PAGE, len(scope.equations))
        for eq in scope.equations[start:end]:
            label = eqn_text(v, eq, params=False, source=False)
            label.truncate(400)
            child = node.add(label, (_EQN, eq), allow_expand=bool(eq.children))
            self._eqn_nodes[eq.order] = child
        self._loaded[id(scope)] = end
        rest = len(scope.equations) - end
        if rest:
            node.add_leaf(
                Text(f"… {rest:,} more equations (enter to load)", style="dim italic"),
                (_MORE, scope),
            )

    def _open_equation(self, node: TreeNode, eq: Equation) -> None:
        """Add an equation's sub-jaxprs under its row (once)."""
        if node.children or not eq.children:
            return
        v = self.view
        assert v is not None
        for scope in eq.children:
            child = node.add(
                scope_text(v, scope), (_SCOPE, scope), allow_expand=bool(scope.equations)
            )
            self._scope_nodes[id(scope)] = child

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        data = event.node.data
        if data is None:
            return
        kind, obj = data
        if kind == _EQN:
            self._open_equation(event.node, obj)
        elif kind == _SCOPE and not event.node.children:
            self._load_page(event.node, obj)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        data = event.node.data
        if data is not None and data[0] == _MORE:
            parent = event.node.parent
            if parent is not None:
                self._load_page(parent, data[1])

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self._show_details(event.node.data)

    # --- revealing an equation ------------------------------------------------------------------

    def node_for(self, eq: Equation) -> TreeNode:
        """The tree row of `eq`, adding (and opening) the rows above it as needed."""
        node = self._eqn_nodes.get(eq.order)
        if node is not None:
            return node
        scope = eq.scope
        snode = self._scope_nodes.get(id(scope))
        if snode is None:
            parent_node = self.node_for(scope.parent)  # type: ignore[arg-type]
            self._open_equation(parent_node, scope.parent)  # type: ignore[arg-type]
            parent_node.expand()
            snode = self._scope_nodes[id(scope)]
        if not snode.children:
            self._load_page(snode, scope)
        while self._loaded.get(id(scope), 0) <= eq.index:
            self._load_page(snode, scope)
        snode.expand()
        return self._eqn_nodes[eq.order]

    def reveal(self, eq: Equation) -> None:
        """Move the cursor to `eq`, opening its ancestors."""
        node = self.node_for(eq)
        parent = node.parent
        while parent is not None:
            parent.expand()
            parent = parent.parent
        if node.line < 0:  # rows added just now get their line at the next refresh
            self.call_after_refresh(self._move_to, node)
        else:
            self._move_to(node)

    def _move_to(self, node: TreeNode) -> None:
        tree = self.query_one("#jaxpr-tree", Tree)
        tree.move_cursor(node)
        tree.scroll_to_node(node)
        self._show_details(node.data)

    @property
    def selected(self) -> tuple[str, Any] | None:
        """The `(kind, object)` of the highlighted row: `("eqn", Equation)`, `("var", (path,
        var))`, `("scope", Scope)`, … (None when nothing is highlighted)."""
        node = self.query_one("#jaxpr-tree", Tree).cursor_node
        return None if node is None else node.data

    # --- details --------------------------------------------------------------------------------

    def _uses_text(self, var: Any, scope: Scope | None) -> str:
        v = self.view
        assert v is not None
        uses = v.uses(var, deep=True, scope=scope)
        if not uses:
            return "unused"
        shown = ", ".join(f"{e.id} {e.primitive}" for e in uses[:8])
        more = f", +{len(uses) - 8} more" if len(uses) > 8 else ""
        return f"used by {len(uses)}: {shown}{more}"

    def _show_details(self, data: tuple[str, Any] | None) -> None:
        v = self.view
        out = self.query_one("#jaxpr-details", Static)
        if v is None or data is None:
            out.update("")
            return
        kind, obj = data
        t = Text()
        if kind == _EQN:
            eq: Equation = obj
            t.append(f"equation {eq.id}  ", style="bold")
            t.append(eq.primitive, style="bold green")
            src = eq.source
            if src:
                t.append(f"\nsource  {src}", style="italic")
            if eq.callback:
                t.append(f"\ncalls   {eq.callback}", style="magenta")
            params = eq.params
            if params:
                t.append("\nparams", style="bold")
                for k, val in params.items():
                    t.append(f"\n  {k} = {val}")
            t.append("\noutputs", style="bold")
            for x in eq.outputs:
                t.append(f"\n  {v.name_of(x)}  {v.type_of(x)}  ")
                if not is_drop_var(x):
                    t.append(self._uses_text(x, eq.scope), style="dim")
            t.append("\ninputs", style="bold")
            for x in eq.inputs:
                t.append(f"\n  {v.name_of(x)}  {v.type_of(x)}  ")
                if hasattr(x, "val"):
                    t.append("literal", style="dim")
                    continue
                path = eq.scope._origin.get(x)
                if path is not None:
                    t.append(safe(str(path)), style="cyan")
                    continue
                prod = eq.scope.producer(x)
                if prod is not None:
                    t.append(f"from {prod.id} {prod.primitive}", style="dim")
                else:
                    t.append(f"bound by {eq.scope.label or 'the jaxpr'}", style="dim")
            for s in eq.children:
                t.append(f"\n{s.label}: {_n(s.num_equations(), 'equation')}", style="blue")
        elif kind == _VAR:
            path, x = obj
            t.append(safe(str(path)), style="bold cyan")
            t.append(f"\n{v.name_of(x)}  {v.type_of(x)}")
            if not hasattr(x, "val"):
                prod = v.producer(x)
                if prod is not None:
                    t.append(f"\nproduced by {prod.id} {prod.primitive}")
                t.append("\n" + self._uses_text(x, None))
        elif kind == _SCOPE:
            scope: Scope = obj
            t.append(scope_text(v, scope))
            for x in scope.invars:
                p = scope._origin.get(x)
                if p is not None:
                    t.append(f"\n  {v.name_of(x)}  ← ")
                    t.append(safe(str(p)), style="cyan")
        elif kind == _EQNS:
            t.append(f"{_n(len(v.equations), 'equation')} in all\n", style="bold")
            t.append(counts_text(v.counts(), limit=40))
        out.update(t)
        item = self._item(kind, obj, t)
        if item is not None:
            self.post_message(ItemFocused.of(self, item))

    def _item(self, kind: str, obj: Any, text: Text) -> TabItem | None:
        """The highlighted row for the app's details pane; `y` copies the parameter paths an
        equation uses (or a variable's path), `Y` the same in keystr form."""
        from treetool._tree._chain import expression

        root = getattr(self.app, "root_name", "tree")
        if kind == _EQN:
            eq: Equation = obj
            paths = []
            for x in eq.inputs:
                p = None if hasattr(x, "val") else eq.scope._origin.get(x)
                if p is not None and safe(str(p)) not in paths:
                    paths.append(safe(str(p)))
            exprs = ", ".join(expression(root, p) for p in paths) or eq.id
            return TabItem(
                f"equation {eq.id} {eq.primitive}", [("", text)], exprs, ", ".join(paths) or eq.id
            )
        if kind == _VAR:
            path = safe(str(obj[0]))
            return TabItem(path or "(root)", [("", text)], expression(root, path), path)
        if kind in (_SCOPE, _EQNS):
            return TabItem("jaxpr", [("", text)], "", "")
        return None

    # --- actions --------------------------------------------------------------------------------

    def _set_matches(self, found: list[Equation], what: str) -> None:
        self.matches = found
        self.match_pos = -1
        self.query_one("#jaxpr-count", Static).update(
            Content(safe(f"{len(found):,} {what}" if found else f"no {what}"))
        )
        if found:
            self.action_next_match()
        else:
            self.app.notify(safe(f"no {what}"), severity="warning", timeout=3, markup=False)

    def action_search(self) -> None:
        """Open the search bar."""
        self.query_one("#jaxpr-search").add_class("-open")
        self.query_one("#jaxpr-search", Input).focus()

    def search(self, query: str) -> list[Equation]:
        """Run a search (primitive or input path) and jump to the first match."""
        if self.view is None:
            return []
        self._set_matches(self.view.search(query), f"matches for {query!r}")
        return self.matches

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "jaxpr-search":
            return
        event.stop()
        event.input.remove_class("-open")
        self.query_one("#jaxpr-tree", Tree).focus()
        self.search(event.value)

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.query_one("#jaxpr-search", Input).has_focus:
            self.query_one("#jaxpr-search").remove_class("-open")
            self.query_one("#jaxpr-tree", Tree).focus()
            event.stop()

    def action_uses(self) -> None:
        """Jump through the equations that read the highlighted variable."""
        v, data = self.view, self.selected
        if v is None or data is None:
            return
        kind, obj = data
        if kind == _VAR:
            var, scope, name = obj[1], None, str(obj[0])
        elif kind == _EQN:
            outs = [x for x in obj.outputs if not is_drop_var(x)]
            if not outs:
                return
            var, scope, name = outs[0], obj.scope, v.name_of(outs[0])
        else:
            return
        if hasattr(var, "val"):
            return
        self._set_matches(v.uses(var, deep=True, scope=scope), f"uses of {name}")

    def action_producer(self) -> None:
        """Jump to the equation that produces the first operand with a producer."""
        v, data = self.view, self.selected
        if v is None or data is None:
            return
        kind, obj = data
        if kind == _VAR:
            prod = None if hasattr(obj[1], "val") else v.producer(obj[1])
        elif kind == _EQN:
            prod = next(
                (
                    p
                    for x in obj.inputs
                    if not hasattr(x, "val")
                    for p in [obj.scope.producer(x)]
                    if p is not None
                ),
                None,
            )
        else:
            return
        if prod is None:
            self.app.notify("no producer: an input, a const or a binder", timeout=3, markup=False)
            return
        self.reveal(prod)

    def _jump(self, step: int) -> None:
        if not self.matches:
            self.app.notify("no matches: press / to search or u for uses", timeout=3, markup=False)
            return
        self.match_pos = (self.match_pos + step) % len(self.matches)
        self.reveal(self.matches[self.match_pos])
        self.query_one("#jaxpr-count", Static).update(
            Content(f"{self.match_pos + 1}/{len(self.matches):,}")
        )

    def action_next_match(self) -> None:
        """Jump to the next match or use."""
        self._jump(1)

    def action_prev_match(self) -> None:
        """Jump to the previous match or use."""
        self._jump(-1)

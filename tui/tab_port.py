"""Registers the Port tab: shown when the app is opened on a `tt.port` plan (`tt.show(plan)`).

The tab lists the plan as a table, one row per target leaf (or part of one) and one per
ambiguity, unfilled target, unused source and dropped entry; the cursor's row is shown in the
details pane (source and target paths, transform, shapes, status) and `y`/`Y` copy its target
and source paths. A plan opened by itself opens on this tab.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static, TabbedContent, TabPane
from treetool.tui.messages import ItemFocused, TabItem
from treetool.tui.tabs import TabSpec, register_tab

from treetool._text import safe, safe_text

__all__ = ["PortTab", "applies", "make"]


def applies(obj: Any) -> bool:
    """Whether `obj` is a port plan (without importing the port machinery).

    Example:
        >>> applies({"w": 1})
        False
    """
    plan_module = sys.modules.get("treetool._port._plan")
    return plan_module is not None and isinstance(obj, plan_module.Plan)


def _dims(shape: Any) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def plan_entries(plan: Any) -> list[dict[str, str]]:
    """One dict per table row: target, source, transform, shapes, status (file text escaped)."""
    out: list[dict[str, str]] = []
    for r in plan.rows:
        part = f" @{r.part[0]}:{r.part[1]}/{r.part[2]}" if r.part else ""
        s, t = _dims(r.source_shape), _dims(r.target_shape)
        src = ", ".join(r.sources) + (f" (stacked {len(r.sources)})" if len(r.sources) > 1 else "")
        out.append(
            {
                "target": safe(r.target + part),
                "source": safe(src),
                "transform": safe(" ".join(r.steps) or "identity"),
                "shapes": s if s == t else f"{s} -> {t}",
                "status": safe(f"filled ({r.how})"),
            }
        )
    for a in plan.ambiguous:
        for tgt in a.targets:
            out.append(
                {
                    "target": safe(tgt),
                    "source": safe(" | ".join(a.candidates)),
                    "transform": "",
                    "shapes": "",
                    "status": safe(f"ambiguous: {a.reason}"),
                }
            )
    for tgt in plan.unmatched_target:
        row = {"target": safe(tgt), "source": "", "transform": "", "shapes": ""}
        out.append({**row, "status": "target not filled"})
    for src in plan.unmatched_source:
        row = {"target": "", "source": safe(src), "transform": "", "shapes": ""}
        out.append({**row, "status": "source not used"})
    for name, why in plan.dropped.items():
        row = {"target": "", "source": safe(name), "transform": "", "shapes": ""}
        out.append({**row, "status": safe(f"dropped ({why})")})
    return out


class PortTab(Vertical):
    """The plan as a navigable table, its title above and its verdict below."""

    DEFAULT_CSS = """
    PortTab { padding: 0 1; }
    PortTab > #port-table { height: 1fr; }
    PortTab > Static { height: auto; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "edge(0)", "First", show=False, tooltip="First row"),
        Binding("end", "edge(1)", "Last", show=False, tooltip="Last row"),
    ]

    def __init__(self, plan: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.plan = plan
        self.entries = plan_entries(plan)

    def compose(self) -> ComposeResult:
        plan = self.plan
        n = len({r.target for r in plan.rows})
        yield Static(
            safe_text(f"port plan: {n} target leaves filled from {plan.source_label}", "bold"),
            id="port-title",
        )
        yield DataTable(id="port-table", cursor_type="row")
        verdict = (
            Text(
                "complete: every target leaf filled once, every source entry used or dropped",
                "bold green",
            )
            if plan.complete
            else Text(f"incomplete: {len(plan.problems())} problem(s)", "bold red")
        )
        yield Static(verdict, id="port-verdict")

    def on_mount(self) -> None:
        table = self.query_one("#port-table", DataTable)
        table.add_columns("target", "source", "transform", "shapes", "status")
        for i, e in enumerate(self.entries):
            style = "" if e["status"].startswith("filled") else "red"
            table.add_row(
                *(Text(e[k], style=style if k == "status" else "") for k in _COLS), key=str(i)
            )
        if getattr(self.app, "obj", None) is self.plan:  # opened on the plan: start here
            self.call_after_refresh(self._activate)

    def _activate(self) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, TabPane)), None)
        tabs = next((a for a in self.ancestors if isinstance(a, TabbedContent)), None)
        if pane is not None and tabs is not None and pane.id:
            tabs.active = pane.id
            self.query_one("#port-table", DataTable).focus()

    def item(self, i: int) -> TabItem:
        """Row `i` for the details pane; `y` copies its target path, `Y` its source."""
        e = self.entries[i]
        rows: list[tuple[str, Any]] = [(k, e[k]) for k in _COLS if e[k]]
        return TabItem(e["target"] or e["source"], rows, e["target"], e["source"])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None:
            self.post_message(ItemFocused.of(self, self.item(int(key))))

    def action_edge(self, end: int) -> None:
        """The first (0) or last (1) row."""
        table = self.query_one("#port-table", DataTable)
        table.move_cursor(row=max(0, table.row_count - 1) if end else 0)


_COLS = ("target", "source", "transform", "shapes", "status")


def make(obj: Any) -> Widget:
    """The Port tab's widget for the plan `obj`."""
    return PortTab(obj, id="port-tab")


register_tab(TabSpec(id="port", title="Port", applies=applies, make=make, order=40))

"""The TUI's Port tab: opened on a plan, its table shows the plan's rows and ambiguities, and
the verdict below."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import DataTable, Static, TabbedContent, TabPane
from treetool.tui.app import TreetoolApp

import treetool as tt

pytestmark = pytest.mark.slow  # a Textual app under Pilot


def test_the_port_tab_shows_the_plan() -> None:
    src = {f"{n}.weight": np.ones((4, 4), np.float32) for n in ("a", "b")}
    src["head.weight"] = np.ones((2, 4), np.float32)
    target = {
        "params": {
            "Dense_0": {"kernel": np.zeros((4, 4), np.float32)},
            "Dense_1": {"kernel": np.zeros((4, 4), np.float32)},
            "head": {"kernel": np.zeros((4, 2), np.float32)},
        }
    }
    plan = tt.port(src, target)

    async def run() -> None:
        app = TreetoolApp(plan, title="port")
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            assert "port" in [pane.id for pane in app.query(TabPane)]
            app.query_one(TabbedContent).active = "port"
            await pilot.pause()
            table = app.query_one("#port-table", DataTable)
            assert table.region.height > 5  # laid out and visible
            cells = [" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
            text = "\n".join(cells)
            assert "['params']['head']['kernel']" in text and "head.weight" in text
            assert "ambiguous" in text and "['params']['Dense_0']['kernel']" in text
            verdict = app.query_one("#port-verdict", Static)
            console = Console(width=140, file=io.StringIO(), color_system=None)
            console.print(verdict.content)
            assert "incomplete: 2 problem(s)" in console.file.getvalue()

    asyncio.run(run())

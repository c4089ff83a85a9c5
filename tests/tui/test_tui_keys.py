"""The keys users reach for (issue 40, point 6): expand/collapse all, g g / G, a help screen
that starts with the focused panel's keys (no duplicates, `1…6` one row, Home/End/PgUp/PgDn),
L and d in the footer, toasts above the search bar, long names folded in details, a torch
file's weights_only verdict in the header."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from rich.console import Console
from treetool.tui import TreetoolApp
from treetool.tui.screens import HelpScreen
from treetool.tui.widgets import DetailsPane, PytreeTree
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")


def _nested():
    return {
        f"b{i}": {"mlp": {"w": np.zeros(2), "b": np.zeros(2)}, "n": np.zeros(1)} for i in range(3)
    }


def _open_rows(tree: PytreeTree) -> int:
    n, stack = 0, [tree.root]
    while stack:
        tn = stack.pop()
        n += 1
        if tn.is_expanded:
            stack.extend(tn.children)
    return n


def test_expand_all_collapse_all_and_g_g() -> None:
    app = TreetoolApp(_nested(), title="model")

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            tree = app.query_one(PytreeTree)
            before = _open_rows(tree)
            await pilot.press("e")  # on the root: everything
            await settle(pilot)
            expanded = _open_rows(tree)
            await pilot.press("G")
            await settle(pilot)
            last = str(app.node.path)
            await pilot.press("g", "g")
            await settle(pilot)
            first = app.node
            await pilot.press("c")
            await settle(pilot)
            collapsed = _open_rows(tree)
            return before, expanded, last, first, collapsed

    before, expanded, last, first, collapsed = asyncio.run(run())
    # the root, 3 blocks, each with mlp (w, b) and n: 1 + 3 * (1 + 1 + 2 + 1) rows
    assert before == 4 and expanded == 16
    assert last == "['b2']['n']"
    assert first is app.model
    assert collapsed == 1


def _help_rows(app: TreetoolApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(screen.query_one("#help-keys").content)
    return console.file.getvalue().splitlines()


def test_help_starts_with_the_focused_panel_and_lists_each_key_once() -> None:
    app = TreetoolApp(_nested(), title="model")

    async def run():
        async with app.run_test(size=(120, 60)) as pilot:
            await settle(pilot)
            await pilot.press("question_mark")
            await settle(pilot)
            rows = _help_rows(app)
            await pilot.press("escape", "L")
            await settle(pilot)
            await pilot.press("question_mark")
            await settle(pilot)
            return rows, _help_rows(app)

    tree_rows, leaves_rows = asyncio.run(run())
    assert tree_rows[0].strip() == "Tree"
    assert leaves_rows[0].strip() == "Leaves table"
    assert sum(1 for r in tree_rows if r.lstrip().startswith("1…6")) == 1
    assert not any(r.lstrip().startswith(("2 ", "3 ")) for r in tree_rows)
    assert any(r.lstrip().startswith("home, end") for r in tree_rows)
    assert any(r.lstrip().startswith("pgup, pgdn") for r in tree_rows)
    assert any(r.lstrip().startswith("e, E") for r in tree_rows)
    # within a group, a key is listed once
    groups: list[list[str]] = [[]]
    for r in tree_rows:
        if not r.strip():
            groups.append([])
            continue
        groups[-1].extend(k for k in r.split("  ")[0].strip().split(", ") if k)
    for listed in groups:
        assert len(listed) == len(set(listed)), sorted(k for k in listed if listed.count(k) > 1)
    assert any("Show the Nth tab" in r for r in tree_rows)


def test_footer_toasts_long_names_and_the_torch_verdict() -> None:
    long = "n" * 5000
    facts = {"torch": {"format": "zip", "weights_only": {"accepted": True}}}
    app = TreetoolApp({long: np.zeros(3, np.float32)}, title="model", file_facts=facts)

    async def run():
        async with app.run_test(size=(140, 40), notifications=True) as pilot:
            await settle(pilot)
            shown = {b.binding.key for b in app.screen.active_bindings.values() if b.binding.show}
            await pilot.press("down")
            await settle(pilot)
            pane = app.query_one(DetailsPane)
            path_lines = pane.query_one("#details-path").region.height
            await pilot.press("slash", "n")
            await settle(pilot)
            app.notify("a warning that stays a while", severity="warning", timeout=30)
            await settle(pilot)
            await pilot.pause(0.2)
            toasts = [t.region for t in app.screen.query("Toast")]
            bar = app.query_one("#search").region
            return shown, path_lines, toasts, bar, app.sub_title

    shown, path_lines, toasts, bar, sub_title = asyncio.run(run())
    assert {"L", "d"} <= shown
    assert path_lines <= 12  # was ~240 lines for a 5,000-character name
    assert toasts and all(not t.overlaps(bar) for t in toasts)
    assert "weights_only=True: accepted" in sub_title

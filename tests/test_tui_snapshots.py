"""Snapshot tests of the terminal UI's looks (pytest-textual-snapshot, fixed terminal size).

Update after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`
and look at the SVGs in `snapshot_report.html` before committing them.
"""

from __future__ import annotations

import numpy as np
from textual.widgets import Input
from treetool.tui import TreetoolApp
from treetool.tui.widgets import PytreeTree

SIZE = (110, 34)


def _tree() -> dict:
    rng = np.random.default_rng(0)
    return {
        "encoder": {
            "layers": [
                {"w": rng.normal(size=(8, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}
                for _ in range(3)
            ],
            "norm": {"scale": np.ones(4, np.float32)},
        },
        "head": {"w": rng.normal(size=(4, 2)).astype(np.float32), "b": np.zeros(2, np.float32)},
        "step": np.int32(7),
    }


async def _settle(pilot) -> None:
    app = pilot.app
    for inp in app.query(Input):
        inp.cursor_blink = False
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause(0.15)
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_main_screen(snap_compare):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("down", "right", "down", "right")
        await _settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_array_leaf_details_with_histogram(snap_compare):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        pilot.app.query_one(PytreeTree).reveal("['head']['w']")
        await _settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_search_results(snap_compare):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("slash", *"**.w")
        await _settle(pilot)
        await pilot.press("enter", "n")  # reveal the first two matches
        await _settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_leaves_tab_sorted_by_params(snap_compare):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("L")
        await _settle(pilot)
        pilot.app.query_one("#leaves-table").sort_by("params", reverse=True)
        await _settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_help_screen(snap_compare):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )

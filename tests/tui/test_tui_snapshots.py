"""Snapshot tests of the terminal UI's looks (pytest-textual-snapshot, fixed terminal size).

Update after an intended change with `pytest tests/tui/test_tui_snapshots.py --snapshot-update`
and look at the SVGs in `snapshot_report.html` before committing them.
"""

from __future__ import annotations

import numpy as np
import pytest
from treetool.tui import TreetoolApp
from treetool.tui.widgets import PytreeTree
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")

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


def test_main_screen(snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("down", "right", "down", "right")
        await settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_array_leaf_details_with_histogram(snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.query_one(PytreeTree).reveal("['head']['w']")
        await settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_search_results(snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("slash", *"**.w")
        await settle(pilot)
        await pilot.press("enter", "n")  # reveal the first two matches
        await settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_leaves_tab_sorted_by_params(snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)
        pilot.app.query_one("#leaves-table").sort_by("params", reverse=True)
        await settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )


def test_help_screen(snap_compare):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(
        TreetoolApp(_tree(), title="params"), terminal_size=SIZE, run_before=run_before
    )

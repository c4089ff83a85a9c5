"""What keeps keystrokes quick in wide trees (issue 19, item 3), counted, not timed: the bulk
objects out of the collector's sight, row widths without rendering, search off the GIL."""

from __future__ import annotations

import asyncio
import functools
import gc

import numpy as np
import pytest
from treetool.tui import TreetoolApp
from treetool.tui.widgets import PytreeTree
from treetool.tui.widgets.row_tree import RowTree
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")

SIZE = (120, 40)


def _sync(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@_sync
async def test_the_wide_tree_and_its_index_are_frozen_out_of_the_collector_until_exit():
    n = 20_000
    tree = {f"k{i}": [i, {"w": float(i)}] for i in range(n)}  # lists and dicts: tracked
    assert gc.get_freeze_count() == 0
    app = TreetoolApp(tree, title="wide")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)  # the index worker is done: its result is posted and handled
        assert app.index is not None
        frozen = gc.get_freeze_count()
        # the tree's own containers (2 per key) and the root's opened children at least
        assert frozen >= 3 * n, frozen
        assert gc.get_count()[0] < 10_000  # the young generation is not the tree
    assert gc.get_freeze_count() == 0  # handed back to the collector at exit
    assert tree["k5"] == [5, {"w": 5.0}] and len(tree) == n  # the input is untouched


@_sync
async def test_row_widths_are_the_rendered_widths():
    tree = {"a": {"b": np.zeros(3)}, "日本": [1, 2], "w": np.ones((2, 2)), "e": {}}
    app = TreetoolApp(tree)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.query_one(PytreeTree)
        view.root.children[0].expand()
        await pilot.pause()
        rows = [view.root, *view.root.children, *view.root.children[0].children]
        assert len(rows) == 6
        for tn in rows:  # expanded, collapsed, leaves, wide characters
            assert view.get_label_width(tn) == RowTree.get_label_width(view, tn), str(tn.label)

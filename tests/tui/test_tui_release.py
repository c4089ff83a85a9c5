"""The TUI lets go of the trees it showed: once the app has exited (and its workers with it),
nothing of treetool's keeps the tree, its `Node` view or its arrays alive.

Textual keeps the last worker each of its threads ran (its arguments and result) until the
event loop's executor shuts down, which `App.run` does as it returns; these tests check what
is left after that, driving the real app with the Pilot as `treetool inspect` runs it.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from textual.pilot import Pilot
from treetool.tui import TreetoolApp
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")


def _trees() -> tuple[dict[str, Any], dict[str, Any]]:
    a = {f"layer{i}": {"w": np.full(1 << 18, i, np.float32), "b": np.ones(4)} for i in range(3)}
    b = {f"layer{i}": {"w": np.full(1 << 18, i, np.float32), "b": np.ones(4)} for i in range(3)}
    b["layer1"]["b"] = np.zeros(4)
    return a, b


def _browse(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Open the app on `a` with a Diff tab against `b`, search (a worker that walks the tree
    to the match), open the Diff tab (its worker), quit; what the search found and where it
    went, and the diff's changes."""
    app = TreetoolApp(a, other=b)
    seen: list[str] = []

    async def auto(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("slash", *"**.w")
        await settle(pilot)
        seen.extend([*app.matches, str(app.node.path)])
        await pilot.press("enter", "escape", "3")  # the Diff tab
        await settle(pilot)
        seen.extend(c.path for c in app.query_one("#diff-tab").result.changes)
        app.exit()

    app.run(headless=True, auto_pilot=auto, size=(120, 40))
    return seen


def test_trees_are_freed_once_the_app_has_exited() -> None:
    a, b = _trees()
    arrays = [weakref.ref(t[f"layer{i}"]["w"]) for t in (a, b) for i in range(3)]
    trees = [id(a), id(b)]
    matches = [f"['layer{i}']['w']" for i in range(3)]
    # the search worker found and revealed the first match; the diff worker ran
    assert _browse(a, b) == [*matches, matches[0], "['layer1']['b']"]
    del a, b
    gc.collect()
    # the search walked `a`'s root dict, whose key map was kept with its `Node` (and so the
    # whole tree) for as long as the process ran
    assert [r() is None for r in arrays] == [True] * 6
    assert not [o for o in gc.get_objects() if id(o) in trees]

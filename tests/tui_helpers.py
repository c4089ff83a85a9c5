"""What the TUI tests share: `settle(pilot)` and the `no_delays` fixture.

A test module takes both with

    from tui_helpers import no_delays, settle  # noqa: F401 (the fixture is used by name)

    pytestmark = pytest.mark.usefixtures("no_delays")
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled
from treetool.tui import TreetoolApp

__all__ = ["no_delays", "settle"]

#: rounds of (one pass of the message loop, every worker done) in `settle`: a search's answer
#: lights the tree (a timer), whose reveal moves the cursor (after a refresh), whose message
#: moves the details pane (a timer), whose stats run in a worker
ROUNDS = 4


@pytest.fixture
def no_delays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's debounce delays set to 0: the tree follows a search and the details pane
    follows the cursor at the next pass of the message loop, so tests need no fixed pauses."""
    monkeypatch.setattr(TreetoolApp, "DETAILS_DELAY", 0.0)
    monkeypatch.setattr(TreetoolApp, "FOLLOW_DELAY", 0.0)


async def settle(pilot: Pilot[Any]) -> None:
    """Let the app finish what it started: messages, timers due now, workers, repaints.

    Each round waits for every message queued so far (`pause(0)`: the screen's queues, then
    one pass of the event loop, where a timer due now fires) and for every worker; the last
    pause also waits until the process is idle (Textual's `pause()`, 20 ms at least: paid
    once, not once a round)."""
    for _ in range(ROUNDS):
        await pilot.pause(0)
        await _workers_done(pilot)
    await pilot.pause()


async def _workers_done(pilot: Pilot[Any]) -> None:
    """Every worker of the app done; one that a newer one of its exclusive group cancelled
    meanwhile (the details' stats when the totals come) is no failure: wait again."""
    for _ in range(ROUNDS):
        try:
            await pilot.app.workers.wait_for_complete()
            return
        except WorkerCancelled:
            continue
    await pilot.app.workers.wait_for_complete()

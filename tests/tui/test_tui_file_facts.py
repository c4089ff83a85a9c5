"""The TUI's root details show what a file says about itself (safetensors `__metadata__`)."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
import pytest
from rich.console import Console
from safetensors.numpy import save_file
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool.io as tio

pytestmark = pytest.mark.usefixtures("no_delays")


def test_root_details_show_safetensors_metadata(tmp_path):
    f = tmp_path / "model.safetensors"
    save_file(
        {"encoder.layer.0.weight": np.ones((2, 2), np.float32)},
        str(f),
        metadata={"format": "pt", "note": "a\x1b[31mred"},
    )
    loaded = tio.read(f)

    async def main() -> str:
        app = TreetoolApp(loaded.tree, title=str(f), file_facts={"metadata": loaded.metadata})
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot)
            details = app.query_one(DetailsPane)
            details.show(app.model)
            await pilot.pause()
            console = Console(width=200, file=io.StringIO(), color_system=None)
            console.print(details.query_one("#details-facts").content)
            await pilot.press("q")
            return console.file.getvalue()

    text = asyncio.run(main())
    assert "\x1b" not in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("metadata  ")]
    assert json.loads(line.removeprefix("metadata  ")) == {"format": "pt", "note": "a\x1b[31mred"}

"""The terminal UI and the renderers on a remote sharded checkpoint behave as for a local file."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from rich.console import Console
from storage_servers import BUCKET

import treetool as tt


def _text(widget: Any) -> str:
    console = Console(width=160, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return console.file.getvalue()


def test_details_say_which_shard_and_stats_come_from_it(s3: Any, files: dict) -> None:
    from treetool.tui import TreetoolApp
    from treetool.tui.widgets import DetailsPane

    url = f"s3://{BUCKET}/run/model.safetensors.index.json"
    tree = tt.load(url)
    app = TreetoolApp(tree, title=url)
    head = tree["lm_head.weight"]

    async def drive() -> tuple[str, str]:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            # the first leaf row after the root is ['lm_head.weight'] (keys sort: 'l' < 'm')
            await pilot.press("down")
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause(0.1)
            details = app.query_one(DetailsPane)
            facts = _text(details.query_one("#details-facts"))
            stats = _text(details.query_one("#details-stats"))
            await pilot.press("q")
            return facts, stats

    facts, stats = asyncio.run(drive())
    shard = f"s3://{BUCKET}/run/model-00003-of-00003.safetensors"
    assert f"{shard} @ {head.offset:,}" in facts
    expected = files["tensors"]["lm_head.weight"]
    assert f"min    {expected.min():.6g}" in stats  # computed from the shard's bytes
    assert f"max    {expected.max():.6g}" in stats


def test_render_of_remote_tree_reads_no_payload(s3: Any) -> None:
    tree = tt.load(f"s3://{BUCKET}/run/model.safetensors.index.json")
    s3.log.clear()
    console = Console(width=120, file=io.StringIO(), color_system=None)
    console.print(tt.render(tree))
    out = console.file.getvalue()
    assert "['lm_head.weight']" in out and "f32[16,64]" in out
    assert s3.log.count == 0

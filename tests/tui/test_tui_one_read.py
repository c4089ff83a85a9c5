"""A remote leaf the cursor rests on is read once for its stats, histogram and preview, and the
leaves the cursor only passes over are not read at all (issue 40, point 1), counted by a real
ranged HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import numpy as np
import pytest
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane
from tui_helpers import settle

import treetool as tt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
from storage_servers import HttpServer

N = 60
#: 4 MB: under the pane's 8 MB remote limit, so its stats start by themselves
BIG = (1024, 1024)
SMALL = (64, 64)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from safetensors.numpy import save_file

    root = tmp_path_factory.mktemp("served")
    rng = np.random.default_rng(0)
    tensors = {f"w{i:02d}": rng.standard_normal(SMALL).astype(np.float32) for i in range(N)}
    tensors["a_big"] = rng.standard_normal(BIG).astype(np.float32)
    save_file(tensors, str(root / "model.safetensors"))
    server = HttpServer(str(root))
    yield server, tensors
    server.stop()


def _stats_text(app: TreetoolApp) -> str:
    import io

    from rich.console import Console

    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(app.query_one(DetailsPane).query_one("#details-stats").content)
    return console.file.getvalue()


def test_resting_on_a_remote_leaf_reads_it_once(served: Any, monkeypatch) -> None:
    server, tensors = served
    monkeypatch.setattr(TreetoolApp, "DETAILS_DELAY", 0.0)
    tree = tt.load(f"{server.url}/model.safetensors")
    big = tree["a_big"]
    app = TreetoolApp(tree, title="model")

    async def drive() -> tuple[int, int, str, str]:
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            server.log.clear()
            await pilot.press("down")  # ['a_big']: keys sort, 'a' first
            await settle(pilot)
            sent = server.log.bytes_sent
            first = _stats_text(app)
            await pilot.press("down", "up")  # back on it: the kept parts, no read
            await settle(pilot)
            again = server.log.bytes_sent - sent
            return sent, again, first, _stats_text(app)

    sent, again, first, second = asyncio.run(drive())
    expected = tensors["a_big"]
    assert f"max    {expected.max():.6g}" in first
    assert f"min    {expected.min():.6g}" in first
    assert big.nbytes == 4 * 1024 * 1024
    # stats, histogram and the corners from one read (it was three: 8.4 MB for this leaf)
    assert big.nbytes <= sent <= 1.25 * big.nbytes
    assert again <= 1.25 * SMALL[0] * SMALL[1] * 4  # w00 read once; a_big's parts were kept
    assert second == first


def test_passing_over_leaves_reads_only_the_one_rested_on(served: Any, monkeypatch) -> None:
    server, _ = served
    # the pane follows once the cursor rests this long: 50 presses take far less
    monkeypatch.setattr(TreetoolApp, "DETAILS_DELAY", 1.0)
    tree = tt.load(f"{server.url}/model.safetensors")
    app = TreetoolApp(tree, title="model")
    leaf = SMALL[0] * SMALL[1] * 4

    async def drive() -> tuple[int, list[str | None], str]:
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            server.log.clear()
            await pilot.press(*["down"] * 51)  # past a_big and w00..w48, onto w49
            for _ in range(40):
                await pilot.pause(0.1)
                pane = app.query_one(DetailsPane)
                if pane.node is not None and str(pane.node.path) == "['w49']":
                    break
            await settle(pilot)
            ranges = [r.range for r in server.log.requests]
            return server.log.bytes_sent, ranges, str(app.query_one(DetailsPane).node.path)

    sent, ranges, shown = asyncio.run(drive())
    assert shown == "['w49']"
    w49 = tree["w49"]
    assert leaf <= sent <= 1.25 * leaf  # w49 alone: not the 4 MB a_big nor the 49 between
    for r in ranges:  # every request falls inside w49's bytes
        start, stop = (int(v) for v in r.removeprefix("bytes=").split("-"))
        assert w49.offset <= start and stop < w49.offset + w49.nbytes, r


def test_a_remote_leaf_over_the_limit_waits_for_s(served: Any, monkeypatch) -> None:
    server, tensors = served
    monkeypatch.setattr(TreetoolApp, "DETAILS_DELAY", 0.0)
    tree = tt.load(f"{server.url}/model.safetensors")
    app = TreetoolApp(tree, title="model", stats_limit=1 << 20)  # 1 MB: a_big is over it

    async def drive() -> tuple[str, int, str, int]:
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            server.log.clear()
            await pilot.press("down")
            await settle(pilot)
            waiting, before = _stats_text(app), server.log.bytes_sent
            await pilot.press("S")
            await settle(pilot)
            return waiting, before, _stats_text(app), server.log.bytes_sent

    waiting, before, done, after = asyncio.run(drive())
    assert waiting.strip() == "press S to compute stats (reads 4.2 MB over the network)"
    assert before == 0
    assert f"max    {tensors['a_big'].max():.6g}" in done
    assert 4 * 1024 * 1024 <= after <= 1.25 * 4 * 1024 * 1024

"""The TUI's details of a torch file: the weights_only report at the root, ties at a leaf."""

from __future__ import annotations

import asyncio
import io
import os

import pytest
import torch
from rich.console import Console
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane

import treetool.io as tio
from treetool._cli._files import file_facts

pytestmark = pytest.mark.slow


def _details(tree: object, facts: dict, path: str | None) -> str:
    async def main() -> str:
        app = TreetoolApp(tree, title="x.pt", file_facts=facts)
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            details = app.query_one(DetailsPane)
            node = app.model
            if path is not None:
                node = next(c for c in node.children if str(c.path) == path)
            details.show(node)
            await pilot.pause()
            console = Console(width=200, file=io.StringIO(), color_system=None)
            console.print(details.query_one("#details-facts").content)
            await pilot.press("q")
            return console.file.getvalue()

    return asyncio.run(main())


def test_root_and_leaf_details(tmp_path: os.PathLike) -> None:
    class Evil:
        def __reduce__(self) -> object:
            return (os.system, ("true",))

    w = torch.ones(3, 2)
    p = str(tmp_path / "x.pt")
    torch.save({"emb": w, "head": w, "evil": Evil()}, p)
    r = tio.read(p)
    facts = file_facts(r)
    root = _details(r.tree, facts, None)
    assert "torch checkpoint (zip format)" in root
    assert (
        "weights_only: torch.load(weights_only=True) would refuse this file: 1 global not on the allow-list"
        in root
    )
    assert "posix.system: runs commands or code when loaded" in root
    leaf = _details(r.tree, facts, "['head']")
    assert "tied" in leaf and "same tensor as ['emb']" in leaf

"""The terminal UI shows loaded keys and functions as jax has them: `key<rbg>[4]`, one leaf."""

from __future__ import annotations

import asyncio

import cloudpickle
import jax
import pytest
from treetool.tui import TreetoolApp
from treetool.tui.widgets import DetailsPane, PytreeTree
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool as tt

pytestmark = pytest.mark.usefixtures("no_delays")


def _rows(tree: PytreeTree) -> list[str]:
    out, stack = [], [tree.root]
    while stack:
        tn = stack.pop()
        out.append(str(tn.label))
        if tn.is_expanded:
            stack.extend(reversed(tn.children))
    return out


def test_tui_rows_for_loaded_keys_and_functions(tmp_path):
    live = {
        "act": jax.nn.relu,
        "keys": jax.random.split(jax.random.key(0, impl="rbg"), 4),
        "one": jax.random.key(1),
    }
    p = tmp_path / "t.pkl"
    p.write_bytes(cloudpickle.dumps(live))
    tree = tt.load(str(p))

    async def run() -> None:
        app = TreetoolApp(tree, title="t.pkl")
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot)
            rows = _rows(app.query_one(PytreeTree))
            assert rows == [
                "tree  dict[3]  72 B",
                "['act']  <custom_jvp jax._src.nn.functions.relu>  [not executed]",
                "['keys']  key<rbg>[4]  64 B  [key]",
                "['one']  key<fry>[]  8 B  [key]",
            ], rows
            app.query_one(PytreeTree).reveal("['keys']")
            await settle(pilot)
            assert app.query_one(DetailsPane).node.info.label == "key<rbg>[4]"

    asyncio.run(run())

"""One index, one count (issue 40, point 2): on the demo tree the TUI's `/` search, its `n`/`N`
stops, the Leaves tab's filter, `treetool ls --search` and `inspect --filter` give the same
matches: leaves (a `None`-valued `bias` field is no match), or the nodes a glob names."""

from __future__ import annotations

import argparse
import asyncio

import pytest
from treetool.tui import TreetoolApp
from treetool.tui.widgets import LeavesTable
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

from treetool._cli._commands import _searched
from treetool._cli._demo import demo_tree
from treetool._cli._targets import _select
from treetool._tree._leaf_index import LeafIndex

pytestmark = pytest.mark.usefixtures("no_delays")


@pytest.fixture(scope="module")
def demo():
    return demo_tree()


def _ls(tree, query: str) -> list[str]:
    """What `treetool ls --search QUERY` lists (its own function, in process)."""
    args = argparse.Namespace(search=query, glob=None, target="demo")
    return [p for p, _ in _searched(tree, args)]


def _drive(tree, query: str, stops: int):
    app = TreetoolApp(tree, title="demo")

    async def run():
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await pilot.press("slash", *query)
            await settle(pilot)
            count = str(app.query_one("#search-count").render())
            table = app.query_one(LeavesTable)
            filtered = [table.path_at(i) for i in range(table.row_count)]
            matches = list(app.matches)
            await pilot.press("enter")
            await settle(pilot)
            visited = []
            for _ in range(stops):
                visited.append(app.node)
                await pilot.press("n")
                await settle(pilot)
            await pilot.press("N", "N")
            await settle(pilot)
            back = str(app.node.path)
            return count, matches, filtered, visited, back

    return asyncio.run(run())


def test_a_glob_of_leaves_counts_the_leaves_there_are(demo):
    count, matches, filtered, visited, back = _drive(demo, "**.bias", 3)
    ls = _ls(demo, "**.bias")
    index = LeafIndex.build(demo)
    leaves = set(index.paths)
    assert len(ls) == 51
    assert count == "51 matches"  # was 102: the `None` biases of bias-free layers counted
    assert matches == ls == filtered
    assert [str(p) for p, _ in _select(demo, "**.bias")] == ls  # inspect --filter
    assert all(m in leaves for m in matches)
    # n stops on the matches in order, each a real array (never a `.bias None` row)
    assert [str(n.path) for n in visited] == ls[:3]
    assert all(n.is_leaf and n.info.shape is not None for n in visited)
    assert back == ls[1]


def test_a_glob_that_names_nodes_stops_on_them_and_filters_to_their_leaves(demo):
    count, matches, filtered, visited, _ = _drive(demo, "**.attn", 2)
    assert count == "12 matches"
    assert matches == [  # the model's 4 blocks, then adamw's mu and nu of them
        f"{top}.blocks[{i}].attn"
        for top in ("['model']", "['opt_state'][0].mu", "['opt_state'][0].nu")
        for i in range(4)
    ]
    assert [str(p) for p, _ in _select(demo, "**.attn")] == matches
    ls = _ls(demo, "**.attn")
    assert filtered == ls
    assert len(ls) == 56 and all(any(p.startswith(m + ".") for m in matches) for p in ls)
    assert [str(n.path) for n in visited] == matches[:2]


def test_a_text_search_is_the_same_list_everywhere(demo):
    count, matches, filtered, _, _ = _drive(demo, "bias", 1)
    ls = _ls(demo, "bias")
    assert count == f"{len(ls)} matches"
    assert matches == ls == filtered

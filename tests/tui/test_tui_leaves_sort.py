"""The Leaves table (issue 40, point 5): the header's sort mark changes with the rows (the sort
runs in a worker), a key per column sorts numbers largest first, and cells are measured in
terminal cells (CJK, emoji, combining marks), so the columns stay aligned."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from rich.cells import cell_len
from treetool.tui import TreetoolApp
from treetool.tui.widgets import LeavesTable
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

pytestmark = pytest.mark.usefixtures("no_delays")


def _tree(n: int = 3000):
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 400, size=n)
    return {
        f"p{i}": np.zeros(int(s), np.float32 if i % 2 else np.int8) for i, s in enumerate(sizes)
    }


def _header(table: LeavesTable) -> str:
    return table.render_line(0).text


def test_the_header_never_contradicts_the_rows() -> None:
    app = TreetoolApp(_tree(), title="model")
    seen: list[tuple[str, bool]] = []

    async def run():
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await pilot.press("L")
            await settle(pilot)
            table = app.query_one(LeavesTable)
            index = table.index
            for key in ["s", "s", "r", "s", "r", "s", "s", "r"]:
                await pilot.press(key)
                for _ in range(3):  # look before and while the worker answers
                    col, rev = table.shown_order
                    header = _header(table)
                    expected = (
                        np.arange(len(index))
                        if col is None
                        else index.order(col, rev, table.filter_rows)
                    )
                    assert np.array_equal(table.rows, expected), (col, rev)
                    if col is not None:
                        title = dict(COLUMNS)[col]
                        assert f"{title} {'▼' if rev else '▲'}" in header, header
                    else:
                        assert "▼" not in header and "▲" not in header
                    seen.append((col, rev))
                    await pilot.pause(0)
            await settle(pilot)
            return table.shown_order, (table.sort_column, table.sort_reverse)

    from treetool._tree._leaf_index import COLUMNS

    shown, wanted = asyncio.run(run())
    # path, type, type reversed, dtype reversed, dtype, params, bytes, bytes reversed
    assert shown == wanted == ("nbytes", True)
    assert len(set(seen)) > 2


def test_bytes_and_params_keys_sort_largest_first() -> None:
    tree = _tree(200)
    app = TreetoolApp(tree, title="model")
    by_bytes = sorted(tree, key=lambda k: -tree[k].nbytes)
    by_params = sorted(tree, key=lambda k: -tree[k].size)

    async def run():
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await pilot.press("L")
            await settle(pilot)
            table = app.query_one(LeavesTable)
            await pilot.press("B")
            await settle(pilot)
            bytes_rows = [table.path_at(i) for i in range(table.row_count)]
            bytes_header = _header(table)
            await pilot.press("B")  # again: smallest first
            await settle(pilot)
            smallest = table.path_at(0)
            await pilot.press("P")
            await settle(pilot)
            params_rows = [table.path_at(i) for i in range(table.row_count)]
            return bytes_rows, bytes_header, smallest, params_rows, _header(table)

    bytes_rows, bytes_header, smallest, params_rows, params_header = asyncio.run(run())
    # one key press, largest first (it was five presses round a 7-state cycle, smallest first)
    assert [tree[p[2:-2]].nbytes for p in bytes_rows] == [tree[k].nbytes for k in by_bytes]
    assert bytes_rows[0] == f"['{by_bytes[0]}']"
    assert "Bytes ▼" in bytes_header
    assert tree[smallest[2:-2]].nbytes == min(x.nbytes for x in tree.values())
    assert [tree[p[2:-2]].size for p in params_rows] == [tree[k].size for k in by_params]
    assert "Params ▼" in params_header


def test_wide_and_combining_characters_keep_the_columns_aligned() -> None:
    names = [
        "ascii",
        "重みの行列",
        "ｆｕｌｌｗｉｄｔｈ",
        "emoji😀🚀",
        "e\u0301\u0301combining",
        "x" * 200,
    ]
    tree = {n: np.zeros(3, np.float32) for n in names}
    app = TreetoolApp(tree, title="model")

    async def run():
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("L")
            await settle(pilot)
            table = app.query_one(LeavesTable)
            width = table.scrollable_content_region.width
            path_w = dict(table._widths())["path"]
            lines = [table.render_line(y) for y in range(1, 1 + len(names))]
            return width, path_w, lines

    width, path_w, lines = asyncio.run(run())
    for strip in lines:
        segs = [s for s in strip if s.text]
        assert strip.cell_length == width
        assert cell_len(segs[0].text) == path_w, segs[0].text  # the path cell, in cells
        assert segs[1].text == " "
    texts = [next(s.text for s in strip if s.text) for strip in lines]
    assert any("重み" in t for t in texts) and any("😀" in t for t in texts)

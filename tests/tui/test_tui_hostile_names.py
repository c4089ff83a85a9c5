"""The TUI on files whose names attack the terminal: every tab shows them escaped and plain.

The tree holds a pickle (hostile class and attribute names, dict keys), an npz (member
names), a safetensors file (tensor names), an orbax checkpoint (keys) and live jax arrays
(so the Devices tab opens), each named with markup (`[/]`, `[link=...]`, `[bold red]x`,
`[@click=app.screenshot(...)]`), escape sequences, a newline, a C1 CSI and a bidi override
(`tests/hostile/hostile_names.py`). Pilot walks the tree, the details pane, the Leaves,
Devices, Diff and Jaxpr tabs, search, help and a copy (`y`, `Y`) with its toast, which it
clicks: no action may run (no file written), the app stays up, and what is on screen holds
the names literally, escaped, with no control character.
"""

from __future__ import annotations

import asyncio
import functools
import html
import re

import jax.numpy as jnp
import numpy as np
import pytest
from hostile.harness import control_chars
from hostile.hostile_names import (
    CLICK,
    NAMES,
    SHOWN,
    write_npz,
    write_orbax,
    write_pickle,
    write_safetensors,
)
from textual.widgets import TabbedContent
from treetool.tui import TreetoolApp
from treetool.tui.widgets import LeavesTable, PytreeTree
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool as tt

pytestmark = pytest.mark.usefixtures("no_delays")

SIZE = (200, 50)


def _sync(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("tui-names")
    click = d / "clicked"
    write_pickle(d / "names.pkl", click)
    write_npz(d / "names.npz", click)
    write_safetensors(d / "names.safetensors", click)
    write_orbax(d / "names.orbax", click)
    live = {n: jnp.arange(2.0) for n in NAMES}
    tree = {
        "pkl": tt.load(d / "names.pkl"),
        "npz": tt.load(d / "names.npz"),
        "st": tt.load(d / "names.safetensors"),
        "orbax": tt.load(d / "names.orbax"),
        "live": live,
    }
    return d, click, tree


def _screen_text(app) -> str:
    """Everything on screen, from the real SVG export (text cells in order)."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r">([^<]*)</text>", svg))).replace("\xa0", " ")


def _assert_clean(app, where: str) -> str:
    text = _screen_text(app)
    bad = control_chars(text)
    assert not bad, f"{where}: control characters {bad!r} on screen"
    return text


def _all_nodes(tn):
    for child in tn.children:
        yield child
        yield from _all_nodes(child)


async def _no_click_actions(app, pilot, widget) -> None:
    """No cell of `widget` carries a Textual action; then click it, as a user would."""
    region = widget.region
    for y in range(region.y, region.bottom):
        for x in range(region.x, region.right):
            style = app.screen.get_style_at(x, y)
            assert "@click" not in style.meta, (x, y, style.meta)
    await pilot.click(widget)
    await settle(pilot)


@_sync
async def test_every_tab_shows_hostile_names_plain_and_escaped(hostile):
    d, click, tree = hostile
    other = {**tree, "live": {n: jnp.arange(3.0) for n in NAMES}}  # every live leaf changes
    app = TreetoolApp(tree, title="names\x1b]0;title\x07[/].pkl", other=other)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        tv = app.query_one(PytreeTree)
        # the tree: open every file's dict, and a pickled object down to its hostile attribute
        for path in (
            "['pkl']['\\x1b[2J\\x1b]0;pwned\\x07'].\x1b[2J\x1b]0;pwned\x07",
            "['npz']['a\\nb\\tc']",
            "['st']['[/oops]']",
            "['orbax']['\\u202eevil']",
            "['live']['[bold red]x']",
        ):
            tv.reveal(path)
            await settle(pilot)
        text = _assert_clean(app, "tree")
        assert "names\\x1b]0;title\\x07[/].pkl" in text  # the header: the file name, escaped
        labels = [tn.label.plain for tn in _all_nodes(tv.root)]
        assert not control_chars("".join(labels))
        for n in NAMES:  # 4 files hold every name (npz: those without `/`), the live dict too
            rows = [lb for lb in labels if lb.startswith(f"['{SHOWN[n]}']  ")]
            assert len(rows) == (4 if "/" in n else 5), (n, rows)
        assert "['[/oops]']  [/oops]  6 params · 24 B  [not executed]" in labels
        assert ".\\x1b[2J\\x1b]0;pwned\\x07  f32[3]  3 params · 12 B" in labels
        assert "['a\\nb\\tc']  a_b\\tc  6 params · 24 B  [not executed]" in labels

        # the details pane of an opaque object: its class path and its key, escaped
        tv.reveal("['pkl']['[bold red]x']")
        await settle(pilot)
        text = _assert_clean(app, "details")
        assert "evil\\x1b]0;t\\x07mod2.[bold red]x" in text

        # copy: the clipboard and the toast get the escaped path; the toast is plain text
        tv.reveal(f"['pkl'][{CLICK.format(dir=click)!r}]")
        await settle(pilot)
        await pilot.press("Y")
        await settle(pilot)
        assert app.clipboard == f"['pkl'][\"{CLICK.format(dir=click)}\"]"
        toasts = list(app.screen.query("Toast"))
        assert toasts
        assert toasts[-1].render().plain == (
            "sent to the terminal clipboard (OSC 52; tmux needs set-clipboard on): "
            f"path in keystr form\n{app.clipboard}"
        )
        await _no_click_actions(app, pilot, toasts[-1])
        tv.reveal("['pkl']['\\x1b]52;c;cHduZWQ=\\x07']")
        await settle(pilot)
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == "tree['pkl']['\\x1b]52;c;cHduZWQ=\\x07']"
        assert not control_chars(app.clipboard)

        # search: a query that is itself markup, then a name with an escape in it
        await pilot.press("slash")
        app.query_one("#search-input").value = "[/oops]"  # as typed, in one search
        await settle(pilot)
        text = _assert_clean(app, "search")
        assert "/oops" in text
        assert str(app.node.path).endswith("['[/oops]']")
        await pilot.press("escape")
        await settle(pilot)

        tabs = app.query_one(TabbedContent)
        for tab in ("leaves", "devices", "diff"):
            tabs.active = tab
            await settle(pilot)
            text = _assert_clean(app, tab)
            if tab == "leaves":
                table = app.query_one(LeavesTable)
                assert table.row_count == 2 * 10 + 6 + 10 + 10 + 9  # pkl, npz, st, orbax, live
                assert "['a\\nb\\tc'].a\\nb\\tc" in text
            if tab == "devices":
                assert "['live']['[/oops]']" in text
                assert "['live']['\\u202eevil']" in text
            if tab == "diff":
                assert "['[link=https://evil.example]x[/link]']" in text
                assert "f32[2] → f32[3]" in text
                changes = app.query_one("#diff-tab").result.changes
                assert {c.path for c in changes} == {f"['live'][{n!r}]" for n in NAMES}
                assert "\\x1b]52;c;cHduZWQ=\\x07" in text

        await pilot.press("question_mark")
        await settle(pilot)
        _assert_clean(app, "help")
        await pilot.press("escape")
        await settle(pilot)
        assert app.is_running
    assert not click.exists()  # no click anywhere ran `app.screenshot` into the pickle's dir
    assert sorted(p.name for p in d.iterdir()) == [
        "names.npz",
        "names.orbax",
        "names.pkl",
        "names.safetensors",
    ]


@_sync
async def test_jaxpr_tab_shows_input_paths_of_a_hostile_tree_escaped(hostile):
    _, click, _ = hostile
    params = {n: jnp.arange(2.0) for n in NAMES}

    def f(p):
        return sum(x.sum() for x in jnp.asarray(list(p.values())))

    view = tt.jaxpr(f, params)
    app = TreetoolApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.query_one(TabbedContent).active = "jaxpr"
        await settle(pilot)
        text = _assert_clean(app, "jaxpr")
        assert "args[0]['[/oops]']" in text
        assert "args[0]['\\x1b[2J\\x1b]0;pwned\\x07']" in text
        assert app.is_running
    assert not click.exists()


def test_leaves_of_the_hostile_tree_are_real(hostile):
    """The fixture is what the tests above claim: real files, read back with the names."""
    _, click, tree = hostile
    assert sorted(tree["st"]) == sorted(tree["orbax"]) == sorted([*NAMES, CLICK.format(dir=click)])
    assert sorted(tree["live"]) == sorted(NAMES)
    assert "\x1b[2J\x1b]0;pwned\x07" in tree["st"]
    assert np.asarray(tree["st"]["[/oops]"]).tolist() == [0.0, 1.0]

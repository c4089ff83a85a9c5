"""One error policy: a tree with nodes whose flatten raises, through every public view.

The tree (tests/error_targets.py) holds a real jax-registered node whose flatten raises
`RuntimeError("flatten exploded")` at `['bad']` and `['deep']['x'][1]`, and a leaf whose
`.shape` raises at `['odd']`. Every view shows the error at its path, or (the flat views,
which cannot leave a leaf out) raises a `NodeError` naming it: never a crash.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_runner import Ahead
from error_targets import fixed, tree
from rich.console import Console

import treetool as tt

TESTS = Path(__file__).parents[1]
MSG = "RuntimeError: flatten exploded"
BROKEN = ["['bad']", "['deep']['x'][1]"]


#: each CLI test's runs, started side by side when the module's first test asks
AHEAD = Ahead(
    TESTS,
    {
        "test_cli_inspect_and_ls_json_list_an_error_entry": [
            ("inspect", "error_targets:TREE", "--json"),
            ("ls", "error_targets:TREE", "--json"),
            ("ls", "error_targets:TREE", "deep.x[1]", "--json"),
        ],
        "test_cli_ls_one_line_per_broken_node": [
            ("ls", "error_targets:TREE"),
            ("ls", "error_targets:TREE", "**"),
        ],
        "test_cli_get_broken_path_fails_in_one_line_and_sibling_works": [
            ("get", "error_targets:TREE", "bad"),
            ("get", "error_targets:TREE", "ok", "--json"),
        ],
        "test_diff_reports_the_broken_node_at_its_path": [
            ("diff", "error_targets:TREE", "error_targets:FIXED", "--json")
        ],
    },
)


@pytest.fixture(scope="module", autouse=True)
def _ahead(request: pytest.FixtureRequest) -> None:
    AHEAD.start(request)


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`treetool ARGS` in tests/: the run started ahead where there is one."""
    return AHEAD(*args)


def _text(x) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(x)
    return console.file.getvalue()


def test_render_shows_the_error_at_its_path():
    t = tree()
    lines = _text(tt.render(t)).splitlines()
    assert "├── ['bad']  Broken  ⚠ RuntimeError: flatten exploded" in lines
    assert "│       └── [1]  Broken  ⚠ RuntimeError: flatten exploded" in lines
    assert "└── ['ok']  f64[3]  3 params · 24 B" in lines
    assert any(line.startswith("├── ['odd']  BadShape") for line in lines)


def test_html_shows_the_error_in_place():
    html = tt.view(tree())._repr_html_()
    assert html.count("⚠ RuntimeError: flatten exploded") == 2
    assert "Traceback" not in html


def test_summary_counts_and_lists_errors():
    s = tt.summary(tree())
    assert s.errors == [(BROKEN[0], MSG), (BROKEN[1], MSG)]
    assert s.total.errors == 2 and s.total.leaves == 3 and s.total.params == 3
    assert {r.path: r.errors for r in s.rows} == {
        "['bad']": 1,
        "['deep']": 1,
        "['odd']": 0,
        "['ok']": 0,
    }
    d = s.to_dict()
    assert d["errors"] == [{"path": p, "error": MSG} for p in BROKEN]
    assert d["totals"]["errors"] == 2
    text = _text(s)
    assert f"error: ['bad']: {MSG}" in text and f"error: ['deep']['x'][1]: {MSG}" in text


def test_flat_views_raise_a_treetool_error_naming_the_path():
    t = tree()
    for fn in (tt.leaves_with_path, tt.to_flat_dict, tt.flatten):
        with pytest.raises(tt.NodeError) as e:
            fn(t)
        assert isinstance(e.value, tt.TreetoolError)
        assert str(e.value) == f"['bad']: cannot open this node: {MSG}"
    # a sibling of the broken node is still reachable
    np.testing.assert_array_equal(tt.get(t, "['ok']"), np.ones(3))


def test_cli_inspect_and_ls_json_list_an_error_entry():
    for cmd in ("inspect", "ls"):
        out = _cli(cmd, "error_targets:TREE", "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        errors = [r for r in data["leaves"] if "error" in r]
        assert errors == [{"path": p, "error": MSG} for p in BROKEN]
        assert data["totals"] == {"leaves": 3, "params": 3, "bytes": 24, "errors": 2}
    only = json.loads(_cli("ls", "error_targets:TREE", "deep.x[1]", "--json").stdout)
    assert only["leaves"] == [{"path": BROKEN[1], "error": MSG}]
    assert only["totals"] == {"leaves": 3, "params": 3, "bytes": 24, "errors": 2}


def test_cli_ls_one_line_per_broken_node():
    out = _cli("ls", "error_targets:TREE")
    globbed = _cli("ls", "error_targets:TREE", "**")
    assert out.returncode == 0 and globbed.returncode == 0, out.stderr + globbed.stderr
    assert globbed.stdout == out.stdout
    assert out.stdout.splitlines() == [
        f"['bad']\t!\terror: {MSG}",
        "['deep']['x'][0]\t-\t1",
        f"['deep']['x'][1]\t!\terror: {MSG}",
        "['odd']\t-\tBadShape()",
        "['ok']\t[3]\tfloat64",
    ]


def test_cli_get_broken_path_fails_in_one_line_and_sibling_works():
    out = _cli("get", "error_targets:TREE", "bad")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == (
        f"treetool: error: error_targets:TREE: ['bad']: cannot open this node: {MSG}\n"
    )
    ok = _cli("get", "error_targets:TREE", "ok", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["shape"] == [3]


def test_diff_reports_the_broken_node_at_its_path():
    same = tt.diff(tree(), tree())
    assert [(c.path, c.kind, c.before, c.after) for c in same.changes if c.kind == "error"] == [
        (p, "error", MSG, MSG) for p in BROKEN
    ]
    against_fixed = tt.diff(tree(), fixed())
    assert [(c.path, c.before, c.after) for c in against_fixed if c.kind == "error"] == [
        (p, MSG, None) for p in BROKEN
    ]
    assert f"['bad']  error  cannot open this node · before: {MSG}" in _text(against_fixed)
    out = _cli("diff", "error_targets:TREE", "error_targets:FIXED", "--json")
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["kinds"]["error"] == 2


def test_diff_reports_a_leaf_whose_facts_fail_at_its_path():
    import jax.numpy as jnp

    gone = jnp.ones(4)
    gone.delete()  # its shape is known, its data is not: comparing it raises in jax
    d = tt.diff({"gone": gone, "ok": np.ones(2)}, {"gone": jnp.ones(4), "ok": np.ones(2)})
    assert [(c.path, c.kind, c.detail) for c in d] == [("['gone']", "error", {"leaf": True})]
    assert "deleted" in d.changes[0].before
    assert "['gone']  error  cannot compare these leaves · RuntimeError: Array has been" in _text(d)
    assert tt.summary({"gone": gone}).total.params == 4  # facts without data still count


def test_tui_open_expand_leaves_tab_and_search():
    from treetool.tui import TreetoolApp
    from treetool.tui.widgets import LeavesTable, PytreeTree

    async def settle(app, pilot) -> None:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        await app.workers.wait_for_complete()
        await pilot.pause()

    async def run() -> None:
        app = TreetoolApp(tree(), title="t")
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(app, pilot)
            view = app.query_one(PytreeTree)
            labels = [str(n.label) for n in view.root.children]
            assert f"['bad']  Broken  ⚠ {MSG}" in labels
            view.reveal("['deep']['x'][1]")  # expand down to the nested broken node
            await settle(app, pilot)
            assert str(app.node.path) == "['deep']['x'][1]"
            assert app.node.error == MSG
            assert str(app.query_one("#totals").render()) == (
                "3 leaves · 3 params · 24 B · f64×1 · 2 errors · host"
            )
            facts = Console(width=100, file=io.StringIO(), color_system=None)
            facts.print(app.query_one("#details-facts").content)
            assert f"error  {MSG}" in facts.file.getvalue()
            await pilot.press("L")
            await settle(app, pilot)
            table = app.query_one(LeavesTable)
            paths = [table.path_at(i) for i in range(table.row_count)]
            assert paths == [
                "['bad']",
                "['deep']['x'][0]",
                "['deep']['x'][1]",
                "['odd']",
                "['ok']",
            ]
            index = app.index
            assert [index.cell("type", i) for i in range(5)] == [
                f"⚠ {MSG}",
                "int",
                f"⚠ {MSG}",
                "BadShape",
                "f64[3]",
            ]
            await pilot.press("slash", "*", "*")
            await settle(app, pilot)
            assert app.matches == [
                "['bad']",
                "['deep']",
                "['deep']['x']",
                "['deep']['x'][0]",
                "['deep']['x'][1]",
                "['odd']",
                "['ok']",
            ]
            assert app.is_running  # no worker took the app down

    asyncio.run(run())


def test_node_aggregates_count_broken_nodes_instead_of_raising():
    root = tt.view(tree())
    agg = root.aggregates
    assert (agg.leaves, agg.params, agg.nbytes, agg.errors) == (3, 3, 24, 2)
    assert agg.error_entries == [(p, MSG) for p in BROKEN]
    assert root.aggregates_within(100).errors == 2
    assert root.child("deep").aggregates.error_entries == [("['x'][1]", MSG)]


def test_stats_of_what_has_no_numbers_is_a_stats_error():
    import jax
    import jax.numpy as jnp

    gone = jnp.ones(3)
    gone.delete()
    with pytest.raises(tt.StatsError, match=r"RuntimeError: Array has been deleted") as e:
        tt.stats(gone)
    # a TreetoolError, and still what it was: RuntimeError (jax's) and TypeError (keys, strings)
    assert isinstance(e.value, tt.TreetoolError) and isinstance(e.value, RuntimeError)
    for bad in (jax.random.key(0), np.array(["a", "b"]), "hello"):
        with pytest.raises(tt.StatsError) as e:
            tt.stats(bad)
        assert isinstance(e.value, TypeError)
    assert tt.stats(np.arange(4.0)).max == 3.0  # numbers are unchanged
    with pytest.raises(tt.StatsError, match=r"^\['g'\]: cannot read its values: RuntimeError"):
        tt.nonfinite({"g": gone, "ok": np.ones(2)})  # a flat answer: the path, not jax's error


def test_lookups_raise_path_errors_that_are_still_key_errors():
    t = {"a": {"w": np.ones(3)}, "b": [1, 2]}
    with pytest.raises(tt.PathError, match=r"^\['a'\] has no child 'zz'; it has \['w'\]$"):
        tt.view(t).child("a").child("zz")
    d = tt.diff(t, {"a": {"w": np.zeros(3)}, "b": [1, 2]})
    assert d["['a']['w']"].kind == "value"
    with pytest.raises(tt.PathError, match=r"\['b'\] did not change \(1 paths did\)"):
        d["['b']"]
    with pytest.raises(tt.PathError, match="no device 'gpu:7' in the placement"):
        tt.placement(t).on("gpu:7")
    with pytest.raises(tt.PathError) as e:  # equinox's message, a PathError (a KeyError)
        tt.tree_at(lambda x: x["zz"], t, 1)
    assert str(e.value) == "'zz'" and isinstance(e.value, KeyError)
    with pytest.raises(tt.PathError) as e:
        tt.tree_at(lambda x: x["b"][5], t, 1)
    assert isinstance(e.value, IndexError) and str(e.value) == "list index out of range"
    for err in (KeyError, tt.TreetoolError):  # `except KeyError` code keeps working
        with pytest.raises(err):
            tt.get(t, "['a']['zz']")
    assert t == {"a": {"w": t["a"]["w"]}, "b": [1, 2]}  # nothing was changed

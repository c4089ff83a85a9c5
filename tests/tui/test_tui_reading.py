"""The app reading its file itself (issue 19, item 11): open at once, the tree read so far,
keys that need the whole tree while reading, the swap to the whole tree, a failed read.

Every read here is the real pickle reader on a file written by `pickle`; the points where
the tests look are fixed with `threading.Event`s, not sleeps.
"""

from __future__ import annotations

import asyncio
import functools
import pickle
import re
import threading

import numpy as np
import pytest
from textual.widgets import TabbedContent
from treetool.tui import TreetoolApp
from treetool.tui.widgets import LeavesTable, PytreeTree, SearchBar, TotalsBar
from tui_helpers import no_delays, settle  # noqa: F401 (no_delays: a fixture, by name)

import treetool.io as io
from treetool._errors import LoadError
from treetool._reading._read import NotReadYet, Read, Reading
from treetool.io._partial import PartialWatch

pytestmark = pytest.mark.usefixtures("no_delays")

SIZE = (120, 40)


def _sync(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def _tree(n: int) -> dict:
    return {
        "params": {f"k{i}": np.full(2, i, np.float32) for i in range(n)},
        "step": np.int32(7),
    }


def _write(tmp_path, n: int = 300):
    path = tmp_path / "ckpt.pkl"
    tree = _tree(n)
    path.write_bytes(pickle.dumps(tree, protocol=4))
    return path, tree


async def _until(pilot, check, what: str, steps: int = 400) -> None:
    """Let the app run until `check()` holds (each step is one pass of its message loop)."""
    for _ in range(steps):
        if check():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"never happened: {what}")


def _row_keys(tree: PytreeTree) -> list[str]:
    return [
        str(tn.data.node.key) for tn in tree.root.children if tn.data and tn.data.kind == "node"
    ]


@_sync
async def test_keys_that_need_the_whole_tree_wait_while_reading_then_work(tmp_path):
    path, tree = _write(tmp_path)
    start = threading.Event()
    calls = []

    def read(watch):
        calls.append(watch)
        assert start.wait(30)
        loaded = io.read(str(path))
        return Read(loaded.tree, None, None)

    app = TreetoolApp(None, title="ckpt.pkl", reading=Reading(str(path), read))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: bool(calls), "the read started")
        assert isinstance(app.obj, NotReadYet) and app.index is None
        assert "reading ckpt.pkl" in str(app.query_one(TotalsBar).render())
        await pilot.press("slash")
        await pilot.press("L")
        await pilot.press("S")
        await pilot.pause()
        assert not app.query_one(SearchBar).has_class("-open")  # search waits
        assert app.query_one(TabbedContent).active == "tree"  # so do Leaves and sorting
        assert app.query_one(LeavesTable).index is None
        said = [n.message for n in app._notifications]
        assert said.count("still reading the file: search works once it is read") == 1
        assert "still reading the file: the Leaves tab opens once it is read" in said
        assert "still reading the file: stats are computed once it is read" in said
        start.set()
        await _until(pilot, lambda: app.index is not None, "the whole tree was indexed")
        await settle(pilot)
        assert calls == [None]  # no watch: the reader was asked for no snapshots
        assert app.obj is not tree and app.obj.keys() == tree.keys()
        assert len(app.index) == 301
        assert app.index.totals.params == 601
        assert str(app.query_one(TotalsBar).render()).startswith("301 leaves · 601 params")
        view = app.query_one(PytreeTree)
        assert _row_keys(view) == ["['params']", "['step']"]
        await pilot.press("slash")
        await pilot.press(*"k299")
        await pilot.press("enter")
        await _until(pilot, lambda: app.matches == ["['params']['k299']"], "the search")
        assert str(view.cursor_node.data.node.path) == "['params']['k299']"
        await pilot.press("L")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "leaves"


@_sync
async def test_a_failed_read_closes_the_app_and_keeps_the_error(tmp_path):
    path, _ = _write(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated: the reader raises LoadError

    def read(watch):
        return Read(io.read(str(path)).tree)

    reading = Reading(str(path), read)
    app = TreetoolApp(None, title="ckpt.pkl", reading=reading)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: reading.error is not None, "the read failed")
        await _until(pilot, lambda: not app.is_running, "the app closed")
    assert isinstance(reading.error, LoadError)
    assert str(reading.error).startswith(f"{path}: ")
    assert reading.result is None and app.crash is None


def test_progress_line_shows_the_file_name_without_control_characters():
    from treetool.tui.widgets.totals import progress_text

    from treetool._reading._progressive import Progress
    from treetool._reading._read import plain_name

    name = plain_name("/data/a\x1b]0;x\x07.pkl")
    assert name == "a\\x1b]0;x\\x07.pkl"  # escaped by the one sanitiser
    line = progress_text(Progress(name, 0.5, 10, True, 1.25)).plain
    assert (
        line
        == "reading a\\x1b]0;x\\x07.pkl ━━━━━━━━━━╺━━━━━━━━━ 50% · 10 of ~20 leaves so far · 1.2 s"
    )
    assert progress_text(Progress(name, 0.5, 10, False, 1.25)).plain.endswith(
        "over 10 leaves so far · 1.2 s"
    )


def _blocking_watch(offered: threading.Event, proceed: threading.Event):
    """The real PartialWatch, holding the reader at its first snapshot until `proceed`."""

    class Blocking(PartialWatch):
        __slots__ = ("held",)

        def __init__(self) -> None:
            super().__init__(share=1.0)
            self.held = False

        def _offer(self, tree, fraction):
            super()._offer(tree, fraction)
            if not self.held:  # the reader stops here, mid-file, once
                self.held = True
                offered.set()
                assert proceed.wait(30)

    return Blocking()


@_sync
async def test_the_tree_read_so_far_shows_before_the_read_ends_then_the_whole_keeps_rows(
    tmp_path,
):
    path, tree = _write(tmp_path, n=3000)  # several 64 KiB frames: the reader stops mid-file
    offered, proceed = threading.Event(), threading.Event()
    watch = _blocking_watch(offered, proceed)
    ended = []

    def read(w):
        assert w is watch
        w.request()  # the first safe point answers it (the app asks too, every 0.3 s)
        loaded = io.read(str(path), watch=w)
        ended.append(loaded)
        return Read(loaded.tree, None, None)

    app = TreetoolApp(None, title="ckpt.pkl", reading=Reading(str(path), read, watch))
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(PytreeTree)
        await _until(pilot, offered.is_set, "the reader offered a snapshot")
        await _until(pilot, lambda: _row_keys(view) == ["['params']"], "the snapshot's rows")
        assert not ended and app.index is None  # the read has not ended: this is a snapshot
        snap, fraction = watch.latest()
        assert app.obj is snap and 0.0 < fraction < 1.0
        so_far = len(snap["params"])
        assert 0 < so_far < 3000 and "step" not in snap
        assert list(snap["params"]) == [f"k{i}" for i in range(so_far)]  # in file order
        bar = str(app.query_one(TotalsBar).render())
        assert bar.startswith("reading ckpt.pkl ") and f"{so_far:,} of ~" in bar, bar
        await pilot.press("slash")
        assert not app.query_one(SearchBar).has_class("-open")
        # open ['params'] and put the cursor on its third child (jax's order: keys sorted),
        # both kept in the whole tree
        third = f"['params']['{sorted(snap['params'])[2]}']"
        await pilot.press("down", "right", "down", "down", "down")
        await pilot.pause()
        assert str(view.cursor_node.data.node.path) == third
        proceed.set()
        await _until(pilot, lambda: app.index is not None, "the whole tree was indexed")
        await settle(pilot)
        await pilot.pause()
        assert len(ended) == 1 and app.obj is ended[0].tree
        assert _row_keys(view) == ["['params']", "['step']"]
        params = view.root.children[0]
        assert params.is_expanded and str(params.data.node.path) == "['params']"
        assert str(view.cursor_node.data.node.path) == third
        assert len(app.index) == 3001 and app.index.totals.params == 6001
        assert tree["params"]["k2"].tolist() == [2.0, 2.0]  # what was written, unchanged


def _big_pickle(tmp_path, name: str = "big.pkl"):
    from treetool._cli._live import LIVE_BYTES

    path = tmp_path / name
    # the size decides (`LIVE_BYTES`), not the leaf count: 2,000 leaves of 1,100 floats
    tree = {"layers": [{"w": np.full(1100, i, np.float32)} for i in range(2_000)], "step": 3}
    path.write_bytes(pickle.dumps(tree, protocol=4))
    assert path.stat().st_size >= LIVE_BYTES
    return path


def test_cli_opens_the_app_before_reading_a_big_pickle_and_quits(tmp_path):
    from test_tui_terminal_hostile import _run_in_pty

    _big_pickle(tmp_path)
    rc, out, typed = _run_in_pty(["inspect", "big.pkl"], tmp_path, until=b"2,001 leaves", keys=b"q")
    assert typed, out[-3000:]
    assert rc == 0, out[-3000:]
    assert b"opening big.pkl" in out  # the line before the app: the app reads the file
    assert b"reading big.pkl" in out  # the app's progress line
    assert b"['layers']" in out and b"['step']" in out


def test_cli_a_bad_big_pickle_closes_the_app_with_one_line(tmp_path):
    from test_tui_terminal_hostile import _run_in_pty

    path = _big_pickle(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])  # truncated near its end
    rc, out, _ = _run_in_pty(["inspect", "big.pkl"], tmp_path, until=b"\x00never", keys=b"")
    assert rc == 2, out[-3000:]
    tail = out.rsplit(b"\x1b[?1049l", 1)[-1].decode(errors="replace")  # after the app's screen
    tail = re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[=>]", "", tail)  # its closing sequences
    lines = [ln for ln in tail.replace("\r", "").split("\n") if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("treetool: error: big.pkl: "), lines


class _Probe:
    """A leaf put in a snapshot's root only: alive exactly as long as that root is."""


@_sync
async def test_no_snapshot_outlives_the_swap_to_the_whole_tree(tmp_path):
    import gc
    import weakref

    path, _ = _write(tmp_path, n=3000)
    offered, proceed = threading.Event(), threading.Event()
    shown: list[weakref.ref] = []

    class Watch(PartialWatch):
        __slots__ = ("held",)

        def __init__(self) -> None:
            super().__init__(share=1.0)
            self.held = False

        def _wanted(self) -> bool:  # a snapshot at each safe point until one is held
            return not self.held

        def _offer(self, tree, fraction):
            root = dict(tree)  # the snapshot's root container: nothing but the snapshot has it
            root["~probe"] = probe = _Probe()
            shown.append(weakref.ref(probe))
            super()._offer(root, fraction)
            if not self.held and len(tree.get("params", ())) > 0:  # held mid-params
                self.held = True
                offered.set()
                assert proceed.wait(30)

    def read(w):
        w.request()
        return Read(io.read(str(path), watch=w).tree, None, None)

    watch = Watch()
    app = TreetoolApp(None, title="ckpt.pkl", reading=Reading(str(path), read, watch))
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(PytreeTree)
        await _until(pilot, offered.is_set, "the reader offered a snapshot")
        await _until(
            pilot, lambda: {"~probe", "params"} <= set(getattr(app.obj, "keys", list)()), "shown"
        )

        def at() -> str:  # "" until the cursor is on a row of the snapshot
            tn = view.cursor_node
            return "" if tn is None or tn.data is None else str(tn.data.node.path)

        # rows of the snapshot opened, the cursor and the details pane on one of its leaves
        for _ in range(100):  # the snapshot's rows put the cursor on the root after a refresh
            if at() == "['params']":
                break
            if at() == "":
                await pilot.press("down")
            await pilot.pause(0.01)
        assert at() == "['params']"
        await pilot.press("right")
        await _until(pilot, lambda: len(view.cursor_node.children) > 1, "['params'] open")
        await pilot.press("down")
        await _until(pilot, lambda: at().startswith("['params']['k"), "the cursor on a leaf")
        proceed.set()
        await _until(pilot, lambda: app.index is not None, "the whole tree was indexed")
        await settle(pilot)
        await pilot.pause()
        assert "~probe" not in app.obj and len(app.obj["params"]) == 3000
        assert watch.latest() is None  # released at the swap
        gc.collect()
        alive = [r for r in shown if r() is not None]
        assert shown and not alive, f"{len(alive)} of {len(shown)} snapshots still alive"


def _leaf_types(tree) -> dict[str, str]:
    from treetool._tree._model import view

    return {str(n.path): n.type_name for n in view(tree).walk() if n.is_leaf}


@_sync
async def test_a_snapshot_shows_functions_as_the_whole_tree_does_and_is_never_written_to(
    tmp_path,
):
    import cloudpickle
    import equinox as eqx
    import jax

    model = eqx.nn.Sequential(
        [
            eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0)),
            eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.Lambda(lambda x: x * 2),
        ]
    )
    tree = {"model": model, "act": lambda x: x + 1, "params": _tree(3000)["params"]}
    path = tmp_path / "fns.pkl"
    path.write_bytes(cloudpickle.dumps(tree))
    offered, proceed = threading.Event(), threading.Event()
    raw: list = []

    class Watch(PartialWatch):  # a snapshot at each safe point, held at the first mid-params
        __slots__ = ()

        def _wanted(self) -> bool:
            return not raw

        def _offer(self, tree, fraction):
            super()._offer(tree, fraction)
            if not raw and len(tree.get("params", ())) > 0:
                raw.append(tree)
                offered.set()
                assert proceed.wait(30)

    def read(w):
        return Read(io.read(str(path), watch=w).tree, None, None)

    watch = Watch(share=1.0, path=str(path))
    app = TreetoolApp(None, title="fns.pkl", reading=Reading(str(path), read, watch))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, offered.is_set, "the reader offered a snapshot")
        await _until(pilot, lambda: "params" in getattr(app.obj, "keys", list)(), "shown")
        shown = app.obj
        before = _leaf_types(shown)
        # the functions are one leaf each, as in the whole tree: not their bytecode, closures
        assert before["['act']"] == "OpaqueFunction"
        assert before["['model'].layers[1].fn"] == "OpaqueFunction"
        assert before["['model'].layers[2].fn"] == "OpaqueFunction"
        inside = ("['act'][", "['act'].", "['model'].layers[2].fn.", "['model'].layers[2].fn[")
        assert not [p for p in before if p.startswith(inside)]
        so_far = len(raw[0]["params"])
        assert 0 < so_far < 3000 and len(before) == so_far + 5
        bar = str(app.query_one(TotalsBar).render())
        assert f"{so_far + 5:,} of ~" in bar, bar  # the count is of what is shown
        # the reader's own snapshot shares its finished model with the tree being read; what
        # the app shows is a copy where the final pass will write (the functions' places)
        assert shown["model"] is not raw[0]["model"]
        proceed.set()
        await _until(pilot, lambda: app.index is not None, "the whole tree was indexed")
        await settle(pilot)
        whole = _leaf_types(app.obj)
        assert len(whole) == 3005 and whole["['model'].layers[2].fn"] == "OpaqueFunction"
        assert {p: whole[p] for p in before} == before  # the snapshot showed the same leaves
        assert _leaf_types(shown) == before  # and nothing it showed was written to


def test_snapshots_of_a_file_without_functions_are_shown_as_they_are(tmp_path):
    import cloudpickle

    from treetool.io._partial import PartialWatch, may_make_functions

    class Every(PartialWatch):  # a snapshot at each safe point: the last one is kept
        __slots__ = ()

        def _wanted(self) -> bool:
            return True

    plain, _ = _write(tmp_path, n=50)
    fns = tmp_path / "fns.pkl"
    tree = {"act": lambda x: x + 1, **{f"k{i}": np.ones(1) for i in range(5000)}}
    fns.write_bytes(cloudpickle.dumps(tree))
    assert not may_make_functions(str(plain)) and may_make_functions(str(fns))
    assert may_make_functions(str(tmp_path / "gone.pkl"))  # unsure: the snapshots are walked
    watch = Every(share=1.0)
    assert type(io.read(str(fns), watch=watch).tree["act"]).__name__ == "OpaqueFunction"
    raw, _ = watch.latest()
    assert type(raw["act"]).__name__ == "Opaque"  # read, not collapsed yet
    shown = PartialWatch(path=str(fns)).as_finished(raw)
    assert type(shown["act"]).__name__ == "OpaqueFunction" and shown["k0"] is raw["k0"]
    assert type(raw["act"]).__name__ == "Opaque"  # the snapshot itself is not changed
    # a watch on a file that names no function maker does not walk its snapshots at all
    assert PartialWatch(path=str(plain)).as_finished(raw) is raw
    # nor on a file whose bytes read so far name none (a snapshot is made of those only)
    late = tmp_path / "late.pkl"
    late.write_bytes(
        cloudpickle.dumps({**{f"k{i}": np.ones(1) for i in range(5000)}, "f": lambda: 0})
    )
    on_late = PartialWatch(path=str(late))
    assert on_late.as_finished(raw, 0.5) is raw and on_late.as_finished(raw, 1.0) is not raw
    # the names looked for are those of every function maker the reader knows
    from treetool.io import _partial
    from treetool.io._pickle import _functions as _functions

    names = {cp.rsplit(".", 1)[-1] for cp in _functions._MAKERS}
    assert {n.encode() for n in names} <= set(_partial._MAKER_NAMES)

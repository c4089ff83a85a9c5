"""Reading a file progressively (`treetool._reading`), without a front end: the real pickle
reader in its thread, the real `PartialWatch`, the snapshots made ready and counted.

The points where a test looks are fixed with `threading.Event`s, not sleeps.
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

import treetool.io as io
from treetool._errors import LoadError
from treetool._reading._progressive import Progress, ProgressiveRead
from treetool._reading._read import Read, Reading
from treetool._reading._snapshots import LeafCounter
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._model import Node
from treetool.io._partial import PartialWatch


def _write(tmp_path, n: int):
    path = tmp_path / "ckpt.pkl"
    tree = {"params": {f"k{i}": np.full(2, i, np.float32) for i in range(n)}, "step": 7}
    path.write_bytes(pickle.dumps(tree, protocol=4))
    return path, tree


def _read_file(path):
    return lambda watch: Read(io.read(str(path), watch=watch).tree)


class _Held(PartialWatch):
    """The real PartialWatch, holding the reader at its first snapshot until `proceed`."""

    __slots__ = ("held", "offered", "proceed")

    def __init__(self) -> None:
        super().__init__(share=1.0)
        self.held = False
        self.offered, self.proceed = threading.Event(), threading.Event()

    def _offer(self, tree, fraction):
        super()._offer(tree, fraction)
        if not self.held:  # the reader stops here, mid-file, once
            self.held = True
            self.offered.set()
            assert self.proceed.wait(30)


def _ends(read: ProgressiveRead):
    done: list = []
    ended = threading.Event()

    def on_done(r, model):
        done.append((r, model))
        ended.set()

    def on_failed(e):
        done.append(e)
        ended.set()

    thread = read.start(on_done, on_failed)
    return thread, done, ended


def test_a_snapshot_mid_read_is_counted_then_the_whole_tree_replaces_it(tmp_path):
    path, tree = _write(tmp_path, 3000)  # several 64 KiB frames: the reader stops mid-file
    watch = _Held()
    read = ProgressiveRead(Reading(str(path), _read_file(path), watch))
    assert read.progress().leaves is None and read.progress().name == "ckpt.pkl"
    assert read.poll() is False  # nothing yet: a snapshot is asked for at once
    thread, done, ended = _ends(read)
    assert watch.offered.wait(30)
    assert read.poll() is True  # the snapshot came: to be made ready
    snap = read.prepare((["['params']", "['nowhere']"], "['params']['k0']"))
    assert snap is not None and read.took(snap)
    so_far = snap.tree["params"]
    assert 0 < len(so_far) < 3000 and list(so_far) == [f"k{i}" for i in range(len(so_far))]
    assert (
        snap.leaves
        == LeafIndex.build(snap.tree).totals.leaves
        == len(so_far) + ("step" in snap.tree)
    )
    assert list(snap.opened) == ["['params']"]  # the open row is found again, `nowhere` not
    assert [str(n.path) for n, _ in snap.cursor] == ["['params']", "['params']['k0']"]
    progress = read.progress()
    assert (progress.leaves, progress.complete) == (snap.leaves, True)
    assert 0.0 < progress.fraction < 1.0
    assert read.poll() is False  # the same snapshot is not made ready twice
    watch.proceed.set()
    assert ended.wait(30)
    thread.join(30)
    [(whole, model)] = done
    assert isinstance(model, Node) and model.obj is whole.tree is read.reading.result.tree
    assert sorted(whole.tree["params"]) == sorted(tree["params"]) and whole.tree["step"] == 7
    read.stop()
    assert read.done and watch.latest() is None  # no snapshot kept once the read ended
    assert read.poll() is False and read.took(snap) is False


def test_a_failed_read_is_one_error_naming_the_file(tmp_path):
    path, _ = _write(tmp_path, 300)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated: the reader raises LoadError
    read = ProgressiveRead(Reading(str(path), _read_file(path), PartialWatch(path=str(path))))
    thread, done, ended = _ends(read)
    assert ended.wait(30)
    thread.join(30)
    [error] = done
    assert isinstance(error, LoadError) and str(error).startswith(f"{path}: ")
    assert read.reading.error is error and read.reading.result is None


def test_follow_drives_the_read_to_its_end_with_growing_counts(tmp_path):
    path, _ = _write(tmp_path, 3000)
    watch = _Held()
    read = ProgressiveRead(Reading(str(path), _read_file(path), watch))
    # a snapshot is asked for before the read starts, so the reader offers one at its first
    # frame and is held there; asked for only by `follow`'s first poll, a loaded machine may
    # run that poll after the reader has read the whole file (no snapshot, nothing counted)
    assert read.poll() is False
    thread, done, ended = _ends(read)
    seen: list[Progress] = []
    for progress in read.follow(every=0.01):
        seen.append(progress)
        if progress.leaves is not None:
            watch.proceed.set()  # the held snapshot was counted: let the read go on
        elif watch.offered.is_set() and len(seen) > 3000:
            watch.proceed.set()  # never counted: let the test end (and fail below)
    assert ended.wait(30) and not thread.is_alive()  # `follow` ends with the read thread
    counts = [p.leaves for p in seen if p.leaves is not None]
    assert counts and counts == sorted(counts) and counts[-1] < 3001
    assert all(p.name == "ckpt.pkl" for p in seen)
    assert read.done and watch.latest() is None
    [(whole, _)] = done
    assert len(whole.tree["params"]) == 3000


def test_without_a_watch_the_progress_is_the_share_of_bytes_taken_in(tmp_path):
    path, _ = _write(tmp_path, 50)
    calls = []

    def read_it(watch):
        calls.append(watch)
        return Read(io.read(str(path)).tree)

    read = ProgressiveRead(Reading(str(path), read_it))
    _, done, ended = _ends(read)
    for progress in read.follow(every=0.01):
        assert progress.leaves is None  # no snapshots: no leaf count
        assert progress.fraction is None or 0.0 <= progress.fraction <= 0.99
    assert ended.wait(30) and calls == [None]
    [(whole, _)] = done
    assert whole is read.reading.result and len(whole.tree["params"]) == 50


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (Progress("f", 0.25, 100, True, 0.0), "100 of ~400 leaves so far"),
        (Progress("f", 0.005, 100, True, 0.0), "100 leaves so far"),
        (Progress("f", None, 100, True, 0.0), "100 leaves so far"),
        (Progress("f", 0.5, 5_000_001, False, 0.0), "over 5,000,001 leaves so far"),
        (Progress("f", 0.5, None, True, 0.0), ""),
    ],
)
def test_leaves_text(progress, text):
    assert progress.leaves_text() == text


def test_snapshot_leaf_count_agrees_with_the_leaf_index_and_reuses_shared_subtrees():
    import collections

    import equinox as eqx
    import jax

    pair = collections.namedtuple("pair", "a b")
    lin = eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0))
    done = {"w": [np.zeros(3), None, (1, 2)], "s": "text"}
    trees = [
        {"a": [1, None, (2, 3)], "b": None},
        {"m": lin, "p": pair(1, [2, 3]), "done": done},
        [np.zeros(3), {"x": "str", "y": b"b"}, {}],
        (),
    ]
    counter = LeafCounter()
    for tree in trees:
        assert counter.count(tree) == (LeafIndex.build(tree).totals.leaves, True)
    first = {"done": done, "more": [1.0]}
    assert counter.count(first) == (5, True)
    done["w"].append(9.0)  # a shared subtree is complete: a changed one is not re-walked
    assert counter.count({"done": done, "more": [1.0, 2.0]}) == (6, True)
    assert LeafCounter().count({"done": done, "more": [1.0, 2.0]}) == (7, True)
    assert LeafCounter().count({"k": list(range(100))}, limit=10) == (100, False)

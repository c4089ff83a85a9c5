"""`PartialWatch`: snapshots of a pickle's tree while the reader builds it.

The watches here ask at every safe point (`_wanted` always true, `share=1.0`: no time limit),
so the snapshots taken do not depend on the machine's speed.
"""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treetool.io as tio
from treetool._errors import LoadError
from treetool._leaves._arrays import LazyArray
from treetool.io._partial import PartialWatch


class _Every(PartialWatch):
    """Asks at every safe point; keeps each snapshot with its sizes at the time it came."""

    __slots__ = ("asked", "every", "got")

    def __init__(self, every: int = 1) -> None:
        super().__init__(share=1.0)
        self.got: list[tuple[Any, float, int]] = []
        self.every = every  # answer every n-th safe point (each snapshot copies the root)
        self.asked = 0

    def _wanted(self) -> bool:
        self.asked += 1
        return self.asked % self.every == 0

    def _offer(self, tree: Any, fraction: float) -> None:
        super()._offer(tree, fraction)
        self.got.append((tree, fraction, len(tree)))


def _dump(path: Path, obj: Any) -> Path:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=4)
    return path


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # bench_tui_terminal's file, 1e5 arrays of one float32 each
    tree = {f"k{i}": np.full(1, i, np.float32) for i in range(100_000)}
    return _dump(tmp_path_factory.mktemp("flat") / "flat.pkl", tree)


def test_snapshots_of_a_flat_dict_grow_and_hold_complete_leaves(flat: Path) -> None:
    watch = _Every()
    final = tio.read(flat, watch=watch).tree
    assert len(watch.got) >= 20
    counts = [n for _, _, n in watch.got]
    fractions = [f for _, f, _ in watch.got]
    assert counts == sorted(counts) and counts[-1] <= 100_000 and counts[0] < counts[-1]
    assert fractions == sorted(fractions) and fractions[0] > 0 and fractions[-1] <= 1
    for tree, _, n in watch.got:
        assert len(tree) == n  # the reader went on; the snapshot it handed out did not change
        assert tree is not final
        assert list(tree) == [f"k{i}" for i in range(n)]  # the keys read so far, in order
        for k in (f"k{n - 1}", f"k{n // 2}", "k0"):
            leaf = tree[k]
            assert type(leaf) is np.ndarray and leaf.shape == (1,) and leaf.dtype == np.float32
            assert leaf[0] == int(k[1:])
    assert type(final) is dict and len(final) == 100_000


def test_a_watch_leaves_the_final_tree_as_read_without_one(flat: Path) -> None:
    plain = tio.read(flat).tree
    watched = tio.read(flat, watch=_Every()).tree
    assert list(watched) == list(plain)
    got = np.concatenate(list(watched.values()))
    assert got.dtype == np.float32 and got.tolist() == list(range(100_000))


def test_snapshot_leaves_are_lazy_arrays_with_their_shapes(tmp_path: Path) -> None:
    tree = {f"w{i}": np.full((4, 256), i, np.float32) for i in range(300)}  # 4 KiB each: lazy
    f = _dump(tmp_path / "lazy.pkl", tree)
    watch = _Every()
    tio.read(f, watch=watch)
    assert len(watch.got) >= 3
    for snap, _, n in watch.got:
        assert list(snap) == [f"w{i}" for i in range(n)]
        for leaf in snap.values():
            assert type(leaf) is LazyArray and leaf.shape == (4, 256)
            assert leaf.dtype == np.float32
        last = snap[f"w{n - 1}"]
        assert np.asarray(last)[3, 255] == n - 1  # complete: its data is where it says


def test_nested_snapshots_have_prefixes_of_the_final_keys(tmp_path: Path) -> None:
    tree = {f"g{j}": {f"k{i}": np.full(2, i, np.int32) for i in range(1500)} for j in range(12)}
    f = _dump(tmp_path / "nested.pkl", tree)
    watch = _Every()
    final = tio.read(f, watch=watch).tree
    outer_keys = list(final)
    inner_keys = list(final["g0"])
    assert len(watch.got) >= 12
    seen_partial_group = False
    for snap, _, n in watch.got:
        assert list(snap) == outer_keys[:n]
        for j, (g, sub) in enumerate(snap.items()):
            assert list(sub) == inner_keys[: len(sub)]  # a group read so far: a prefix
            if j < n - 1:
                assert len(sub) == 1500  # groups before the last one are complete
            if j < n - 2:
                assert sub is final[g]  # ... and shared (the last items of a level are copied)
            elif len(sub) < 1500:
                seen_partial_group = True
                assert sub is not final[g]  # the group still being read is a copy
    assert seen_partial_group
    assert [len(final[g]) for g in outer_keys] == [1500] * 12


def test_lists_are_snapshotted_too(tmp_path: Path) -> None:
    f = _dump(tmp_path / "list.pkl", [[i, float(i), f"s{i}"] for i in range(5000)])
    watch = _Every(every=200)  # a safe point after each inner list
    final = tio.read(f, watch=watch).tree
    assert len(watch.got) >= 5
    for snap, _, n in watch.got:
        assert type(snap) is list and snap[: n - 1] == final[: n - 1]
        last = snap[n - 1]  # the list being read: its items so far
        assert last == final[n - 1][: len(last)] and last is not final[n - 1]


def test_a_watch_from_another_thread_gets_a_snapshot(flat: Path) -> None:
    watch = PartialWatch()
    assert watch.latest() is None
    watch.request()  # answered at the first safe point where something is complete
    out: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: out.update(tree=tio.read(flat, watch=watch).tree))
    worker.start()
    worker.join()
    got = watch.latest()
    assert got is not None
    snap, fraction = got
    assert 0 < len(snap) < 100_000 and 0 < fraction < 1
    assert list(snap) == list(out["tree"])[: len(snap)]


def test_truncated_file_with_a_watch_fails_with_the_same_line(flat: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(flat.read_bytes()[: flat.stat().st_size // 2])
    with pytest.raises(LoadError) as plain:
        tio.read(cut)
    watch = _Every()
    with pytest.raises(LoadError) as watched:
        tio.read(cut, watch=watch)
    assert str(watched.value) == str(plain.value)
    assert "truncated pickle" in str(plain.value) and "\n" not in str(plain.value)
    assert watch.got  # it got what was there before the end


def test_shared_reference_bomb_with_a_watch_fails_the_same_and_offers_no_bomb(
    tmp_path: Path,
) -> None:
    # 1000 zeros memoised, referenced 2000 times by the outer list, 20 per APPENDS batch:
    # 2e6 leaves for every view, past the budget of a 6 KB file
    inner = b"](" + b"K\x00" * 1000 + b"e\x94"
    data = b"\x80\x04" + inner + b"0]" + (b"(" + b"h\x00" * 20 + b"e") * 100 + b"."
    f = tmp_path / "bomb.pkl"
    f.write_bytes(data)
    with pytest.raises(LoadError) as plain:
        tio.read(f)
    watch = _Every()
    with pytest.raises(LoadError) as watched:
        tio.read(f, watch=watch)
    assert str(watched.value) == str(plain.value)
    assert "through shared references" in str(plain.value)
    limit = 100_000 + 8 * len(data)
    (first, _, _), *rest = watch.got
    assert first == [0] * 1000  # the inner list, the whole tree then
    assert len(rest) >= 3  # the first batches of the outer list fit
    for snap, _, n in rest:  # what was offered passed the check: within the budget
        assert 1001 * n <= limit and n % 20 == 0 and snap == [[0] * 1000] * n


def test_other_formats_ignore_the_watch(tmp_path: Path) -> None:
    p = tmp_path / "w.npz"
    np.savez(p, w=np.ones((2, 3), np.float32))
    watch = _Every()
    assert tio.read(p, watch=watch).tree["w"].shape == (2, 3)
    assert watch.got == [] and watch.latest() is None

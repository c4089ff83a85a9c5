"""Properties of tt.diff on random trees (hypothesis): identity, symmetry, exact edits."""

from __future__ import annotations

import copy
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
from treetool._diff._align import align, lcs

VALUES = [0.0, 1.0, -2.5, float("nan")]
MIRROR = {"added": "removed", "removed": "added"}

leaves = st.tuples(
    st.lists(st.sampled_from(VALUES), max_size=3),
    st.sampled_from([np.float32, np.float64]),
).map(lambda v: np.array(v[0], dtype=v[1]))

trees = st.recursive(
    leaves | st.none(),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(st.sampled_from("abcde"), kids, max_size=4)
    ),
    max_leaves=12,
)


def _kind_counts(d: tt.TreeDiff, mirror: bool = False) -> Counter:
    return Counter(MIRROR.get(c.kind, c.kind) if mirror else c.kind for c in d.changes)


@given(trees)
def test_a_tree_and_its_deep_copy_have_no_differences(t):
    assert not tt.diff(t, t)
    assert tt.diff(t, copy.deepcopy(t)).changes == []


@given(trees, trees)
def test_swapping_the_sides_mirrors_the_changes(a, b):
    ab, ba = tt.diff(a, b), tt.diff(b, a)
    assert ab.counts["added"] == ba.counts["removed"]
    assert ab.counts["removed"] == ba.counts["added"]
    assert _kind_counts(ab) == _kind_counts(ba, mirror=True)
    assert bool(ab) == bool(ba)


def _edit(x: np.ndarray, how: str) -> tuple[np.ndarray, str]:
    if how == "value" and x.size:
        y = x.copy()
        y.flat[x.size - 1] = 123.5
        return y, "value"
    if how == "dtype":
        return x.astype(np.float64 if x.dtype == np.float32 else np.float32), "dtype"
    return np.concatenate([x, np.zeros(1, x.dtype)]), "shape"


@settings(max_examples=40)
@given(trees, st.data())
def test_editing_leaves_with_tree_at_names_exactly_the_edited_paths(t, data):
    pairs = tt.leaves_with_path(t)
    if not pairs:
        return
    chosen = data.draw(st.sets(st.integers(0, len(pairs) - 1), min_size=1), label="leaves")
    hows = [data.draw(st.sampled_from(["value", "dtype", "shape"])) for _ in chosen]
    where, new, expected = [], [], []
    for i, how in zip(sorted(chosen), hows):
        path, leaf = pairs[i]
        y, kind = _edit(leaf, how)
        where.append(str(path))
        new.append(y)
        expected.append((str(path), kind))
    edited = tt.tree_at(where, t, replace=new)
    d = tt.diff(t, edited)
    assert [(c.path, c.kind) for c in d.changes] == expected
    assert [(c.path, c.kind) for c in tt.diff(edited, t).changes] == expected


@given(st.lists(st.integers(0, 4), max_size=8), st.lists(st.integers(0, 4), max_size=8))
def test_lcs_is_a_common_subsequence_of_maximal_length_and_symmetric(xs, ys):
    pairs = lcs(xs, ys)
    assert all(xs[i] == ys[j] for i, j in pairs)
    assert [i for i, _ in pairs] == sorted({i for i, _ in pairs})
    assert [j for _, j in pairs] == sorted({j for _, j in pairs})
    assert len(pairs) == _lcs_length(xs, ys)
    assert lcs(ys, xs) == [(j, i) for i, j in pairs]


def _lcs_length(xs: list, ys: list) -> int:
    prev = [0] * (len(ys) + 1)
    for x in xs:
        cur = [0]
        for j, y in enumerate(ys):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


@given(st.lists(st.integers(0, 3), max_size=6), st.lists(st.integers(0, 3), max_size=6))
def test_align_covers_every_element_once_in_order(xs, ys):
    pairs = align([float(x) for x in xs], [float(y) for y in ys])
    assert [i for i, _ in pairs if i is not None] == list(range(len(xs)))
    assert [j for _, j in pairs if j is not None] == list(range(len(ys)))
    mirrored = align([float(y) for y in ys], [float(x) for x in xs])
    assert mirrored == [(j, i) for i, j in pairs]

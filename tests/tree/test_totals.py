"""The one totals pass (`treetool._tree._totals`) and the five consumers that take their counts from it:
`Node.aggregates`, `tt.summary`, `ls/inspect --json`, the HTML header and the TUI's leaf index.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from collections import Counter

import jax.numpy as jnp
import numpy as np
import pytest
from error_targets import tree as broken_tree

import treetool as tt
from treetool._cli._json import _json_listing
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._totals import Tally, totals


def _mixed() -> dict:
    """A tied f32[4,4] at two paths, an f16[4], a numpy int32 scalar, a float and a string."""
    w = np.ones((4, 4), np.float32)
    return {
        "enc": {"w": w, "b": np.zeros(4, np.float16)},
        "dec": {"w": w, "n": np.int32(7)},
        "lr": 0.1,
        "act": "relu",
    }


def test_counts_leaves_params_bytes_dtypes_and_ties_once():
    t = _mixed()
    agg = totals(t)
    assert (agg.leaves, agg.arrays, agg.tied, agg.errors) == (6, 3, 1, 0)
    assert (agg.params, agg.nbytes) == (16 + 4 + 1, 64 + 8 + 4)
    assert agg.dtypes == Counter({"float32": 1, "float16": 1, "int32": 1})
    assert agg.dtype_bytes == Counter({"float32": 64, "float16": 8, "int32": 4})
    assert agg.device_bytes == {"host": 76}
    assert agg.complete and agg.error_entries == []
    assert t["enc"]["w"] is t["dec"]["w"]  # the input is not touched


def test_every_consumer_gives_the_same_totals():
    t = _mixed()
    node = tt.view(t).aggregates
    s = tt.summary(t).total
    js = _json_listing(t, "python", None)["totals"]
    index = LeafIndex.build(t).totals
    for agg in (node, index):
        assert (agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied) == (6, 3, 21, 76, 1)
        assert agg.dtypes == Counter({"float32": 1, "float16": 1, "int32": 1})
    assert (s.leaves, s.params, s.nbytes, dict(s.dtypes)) == (6, 21, 76, dict(node.dtypes))
    assert js == {"leaves": 6, "params": 21, "bytes": 76}
    assert tt.summary(t).tied == [(["['dec']['w']", "['enc']['w']"], 16)]
    html = tt.view(t)._repr_html_()
    assert "6 leaves (3 arrays)" in html and ">21 params<" in html and ">76 B<" in html


def test_every_consumer_counts_a_broken_node_as_an_error_entry():
    t = broken_tree()
    msg = "RuntimeError: flatten exploded"
    node = tt.view(t).aggregates  # no longer raises
    assert (node.leaves, node.params, node.nbytes, node.errors) == (3, 3, 24, 2)
    assert node.error_entries == [("['bad']", msg), ("['deep']['x'][1]", msg)]
    index = LeafIndex.build(t).totals
    assert (index.leaves, index.params, index.nbytes, index.errors) == (3, 3, 24, 2)
    s = tt.summary(t)
    assert (s.total.leaves, s.total.params, s.total.errors) == (3, 3, 2)
    assert _json_listing(t, "python", None)["totals"] == {
        "leaves": 3,
        "params": 3,
        "bytes": 24,
        "errors": 2,
    }
    # a subtree's entries are relative to it; a limit still applies
    deep = tt.view(t).child("deep")
    assert deep.aggregates.error_entries == [("['x'][1]", msg)]
    assert deep.aggregates_within(10).leaves == 1
    assert tt.view(t).aggregates_within(1) is None


def test_file_leaves_count_as_file_bytes_without_reading(tmp_path):
    path = tmp_path / "w.pkl"
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MB in the file
    with open(path, "wb") as f:
        pickle.dump({"a": big, "b": big, "c": np.zeros(3, np.int8)}, f)
    tree = tt.load(str(path))
    assert type(tree["a"]).__name__ == "LazyArray"
    os.unlink(path)  # any read of array data now fails: the counts must not need one
    agg = totals(tree)
    assert (agg.leaves, agg.arrays, agg.tied) == (3, 2, 1)
    assert agg.device_bytes == {"file": 1 << 22, "host": 3}  # small arrays are read at load
    assert agg.dtype_bytes == Counter({"float32": 1 << 22, "int8": 3})


def test_jax_arrays_count_their_bytes_on_their_device():
    x = jnp.ones((8, 4), jnp.float32)
    gone = jnp.ones(5, jnp.float32)
    gone.delete()
    agg = totals({"x": x, "y": x, "gone": gone, "h": np.ones(2, np.float64)})
    (device,) = x.devices()
    assert agg.device_bytes == {f"{device.platform}:{device.id}": 128, "host": 16}
    # a deleted array keeps its facts (5 params, 20 B) but no device holds it
    assert (agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied) == (4, 3, 39, 164, 1)


def test_a_cycle_is_one_leaf_and_the_html_header_of_a_cyclic_tree_returns():
    a: list = [np.ones(2)]
    a.append(a)
    agg = totals({"a": a, "w": np.ones(3)})
    assert (agg.leaves, agg.arrays, agg.params) == (3, 2, 5)
    # the HTML header used its own walk, which looped forever on a cycle
    html = tt.view({"a": a, "w": np.ones(3)})._repr_html_()
    assert "3 leaves (2 arrays)" in html and ">5 params<" in html


def test_a_limit_stops_the_walk_and_says_so():
    t = {"xs": [np.float32(i) for i in range(50)], "y": np.ones(2)}
    assert totals(t, limit=10).complete is False
    full = totals(t, limit=51)
    assert full.complete and full.leaves == 51
    html = tt.view({"xs": list(range(100_001))})._repr_html_()
    assert "more than 100,000 leaves: not counted here" in html


def test_tally_keeps_the_paths_of_tied_arrays_in_order_of_first_appearance():
    from treetool._leaves._arrays import leaf_info

    u, v = np.ones(2), np.zeros(3)
    tally = Tally(paths=True)
    for path, x in [("p", u), ("q", v), ("r", v), ("s", u), ("t", 1)]:
        tally.add(x, leaf_info(x), path)
    agg = tally.finish()
    assert (agg.leaves, agg.arrays, agg.tied, agg.params) == (5, 2, 2, 5)
    assert tally.tied_paths() == [(["p", "s"], 2), (["q", "r"], 3)]


def test_aggregates_to_dict_is_unchanged_for_an_unbroken_tree():
    d = tt.view(_mixed()).aggregates.to_dict()
    assert d == {
        "leaves": 6,
        "arrays": 3,
        "params": 21,
        "bytes": 76,
        "dtypes": {"float32": 1, "float16": 1, "int32": 1},
        "tied": 1,
    }
    assert json.loads(json.dumps(d)) == d


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_summary_totals_do_not_depend_on_depth(depth):
    total = tt.summary(_mixed(), depth=depth).total
    assert (total.leaves, total.params, total.nbytes) == (6, 21, 76)
    assert re.fullmatch(r"total", total.path)


def test_a_broken_node_10000_levels_down_in_a_tree_with_a_cycle_is_one_error_entry():
    # the careful walk (taken once a node fails) keeps one set of open containers, so a deep
    # chain costs one pass, and a list holding itself is still one leaf there
    broken = broken_tree()["bad"]
    deep = inner = {}
    for _ in range(10_000):
        inner["c"] = {}
        inner = inner["c"]
    inner["bad"] = broken
    inner["w"] = np.ones(3, np.float32)
    loop: list = [np.ones(2, np.float32)]
    loop.append(loop)
    agg = totals({"deep": deep, "loop": loop})
    path = "['deep']" + "['c']" * 10_000 + "['bad']"
    assert [p for p, _ in agg.error_entries] == [path]
    assert (agg.leaves, agg.arrays, agg.params, agg.errors) == (3, 2, 5, 1)  # w, loop[0], the cycle

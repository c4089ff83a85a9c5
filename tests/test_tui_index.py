"""The TUI's leaf index, path lookup and registry, without Textual's event loop."""

from __future__ import annotations

import doctest
import importlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from treetool.tui.leaf_index import LeafIndex, expression, match_paths, node_chain
from treetool.tui.tabs import TabSpec

import treetool as tt
from treetool._model import view

_leaf = st.one_of(
    st.integers(-5, 5),
    st.builds(lambda n: np.zeros(n, np.float32), st.integers(0, 3)),
    st.none(),
)
_key = st.text("abw_.[]' 0", min_size=1, max_size=4)
_trees = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(_key, kids, max_size=4),
        st.tuples(kids, kids),
    ),
    max_leaves=25,
)


@settings(max_examples=40)
@given(_trees)
def test_index_matches_leaves_with_paths_and_node_chain_finds_every_leaf(tree):
    expected = tt.leaves_with_paths(tree)
    idx = LeafIndex.build(tree)
    assert idx.paths == [str(p) for p, _ in expected]
    assert all(a is b for a, b in zip(idx.leaves, [x for _, x in expected]))
    root = view(tree)
    for path, leaf in expected:
        chain = node_chain(root, str(path))
        node = chain[-1][0] if chain else root  # a leaf at the root has the empty path
        assert node.obj is leaf
        assert str(node.path) == str(path)
        assert len(chain) == len(path)


@settings(max_examples=40)
@given(
    _trees, st.sampled_from(["path", "type", "dtype", "params", "nbytes", "device"]), st.booleans()
)
def test_order_is_a_stable_sort_of_the_column(tree, column, reverse):
    idx = LeafIndex.build(tree)
    col = idx.column(column)
    order = idx.order(column, reverse).tolist()
    assert sorted(order) == list(range(len(idx)))
    values = [col[i] for i in order]
    assert values == sorted(values, reverse=reverse)
    for a, b in itertools.pairwise(order):  # ties keep leaf order
        if col[a] == col[b]:
            assert a < b


def test_match_paths_glob_and_substring():
    tree = {"enc": {"Weight": 1.0, "bias": 2.0}, "dec": [{"weight": 3.0}]}
    idx = LeafIndex.build(tree)
    assert match_paths("**.bias", idx, tree) == ["['enc']['bias']"]
    assert match_paths("dec[*]", idx, tree) == ["['dec'][0]"]
    assert match_paths("weight", idx, tree) == ["['dec'][0]['weight']", "['enc']['Weight']"]
    assert match_paths("Weight", idx, tree) == ["['enc']['Weight']"]  # smart case
    assert match_paths("   ", idx, tree) == []


def test_node_chain_names_the_missing_step():
    with pytest.raises(KeyError) as info:
        node_chain(view({"a": {"b": 1}}), "['a']['c']")
    assert info.value.args[0] == (
        "no node at \"['a']['c']\": nothing matches \"['c']\" under \"['a']\""
    )


def test_expression_uses_tree_for_non_identifiers():
    assert expression("model", ".layers[0].weight") == "model.layers[0].weight"
    assert expression("my ckpt.npz", "['w']") == "tree['w']"


def test_tab_spec_rejects_bad_and_reserved_ids():
    with pytest.raises(ValueError, match="not a valid Textual id"):
        TabSpec("2 words", "x", bool, bool)
    with pytest.raises(ValueError, match="reserved for a built-in tab"):
        TabSpec("leaves", "x", bool, bool)


@pytest.mark.parametrize(
    "module",
    [
        "treetool.tui",
        "treetool.tui.app",
        "treetool.tui.tabs",
        "treetool.tui.leaf_index",
        "treetool.tui.widgets.histogram",
        "treetool.tui.widgets.details",
        "treetool.tui.widgets.totals",
        "treetool.tui.screens.help",
    ],
)
def test_docstring_examples(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0

"""The leaf index, search and path lookup (`treetool._tree`): what the TUI's Leaves tab, its `/`
search and `treetool ls --search` stand on."""

from __future__ import annotations

import gc
import itertools
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
from treetool._tree._chain import expression, node_chain
from treetool._tree._leaf_index import Cancelled, LeafIndex
from treetool._tree._model import view
from treetool._tree._search import match_paths, search

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
    expected = tt.leaves_with_path(tree)
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


def _reference_rows(query: str, paths: list[str]) -> list[int]:
    """The text search as the per-path loop it replaced: smart case, dotted form."""
    dotted = not any(c in query for c in "[]'\"")
    table = str.maketrans({"[": ".", "]": None, "'": None, '"': None})
    fold = query == query.lower()
    q = query.lower() if fold else query
    out = []
    for i, p in enumerate(paths):
        text = p.translate(table) if dotted else p
        if q in (text.lower() if fold else text):
            out.append(i)
    return out


_SEARCH_KEYS = ["Émile", "ÉMILE", "a\x00b", "x\ny", "k10", "k1", "K1", "ß", "日本", "a'b", 'q"r']


@pytest.mark.parametrize(
    "query",
    [
        "k1",
        "K1",
        "émile",
        "Émile",
        "ÉMILE",
        "['k1",
        "0]",
        ".0",
        "x\ny",
        "日本",
        "ß",
        "a'b",
        "ab",
        "b",
        "[1]",
        "zzz",
        "['a",
        "\x00",
    ],
)
def test_text_search_finds_exactly_the_rows_the_per_path_loop_finds(query):
    # unicode (multi-byte in the byte haystack), case, brackets, quotes, the separator itself
    tree = {k: [np.zeros(1, np.float32), {"in": 1.0}] for k in _SEARCH_KEYS}
    idx = LeafIndex.build(tree)
    found, rows = search(query, idx, tree)
    want = _reference_rows(query, idx.paths)
    assert rows.tolist() == want
    assert found == [idx.paths[i] for i in want]


def test_text_search_at_scale_is_exact_and_reuses_one_haystack():
    n = 200_000  # more than one 65,536-row chunk of the haystack
    tree = {f"k{i}": i for i in range(n)}
    idx = LeafIndex.build(tree)
    found, rows = search("k19999", idx, tree)
    assert found == [
        "['k19999']",
        "['k199990']",
        "['k199991']",
        "['k199992']",
        "['k199993']",
        "['k199994']",
        "['k199995']",
        "['k199996']",
        "['k199997']",
        "['k199998']",
        "['k199999']",
    ]
    assert rows.tolist() == [idx.paths.index(p) for p in found]
    hay = idx.haystack()
    assert search("k1", idx, tree)[1].tolist() == _reference_rows("k1", idx.paths)
    assert idx.haystack() is hay and len(hay.starts) == n  # built once, one start per row


def test_text_search_stops_when_cancelled():
    tree = {f"k{i}": i for i in range(100_000)}
    idx = LeafIndex.build(tree)
    with pytest.raises(Cancelled):
        search("k1", idx, tree, cancelled=lambda: True)
    assert idx._haystacks == {}  # a cancelled build leaves nothing half made


def test_node_chain_names_the_missing_step():
    with pytest.raises(KeyError) as info:
        node_chain(view({"a": {"b": 1}}), "['a']['c']")
    assert info.value.args[0] == (
        "no node at \"['a']['c']\": nothing matches \"['c']\" under \"['a']\""
    )


def test_expression_uses_tree_for_non_identifiers():
    assert expression("model", ".layers[0].weight") == "model.layers[0].weight"
    assert expression("my ckpt.npz", "['w']") == "tree['w']"


def test_leaf_index_columns_and_totals():
    tied = np.ones(3, np.float32)
    idx = LeafIndex.build({"a": tied, "b": tied, "c": [np.int8(1), "text"]})
    assert idx.paths == ["['a']", "['b']", "['c'][0]", "['c'][1]"]
    assert idx.types == ["f32[3]", "f32[3]", "i8[]", "str"]
    assert idx.params.tolist() == [3, 3, 1, 0]
    t = idx.totals
    assert (t.leaves, t.arrays, t.params, t.nbytes, t.tied) == (4, 2, 4, 13, 1)
    assert dict(t.dtypes) == {"float32": 1, "int8": 1}


def test_node_chain_keeps_no_node() -> None:
    """The key maps `node_chain` keeps for wide dicts (the cursor and search walk through them
    again and again) hold no `Node`: the view and its tree go with their last user."""
    tree = {f"k{i}": {"w": np.zeros(3)} for i in range(100)}
    leaf = weakref.ref(tree["k42"]["w"])
    order = sorted(tree)  # a dict's children, in jax's order
    root = view(tree)
    chain = node_chain(root, "['k42']['w']")
    assert [(str(n.path), i) for n, i in chain] == [
        ("['k42']", order.index("k42")),
        ("['k42']['w']", 0),
    ]
    assert node_chain(root, "['k7']")[0][1] == order.index("k7")  # the map, used again
    del tree, root, chain
    gc.collect()
    assert leaf() is None


def test_cursor_path_lookup_does_not_build_every_child():
    from treetool._tree._chain import node_chain
    from treetool._tree._model import view

    tree = {f"k{i}": np.zeros(1) for i in range(50_000)}
    root = view(tree)
    chain = node_chain(root, "['k49999']")
    assert len(chain) == 1
    assert str(chain[-1][0].path) == "['k49999']"
    assert root._children is None  # found by key: the 50,000 child Nodes were never made

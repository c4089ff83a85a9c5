"""The node table against jax: every consumer opens every node the way jax does.

Random trees mix builtin containers, empty containers, None, namedtuples (plain, and
registered with jax with a flatten rule of their own), OrderedDict, defaultdict, an equinox
module, a `@tt.pytree_node` class, a `jax.tree_util.register_dataclass` class, typed key
arrays and numpy/jax arrays and scalars. For each tree, the flat views, the Node model, `get`,
`tree_at`, the HTML totals, the TUI's leaf index and the Devices tab's leaf scan must give
exactly what `jax.tree_util.tree_flatten_with_path` gives.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from treetool.tui.tab_devices import _some_leaves

import treetool as tt
from treetool._paths._path import GetAttrKey, from_jax_key
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._node_table import RULES, NodeKind, children, rule_for
from treetool._tree._totals import totals
from treetool._tree._views import _walk_nodes

tu = jax.tree_util


class Plain(NamedTuple):
    a: Any
    b: Any


class Custom(NamedTuple):
    """A namedtuple registered with jax with its own rule: children a and c, b is aux data."""

    a: Any
    b: Any
    c: Any


tu.register_pytree_node(
    Custom, lambda n: ((n.a, n.c), n.b), lambda aux, kids: Custom(kids[0], aux, kids[1])
)


class Lin(eqx.Module):
    w: Any
    b: Any


@tt.pytree_node
class Block:
    x: Any
    y: Any
    tag: str = tt.static(default="block")


@functools.partial(tu.register_dataclass, data_fields=["p", "q"], meta_fields=["m"])
@dataclasses.dataclass
class Reg:
    p: Any
    q: Any
    m: int = 0


KEY = jax.random.key(0)

_leaves = st.one_of(
    st.integers(-3, 3),
    st.floats(-2, 2, allow_nan=False),
    st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 3)),
    st.builds(lambda v: jnp.full((2,), v), st.integers(0, 3)),
    st.builds(lambda v: np.float32(v), st.integers(0, 3)),
    st.builds(lambda i: jax.random.fold_in(KEY, i), st.integers(0, 3)),  # typed key arrays
)
_names = st.sampled_from(["a", "b", "w", "layer_0", "z"])


def _containers(kids: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.dictionaries(_names, kids, max_size=3),
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.builds(Plain, kids, kids),
        st.builds(Custom, kids, st.just("aux"), kids),
        st.dictionaries(_names, kids, max_size=3).map(lambda d: collections.OrderedDict(d)),
        st.dictionaries(_names, kids, max_size=3).map(lambda d: collections.defaultdict(list, d)),
        st.builds(Lin, kids, kids),
        st.builds(Block, kids, kids),
        st.builds(Reg, kids, kids),
    )


_trees = st.recursive(
    st.one_of(_leaves, st.none(), st.just([]), st.just(()), st.just({})),
    _containers,
    max_leaves=12,
)


def _where(jax_path: tuple) -> Any:
    """A `where` function that walks to a jax key path (for `eqx.tree_at`)."""

    def where(t: Any) -> Any:
        for k in jax_path:
            if isinstance(k, tu.DictKey):
                t = t[k.key]
            elif isinstance(k, tu.SequenceKey):
                t = t[k.idx]
            elif isinstance(k, tu.GetAttrKey):
                t = getattr(t, k.name)
            else:  # FlattenedIndexKey: the index-th child of the node's own flatten
                t = tu.flatten_one_level(t)[0][k.key]
        return t

    return where


@settings(max_examples=60)
@given(_trees, st.data())
def test_every_consumer_opens_nodes_as_jax_does(tree, data):
    expected = tu.tree_flatten_with_path(tree)[0]
    texts = [tu.keystr(p) for p, _ in expected]
    leaves = [x for _, x in expected]
    ids = [id(x) for x in leaves]

    # the flat views: paths (text and keys), leaves by identity, treedef
    got = tt.leaves_with_path(tree)
    assert [str(p) for p, _ in got] == texts
    assert [list(p.keys) for p, _ in got] == [[from_jax_key(k) for k in p] for p, _ in expected]
    assert [id(x) for _, x in got] == ids
    flat = tt.to_flat_dict(tree)
    assert list(flat) == texts and [id(x) for x in flat.values()] == ids
    flat_leaves, treedef = tt.flatten(tree)
    assert [id(x) for x in flat_leaves] == ids and treedef == tu.tree_structure(tree)
    walked = [px for chunk in _walk_nodes(tree, None, True) for px in chunk]
    assert [p for p, _ in walked] == texts and [id(x) for _, x in walked] == ids

    # the Node model: its leaves, in order, at the same paths
    view_leaves = [n for n in tt.view(tree).walk() if n.is_leaf]
    assert [str(n.path) for n in view_leaves] == texts
    assert [id(n.obj) for n in view_leaves] == ids
    assert tt.view(tree).aggregates.leaves == len(expected)

    # get at every path
    for text, leaf in zip(texts, leaves):
        assert tt.get(tree, text) is leaf

    # the HTML totals, the TUI's leaf index, the Devices tab's scan (in any order)
    assert totals(tree).leaves == len(expected)
    index = LeafIndex.build(tree)
    assert index.paths == texts and [id(x) for x in index.leaves] == ids
    assert sorted(id(x) for x in _some_leaves(tree)) == sorted(ids)

    # tree_at on one leaf, by path and by function, against equinox
    if expected:
        i = data.draw(st.integers(0, len(expected) - 1))
        new = np.float64(-1.0)
        want = eqx.tree_at(_where(expected[i][0]), tree, new)
        for where in (texts[i], _where(expected[i][0])):
            out = tt.tree_at(where, tree, new)
            assert tu.tree_structure(out) == tu.tree_structure(want)
            assert [id(x) for x in tu.tree_leaves(out)] == [id(x) for x in tu.tree_leaves(want)]
        assert [id(x) for x in tu.tree_leaves(tree)] == ids  # the input is not mutated


def test_a_registered_namedtuple_opens_by_its_own_rule_everywhere():
    w, v = np.ones(2), np.zeros(3)
    tree = {"n": Custom(w, "aux", v)}
    paths = ["['n'][<flat index 0>]", "['n'][<flat index 1>]"]
    assert [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]] == paths
    assert [str(p) for p, _ in tt.leaves_with_path(tree)] == paths
    assert list(tt.to_flat_dict(tree)) == paths
    assert tt.get(tree, paths[0]) is w and tt.get(tree, paths[1]) is v
    node = tt.view(tree).child("n")
    assert node.node_kind == "custom" and node.aggregates.leaves == 2
    assert [str(c.path) for c in node.children] == paths
    assert rule_for(Custom(1, 2, 3)).kind is NodeKind.CUSTOM
    assert rule_for(Plain(1, 2)).kind is NodeKind.NAMEDTUPLE
    # a plain namedtuple keeps its `.field` paths (jax's own)
    plain = tu.tree_flatten_with_path(Plain(w, v))[0]
    assert [str(p) for p, _ in tt.leaves_with_path(Plain(w, v))] == [".a", ".b"]
    assert [tu.keystr(p) for p, _ in plain] == [".a", ".b"]


@pytest.mark.parametrize(
    "tree", [{1: np.ones(1), "b": np.ones(2)}, {"x": {1: 1.0, "b": 2.0}}], ids=["root", "nested"]
)
def test_unsortable_dict_keys_raise_as_in_jax(tree):
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten_with_path(tree)
    where = "" if 1 in tree else "['x']"
    for fn in (tt.leaves_with_path, tt.to_flat_dict, tt.flatten):
        with pytest.raises(tt.NodeError) as e:
            fn(tree)
        assert e.value.path == where
        assert "the keys of this dict cannot be sorted" in e.value.message
    # the tree views show it as an error entry at its path, never crash
    node = tt.view(tree) if 1 in tree else tt.view(tree).child("x")
    assert node.is_leaf and node.num_children == 0
    assert node.error is not None and "cannot be sorted" in node.error
    assert "cannot be sorted" in tt.view(tree)._repr_html_()
    index = LeafIndex.build(tree)
    assert index.paths == [where] and "cannot be sorted" in index.leaves[0].error
    with pytest.raises(tt.NodeError) as e:
        tt.get(tree, f"{where}['b']")
    assert e.value.path == where
    with pytest.raises(ValueError, match="cannot be sorted"):
        children(tree if 1 in tree else tree["x"])


class Net(eqx.Module):
    layers: Any


def test_tuple_of_a_tuple_node_replaces_the_node_as_equinox_does():
    net = Net(tuple(Lin(np.full(2, i), np.zeros(1)) for i in range(3)))
    new = ["a", "b", "c"]
    want = eqx.tree_at(lambda m: tuple(m.layers), net, new)
    got = tt.tree_at(lambda m: tuple(m.layers), net, new)
    assert type(want.layers) is list and want.layers == new  # the list it was handed
    assert type(got.layers) is list and got.layers == new
    assert type(net.layers) is tuple  # the input is not mutated
    # a new tuple of the same layers picks each layer: equinox replaces them one by one
    three = ("x", "y", "z")
    want = eqx.tree_at(lambda m: (m.layers[0], m.layers[1], m.layers[2]), net, three)
    got = tt.tree_at(lambda m: (m.layers[0], m.layers[1], m.layers[2]), net, three)
    assert want.layers == got.layers == three
    # tuple() of a list node is a new tuple of its items, in both
    lin = Lin([np.ones(1), np.zeros(1)], None)
    want = eqx.tree_at(lambda m: tuple(m.w), lin, ["a", "b"])
    got = tt.tree_at(lambda m: tuple(m.w), lin, ["a", "b"])
    assert want.w == got.w == ["a", "b"]


def test_one_rule_per_type_shared_by_every_consumer():
    lin = Lin(np.ones(2), np.zeros(2))
    tt.leaves_with_path(lin)
    rule = RULES[Lin]
    assert rule.kind is NodeKind.CUSTOM
    tt.view({"m": lin}).child("m").children
    tt.tree_at(".w", lin, np.ones(3))
    assert RULES[Lin] is rule  # learnt once, never replaced
    assert [k for k, _ in children(lin)[1]] == [GetAttrKey("w"), GetAttrKey("b")]
    assert NodeKind.DICT == "dict" and f"{NodeKind.LEAF}" == "leaf"


def test_get_and_tree_at_through_a_node_whose_flatten_raises_name_its_path():
    from error_targets import tree

    t = tree()
    for call in (lambda: tt.get(t, "['deep']['x'][1].w"), lambda: tt.tree_at("deep.x[1].w", t, 0)):
        with pytest.raises(tt.NodeError) as e:
            call()
        assert e.value.path == "['deep']['x'][1]"
        assert e.value.message == "RuntimeError: flatten exploded"
    assert tt.get(t, "['deep']['x'][0]") == 1  # its sibling is still reachable

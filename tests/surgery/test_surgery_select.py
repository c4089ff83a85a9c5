"""Selections, structural edits, partition/combine, and the surgery properties (hypothesis)."""

from __future__ import annotations

import collections
import logging
import re
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_surgery import Snapshot, _same
from trees import Point, corpus

import treetool as tt
from treetool._surgery._recorder import record

jtu = jax.tree_util


class Pair(NamedTuple):
    a: Any
    b: Any


@pytest.fixture(scope="module")
def mlp():
    return eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(0))


@pytest.fixture(scope="module")
def params():
    return {
        "params": {
            "Dense_0": {"kernel": np.ones((3, 4), np.float32), "bias": np.zeros(4, np.float32)},
            "Dense_1": {"kernel": np.ones((4, 2), np.float32), "bias": np.zeros(2, np.float32)},
        }
    }


# --- select --------------------------------------------------------------------------------


def test_select_by_glob_type_predicate_and_list(mlp, params):
    assert [str(p) for p in tt.select(mlp, "**.bias").paths] == [
        ".layers[0].bias",
        ".layers[1].bias",
        ".layers[2].bias",
    ]
    assert [str(p) for p in tt.select(mlp, eqx.nn.Linear).paths] == [
        ".layers[0]",
        ".layers[1]",
        ".layers[2]",
    ]
    two_d = tt.select(params, lambda x: getattr(x, "ndim", 0) == 2)
    assert [str(p) for p in two_d.paths] == [
        "['params']['Dense_0']['kernel']",
        "['params']['Dense_1']['kernel']",
    ]
    by_path = tt.select(params, lambda path, x: "Dense_1" in str(path))
    assert [str(p) for p in by_path.paths] == ["['params']['Dense_1']"]  # outermost match
    listed = tt.select(params, ["params.Dense_0.bias", "**.Dense_1.kernel"])
    assert [x.shape for x in listed.get()] == [(4,), (4, 2)]
    assert len(tt.select(params, "**.nothing")) == 0


def test_selection_where_at_and_count(mlp):
    sel = tt.select(mlp, eqx.nn.Linear)
    assert [str(p) for p in sel.where(".layers[2]").paths] == [".layers[2]"]
    assert len(sel.where(lambda lin: lin.out_features == 4)) == 2
    weights = sel.at("weight")
    assert [w.shape for w in weights.get()] == [(4, 3), (4, 4), (2, 4)]
    assert str(weights.paths[0]) == ".layers[0].weight"
    assert weights.assert_count_is(3) is weights
    with pytest.raises(tt.SelectionError, match=re.escape("expected 2 selected nodes, got 3")):
        weights.assert_count_is(2)
    with pytest.raises(tt.PathError, match=re.escape("inside .layers[0]: no path")):
        sel.at("wieght")
    assert repr(weights) == (
        "Selection(3 nodes: .layers[0].weight, .layers[1].weight, .layers[2].weight)"
    )


def test_set_and_apply(mlp):
    before = Snapshot(mlp)
    sel = tt.select(mlp, "**.bias")
    out = sel.apply(jnp.zeros_like)
    assert all(not b.any() for b in tt.select(out, "**.bias").get())
    assert out.layers[0].weight is mlp.layers[0].weight
    out = sel.apply(lambda path, b: b + len(str(path)))
    assert float(out.layers[0].bias[0] - mlp.layers[0].bias[0]) == len(".layers[0].bias")
    out = tt.select(mlp, "layers[1].weight").set(jnp.ones((4, 4)))
    assert out.layers[1].weight.sum() == 16
    assert before.matches(mlp)


def test_shape_check(mlp):
    sel = tt.select(mlp, "layers[0].weight")
    with pytest.raises(
        tt.SelectionError,
        match=re.escape(
            ".layers[0].weight: the new value is f32[5,3] but the old one is f32[4,3]; "
            "pass check=False to allow a change of shape or dtype"
        ),
    ):
        sel.set(jnp.zeros((5, 3)))
    with pytest.raises(tt.SelectionError, match=re.escape("is bf16[4,3] but the old one")):
        sel.apply(lambda w: w.astype(jnp.bfloat16))
    assert sel.set(jnp.zeros((5, 3)), check=False).layers[0].weight.shape == (5, 3)
    # the leaves of a subtree of the same structure are checked one by one
    bad = eqx.nn.Linear(3, 5, key=jax.random.key(2))
    with pytest.raises(tt.SelectionError, match=re.escape(".layers[0].weight: the new value")):
        tt.select(mlp, "layers[0]").set(bad)


def test_structure_change_is_allowed_and_logged(mlp, caplog):
    with caplog.at_level(logging.INFO, logger="treetool"):
        out = tt.select(mlp, "layers[0]").set(eqx.nn.Identity())
    assert isinstance(out.layers[0], eqx.nn.Identity)
    assert caplog.messages == [".layers[0]: replaced Linear with Identity of a different structure"]


def test_preview_is_the_diff_of_the_edit(params):
    sel = tt.select(params, "**.bias")
    d = sel.preview("apply", lambda b: b + 1)
    assert [(c.path, c.kind) for c in d.changes] == [
        ("['params']['Dense_0']['bias']", "value"),
        ("['params']['Dense_1']['bias']", "value"),
    ]
    d = sel.preview("delete")
    assert [(c.path, c.kind) for c in d.changes] == [
        ("['params']['Dense_0']['bias']", "removed"),
        ("['params']['Dense_1']['bias']", "removed"),
    ]
    d = sel.preview(lambda s: s.set(np.zeros(7, np.float32), check=False))
    assert {c.kind for c in d.changes} == {"shape"}
    with pytest.raises(ValueError, match="preview: edit must be 'set', 'apply' or 'delete'"):
        sel.preview("frobnicate")


# --- delete, insert, rename ------------------------------------------------------------------


def test_delete_from_dicts_lists_and_tuples():
    tree = {"a": [1, 2, 3, 4], "b": (5, 6), "c": {"d": 7, "e": 8}}
    before = Snapshot(tree)
    assert tt.delete(tree, ["a[1]", "a[3]", "b[0]", "c.d"]) == {
        "a": [1, 3],
        "b": (6,),
        "c": {"e": 8},
    }
    assert tt.delete(tree, "a[-1]")["a"] == [1, 2, 3]
    assert tt.select(tree, "a[*]").where(lambda x: x % 2).delete()["a"] == [2, 4]
    od = collections.OrderedDict([("z", 1), ("y", 2)])
    assert type(tt.delete({"o": od}, "o.z")["o"]) is collections.OrderedDict
    assert before.matches(tree)


def test_delete_refuses_fixed_fields(mlp):
    with pytest.raises(
        tt.SelectionError,
        match=re.escape(
            "cannot delete .layers[0].bias: Linear (an equinox Module) cannot lose a field. "
            "Replace it with None instead: tt.tree_at('.layers[0].bias', tree, None)"
        ),
    ):
        tt.delete(mlp, "layers[0].bias")
    with pytest.raises(tt.SelectionError, match=re.escape("Point (a namedtuple) cannot lose")):
        tt.delete(Point(1, 2), "y")
    with pytest.raises(tt.SelectionError, match=re.escape("cannot delete the root of the tree")):
        tt.delete({"a": 1}, lambda x: isinstance(x, dict))
    with pytest.raises(tt.SelectionError, match=re.escape("delete: '**.bias' picks nothing")):
        tt.delete({"a": 1}, "**.bias")
    # the suggested fix works
    assert tt.tree_at(".layers[0].bias", mlp, None).layers[0].bias is None


def test_insert():
    tree = {"layers": [10, 20], "t": (1, 2), "d": {"x": 1}}
    assert tt.insert(tree, "layers[0]", 5)["layers"] == [5, 10, 20]
    assert tt.insert(tree, "layers[2]", 30)["layers"] == [10, 20, 30]
    assert tt.insert(tree, "layers.1", 15)["layers"] == [10, 15, 20]
    assert tt.insert(tree, "layers[-1]", 15)["layers"] == [10, 15, 20]
    assert tt.insert(tree, "t[1]", 9)["t"] == (1, 9, 2)
    assert tt.insert(tree, "d.y", {"z": None})["d"] == {"x": 1, "y": {"z": None}}
    assert tt.insert(tree, "['d'][0]", 0)["d"] == {"x": 1, 0: 0}
    assert tree == {"layers": [10, 20], "t": (1, 2), "d": {"x": 1}}
    with pytest.raises(
        tt.SelectionError,
        match=re.escape("insert: ['d']['x'] exists already; replace it with tt.tree_at("),
    ):
        tt.insert(tree, "d.x", 2)
    with pytest.raises(tt.SelectionError, match=re.escape("index 3 is out of range for")):
        tt.insert(tree, "layers[3]", 0)
    with pytest.raises(tt.SelectionError, match=re.escape("expected an index, got '.w'")):
        tt.insert(tree, "layers.w", 0)
    with pytest.raises(tt.PathError):
        tt.insert(tree, "nope.x", 0)


def test_insert_refuses_fixed_fields(mlp):
    with pytest.raises(
        tt.SelectionError,
        match=re.escape(
            "insert: .layers[0] is Linear (an equinox Module), whose fields are fixed; "
            "insert adds dict keys and list/tuple items."
        ),
    ):
        tt.insert(mlp, "layers[0].lora", 1)
    # a tuple of modules can grow
    grown = tt.insert(mlp, "layers[3]", eqx.nn.Lambda(jax.nn.relu))
    assert len(grown.layers) == 4 and grown.layers[:3] == mlp.layers


def test_rename():
    tree = {"params": {"Dense_0": 1, "Dense_1": 2, "LayerNorm_0": 3}}
    out = tt.rename(tree, "params.Dense_1", "head")
    assert out == {"params": {"Dense_0": 1, "head": 2, "LayerNorm_0": 3}}
    assert list(out["params"]) == ["Dense_0", "head", "LayerNorm_0"]  # same place
    dd = collections.defaultdict(list, {"a": [1]})
    renamed = tt.rename({"d": dd}, "d.a", "b")["d"]
    assert type(renamed) is collections.defaultdict and renamed.default_factory is list
    with pytest.raises(tt.SelectionError, match=re.escape("rename: ['params']['Dense_0'] exists")):
        tt.rename(tree, "params.Dense_1", "Dense_0")
    with pytest.raises(tt.SelectionError, match=re.escape("is not a dict entry: the root is")):
        tt.rename(Pair(1, 2), "a", "c")


# --- partition / combine -------------------------------------------------------------------


def test_partition_like_equinox(mlp):
    ours = tt.partition(mlp, eqx.is_array)
    theirs = eqx.partition(mlp, eqx.is_array)
    assert _same(ours[0], theirs[0]) and _same(ours[1], theirs[1])
    assert _same(tt.combine(*ours), eqx.combine(*theirs))
    assert _same(tt.combine(*ours), mlp)


def test_partition_freezes_a_subtree(mlp):
    trainable, frozen = tt.partition(mlp, "layers[2]")
    assert jtu.tree_structure(trainable, is_leaf=lambda x: x is None) == jtu.tree_structure(
        frozen, is_leaf=lambda x: x is None
    )
    assert trainable.layers[2].weight is mlp.layers[2].weight
    assert trainable.layers[0].weight is None and frozen.layers[2].bias is None
    assert _same(tt.combine(trainable, frozen), mlp)
    by_type, _ = tt.partition({"a": mlp, "b": 1.0}, eqx.nn.MLP)
    assert by_type["b"] is None and by_type["a"] is mlp


def test_combine_mismatch():
    with pytest.raises(tt.StructureMismatch, match=re.escape("combine: the trees do not have")):
        tt.combine({"a": 1}, {"b": 2})


# --- the corpus ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(corpus()))
def test_select_all_leaves_round_trip(name):
    tree = corpus()[name]
    before = Snapshot(tree)
    sel = tt.select(tree, lambda x: tt.view(x).is_leaf)
    assert [str(p) for p in sel.paths] == [str(p) for p, _ in tt.leaves_with_path(tree)]
    same = sel.apply(lambda x: x, check=True)
    assert _same(same, tree)
    assert not tt.diff(tree, same)
    selected, rest = tt.partition(tree, lambda path, x: len(path) % 2 == 0)
    assert _same(tt.combine(selected, rest), tree)
    assert before.matches(tree)


# --- properties -----------------------------------------------------------------------------

_leaf = st.floats(-10, 10, allow_nan=False).map(lambda v: np.full(2, v, np.float32))


def _trees():
    return st.recursive(
        st.one_of(_leaf, st.none()),
        lambda kids: st.one_of(
            st.dictionaries(st.sampled_from("abcdef"), kids, min_size=1, max_size=3),
            st.lists(kids, min_size=1, max_size=3),
            st.lists(kids, min_size=1, max_size=3).map(tuple),
            st.tuples(kids, kids).map(lambda ab: Pair(*ab)),
        ),
        max_leaves=12,
    )


def _nodes(tree: Any) -> list[tt.Path]:
    return [n.path for n in tt.view(tree).walk()]


@settings(max_examples=40)
@given(tree=_trees(), data=st.data())
def test_property_get_after_tree_at(tree, data):
    path = data.draw(st.sampled_from(_nodes(tree)))
    before = Snapshot(tree)
    value = object()
    out = tt.tree_at(str(path), tree, value)
    assert tt.get(out, path) is value
    assert before.matches(tree)
    # the same edit through a where function, against equinox
    keys = path.to_jax()

    def where(t):
        for k in keys:
            t = (
                t[k.key]
                if hasattr(k, "key")
                else t[k.idx]
                if hasattr(k, "idx")
                else getattr(t, k.name)
            )
        return t

    if tt.get(tree, path) is not None:  # equinox cannot pick a None without is_leaf
        assert _same(tt.tree_at(where, tree, value), eqx.tree_at(where, tree, value))


@settings(max_examples=40)
@given(tree=_trees(), data=st.data())
def test_property_diff_names_exactly_the_edited_paths(tree, data):
    leaves = [p for p, _ in tt.leaves_with_path(tree)]
    if not leaves:
        return
    picked = data.draw(st.lists(st.sampled_from(leaves), min_size=1, max_size=4, unique=True))
    before = Snapshot(tree)
    out = tt.select(tree, [str(p) for p in picked]).apply(lambda x: x + 100)
    assert sorted(c.path for c in tt.diff(tree, out).changes) == sorted(str(p) for p in picked)
    assert before.matches(tree)
    gone = data.draw(st.sampled_from(picked))
    parent = tt.get(tree, gone.parent)
    if isinstance(parent, (dict, list)) or type(parent) is tuple:
        d = tt.diff(tree, tt.delete(tree, str(gone)))
        if isinstance(parent, dict):
            assert [(c.path, c.kind) for c in d.changes] == [(str(gone), "removed")]
        else:
            # from a run of equal items the same edit removes whichever one: the diff may name
            # any of the run, and deleting the one it names gives exactly the same tree
            [(path, kind)] = [(c.path, c.kind) for c in d.changes]
            assert kind == "removed" and tt.Path.parse(path).parent == gone.parent
            assert not tt.diff(tt.delete(tree, path), tt.delete(tree, str(gone))).changes
    assert before.matches(tree)


def test_library_trees():
    trees = corpus()
    state = trees["nnx_state"]
    with pytest.raises(
        tt.SelectionError,
        match=re.escape(
            "cannot delete ['bias']: State (a flax pytree node) cannot lose a child (its "
            "structure is fixed). Replace it with None instead"
        ),
    ):
        tt.delete(state, "bias")
    zeroed = tt.select(state, "**.value").apply(jnp.zeros_like)
    assert all(not x.any() for x in jtu.tree_leaves(zeroed))
    assert type(zeroed) is type(state)
    adamw = trees["adamw"]
    count = tt.select(adamw, "**.count").assert_count_is(1)
    assert str(count.paths[0]) == "[0].count"
    mu, _ = tt.partition(adamw, "[0].mu")
    assert all(x is None for x in jtu.tree_leaves(mu[0].nu, is_leaf=lambda x: x is None))
    linen = trees["linen"]
    out = tt.select(linen, "params.LayerNorm_0.*").apply(lambda x: x * 2)
    assert float(out["params"]["LayerNorm_0"]["scale"].sum()) == 8.0
    assert out["params"]["Dense_0"] is linen["params"]["Dense_0"]


def test_is_leaf_selections(mlp):
    is_linear = lambda x: isinstance(x, eqx.nn.Linear)  # noqa: E731
    sel = tt.select(mlp, "layers[*]", is_leaf=is_linear)
    assert len(sel) == 3
    with pytest.raises(tt.PathError):
        tt.select(mlp, "layers[0].weight", is_leaf=is_linear)
    frozen, rest = tt.partition(mlp, lambda x: x is mlp.layers[0], is_leaf=is_linear)
    assert frozen.layers[0] is mlp.layers[0] and rest.layers[0] is None


def _steps(path: tt.Path) -> list[tuple[str, Any]]:
    """A path as plain steps: ("item", key or index) or ("attr", name)."""
    out: list[tuple[str, Any]] = []
    for k in path.to_jax():
        if hasattr(k, "key"):
            out.append(("item", k.key))
        elif hasattr(k, "idx"):
            out.append(("item", k.idx))
        else:
            out.append(("attr", k.name))
    return out


@settings(max_examples=40)
@given(tree=_trees(), data=st.data())
def test_property_many_nodes_against_equinox(tree, data):
    nodes = [p for p in _nodes(tree) if tt.get(tree, p) is not None]
    if not nodes:
        return
    picked = data.draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=4))
    plan = [_steps(p) for p in picked]

    def where(t):  # attribute and index steps only: replayed on the recording proxy
        out = []
        for steps in plan:
            x = t
            for how, k in steps:
                x = x[k] if how == "item" else getattr(x, k)
            out.append(x)
        return out

    assert len(record(where, tree, None, {})) == len(picked)

    ours = _outcome_of(lambda: tt.tree_at(where, tree, replace_fn=lambda x: ("new", x)))
    theirs = _outcome_of(lambda: eqx.tree_at(where, tree, replace_fn=lambda x: ("new", x)))
    if isinstance(theirs, Exception):
        assert type(ours) is tt.SelectionError and str(ours) == str(theirs)
    else:
        assert _same(ours, theirs)


def _outcome_of(fn):
    try:
        return fn()
    except ValueError as e:
        return e

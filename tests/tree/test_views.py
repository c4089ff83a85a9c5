"""Views over the real-tree corpus and over random trees: paths, get, flatten, flat dicts."""

from __future__ import annotations

import collections
import re

import equinox as eqx
import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from trees import Point, corpus

import treetool as tt
from treetool._paths._path import GetAttrKey
from treetool._tree._views import find, iter_leaves_with_paths, leaf_text_chunks, resolve

jtu = jax.tree_util
NAMES = sorted(corpus())


def _same(a, b):
    """Same structure and the very same leaf objects."""
    la, ta = jtu.tree_flatten(a)
    lb, tb = jtu.tree_flatten(b)
    return ta == tb and len(la) == len(lb) and all(x is y for x, y in zip(la, lb))


def _dotted(path: tt.Path) -> str:
    return ".".join(k.text for k in path)


@pytest.mark.parametrize("name", NAMES)
def test_paths_equal_jax_keystr_and_get_returns_the_leaf(name):
    tree = corpus()[name]
    ours = tt.leaves_with_path(tree)
    theirs = jtu.tree_flatten_with_path(tree)[0]
    assert [str(p) for p, _ in ours] == [jtu.keystr(p) for p, _ in theirs]
    assert [p.keys for p, _ in ours] == [tt.Path.from_jax(p).keys for p, _ in theirs]
    assert all(x is y for (_, x), (_, y) in zip(ours, theirs))
    for p, leaf in ours:
        assert tt.get(tree, str(p)) is leaf
        assert tt.get(tree, p) is leaf
        if all(k.text and "." not in k.text and "[" not in k.text for k in p):
            assert tt.get(tree, _dotted(p)) is leaf, _dotted(p)


@pytest.mark.parametrize("name", NAMES)
def test_flatten_unflatten_and_flat_dict_round_trip(name):
    tree = corpus()[name]
    before_def, before_leaves = jtu.tree_structure(tree), jtu.tree_leaves(tree)
    leaves, treedef = tt.flatten(tree)
    assert _same(tt.unflatten(treedef, leaves), tree)
    flat = tt.to_flat_dict(tree)
    assert list(flat) == [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    assert _same(tt.from_flat_dict(flat, like=tree), tree)
    assert jtu.tree_structure(tree) == before_def
    assert all(x is y for x, y in zip(jtu.tree_leaves(tree), before_leaves))


def test_known_paths_of_real_models():
    c = corpus()
    assert [str(p) for p, _ in tt.leaves_with_path(c["linen"])] == [
        "['params']['Dense_0']['bias']",
        "['params']['Dense_0']['kernel']",
        "['params']['Dense_1']['bias']",
        "['params']['Dense_1']['kernel']",
        "['params']['LayerNorm_0']['bias']",
        "['params']['LayerNorm_0']['scale']",
    ]
    assert tt.get(c["linen"], "params.Dense_1.kernel").shape == (4, 2)
    assert [str(p) for p, _ in tt.leaves_with_path(c["adamw"])][:3] == [
        "[0].count",
        "[0].mu.layers[0].weight",
        "[0].mu.layers[0].bias",
    ]
    assert tt.get(c["mlp"], "layers.1.weight").shape == (4, 4)
    assert str(resolve(c["mlp"], "layers[-1].bias")) == ".layers[2].bias"
    assert tt.get(c["int_keys"], "1.w").shape == (2,)  # 1 is an int dict key here
    assert str(resolve(c["int_keys"], "0")) == "[0]"
    assert str(resolve(c["nnx_state"], "kernel.value")) in (
        "['kernel'].value",
        "['kernel'].raw_value",
    )


def test_is_leaf_gives_a_layer_level_view():
    mlp = corpus()["mlp"]
    is_layer = lambda x: isinstance(x, eqx.nn.Linear)  # noqa: E731
    layers = tt.leaves_with_path(mlp, is_leaf=is_layer)
    assert [str(p) for p, x in layers if isinstance(x, eqx.nn.Linear)] == [
        ".layers[0]",
        ".layers[1]",
        ".layers[2]",
    ]
    assert list(tt.to_flat_dict(mlp, is_leaf=is_layer))[:3] == [
        ".layers[0]",
        ".layers[1]",
        ".layers[2]",
    ]


def test_get_miss_names_prefix_and_nearest_paths():
    mlp = corpus()["mlp"]
    msg = (
        "no path '.layers[1].wieght' in the tree: .layers[1] has no .wieght; it has .weight, "
        ".bias. Did you mean '.layers[1].weight'?"
    )
    with pytest.raises(KeyError, match=re.escape(msg)):
        tt.get(mlp, "layers[1].wieght")
    with pytest.raises(
        tt.PathError,
        match=re.escape(
            "no path '.layers[7]' in the tree: .layers has no [7]; it has [0], [1], [2]"
        ),
    ):
        tt.get(mlp, ".layers[7]")
    with pytest.raises(tt.PathError, match=re.escape("Did you mean '.layers[0].bias'?")):
        tt.get(mlp, "layer[0].bias")
    with pytest.raises(tt.PathError, match=re.escape("is a glob: use tt.select")):
        tt.get(mlp, "**.bias")


def test_find_globs_on_real_trees():
    c = corpus()
    assert [str(p) for p, _ in find(c["mlp"], "**.bias")] == [
        ".layers[0].bias",
        ".layers[1].bias",
        ".layers[2].bias",
    ]
    assert [str(p) for p, _ in find(c["linen"], "params.Dense_*.kernel")] == [
        "['params']['Dense_0']['kernel']",
        "['params']['Dense_1']['kernel']",
    ]
    assert [str(p) for p, _ in find(c["adamw"], "[0].*.layers[2]")] == [
        "[0].mu.layers[2]",
        "[0].nu.layers[2]",
    ]


def test_from_flat_dict_reports_missing_and_extra():
    with pytest.raises(tt.StructureMismatch, match=re.escape("missing 1: ['b']")):
        tt.from_flat_dict({"['a']": 1}, like={"a": 0, "b": 0})
    with pytest.raises(tt.StructureMismatch, match=re.escape("unexpected 1: ['c']")):
        tt.from_flat_dict({"['a']": 1, "['c']": 2}, like={"a": 0})
    assert tt.from_flat_dict({"a": 1, "b.0": 2}, like={"a": 0, "b": [0]}) == {"a": 1, "b": [2]}


def test_nonfinite():
    tree = {"a": np.array([np.nan, np.inf, -np.inf, 1.0]), "b": [np.ones(3)], "i": np.arange(3)}
    assert [(str(p), n, i) for p, n, i in tt.nonfinite(tree)] == [("['a']", 1, 2)]
    jtree = {"w": jax.numpy.array([1.0, jax.numpy.nan], dtype=jax.numpy.bfloat16)}
    assert [(str(p), n, i) for p, n, i in tt.nonfinite(jtree)] == [("['w']", 1, 0)]


# --- random trees -------------------------------------------------------------------------

_leaf = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    st.none(),
    st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 4)),
)
_name = st.text(alphabet="abcxyz_", min_size=1, max_size=3)


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(_name, children, max_size=4),
        st.builds(Point, children, children),
        st.dictionaries(_name, children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(st.integers(0, 5), children, max_size=3),
    )


trees = st.recursive(_leaf, _containers, max_leaves=25)


@given(trees)
def test_random_trees_round_trip(tree):
    ours = tt.leaves_with_path(tree)
    theirs = jtu.tree_flatten_with_path(tree)[0]
    assert [str(p) for p, _ in ours] == [jtu.keystr(p) for p, _ in theirs]
    assert [p.keys for p, _ in ours] == [tt.Path.from_jax(p).keys for p, _ in theirs]
    assert [(str(p), x) for p, x in iter_leaves_with_paths(tree)] == [(str(p), x) for p, x in ours]
    texts = [pair for chunk in leaf_text_chunks(tree) for pair in chunk]
    assert texts == [(str(p), x) for p, x in ours]
    leaves, treedef = tt.flatten(tree)
    assert _same(tt.unflatten(treedef, leaves), tree)
    assert _same(tt.from_flat_dict(tt.to_flat_dict(tree), like=tree), tree)
    for p, leaf in ours:
        assert tt.get(tree, str(p)) is leaf
        assert tt.Path.parse(str(p)) == p


def _jax_view(tree, is_leaf=None):
    return [(jtu.keystr(p), x) for p, x in jtu.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]]


def _our_view(tree, is_leaf=None):
    return [(str(p), x) for p, x in tt.leaves_with_path(tree, is_leaf=is_leaf)]


def test_equinox_module_with_an_unset_field_walks_as_jax_does():
    class Half(eqx.Module):
        a: object
        b: object
        c: object = eqx.field(static=True)

    whole = Half(np.float32(1), [np.float32(2), {"x": np.float32(3)}], "static")
    half = object.__new__(Half)
    object.__setattr__(half, "a", np.float32(4))  # b left unset: equinox flattens a marker
    tree = {"whole": whole, "half": half, "again": Half(np.float32(5), None, 0)}
    assert _our_view(tree) == _jax_view(tree)
    assert [str(p) for p, _ in tt.leaves_with_path(tree)] == [
        "['again'].a",
        "['half'].a",
        "['whole'].a",
        "['whole'].b[0]",
        "['whole'].b[1]['x']",
    ]
    [(p, _)] = tt.leaves_with_path(tree["half"])
    assert p.keys == (GetAttrKey("a"),)


def test_a_class_registered_after_a_walk_saw_it_as_a_leaf():
    class Late:
        def __init__(self, x, y):
            self.x, self.y = x, y

    tree = {"a": [Late(1, 2), Late(3, 4)], "b": 5}
    assert [p for p, _ in _our_view(tree)] == ["['a'][0]", "['a'][1]", "['b']"]
    jtu.register_pytree_with_keys(
        Late,
        lambda o: (((jtu.GetAttrKey("x"), o.x), (jtu.GetAttrKey("y"), o.y)), None),
        lambda _, c: Late(*c),
    )
    assert _our_view(tree) == _jax_view(tree)
    assert [p for p, _ in _our_view(tree)][:2] == ["['a'][0].x", "['a'][0].y"]


def test_is_leaf_views_agree_with_jax_on_mixed_containers():
    mlp = eqx.nn.MLP(2, 2, 4, 2, key=jax.random.key(0))
    tree = {"m": mlp, "l": [np.float32(1), (np.float32(2), {"z": mlp.layers[0]})], "n": None}
    for is_leaf in (None, lambda x: isinstance(x, eqx.Module), lambda x: isinstance(x, tuple)):
        ours, theirs = _our_view(tree, is_leaf), _jax_view(tree, is_leaf)
        assert [p for p, _ in ours] == [p for p, _ in theirs]
        assert all(x is y for (_, x), (_, y) in zip(ours, theirs))

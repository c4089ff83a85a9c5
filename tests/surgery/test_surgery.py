"""tt.tree_at against eqx.tree_at (the oracle), the recording replay, paths and globs, speed."""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import re
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from trees import corpus

import treetool as tt
from treetool._surgery._recorder import Fallback, record

jtu = jax.tree_util


class Pair(NamedTuple):
    a: Any
    b: Any


class Empty(NamedTuple):
    pass


class Block(eqx.Module):
    lin: eqx.nn.Linear
    scale: jax.Array
    name: str = eqx.field(static=True, default="block")


@pytest.fixture(scope="module")
def mlp():
    return eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(0))


@pytest.fixture(scope="module")
def block():
    return Block(eqx.nn.Linear(2, 2, key=jax.random.key(1)), jnp.ones(2))


def _leaf_equal(x: Any, y: Any) -> bool:
    if eqx.is_array(x) and eqx.is_array(y):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)
    if callable(x) and not isinstance(x, type):  # functions (activations) copy as new objects
        return type(x) is type(y)
    return x is y or x == y


def _same(a: Any, b: Any) -> bool:
    """Same structure (static fields included) and equal leaves, leaf by leaf."""
    la, ta = jtu.tree_flatten(a)
    lb, tb = jtu.tree_flatten(b)
    return ta == tb and len(la) == len(lb) and all(map(_leaf_equal, la, lb))


class Snapshot:
    """A deep copy of a tree's structure and leaves, to check later that it was not mutated."""

    def __init__(self, tree: Any) -> None:
        leaves, self.treedef = jtu.tree_flatten(tree)
        self.leaves = copy.deepcopy(leaves)

    def matches(self, tree: Any) -> bool:
        leaves, treedef = jtu.tree_flatten(tree)
        return treedef == self.treedef and all(map(_leaf_equal, leaves, self.leaves))


def _outcome(fn, *args, **kwargs):
    try:
        return "ok", fn(*args, **kwargs)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        return type(e), str(e).splitlines()[0]


def _agree(where, tree, *args, **kwargs):
    """tt.tree_at and eqx.tree_at give the same tree, or errors of the same kind and text."""
    before = Snapshot(tree)
    ours = _outcome(tt.tree_at, where, tree, *args, **kwargs)
    theirs = _outcome(eqx.tree_at, where, tree, *args, **kwargs)
    assert before.matches(tree), "the input was mutated"
    if theirs[0] == "ok":
        assert ours[0] == "ok", ours
        assert _same(ours[1], theirs[1]), (ours[1], theirs[1])
    else:
        assert ours[0] is not None and issubclass(ours[0], theirs[0]), (ours, theirs)
        # equinox's messages name eqx.tree_at in their examples; ours name tt.tree_at
        assert ours[1].replace("tt.", "eqx.").replace("_Boxed", "_LeafWrapper") == theirs[1]
    return ours


# --- equinox's own cases, with eqx.tree_at as the oracle -----------------------------------

NESTED = [1, [2, {"a": 3, "b": 4}], (5, 6)]

ORACLE_CASES = [
    ("leaf", lambda t: t[1][1]["a"], NESTED, (9,), {}),
    ("subtree", lambda t: t[1], NESTED, ({"new": 0},), {}),
    ("two leaves", lambda t: (t[0], t[2][1]), NESTED, ((10, 20),), {}),
    ("list of nodes", lambda t: [t[0], t[1][1]], NESTED, ([10, {}],), {}),
    ("replace_fn", lambda t: (t[0], t[2][0]), NESTED, (), {"replace_fn": lambda x: x * 100}),
    ("root", lambda t: t, NESTED, ("everything",), {}),
    ("sequence node", lambda t: t[2], NESTED, ((7, 8, 9),), {}),
    ("slice", lambda t: t[2][:2], NESTED, ((0, 0),), {}),
    ("empty tuple", lambda t: t[0], [(), ()], (1,), {}),
    ("second empty tuple", lambda t: t[1], [(), ()], (1,), {}),
    ("empty namedtuple", lambda t: t.a, Pair(Empty(), Empty()), (3,), {}),
    ("one None", lambda t: t[0], (None, 1), (True,), {}),
    ("ambiguous None", lambda t: t[0], (None, None, 1), (True,), {}),
    (
        "None as a leaf",
        lambda t: t[0],
        (None, None, 1),
        (True,),
        {"is_leaf": lambda x: x is None},
    ),
    ("aliased tuples", lambda t: t[0], [(1,)] * 3, ("x",), {}),
    ("aliased small ints", lambda t: t[1], (1, 1, 1), (5,), {}),
    ("same node twice", lambda t: (t[0], t[0]), [1, 2], ((10, 20),), {}),
    ("node inside node", lambda t: (t[1], t[1][0]), NESTED, ((0, 0),), {}),
    ("not a node", lambda t: 1, NESTED, (0,), {}),
    ("computed value", lambda t: t[0] + 1, NESTED, (0,), {}),
    ("depends on leaves", lambda t: tuple(x for x in t if type(x) is int), NESTED, ((0,),), {}),
    ("too few replacements", lambda t: (t[0], t[1]), NESTED, ((0,),), {}),
    ("both replace and fn", lambda t: t[0], NESTED, (0,), {"replace_fn": lambda x: x}),
    ("neither", lambda t: t[0], NESTED, (), {}),
    ("missing key", lambda t: t[1][1]["zz"], NESTED, (0,), {}),
    ("dict keys", lambda t: [t[1][1][k] for k in t[1][1]], NESTED, ((7, 8),), {}),
    ("dict values", lambda t: list(t[1][1].values()), NESTED, ((7, 8),), {}),
    ("dict items", lambda t: [v for k, v in t[1][1].items() if k == "b"], NESTED, ((7,),), {}),
    ("len", lambda t: t[2][len(t[2]) - 1], NESTED, (0,), {}),
    ("negative index", lambda t: t[-1][-1], NESTED, (0,), {}),
    ("empty where", lambda t: (), NESTED, ((),), {}),
    ("ordered dict", lambda t: t["z"], collections.OrderedDict(z=1, a=2), (0,), {}),
]


@pytest.mark.parametrize(
    ("where", "tree", "args", "kwargs"),
    [c[1:] for c in ORACLE_CASES],
    ids=[c[0] for c in ORACLE_CASES],
)
def test_tree_at_agrees_with_equinox(where, tree, args, kwargs):
    _agree(where, tree, *args, **kwargs)


def test_equinox_models_agree_with_equinox(mlp, block):
    _agree(lambda m: m.layers[-1].weight, mlp, jnp.zeros((2, 4)))
    _agree(lambda m: m.layers[0], mlp, eqx.nn.Identity())
    _agree(lambda m: [lin.bias for lin in m.layers], mlp, replace_fn=jnp.zeros_like)
    _agree(lambda m: [x for x in m.layers if isinstance(x, eqx.nn.Linear)], mlp, (1, 2, 3))
    _agree(lambda m: [x for x in m.layers if type(x) is eqx.nn.Linear], mlp, (1, 2, 3))
    _agree(lambda m: jtu.tree_leaves(m.layers[0]), mlp, (1, 2))
    _agree(lambda m: m.layers[0].weight.T, mlp, 0)  # not a node
    _agree(lambda m: m.in_size, mlp, 5)  # a static field: not in the pytree
    _agree(lambda b: b.lin.bias, block, None)
    _agree(lambda b: b.name, block, "other")
    _agree(lambda b: (b.scale, b.lin.weight), block, replace_fn=lambda x: x + 1)


def test_is_leaf_agrees_with_equinox(mlp):
    is_linear = lambda x: isinstance(x, eqx.nn.Linear)  # noqa: E731
    _agree(lambda m: m.layers[1], mlp, "swapped", is_leaf=is_linear)
    _agree(lambda m: m.layers[1].weight, mlp, 0, is_leaf=is_linear)  # cannot look inside


def test_optax_and_flax_agree_with_equinox():
    trees = corpus()
    _agree(lambda s: s[0].count, trees["adamw"], jnp.array(7, jnp.int32))
    _agree(lambda s: s[0].mu.layers[0].bias, trees["adamw"], replace_fn=lambda x: x + 1)
    linen = trees["linen"]
    _agree(lambda p: p["params"]["Dense_0"]["kernel"], linen, jnp.zeros((3, 4)))
    _agree(lambda p: p["params"]["Dense_1"], linen, {"kernel": 0})
    _agree(lambda s: s["kernel"], trees["nnx_state"], jnp.zeros((3, 2)))


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=["act"])
@dataclasses.dataclass
class Dense:
    w: Any
    b: Any
    act: str = "relu"


def test_registered_dataclass():
    tree = {"layers": [Dense(np.ones(2), np.zeros(2)), Dense(np.ones(3), None, "tanh")]}
    _agree(lambda t: t["layers"][1].w, tree, np.zeros(3))
    # one of the biases is None: picked through the general method, as equinox does
    _agree(lambda t: [d.b for d in t["layers"]], tree, (1.0, 2.0))
    _agree(lambda t: t["layers"][0].act, tree, "gelu")  # static: not in the pytree
    out = tt.tree_at("layers[1].b", tree, np.ones(3))
    assert out["layers"][1].act == "tanh" and out["layers"][1].b.shape == (3,)
    with pytest.raises(
        tt.SelectionError,
        match=re.escape("cannot delete ['layers'][0].b: Dense (a registered pytree node)"),
    ):
        tt.delete(tree, "layers[0].b")


def test_equinox_error_messages_pinned():
    with pytest.raises(ValueError, match=re.escape("does not uniquely identify a single element")):
        tt.tree_at(lambda t: t[0], (None, None, 1), True)
    with pytest.raises(tt.SelectionError, match=re.escape("tt.tree_at('[0]', (None, None, 1)")):
        tt.tree_at(lambda t: t[0], (None, None, 1), True)
    with pytest.raises(TypeError, match=re.escape("Operation undefined, 1 is not a leaf")):
        tt.tree_at(lambda t: 1, [0], 2)


# --- the replay --------------------------------------------------------------------------


def test_plain_where_functions_are_replayed(mlp):
    def paths(where, tree=mlp, is_leaf=None):
        got = record(where, tree, is_leaf, {})
        return str(got) if isinstance(got, tt.Path) else [str(p) for p in got]

    assert paths(lambda m: m.layers[-1].weight) == ".layers[2].weight"
    assert paths(lambda m: [x.bias for x in m.layers]) == [
        ".layers[0].bias",
        ".layers[1].bias",
        ".layers[2].bias",
    ]
    assert paths(lambda m: tuple(m.layers[i].weight for i in range(2))) == [
        ".layers[0].weight",
        ".layers[1].weight",
    ]
    assert paths(lambda m: [x for x in m.layers if isinstance(x, eqx.nn.Linear)][:1]) == [
        ".layers[0]"
    ]
    assert paths(lambda t: t["b"][0], {"b": [None, 1]}, lambda x: x is None) == "['b'][0]"
    assert paths(lambda t: [t[k] for k in t], {"b": 1, "a": 2}) == ["['a']", "['b']"]


@pytest.mark.parametrize(
    "where",
    [
        lambda m: jtu.tree_leaves(m.layers[0]),  # a call into foreign code
        lambda m: [x for x in m.layers if type(x) is eqx.nn.Linear],  # type() sees the proxy
        lambda m: m.layers[0].weight.T,  # touches a leaf
        lambda m: m.in_size,  # a static field
        lambda m: m.layers[0].__call__,  # a method
        lambda m: m.layers[0] if m.layers[0] == m.layers[1] else m.layers[1],  # compares nodes
        lambda m: m.layers[9],  # out of range (the real error comes from the general method)
    ],
)
def test_other_where_functions_fall_back(mlp, where):
    with pytest.raises(Fallback):
        record(where, mlp, None, {})


def _aliased_leaves(m):
    leaves = jtu.tree_leaves  # a function the static look does not see being called
    return leaves(m.layers[0])


def _functions_in_a_list(m, fns=(jtu.tree_leaves,)):
    return fns[0](m.layers[0])


@pytest.mark.parametrize("where", [_aliased_leaves, _functions_in_a_list])
def test_hidden_calls_fall_back_and_agree(mlp, where):
    with pytest.raises(Fallback):
        record(where, mlp, None, {})
    _agree(where, mlp, (1, 2))


def test_none_is_the_real_none_during_replay():
    tree = {"a": [None, 1.0], "b": [2.0, 3.0]}
    where = lambda t: [x[1] for x in t.values() if x[0] is not None]  # noqa: E731
    assert [str(p) for p in record(where, tree, None, {})] == ["['b'][1]"]
    _agree(where, tree, (0.0,))


# --- paths and globs -----------------------------------------------------------------------


def test_path_strings(mlp):
    new = jnp.zeros((4, 3))
    for where in (".layers[0].weight", "layers.0.weight", tt.Path.parse("layers[0].weight")):
        out = tt.tree_at(where, mlp, new)
        assert out.layers[0].weight is new
        assert out.layers[1] is mlp.layers[1]  # off the spine: shared, not copied
    assert tt.tree_at("layers[-1].bias", mlp, 0).layers[2].bias == 0
    out = tt.tree_at("layers[0].weight", mlp, replace_fn=lambda w: w * 0)
    assert out.layers[0].weight.shape == (4, 3) and not out.layers[0].weight.any()


def test_path_names_a_none_without_ambiguity():
    assert tt.tree_at("[1]", (None, None, 1), True) == (None, True, 1)
    assert tt.tree_at(["[0]", "[1]"], (None, None, 1), (7, 8)) == (7, 8, 1)


def test_globs_and_lists():
    tree = {"enc": {"w": 1.0, "b": 0.0}, "dec": {"w": 2.0, "b": 0.0, "inner": {"b": 5.0}}}
    assert tt.tree_at("**.b", tree, 9.0) == {
        "enc": {"w": 1.0, "b": 9.0},
        "dec": {"w": 2.0, "b": 9.0, "inner": {"b": 9.0}},
    }
    out = tt.tree_at(["enc.w", "dec.*"], tree, (10.0, 0))
    assert out == {"enc": {"w": 10.0, "b": 0.0}, "dec": {"w": 0, "b": 0, "inner": 0}}
    out = tt.tree_at(["enc.w", "dec.w"], tree, replace_fn=lambda x: -x)
    assert out["enc"]["w"] == -1.0 and out["dec"]["w"] == -2.0


def test_path_errors():
    tree = {"layers": [{"weight": 1}], "head": 2}
    with pytest.raises(tt.PathError, match=re.escape("Did you mean \"['layers'][0]['weight']\"")):
        tt.tree_at("layers[0].wieght", tree, 0)
    with pytest.raises(tt.SelectionError, match=re.escape("the glob '**.bias' matches nothing")):
        tt.tree_at("**.bias", tree, 0)
    with pytest.raises(tt.SelectionError, match=re.escape("`replace` must be a sequence of 2")):
        tt.tree_at(["head", "layers"], tree, 0)
    with pytest.raises(
        tt.SelectionError,
        match=re.escape(
            "overlapping edits: ['layers'][0] is inside ['layers'], which is edited as a whole"
        ),
    ):
        tt.tree_at(["layers", "layers[0]"], tree, (0, 0))
    with pytest.raises(tt.SelectionError, match="Precisely one of"):
        tt.tree_at("head", tree)
    with pytest.raises(TypeError, match="`where` must be a function, a path string"):
        tt.tree_at(3, tree, 0)


@pytest.mark.parametrize("name", sorted(corpus()))
def test_every_leaf_of_the_corpus_by_path(name):
    tree = corpus()[name]
    before = Snapshot(tree)
    leaves = tt.leaves_with_path(tree)
    for path, _ in leaves[:6] + leaves[-6:]:
        marker = object()
        out = tt.tree_at(str(path), tree, marker)
        assert tt.get(out, path) is marker
        assert jtu.tree_structure(out) == jtu.tree_structure(tree)
        ref = eqx.tree_at(lambda t, p=path: tt.get(t, p), tree, marker)
        assert _same(out, ref)
    assert before.matches(tree)


# --- work done: only the spine is rebuilt --------------------------------------------------


def test_one_replacement_in_a_big_tree_rebuilds_only_the_spine():
    leaf = np.zeros(2, np.float32)
    big = {"params": {f"layer_{i}": {"w": leaf, "b": leaf} for i in range(2000)}}
    layers = dict(big["params"])
    new = np.ones(2, np.float32)
    for where in ("params.layer_1234.w", lambda t: t["params"]["layer_1234"]["w"]):
        out = tt.tree_at(where, big, new)
        assert out["params"]["layer_1234"]["w"] is new
        assert out["params"]["layer_1234"]["b"] is leaf
        # the three containers on the spine are new; every other subtree is the same object
        assert out is not big and out["params"] is not big["params"]
        assert out["params"]["layer_1234"] is not layers["layer_1234"]
        kept = [k for k, v in out["params"].items() if v is layers[k]]
        assert len(kept) == 1999 and "layer_1234" not in kept
        # the input is untouched
        assert big["params"] == layers and big["params"]["layer_1234"]["w"] is leaf

"""Custom nodes: @pytree_node, static fields, register_node, re-registration."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool as tt

jtu = jax.tree_util


@tt.pytree_node
class Block:
    weight: jax.Array
    bias: jax.Array | None
    activation: str = tt.static(default="relu")


def test_pytree_node_paths_static_and_jit():
    b = Block(jnp.ones((2, 3)), jnp.zeros(3), activation="gelu")
    assert dataclasses.is_dataclass(b)
    assert [str(p) for p, _ in tt.leaves_with_path(b)] == [".weight", ".bias"]
    assert [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(b)[0]] == [".weight", ".bias"]
    leaves, treedef = tt.flatten(b)
    assert len(leaves) == 2
    rebuilt = tt.unflatten(treedef, [x * 2 for x in leaves])
    assert rebuilt.activation == "gelu" and float(rebuilt.weight[0, 0]) == 2.0
    assert jtu.tree_structure(b) != jtu.tree_structure(Block(b.weight, b.bias, "relu"))

    @jax.jit
    def f(block):
        return block.weight.sum() if block.activation == "gelu" else 0.0

    assert float(f(b)) == 6.0
    assert tt.get(b, "weight") is b.weight
    assert tt.view(b).type_name == "Block"


def test_register_node_for_a_class_you_do_not_own():
    class Pair:
        def __init__(self, a, b, tag):
            self.a, self.b, self.tag = a, b, tag

    tt.register_node(Pair, ["a", "b"], ["tag"])
    tt.register_node(Pair, ["a", "b"], ["tag"])  # a notebook cell run twice
    p = Pair(np.ones(2), [1.0], "x")
    assert [str(q) for q, _ in tt.leaves_with_path(p)] == [".a", ".b[0]"]
    doubled = jtu.tree_map(lambda x: x * 2, p)
    assert isinstance(doubled, Pair) and doubled.tag == "x" and doubled.b == [2.0]
    assert p.b == [1.0]  # input untouched
    info = next(i for i in tt.registered_nodes() if i.cls is Pair)
    assert (info.data_fields, info.static_fields) == (("a", "b"), ("tag",))
    with pytest.raises(
        tt.TreetoolError, match=re.escape("is already registered with data fields ['a', 'b']")
    ):
        tt.register_node(Pair, ["a"], ["b", "tag"])
    with pytest.raises(tt.TreetoolError, match=re.escape("cannot be both data and static fields")):
        tt.register_node(type("Other", (), {}), ["a"], ["a"])


def test_redefining_a_class_like_a_notebook_rerun():
    def define():
        @tt.pytree_node
        class Cell:
            x: float
            name: str = tt.static(default="c")

        return Cell

    first, second = define(), define()
    assert first is not second
    assert [str(p) for p, _ in tt.leaves_with_path(second(1.0))] == [".x"]
    names = [i.cls for i in tt.registered_nodes() if i.cls.__qualname__.endswith("Cell")]
    assert names == [second]  # the stale definition is replaced


def test_frozen_pytree_node():
    @tt.pytree_node(frozen=True)
    class Frozen:
        w: float

    f = Frozen(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.w = 2.0  # type: ignore[misc]
    assert jtu.tree_map(lambda x: x + 1, f).w == 2.0

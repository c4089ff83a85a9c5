"""tt.explain_mismatch and tt.explain(): every structural mismatch, in jax's error shape."""

from __future__ import annotations

import re
import textwrap

import equinox as eqx
import jax
import numpy as np
import pytest

import treetool as tt


@pytest.fixture(scope="module")
def three_ways_apart():
    """Two trees with 3 independent structural differences (and a shape change, which is not one)."""
    key = jax.random.key(0)
    a = {
        "head": eqx.nn.Linear(2, 3, key=key),
        "opt": (np.zeros(1), None),
        "params": {"b": np.zeros(2), "w": np.zeros((2, 2))},
    }
    b = {
        "head": eqx.nn.Linear(2, 4, key=key),
        "opt": [np.zeros(1), None],
        "params": {"w": np.zeros((3, 2))},
    }
    return a, b


EXPLANATION = textwrap.dedent(
    """\
    tree_map(f, a, b) fails: a and b differ in structure at 3 key paths.

    1. different static (aux) data at key path
         ['head']
       At that key path, a has Linear with out_features=3, but b has Linear with out_features=4.

    2. different node types at key path
         ['opt']
       At that key path, a has a tuple of 2 children, but b has a list of 2 children.

    3. b has nothing at key path
         ['params']['b']
       At that key path, a has a leaf f64[2], but b has no such key."""
)


def test_explain_mismatch_lists_every_structural_difference(three_ways_apart):
    a, b = three_ways_apart
    assert tt.explain_mismatch(a, b) == EXPLANATION


def test_explain_appends_the_explanation_to_jax_structure_errors(three_ways_apart):
    a, b = three_ways_apart
    with pytest.raises(tt.StructureMismatch, match=re.escape(EXPLANATION)) as info, tt.explain():
        jax.tree_util.tree_map(lambda x, y: x, a, b)
    # jax's own message comes first, and the original error is the cause
    assert str(info.value).startswith("pytree structure error")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.__cause__, ValueError)


def test_explain_works_for_jax_tree_map_and_as_a_decorator():
    @tt.explain()
    def add(x, y):
        return jax.tree.map(lambda u, v: u + v, x, y)

    assert add({"a": 1}, {"a": 2}) == {"a": 3}
    expected = textwrap.dedent(
        """\
        tree_map(f, a, b) fails: a and b differ in structure at 1 key path.

        1. a has nothing at key path
             [2]
           At that key path, a has no such element (its list has 2 elements), but b has a leaf int."""
    )
    with pytest.raises(tt.StructureMismatch, match=re.escape(expected)):
        add([1, 2], [1, 2, 3])


def test_explain_names_the_operands_when_tree_map_gets_several():
    expected = re.escape("tree_map(f, tree, rest[1]) fails")
    with pytest.raises(tt.StructureMismatch, match=expected), tt.explain():
        jax.tree_util.tree_map(lambda *xs: xs[0], {"a": 1}, {"a": 1}, {"b": 1})


def test_explain_lets_other_errors_through_unchanged():
    with pytest.raises(ZeroDivisionError), tt.explain():
        jax.tree_util.tree_map(lambda x: 1 / 0, [1])
    with pytest.raises(ValueError, match=r"^not a structure error$"), tt.explain():
        raise ValueError("not a structure error")


def test_a_leaf_of_a_facing_a_subtree_of_b_is_not_a_mismatch():
    a, b = {"x": 1.0, "y": None}, {"x": {"deep": [1, 2]}, "y": None}
    assert tt.explain_mismatch(a, b) == (
        "a and b have the same structure: tree_map(f, a, b) can map over them."
    )
    assert jax.tree_util.tree_map(lambda u, v: v, a, b) == b
    reverse = tt.explain_mismatch(b, a, names=("model", "ckpt"))
    assert reverse.splitlines()[0] == (
        "tree_map(f, model, ckpt) fails: model and ckpt differ in structure at 1 key path."
    )
    assert (
        "At that key path, model has a dict with keys ['deep'], but ckpt has a leaf float."
        in reverse
    )

"""jax as the oracle for two corners of "what is a node" (issue 38, point 6).

- A class registered with `jax.tree_util.register_static` is a node with no children for jax,
  never a leaf: not in the paths, not in the flat dict, not counted by the totals, and the
  flat-dict round trip gives it back from `like`. That holds for every kind of class, also
  subclasses of `str`/`int` (a string enum) and of `np.ndarray`, whose instances treetool
  would otherwise take for leaves.
- A dict whose keys cannot be sorted is an error in jax (`ValueError`); treetool's
  `NodeError` for it is a `ValueError` too, from every view that raises.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
from treetool._paths._path import from_jax_key
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._node_table import NodeKind, rule_for
from treetool._tree._totals import totals

tu = jax.tree_util


@tu.register_static
class Static:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return type(other) is Static and other.v == self.v

    def __hash__(self) -> int:
        return hash(self.v)


@tu.register_static
class Mode(enum.StrEnum):
    TRAIN = "train"
    EVAL = "eval"


@tu.register_static
class Width(int):
    pass


@tu.register_static
class Table(np.ndarray):
    """A numpy array subclass jax is told to treat as static (a lookup table)."""


@tu.register_static
@dataclasses.dataclass(frozen=True)
class Config:
    depth: int = 2
    name: str = "cfg"


def _table(n: int) -> Table:
    return np.arange(n, dtype=np.int32).view(Table)


_statics = st.one_of(
    st.builds(Static, st.integers(0, 3)),
    st.sampled_from([Mode.TRAIN, Mode.EVAL]),
    st.builds(Width, st.integers(0, 9)),
    st.builds(Config, st.integers(0, 3)),
    st.builds(_table, st.integers(1, 3)),
)
_leaves = st.one_of(
    st.integers(-3, 3),
    st.floats(-2, 2, allow_nan=False),
    st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 3)),
    st.builds(lambda v: jnp.full((2,), v), st.integers(0, 3)),
    st.just("text"),
)
_names = st.sampled_from(["a", "b", "cfg", "layer_0"])
_trees = st.recursive(
    st.one_of(_leaves, _statics, st.none()),
    lambda kids: st.one_of(
        st.dictionaries(_names, kids, max_size=3),
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
    ),
    max_leaves=10,
)


@settings(max_examples=80)
@given(_trees)
def test_register_static_classes_are_childless_nodes_in_every_view(tree: Any) -> None:
    expected = tu.tree_flatten_with_path(tree)[0]
    texts = [tu.keystr(p) for p, _ in expected]
    ids = [id(x) for _, x in expected]

    got = tt.leaves_with_path(tree)
    assert [str(p) for p, _ in got] == texts
    assert [p.to_jax() for p, _ in got] == [p for p, _ in expected]
    assert [list(p.keys) for p, _ in got] == [[from_jax_key(k) for k in p] for p, _ in expected]
    assert [id(x) for _, x in got] == ids
    leaves, treedef = tt.flatten(tree)
    assert [id(x) for x in leaves] == ids and treedef == tu.tree_structure(tree)
    flat = tt.to_flat_dict(tree)
    assert list(flat) == texts
    back = tt.from_flat_dict(flat, like=tree)
    assert tu.tree_structure(back) == tu.tree_structure(tree)
    assert [id(x) for x in tu.tree_leaves(back)] == ids

    assert [str(n.path) for n in tt.view(tree).walk() if n.is_leaf] == texts
    assert tt.view(tree).aggregates.leaves == len(expected) == totals(tree).leaves
    assert LeafIndex.build(tree).paths == texts


def test_a_static_string_enum_is_a_custom_node_not_a_leaf() -> None:
    tree = {"mode": Mode.TRAIN, "width": Width(4), "table": _table(3), "w": np.ones(2)}
    assert [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]] == ["['w']"]
    assert [str(p) for p, _ in tt.leaves_with_path(tree)] == ["['w']"]
    assert tt.to_flat_dict(tree).keys() == {"['w']"}
    node = tt.view(tree).child("mode")
    assert node.node_kind == "custom" and node.num_children == 0 and not node.is_leaf
    assert node.aggregates.leaves == 0 and node.aggregates.params == 0
    assert tt.get(tree, "['mode']") is Mode.TRAIN  # a path to the node itself still reads
    assert rule_for(Width(1)).kind is NodeKind.CUSTOM
    # the exact builtins and numpy arrays stay leaves (jax's own leaves)
    assert rule_for("x").kind is NodeKind.LEAF and rule_for(True).kind is NodeKind.LEAF
    assert rule_for(np.ones(1)).kind is NodeKind.LEAF
    assert [str(p) for p, _ in tt.leaves_with_path({"s": "x", "n": 3})] == ["['n']", "['s']"]
    # the round trip gives the static nodes back from `like`, with the new leaves
    back = tt.from_flat_dict({"['w']": np.zeros(2)}, like=tree)
    assert back["mode"] is Mode.TRAIN and back["width"] == 4 and type(back["width"]) is Width
    assert np.array_equal(back["w"], np.zeros(2))


@pytest.mark.parametrize(
    "tree", [{1: np.ones(1), "b": np.ones(2)}, {"x": [{2: 1.0, "b": 2.0}]}], ids=["root", "deep"]
)
def test_unsortable_keys_are_a_value_error_in_every_raising_view(tree: Any) -> None:
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten_with_path(tree)
    where = "" if 1 in tree else "['x'][0]"
    calls = [
        tt.leaves_with_path,
        tt.to_flat_dict,
        tt.flatten,
        lambda t: tt.from_flat_dict({}, like=t),
        lambda t: tt.get(t, f"{where}['b']"),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="the keys of this dict cannot be sorted") as e:
            call(tree)
        assert isinstance(e.value, tt.NodeError) and isinstance(e.value, tt.TreetoolError)
        assert e.value.path == where
    # an error of another kind in a node stays a plain NodeError (not a ValueError)
    other = tt.NodeError("['n']", "RuntimeError: flatten exploded")
    assert not isinstance(other, ValueError) and type(other) is tt.NodeError

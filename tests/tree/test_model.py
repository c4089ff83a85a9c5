"""The Node model: laziness on a 1e6-leaf tree, 10,000-level trees, leaf facts and keys."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from rich.console import Console

import treetool as tt
import treetool._tree._model as model
from treetool._leaves._arrays import leaf_info
from treetool._tree import _lookup
from treetool._tree._rich import TreeView


@pytest.fixture
def count_children(monkeypatch):
    """Count every one-level opening of a node (the only way the model touches a tree)."""
    calls = {"n": 0}
    real = model.children

    def counting(obj, is_leaf=None):
        calls["n"] += 1
        return real(obj, is_leaf)

    monkeypatch.setattr(model, "children", counting)
    return calls


@pytest.fixture(scope="module")
def million():
    return {f"layer{i:03d}": {f"w{j:03d}": float(j) for j in range(1000)} for i in range(1000)}


def _render(renderable) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_view_is_lazy_on_a_million_leaves(million, count_children):
    root = tt.view(million)
    assert count_children["n"] == 0
    text = _render(TreeView(root, depth=2, width=20, budget=0))
    shown = text.count("\n")
    assert "… 980 more" in text and "['layer000']" in text and "['w019']" in text
    # one opening per shown row (1 root + 20 + 20 * 20 rows), nothing below them
    assert count_children["n"] <= 1 + 20 + 20 * 20 + 20, count_children["n"]
    assert shown <= 1 + 20 * 21 + 21


def test_aggregates_stay_within_the_budget(million, count_children):
    text = _render(TreeView(tt.view(million), depth=2, width=20, budget=5_000))
    assert count_children["n"] <= 5_000 + 1_000 * 2 + 500
    assert "['layer000']  dict[1000]" in text


def test_node_api():
    tree = {"w": np.zeros((2, 3), np.float32), "b": None, "layers": [1.0, {"k": jnp.ones(2)}]}
    root = tt.view(tree)
    assert root.node_kind == "dict" and root.num_children == 3
    assert [str(c.path) for c in root.children] == ["['b']", "['layers']", "['w']"]
    b, layers, w = root.children
    assert b.node_kind == "none" and not b.is_leaf and b.num_children == 0
    assert w.is_leaf and w.info.label == "f32[2,3]" and w.info.nbytes == 24
    assert [str(n.path) for n in root.walk()] == [
        "",
        "['b']",
        "['layers']",
        "['layers'][0]",
        "['layers'][1]",
        "['layers'][1]['k']",
        "['w']",
    ]
    agg = root.aggregates
    assert (agg.leaves, agg.arrays, agg.params, agg.nbytes) == (3, 2, 8, 32)
    assert dict(agg.dtypes) == {"float32": 2}
    assert [str(n.path) for n in layers.child_range(1, 2)] == ["['layers'][1]"]


def test_leaf_facts_from_metadata():
    assert leaf_info(jnp.zeros((128, 784))).label == "f32[128,784]"
    assert leaf_info(jnp.zeros((2,), jnp.bfloat16)).dtype == "bfloat16"
    int4 = np.zeros((3, 5), dtype=ml_dtypes.int4)
    assert leaf_info(int4).nbytes == 8 and leaf_info(int4).params == 15  # 60 bits
    typed = jax.random.split(jax.random.key(0), 4)
    info = leaf_info(typed)
    assert (
        info.is_key
        and info.dtype == "key<fry>"
        and info.label == "key<fry>[4]"
        and info.params == 0
    )
    legacy = leaf_info(jax.random.PRNGKey(0))
    # a legacy raw key is a uint32 array: key detection comes from the type, not the shape
    assert not legacy.is_key and legacy.label == "u32[2]" and legacy.params == 2
    assert not leaf_info(np.zeros((3, 2), np.float32)).is_key
    assert leaf_info(jax.ShapeDtypeStruct((4, 4), jnp.float16)).label == "f16[4,4]"
    assert leaf_info("relu").kind == "object" and leaf_info(3).kind == "scalar"


DEPTH = 10_000


@pytest.fixture(scope="module")
def deep():
    tree: object = np.float32(1.0)
    for i in range(DEPTH):
        tree = [tree] if i % 2 else {"d": tree}
    return tree


def test_ten_thousand_levels(deep):
    with pytest.raises((RecursionError, SystemError)):  # jax's own flatten gives up
        jax.tree_util.tree_flatten_with_path(deep)
    [(path, leaf)] = tt.leaves_with_path(deep)
    assert len(path) == DEPTH and str(path).startswith("[0]['d'][0]['d']")
    assert tt.get(deep, str(path)) is leaf
    assert tt.get(deep, path) is leaf
    assert list(tt.to_flat_dict(deep)) == [str(path)]
    root = tt.view(deep)
    assert root.aggregates.leaves == 1 and sum(1 for _ in root.walk()) == DEPTH + 1
    assert _render(TreeView(root, depth=3)).count("\n") == 4
    s = tt.summary(deep, depth=2)
    assert s.total.params == 1 and [r.path for r in s.rows] == ["[0]['d']"]
    [(found, _)] = _lookup.find(deep, "**.d", leaves_only=True)
    assert found == path

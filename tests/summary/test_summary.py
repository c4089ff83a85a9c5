"""summary(): rows per depth, tied weights counted once, real sub-byte sizes, rendering."""

from __future__ import annotations

import io

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from rich.console import Console
from trees import corpus

import treetool as tt


class Tied(eqx.Module):
    embed: jax.Array
    unembed: jax.Array
    bias: jax.Array


def test_tied_weights_are_counted_once_and_reported():
    w = jnp.ones((8, 4))
    model = Tied(w, w, jnp.zeros(8))
    naive = sum(x.size for x in jax.tree_util.tree_leaves(model))
    s = tt.summary(model, depth=1)
    assert naive == 72
    assert s.total.params == 40 and s.total.nbytes == 160 and s.total.leaves == 3
    assert [(r.path, r.params) for r in s.rows] == [(".embed", 32), (".unembed", 32), (".bias", 8)]
    assert s.tied == [([".embed", ".unembed"], 32)]
    d = s.to_dict()
    assert d["totals"] == {
        "path": "total",
        "type": "Tied",
        "leaves": 3,
        "params": 40,
        "bytes": 160,
        "dtypes": {"float32": 2},
    }
    assert d["tied"] == [{"paths": [".embed", ".unembed"], "params": 32}]


def test_depths_and_sub_byte_dtypes():
    tree = {"q": {"w": np.zeros((4, 4), dtype=ml_dtypes.int4), "s": np.ones(4, np.float16)}, "n": 3}
    s1 = tt.summary(tree, depth=1)
    assert [(r.path, r.type, r.leaves, r.params, r.nbytes) for r in s1.rows] == [
        ("['n']", "int", 1, 0, 0),
        ("['q']", "dict", 2, 20, 16),
    ]
    s2 = tt.summary(tree, depth=2)
    assert [(r.path, r.nbytes) for r in s2.rows] == [
        ("['n']", 0),
        ("['q']['s']", 8),
        ("['q']['w']", 8),
    ]
    assert tt.summary(tree, depth=0).rows[0].params == 20
    with pytest.raises(ValueError, match="depth must be >= 0"):
        tt.summary(tree, depth=-1)


def test_summary_of_an_optax_state_renders_as_a_table():
    s = tt.summary(corpus()["adamw"], depth=2)
    assert [r.path for r in s.rows] == ["[0].count", "[0].mu", "[0].nu", "[1]", "[2]"]
    assert s.total.params == 1 + 2 * (3 * 4 + 4 + 4 * 4 + 4 + 4 * 2 + 2)
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(s)
    text = console.file.getvalue()
    assert text.splitlines()[0].split() == [
        "path",
        "type",
        "leaves",
        "params",
        "%",
        "bytes",
        "dtypes",
    ]
    assert "[0].mu" in text and "MLP" in text and "total" in text

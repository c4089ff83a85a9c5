"""equinox `tree_serialise_leaves` files, with and without a `like=` skeleton."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest

import treetool.io as tio
from treetool import LazyArray, LoadError


@pytest.fixture(scope="module")
def model():
    key = jax.random.key(0)
    return eqx.nn.Sequential([eqx.nn.Linear(3, 4, key=key), eqx.nn.Linear(4, 2, key=key)])


def test_records_without_like(tmp_path, model):
    f = tmp_path / "m.eqx"
    eqx.tree_serialise_leaves(f, model)
    r = tio.read(f)
    assert r.format == "equinox"
    assert [(x.shape, x.dtype.name) for x in r.tree] == [
        ((4, 3), "float32"),
        ((4,), "float32"),
        ((2, 4), "float32"),
        ((2,), "float32"),
    ]
    assert all(isinstance(x, LazyArray) for x in r.tree)


def test_like_fills_the_skeleton(tmp_path, model):
    f = tmp_path / "m.eqx"
    eqx.tree_serialise_leaves(f, model)
    skeleton = eqx.nn.Sequential(
        [eqx.nn.Linear(3, 4, key=jax.random.key(9)), eqx.nn.Linear(4, 2, key=jax.random.key(9))]
    )
    out = tio.load(f, like=skeleton)
    want = jax.tree_util.tree_flatten_with_path(model)[0]
    got = jax.tree_util.tree_flatten_with_path(out)[0]
    assert [jax.tree_util.keystr(p) for p, _ in got] == [jax.tree_util.keystr(p) for p, _ in want]
    assert all(np.array_equal(np.asarray(g), np.asarray(w)) for (_, g), (_, w) in zip(got, want))


def test_like_with_wrong_shape(tmp_path, model):
    f = tmp_path / "m.eqx"
    eqx.tree_serialise_leaves(f, model)
    other = eqx.nn.Sequential(
        [eqx.nn.Linear(3, 5, key=jax.random.key(0)), eqx.nn.Linear(5, 2, key=jax.random.key(0))]
    )
    with pytest.raises(
        LoadError,
        match=r"\.layers\[0\]\.weight: record 0 has shape \(4, 3\), the skeleton \(`like`\) expects \(5, 3\)",
    ):
        tio.load(f, like=other)


def test_like_with_wrong_dtype(tmp_path, model):
    """`like=` checks dtypes as well as shapes: f32 records do not fill a bf16 skeleton."""
    f = tmp_path / "m.eqx"
    eqx.tree_serialise_leaves(f, model)
    other = jax.tree_util.tree_map(
        lambda x: x.astype(jax.numpy.bfloat16) if eqx.is_array(x) else x, model
    )
    with pytest.raises(LoadError, match=r"record 0 has dtype float32, `like` leaf 0 has bfloat16"):
        tio.load(f, like=other)

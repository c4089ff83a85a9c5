"""Pickles of real jax, equinox, flax, optax and cloudpickle objects: jax's own key paths.

Each object is pickled with the real library, loaded safely (its classes are not imported from
the file, nothing is called) and compared with the live object leaf by leaf: keystr path,
shape and dtype.
"""

from __future__ import annotations

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool as tt
import treetool.io as tio
from treetool import LazyArray
from treetool.io import Opaque


def _facts(tree):
    return [
        (
            jax.tree_util.keystr(p),
            tuple(np.shape(x)),
            np.asarray(x).dtype.name if hasattr(x, "dtype") else type(x).__name__,
        )
        for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


def _roundtrip(tmp_path, obj, dump=pickle.dump):
    f = tmp_path / "obj.pkl"
    with open(f, "wb") as fh:
        dump(obj, fh)
    return tio.read(f)


@pytest.fixture(scope="module")
def models():
    import equinox as eqx
    import optax
    from flax import linen as nn
    from flax import nnx

    key = jax.random.key(0)
    seq = eqx.nn.Sequential([eqx.nn.Linear(3, 4, key=key), eqx.nn.Linear(4, 2, key=key)])
    params = nn.Dense(3).init(key, jnp.ones((1, 2)))
    adam = optax.adam(1e-3).init({"w": jnp.zeros(2), "b": jnp.ones((2, 3), jnp.bfloat16)})
    state = nnx.state(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    from flax.core import FrozenDict

    return {
        "equinox": seq,
        "flax_linen_params": params,
        "flax_frozendict": FrozenDict(params),
        "optax_adam": adam,
        "flax_nnx_state": state,
    }


@pytest.mark.parametrize(
    "name", ["equinox", "flax_linen_params", "flax_frozendict", "optax_adam", "flax_nnx_state"]
)
def test_same_paths_shapes_dtypes_as_live(tmp_path, models, name):
    live = models[name]
    r = _roundtrip(tmp_path, live)
    assert _facts(r.tree) == _facts(live)
    # treetool's own model agrees with jax on the loaded tree
    assert [str(p) for p, _ in tt.leaves_with_path(r.tree)] == [k for k, _, _ in _facts(live)]


def test_equinox_module_is_opaque_with_fields(tmp_path, models):
    r = _roundtrip(tmp_path, models["equinox"])
    assert r.blocked == ["equinox.nn._linear.Linear", "equinox.nn._sequential.Sequential"]
    lin = r.tree.layers[0]
    assert (
        isinstance(lin, Opaque)
        and lin.class_name == "Linear"
        and lin.class_path == "equinox.nn._linear.Linear"
    )
    assert lin.in_features == 3 and lin.weight.shape == (4, 3)
    assert tt.view(r.tree).type_name == "Sequential"


def test_opaque_survives_tree_map(tmp_path, models):
    r = _roundtrip(tmp_path, models["optax_adam"])
    doubled = jax.tree_util.tree_map(lambda x: np.asarray(x) * 2, r.tree)
    assert jax.tree_util.tree_structure(doubled) == jax.tree_util.tree_structure(r.tree)
    assert np.array_equal(doubled[0].nu["b"], np.ones((2, 3)) * 0)
    assert r.tree[0].count.dtype == np.int32


def test_jax_arrays_and_keys(tmp_path):
    import ml_dtypes

    tree = {
        "w": jnp.arange(6.0).reshape(2, 3),
        "bf": jnp.ones(4, jnp.bfloat16),
        "big": jnp.zeros((64, 64)),
        "key": jax.random.key(1),
        "legacy_key": jax.random.PRNGKey(2),
    }
    r = _roundtrip(tmp_path, tree)
    assert r.blocked == []
    t = r.tree
    assert (
        np.array_equal(t["w"], np.arange(6.0).reshape(2, 3)) and t["bf"].dtype == ml_dtypes.bfloat16
    )
    assert isinstance(t["big"], LazyArray) and t["big"].shape == (64, 64)
    # a typed key keeps its type (key<fry>[]) and its key data
    assert t["key"].shape == () and str(t["key"].dtype) == str(tree["key"].dtype) == "key<fry>"
    assert np.array_equal(t["key"].key_data(), jax.random.key_data(tree["key"]))
    assert tt.leaf_info(t["key"]).is_key and tt.leaf_info(t["key"]).params == 0
    assert not tt.leaf_info(t["legacy_key"]).is_key


def test_cloudpickle_dynamic_class(tmp_path):
    import cloudpickle
    import equinox as eqx

    class Local(eqx.Module):
        w: jax.Array
        n: int = eqx.field(static=True)

    r = _roundtrip(
        tmp_path, {"m": Local(jnp.ones(2), 3), "f": lambda x: x + 1}, dump=cloudpickle.dump
    )
    assert r.tree["m"].class_path == "<dynamic>.Local"
    assert [str(p) for p, _ in tt.leaves_with_path(r.tree["m"])] == [".w", ".n"]
    assert "cloudpickle.cloudpickle._make_function" in r.blocked


def test_trust_gives_live_objects(tmp_path, models):
    r = tio.read(_roundtrip(tmp_path, models["equinox"]) and tmp_path / "obj.pkl", trust=True)
    assert type(r.tree).__name__ == "Sequential" and r.blocked == []

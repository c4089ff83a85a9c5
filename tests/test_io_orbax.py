"""orbax checkpoint directories: tree, shapes, dtypes and shardings from metadata only."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool.io as tio
from treetool import LoadError
from treetool.io.orbax import OrbaxArray

orbax = pytest.importorskip("orbax.checkpoint")


@pytest.fixture(scope="module")
def tree():
    return {
        "params": {
            "dense": {"kernel": jnp.arange(6.0).reshape(2, 3), "bias": jnp.zeros(3, jnp.bfloat16)}
        },
        "lst": [jnp.ones(2, jnp.int32), None],
        "np": np.arange(4, dtype=np.int8),
    }


def _facts(t):
    return [
        (jax.tree_util.keystr(p), x.shape, np.dtype(x.dtype))
        for p, x in jax.tree_util.tree_flatten_with_path(t)[0]
    ]


@pytest.fixture(scope="module")
def standard(tmp_path_factory, tree):
    d = tmp_path_factory.mktemp("orbax") / "ck"
    ck = orbax.StandardCheckpointer()
    ck.save(d, tree)
    ck.wait_until_finished()
    return d


def test_standard_checkpoint(standard, tree):
    r = tio.read(standard)
    assert r.format == "orbax"
    assert _facts(r.tree) == _facts(tree)
    k = r.tree["params"]["dense"]["kernel"]
    assert isinstance(k, OrbaxArray) and k.sharding["sharding_type"] == "SingleDeviceSharding"
    assert np.array_equal(np.asarray(k), np.arange(6.0).reshape(2, 3))


def test_checkpoint_manager_latest_step(tmp_path, tree):
    mgr = orbax.CheckpointManager(tmp_path / "mgr")
    for step in (1, 7):
        mgr.save(
            step,
            args=orbax.args.StandardSave(jax.tree_util.tree_map(lambda x, s=step: x * s, tree)),
        )
    mgr.wait_until_finished()
    t = tio.load(tmp_path / "mgr")
    assert _facts(t) == _facts(tree)
    assert np.array_equal(np.asarray(t["np"]), np.arange(4, dtype=np.int8) * 7)


def test_sharded_checkpoint(tmp_path):
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    x = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh, P("x", "y")))
    ck = orbax.StandardCheckpointer()
    ck.save(tmp_path / "ck", {"x": x})
    ck.wait_until_finished()
    leaf = tio.load(tmp_path / "ck")["x"]
    assert (leaf.shape, leaf.dtype) == ((4, 8), np.dtype("float32"))
    assert leaf.sharding["sharding_type"] == "NamedSharding" and leaf.sharding[
        "partition_spec"
    ] == ["x", "y"]
    assert np.array_equal(np.asarray(leaf), np.arange(32.0).reshape(4, 8))


def test_plain_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(LoadError, match="not an orbax checkpoint"):
        tio.load(tmp_path / "d")

"""flax msgpack files, read without flax and without the array payloads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import treetool.io as tio
from treetool import LazyArray, LoadError


@pytest.fixture(scope="module")
def state():
    return {
        "params": {
            "dense": {"kernel": jnp.arange(6.0).reshape(2, 3), "bias": jnp.zeros(3, jnp.bfloat16)}
        },
        "step": 3,
        "scale": np.float32(0.5),
        "z": 1 + 2j,
        "name": "run",
        "empty": {},
    }


def test_flax_bytes(tmp_path, state):
    f = tmp_path / "ckpt.msgpack"
    f.write_bytes(serialization.to_bytes(state))
    r = tio.read(f)
    assert r.format == "msgpack"
    want = serialization.msgpack_restore(f.read_bytes())
    got = jax.tree_util.tree_flatten_with_path(r.tree)[0]
    assert [jax.tree_util.keystr(p) for p, _ in got] == [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(want)[0]
    ]
    kernel = r.tree["params"]["dense"]["kernel"]
    assert isinstance(kernel, LazyArray) and np.array_equal(
        kernel, want["params"]["dense"]["kernel"]
    )
    assert r.tree["params"]["dense"]["bias"].dtype == want["params"]["dense"]["bias"].dtype
    assert (r.tree["step"], r.tree["scale"], r.tree["z"], r.tree["name"]) == (
        3,
        np.float32(0.5),
        1 + 2j,
        "run",
    )


def test_chunked_array(tmp_path, monkeypatch):
    monkeypatch.setattr(serialization, "MAX_CHUNK_SIZE", 64)
    a = np.arange(100, dtype=np.float32)
    f = tmp_path / "c.msgpack"
    f.write_bytes(serialization.to_bytes({"a": a}))
    leaf = tio.load(f)["a"]
    assert isinstance(leaf, LazyArray) and leaf.shape == (100,)
    assert np.array_equal(np.asarray(leaf), a)


def test_truncated(tmp_path, state):
    f = tmp_path / "t.msgpack"
    f.write_bytes(serialization.to_bytes(state)[:-5])
    with pytest.raises(LoadError, match=r"t\.msgpack: truncated msgpack"):
        tio.load(f)


def test_deep_nesting(tmp_path):
    f = tmp_path / "d.msgpack"
    f.write_bytes(b"\x81\xa1a" + b"\x91" * 5000 + b"\xc0")
    with pytest.raises(LoadError, match="nested deeper than 1000 levels"):
        tio.load(f)


def test_an_array_as_a_map_key_is_one_line(tmp_path):
    """Found by the seeded fuzz run: a map whose key is an ext array made every view sort
    LazyArray keys (numpy's ambiguous truth value), a raw ValueError."""
    import base64

    data = base64.b64decode(
        "gaZwYXJhbXOCp0RlbnNlXzGCd6ZrZXJuZWzHJgGTkgIDp2Zsb2F0MzLEGGMyGjsV42c++ewIAj6TKRi/jRPpPl0r"
        "Hj+kYmlhc8cZAZORA6dmbG9hdDMyxAwAAAAAmZmapDJhbWWheFacsBcBk5EBqWNvbXBsZXg1NMQIAAAAAAAAAAAA"
        "AKdEZW5zZV8wgqZrZXJuZWzHJgGTkgMCp2Zsb2F0MzLEGIMjdL9EDN8+PqJLv1/c+74v4wc/sbg9PwAAAAAAAAB/"
        "k5ECp2Zsb2F0MzLECAAAAAAAAAAA"
    )
    p = tmp_path / "key.msgpack"
    p.write_bytes(data)
    with pytest.raises(LoadError) as e:
        tio.load(str(p))
    assert str(e.value) == (
        f"{p}: a msgpack map key is a LazyArray; keys must be strings, numbers, booleans or nil"
    )

"""Sharded checkpoints on local disk: one tree over the shards, exact errors for bad indexes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import treetool as tt
import treetool.io
from treetool._errors import LoadError


@pytest.fixture
def sharded(tmp_path: Any) -> tuple[Any, dict[str, np.ndarray]]:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    tensors = {
        "encoder.layers.0.weight": rng.standard_normal((8, 4)).astype(np.float32),
        "encoder.layers.0.bias": np.arange(8, dtype=np.float16),
        "decoder.weight": rng.standard_normal((4, 8)).astype(np.float32),
    }
    save_file({k: tensors[k] for k in list(tensors)[:2]}, str(tmp_path / "m-1.safetensors"))
    save_file({"decoder.weight": tensors["decoder.weight"]}, str(tmp_path / "m-2.safetensors"))
    weight_map = {
        "encoder.layers.0.weight": "m-1.safetensors",
        "encoder.layers.0.bias": "m-1.safetensors",
        "decoder.weight": "m-2.safetensors",
    }
    (tmp_path / "m.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}, indent=2)
    )
    return tmp_path, tensors


def test_sharded_safetensors_reads_as_one_tree(sharded: Any) -> None:
    root, tensors = sharded
    loaded = treetool.io.read(root / "m.safetensors.index.json")
    assert loaded.format == "sharded"
    tree = loaded.tree
    assert sorted(tree) == sorted(tensors)
    for name, arr in tensors.items():
        leaf = tree[name]
        assert (leaf.shape, leaf.dtype) == (arr.shape, arr.dtype)
        np.testing.assert_array_equal(np.asarray(leaf), arr)
    assert tree["decoder.weight"].file == str(root / "m-2.safetensors")
    assert tree["encoder.layers.0.bias"].where()["file"] == str(root / "m-1.safetensors")


def test_flax_msgpack_shards_nest_their_slash_keys(tmp_path: Any) -> None:
    from flax.serialization import to_bytes

    k = np.ones((3, 2), np.float32)
    b = np.zeros(2, np.float32)
    (tmp_path / "f-1.msgpack").write_bytes(to_bytes({"params/Dense_0/kernel": k}))
    (tmp_path / "f-2.msgpack").write_bytes(to_bytes({"params/Dense_0/bias": b}))
    index = {"params/Dense_0/kernel": "f-1.msgpack", "params/Dense_0/bias": "f-2.msgpack"}
    (tmp_path / "flax_model.msgpack.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": index})
    )
    tree = tt.load(tmp_path / "flax_model.msgpack.index.json")
    assert list(tree) == ["params"] and sorted(tree["params"]["Dense_0"]) == ["bias", "kernel"]
    np.testing.assert_array_equal(np.asarray(tree["params"]["Dense_0"]["kernel"]), k)
    assert tree["params"]["Dense_0"]["bias"].file == str(tmp_path / "f-2.msgpack")


def _index(root: Any, weight_map: dict[str, Any]) -> str:
    p = root / "x.safetensors.index.json"
    p.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return str(p)


def test_missing_shard_and_missing_tensor(sharded: Any) -> None:
    root, _ = sharded
    p = _index(root, {"w": "m-9.safetensors"})
    with pytest.raises(LoadError) as e:
        tt.load(p)
    assert str(e.value) == f"{p}: shard m-9.safetensors: no such file or directory"
    p = _index(root, {"nope": "m-1.safetensors"})
    with pytest.raises(LoadError) as e:
        tt.load(p)
    assert (
        str(e.value) == f"{p}: nope: the index puts it in m-1.safetensors, which has no such tensor"
    )


@pytest.mark.parametrize("shard", ["../m-1.safetensors", "/etc/passwd", "a\x1b[31m", None])
def test_index_may_only_name_files_next_to_it(sharded: Any, shard: Any) -> None:
    root, _ = sharded
    p = _index(root, {"w": shard})
    with pytest.raises(LoadError) as e:
        tt.load(p)
    assert str(e.value) == (
        f"{p}: weight_map['w']: expected a shard file name next to the index (a relative "
        f"path inside its folder), found {shard!r}"
    )


def test_detects_safetensors_whose_header_length_looks_like_a_pickle(tmp_path: Any) -> None:
    """A header of 0x0280 bytes starts with 80 02: the bytes of a protocol-2 pickle."""
    from safetensors.numpy import save_file

    p = tmp_path / "w.safetensors"
    pad = 0
    while True:  # grow a tensor name until the JSON header is exactly 0x280 bytes long
        save_file({"w" * (1 + pad): np.zeros(2, np.float32)}, str(p))
        n = int.from_bytes(p.read_bytes()[:8], "little")
        if n == 0x280:
            break
        assert n < 0x280
        pad += max(1, (0x280 - n) // 2) if n < 0x278 else 1
    assert p.read_bytes()[:2] == b"\x80\x02"
    assert treetool.io.detect(p) == "safetensors"
    assert tt.load(p)["w" * (1 + pad)].shape == (2,)

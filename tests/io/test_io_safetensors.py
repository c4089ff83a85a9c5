"""safetensors files: header only, every tensor a LazyArray into the file."""

from __future__ import annotations

import json
import re
import struct

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import treetool as tt
import treetool.io as tio
from treetool import LazyArray, LoadError


def test_written_by_safetensors(tmp_path):
    f = tmp_path / "model.safetensors"
    tensors = {
        "model.layers.0.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
        "model.layers.0.bias": np.zeros(3, np.float16),
        "emb": np.ones((2, 2), ml_dtypes.bfloat16),
    }
    save_file(tensors, str(f))
    r = tio.read(f)
    assert r.format == "safetensors"
    assert sorted(r.tree) == sorted(tensors)
    for k, a in tensors.items():
        leaf = r.tree[k]
        assert isinstance(leaf, LazyArray) and (leaf.shape, leaf.dtype) == (a.shape, a.dtype)
        assert np.array_equal(np.asarray(leaf), a)


def test_roundtrip_nested(tmp_path):
    f = tmp_path / "t.safetensors"
    tree = {"params": {"w": np.ones((2, 3), np.float32)}, "layers": [np.arange(3)]}
    tt.save(tree, f)
    out = tio.load(f)
    assert np.array_equal(out["layers"][0], np.arange(3)) and out["params"]["w"].shape == (2, 3)
    from safetensors.numpy import load_file

    assert sorted(load_file(str(f))) == ["layers.0", "params.w"]  # the names other tools use


def test_save_names_are_dotted_and_round_trip(tmp_path):
    f = tmp_path / "t.safetensors"
    tree = {
        "encoder": {"layer": [{"weight": np.ones((2, 2), np.float32)}]},
        "0": {"x": np.zeros(1, np.int8)},  # a string key "0", not a list index
        "step": np.int32(7),  # a 0-d array stays 0-d
    }
    tt.save(tree, f)
    from safetensors import safe_open

    with safe_open(str(f), "np") as fh:
        assert sorted(fh.keys()) == ["0.x", "encoder.layer.0.weight", "step"]
        assert fh.metadata()["format"] == "treetool"
    out = tio.load(f)
    assert not tt.diff(tree, out)
    assert type(out["0"]) is dict and type(out["encoder"]["layer"]) is list
    assert out["step"].shape == () and tio.read(f).metadata["format"] == "treetool"


def test_save_falls_back_to_key_paths_when_dotted_names_collide(tmp_path):
    f = tmp_path / "t.safetensors"
    tree = {"a.b": np.ones(1, np.float32), "a": {"b": np.zeros(1, np.float32)}}
    tt.save(tree, f)
    from safetensors.numpy import load_file

    assert sorted(load_file(str(f))) == ["['a']['b']", "['a.b']"]
    assert not tt.diff(tree, tio.load(f))


def test_hf_flat_names_get_glob_and_suggestions(tmp_path):
    from safetensors.numpy import save_file

    f = tmp_path / "model.safetensors"
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    save_file(
        {"encoder.layer.0.weight": w, "encoder.layer.0.bias": w[0], "encoder.layer.1.weight": w},
        str(f),
        metadata={"format": "pt"},
    )
    tree = tio.load(f)
    assert sorted(tree) == [
        "encoder.layer.0.bias",
        "encoder.layer.0.weight",
        "encoder.layer.1.weight",
    ]
    assert tt.get(tree, "encoder.layer.0.weight") is tree["encoder.layer.0.weight"]
    assert [str(p) for p, _ in tt.select(tree, "**.weight")] == [
        "['encoder.layer.0.weight']",
        "['encoder.layer.1.weight']",
    ]
    assert [str(p) for p, _ in tt.select(tree, "encoder.layer.*.bias")] == [
        "['encoder.layer.0.bias']"
    ]
    with pytest.raises(KeyError) as e:
        tt.get(tree, "encoder.layer.2.weight")
    assert "no flat key 'encoder.layer.2.weight'" in str(e.value)
    close = re.findall(r'"(\[[^"]*)"', str(e.value))
    assert close and all(
        c
        in {"['encoder.layer.0.weight']", "['encoder.layer.1.weight']", "['encoder.layer.0.bias']"}
        for c in close
    )
    assert tio.read(f).metadata == {"format": "pt"}


def _raw(tmp_path, header: dict, data: bytes = b"") -> str:
    text = json.dumps(header).encode()
    f = tmp_path / "h.safetensors"
    f.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return f


def test_header_offsets_checked(tmp_path):
    f = _raw(
        tmp_path,
        {"w": {"dtype": "F32", "shape": [1000000], "data_offsets": [0, 4000000]}},
        b"\0" * 16,
    )
    with pytest.raises(LoadError, match=r"tensor 'w': data ends at byte \d+, the file has \d+"):
        tio.load(f)
    f = _raw(tmp_path, {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8)
    with pytest.raises(LoadError, match=r"data_offsets \[0, 4\] do not match F32\[2\] \(8 bytes\)"):
        tio.load(f)


def test_header_length_claim(tmp_path):
    f = tmp_path / "x.safetensors"
    f.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(LoadError):
        tio.load(f, format="safetensors")

"""safetensors files: header only, every tensor a LazyArray into the file."""

from __future__ import annotations

import json
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

    assert sorted(load_file(str(f))) == ["['layers'][0]", "['params']['w']"]


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

"""`.npy` and `.npz` files: headers only, stored and compressed members, object arrays."""

from __future__ import annotations

import numpy as np
import pytest

import treetool as tt
import treetool.io as tio
from treetool import LazyArray, LoadError


def test_npy(tmp_path):
    f = tmp_path / "a.npy"
    np.save(f, np.arange(12, dtype=np.int16).reshape(3, 4))
    r = tio.read(f)
    assert r.format == "npy" and isinstance(r.tree, LazyArray)
    assert (r.tree.shape, r.tree.dtype) == ((3, 4), np.dtype("int16"))
    assert r.tree[2].tolist() == [8, 9, 10, 11]


def test_npy_fortran_order(tmp_path):
    a = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    f = tmp_path / "f.npy"
    np.save(f, a)
    assert np.array_equal(np.asarray(tio.load(f)), a)


@pytest.mark.parametrize("savez", [np.savez, np.savez_compressed])
def test_npz_members(tmp_path, savez):
    f = tmp_path / "p.npz"
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(3), "s": np.array(5)}
    savez(f, **arrays)
    tree = tio.load(f)
    assert sorted(tree) == ["b", "s", "w"]
    for k, a in arrays.items():
        assert (
            isinstance(tree[k], LazyArray) and tree[k].shape == a.shape and tree[k].dtype == a.dtype
        )
        assert np.array_equal(np.asarray(tree[k]), a)
    assert tt.stats(tree["w"]).max == 5.0


def test_npz_saved_by_treetool_is_nested(tmp_path):
    f = tmp_path / "t.npz"
    tt.save(
        {"params": {"dense": {"kernel": np.ones((2, 2))}}, "layers": [np.zeros(1), np.ones(1)]}, f
    )
    tree = tio.load(f)
    assert [str(p) for p, _ in tt.leaves_with_path(tree)] == [
        "['layers'][0]",
        "['layers'][1]",
        "['params']['dense']['kernel']",
    ]


def test_not_a_zip(tmp_path):
    f = tmp_path / "bad.npz"
    f.write_bytes(b"PK\x03\x04" + b"\0" * 20)
    with pytest.raises(LoadError, match=r"bad\.npz: not a valid npz \(zip\) file"):
        tio.load(f)


def test_truncated_npy(tmp_path):
    f = tmp_path / "t.npy"
    np.save(f, np.ones(100))
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(
        LoadError,
        match=r"truncated \.npy data: float64\[100\] needs 800 bytes at offset 128, 790 left",
    ):
        tio.load(f)


def test_npy_header_is_not_evaluated(tmp_path):
    f = tmp_path / "h.npy"
    header = b"{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': (1,)}\n"
    f.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 8)
    with pytest.raises(LoadError, match=r"h\.npy: malformed \.npy header"):
        tio.load(f)

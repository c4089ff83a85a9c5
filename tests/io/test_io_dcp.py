"""PyTorch Distributed Checkpoints written by real torch (`torch.distributed.checkpoint.save`)
in the test run, read by treetool without torch: names, shapes, dtypes and values equal
torch's; a tensor sharded over two gloo processes (DTensor, the FSDP2 layout) is assembled
from its chunks in two `.distcp` files."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.distributed.checkpoint as dcp

import treetool as tt
from treetool.io import detect, read
from treetool.io.dcp import DCPTensor


def _save(state: dict, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled ... single process"
        dcp.save(state, checkpoint_id=path, no_dist=True)


def _np(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> tuple[str, dict]:
    g = torch.Generator().manual_seed(0)
    state = {
        "model": {
            "embed.weight": torch.randn(5, 4, generator=g),
            "layers.0.w": torch.randn(3, 2, generator=g).to(torch.bfloat16),
            "layers.0.b": torch.arange(3, dtype=torch.float16),
        },
        "ids": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "mask": torch.tensor([True, False]),
        "step": 7,
        "extra": {"epoch": 3, "name": "run"},
    }
    path = str(tmp_path_factory.mktemp("dcp") / "ckpt")
    _save(state, path)
    return path, state


def test_detect_and_tree(ckpt):
    path, _ = ckpt
    assert sorted(os.listdir(path)) == [".metadata", "__0_0.distcp"]
    assert detect(path) == "dcp"
    loaded = read(path)
    assert loaded.format == "dcp"
    paths = sorted(str(p) for p, _ in tt.leaves_with_path(loaded.tree))
    assert paths == [
        "['extra']['epoch']",
        "['extra']['name']",
        "['ids']",
        "['mask']",
        "['model']['embed.weight']",
        "['model']['layers.0.b']",
        "['model']['layers.0.w']",
        "['step']",
    ]
    assert loaded.tree["step"] == 7
    assert loaded.tree["extra"] == {"epoch": 3, "name": "run"}
    assert loaded.facts == {
        "dcp": {
            "version": "1.0.0",
            "files": ["__0_0.distcp"],
            "tensors": 5,
            "chunks": 5,
            "items": 3,
        }
    }


def test_tensors_equal_torch(ckpt):
    path, state = ckpt
    tree = read(path).tree
    cases = {
        ("model", "embed.weight"): "float32",
        ("model", "layers.0.w"): "bfloat16",
        ("model", "layers.0.b"): "float16",
        ("ids",): "int64",
        ("mask",): "bool",
    }
    for keys, dtype in cases.items():
        leaf, want = tree, state
        for k in keys:
            leaf, want = leaf[k], want[k]
        assert type(leaf) is DCPTensor
        assert (leaf.shape, leaf.dtype_name) == (tuple(want.shape), dtype), keys
        got = np.asarray(leaf)
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got, _np(want))
    assert tt.leaf_info(tree["ids"]).params == 6


def test_lazy_false(ckpt):
    path, state = ckpt
    arrays = read(path, lazy=False).tree
    assert type(arrays["ids"]) is np.ndarray
    np.testing.assert_array_equal(arrays["ids"], state["ids"].numpy())


def _hostile(tmp_path, ckpt, edit) -> str:
    """A copy of the checkpoint whose `.metadata` was changed by `edit(Metadata)` (torch's
    own classes, pickled again by torch's own code)."""
    src, _ = ckpt
    dst = tmp_path / "bad"
    dst.mkdir()
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as fh:
            (dst / name).write_bytes(fh.read())
    with open(dst / ".metadata", "rb") as fh:
        meta = pickle.load(fh)
    edit(meta)
    with open(dst / ".metadata", "wb") as fh:
        pickle.dump(meta, fh)
    return str(dst)


def _storage(meta, fqn):
    return next(k for k in meta.storage_data if k.fqn == fqn)


def test_bytes_past_the_file_end(tmp_path, ckpt):
    def edit(meta):
        k = _storage(meta, "ids")
        meta.storage_data[k].length = 10**9

    path = _hostile(tmp_path, ckpt, edit)
    with pytest.raises(
        tt.LoadError, match=r"'ids': its bytes \d+-\d+ lie past the end of '__0_0.distcp'"
    ):
        read(path)


def test_storage_file_outside_the_directory(tmp_path, ckpt):
    def edit(meta):
        meta.storage_data[_storage(meta, "ids")].relative_path = "../../etc/passwd"

    path = _hostile(tmp_path, ckpt, edit)
    with pytest.raises(tt.LoadError, match="that is not a plain name"):
        read(path)


def test_chunks_with_a_gap(tmp_path, ckpt):
    def edit(meta):
        meta.state_dict_metadata["ids"].size = torch.Size([4, 3])

    path = _hostile(tmp_path, ckpt, edit)
    with pytest.raises(tt.LoadError, match=r"'ids': the chunks cover 6 of the 12 elements"):
        read(path)


def test_chunk_outside_the_shape(tmp_path, ckpt):
    def edit(meta):
        meta.state_dict_metadata["ids"].size = torch.Size([1, 3])

    path = _hostile(tmp_path, ckpt, edit)
    with pytest.raises(tt.LoadError, match=r"lies outside the shape \[1, 3\]"):
        read(path)


_TWO_RANKS = r"""
import os, sys, warnings
import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard

warnings.simplefilter("ignore")
rank, out, init = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
mesh = init_device_mesh("cpu", (2,))
w = torch.arange(24, dtype=torch.float32).reshape(6, 4)
b = torch.arange(5, dtype=torch.float32) * 0.5
state = {
    "w": distribute_tensor(w, mesh, [Shard(0)]),
    "w_t": distribute_tensor(w, mesh, [Shard(1)]),
    "b": distribute_tensor(b, mesh, [Shard(0)]),
    "step": 11,
}
dcp.save(state, checkpoint_id=out)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_gloo_ranks_dtensor_shards(tmp_path):
    out = str(tmp_path / "ckpt")
    script = tmp_path / "save.py"
    script.write_text(_TWO_RANKS)
    init = f"file://{tmp_path / 'rendezvous'}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), out, init],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(2)
    ]
    for p in procs:
        log = p.communicate(timeout=120)[0]
        assert p.returncode == 0, log.decode()[-2000:]
    assert sorted(os.listdir(out)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    loaded = read(out)
    tree = loaded.tree
    w = np.arange(24, dtype=np.float32).reshape(6, 4)
    for name in ("w", "w_t"):
        leaf = tree[name]
        assert type(leaf) is DCPTensor and leaf.shape == (6, 4) and leaf.dtype_name == "float32"
        assert sorted(c[2].rsplit("/", 1)[-1] for c in leaf.chunks) == [
            "__0_0.distcp",
            "__1_0.distcp",
        ]
        np.testing.assert_array_equal(np.asarray(leaf), w)
    assert sorted(c[:2] for c in tree["w"].chunks) == [((0, 0), (3, 4)), ((3, 0), (3, 4))]
    assert sorted(c[:2] for c in tree["w_t"].chunks) == [((0, 0), (6, 2)), ((0, 2), (6, 2))]
    # 5 rows over 2 ranks: 3 + 2
    assert sorted(c[:2] for c in tree["b"].chunks) == [((0,), (3,)), ((3,), (2,))]
    np.testing.assert_array_equal(np.asarray(tree["b"]), np.arange(5, dtype=np.float32) * 0.5)
    assert tree["step"] == 11
    assert loaded.facts["dcp"]["files"] == ["__0_0.distcp", "__1_0.distcp"]
    assert loaded.facts["dcp"]["chunks"] == 6


def test_overlapping_chunks(tmp_path, ckpt):
    def edit(meta):
        chunks = meta.state_dict_metadata["ids"].chunks
        chunks.append(chunks[0])

    path = _hostile(tmp_path, ckpt, edit)
    with pytest.raises(tt.LoadError, match=r"'ids': chunks at \[0, 0\] and \[0, 0\] overlap"):
        read(path)


def test_metadata_that_is_not_torch_metadata(tmp_path):
    (tmp_path / ".metadata").write_bytes(pickle.dumps({"a": 1}))
    assert detect(str(tmp_path)) == "dcp"
    with pytest.raises(tt.LoadError, match=r"\.metadata: expected a Metadata, found dict$"):
        read(str(tmp_path))
    (tmp_path / ".metadata").write_bytes(b"\x80\x04garbage")
    with pytest.raises(tt.LoadError, match=r"\.metadata: truncated pickle"):
        read(str(tmp_path))

"""Torch files over HTTP (the local ranged server of tests/remote): a zip is listed from its
directory and data.pkl in at most 3 requests, a sharded `.bin` set in 3 plus one per shard, and
values are read on demand, equal to what torch loads."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any

import numpy as np
import pytest
import torch

import treetool.io as tio

pytestmark = pytest.mark.slow


def _servers() -> Any:
    path = os.path.join(os.path.dirname(__file__), "..", "remote", "storage_servers.py")
    if "storage_servers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("storage_servers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["storage_servers"] = module
        spec.loader.exec_module(module)
    return sys.modules["storage_servers"]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("torch_http")
    g = torch.Generator().manual_seed(1)
    big = {f"layers.{i}.weight": torch.randn(64, 512, generator=g) for i in range(16)}
    big["head.weight"] = big["layers.0.weight"]
    big["col"] = big["layers.1.weight"][:, 3]
    torch.save(big, root / "model.pt")
    torch.save({"w": torch.arange(10.0)}, root / "legacy.pt", _use_new_zipfile_serialization=False)
    shards = root / "set"
    shards.mkdir()
    weight_map = {}
    for i in range(3):
        name = f"pytorch_model-{i + 1:05d}-of-00003.bin"
        torch.save({f"block.{i}.w": torch.full((8, 8), float(i))}, shards / name)
        weight_map[f"block.{i}.w"] = name
    (shards / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    server = _servers().HttpServer(str(root))
    server.root_dir = str(root)
    yield server
    server.stop()


def test_zip_listed_in_at_most_three_requests(http: Any) -> None:
    http.log.clear()
    r = tio.read(f"{http.url}/model.pt")
    assert http.log.count <= 3, [(q.method, q.range) for q in http.log.requests]
    assert len(r.tree) == 18 and r.facts["torch"]["format"] == "zip"
    size = os.path.getsize(os.path.join(http.root_dir, "model.pt"))
    assert sum(q.sent for q in http.log.requests) < size // 10


def test_values_on_demand_equal_torch(http: Any) -> None:
    tree = tio.load(f"{http.url}/model.pt")
    ref = torch.load(os.path.join(http.root_dir, "model.pt"))
    http.log.clear()
    w = tree["layers.5.weight"]
    np.testing.assert_array_equal(np.asarray(w), ref["layers.5.weight"].numpy())
    # its local header, then exactly its bytes
    assert http.log.count == 2 and http.log.requests[-1].sent == w.nbytes
    np.testing.assert_array_equal(np.asarray(tree["col"]), ref["col"].numpy())
    assert tree["head.weight"] is tree["layers.0.weight"]


def test_legacy_over_http(http: Any) -> None:
    tree = tio.load(f"{http.url}/legacy.pt")
    assert np.asarray(tree["w"]).tolist() == list(range(10))


def test_sharded_set_three_plus_one_per_shard(http: Any) -> None:
    http.log.clear()
    tree = tio.load(f"{http.url}/set/pytorch_model.bin.index.json")
    assert http.log.count <= 3 + 3, [(q.method, q.range) for q in http.log.requests]
    assert sorted(tree) == ["block.0.w", "block.1.w", "block.2.w"]
    assert np.asarray(tree["block.2.w"]).tolist() == [[2.0] * 8] * 8

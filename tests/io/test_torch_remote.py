"""Torch files over HTTP (the local ranged server of tests/remote): a zip is listed from its
directory and data.pkl in at most 3 requests, a sharded `.bin` set in one request per shard (its
first block holds data.pkl; its directory is read, and checked, when a value is first read), and
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
    for i in range(4):  # 256 KiB each: data.pkl in the first 64 KiB, the directory at the end
        name = f"pytorch_model-{i + 1:05d}-of-00004.bin"
        torch.save({f"block.{i}.w": torch.full((256, 256), float(i))}, shards / name)
        weight_map[f"block.{i}.w"] = name
    (shards / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    _write_odd_shards(root / "odd")
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


def test_sharded_set_one_request_per_shard(http: Any) -> None:
    http.log.clear()
    tree = tio.load(f"{http.url}/set/pytorch_model.bin.index.json")
    got = [(q.path, q.range) for q in http.log.requests]
    assert http.log.count <= 3 + 4, got
    shards = sorted(q.path for q in http.log.requests if q.path.endswith(".bin"))
    assert shards == [f"/set/pytorch_model-{i:05d}-of-00004.bin" for i in range(1, 5)], got
    assert all(r == "bytes=0-65535" for _, r in got), got
    assert sorted(tree) == [f"block.{i}.w" for i in range(4)]
    assert tree["block.2.w"].shape == (256, 256) and str(tree["block.2.w"].dtype) == "float32"
    # the first value of a shard: its zip directory (the tail), then exactly its bytes (its
    # local header lies in the first block, read already); a second value: its bytes only
    http.log.clear()
    assert (np.asarray(tree["block.2.w"]) == 2.0).all()
    size = os.path.getsize(os.path.join(http.root_dir, "set", "pytorch_model-00003-of-00004.bin"))
    first = [(q.path, q.range) for q in http.log.requests]
    assert first[0] == ("/set/pytorch_model-00003-of-00004.bin", f"bytes={size - 65536}-{size - 1}")
    assert len(first) == 2 and http.log.requests[1].sent == 256 * 256 * 4, first
    http.log.clear()
    assert (np.asarray(tree["block.2.w"]) == 2.0).all()
    assert http.log.count == 1 and http.log.requests[0].sent == 256 * 256 * 4


def _write_odd_shards(folder: Any) -> None:
    """Two shards torch wrote, each rewritten: `a` repacked with deflated records (listed
    through its directory), `b` whose directory lost its storage record (refused at the
    first value read, the directory being read then)."""
    import zipfile

    folder.mkdir()
    for name, value in (("a.bin", 1.0), ("b.bin", 2.0)):
        torch.save({name[0]: torch.full((256, 256), value)}, folder / "orig")
        with zipfile.ZipFile(folder / "orig") as zin:
            comp = zipfile.ZIP_DEFLATED if name == "a.bin" else zipfile.ZIP_STORED
            with zipfile.ZipFile(folder / name, "w", comp) as zout:
                for info in zin.infolist():
                    if name == "b.bin" and info.filename.endswith("/data/0"):
                        info.filename = info.filename.replace("/data/0", "/data/9")
                    zout.writestr(info.filename, zin.read(info), compress_type=comp)
        os.remove(folder / "orig")
    weight_map = {"a": "a.bin", "b": "b.bin"}
    (folder / "model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))


def test_sharded_odd_shards(http: Any) -> None:
    tree = tio.load(f"{http.url}/odd/model.bin.index.json")
    assert sorted(tree) == ["a", "b"]
    assert (np.asarray(tree["a"]) == 1.0).all()
    with pytest.raises(tio.LoadError) as e:
        np.asarray(tree["b"])
    assert str(e.value) == (
        f"{http.url}/odd/b.bin[orig/data.pkl]: storage key '0' is not in the archive "
        "(no orig/data/0)"
    )


@pytest.fixture(scope="module")
def buckets(http: Any) -> Any:
    """The same files in a moto S3 bucket and a GCS emulator bucket (skipped without them)."""
    for mod in ("moto.server", "boto3", "obstore", "gcp_storage_emulator", "gcsfs"):
        pytest.importorskip(mod)
    servers = _servers()
    s3, gcs = servers.S3Server(), servers.GcsServer()
    client = s3.client()
    client.create_bucket(Bucket=servers.BUCKET)
    gcs.create_bucket(servers.BUCKET)
    root = http.root_dir
    names = ["model.pt", "legacy.pt", *(f"set/{n}" for n in os.listdir(os.path.join(root, "set")))]
    for name in names:
        client.upload_file(os.path.join(root, name), servers.BUCKET, name)
        with open(os.path.join(root, name), "rb") as fh:
            gcs.upload(servers.BUCKET, name, fh.read())
    yield s3, gcs, servers.BUCKET
    s3.stop()
    gcs.stop()


def _assert_requests(server: Any, scheme: str, *, ranged: int, objects: int) -> None:
    """At most `ranged` requests in all on S3; on GCS at most `ranged` reads of bytes, plus
    what gcsfs's `info` asks of each object (its metadata and a listing of its name as a
    folder, sometimes asked again when the two run at once on a busy machine)."""
    got = [f"{q.path} {q.range}" for q in server.log.requests]
    if scheme != "gs":
        assert len(got) <= ranged, got
        return
    reads = [q for q in server.log.requests if q.range is not None]
    assert len(reads) <= ranged, got
    assert len(got) - len(reads) <= 3 * objects, got


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_zip_and_sharded_set_from_buckets(
    buckets: Any, http: Any, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from treetool.io._sources import _remote as _remote

    s3, gcs, bucket = buckets
    if scheme == "s3":
        server = s3
        for k, v in {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                     "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                     "AWS_EC2_METADATA_DISABLED": "true"}.items():  # fmt: skip
            monkeypatch.setenv(k, v)
    else:
        server = gcs
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.host)
    _remote._fs_cache.clear()
    try:
        server.log.clear()
        r = tio.read(f"{scheme}://{bucket}/model.pt")
        _assert_requests(server, scheme, ranged=3, objects=1)
        ref = torch.load(os.path.join(http.root_dir, "model.pt"))
        assert sorted(r.tree) == sorted(ref) and r.facts["torch"]["format"] == "zip"
        np.testing.assert_array_equal(np.asarray(r.tree["col"]), ref["col"].numpy())
        server.log.clear()
        tree = tio.load(f"{scheme}://{bucket}/set/pytorch_model.bin.index.json")
        _assert_requests(server, scheme, ranged=3 + 4, objects=5)
        assert sorted(tree) == [f"block.{i}.w" for i in range(4)]
        assert (np.asarray(tree["block.3.w"]) == 3.0).all()
        assert np.asarray(tio.load(f"{scheme}://{bucket}/legacy.pt")["w"]).tolist() == list(
            range(10)
        )
    finally:
        _remote._fs_cache.clear()

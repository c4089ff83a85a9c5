"""Remote checkpoints (S3, GCS, HTTP) read as the same trees as the local files, lazily."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from storage_servers import BUCKET

import treetool as tt
from conftest import period_two_stops
from treetool._leaves._arrays import LazyArray
from treetool._source import source_for

FORMATS = [
    "model.safetensors",
    "model.safetensors.index.json",
    "flax_model.msgpack.index.json",
    "arrays.npz",
    "small.npz",
    "ckpt.pkl",
]


@pytest.fixture(params=["s3", "gs", "http"])
def store(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """(base URL of the uploaded folder, its server) for each kind of remote storage."""
    kind = request.param
    if kind == "s3":
        server = request.getfixturevalue("s3")
        return f"s3://{BUCKET}/run", server
    if kind == "gs":
        server = request.getfixturevalue("gcs")
        return f"gs://{BUCKET}/run", server
    server = request.getfixturevalue("http")
    return server.url, server


def _facts(tree: Any) -> list[tuple[str, tuple, str]]:
    out = []
    for path, leaf in tt.leaves_with_path(tree):
        arr = leaf if hasattr(leaf, "shape") else np.asarray(leaf)
        out.append((str(path), tuple(arr.shape), str(arr.dtype)))
    return out


@pytest.mark.parametrize("name", FORMATS)
def test_remote_tree_matches_local(store: tuple[str, Any], files: dict, name: str) -> None:
    base, _server = store
    local = tt.load(os.path.join(files["root"], name))
    remote = tt.load(f"{base}/{name}")
    assert _facts(remote) == _facts(local)
    assert _facts(remote)  # not an empty tree
    lazy = [leaf for _, leaf in tt.leaves_with_path(remote) if isinstance(leaf, LazyArray)]
    assert lazy, "payloads stay remote"
    assert all(leaf.file.startswith(base) for leaf in lazy)
    # values and stats of every leaf agree with the local read
    for (_, a), (_, b) in zip(tt.leaves_with_path(local), tt.leaves_with_path(remote)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    big_local = max(
        (x for _, x in tt.leaves_with_path(local) if hasattr(x, "size")), key=lambda x: x.size
    )
    big_remote = max(lazy, key=lambda x: x.size)
    s_local, s_remote = tt.stats(big_local), tt.stats(big_remote)
    assert (s_remote.min, s_remote.max, s_remote.mean) == (s_local.min, s_local.max, s_local.mean)
    assert not tt.diff(local, remote)


def test_sharded_safetensors_is_one_tree_pointing_into_shards(s3: Any, files: dict) -> None:
    url = f"s3://{BUCKET}/run/model.safetensors.index.json"
    tree = tt.load(url)
    single = tt.load(os.path.join(files["root"], "model.safetensors"))
    assert _facts(tree) == _facts(single)  # the same tree as one file with every tensor
    with open(os.path.join(files["root"], "model.safetensors.index.json")) as fh:
        weight_map = json.load(fh)["weight_map"]
    leaf = tree["model.layers.1.attn.weight"]
    assert leaf.file == f"s3://{BUCKET}/run/{weight_map['model.layers.1.attn.weight']}"
    assert leaf.where()["file"].endswith("model-00002-of-00003.safetensors")
    assert tree["lm_head.weight"].file.endswith("model-00003-of-00003.safetensors")
    # inspecting: one ranged GET of the index (it says the size too: no HEAD), then one
    # ranged GET of each shard's first block, in parallel: no stat, no listing, no shard twice
    reqs = [(r.method, r.path.rsplit("/", 1)[-1], r.range) for r in s3.log.requests]
    shards = sorted(set(weight_map.values()))
    assert sorted(reqs) == sorted(
        [("GET", "model.safetensors.index.json", "bytes=0-65535")]
        + [("GET", s, "bytes=0-65535") for s in shards]
    )
    assert len(reqs) <= 2 * len(shards) + 1
    # a leaf's values come from its shard's bytes already read (these shards fit one block)
    s3.log.clear()
    np.testing.assert_array_equal(
        np.asarray(tree["lm_head.weight"]), files["tensors"]["lm_head.weight"]
    )
    assert s3.log.count == 0


def test_flax_msgpack_index_nests_slash_keys(gcs: Any, files: dict) -> None:
    tree = tt.load(f"gs://{BUCKET}/run/flax_model.msgpack.index.json")
    assert sorted(tree["params"]) == ["Dense_0", "Dense_1"]
    k = tree["params"]["Dense_1"]["kernel"]
    assert k.shape == (16, 64) and k.dtype == np.float32
    assert k.file == f"gs://{BUCKET}/run/flax_model-00002-of-00002.msgpack"
    np.testing.assert_array_equal(np.asarray(k), files["flax"]["params/Dense_1/kernel"])


def test_one_leaf_reads_only_its_range(http: Any, files: dict) -> None:
    tree = tt.load(f"{http.url}/big.pkl")
    inspect = list(http.log.requests)
    size = os.path.getsize(os.path.join(files["root"], "big.pkl"))
    assert sum(r.sent for r in inspect) < size / 2  # the walk skipped the payloads
    http.log.clear()
    c = tree["c"]
    np.testing.assert_array_equal(np.asarray(c), files["big"]["c"])
    # one ranged GET of exactly its bytes: no stat (the size is known), no read-ahead
    assert [(r.method, r.range, r.sent) for r in http.log.requests] == [
        ("GET", f"bytes={c.offset}-{c.offset + c.nbytes - 1}", c.nbytes)
    ]


def test_equinox_with_like(s3: Any, files: dict) -> None:
    model = files["mlp"]
    remote = tt.load(f"s3://{BUCKET}/run/mlp.eqx", like=model)
    local = tt.load(os.path.join(files["root"], "mlp.eqx"), like=model)
    assert not tt.diff(local, remote)
    assert _facts(remote) == _facts(model)


def test_value_diff_of_two_remote_pickles(s3: Any) -> None:
    d = tt.diff(tt.load(f"s3://{BUCKET}/run/ckpt.pkl"), tt.load(f"s3://{BUCKET}/run/ckpt2.pkl"))
    assert [(c.path, c.kind) for c in d.changes] == [("['params']['b']", "value")]


def test_repeating_jumps_are_read_ahead_in_parallel(
    http: Any, files: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk that jumps by a repeating pattern (payloads of layers of one shape) finds its
    next blocks already read: the pattern is recognised after two periods, and no more
    than 8 blocks past the last jump are read for nothing."""
    from treetool.io._sources import _blocks

    monkeypatch.setattr(_blocks, "_SLOW_REQUEST", 0.0)  # as on a network: always read ahead
    src = source_for(f"{http.url}/big.pkl")
    size = src.size
    stops = period_two_stops(size)
    reader = _blocks.BlockReader(src)
    http.log.clear()
    got = [reader[p : p + 4] for p in stops]
    reader.close()
    with open(os.path.join(files["root"], "big.pkl"), "rb") as fh:
        raw = fh.read()
    assert got == [raw[p : p + 4] for p in stops]
    assert reader.guessed == len(stops) - 5  # jumps 1-4 show the period; the rest were guessed
    assert len(stops) <= http.log.count <= len(stops) + 8


def test_benchmark_s3_server_fast_ranges_answer_as_moto_does(files: dict) -> None:
    """The benchmark's S3 server answers ranged GETs by a seek: same bytes and headers as
    moto's own answer, for boto3 and for treetool."""
    from storage_servers import S3Server

    fast, plain = S3Server(fast_ranges=True), S3Server()
    try:
        answers = []
        for server in (fast, plain):
            client = server.client()
            client.create_bucket(Bucket=BUCKET)
            client.upload_file(os.path.join(files["root"], "big.pkl"), BUCKET, "big.pkl")
            for spec in ("bytes=100-199999", "bytes=199000-"):  # boto3 asks for both kinds
                got = client.get_object(Bucket=BUCKET, Key="big.pkl", Range=spec)
                head = {k: got[k] for k in ("ContentLength", "ContentRange", "ETag")}
                answers.append((got["Body"].read(), head))
            assert server.log.requests[-2].sent == 199_900
        assert answers[:2] == answers[2:]
        with open(os.path.join(files["root"], "big.pkl"), "rb") as fh:
            raw = fh.read()
        assert [a[0] for a in answers[:2]] == [raw[100:200_000], raw[199_000:]]
    finally:
        fast.stop()
        plain.stop()

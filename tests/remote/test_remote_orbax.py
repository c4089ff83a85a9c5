"""orbax CheckpointManager runs in object storage read as one lazy tree, like the local run.

Both runs are written by orbax's CheckpointManager itself straight to the bucket: the GCS
emulator's, and moto's S3 server's (with orbax's missing `s3://` branch applied for the save,
see `s3_orbax` in conftest and `_orbax_s3.py`). Arrays are read by tensorstore's own `s3` /
`gcs` kvstores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from storage_servers import BUCKET

import treetool as tt
from conftest import orbax_tree
from treetool.io.orbax import OrbaxArray


@pytest.fixture(params=["s3", "gs"])
def run(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """(URL of the orbax run, its server) with the standard environment set."""
    if request.param == "s3":
        url = request.getfixturevalue("s3_orbax")
        return url, request.getfixturevalue("s3")
    url = request.getfixturevalue("gs_orbax")
    return url, request.getfixturevalue("gcs")


def _facts(tree: Any) -> list[tuple[str, tuple, str]]:
    return [(str(p), tuple(leaf.shape), str(leaf.dtype)) for p, leaf in tt.leaves_with_path(tree)]


def test_remote_run_lists_its_steps_and_reads_the_latest(
    run: tuple[str, Any], orbax_local: str
) -> None:
    url, server = run
    loaded = tt.io.read(url)
    local = tt.io.read(orbax_local)
    assert (loaded.step, loaded.steps) == (2, [1, 2])
    assert _facts(loaded.tree) == _facts(local.tree)
    assert [f[0] for f in _facts(loaded.tree)] == [
        "['params']['b']",
        "['params']['layers'][0]",
        "['params']['layers'][1]",
        "['params']['w']",
        "['step']",
    ]
    leaves = [leaf for _, leaf in tt.leaves_with_path(loaded.tree)]
    assert all(isinstance(leaf, OrbaxArray) for leaf in leaves), "arrays stay remote"
    assert all(leaf.file.startswith(f"{url}/2/default/") for leaf in leaves)
    # reading the structure read metadata only: no data file of the OCDBT database

    data = [r for r in server.log.requests if "process_0" in r.path.replace("%2F", "/")]
    assert data == []


def test_remote_step_values_and_stats_match_local(run: tuple[str, Any], orbax_local: str) -> None:
    url, _server = run
    loaded = tt.io.read(f"{url}@1")
    local = tt.io.read(f"{orbax_local}@1")
    assert loaded.step == 1
    want = orbax_tree(1)
    w = loaded.tree["params"]["w"]
    np.testing.assert_array_equal(np.asarray(w), np.asarray(want["params"]["w"]))
    np.testing.assert_array_equal(w[1:3], np.asarray(want["params"]["w"])[1:3])
    np.testing.assert_array_equal(
        np.asarray(loaded.tree["params"]["layers"][0]), np.full((3,), 7, np.int32)
    )
    assert np.asarray(loaded.tree["params"]["b"]).dtype.name == "bfloat16"
    assert int(np.asarray(loaded.tree["step"])) == 1
    assert tt.stats(loaded.tree["params"]["w"]) == tt.stats(local.tree["params"]["w"])


def test_remote_value_diff_of_two_steps(run: tuple[str, Any], orbax_local: str) -> None:
    url, _server = run
    changes = tt.diff(tt.load(f"{url}@1"), tt.load(f"{url}@2"))
    local = tt.diff(tt.load(f"{orbax_local}@1"), tt.load(f"{orbax_local}@2"))
    assert [str(c.path) for c in changes] == ["['params']['w']", "['step']"]
    assert [(str(c.path), c.kind) for c in changes] == [(str(c.path), c.kind) for c in local]


def test_missing_step_and_non_orbax_prefix_are_one_line(run: tuple[str, Any]) -> None:
    url, _server = run
    with pytest.raises(tt.LoadError, match=r"no step 7; its steps: 1, 2$"):
        tt.io.read(f"{url}@7")
    bucket = url.rsplit("/", 1)[0]
    with pytest.raises(tt.LoadError, match="not an orbax checkpoint"):
        tt.io.read(f"{bucket}/run")


def test_an_oversized_remote_metadata_file_is_refused_unread(
    s3: Any, s3_orbax: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from treetool.io._orbax import _fs as _orbax_fs

    monkeypatch.setattr(_orbax_fs, "MAX_REMOTE_FILE", 1000)  # _METADATA here: ~1.2 KB
    with pytest.raises(tt.LoadError, match=r"_METADATA: a metadata file of \d+ bytes, more than"):
        tt.io.read(f"{s3_orbax}@1")
    assert not [r for r in s3.log.requests if r.path.endswith("_METADATA")]


def test_array_read_from_a_server_that_never_answers_is_bounded(
    s3: Any, s3_orbax: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tensorstore's own reads of a remote orbax array wait at most TREETOOL_REMOTE_TIMEOUT
    x TREETOOL_REMOTE_RETRIES seconds, then fail in one line."""
    from storage_servers import SilentServer

    leaf = tt.io.read(f"{s3_orbax}@1").tree["params"]["w"]
    silent = SilentServer()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", silent.url)  # the arrays' server stops answering
        monkeypatch.setenv("TREETOOL_REMOTE_TIMEOUT", "0.3")
        monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "2")
        with pytest.raises(tt.LoadError) as info:
            np.asarray(leaf)
    finally:
        silent.stop()
    assert str(info.value) == (
        f"{s3_orbax}/1/default/params.w: no answer within 0.6 s "
        "(TREETOOL_REMOTE_TIMEOUT per try, TREETOOL_REMOTE_RETRIES tries)"
    )
    assert silent.accepted >= 1


def test_inspecting_an_s3_checkpoint_reads_what_the_tree_needs(s3: Any, s3_orbax: str) -> None:
    """`io.read` of one step: a GET of the URL (is it an object? 404) and, beside it, one
    flat listing of the prefix (files, sizes, steps), `_METADATA` (the tree), `_sharding`,
    the OCDBT manifest and B+tree node(s) (the arrays' shapes and dtypes: `_METADATA` has
    none); no array byte, no `array_metadatas`, no listing of a data file's name."""
    loaded = tt.io.read(f"{s3_orbax}@2")
    assert loaded.step == 2
    step = f"/{BUCKET}/orbax_run/2/default"
    reqs = [(r.method, r.path, r.range is not None) for r in s3.log.requests]
    # the probe and the listing are asked for together: either may arrive first
    assert sorted(reqs[:2]) == [("GET", f"/{BUCKET}", False), ("GET", f"/{BUCKET}/orbax_run", True)]
    assert [r for r in reqs[2:] if r[1] == f"/{BUCKET}"] == []  # the one listing
    rest = sorted(p for _, p, _ in reqs[2:])
    nodes = [p for p in rest if p.startswith(f"{step}/d/")]
    assert [p for p in rest if p not in nodes] == [
        f"{step}/_METADATA",
        f"{step}/_sharding",
        f"{step}/manifest.ocdbt",
    ]
    # the nodes' names are random (tensorstore's): those the server holds, not the local run's
    listed = s3.client().list_objects_v2(Bucket=BUCKET, Prefix="orbax_run/2/default/d/")
    held = [o["Key"].rsplit("/", 1)[1] for o in listed["Contents"]]
    assert 1 <= len(nodes) <= len(held)
    assert {p.rsplit("/", 1)[1] for p in nodes} <= set(held)


def test_remote_structure_is_read_without_tensorstore(
    s3: Any, s3_orbax: str, orbax_local: str
) -> None:
    """The shapes and dtypes of an S3 run come from treetool's own OCDBT decoder (ranged
    reads of the manifest and nodes): tensorstore is imported only when values are read."""
    import subprocess
    import sys

    code = (
        "import sys, treetool as tt, treetool.io\n"
        "t = treetool.io.read(sys.argv[1]).tree\n"
        "print([(str(p), tuple(x.shape), str(x.dtype)) for p, x in tt.leaves_with_path(t)])\n"
        "print('tensorstore' in sys.modules)\n"
        "print(float(tt.stats(t['params']['w']).max), 'tensorstore' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, s3_orbax], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        str(_facts(tt.io.read(orbax_local).tree)),
        "False",
        "46.0 True",
    ]


def _relative_files(root: str) -> list[str]:
    import os

    return sorted(
        os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
        for d, _, names in os.walk(root)
        for n in names
    )


def test_orbax_wrote_the_s3_run_as_it_writes_a_local_one(
    s3_server: Any, s3_orbax: str, orbax_local: str
) -> None:
    """The objects orbax + tensorstore wrote to the bucket are the local run's files, key for
    path, apart from the OCDBT data files' names (random, tensorstore's) and how many of them
    each database has (one per flush of tensorstore's writes); no temporary directory is left
    after the commits' renames; the files orbax writes the same way hold the same bytes."""
    import re

    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="orbax_run/")
    assert not listed["IsTruncated"]
    keys = sorted(o["Key"][len("orbax_run/") :] for o in listed["Contents"])
    local = _relative_files(orbax_local)
    assert [k for k in keys if "orbax-checkpoint-tmp" in k] == []

    data = re.compile(r"(?<=/d/)[0-9a-f]{32}$")
    assert {data.sub("*", k) for k in keys} == {data.sub("*", p) for p in local}
    assert [k for k in keys if not data.search(k)] == [p for p in local if not data.search(p)]
    assert [k for k in keys if not data.search(k)] == [
        f"{step}/{name}"
        for step in (1, 2)
        for name in (
            "_CHECKPOINT_METADATA",
            "commit_success.txt",
            "default/_METADATA",
            "default/_sharding",
            "default/array_metadatas/process_0",
            "default/commit_success.txt",
            "default/manifest.ocdbt",
            "default/ocdbt.process_0/manifest.ocdbt",
        )
    ]
    for step in (1, 2):
        for name in ("_METADATA", "_sharding", "array_metadatas/process_0"):
            key = f"orbax_run/{step}/default/{name}"
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            with open(f"{orbax_local}/{step}/default/{name}", "rb") as fh:
                assert body == fh.read(), key
    # the step's commit marker names where orbax committed it: the bucket, not a local folder
    marker = client.get_object(Bucket=BUCKET, Key="orbax_run/2/commit_success.txt")
    assert marker["Body"].read().decode() == f"Checkpoint commit was successful to {s3_orbax}/2"


@pytest.mark.parametrize("step", [1, 2])
def test_treetool_reads_the_orbax_written_s3_run_as_the_local_one(
    s3: Any, s3_orbax: str, orbax_local: str, step: int
) -> None:
    loaded = tt.io.read(f"{s3_orbax}@{step}")
    local = tt.io.read(f"{orbax_local}@{step}")
    assert (loaded.step, loaded.steps) == (local.step, local.steps) == (step, [1, 2])
    assert (
        _facts(loaded.tree)
        == _facts(local.tree)
        == [
            ("['params']['b']", (6,), "bfloat16"),
            ("['params']['layers'][0]", (3,), "int32"),
            ("['params']['layers'][1]", (2, 2), "float16"),
            ("['params']['w']", (4, 6), "float32"),
            ("['step']", (), "int32"),
        ]
    )
    want = orbax_tree(step)
    for (path, leaf), (_, mine) in zip(
        tt.leaves_with_path(loaded.tree), tt.leaves_with_path(local.tree), strict=True
    ):
        assert leaf.file.startswith(f"{s3_orbax}/{step}/default/"), path
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(mine), err_msg=str(path))
    np.testing.assert_array_equal(
        np.asarray(loaded.tree["params"]["w"]), np.asarray(want["params"]["w"])
    )
    assert int(np.asarray(loaded.tree["step"])) == step


def test_the_s3_branch_refuses_an_orbax_it_does_not_know(monkeypatch: pytest.MonkeyPatch) -> None:
    """`orbax_s3_writes()` checks orbax's functions before it replaces any: one that is not
    the function it expects stops the save with an AssertionError naming it, and nothing of
    orbax is left replaced; after a normal exit orbax's own functions are back."""
    from _orbax_s3 import orbax_s3_writes
    from orbax.checkpoint._src.path import async_path, gcs_utils
    from orbax.checkpoint._src.serialization import tensorstore_utils as tsu

    own = (tsu._normalize_path, tsu._use_gcs_driver, gcs_utils.get_kvstore_for_gcs)
    with orbax_s3_writes():
        assert tsu._normalize_path("s3://ckpts/run/1/") == "s3://ckpts/run/1"
        assert tsu._normalize_path("gs://ckpts/run/1/") == "gs://ckpts/run/1"
        assert tsu._use_gcs_driver("s3://ckpts/run") and not tsu._use_gcs_driver("/tmp/run")
        assert gcs_utils.get_kvstore_for_gcs("s3://ckpts/run/1")["driver"] == "s3"
        assert gcs_utils.get_kvstore_for_gcs("gs://ckpts/run/1")["driver"] == "gcs"
    assert (tsu._normalize_path, tsu._use_gcs_driver, gcs_utils.get_kvstore_for_gcs) == own

    def upstream_fixed(path: str) -> str:  # an orbax whose function changed
        return path

    monkeypatch.setattr(tsu, "_normalize_path", upstream_fixed)
    rename = async_path.rename
    refused = r"orbax's tensorstore_utils\._normalize_path is not the 0\.12\.8 function"
    with pytest.raises(AssertionError, match=refused), orbax_s3_writes():
        pytest.fail("the body ran")
    assert (tsu._normalize_path, tsu._use_gcs_driver) == (upstream_fixed, own[1])
    assert (gcs_utils.get_kvstore_for_gcs, async_path.rename) == (own[2], rename)


def test_the_s3_server_enforces_the_conditional_writes_ocdbt_commits_with(s3: Any) -> None:
    """An OCDBT manifest is committed by conditional writes (tensorstore's `s3` kvstore sends
    `If-None-Match: *` for a new one, `If-Match: ETAG` for the next): the S3 server refuses a
    stale one, through tensorstore and on the PUT itself, so the run is committed as on S3."""
    import botocore.exceptions
    import tensorstore as ts
    from _orbax_s3 import s3_kvstore

    kv = ts.KvStore.open(s3_kvstore(f"s3://{BUCKET}/conditional/")).result()
    first = kv.write("manifest.ocdbt", b"1").result().generation
    second = kv.write("manifest.ocdbt", b"2", if_equal=first).result().generation
    assert second not in (b"", first)
    assert kv.write("manifest.ocdbt", b"3", if_equal=first).result().generation == b""
    assert kv.read("manifest.ocdbt").result().value == b"2"

    client = s3.client()
    key = "conditional/manifest.ocdbt"
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef"'}):
        with pytest.raises(botocore.exceptions.ClientError) as info:
            client.put_object(Bucket=BUCKET, Key=key, Body=b"4", **condition)
        assert info.value.response["Error"]["Code"] == "PreconditionFailed", condition
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"2"
    client.delete_object(Bucket=BUCKET, Key=key)

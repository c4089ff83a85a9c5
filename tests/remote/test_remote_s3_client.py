"""S3 through obstore: what a read imports, where credentials come from, how big reads split."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from storage_servers import BUCKET

import treetool as tt
from conftest import period_two_stops, s3_env
from treetool.io._sources import _remote as _remote

#: the fsspec/aiobotocore stack s3fs needs, boto3 (only for profiles and roles), and jax
#: (numpy is imported: treetool's dtype table is numpy's)
_HEAVY = ("s3fs", "aiobotocore", "aiohttp", "botocore", "boto3", "fsspec", "jax")

_PROBE = (
    "import sys, json, treetool.io as io; "
    "t = io.read(sys.argv[1]).tree; "
    "print(json.dumps([sorted(t), sorted(m for m in {heavy!r} if m in sys.modules)]))"
)


def _probe(url: str, env: dict[str, str], home: str, heavy: tuple = _HEAVY) -> list:
    """Read `url`'s structure in a fresh process; (top keys, heavy modules imported)."""
    import json

    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=heavy), url],
        capture_output=True,
        text=True,
        env={**clean, **env, "HOME": home},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_reading_s3_structure_imports_no_python_http_stack(
    s3: Any, files: dict, tmp_path: Any
) -> None:
    """With keys in the environment, an S3 read imports obstore only: no s3fs/aiobotocore/
    aiohttp/boto3, and reading a safetensors set's structure does not import jax."""
    url = f"s3://{BUCKET}/run/model.safetensors.index.json"
    keys, imported = _probe(url, s3_env(s3), str(tmp_path))
    assert keys == sorted(files["tensors"])
    assert imported == []


def test_profile_credentials_come_through_boto3(s3: Any, files: dict, tmp_path: Any) -> None:
    """Without keys in the environment, a `~/.aws/credentials` profile is read (by boto3's
    chain, handed to obstore); boto3 is imported then, and only then."""
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        "[work]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    (aws / "config").write_text("[profile work]\nregion = us-east-1\n")
    env = {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_PROFILE": "work",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    keys, imported = _probe(f"s3://{BUCKET}/run/model.safetensors", env, str(tmp_path))
    assert keys == sorted(files["tensors"])
    assert "boto3" in imported and "s3fs" not in imported and "aiobotocore" not in imported
    # the profile's keys signed the requests: moto saw them
    assert s3.log.count == 1


def test_anonymous_reads_with_skip_signature(
    s3: Any, files: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`AWS_SKIP_SIGNATURE=true`: public objects are read unsigned, no credential looked up;
    a private one is refused in one line (moto checks the object's ACL)."""
    from treetool._errors import LoadError

    with open(os.path.join(files["root"], "ckpt.pkl"), "rb") as fh:
        body = fh.read()
    s3.client().put_object(Bucket=BUCKET, Key="public/ckpt.pkl", Body=body, ACL="public-read")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SKIP_SIGNATURE", "true")
    _remote._fs_cache.clear()
    s3.log.clear()
    tree = tt.load(f"s3://{BUCKET}/public/ckpt.pkl")
    assert tree["step"] == 7 and tree["params"]["w"].shape == (64, 16)
    with pytest.raises(LoadError) as info:
        tt.load(f"s3://{BUCKET}/run/ckpt.pkl")
    assert str(info.value) == f"s3://{BUCKET}/run/ckpt.pkl: access denied (403)"


def test_big_reads_are_chunked_ranges(
    s3: Any, files: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read bigger than a chunk is fetched as exact consecutive ranges (in parallel: a
    thread per chunk, each in obstore with the GIL released; measured faster than one
    `obstore.get_ranges` call on loopback), reassembled in order."""
    from treetool.io._sources._s3 import S3Source

    monkeypatch.setattr(_remote, "_CHUNK", 65536)
    with open(os.path.join(files["root"], "big.pkl"), "rb") as fh:
        raw = fh.read()
    src = S3Source(f"s3://{BUCKET}/run/big.pkl")
    _ = src.size
    s3.log.clear()
    start, n = 1000, 3 * 65536 + 123
    assert src.read(start, n) == raw[start : start + n]
    got = sorted(r.range for r in s3.log.requests)
    want = sorted(
        f"bytes={a}-{min(a + 65536, start + n) - 1}" for a in range(start, start + n, 65536)
    )
    assert got == want
    assert sum(r.sent for r in s3.log.requests) == n
    # and a leaf's values, read the same way, equal the local file's
    tree = tt.load(f"s3://{BUCKET}/run/big.pkl")
    np.testing.assert_array_equal(np.asarray(tree["b"]), files["big"]["b"])


def test_range_past_the_end_is_a_truncated_range(s3: Any, files: dict) -> None:
    """obstore returns what exists of a range that runs past the end: the check says so."""
    from treetool._errors import LoadError
    from treetool.io._sources._s3 import S3Source

    size = os.path.getsize(os.path.join(files["root"], "big.pkl"))
    src = S3Source(f"s3://{BUCKET}/run/big.pkl")
    src._size = size + 100  # as a stale listing would say
    with pytest.raises(LoadError) as info:
        src.read(size - 10, 100_000)
    assert str(info.value) == (
        f"s3://{BUCKET}/run/big.pkl: truncated range: expected 100000 bytes at offset "
        f"{size - 10}, the server sent 10"
    )


def test_header_bigger_than_the_first_block_reads_no_payload(s3: Any, tmp_path: Any) -> None:
    """A safetensors header past the first 64 KiB: one GET of the first block (which says the
    size), the header's last 4 KiB (format detection checks its closing brace), the rest of
    the header; no HEAD, and no payload byte read ahead."""
    from safetensors.numpy import save_file

    tensors = {f"layer.{i}.w": np.full(2, i, np.float32) for i in range(2000)}
    path = tmp_path / "wide.safetensors"
    save_file(tensors, str(path))
    raw = path.read_bytes()
    header = 8 + int.from_bytes(raw[:8], "little")
    assert header > 65536
    s3.client().put_object(Bucket=BUCKET, Key="wide/model.safetensors", Body=raw)
    s3.log.clear()
    tree = tt.load(f"s3://{BUCKET}/wide/model.safetensors")
    assert len(tt.leaves_with_path(tree)) == 2000
    assert [(r.method, r.range) for r in s3.log.requests] == [
        ("GET", "bytes=0-65535"),
        ("GET", f"bytes={header - 4096}-{header - 1}"),
        ("GET", f"bytes=65536-{header - 1}"),
    ]


def test_s3_walks_read_ahead_even_on_loopback(s3: Any, files: dict) -> None:
    """obstore's requests release the GIL: an S3 walk whose jumps repeat a pattern finds its
    next blocks read ahead however fast the server answers (HTTP waits for 4 ms requests)."""
    from treetool.io._sources import _blocks
    from treetool.io._sources._s3 import S3Source

    src = S3Source(f"s3://{BUCKET}/run/big.pkl")
    size = src.size
    stops = period_two_stops(size)
    reader = _blocks.BlockReader(src)
    s3.log.clear()
    got = [reader[p : p + 4] for p in stops]
    reader.close()
    with open(os.path.join(files["root"], "big.pkl"), "rb") as fh:
        raw = fh.read()
    assert got == [raw[p : p + 4] for p in stops]
    assert _blocks._SLOW_REQUEST > 0  # the default threshold stands; S3 sets its own
    assert reader.guessed == len(stops) - 5
    assert len(stops) <= s3.log.count <= len(stops) + 8


@pytest.mark.parametrize("key", ["run//double.safetensors", "run/./dot.safetensors"])
def test_keys_obstore_cannot_address_are_one_line(s3: Any, files: dict, key: str) -> None:
    """S3 allows `//` and `.` segments in keys; obstore's paths do not: one line, no request."""
    from treetool._errors import LoadError

    s3.client().upload_file(os.path.join(files["root"], "model.safetensors"), BUCKET, key)
    s3.log.clear()
    with pytest.raises(LoadError) as info:
        tt.load(f"s3://{BUCKET}/{key}")
    assert str(info.value) == (
        f"s3://{BUCKET}/{key}: a key the S3 client (obstore) cannot address (an empty, '.' or "
        "'..' segment, or a control character)"
    )
    assert s3.log.count == 0


def test_keys_with_spaces_and_unicode_read(s3: Any, files: dict) -> None:
    key = "run/my model (1) ünï+%20.safetensors"
    s3.client().upload_file(os.path.join(files["root"], "model.safetensors"), BUCKET, key)
    tree = tt.load(f"s3://{BUCKET}/{key}")
    assert tree["lm_head.weight"].shape == (16, 64)
    np.testing.assert_array_equal(
        np.asarray(tree["lm_head.weight"]), files["tensors"]["lm_head.weight"]
    )


def test_an_empty_object_is_one_line(s3: Any) -> None:
    """S3 answers a range of an empty object with 416: its size comes from a HEAD then."""
    from treetool._errors import LoadError

    s3.client().put_object(Bucket=BUCKET, Key="e/empty.pkl", Body=b"")
    s3.log.clear()
    with pytest.raises(LoadError) as info:
        tt.load(f"s3://{BUCKET}/e/empty.pkl")
    assert str(info.value) == f"s3://{BUCKET}/e/empty.pkl: empty file"
    assert [(r.method, r.range) for r in s3.log.requests] == [
        ("GET", "bytes=0-65535"),
        ("HEAD", None),
    ]


@pytest.mark.parametrize(
    "endpoint", ["not a url", "ftp://x", "http://256.1.1.1:80", "http://127.0.0.1:99999"]
)
def test_a_malformed_endpoint_is_one_line_before_any_request(
    monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    """object_store panics (a Rust backtrace on stderr) on some endpoints: treetool refuses
    them first, naming the variable."""
    from treetool._errors import LoadError

    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    _remote._fs_cache.clear()
    with pytest.raises(LoadError) as info:
        tt.load("s3://ckpts/run/model.safetensors")
    assert str(info.value) == (
        "s3://ckpts/run/model.safetensors: AWS_ENDPOINT_URL: expected an http(s)://host[:port] "
        f"URL, found {endpoint!r}"
    )


def test_an_unresolvable_endpoint_is_one_bounded_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from treetool._errors import LoadError

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://treetool-no-such-host.invalid:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "1")
    monkeypatch.setenv("TREETOOL_REMOTE_TIMEOUT", "10")  # a resolver answers .invalid at once
    _remote._fs_cache.clear()
    with pytest.raises(LoadError) as info:
        tt.load("s3://ckpts/run/model.safetensors")
    assert str(info.value) == (
        "s3://ckpts/run/model.safetensors: read of bytes 0-65535 failed after 1 try: "
        "cannot resolve the server's name (dns error)"
    )


@pytest.mark.parametrize("bucket", ["a b", "", "bad!", "-lead"])
def test_a_bad_bucket_name_is_one_line_before_any_request(s3: Any, bucket: str) -> None:
    """object_store panics on some bucket names (a space): refused first, no request."""
    from treetool._errors import LoadError

    with pytest.raises(LoadError) as info:
        tt.load(f"s3://{bucket}/x.pkl")
    assert str(info.value) == (
        f"s3://{bucket}/x.pkl: expected s3://BUCKET/KEY with a bucket name of letters, digits, "
        f"'.', '-' or '_', found {bucket!r}"
    )
    assert s3.log.count == 0


def test_a_bucket_is_a_prefix(s3: Any) -> None:
    """`s3://bucket` names a prefix: listed (not read as an object), and refused as not an
    orbax checkpoint in one line."""
    from treetool._errors import LoadError

    s3.client().create_bucket(Bucket="plain")
    s3.client().put_object(Bucket="plain", Key="a/b.txt", Body=b"x")
    s3.log.clear()
    with pytest.raises(LoadError) as info:
        tt.load("s3://plain")
    assert str(info.value).startswith(
        "s3://plain: a prefix (directory) that is not an orbax checkpoint"
    )
    assert s3.log.count >= 1
    assert all(r.range is None for r in s3.log.requests)  # listed, no object read


@pytest.mark.parametrize("mode", ["short", "long", "norange", "403"])
def test_a_misbehaving_s3_endpoint_is_one_line(
    files: dict, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The ranged HTTP server's fault paths as an S3 endpoint (path-style: /BUCKET/KEY is a
    file under its root): short, long and unranged answers and a 403, each one line."""
    import shutil

    from storage_servers import HttpServer

    from treetool._errors import LoadError

    (tmp_path / "bkt").mkdir()
    shutil.copy(os.path.join(files["root"], "model.safetensors"), tmp_path / "bkt")
    size = os.path.getsize(tmp_path / "bkt" / "model.safetensors")
    assert size < 65536  # the first block asks for the whole file
    line = {
        "short": f"truncated range: expected {size} bytes at offset 0, the server sent {size // 2}",
        "long": f"the server sent more than the {size} bytes asked for",
        "norange": "the server does not support range requests (HTTP 200); refusing to "
        "download the whole file",
        "403": "access denied (403)",
    }[mode]
    server = HttpServer(str(tmp_path))
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"{server.url}/{mode}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "1")
        _remote._fs_cache.clear()
        with pytest.raises(LoadError) as info:
            tt.load("s3://bkt/model.safetensors")
    finally:
        server.stop()
        _remote._fs_cache.clear()
    assert str(info.value) == f"s3://bkt/model.safetensors: {line}"


def test_reading_an_s3_orbax_step_imports_no_python_http_stack(
    s3: Any, s3_orbax: str, tmp_path: Any
) -> None:
    """The orbax reader on S3 (its listing and small files through obstore, arrays through
    tensorstore's own kvstore) imports no s3fs/aiobotocore/aiohttp/boto3 either."""
    keys, imported = _probe(f"{s3_orbax}@1", s3_env(s3), str(tmp_path))
    assert keys == ["params", "step"]
    assert imported == []

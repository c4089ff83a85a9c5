"""Every remote failure is one line naming the URL, raised as `LoadError`, and never hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from storage_servers import BUCKET

import treetool as tt
from treetool._errors import LoadError


def _error(url: str) -> str:
    with pytest.raises(LoadError) as info:
        tt.load(url)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_s3_missing_key_and_bucket(s3: Any) -> None:
    assert _error(f"s3://{BUCKET}/run/nope.safetensors") == (
        f"s3://{BUCKET}/run/nope.safetensors: no such object "
        f"(bucket '{BUCKET}' or its key does not exist)"
    )
    assert _error("s3://no-such-bucket/x.pkl").startswith(
        "s3://no-such-bucket/x.pkl: no such object"
    )


def test_s3_without_credentials(s3: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    from treetool.io._sources import _remote as _remote

    _remote._fs_cache.clear()
    msg = _error(f"s3://{BUCKET}/run/model.safetensors")
    assert msg.startswith(f"s3://{BUCKET}/run/model.safetensors: no credentials found")
    assert s3.log.count == 0  # refused before any request was sent


def test_gcs_missing_key_and_bucket(gcs: Any) -> None:
    assert _error(f"gs://{BUCKET}/run/nope.npz").startswith(
        f"gs://{BUCKET}/run/nope.npz: no such object"
    )
    assert _error("gs://no-such-bucket/a.npz").startswith(
        "gs://no-such-bucket/a.npz: no such object"
    )


def test_http_403_404(http: Any) -> None:
    assert _error(f"{http.url}/403/model.safetensors") == (
        f"{http.url}/403/model.safetensors: access denied (HTTP 403)"
    )
    assert _error(f"{http.url}/nope.pkl") == f"{http.url}/nope.pkl: no such file (HTTP 404)"


def test_http_timeout_is_a_total_deadline_not_retried_past_it(
    http: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREETOOL_REMOTE_TIMEOUT", "0.2")
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "2")
    msg = _error(f"{http.url}/hang/model.safetensors")
    assert (
        msg == f"{http.url}/hang/model.safetensors: read of bytes 0-65535 failed after 1 try: "
        "no complete answer within 0.2 s"
    )
    assert http.log.count == 1  # the try took the whole timeout: no second one


def test_http_truncated_range_and_no_ranges(http: Any) -> None:
    size = os.path.getsize(os.path.join(http.root, "model.safetensors"))
    assert _error(f"{http.url}/short/model.safetensors") == (
        f"{http.url}/short/model.safetensors: truncated range: expected {size} bytes at "
        f"offset 0, the server sent {size // 2}"
    )
    assert _error(f"{http.url}/long/model.safetensors") == (
        f"{http.url}/long/model.safetensors: the server sent more than the 65536 bytes asked "
        "for"  # the first read asks for a 64 KiB block
    )
    assert _error(f"{http.url}/norange/model.safetensors") == (
        f"{http.url}/norange/model.safetensors: the server does not support range requests "
        "(HTTP 200); refusing to download the whole file"
    )


def test_missing_shard_names_index_and_shard(s3: Any) -> None:
    url = f"s3://{BUCKET}/run/broken.safetensors.index.json"
    assert _error(url) == (
        f"{url}: shard model-00009-of-00009.safetensors: no such object "
        f"(bucket '{BUCKET}' or its key does not exist)"
    )


@pytest.mark.parametrize(
    "shard", ["../secret.safetensors", "/etc/passwd", "s3://other/x.safetensors", 3]
)
def test_index_naming_files_elsewhere_is_refused(s3: Any, shard: Any) -> None:
    body = json.dumps({"metadata": {}, "weight_map": {"w": shard}}).encode()
    s3.client().put_object(Bucket=BUCKET, Key="evil/model.safetensors.index.json", Body=body)
    s3.log.clear()
    url = f"s3://{BUCKET}/evil/model.safetensors.index.json"
    assert _error(url) == (
        f"{url}: weight_map['w']: expected a shard file name next to the index (a relative "
        f"path inside its folder), found {shard!r}"
    )
    assert all("secret" not in r.path and "passwd" not in r.path for r in s3.log.requests)


def test_truncated_object(s3: Any, files: dict) -> None:
    with open(os.path.join(files["root"], "model.safetensors"), "rb") as fh:
        data = fh.read()
    s3.client().put_object(Bucket=BUCKET, Key="cut/model.safetensors", Body=data[: len(data) // 2])
    msg = _error(f"s3://{BUCKET}/cut/model.safetensors")
    assert msg.startswith(f"s3://{BUCKET}/cut/model.safetensors: tensor ")
    assert f"the file has {len(data) // 2}" in msg


def test_local_reads_import_no_remote_client(tmp_path: Any) -> None:
    import subprocess
    import sys

    import numpy as np

    p = tmp_path / "w.npz"
    np.savez(p, a=np.zeros(3))
    code = (
        "import sys, treetool as tt; tt.load(sys.argv[1]); "
        "print(sorted(m for m in ('fsspec', 's3fs', 'gcsfs', 'botocore', 'obstore', "
        "'treetool.io._sources._remote', 'treetool.io._sources._s3') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_gcs_without_emulator_or_credentials_is_one_bounded_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from treetool.io._sources import _remote as _remote

    for k in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no application default credentials
    monkeypatch.setenv("TREETOOL_REMOTE_TIMEOUT", "0.2")
    product = Path("/sys/class/dmi/id/product_name")
    on_gcp = product.is_file() and "Google" in product.read_text()
    assert _remote._gcs_token() == ("google_default" if on_gcp else "anon")
    _remote._fs_cache.clear()
    try:
        msg = _error("gs://treetool-no-such-bucket/x.safetensors")
    finally:
        _remote._fs_cache.clear()
    assert msg.startswith("gs://treetool-no-such-bucket/x.safetensors: ")


def test_gcs_auth_choice_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from treetool.io._sources import _remote as _remote

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
    assert _remote._gcs_token() == "anon"
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "key.json"))
    assert _remote._gcs_token() == "google_default"
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    (tmp_path / "application_default_credentials.json").write_text("{}")
    assert _remote._gcs_token() == "google_default"


@pytest.mark.parametrize("kind", ["s3", "gs", "http"])
def test_a_server_that_never_answers_costs_one_timeout(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every remote client gives up after TREETOOL_REMOTE_TIMEOUT (a try that took all of it
    is not followed by another), with the same one line (the test ends: the hang is bounded)."""
    from storage_servers import SilentServer

    from treetool.io._sources import _remote as _remote

    server = SilentServer()
    monkeypatch.setenv("TREETOOL_REMOTE_TIMEOUT", "0.3")
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "2")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    _remote._fs_cache.clear()
    url = {
        "s3": "s3://ckpts/run/model.safetensors",
        "gs": "gs://ckpts/run/model.safetensors",
        "http": f"{server.url}/run/model.safetensors",
    }[kind]
    try:
        msg = _error(url)
    finally:
        _remote._fs_cache.clear()
        server.stop()
    what = "stat" if kind == "gs" else "read of bytes 0-65535"  # one GET gives the size
    reason = "no complete answer within 0.3 s" if kind == "http" else "no answer within 0.3 s"
    assert msg == f"{url}: {what} failed after 1 try: {reason}"
    assert server.accepted >= 1  # the client did reach the server (and got no answer)

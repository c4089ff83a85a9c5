"""Hostile remote files and servers, through the shared hostile-file harness: contained."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
from storage_servers import BUCKET

from conftest import s3_env

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))
import harness

# the session's fixtures built real equinox models (jax is imported); the harness forks its
# child and execs python at once, which is safe
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


def test_index_escaping_its_folder(s3: Any, tmp_path: Any) -> None:
    body = json.dumps({"metadata": {}, "weight_map": {"w": "../../etc/passwd"}}).encode()
    s3.client().put_object(Bucket=BUCKET, Key="h/model.safetensors.index.json", Body=body)
    url = f"s3://{BUCKET}/h/model.safetensors.index.json"
    run = harness.run_cli("ls", url, cwd=tmp_path, env=s3_env(s3))
    harness.assert_contained(run)
    assert "expected a shard file name next to the index" in run.stderr


def test_remote_pickle_code_is_not_run(s3: Any, tmp_path: Any) -> None:
    evil = b"\x80\x04cos\nsystem\n\x8c\x0btouch PWNED\x85R."
    s3.client().put_object(Bucket=BUCKET, Key="h/evil.pkl", Body=evil)
    run = harness.run_cli(
        "inspect", "--no-tui", f"s3://{BUCKET}/h/evil.pkl", cwd=tmp_path, env=s3_env(s3)
    )
    harness.assert_contained(run, rc=0)
    assert "os.system" in run.stderr and "not executed" in run.stderr
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("hang", "read of bytes 0-65535 failed after 1 try: no complete answer within 0.3 s"),
        ("long", "the server sent more than"),
        ("short", "truncated range"),
        ("norange", "refusing to download the whole file"),
    ],
)
def test_hostile_http_servers(http: Any, tmp_path: Any, mode: str, expected: str) -> None:
    env = {"TREETOOL_REMOTE_TIMEOUT": "0.3", "TREETOOL_REMOTE_RETRIES": "2"}
    run = harness.run_cli("ls", f"{http.url}/{mode}/ckpt.pkl", cwd=tmp_path, env=env)
    harness.assert_contained(run)
    assert expected in run.stderr

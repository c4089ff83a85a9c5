"""Listing a remote checkpoint imports neither numpy nor ml_dtypes nor jax (real S3 and HTTP
servers, the `treetool` command in a subprocess)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from import_guard import run_guarded
from storage_servers import BUCKET

from conftest import s3_env

NAMES = ["model.safetensors.index.json", "flax_model.msgpack.index.json", "arrays.npz", "ckpt.pkl"]


@pytest.mark.parametrize("name", NAMES)
def test_ls_of_an_s3_checkpoint_imports_no_numpy(
    name: str, s3: Any, files: dict, tmp_path: Path
) -> None:
    remote = run_guarded("ls", f"s3://{BUCKET}/run/{name}", cwd=tmp_path, env=s3_env(s3))
    assert (remote.returncode, remote.stderr) == (0, "")
    local = run_guarded("ls", os.path.join(files["root"], name), cwd=tmp_path)
    assert (local.returncode, local.stderr) == (0, "")
    assert remote.stdout == local.stdout and remote.stdout.count("\n") >= 3


def test_ls_json_over_http_imports_no_numpy(http: Any, files: dict, tmp_path: Path) -> None:
    url = f"{http.url}/model.safetensors.index.json"
    out = run_guarded("ls", "--json", url, cwd=tmp_path)
    assert (out.returncode, out.stderr) == (0, "")
    assert '"shard": ' in out.stdout and '"dtype": "float32"' in out.stdout

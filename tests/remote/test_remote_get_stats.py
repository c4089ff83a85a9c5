"""`treetool get` reads a remote leaf whole for its stats only up to 8 MB (a local one up to
64 MB): a 9.0 MB leaf over HTTP says how to ask for them, the same file on disk gets them."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from conftest import cli as _cli


def test_a_remote_leaf_over_8_mb_gets_its_stats_only_with_the_flag(
    http: Any, files: dict, tmp_path: Any
) -> None:
    name = "stats_9mb.safetensors"
    local = os.path.join(files["root"], name)  # served by the HTTP server from its root
    w = np.arange(1500 * 1500, dtype=np.float32).reshape(1500, 1500)  # 9.0 MB
    save_file({"w": w, "b": np.arange(1001, dtype=np.float32)}, local)
    try:
        url = f"{http.url}/{name}"
        remote = _cli("get", url, "w", env={}, cwd=str(tmp_path))
        assert remote.returncode == 0, remote.stderr
        assert "stats  not computed: they read all 9.0 MB from the file (pass --stats)" in (
            remote.stdout.splitlines()
        )
        sent = sum(r.sent for r in http.log.requests if r.path.endswith(name))
        assert 0 < sent < 1 << 20  # the header and the corners, not the leaf
        data = json.loads(_cli("get", url, "b", "--json", env={}, cwd=str(tmp_path)).stdout)
        assert data["stats"]["max"] == 1000.0 and "stats_skipped" not in data  # 4 KB: read
        on_disk = _cli("get", local, "w", "--json", env={}, cwd=str(tmp_path))
        assert on_disk.returncode == 0, on_disk.stderr
        stats = json.loads(on_disk.stdout)["stats"]
        assert (stats["min"], stats["max"], stats["size"]) == (0.0, 1500 * 1500 - 1, 1500 * 1500)
        asked = _cli("get", url, "w", "--stats", "--json", env={}, cwd=str(tmp_path))
        assert json.loads(asked.stdout)["stats"]["max"] == 1500 * 1500 - 1
    finally:
        os.unlink(local)

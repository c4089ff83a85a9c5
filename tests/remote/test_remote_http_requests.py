"""The HTTP client's requests from the CLI and its one deadline thread, counted on the real
local HTTP server: the first ranged GET (which also gives the size) is sent once, for a file,
an index or a missing URL, and never a HEAD; the requests of a walk share one watchdog
thread (none started per request)."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import numpy as np
import pytest

import treetool as tt
from conftest import cli as _cli

pytestmark = pytest.mark.slow


def _gets(log: Any) -> list[str | None]:
    return [r.range for r in log.requests if r.method == "GET"]


def test_cli_ls_sends_the_first_get_once(http: Any, files: dict, tmp_path: Any) -> None:
    """`treetool ls URL`: the first GET (bytes 0-65535, which also gives the size) is sent
    once and is the first request: the same requests as `tt.load(URL)`."""
    url = f"{http.url}/model.safetensors"
    out = _cli("ls", url, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "['lm_head.weight']\t[16, 64]\tfloat32" in out.stdout
    cli_gets = _gets(http.log)
    assert [r.method for r in http.log.requests] == ["GET"] * len(cli_gets)  # no HEAD
    assert cli_gets.count("bytes=0-65535") == 1
    assert cli_gets[0] == "bytes=0-65535"
    http.log.clear()
    tree = tt.load(url)
    assert sorted(str(p) for p, _ in tt.leaves_with_path(tree)) == sorted(
        line.split("\t")[0] for line in out.stdout.splitlines()
    )
    assert sorted(_gets(http.log), key=str) == sorted(cli_gets, key=str)


def test_cli_ls_of_an_index_reads_each_shard_header_once(
    http: Any, files: dict, tmp_path: Any
) -> None:
    """An index is read by one request; each shard's header by one more."""
    out = _cli("ls", f"{http.url}/model.safetensors.index.json", cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    paths = [r.path for r in http.log.requests]
    assert paths.count("/model.safetensors.index.json") == 1
    shards = [p for p in paths if p != "/model.safetensors.index.json"]
    assert len(shards) == len(set(shards)) >= 2  # one request per shard


def test_cli_missing_url_is_one_line_after_one_request(http: Any, tmp_path: Any) -> None:
    """A 404 on the first GET is one line, exit 2, after one request (no retry, no HEAD)."""
    url = f"{http.url}/no_such.pkl"
    out = _cli("ls", url, cwd=str(tmp_path))
    assert out.returncode == 2
    assert out.stderr == f"treetool: error: {url}: no such file (HTTP 404)\n"
    assert [(r.method, r.path) for r in http.log.requests] == [("GET", "/no_such.pkl")]


def test_a_walk_shares_one_deadline_thread(http: Any, tmp_path: Any) -> None:
    """The requests of a pickle walk (each with its own deadline) start no thread per
    request: one watchdog thread serves them all, and stays the only one."""
    tree = {f"l{i}": np.full(5000, i, np.float32) for i in range(40)}
    path = f"{http.root}/deadlines.pkl"
    with open(path, "wb") as fh:
        pickle.dump(tree, fh, protocol=4)
    started: list[str] = []
    real_start = threading.Thread.start

    def spy(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    threading.Thread.start = spy  # type: ignore[method-assign]
    try:
        got = tt.load(f"{http.url}/deadlines.pkl", lazy=False)
    finally:
        threading.Thread.start = real_start  # type: ignore[method-assign]
    assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in tree.items()}
    assert len(http.log.requests) >= 2
    assert not [n for n in started if n.startswith("Thread-") and "process_request" not in n]
    live = [t.name for t in threading.enumerate() if t.name == "treetool-http-deadlines"]
    assert live == ["treetool-http-deadlines"]

"""Lying HTTP servers (issue 26): redirects elsewhere, loops, non-http schemes, 4xx/5xx storms,
huge headers, slow headers and bodies, wrong `Content-Range`, shard names that point away.

Every run goes through the harness (one line, exit 2, < 10 s, < 1 GB, no control bytes, no file
written, no connection but to the server on the command line, no canary secret printed); the
port that redirects point to is a `Listener` that must see no connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _servers import Listener, LyingServer
from harness import assert_contained, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]


LISTING = ["['big']\t[40000]\tfloat32", "['small']\t[2, 3]\tfloat32"]


def _safetensors() -> bytes:
    from safetensors.numpy import save

    return save(
        {
            "small": np.arange(6, dtype=np.float32).reshape(2, 3),
            "big": np.arange(40_000, dtype=np.float32),  # past the first 64 KiB block
        }
    )


@pytest.fixture(scope="module")
def other() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.stop()


@pytest.fixture(scope="module")
def server(other: Listener) -> Iterator[LyingServer]:
    srv = LyingServer({"m.safetensors": _safetensors()}, other_port=other.port)
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _nothing_reached_the_other_port(other: Listener) -> Iterator[None]:
    before = other.accepted
    yield
    assert other.accepted == before, "a connection reached the port nobody pointed at"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("port", "redirected to another scheme, host or port (http://127.0.0.1:{other}/"),
        ("host", "redirected to another scheme, host or port (http://localhost:{port}/"),
        ("scheme", "redirected to another scheme, host or port (https://127.0.0.1:{port}/"),
        ("file", "redirected to a file: URL (file:///etc/passwd); only http(s) redirects"),
        ("ftp", "redirected to a ftp: URL (ftp://127.0.0.1:{other}/m.safetensors)"),
        ("loop", "redirect loop (back to http://127.0.0.1:{port}/redirect/loop/m.safetensors)"),
    ],
)
def test_redirects_elsewhere_are_refused(
    server: LyingServer, other: Listener, tmp_path: Any, kind: str, expected: str
) -> None:
    url = f"{server.url}/redirect/{kind}/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith(f"treetool: error: {url}: ")
    assert expected.format(other=other.port, port=server.port) in run.stderr
    assert set(run.connections) == {f"127.0.0.1:{server.port}"}


def test_non_http_redirects_are_refused_even_when_following(
    server: LyingServer, tmp_path: Any
) -> None:
    url = f"{server.url}/redirect/file/m.safetensors"
    run = run_cli("ls", "--follow-redirects", url, cwd=tmp_path)
    assert_contained(run)
    assert "redirected to a file: URL" in run.stderr


def test_same_origin_redirect_is_followed(server: LyingServer, tmp_path: Any) -> None:
    run = run_cli("ls", f"{server.url}/redirect/same/m.safetensors", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout.splitlines() == LISTING


def test_follow_redirects_lets_the_user_allow_another_host(
    server: LyingServer, tmp_path: Any
) -> None:
    url = f"{server.url}/redirect/host/m.safetensors"
    run = run_cli("ls", "--follow-redirects", url, cwd=tmp_path)
    assert run.rc == 0, run
    assert run.stdout.splitlines() == LISTING
    # localhost is the same server by another name: allowed because the user said so
    assert set(run.connections) <= {f"127.0.0.1:{server.port}", f"localhost:{server.port}"} | {
        f"::1:{server.port}"
    }


@pytest.mark.parametrize(
    ("status", "expected", "most"),
    [
        ("401", "access denied (HTTP 401)", 1),
        ("403", "access denied (HTTP 403)", 1),
        ("418", "HTTP 418 Nope", 1),
        ("500", "read of bytes 0-65535 failed after 3 tries: HTTP 500", 3),
        ("503", "read of bytes 0-65535 failed after 3 tries: HTTP 503", 3),
    ],
)
def test_status_storms_are_one_line_without_retrying_4xx(
    server: LyingServer, tmp_path: Any, status: str, expected: str, most: int
) -> None:
    server.requests.clear()
    url = f"{server.url}/{status}/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == f"treetool: error: {url}: {expected}\n"
    assert len(server.requests) == most


@pytest.mark.parametrize("mode", ["manyheaders", "longheader"])
def test_huge_headers_are_one_line_at_once(server: LyingServer, tmp_path: Any, mode: str) -> None:
    server.requests.clear()
    url = f"{server.url}/{mode}/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith(f"treetool: error: {url}: the server's answer is not valid HTTP (")
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize(
    ("mode", "how"),
    [("slowheaders", ["--timeout", "1.5"]), ("slowbody", ["--timeout", "1.5"]), ("slowbody", [])],
)
def test_slowloris_is_cut_at_the_total_deadline(
    server: LyingServer, tmp_path: Any, mode: str, how: list[str]
) -> None:
    """A byte every 0.2-0.5 s never trips an idle timeout; the total deadline cuts it (by the
    flag, or by the environment variable its help names)."""
    url = f"{server.url}/{mode}/m.safetensors"
    env = {} if how else {"TREETOOL_REMOTE_TIMEOUT": "1.5"}
    run = run_cli("ls", *how, url, cwd=tmp_path, env=env)
    assert_contained(run)
    assert run.stderr == (
        f"treetool: error: {url}: read of bytes 0-65535 failed after 1 try: "
        "no complete answer within 1.5 s\n"
    )


def test_timeout_defaults_are_in_the_help(tmp_path: Any) -> None:
    run = run_cli("ls", "--help", cwd=tmp_path)
    assert_contained(run, rc=0)
    text = " ".join(run.stdout.split())
    assert "total deadline of one remote request: connect, first byte and the whole body " in text
    assert "(default 30, or $TREETOOL_REMOTE_TIMEOUT)" in text
    assert "(default 3, or $TREETOOL_REMOTE_RETRIES)" in text
    assert "--follow-redirects" in text


def test_a_wrong_content_range_is_refused(server: LyingServer, tmp_path: Any) -> None:
    url = f"{server.url}/badrange/m.safetensors"
    run = run_cli("get", url, "big", cwd=tmp_path)
    assert_contained(run)
    assert "the server answered bytes " in run.stderr
    assert "to a request for bytes " in run.stderr


def test_a_first_answer_of_other_bytes_is_refused(server: LyingServer, tmp_path: Any) -> None:
    url = f"{server.url}/badrangefirst/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    size = len(server.files["m.safetensors"])
    assert run.stderr == (
        f"treetool: error: {url}: the server answered bytes 7-65542/{size} to a "
        "request for bytes 0-65535\n"
    )


# --- shard names -----------------------------------------------------------------------------


def _index(shard: str) -> bytes:
    return json.dumps({"metadata": {}, "weight_map": {"w": shard}}).encode()


@pytest.mark.parametrize(
    "shard",
    [
        "127.0.0.2",
        "127.0.0.1:{other}",
        "//127.0.0.1:{other}/x.safetensors",
        "http://127.0.0.1:{other}/x.safetensors",
        "/etc/passwd",
        "../m.safetensors",
        "a/../../m.safetensors",
        "a//m.safetensors",
        "C:\\m.safetensors",
    ],
)
def test_shard_names_stay_inside_the_index_folder(
    server: LyingServer, other: Listener, tmp_path: Any, shard: str
) -> None:
    shard = shard.format(other=other.port)
    server.files[""] = _index(shard)  # the index at the server's root: a URL with no path
    server.files["idx/model.safetensors.index.json"] = _index(shard)
    for url in (server.url, f"{server.url}/f/idx/model.safetensors.index.json"):
        run = run_cli("ls", url, cwd=tmp_path)
        assert_contained(run)
        if shard == "127.0.0.2":  # a file name: read inside the folder, where none is
            assert run.stderr == (
                f"treetool: error: {url}: shard 127.0.0.2: no such file (HTTP 404)\n"
            )
            assert server.requests[-1][0] in ("/127.0.0.2", "/f/idx/127.0.0.2")
        else:
            assert "expected a shard file name next to the index" in run.stderr
        assert set(run.connections) == {f"127.0.0.1:{server.port}"}


def test_index_json_limits(server: LyingServer, tmp_path: Any) -> None:
    deep = b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b', "weight_map": {}}'
    server.files["deep/model.safetensors.index.json"] = deep
    url = f"{server.url}/f/deep/model.safetensors.index.json"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith(f"treetool: error: {url}: sharded index: ")
    wide = {"metadata": {}, "weight_map": {f"t{i}": f"s{i}.safetensors" for i in range(10_001)}}
    server.files["wide/model.safetensors.index.json"] = json.dumps(wide).encode()
    server.requests.clear()
    url = f"{server.url}/f/wide/model.safetensors.index.json"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        f"treetool: error: {url}: sharded index names 10001 shards, more than 10000\n"
    )
    assert all("/s" not in path for path, _ in server.requests)  # no shard was asked for

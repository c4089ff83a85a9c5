"""HTTP framing and URLs (issue 39, points 1-2) through the command, held to the harness's
promises (one line on stderr, exit 2, no traceback, no file written, no connection but to the
server on the command line, no secret printed): two `Content-Length`s that disagree, a
`Transfer-Encoding` other than `chunked`, bytes past an answer (a forged next answer that must
never be shown: the values printed are the file's), a port out of range, a backslash in the
authority, a password holding a `/` (no part of it printed).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _servers import LyingServer
from harness import assert_contained, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _safetensors(big: np.ndarray) -> bytes:
    from safetensors.numpy import save

    return save({"small": np.arange(6, dtype=np.float32).reshape(2, 3), "big": big})


#: the file, and a forged one of the same layout whose `big` is all 7777
FILE = _safetensors(np.arange(40_000, dtype=np.float32))  # `big` lies past the first 64 KiB
FORGED = _safetensors(np.full(40_000, 7777.0, dtype=np.float32))


class FramingServer(LyingServer):
    """`LyingServer` plus framing faults: `/twolengths/NAME` (a second, larger
    `Content-Length`), `/te/NAME` (`Transfer-Encoding: gzip, chunked`), and `/extra/NAME`: each
    honest answer followed, in the same send, by a forged answer (bytes of `FORGED`) to the
    request that comes next in `expected` (the ranges an honest run asks for, in order)."""

    expected: list[tuple[int, int]] = []  # noqa: RUF012 (set per test)
    extra_served = 0

    def _answer(
        self, conn: socket.socket, method: str, path: str, m: re.Match[bytes] | None
    ) -> bool:
        mode, _, name = path.lstrip("/").partition("/")
        if mode not in ("twolengths", "te", "extra") or m is None:
            return super()._answer(conn, method, path, m)
        data = self.files[name]
        start = int(m.group(1))
        stop = min(len(data) - 1, int(m.group(2)))
        body = data[start : stop + 1]
        head = (
            f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{stop}/{len(data)}\r\n"
        )
        if mode == "twolengths":
            head += f"Content-Length: {len(body)}\r\nContent-Length: {len(body) + 7}\r\n\r\n"
            conn.sendall(head.encode() + body + b"\0" * 7)
            return True
        if mode == "te":
            head += "Transfer-Encoding: gzip, chunked\r\n\r\n"
            conn.sendall(head.encode() + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
            return True
        head += f"Content-Length: {len(body)}\r\n\r\n"
        forged = b""
        with self._lock:
            self.extra_served += 1
            nxt = (
                self.expected[self.extra_served] if self.extra_served < len(self.expected) else None
            )
        if nxt is not None:
            a, b = nxt
            part = FORGED[a : b + 1]
            forged = (
                f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{a + len(part) - 1}/"
                f"{len(FORGED)}\r\nContent-Length: {len(part)}\r\n\r\n"
            ).encode() + part
        conn.sendall(head.encode() + body + forged)
        return True


@pytest.fixture(scope="module")
def server() -> Iterator[FramingServer]:
    assert len(FILE) == len(FORGED) and FILE[:144] == FORGED[:144]  # (the same header)
    srv = FramingServer({"m.safetensors": FILE, "forged.safetensors": FORGED})
    yield srv
    srv.stop()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("twolengths", "conflicting Content-Length headers"),
        ("te", "a Transfer-Encoding other than chunked"),
    ],
)
def test_framing_that_could_smuggle_an_answer_is_one_line(
    server: FramingServer, tmp_path: Any, mode: str, expected: str
) -> None:
    server.requests.clear()
    url = f"{server.url}/{mode}/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        f"treetool: error: {url}: the server's answer is not valid HTTP ({expected})\n"
    )
    assert run.stdout == ""
    assert len(server.requests) == 1  # refused, not retried
    assert set(run.connections) == {f"127.0.0.1:{server.port}"}


def test_bytes_past_an_answer_are_never_shown(server: FramingServer, tmp_path: Any) -> None:
    honest = run_cli("get", f"{server.url}/f/m.safetensors", "big", cwd=tmp_path)
    assert_contained(honest, rc=0)
    forged = run_cli("get", f"{server.url}/f/forged.safetensors", "big", cwd=tmp_path)
    assert_contained(forged, rc=0)
    assert "7777" in forged.stdout and "7777" not in honest.stdout
    assert "3.9999e+04" in honest.stdout
    server.requests.clear()
    run_cli("get", f"{server.url}/f/m.safetensors", "big", cwd=tmp_path)
    ranges = [_RANGE.search(r) for _, r in server.requests]
    server.expected = [(int(g.group(1)), int(g.group(2))) for g in ranges if g]
    assert len(server.expected) >= 2  # (an answer with a forged one after it)
    server.extra_served = 0
    before = server.accepted
    run = run_cli("get", f"{server.url}/extra/m.safetensors", "big", cwd=tmp_path)
    assert_contained(run, rc=0)
    assert run.stdout == honest.stdout.replace("/f/", "/extra/")
    assert "7777" not in run.stdout
    # each answer left bytes unread: its connection was closed, never asked again
    assert server.accepted - before == server.extra_served == len(server.expected)


@pytest.mark.parametrize("port", ["99999", "65536", "0"])
def test_port_out_of_range_is_one_line(tmp_path: Any, port: str) -> None:
    url = f"http://127.0.0.1:{port}/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == (
        f"treetool: error: {url}: the URL's port is not a number from 1 to 65535\n"
    )
    assert "ValueError" not in run.stderr and run.connections == []


def test_backslash_in_the_authority_connects_nowhere(server: FramingServer, tmp_path: Any) -> None:
    server.requests.clear()
    url = f"http://a.example\\@127.0.0.1:{server.port}/f/m.safetensors"
    run = run_cli("ls", url, cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.endswith(
        ": the URL's authority (user info, host and port) is not valid (RFC 3986)\n"
    )
    assert run.connections == [] and server.requests == []


def test_password_with_a_slash_is_never_printed(server: FramingServer, tmp_path: Any) -> None:
    server.requests.clear()
    url = f"http://me:Secr/et99@127.0.0.1:{server.port}/f/m.safetensors"
    for args in (("ls", url), ("get", url, "big"), ("ls", "--json", url)):
        run = run_cli(*args, cwd=tmp_path)
        assert_contained(run)
        for text in (run.stdout, run.stderr):
            assert "Secr" not in text and "et99" not in text and "me:" not in text
        assert run.stderr.startswith("treetool: error: http://***@")
    assert server.requests == []

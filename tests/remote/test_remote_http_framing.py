"""Issue 39, points 1-2: HTTP framing by RFC 9112 section 6 and URLs parsed strictly, against
raw-socket servers of this process (threads, so not marked slow): two `Content-Length`s that
disagree are refused; bytes sent past an answer close the connection (never read as the next
answer); a `Transfer-Encoding` other than `chunked` is refused; bad ports, a backslash in the
authority and a `/` in a password are one redacted line; `faß.example` stays `ß` (UTS-46).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from storage_servers import RawServer

import treetool as tt
from treetool._errors import LoadError
from treetool.io._sources._http import HttpSource
from treetool.io._sources._url import parse

BODY = bytes(range(256)) * 400  # 102,400 bytes


class Extra(RawServer):
    """Answers each ranged GET with its bytes, then `extra` bytes; `headers` adds headers."""

    def __init__(self, extra: bytes = b"", headers: Callable[[int], str] | None = None) -> None:
        self.extra, self.headers, self.requests = extra, headers, 0
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                with self._lock:
                    self.requests += 1
                spec = head.decode().split("Range: bytes=")[1].split("\r\n")[0]
                a, b = (int(x) for x in spec.split("-"))
                b = min(b, len(BODY) - 1)
                part = BODY[a : b + 1]
                more = (
                    self.headers(len(part)) if self.headers else f"Content-Length: {len(part)}\r\n"
                )
                conn.sendall(
                    f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{len(BODY)}\r\n"
                    f"{more}\r\n".encode()
                    + part
                    + self.extra
                )
        except OSError:
            return
        finally:
            conn.close()


@pytest.fixture
def servers() -> Iterator[list[RawServer]]:
    started: list[RawServer] = []
    yield started
    for s in started:
        s.stop()


def test_conflicting_content_lengths_are_refused(servers: list[RawServer]) -> None:
    srv = Extra(headers=lambda n: f"Content-Length: {n}\r\nContent-Length: {n + 7}\r\n")
    servers.append(srv)
    url = f"http://127.0.0.1:{srv.port}/f.bin"
    with pytest.raises(LoadError) as info:
        HttpSource(url).read(0, 10)
    assert "conflicting Content-Length headers" in str(info.value)


def test_identical_content_lengths_are_one(servers: list[RawServer]) -> None:
    srv = Extra(headers=lambda n: f"Content-Length: {n}\r\nContent-Length: {n}, {n}\r\n")
    servers.append(srv)
    src = HttpSource(f"http://127.0.0.1:{srv.port}/f.bin")
    assert src.read(70_000, 1000) == BODY[70_000:71_000]


@pytest.mark.parametrize(
    "coding", ["gzip, chunked", "chunked, gzip", "identity", "chunked, chunked"]
)
def test_transfer_encoding_other_than_chunked_is_refused(
    servers: list[RawServer], coding: str
) -> None:
    srv = Extra(headers=lambda n: f"Transfer-Encoding: {coding}\r\n")
    servers.append(srv)
    with pytest.raises(LoadError) as info:
        HttpSource(f"http://127.0.0.1:{srv.port}/f.bin").read(0, 10)
    assert "Transfer-Encoding other than chunked" in str(info.value)


def test_bytes_past_an_answer_are_never_the_next_answer(servers: list[RawServer]) -> None:
    """The extra bytes are a whole forged answer: each read opens a new connection."""
    forged = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 70000-70999/102400\r\n"
    forged += b"Content-Length: 1000\r\n\r\n" + b"\xff" * 1000
    srv = Extra(extra=forged)
    servers.append(srv)
    src = HttpSource(f"http://127.0.0.1:{srv.port}/f.bin")
    assert src.size == len(BODY)
    assert src.read(70_000, 1000) == BODY[70_000:71_000]
    assert src.read(90_000, 500) == BODY[90_000:90_500]
    assert srv.accepted == 3 and srv.requests == 3


@pytest.mark.parametrize("port", ["99999", "0", "65536", "8o", "-1"])
def test_bad_port_is_one_load_error(port: str) -> None:
    url = f"http://127.0.0.1:{port}/m.safetensors"
    with pytest.raises(LoadError) as info:
        tt.load(url)
    assert str(info.value) == f"{url}: the URL's port is not a number from 1 to 65535"


def test_slash_in_password_is_hidden_whole() -> None:
    url = "http://me:Secr/et99@127.0.0.1:1/m.safetensors"
    with pytest.raises(LoadError) as info:
        tt.load(url)
    text = str(info.value)
    assert "Secr" not in text and "et99" not in text and "me:" not in text
    assert (
        text
        == "http://***@127.0.0.1:1/m.safetensors: the URL's port is not a number from 1 to 65535"
    )


@pytest.mark.parametrize(
    "url", ["http://a.example\\@127.0.0.1:1/m", "http://a b@127.0.0.1:1/m", "http://u@v@h/m"]
)
def test_authority_characters_rfc3986_refuses(url: str) -> None:
    with pytest.raises(LoadError) as info:
        tt.load(url)
    assert str(info.value).endswith(
        ": the URL's authority (user info, host and port) is not valid (RFC 3986)"
    )


def test_idna_is_uts46_nontransitional() -> None:
    assert parse("https://faß.example/m").host == "xn--fa-hia.example"
    assert parse("https://FASS.example/m").host == "fass.example"
    assert np.asarray([parse("http://[::1]:8/").port]).tolist() == [8]


@pytest.mark.parametrize("shard", ["%2e%2e/secret.safetensors", "a%2f..%2fsecret.safetensors"])
def test_percent_encoded_shard_name_cannot_leave_the_folder(tmp_path: Any, shard: str) -> None:
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"w": shard}}))
    with pytest.raises(LoadError) as info:
        tt.load(str(index))
    assert "expected a shard file name next to the index" in str(info.value)

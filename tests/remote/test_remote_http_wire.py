"""treetool's own HTTP/1.1 client (`treetool/io/_sources/_wire.py`, driven by `_http.py`)
against raw-socket servers on 127.0.0.1 that answer scripted bytes: chunked bodies (extensions,
trailers, bad sizes, more than asked), HTTP/1.0 and `Connection: close` (a new connection for
the next read) against keep-alive (one connection), informational answers, a body ended by the
close, status lines that are not HTTP, a server that closes before answering (retried), the
request target (non-ASCII percent-encoded, spaces and control characters refused unsent), the
`Host` and `Authorization` headers, and a property: any chunking decodes to the same bytes.

Each server is a thread of this process (no subprocess), so the file is not marked slow.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_servers import RawServer

import treetool as tt
from treetool._errors import LoadError
from treetool._source import source_for
from treetool.io._sources._wire import Connection

#: answer(request head) -> (the bytes to send, whether the connection stays open after them)
Answer = Callable[[bytes], tuple[bytes, bool]]


class Scripted(RawServer):
    """HTTP on a raw socket: every request head is logged, then answered by `self.answer`.
    `accepted` counts the connections, `closed` those it closed."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.closed = 0  # connections this server has closed
        self.heads: list[bytes] = []
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
                    self.heads.append(head)
                out, keep = self.answer(head)
                conn.sendall(out)
                if not keep:
                    return
        except OSError:
            return
        finally:
            conn.close()
            with self._lock:
                self.closed += 1

    def request_lines(self) -> list[str]:
        return [h.split(b"\r\n", 1)[0].decode("latin1") for h in self.heads]


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], Scripted]]:
    """Start a `Scripted` server per call; all are stopped after the test."""
    started: list[Scripted] = []

    def start(answer: Answer) -> Scripted:
        srv = Scripted(answer)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def _header(head: bytes, name: str) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.decode("latin1").partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


def _range(head: bytes, size: int) -> tuple[int, int]:
    """(first, last) byte of the request's `Range: bytes=A-B`, clipped to the file."""
    spec = _header(head, "range")
    assert spec is not None and spec.startswith("bytes="), head
    a, _, b = spec[len("bytes=") :].partition("-")
    return int(a), min(int(b), size - 1)


def _message(status: str, headers: list[tuple[str, str]], version: str = "HTTP/1.1") -> bytes:
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return f"{version} {status}\r\n{lines}\r\n".encode("latin1")


def _chunked(body: bytes, sizes: list[int], ext: bytes = b"", trailer: bytes = b"") -> bytes:
    """`body` in chunks of `sizes` (cycled; hex sizes in alternating case), each size line
    with `ext`, then the last chunk and `trailer` (header lines)."""
    out, at, i = [], 0, 0
    while at < len(body):
        n = min(sizes[i % len(sizes)], len(body) - at)
        size = (f"{n:X}" if i % 2 else f"{n:x}").encode()
        out.append(size + ext + b"\r\n" + body[at : at + n] + b"\r\n")
        at, i = at + n, i + 1
    return b"".join(out) + b"0" + ext + b"\r\n" + trailer + b"\r\n"


def _file(
    data: bytes,
    framing: str = "length",
    version: str = "HTTP/1.1",
    extra: list[tuple[str, str]] | None = None,
    sizes: tuple[int, ...] = (1, 7, 300, 4096),
    before: bytes = b"",
) -> Answer:
    """Honest ranged answers of `data`, framed by a Content-Length (`length`), by chunks
    (`chunked`: extensions and a trailer too) or by the close (`close`: no length);
    `before` is sent ahead of each answer (informational answers)."""

    def answer(head: bytes) -> tuple[bytes, bool]:
        a, b = _range(head, len(data))
        body = data[a : b + 1]
        headers = [("Content-Range", f"bytes {a}-{b}/{len(data)}"), *(extra or [])]
        keep = True
        if framing == "length":
            headers.append(("Content-Length", str(len(body))))
            payload = body
        elif framing == "chunked":
            headers.append(("Transfer-Encoding", "chunked"))
            payload = _chunked(body, list(sizes), b";x=y", b"X-Sum: 1\r\nX-More: two\r\n")
        else:
            payload, keep = body, False
        if any(k.lower() == "connection" and v == "close" for k, v in extra or []):
            keep = False
        return before + _message("206 Partial Content", headers, version) + payload, keep

    return answer


def _safetensors() -> tuple[bytes, dict[str, np.ndarray]]:
    from safetensors.numpy import save

    arrays = {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        "step": np.array([3, -1], dtype=np.int64),
    }
    return save(arrays), arrays


def _assert_same(tree: Any, arrays: dict[str, np.ndarray]) -> None:
    assert sorted(tree) == sorted(arrays)
    for k, v in arrays.items():
        got = np.asarray(tree[k])
        assert got.dtype == v.dtype and got.shape == v.shape
        np.testing.assert_array_equal(got, v)


#: a file past the first 64 KiB block, so that each read after the first is its own GET
BIG = np.random.default_rng(0).integers(0, 256, 100_000, dtype=np.uint8).tobytes()


def _three_reads(url: str) -> list[bytes]:
    """The first GET (which gives the size), then two ranged reads past its block."""
    src = source_for(url)
    assert src.size == len(BIG)
    return [src.read(0, 10), src.read(70_000, 1000), src.read(90_000, 5000)]


_THREE = [BIG[:10], BIG[70_000:71_000], BIG[90_000:95_000]]
_RANGES = ["bytes=0-65535", "bytes=70000-70999", "bytes=90000-94999"]


def _ranges(srv: Scripted) -> list[str | None]:
    return [_header(h, "range") for h in srv.heads]


# 1. chunked answers -------------------------------------------------------------------------


def test_chunked_answer_with_extensions_and_trailer_is_read_exactly(serve: Any) -> None:
    data, arrays = _safetensors()
    srv = serve(_file(data, "chunked"))
    _assert_same(tt.load(f"{srv.url}/m.safetensors"), arrays)
    assert _ranges(srv) == ["bytes=0-65535"]
    big = serve(_file(BIG, "chunked", sizes=(1, 7, 300, 4096, 0x1FFF)))
    assert _three_reads(f"{big.url}/big.bin") == _THREE
    assert _ranges(big) == _RANGES
    assert big.accepted == 1  # read to its trailer: the connection is kept for the next


def test_chunked_answer_bigger_than_asked_is_one_line(serve: Any) -> None:
    honest = _file(BIG, "chunked")

    def answer(head: bytes) -> tuple[bytes, bool]:
        a, b = _range(head, len(BIG))
        if a == 0:
            return honest(head)
        body = BIG[a : a + 2 * (b - a + 1)]  # twice the bytes asked for
        headers = [("Content-Range", f"bytes {a}-{b}/{len(BIG)}"), ("Transfer-Encoding", "chunked")]
        return _message("206 Partial Content", headers) + _chunked(body, [3]), True

    srv = serve(answer)
    url = f"{srv.url}/big.bin"
    src = source_for(url)
    assert src.size == len(BIG)
    with pytest.raises(LoadError) as err:
        src.read(70_000, 10)
    assert str(err.value) == f"{url}: the server sent more than the 10 bytes asked for"
    assert _ranges(srv) == ["bytes=0-65535", "bytes=70000-70009"]


@pytest.mark.parametrize(
    ("chunks", "why"),
    [
        (b"zz\r\nhello\r\n0\r\n\r\n", "a chunk size that is not hexadecimal"),
        (b"0x5\r\nhello\r\n0\r\n\r\n", "a chunk size that is not hexadecimal"),
        (b"-5\r\nhello\r\n0\r\n\r\n", "a chunk size that is not hexadecimal"),
        (b"1_0\r\n0123456789abcdef\r\n0\r\n\r\n", "a chunk size that is not hexadecimal"),
        (b"\r\nhello\r\n0\r\n\r\n", "a chunk size that is not hexadecimal"),
        (b"5\r\nhelloXY\r\n0\r\n\r\n", "a chunk that does not end its line"),
    ],
    ids=["zz", "0x", "minus", "underscore", "empty", "no-crlf-after-data"],
)
def test_bad_chunking_is_not_valid_http_after_one_request(
    serve: Any, chunks: bytes, why: str
) -> None:
    headers = [("Content-Range", "bytes 0-4/5"), ("Transfer-Encoding", "chunked")]
    srv = serve(lambda head: (_message("206 Partial Content", headers) + chunks, True))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == f"{url}: the server's answer is not valid HTTP ({why})"
    assert len(srv.heads) == 1  # never retried


# 2. and 4. when the connection ends: HTTP/1.0, `Connection: close`, a body to the close -----


@pytest.mark.parametrize(
    ("framing", "version", "extra", "connections"),
    [
        ("length", "HTTP/1.0", [], 3),
        ("length", "HTTP/1.1", [("Connection", "close")], 3),
        ("chunked", "HTTP/1.1", [("Connection", "close")], 3),
        ("close", "HTTP/1.1", [], 3),  # no length, no chunks: the body ends at the close
        ("close", "HTTP/1.0", [], 3),
        ("length", "HTTP/1.1", [], 1),  # keep-alive: one connection for every read
        ("length", "HTTP/1.0", [("Connection", "keep-alive")], 1),
    ],
    ids=[
        "http10",
        "close",
        "chunked-close",
        "to-the-close",
        "http10-to-the-close",
        "http11-keepalive",
        "http10-keepalive",
    ],
)
def test_connection_is_reused_only_when_the_answer_allows(
    serve: Any, framing: str, version: str, extra: list, connections: int
) -> None:
    srv = serve(_file(BIG, framing, version, extra))
    assert _three_reads(f"{srv.url}/big.bin") == _THREE
    assert _ranges(srv) == _RANGES
    assert srv.accepted == connections


def test_body_ended_by_the_close_loads_a_file(serve: Any) -> None:
    data, arrays = _safetensors()
    srv = serve(_file(data, "close"))
    _assert_same(tt.load(f"{srv.url}/m.safetensors"), arrays)
    assert (len(srv.heads), srv.accepted) == (1, 1)


# 3. informational answers -------------------------------------------------------------------


_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_PROCESSING = b"HTTP/1.0 102 Processing\r\nX-Step: 1\r\n\r\n"


@pytest.mark.parametrize("before", [_CONTINUE, (_CONTINUE + _PROCESSING) * 4], ids=["one", "eight"])
def test_informational_answers_are_skipped(serve: Any, before: bytes) -> None:
    data, arrays = _safetensors()
    srv = serve(_file(data, before=before))
    _assert_same(tt.load(f"{srv.url}/m.safetensors"), arrays)
    assert len(srv.heads) == 1


@pytest.mark.parametrize(
    ("before", "why"),
    [
        (_CONTINUE * 9, "more than 8 informational answers"),
        ((_CONTINUE + _PROCESSING) * 4 + _CONTINUE, "more than 8 informational answers"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
            "the server switched protocols",
        ),
    ],
    ids=["nine-100", "nine-mixed", "101"],
)
def test_too_many_or_switching_informational_answers(serve: Any, before: bytes, why: str) -> None:
    data, _ = _safetensors()
    srv = serve(_file(data, before=before))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == f"{url}: the server's answer is not valid HTTP ({why})"
    assert len(srv.heads) == 1


# 5. status lines that are not HTTP/1.x ------------------------------------------------------


@pytest.mark.parametrize(
    "status",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/2 206\r\n",
        b"HTTP/1.1 2x6 OK\r\n",
        b"HTTP/1.1 20 OK\r\n",
        b"HTTP/1.1 \xb206 OK\r\n",  # a superscript two (latin-1): str.isdigit() says yes
        b"\r\n",
    ],
    ids=["ssh", "http2", "2x6", "two-digits", "superscript", "blank"],
)
def test_status_line_that_is_not_http_is_one_line_after_one_request(
    serve: Any, status: bytes
) -> None:
    rest = b"Content-Range: bytes 0-4/5\r\nContent-Length: 5\r\n\r\nhello"
    srv = serve(lambda head: (status + rest, True))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert (
        str(err.value) == f"{url}: the server's answer is not valid HTTP (no HTTP/1.x status line)"
    )
    assert len(srv.heads) == 1


@pytest.mark.parametrize("length", ["\xb2", "-5", "0x5", "+5", "1" * 19])
def test_content_length_that_is_not_a_number(serve: Any, length: str) -> None:
    headers = [("Content-Range", "bytes 0-4/5"), ("Content-Length", length)]
    srv = serve(lambda head: (_message("206 Partial Content", headers) + b"hello", True))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == (
        f"{url}: the server's answer is not valid HTTP (a Content-Length that is not a number)"
    )
    assert len(srv.heads) == 1


@pytest.mark.parametrize("claim", ["bytes \xb9-4/5", "bytes 0-\xb3/5", "bytes 0-4/\xb2"])
def test_content_range_with_latin1_digits_is_one_line(serve: Any, claim: str) -> None:
    headers = [("Content-Range", claim), ("Content-Length", "5")]
    srv = serve(lambda head: (_message("206 Partial Content", headers) + b"hello", True))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == (
        f"{url}: the server's Content-Range {claim!r} is not bytes FIRST-LAST/SIZE"
    )
    assert len(srv.heads) == 1


# 6. a server that closes before answering ---------------------------------------------------


def test_server_closing_before_answering_is_retried(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "2")
    srv = serve(lambda head: (b"", False))
    url = f"{srv.url}/m.safetensors"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == (
        f"{url}: read of bytes 0-65535 failed after 2 tries: "
        "the server closed the connection before answering"
    )
    assert (len(srv.heads), srv.accepted) == (2, 2)


# 7. and 8. the request: its target and headers ----------------------------------------------


def test_non_ascii_path_is_sent_percent_encoded(serve: Any) -> None:
    data, arrays = _safetensors()
    srv = serve(_file(data))
    _assert_same(tt.load(f"{srv.url}/dé/ü.safetensors?v=ß"), arrays)
    assert srv.request_lines() == ["GET /d%C3%A9/%C3%BC.safetensors?v=%C3%9F HTTP/1.1"]


@pytest.mark.parametrize(
    "path",
    ["/a b.safetensors", "/a\x01.safetensors", "/a\x7f.safetensors", "/m.safetensors?q=a b",
     "/a\tb.safetensors", "/a\nb.safetensors", "/a\rb.safetensors"],
    ids=["space", "ctrl-a", "del", "space-in-query", "tab", "newline", "cr"],
)  # fmt: skip
def test_url_with_spaces_or_control_characters_sends_nothing(serve: Any, path: str) -> None:
    data, _ = _safetensors()
    srv = serve(_file(data))
    url = f"{srv.url}{path}"
    with pytest.raises(LoadError) as err:
        tt.load(url)
    assert str(err.value) == str(LoadError(f"{url}: the URL holds spaces or control characters"))
    assert len(str(err.value).splitlines()) == 1
    assert (srv.accepted, srv.heads) == (0, [])


def test_host_and_basic_auth_headers(serve: Any) -> None:
    data, arrays = _safetensors()
    srv = serve(_file(data))
    _assert_same(tt.load(f"http://u:p@127.0.0.1:{srv.port}/m.safetensors"), arrays)
    (head,) = srv.heads
    assert _header(head, "host") == f"127.0.0.1:{srv.port}"
    assert _header(head, "authorization") == "Basic dTpw"
    assert _header(head, "accept-encoding") == "identity"
    assert srv.request_lines() == ["GET /m.safetensors HTTP/1.1"]


def test_connection_direct_head_and_body(serve: Any) -> None:
    """`Connection` alone: a HEAD's body is empty, a chunked GET's trailer is not a header,
    and both exchanges share the socket."""
    answers = iter(
        [
            _message("200 OK", [("Content-Length", "99")]),
            _message("200 OK", [("Transfer-Encoding", "chunked"), ("X-A", "1")])
            + b"3;ext\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
        ]
    )
    srv = serve(lambda head: (next(answers), True))
    conn = Connection("http", "127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("HEAD", "/x", {})
        status, reason, headers = conn.head()
        assert (status, reason, headers) == (200, "OK", {"content-length": "99"})
        assert conn.body("HEAD", headers, limit=10) == (b"", True)
        conn.request("GET", "/x", {"Range": "bytes=0-2"})
        status, reason, headers = conn.head()
        assert headers == {"transfer-encoding": "chunked", "x-a": "1"}
        assert conn.body("GET", headers, limit=3) == (b"abc", True)
    finally:
        conn.close()
    assert srv.accepted == 1
    assert srv.request_lines() == ["HEAD /x HTTP/1.1", "GET /x HTTP/1.1"]
    assert _header(srv.heads[1], "range") == "bytes=0-2"


# 9. any chunking decodes to the bytes of a Content-Length answer ----------------------------


@pytest.fixture(scope="module")
def echo() -> Iterator[Scripted]:
    """Answers each request with the bytes its `X-Send` header names (a hex dump)."""

    def answer(head: bytes) -> tuple[bytes, bool]:
        return bytes.fromhex(_header(head, "x-send") or ""), True

    srv = Scripted(answer)
    yield srv
    srv.stop()


@settings(max_examples=25, deadline=None)
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=8),
    ext=st.sampled_from([b"", b";x=y", b"; a=1;b"]),
    trailer=st.sampled_from([b"", b"X-T: 1\r\n"]),
    short=st.integers(1, 3000),
)
def test_any_chunking_decodes_like_a_content_length(
    echo: Scripted, body: bytes, sizes: list[int], ext: bytes, trailer: bytes, short: int
) -> None:
    """Chunked or not, the body is the same and the connection serves the next request;
        asked for fewer bytes, each framing reads exactly one more than asked (so the caller sees
    that more came), and the connection is not kept when the rest was left unread."""
    plain = _message("200 OK", [("Content-Length", str(len(body)))]) + body
    chunked = _message("200 OK", [("Transfer-Encoding", "chunked")]) + _chunked(
        body, sizes, ext, trailer
    )
    conn = Connection("http", "127.0.0.1", echo.port, timeout=5)
    try:
        got = []
        for answer in (plain, chunked, plain):
            conn.request("GET", "/", {"X-Send": answer.hex()})
            _status, _reason, headers = conn.head()
            got.append(conn.body("GET", headers, limit=len(body)))
    finally:
        conn.close()
    assert got == [(body, True)] * 3
    limit = max(0, len(body) - short)  # fewer bytes asked for than the body holds
    if len(body) > limit:
        for answer in (plain, chunked):
            conn = Connection("http", "127.0.0.1", echo.port, timeout=5)
            try:
                conn.request("GET", "/", {"X-Send": answer.hex()})
                _status, _reason, headers = conn.head()
                cut = conn.body("GET", headers, limit=limit)
            finally:
                conn.close()
            # (a Content-Length body of exactly limit + 1 bytes was read whole)
            whole = answer is plain and len(body) == limit + 1
            assert cut == (body[: limit + 1], whole)


def test_kept_connection_the_server_closed_is_not_reused(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that closes each connection after its answer without saying so (as at an
    idle keep-alive timeout): the next read sees the kept connection closed
    (`Connection.quiet`) and opens a new one, spending no try (one try only here)."""
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "1")
    honest = _file(BIG)
    srv = serve(lambda head: (honest(head)[0], False))
    src = source_for(f"{srv.url}/big.bin")

    def closed(n: int) -> None:  # wait until the server has closed its n-th connection
        deadline = time.monotonic() + 10
        while srv.closed < n and time.monotonic() < deadline:
            time.sleep(0.001)
        assert srv.closed == n

    assert src.size == len(BIG)
    closed(1)
    assert src.read(70_000, 1000) == BIG[70_000:71_000]
    closed(2)
    assert src.read(90_000, 5000) == BIG[90_000:95_000]
    assert _ranges(srv) == _RANGES
    assert srv.accepted == 3


def test_host_name_past_ascii_goes_by_idna_or_is_one_line() -> None:
    """An internationalised host name is sent as IDNA (UTS-46: the doctests of `_url.parse`); one
    that IDNA cannot encode (an empty label) is one line, before any connection."""
    url = "http://a..b.bücher/m.safetensors"
    with pytest.raises(LoadError) as info:
        tt.load(url)
    assert str(info.value) == f"{url}: the URL's host name is not a valid domain name or address"

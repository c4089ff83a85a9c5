"""HTTP/1.1 on one socket: the exchanges `HttpSource` makes (a GET or a HEAD, most with a
`Range`), without `http.client`.

`http.client` imports `email`'s parser: 20-30 ms before a remote file's first request could
leave, on the path of every `treetool ls https://...`, and its header parsing cost ~0.3 ms of
CPU per answer, most of a small ranged read's (a pickle's walk makes 129). Here a request is
one `sendall` and an answer's head a few `readline`s of a buffered socket file; a body is read
into one buffer (`Content-Length`), by chunks, or to the close, never more than `limit + 1`
bytes. The limits are `http.client`'s: a line of at most 65,536 bytes, at most 100 headers;
informational (1xx) answers are skipped, at most 8.

Framing follows RFC 9112 section 6: `Content-Length` headers (repeated, or a comma list) must
all say the same number, `Transfer-Encoding` must be exactly `chunked` (no other coding, and
not beside a `Content-Length`), or the answer is refused (`BadHttp`): a server may not make
treetool read one answer's bytes as the next one's. A connection is kept for another request
only when its answer was read to the end and nothing is left unread after it: not in the
socket file's buffer, not in TLS's, not on the socket (`Connection.unread`).

Example (a server that answers one request):
    >>> import socket, threading
    >>> srv = socket.create_server(("127.0.0.1", 0))
    >>> done = threading.Event()
    >>> def answer():
    ...     c, _ = srv.accept()
    ...     _ = c.recv(1024)
    ...     c.sendall(b"HTTP/1.1 206 Partial Content\\r\\nContent-Range: bytes 0-1/9\\r\\n"
    ...               b"Content-Length: 2\\r\\n\\r\\nab")
    ...     done.wait(5)
    ...     c.close()
    >>> threading.Thread(target=answer).start()
    >>> conn = Connection("http", "127.0.0.1", srv.getsockname()[1], timeout=5)
    >>> conn.request("GET", "/f", {"Range": "bytes=0-1"})
    >>> status, reason, headers = conn.head()
    >>> status, reason, headers["content-range"], conn.body("GET", headers, limit=2)
    (206, 'Partial Content', 'bytes 0-1/9', (b'ab', True))
    >>> done.set(); conn.close(); srv.close()
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Any

__all__ = ["BadHttp", "Connection", "Dropped", "tls_context"]

#: the longest status, header or chunk-size line (`http.client._MAXLINE`)
MAX_LINE = 65536
#: the most headers in one answer (`http.client._MAXHEADERS`)
MAX_HEADERS = 100
#: informational (1xx) answers skipped before the real one
MAX_INFO = 8

_END = (b"\r\n", b"\n", b"")  # the blank line that ends a head (or the connection's end)
_tls: Any = None
_tls_lock = threading.Lock()


def _digits(text: str) -> bool:
    """Whether `text` is ASCII digits only (`str.isdigit` also says yes to latin-1's
    superscripts, which `int` refuses).

    Example:
        >>> _digits("206"), _digits("\xb206"), _digits("")
        (True, False, False)
    """
    return text.isascii() and text.isdigit()


class BadHttp(Exception):
    """The answer is not HTTP/1.x within the limits (never worth a retry)."""


class Dropped(ConnectionError):
    """The connection ended before the answer's status line (worth a retry: a kept-alive
    connection the server had closed, a server that restarted)."""


def _framing(headers: dict[str, str]) -> None:
    """Check an answer's framing headers (RFC 9112 section 6) in place: a `Content-Length`
    repeated or listed with one value is that value; lengths that differ, a
    `Transfer-Encoding` other than exactly `chunked`, or both headers at once, are
    `BadHttp` (never the last one wins: the rest would be read as the next answer).

    Example:
        >>> h = {"content-length": "5, 5"}; _framing(h); h
        {'content-length': '5'}
        >>> _framing({"content-length": "5, 6"})
        Traceback (most recent call last):
        ...
        treetool.io._sources._wire.BadHttp: conflicting Content-Length headers
        >>> _framing({"transfer-encoding": "gzip, chunked"})
        Traceback (most recent call last):
        ...
        treetool.io._sources._wire.BadHttp: a Transfer-Encoding other than chunked
    """
    length = headers.get("content-length")
    if length is not None and "," in length:
        values = {v.strip() for v in length.split(",")}
        if len(values) != 1:
            raise BadHttp("conflicting Content-Length headers")
        headers["content-length"] = values.pop()
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.lower() != "chunked":
            raise BadHttp("a Transfer-Encoding other than chunked")
        if length is not None:
            raise BadHttp("both Transfer-Encoding and Content-Length")


def tls_context() -> Any:
    """The TLS context of every `https://` connection (the system's CA certificates, the
    host name checked, HTTP/1.1 by ALPN), made once: loading the certificates takes ~10 ms."""
    global _tls
    with _tls_lock:
        if _tls is None:
            import ssl

            ctx = ssl.create_default_context()
            ctx.set_alpn_protocols(["http/1.1"])
            _tls = ctx
        return _tls


class Connection:
    """One keep-alive connection to `host`:`port` (TLS for `https`), connected at once."""

    __slots__ = ("host", "rfile", "sock", "version")

    def __init__(self, scheme: str, host: str, port: int, timeout: float) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock = tls_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.rfile = sock.makefile("rb")
        name = f"[{host}]" if ":" in host else host  # an IPv6 address
        default = 443 if scheme == "https" else 80
        self.host = name if port == default else f"{name}:{port}"
        self.version = ""

    def settimeout(self, seconds: float) -> None:
        self.sock.settimeout(seconds)

    def request(self, method: str, target: str, headers: dict[str, str]) -> None:
        """Send one request (no body). `target` and the header values must be printable
        ASCII without spaces (the caller checks a URL's)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}", "Accept-Encoding: identity"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))

    def head(self) -> tuple[int, str, dict[str, str]]:
        """(status, reason, headers by lower-case name) of the answer, 1xx ones skipped."""
        rfile = self.rfile
        for _ in range(MAX_INFO + 1):
            line = rfile.readline(MAX_LINE + 1)
            if not line:
                raise Dropped("the server closed the connection before answering")
            if len(line) > MAX_LINE:
                raise BadHttp(f"a status line over {MAX_LINE} bytes")
            version, _, rest = line.decode("iso-8859-1").rstrip("\r\n").partition(" ")
            code, _, reason = rest.partition(" ")
            if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not _digits(code):
                raise BadHttp("no HTTP/1.x status line")
            status = int(code)
            headers = self._headers()
            if status >= 200:
                self.version = version
                _framing(headers)
                return status, reason.strip(), headers
            if status == 101:
                raise BadHttp("the server switched protocols")
        raise BadHttp(f"more than {MAX_INFO} informational answers")

    def _headers(self) -> dict[str, str]:
        rfile = self.rfile
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = rfile.readline(MAX_LINE + 1)
            if line in _END:
                return headers
            if len(line) > MAX_LINE:
                raise BadHttp(f"a header line over {MAX_LINE} bytes")
            name, sep, value = line.decode("iso-8859-1").partition(":")
            if sep and name and name == name.strip():  # (else not a header: ignored)
                key = name.lower()
                # a repeated field is one comma list (RFC 9110 5.3): a second Content-Length
                # or Content-Range is seen, never silently replaced by the last one
                before = headers.get(key)
                headers[key] = value.strip() if before is None else f"{before}, {value.strip()}"
        raise BadHttp(f"more than {MAX_HEADERS} headers")

    def body(self, method: str, headers: dict[str, str], limit: int) -> tuple[bytes, bool]:
        """(the body of a 2xx answer to a GET or a HEAD, whether it was read whole and the
        connection may serve another request): at most `limit + 1` bytes are read, so a
        caller sees that more came. (Other answers are refused before their body.)"""
        if method == "HEAD":
            complete = True
            data = b""
        elif "transfer-encoding" in headers:  # exactly `chunked` (`_framing`)
            data, complete = self._chunks(limit)
        elif "content-length" in headers:
            text = headers["content-length"]
            if not _digits(text) or len(text) > 18:
                raise BadHttp("a Content-Length that is not a number")
            length = int(text)
            data = self.rfile.read(min(length, limit + 1))
            complete = len(data) == length
        else:  # to the connection's end
            data = self.rfile.read(limit + 1)
            complete = False
        said = headers.get("connection", "").lower()
        closes = "close" in said or (self.version == "HTTP/1.0" and "keep-alive" not in said)
        return data, complete and not closes and not self.unread()

    def _chunks(self, limit: int) -> tuple[bytes, bool]:
        rfile = self.rfile
        parts: list[bytes] = []
        total = 0
        while True:
            line = rfile.readline(MAX_LINE + 1)
            if not line:
                return b"".join(parts), False
            if len(line) > MAX_LINE:
                raise BadHttp(f"a chunk-size line over {MAX_LINE} bytes")
            text = line.split(b";", 1)[0].strip()
            if not text or len(text) > 16 or text.strip(b"0123456789abcdefABCDEF"):
                raise BadHttp("a chunk size that is not hexadecimal")
            size = int(text, 16)
            if size == 0:
                self._headers()  # the trailer
                return b"".join(parts), True
            part = rfile.read(min(size, limit + 1 - total))
            parts.append(part)
            total += len(part)
            if total > limit or len(part) < size:
                return b"".join(parts), False
            if rfile.readline(3) not in (b"\r\n", b"\n"):
                raise BadHttp("a chunk that does not end its line")

    def quiet(self) -> bool:
        """Whether this kept connection may carry another request: nothing is left to read
        on it (`unread`). A server that closed it while it was idle (its keep-alive timeout)
        has sent its FIN, which makes it readable; bytes that no request asked for do too.
        No wait (a few us): a request sent on a closed connection would fail and spend a try."""
        return not self.unread()

    def unread(self) -> bool:
        """Whether anything is waiting to be read that no request asked for: bytes in the
        socket file's buffer (a server that sent more than its answer in one packet), in
        TLS's decrypted buffer, or on the socket (more bytes, or the server's FIN), without
        waiting. A closed connection has (True: it cannot be used again)."""
        sock = self.sock
        try:
            pending = getattr(sock, "pending", None)  # (an SSLSocket's decrypted bytes)
            if pending is not None and pending():
                return True
            fd = sock.fileno()
            if not hasattr(select, "poll"):  # (Windows)
                if select.select([fd], [], [], 0)[0]:
                    return True
            else:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                if poller.poll(0):
                    return True
            # the file's buffer: `peek` returns what it holds without reading the socket,
            # or (empty) makes one read, which a timeout of 0 makes return at once
            timeout = sock.gettimeout()
            sock.settimeout(0)
            try:
                return bool(self.rfile.peek(1))
            except OSError:  # (nothing to read: TLS's SSLWantReadError)
                return False
            finally:
                sock.settimeout(timeout)
        except (OSError, ValueError):  # (closed: fileno() is -1)
            return True

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()

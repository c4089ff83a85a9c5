"""`http://` and `https://` files read by `Range` GETs (HTTP/1.1 on a socket: `_wire`), with
keep-alive connections reused across reads.

The answer's `Content-Range` is checked on every read (it must name the bytes asked for), so a server that ignores ranges or lies about them is refused
instead of sending a whole file. Each request has one total deadline (connect, redirects,
headers, whole body: `TREETOOL_REMOTE_TIMEOUT`); redirects stay on the URL's scheme, host and
port unless the user allows more (`TREETOOL_FOLLOW_REDIRECTS`, `--follow-redirects`). Retries
are `RemoteSource`'s (`TREETOOL_REMOTE_RETRIES`: 5xx and dropped connections only).

Example (no request is sent until a read):
    >>> src = HttpSource("https://example.org/model.safetensors")
    >>> src.name, src.remote
    ('https://example.org/model.safetensors', True)
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source, register_scheme, source_for
from treetool._text import safe
from treetool.io._sources._blocks import GUESS_WORKERS
from treetool.io._sources._deadlines import Deadlines
from treetool.io._sources._remote import (
    _FIRST,
    SizedByFirstGet,
    _first_line,
    _timeout,
    _Transient,
)
from treetool.io._sources._url import Url, parse
from treetool.io._sources._wire import BadHttp, Connection, _digits, tls_context

__all__ = ["HttpSource"]

_idle: dict[tuple, list[Any]] = {}  # (scheme, host, port) -> idle keep-alive connections
_idle_lock = threading.Lock()


def _idle_take(key: tuple) -> Any:
    """A kept connection to the server of `key` that is still open (`Connection.quiet`), or
    None; those the server closed meanwhile are closed here too."""
    while True:
        with _idle_lock:
            conns = _idle.get(key)
            conn = conns.pop() if conns else None
        if conn is None or conn.quiet():
            return conn
        conn.close()


def _idle_put(key: tuple, conn: Any) -> None:
    with _idle_lock:
        conns = _idle.setdefault(key, [])
        if len(conns) < GUESS_WORKERS:  # the most requests in flight to one server
            conns.append(conn)
            return
    conn.close()


_deadlines = Deadlines()


@atexit.register
def _close_idle() -> None:
    with _idle_lock:
        for conns in _idle.values():
            for conn in conns:
                conn.close()
        _idle.clear()


def follow_redirects() -> bool:
    """Whether redirects to another scheme, host or port are followed: only when the user
    says so (`--follow-redirects`, `TREETOOL_FOLLOW_REDIRECTS=1`); a file never decides where
    treetool connects."""
    return os.environ.get("TREETOOL_FOLLOW_REDIRECTS", "").lower() in ("1", "true", "yes", "on")


def _basic_auth(u: Url) -> str:
    """The `Authorization` header of a URL's user info (`user:password@`), or "".

    Example:
        >>> _basic_auth(parse("http://me:p%40ss@h/")), _basic_auth(parse("http://h/"))
        ('Basic bWU6cEBzcw==', '')
    """
    if not u.userinfo:
        return ""
    import base64
    import urllib.parse

    user, _, password = u.userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


#: bytes a request line may not hold (`http.client`'s check of a URL's path)
_UNSENDABLE = frozenset(chr(c) for c in [*range(0x21), 0x7F])
#: what `urllib.parse.urlsplit` silently deletes from a URL (it would request another path)
_DELETED = frozenset("\t\r\n")


def _target(name: str, u: Url) -> str:
    """The request target of a parsed URL: its path and query, characters past ASCII
    percent-encoded (as UTF-8, as browsers send them); spaces or control characters, which
    no request line may hold, are one line naming the URL."""
    target = u.target
    if not target.isascii():
        import urllib.parse

        target = "".join(c if c.isascii() else urllib.parse.quote(c) for c in target)
    if not _UNSENDABLE.isdisjoint(target) or not _DELETED.isdisjoint(name):
        raise LoadError(f"{name}: the URL holds spaces or control characters")
    return target


class HttpSource(SizedByFirstGet):
    """A file served over HTTP(S), read by `Range` requests (the server must honour them).
    Its URL is parsed once, here, strictly (`_url.parse`): a bad one is one line at once."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._url = parse(url)

    def _request(
        self, headers: dict[str, str], method: str = "GET", limit: int = 0
    ) -> tuple[int, dict, bytes]:
        """(status, headers, body); a ranged GET answered without 206 is refused unread.

        The whole request (connect, every redirect, the headers and the whole body) has one
        deadline, `TREETOOL_REMOTE_TIMEOUT` seconds: a watchdog (`_deadlines.Deadlines`, one thread for
        every request) shuts the socket when it passes, so a server sending a byte a second
        is cut off too. Redirects stay on the URL's own scheme, host and port (another is
        refused unless `follow_redirects()`), only ever to http(s), at most 5, and a loop
        stops at its first repeat. A connection
        whose answer was read to the end is kept for the next request to that server
        (keep-alive); any other is closed. User info in the URL is sent as basic
        authentication to the URL's own server only.
        """
        import urllib.parse

        deadline = time.monotonic() + _timeout()
        url = self.name
        first = u = self._url
        seen = {url}
        auth = _basic_auth(first)
        for _ in range(6):
            sent = dict(headers)
            if auth and u.origin == first.origin:
                sent["Authorization"] = auth
            status, resp_headers, body, location = self._one(u, sent, method, limit, deadline)
            if location is None:
                return status, resp_headers, body
            nxt = urllib.parse.urljoin(url, location)
            n = urllib.parse.urlsplit(nxt)
            if n.scheme not in ("http", "https"):
                raise LoadError(
                    f"{self.name}: redirected to a {n.scheme or 'relative'}: URL ({nxt}); "
                    "only http(s) redirects are followed"
                )
            if nxt in seen:
                raise LoadError(f"{self.name}: redirect loop (back to {nxt})")
            try:
                u = parse(nxt)
            except LoadError:
                raise LoadError(
                    f"{self.name}: redirected to a URL that is not valid ({nxt})"
                ) from None
            if u.origin != first.origin and not follow_redirects():
                raise LoadError(
                    f"{self.name}: redirected to another scheme, host or port ({nxt}); "
                    "pass --follow-redirects (or set TREETOOL_FOLLOW_REDIRECTS=1) to follow it"
                )
            seen.add(nxt)
            url = nxt
        raise LoadError(f"{self.name}: too many redirects (more than 5)")

    def _one(
        self, u: Url, headers: dict[str, str], method: str, limit: int, deadline: float
    ) -> tuple[int, dict, bytes, str | None]:
        """One HTTP exchange before `deadline`: (status, headers, body, redirect location)."""
        key = u.origin
        target = _target(self.name, u)
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Transient(f"no complete answer within {_timeout():g} s")
        conn = _idle_take(key)
        held: list[Connection] = [conn] if conn is not None else []
        expired = threading.Event()

        def cut() -> None:  # the deadline passed: whatever the server is doing, stop
            expired.set()
            for c in held:
                try:
                    c.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        watchdog = _deadlines.arm(deadline, cut)
        keep = False
        try:
            if conn is None:
                conn = Connection(u.scheme, u.host, u.port, left)
                held.append(conn)
                if expired.is_set():
                    raise TimeoutError
            else:
                conn.settimeout(left)
            conn.request(method, target, headers)
            status, reason, resp_headers = conn.head()
            location = resp_headers.get("location")
            if status in (301, 302, 303, 307, 308) and location:
                return status, {}, b"", location
            if status == 404:
                raise LoadError(f"{self.name}: no such file (HTTP 404)")
            if status in (401, 403):
                raise LoadError(f"{self.name}: access denied (HTTP {status})")
            if status == 416:
                raise LoadError(f"{self.name}: range not satisfiable (HTTP 416)")
            if status >= 500:
                raise _Transient(f"HTTP {status}")
            if status >= 400:
                raise LoadError(f"{self.name}: HTTP {status} {safe(reason)[:80]}")
            if "Range" in headers and status != 206:
                raise LoadError(
                    f"{self.name}: the server does not support range requests "
                    f"(HTTP {status}); refusing to download the whole file"
                )
            body, keep = conn.body(method, resp_headers, limit)
            if expired.is_set():
                raise TimeoutError
            if len(body) > limit and method != "HEAD":
                raise LoadError(
                    f"{self.name}: the server sent more than the {limit} bytes asked for"
                )
            return status, resp_headers, body, None
        except LoadError:
            raise
        except Exception as e:
            if expired.is_set() or isinstance(e, TimeoutError):
                raise _Transient(f"no complete answer within {_timeout():g} s") from None
            if isinstance(e, ConnectionRefusedError):
                raise _Transient("connection refused") from None
            if isinstance(e, BadHttp):  # not HTTP, or past the limits: no retry
                raise LoadError(
                    f"{self.name}: the server's answer is not valid HTTP ({e})"
                ) from None
            if isinstance(e, ConnectionError):
                raise _Transient(_first_line(e) or type(e).__name__) from None
            if isinstance(e, OSError):
                raise LoadError(f"{self.name}: {e.strerror or e}") from None
            raise
        finally:
            in_time = _deadlines.disarm(watchdog)  # (False: the cut ran, or is running)
            if conn is not None:
                if keep and in_time and not expired.is_set():
                    _idle_put(key, conn)
                else:
                    conn.close()

    def prepare_first_get(self) -> bool:
        """Import what the first GET needs, on this thread (`_sources/_early.py` then sends
        it on another); whether it may be sent early (a directory URL has no first GET)."""
        if self.is_dir():
            return False
        if self._url.scheme == "https":
            tls_context()  # (the system's certificates, loaded here)
        return True

    def _first_get(self) -> tuple[int, bytes]:
        """One ranged GET that also gives the size (its `Content-Range`): no HEAD needed."""
        _status, headers, body = self._call(
            f"read of bytes 0-{_FIRST - 1}",
            lambda: self._request({"Range": f"bytes=0-{_FIRST - 1}"}, limit=_FIRST),
        )
        start, end, total = self._content_range(headers)
        if total is None:
            raise LoadError(f"{self.name}: the server does not say the file's size")
        if start != 0 or end != min(_FIRST, total) - 1:
            raise LoadError(
                f"{self.name}: the server answered bytes {start}-{end}/{total} to a request "
                f"for bytes 0-{_FIRST - 1}"
            )
        return total, body

    def _content_range(self, headers: dict) -> tuple[int, int, int | None]:
        """(first, last, total) of an answer's `Content-Range: bytes A-B/T` (T None for `*`);
        a missing or malformed one is one line."""
        value = headers.get("content-range", "")
        unit, _, rest = value.strip().partition(" ")
        span, _, total = rest.partition("/")
        a, _, b = span.partition("-")
        if (
            unit != "bytes"
            or not (_digits(a) and _digits(b) and (_digits(total) or total == "*"))
            or max(len(a), len(b), len(total)) > 18
        ):
            raise LoadError(
                f"{self.name}: the server's Content-Range {safe(value)[:60]!r} is not "
                "bytes FIRST-LAST/SIZE"
            )
        return int(a), int(b), int(total) if total != "*" else None

    def _stat(self) -> int:
        _status, headers, _ = self._request({}, method="HEAD")
        length = headers.get("content-length")
        if length is None or not _digits(length) or len(length) > 18:
            raise LoadError(f"{self.name}: the server does not say the file's size")
        return int(length)

    def _get(self, offset: int, n: int) -> bytes:
        """`n` bytes at `offset`: the answer's `Content-Range` must start there and end
        within the range (fewer bytes, at the end of a file that shrank, are reported as a
        truncated range), or the bytes are refused."""
        _status, headers, body = self._request(
            {"Range": f"bytes={offset}-{offset + n - 1}"}, limit=n
        )
        start, end, total = self._content_range(headers)
        if start != offset or end < start or end > offset + n - 1:
            raise LoadError(
                f"{self.name}: the server answered bytes {start}-{end}/{total} to a request "
                f"for bytes {offset}-{offset + n - 1}"
            )
        return body

    def join(self, name: str) -> Source:
        """The file `name` in this URL's directory, on its server (its query is not kept:
        a signed URL's signature is for one object)."""
        u = self._url
        path = u.path or "/"
        folder = path if path.endswith("/") else path.rsplit("/", 1)[0] + "/"
        return source_for(f"{u.scheme}://{u.authority}{folder}{name}")  # shared with the read

    def list(self) -> list[str]:
        return []  # HTTP has no listing

    def is_dir(self) -> bool:
        return self.name.endswith("/")

    def exists(self) -> bool:
        try:
            _ = self.size
        except LoadError:
            return False
        return True


register_scheme("http", HttpSource)
register_scheme("https", HttpSource)

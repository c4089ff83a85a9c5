"""`http://` and `https://` files read by `Range` GETs over the standard library's
`http.client`, with keep-alive connections reused across reads.

The answer's `Content-Range` is checked on every read, so a server that ignores ranges is
refused unread instead of sending a whole file; redirects are followed a bounded number of
times. Timeouts and retries are `RemoteSource`'s (`TREETOOL_REMOTE_TIMEOUT`,
`TREETOOL_REMOTE_RETRIES`).

Example (no request is sent until a read):
    >>> src = HttpSource("https://example.org/model.safetensors")
    >>> src.name, src.remote
    ('https://example.org/model.safetensors', True)
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from .._errors import LoadError
from ._remote import _FIRST, GUESS_WORKERS, SizedByFirstGet, _first_line, _timeout, _Transient
from ._source import Source, source_for

__all__ = ["HttpSource"]

_idle: dict[tuple, list[Any]] = {}  # (scheme, host, port) -> idle keep-alive connections
_idle_lock = threading.Lock()


def _idle_take(key: tuple) -> Any:
    with _idle_lock:
        conns = _idle.get(key)
        return conns.pop() if conns else None


def _idle_put(key: tuple, conn: Any) -> None:
    with _idle_lock:
        conns = _idle.setdefault(key, [])
        if len(conns) < GUESS_WORKERS:  # the most requests in flight to one server
            conns.append(conn)
            return
    conn.close()


@atexit.register
def _close_idle() -> None:
    with _idle_lock:
        for conns in _idle.values():
            for conn in conns:
                conn.close()
        _idle.clear()


class HttpSource(SizedByFirstGet):
    """A file served over HTTP(S), read by `Range` requests (the server must honour them)."""

    def _request(
        self, headers: dict[str, str], method: str = "GET", limit: int = 0
    ) -> tuple[int, dict, bytes]:
        """(status, headers, body); a ranged GET answered without 206 is refused unread.

        Redirects (a hub sending to its CDN) are followed up to 5 times. A connection whose
        answer was read to the end is kept for the thread's next request to that server
        (keep-alive); any other is closed.
        """
        import http.client
        import urllib.parse

        url = self.name
        for _ in range(6):
            u = urllib.parse.urlsplit(url)
            key = (u.scheme, u.hostname, u.port)
            conn = _idle_take(key)
            if conn is None:
                cls = (
                    http.client.HTTPSConnection
                    if u.scheme == "https"
                    else http.client.HTTPConnection
                )
                conn = cls(u.hostname or "", u.port, timeout=_timeout())
            else:
                conn.timeout = _timeout()
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
            keep = False
            try:
                target = (u.path or "/") + (f"?{u.query}" if u.query else "")
                conn.request(method, target, headers=headers)
                resp = conn.getresponse()
                status = resp.status
                if status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
                    url = urllib.parse.urljoin(url, resp.getheader("Location") or "")
                    continue
                if status == 404:
                    raise LoadError(f"{self.name}: no such file (HTTP 404)")
                if status in (401, 403):
                    raise LoadError(f"{self.name}: access denied (HTTP {status})")
                if status == 416:
                    raise LoadError(f"{self.name}: range not satisfiable (HTTP 416)")
                if status >= 500:
                    raise _Transient(f"HTTP {status}")
                if status >= 400:
                    raise LoadError(f"{self.name}: HTTP {status} {resp.reason}")
                if "Range" in headers and status != 206:
                    raise LoadError(
                        f"{self.name}: the server does not support range requests "
                        f"(HTTP {status}); refusing to download the whole file"
                    )
                body = b"" if method == "HEAD" else resp.read(limit + 1)
                if len(body) > limit and method != "HEAD":
                    raise LoadError(
                        f"{self.name}: the server sent more than the {limit} bytes asked for"
                    )
                keep = resp.isclosed() and not resp.will_close  # read to the end
                return status, {k.lower(): v for k, v in resp.getheaders()}, body
            except TimeoutError:
                raise _Transient(f"timed out after {_timeout():g} s") from None
            except ConnectionRefusedError:
                raise _Transient("connection refused") from None
            except (ConnectionError, http.client.HTTPException) as e:
                raise _Transient(_first_line(e) or type(e).__name__) from None
            except OSError as e:
                raise LoadError(f"{self.name}: {e.strerror or e}") from None
            finally:
                if keep:
                    _idle_put(key, conn)
                else:
                    conn.close()
        raise LoadError(f"{self.name}: too many redirects")

    def _first_get(self) -> tuple[int, bytes]:
        """One ranged GET that also gives the size (its `Content-Range`): no HEAD needed."""
        _status, headers, body = self._call(
            f"read of bytes 0-{_FIRST - 1}",
            lambda: self._request({"Range": f"bytes=0-{_FIRST - 1}"}, limit=_FIRST),
        )
        total = headers.get("content-range", "").rpartition("/")[2]
        if not total.isdigit():
            raise LoadError(f"{self.name}: the server does not say the file's size")
        return int(total), body

    def _stat(self) -> int:
        _status, headers, _ = self._request({}, method="HEAD")
        length = headers.get("content-length")
        if length is None or not length.isdigit():
            raise LoadError(f"{self.name}: the server does not say the file's size")
        return int(length)

    def _get(self, offset: int, n: int) -> bytes:
        return self._request({"Range": f"bytes={offset}-{offset + n - 1}"}, limit=n)[2]

    def join(self, name: str) -> Source:
        base = self.name if self.name.endswith("/") else self.name.rsplit("/", 1)[0] + "/"
        return source_for(base + name)  # shared with the rest of the read

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

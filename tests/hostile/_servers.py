"""Lying HTTP servers on 127.0.0.1 for the hostile remote tests, written on raw sockets so that
each can misbehave in ways `http.server` will not: a byte a second, a wrong `Content-Range`,
redirects elsewhere, storms of 4xx/5xx, huge headers.

`LyingServer` serves `files` (name -> bytes) under `/f/NAME` with honest ranged answers, and
the same files through fault paths (`/MODE/NAME`, see `_answer`). It counts the connections
it accepted and logs every request. `Listener` is a port that only counts connections: a
redirect or a shard name pointing there must leave it at 0.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time

# the storage test servers live beside the remote tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
from storage_servers import RawServer
from storage_servers import SilentServer as Listener

__all__ = ["Listener", "LyingServer"]

_RANGE = re.compile(rb"range:\s*bytes=(\d+)-(\d*)", re.IGNORECASE)
_AUTH = re.compile(rb"authorization:\s*([^\r\n]*)", re.IGNORECASE)


class LyingServer(RawServer):
    """HTTP/1.1 on 127.0.0.1 with keep-alive, ranged reads of `files` and fault paths."""

    def __init__(self, files: dict[str, bytes], other_port: int = 0) -> None:
        self.files = files
        self.other_port = other_port  # where the redirects to "elsewhere" point
        self.requests: list[tuple[str, str]] = []  # (path, range header)
        self.auth: list[str] = []  # the Authorization headers received
        #: name -> (size, head, tail): a file of `size` bytes, `head` then zeros then `tail`,
        #: that exists only as the answers to ranges (`/sparse/NAME`): a server claiming a
        #: huge file whose every byte it will send when asked
        self.sparse: dict[str, tuple[int, bytes, bytes]] = {}
        super().__init__()

    # -- one connection, several requests
    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buf = b""
        try:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                line = head.split(b"\r\n", 1)[0].decode("latin1")
                method, path = line.split(" ")[:2]
                m = _RANGE.search(head)
                a = _AUTH.search(head)
                if a:
                    self.auth.append(a.group(1).decode("latin1"))
                with self._lock:
                    self.requests.append((path, m.group(0).decode() if m else ""))
                if not self._answer(conn, method, path, m):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _send(
        self, conn: socket.socket, status: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        conn.sendall(head.encode("latin1") + body)

    def _answer(
        self, conn: socket.socket, method: str, path: str, m: re.Match[bytes] | None
    ) -> bool:
        """Answer one request; False closes the connection."""
        parts = path.lstrip("/").split("/")
        mode, rest = (parts[0], "/".join(parts[1:])) if len(parts) > 1 else ("", parts[0])
        name = rest.split("?", 1)[0]
        if mode == "redirect":
            kind, _, target = rest.partition("/")
            where = {
                "port": f"http://127.0.0.1:{self.other_port}/f/{target}",
                "host": f"http://localhost:{self.port}/f/{target}",
                "scheme": f"https://127.0.0.1:{self.port}/f/{target}",
                "file": "file:///etc/passwd",
                "ftp": f"ftp://127.0.0.1:{self.other_port}/{target}",
                "loop": f"/redirect/loop2/{target}",
                "loop2": f"/redirect/loop/{target}",
                "same": f"/f/{target}",
            }[kind]
            self._send(conn, "302 Found", [("Location", where), ("Content-Length", "0")], b"")
            return True
        if mode.isdigit():  # a storm of one status
            self._send(conn, f"{mode} Nope", [("Content-Length", "4")], b"nope")
            return True
        if mode == "manyheaders":
            headers = [(f"X-H{i}", "v" * 100) for i in range(1000)]
            self._send(conn, "206 Partial Content", headers, b"")
            return False
        if mode == "longheader":
            self._send(conn, "206 Partial Content", [("X-Long", "v" * 200_000)], b"")
            return False
        if mode == "slowheaders":  # the status line, then a header byte a second, forever
            conn.sendall(b"HTTP/1.1 206 Partial Content\r\n")
            while not self._stop.is_set():
                conn.sendall(b"X")
                time.sleep(0.5)
            return False
        if mode == "sparse" and name in self.sparse and m is not None:
            size, head, tail = self.sparse[name]
            start = int(m.group(1))
            stop = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
            if stop - start > 64 << 20:  # (the server sends what it is asked, up to 64 MiB)
                stop = start + (64 << 20)
            body = _sparse_range(size, head, tail, start, stop + 1)
            headers = [
                ("Content-Range", f"bytes {start}-{stop}/{size}"),
                ("Content-Length", str(len(body))),
            ]
            self._send(conn, "206 Partial Content", headers, body)
            return True
        data = self.files.get(name)
        if data is None:
            self._send(conn, "404 Not Found", [("Content-Length", "0")], b"")
            return True
        if m is None:
            self._send(conn, "200 OK", [("Content-Length", str(len(data)))], data)
            return True
        start = int(m.group(1))
        stop = min(len(data) - 1, int(m.group(2))) if m.group(2) else len(data) - 1
        body = data[start : stop + 1]
        claim = f"bytes {start}-{stop}/{len(data)}"
        if mode == "badrange" and start > 0:  # later reads: the bytes of another range
            claim = f"bytes {start + 7}-{stop + 7}/{len(data)}"
        if mode == "badrangefirst":  # the first answer: bytes from elsewhere in the file
            claim = f"bytes {start + 7}-{stop + 7}/{len(data)}"
        headers = [("Content-Range", claim), ("Content-Length", str(len(body)))]
        if mode == "slowbody":  # honest headers, then the body a byte at a time
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
            conn.sendall(f"HTTP/1.1 206 Partial Content\r\n{lines}\r\n".encode())
            for i in range(len(body)):
                if self._stop.is_set():
                    return False
                conn.sendall(body[i : i + 1])
                time.sleep(0.2)
            return True
        self._send(conn, "206 Partial Content", headers, body)
        return True


def _sparse_range(size: int, head: bytes, tail: bytes, start: int, stop: int) -> bytes:
    """Bytes `start:stop` of a file of `size` bytes: `head`, zeros, then `tail` at the end."""
    out = bytearray(stop - start)
    for base, part in ((0, head), (size - len(tail), tail)):
        lo, hi = max(start, base), min(stop, base + len(part))
        if lo < hi:
            out[lo - start : hi - start] = part[lo - base : hi - base]
    return bytes(out)

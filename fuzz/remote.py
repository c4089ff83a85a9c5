"""The remote mode of the fuzz harness: the input is served by a fuzzed HTTP server on
127.0.0.1, and the reader reads it by URL, through its ranged reads.

An input is `SCRIPT_LEN` bytes of server script, then the file. Request number i (in the
order they arrive, counted per input) is answered as `script[i % SCRIPT_LEN]` says
(`behaviour`): most bytes answer honestly, the others lie the ways a hostile server can (a
5xx or 4xx, a `Content-Range` naming other bytes or another size, a short or long body, no
`Content-Range`, a whole-file 200, a redirect to itself, to its own origin or to another port,
a connection closed unanswered, an answer a few bytes at a time). The reader may only raise
`LoadError`; a connection to the other port (a `Listener` that counts them) is a finding.

Example:
    >>> split(bytes(range(20)))[0] == bytes(range(SCRIPT_LEN))
    True
    >>> behaviour(0), behaviour(200), behaviour(201)
    ('honest', '500', 'bad-start')
"""

from __future__ import annotations

import re
import socket
import threading
import time

#: bytes of server script before the file
SCRIPT_LEN = 8
#: script byte -> what the server does (bytes below 200 answer honestly: most requests of most
#: inputs succeed, so the fuzzer reaches the readers' later reads)
_LIES = (
    "500", "bad-start", "bad-total-big", "bad-total-small", "short", "long", "no-range",
    "whole", "loop", "redirect-same", "redirect-other", "close", "drip", "404", "403",
    "bad-header",
)  # fmt: skip
_RANGE = re.compile(rb"range:\s*bytes=(\d+)-(\d*)", re.IGNORECASE)


def behaviour(byte: int) -> str:
    """What the server does for a request whose script byte is `byte`."""
    return "honest" if byte < 200 else _LIES[(byte - 200) % len(_LIES)]


def split(data: bytes) -> tuple[bytes, bytes]:
    """(server script, file) of an input (a short input is all script, an empty file)."""
    script = data[:SCRIPT_LEN].ljust(SCRIPT_LEN, b"\0")
    return script, data[SCRIPT_LEN:]


class Listener:
    """A port that accepts and counts connections (none may reach it)."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()


class FuzzedServer:
    """Serves `/input` (the file of the current input) as its script says."""

    def __init__(self, other_port: int) -> None:
        self.other_port = other_port
        self.script = b"\0" * SCRIPT_LEN
        self.data = b""
        self._count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/input"
        threading.Thread(target=self._loop, daemon=True).start()

    def serve(self, data: bytes) -> None:
        """Answer the next requests with this input's script and file."""
        with self._lock:
            self.script, self.data = split(data)
            self._count = 0

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        buf = b""
        try:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                with self._lock:
                    what = behaviour(self.script[self._count % SCRIPT_LEN])
                    self._count += 1
                    data = self.data
                path = head.split(b" ", 2)[1].decode("latin1")
                if not self._answer(conn, what, path, _RANGE.search(head), data):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(
        self, conn: socket.socket, what: str, path: str, m: re.Match[bytes] | None, data: bytes
    ) -> bool:
        size = len(data)

        def send(status: str, headers: list[tuple[str, str]], body: bytes) -> None:
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
            conn.sendall(f"HTTP/1.1 {status}\r\n{lines}\r\n".encode("latin1") + body)

        if what == "close":
            return False
        if what in ("500", "404", "403"):
            send(f"{what} Fuzzed", [("Content-Length", "0")], b"")
            return True
        if what == "bad-header":
            conn.sendall(b"HTTP/1.1 206 \xff\xfe\r\nContent-Range: bytes\r\n\r\n")
            return False
        if what.startswith(("loop", "redirect")):
            where = {
                "loop": path,
                "redirect-same": "/input",
                "redirect-other": f"http://127.0.0.1:{self.other_port}/input",
            }[what]
            send("302 Found", [("Location", where), ("Content-Length", "0")], b"")
            return True
        if m is None or what == "whole":
            send("200 OK", [("Content-Length", str(size))], data)
            return True
        start = int(m.group(1))
        stop = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
        if start >= size:
            send("416 Range Not Satisfiable", [("Content-Range", f"bytes */{size}")], b"")
            return True
        body = data[start : stop + 1]
        claim = f"bytes {start}-{stop}/{size}"
        if what == "bad-start":
            claim = f"bytes {start + 3}-{stop + 3}/{size}"
        elif what == "bad-total-big":
            claim = f"bytes {start}-{stop}/{size * 1000 + 7}"
        elif what == "bad-total-small":
            claim = f"bytes {start}-{stop}/{max(0, size // 2)}"
        elif what == "short":
            body = body[: len(body) // 2]
        elif what == "long":
            body = body + b"\0" * 1000
        headers = [("Content-Length", str(len(body)))]
        if what != "no-range":
            headers.insert(0, ("Content-Range", claim))
        if what == "drip":  # the answer a few bytes at a time, within the reader's deadline
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
            raw = f"HTTP/1.1 206 Partial Content\r\n{lines}\r\n".encode() + body
            for i in range(0, min(len(raw), 64), 8):
                conn.sendall(raw[i : i + 8])
                time.sleep(0.001)
            conn.sendall(raw[64:])
            return True
        send("206 Partial Content", headers, body)
        return True

"""Fuzz the HTTP client's response framing (`treetool/io/_sources/_wire.py`) with atheris.

`http_framing.py [--replay FILE ... | --write-seeds DIR | libFuzzer args]`: each input is a
server's answer. Its first byte says how it is read: bit 0, a HEAD (else a GET); bit 1, the
server's end stays open after the bytes (a read past them times out, as a stalled server's
would; else the server closes); bits 2-4, the body `limit` (`LIMITS`). The rest, at most
`MAX_INPUT` bytes, is what the server sends, through a `socket.socketpair` into a
`Connection`: `head()`, then `body()` (a kept connection is never asked for a second answer
here: the client keeps one only when nothing is left unread). A **finding** is anything but the client's own errors
(`BadHttp`, `Dropped`; a `TimeoutError` only when the server's end was left open), a body
longer than `limit + 1` bytes, a whole `Content-Length` body of another length, or an answer
called whole (connection kept) while bytes nobody asked for are still unread. The seeds are
in `corpus/http/` (`SEEDS`, written by `--write-seeds`).

Example:
    >>> h = FramingHarness()
    >>> h.one(SEEDS["ok.http"])
    'ok: 206 body 5 whole kept'
    >>> h.one(b"\\x14" + SEEDS["ok.http"][1:])  # (the server closed: it cannot be kept)
    'ok: 206 body 5 closed'
    >>> h.one(SEEDS["two-lengths.http"])
    'BadHttp: conflicting Content-Length headers'
    >>> h.one(b"\\x16HTTP/1.1 206 OK\\r\\nContent-Length: 2\\r\\n\\r\\nabEXTRA")
    'ok: 206 body 2 closed'
    >>> h.one(b"\\x16HTTP/1.1 200 OK\\r\\nContent-Length: 9\\r\\n\\r\\nab")
    'TimeoutError: timed out'
"""

from __future__ import annotations

import os
import socket
import sys
import traceback

#: libFuzzer flags added when the command line does not give them
DEFAULT_FLAGS = {"-timeout": "10", "-rss_limit_mb": "2048", "-max_len": "4096"}
#: the body limits an input chooses from (bits 2-4 of its first byte)
LIMITS = (0, 1, 5, 100, 4096, 65536, 1 << 20, 1 << 30)
#: the most bytes of an input sent (a socketpair's buffer holds them: no writer thread)
MAX_INPUT = 65536
#: seconds a read waits when the server's end stays open
STALL = 0.005


def _answer(head: str, body: bytes = b"") -> bytes:
    return head.replace("\n", "\r\n").encode("latin1") + body


#: the seeds: name -> input (first byte 0x14: a GET, the server closes, limit 65536; 0x16: its end stays open)
SEEDS = {
    "ok.http": b"\x16"
    + _answer("HTTP/1.1 206 Partial Content\nContent-Range: bytes 0-4/9\nContent-Length: 5\n\n")
    + b"hello",
    "two-answers.http": b"\x16"
    + _answer("HTTP/1.1 206 Partial Content\nContent-Length: 2\n\n", b"ab")
    + _answer("HTTP/1.1 206 Partial Content\nContent-Length: 3\n\n", b"cde"),
    "chunked.http": b"\x16"
    + _answer("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n")
    + b"3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n",
    "two-lengths.http": b"\x14"
    + _answer("HTTP/1.1 206 Partial Content\nContent-Length: 2\nContent-Length: 9\n\n", b"ab"),
    "te-gzip.http": b"\x14"
    + _answer("HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n", b"0\r\n\r\n"),
    "extra.http": b"\x16"
    + _answer("HTTP/1.1 206 Partial Content\nContent-Length: 2\n\n", b"ab")
    + b"HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\n\r\nXYZ",
    "continue.http": b"\x14"
    + _answer("HTTP/1.1 100 Continue\n\nHTTP/1.0 200 OK\nConnection: keep-alive\n\n", b"to-eof"),
    "head.http": b"\x15" + _answer("HTTP/1.1 200 OK\nContent-Length: 1000000\n\n"),
}


class FramingHarness:
    """Reads each input as a server's answer on a fresh socketpair."""

    def __init__(self) -> None:
        from treetool.io._sources import _wire

        self.wire = _wire

    def _connection(self, sock: socket.socket) -> object:
        conn = self.wire.Connection.__new__(self.wire.Connection)
        conn.sock = sock
        conn.rfile = sock.makefile("rb")
        conn.host = "127.0.0.1"
        conn.version = ""
        return conn

    def one(self, data: bytes) -> str:
        """Read the answer(s) `data` describes; return what happened (raise on a finding)."""
        if not data:
            return "empty"
        flags, sent = data[0], data[1 : 1 + MAX_INPUT]
        method = "HEAD" if flags & 1 else "GET"
        stall = bool(flags & 2)
        limit = LIMITS[(flags >> 2) & 7]
        ours, theirs = socket.socketpair()
        conn = self._connection(ours)
        try:
            ours.settimeout(STALL if stall else 5)
            theirs.sendall(sent)
            if not stall:
                theirs.shutdown(socket.SHUT_WR)
            status, _reason, headers = conn.head()
            body, whole = conn.body(method, headers, limit)
            if len(body) > limit + 1:
                raise AssertionError(f"a body of {len(body)} bytes past a limit of {limit}")
            length = headers.get("content-length")
            if whole and method == "GET" and length is not None and int(length) != len(body):
                raise AssertionError(f"a whole body of {len(body)} bytes, said {length}")
            if whole and _left(conn, ours):
                raise AssertionError("an answer called whole with bytes unread after it")
            return f"ok: {status} body {len(body)} {'whole kept' if whole else 'closed'}"
        except (self.wire.BadHttp, self.wire.Dropped) as e:
            return f"{type(e).__name__}: {e}"
        except TimeoutError as e:
            if not stall:
                raise AssertionError("a read timed out although the server had closed") from e
            return f"TimeoutError: {e}"
        finally:
            conn.close()
            theirs.close()


def _left(conn: object, sock: socket.socket) -> bool:
    """Whether bytes are left past what was read: in the socket file's buffer or on the
    socket (checked here, without the client's `unread`)."""
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        try:
            if conn.rfile.peek(1):  # type: ignore[attr-defined]
                return True
        except OSError:
            pass
        try:
            return bool(sock.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            return False
    finally:
        sock.settimeout(timeout)


def replay(paths: list[str]) -> int:
    """Run inputs once each and print what happens; exit 1 if any is a finding."""
    h = FramingHarness()
    bad = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        try:
            said = h.one(data)
        except Exception as e:
            bad += 1
            print(f"{p}: FINDING {type(e).__name__}: {str(e)[:200]!a}")
            traceback.print_exc()
        else:
            print(f"{p}: {said[:200]!a}")
    return 1 if bad else 0


def write_seeds(folder: str) -> int:
    """Write `SEEDS` into `folder`."""
    os.makedirs(folder, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(data)
    return 0


def main(argv: list[str]) -> int:
    """`http_framing.py [--replay FILE ... | --write-seeds DIR | libFuzzer args]`."""
    if len(argv) > 1 and argv[1] == "--replay":
        return replay(argv[2:])
    if len(argv) > 2 and argv[1] == "--write-seeds":
        return write_seeds(argv[2])
    import atheris

    with atheris.instrument_imports(include=["treetool"]):
        import treetool.io._sources._wire  # noqa: F401
    h = FramingHarness()

    def test_one_input(data: bytes) -> None:
        h.one(data)

    flags = argv[1:]
    given = {f.partition("=")[0] for f in flags}
    flags = [f"{k}={v}" for k, v in DEFAULT_FLAGS.items() if k not in given] + flags
    atheris.Setup([argv[0], *flags], test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

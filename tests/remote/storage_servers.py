"""Real local storage servers on 127.0.0.1 at free ports, each with a request log.

- `S3Server`: moto's S3 server (its WSGI app under werkzeug's threaded server, as
  `moto_server` runs it), wrapped to log every request and the bytes it sent back.
- `GcsServer`: gcp-storage-emulator's request handler in a threading HTTP server, logged.
- `HttpServer`: a ranged static-file server on `http.server` with fault paths: `/403/...`
  answers 403, `/hang/...` never answers, `/norange/...` ignores `Range`, `/short/...` sends
  half of each range, `/long/...` a MiB more than each range.

Used by the tests in this folder and by `benchmarks/bench_remote.py`.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

BUCKET = "ckpts"


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`values` set in this process's environment while the block runs (a save by a library
    that reads its settings from the environment: orbax, tensorstore, etils), then put back
    as they were, unset ones unset."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Request:
    """One request as the server saw it: `at` when it arrived and `done` when its answer
    started to be sent, before the client could see any of it (`time.monotonic()`; None
    until then), so that a test can tell which requests were in flight together and which
    one waited for the answer of another."""

    method: str
    path: str
    range: str | None
    sent: int = 0
    at: float = field(default_factory=time.monotonic)
    done: float | None = None


@dataclass
class Log:
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, r: Request) -> None:
        with self.lock:
            self.requests.append(r)

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def bytes_sent(self) -> int:
        return sum(r.sent for r in self.requests)


class _Bucket:
    """A token bucket: `rate` bytes per second, `burst` bytes deep."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.at = now

    def debt(self, n: int, now: float) -> float:
        """Take `n` bytes now; the seconds until they may go (a debt later takers wait for)."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate) - n
        self.at = now
        return -self.tokens / self.rate


class Link:
    """A shaped network link between a server and its clients (the benchmark's "20 ms,
    100 MB/s per connection" rows; tests leave servers on the bare loopback).

    Each request waits `rtt` seconds (its round trip) before it is answered. The bytes of the
    answers go through a token bucket per connection of `rate` bytes per second (`burst`
    bytes deep): as a cloud object store serves one connection (S3's guidance: about 100 MB/s
    per connection, more by parallel ranged GETs), and, with `total`, through one more bucket
    of `total` bytes per second shared by every connection (the client's network interface,
    e.g. 1.25e9 for 10 Gbit/s). `per_connection=False` gives every connection the one bucket
    of `rate` (one pipe shared by all, such as a home line). A connection is the server thread
    answering it (both servers answer each connection on its own thread). Request bodies
    (uploads) are not shaped.

    Example (on a clock that only the waits move):
        >>> now = [0.0]
        >>> def wait(s): now[0] += s
        >>> link = Link(rtt=0.02, rate=1e6, burst=1000, clock=lambda: now[0], sleep=wait)
        >>> link.round_trip(); now[0]
        0.02
        >>> sent = []
        >>> link.send(sent.append, b"x" * 65_536 * 3)  # 196,608 bytes at 1 MB/s, 1,000 free
        >>> round(now[0] - 0.02, 6), [len(p) for p in sent]
        (0.195608, [65536, 65536, 65536])
        >>> str(Link(rate=100e6, total=1.25e9)), str(Link(per_connection=False))
        ('20 ms, 100 MB/s per connection, 1250 MB/s in all', '20 ms, 100 MB/s shared')
    """

    def __init__(
        self,
        rtt: float = 0.02,
        rate: float = 100e6,
        burst: int = 256 * 1024,
        clock: Any = time.monotonic,
        sleep: Any = time.sleep,
        *,
        total: float | None = None,
        per_connection: bool = True,
    ) -> None:
        self.rtt, self.rate, self.burst = rtt, rate, burst
        self.total, self.per_connection = total, per_connection
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._buckets: dict[int, _Bucket] = {}  # connection (server thread) -> its bucket
        self._shared = _Bucket(rate, burst, clock())
        self._all = _Bucket(total, burst, clock()) if total else None

    def __str__(self) -> str:
        how = "per connection" if self.per_connection else "shared"
        text = f"{self.rtt * 1000:g} ms, {self.rate / 1e6:g} MB/s {how}"
        return text + (f", {self.total / 1e6:g} MB/s in all" if self.total else "")

    def round_trip(self) -> None:
        if self.rtt:
            self._sleep(self.rtt)

    def take(self, n: int) -> None:
        """Wait until `n` more bytes may go on this thread's connection."""
        with self._lock:
            now = self._clock()
            bucket = self._shared
            if self.per_connection:
                key = threading.get_ident()
                bucket = self._buckets.get(key) or self._buckets.setdefault(
                    key, _Bucket(self.rate, self.burst, now)
                )
            wait = bucket.debt(n, now)
            if self._all is not None:
                wait = max(wait, self._all.debt(n, now))
        if wait > 0:
            self._sleep(wait)

    def chunks(self, body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
        """`body` in pieces of `size` bytes, each given when the link lets it go."""
        for i in range(0, len(body), size):
            part = body[i : i + size]
            self.take(len(part))
            yield part

    def send(self, write: Any, body: bytes) -> None:
        for part in self.chunks(body):
            write(part)


_S3_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def _ranged_get(environ: dict[str, Any]) -> tuple[str, list, bytes] | None:
    """(status, headers, body) of a plain ranged GET of an object, read from moto's own store
    by a seek (moto copies the whole object for each range); None for any other request."""
    import urllib.parse

    m = _S3_RANGE.fullmatch(environ.get("HTTP_RANGE") or "")
    path = environ.get("PATH_INFO", "").lstrip("/")
    if environ["REQUEST_METHOD"] != "GET" or m is None or environ.get("QUERY_STRING"):
        return None
    bucket, _, key = path.partition("/")
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    try:
        obj = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, urllib.parse.unquote(key))
    except Exception:  # no such bucket: moto answers
        return None
    start = int(m.group(1))
    stop = int(m.group(2)) if m.group(2) else obj.size - 1 if obj is not None else 0
    if obj is None or start >= obj.size or stop < start:
        return None
    stop = min(stop, obj.size - 1)
    with obj.lock:  # moto's own lock of the object's buffer (its reads seek it too)
        obj._value_buffer.seek(start)
        body = obj._value_buffer.read(stop - start + 1)
    modified = obj.last_modified_RFC1123
    headers = [
        ("Content-Type", "binary/octet-stream"),
        ("Content-Length", str(len(body))),
        ("Content-Range", f"bytes {start}-{stop}/{obj.size}"),
        ("Accept-Ranges", "bytes"),
        ("ETag", obj.etag),
        ("Last-Modified", modified),
    ]
    return "206 Partial Content", headers, body


class S3Server:
    """moto's S3 server on 127.0.0.1 at a free port; `endpoint` for `AWS_ENDPOINT_URL`.

    `fast_ranges=True` (the benchmark's) answers plain ranged GETs of objects from moto's store
    with a seek: moto itself copies the whole object for every range, so a walk of 130 small
    reads of a 1 GB object would cost 130 GB of copies server-side, which no S3 does.
    """

    def __init__(self, fast_ranges: bool = False, link: Link | None = None) -> None:
        """`link`: a shaped link for every answer (may be set later, as `server.link`, so
        that the uploads that fill the bucket are not shaped)."""
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            disable_nagle_algorithm = True  # as servers in production: no 40 ms delayed ACKs

            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        self.log = Log()
        self.link = link
        app = DomainDispatcherApplication(create_backend_app)
        log = self.log
        server = self

        def logged(environ: dict[str, Any], start_response: Any) -> Any:
            rec = Request(
                environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("HTTP_RANGE")
            )
            log.add(rec)

            def start(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                rec.done = time.monotonic()
                for k, v in headers:
                    if k.lower() == "content-length" and environ["REQUEST_METHOD"] != "HEAD":
                        rec.sent = int(v)  # counted before the client can see the answer
                return start_response(status, headers, *exc)

            link = server.link
            try:
                if link is not None:
                    link.round_trip()
                fast = _ranged_get(environ) if fast_ranges else None
                if fast is not None:
                    status, headers, body = fast
                    start(status, headers)
                    if link is None:
                        yield body
                    else:
                        yield from link.chunks(body)
                    return
                if link is None:
                    yield from app(environ, start)
                else:
                    for body in app(environ, start):
                        yield from link.chunks(body)
            finally:
                if rec.done is None:
                    rec.done = time.monotonic()

        self._server = make_server("127.0.0.1", 0, logged, threaded=True, request_handler=Quiet)
        self.port = self._server.server_port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Threading(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    #: connections waiting to be accepted (a walk opens up to 128 at once; the default 5
    #: drops SYNs, which clients resend a second later: no server in production does that)
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up
            super().handle_error(request, client_address)


_MEDIA = re.compile(r"^(?:/download)?/storage/v1/b/([^/?]+)/o/([^/?]+)\?(?:.*&)?alt=media")


def _media_generation(storage: Any, path: str) -> str | None:
    """The generation of the object a media download sends (None for other requests)."""
    import urllib.parse

    m = _MEDIA.match(path)
    if m is None:
        return None
    try:
        obj = storage.get_file_obj(m.group(1), urllib.parse.unquote(m.group(2)))
    except Exception:  # NotFound: the emulator answers 404 itself
        return None
    return str(obj.get("generation")) if obj.get("generation") else None


class GcsServer:
    """gcp-storage-emulator on 127.0.0.1 at a free port; `host` for `STORAGE_EMULATOR_HOST`."""

    def __init__(self) -> None:
        from gcp_storage_emulator.server import RequestHandler
        from gcp_storage_emulator.storage import Storage

        self.log = Log()
        self.storage = Storage(use_memory_fs=True)
        log, storage = self.log, self.storage

        class Handler(RequestHandler):
            disable_nagle_algorithm = True

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(storage, *args, **kwargs)

            def send_response(self, code: int, message: str | None = None) -> None:
                # a request that could not be parsed (a gRPC probe) has no path or headers
                headers = getattr(self, "headers", None)
                self._rec = Request(
                    getattr(self, "command", None) or "?",
                    getattr(self, "path", ""),
                    headers.get("Range") if headers is not None else None,
                )
                log.add(self._rec)
                super().send_response(code, message)

            def send_header(self, keyword: str, value: str) -> None:
                if keyword.lower() == "content-length" and hasattr(self, "_rec"):
                    self._rec.sent = int(value)
                super().send_header(keyword, value)

            def end_headers(self) -> None:
                gen = _media_generation(storage, getattr(self, "path", ""))
                if gen is not None and getattr(self, "command", "") == "GET":
                    # real GCS names the generation of the object it sends; tensorstore's
                    # gcs kvstore needs it (the emulator leaves it out)
                    super().send_header("x-goog-generation", gen)
                super().end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _Threading(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.host = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def create_bucket(self, name: str) -> None:
        from gcp_storage_emulator.handlers import buckets

        buckets.create_bucket(name, self.storage)

    def upload(self, bucket: str, key: str, data: bytes) -> None:
        import urllib.parse
        import urllib.request

        url = (
            f"{self.host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
            + urllib.parse.quote(key, safe="")
        )
        req = urllib.request.Request(url, data=data, method="POST")
        req.add_header("Content-Type", "application/octet-stream")
        with urllib.request.urlopen(req) as resp:
            resp.read()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class HttpServer:
    """Static files from `root` with `Range` support, fault paths and a request log."""

    def __init__(self, root: str, latency: float = 0.0, link: Link | None = None) -> None:
        """`latency`: seconds each answer waits before it is sent, as a network's round
        trip would (the benchmark's "HTTP, 20 ms" rows; tests leave it at 0). `link`: a
        shaped link (a round trip per request and a shared rate for the answers' bytes)."""
        self.log = Log()
        self.root = root
        log = self.log
        self._release = threading.Event()
        release = self._release

        class Handler(http.server.BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"
            _rec: Request | None = None  # the request being answered

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _file(self) -> tuple[str, str]:
                mode, _, rest = self.path.lstrip("/").partition("/")
                if mode not in ("403", "hang", "norange", "short", "long"):
                    mode, rest = "", self.path.lstrip("/")
                return mode, os.path.join(root, rest)

            def _answer(self, head: bool) -> None:
                rec = self._rec = Request(self.command, self.path, self.headers.get("Range"))
                log.add(rec)
                if latency:
                    release.wait(latency)  # the round trip of a network
                if link is not None:
                    link.round_trip()
                mode, path = self._file()
                if mode == "hang":
                    release.wait(30)
                    return
                if mode == "403":
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if not os.path.isfile(path):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = os.path.getsize(path)
                m = _RANGE.match(self.headers.get("Range") or "")
                if m and mode != "norange":
                    start = int(m.group(1))
                    stop = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
                    n = max(0, stop - start + 1)
                    with open(path, "rb") as fh:
                        fh.seek(start)
                        body = fh.read(n)
                    if mode == "short":
                        body = body[: len(body) // 2]
                    elif mode == "long":  # a hostile server: far more than asked for
                        body = body + b"\0" * (1 << 20)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{stop}/{size}")
                else:
                    with open(path, "rb") as fh:
                        body = b"" if head else fh.read()
                    self.send_response(200)
                self.send_header("Content-Length", str(size if head else len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if not head:
                    rec.sent = len(body)
                    if link is None:
                        self.wfile.write(body)
                    else:
                        link.send(self.wfile.write, body)

            def do_GET(self) -> None:
                self._answer(head=False)

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def send_response(self, code: int, message: str | None = None) -> None:
                rec = self._rec
                if rec is not None and rec.done is None:
                    rec.done = time.monotonic()  # before the client can see a byte
                super().send_response(code, message)

        self._server = _Threading(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


class RawServer:
    """A TCP server on 127.0.0.1 that answers each connection on its own thread with
    `_serve(conn)` (a subclass's); `accepted` counts the connections. For servers that
    write HTTP by hand (a liar, a script), where `HttpServer` is too honest.
    """

    def __init__(self) -> None:
        import socket

        self.accepted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self._sock.settimeout(0.05)  # wakes to see `stop`
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Any) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()


class SilentServer(RawServer):
    """A TCP server on 127.0.0.1 that accepts every connection and never answers.

    `accepted` counts the connections made: each try of a client is one (or more, where a
    client opens a second connection). Connections stay open until `stop`.
    """

    def __init__(self) -> None:
        self._conns: list[Any] = []
        super().__init__()

    def _serve(self, conn: Any) -> None:
        with self._lock:
            if self._stop.is_set():  # (accepted as it stopped)
                conn.close()
            else:
                self._conns.append(conn)

    def stop(self) -> None:
        super().stop()
        with self._lock:
            for conn in self._conns:
                conn.close()

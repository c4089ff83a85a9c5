"""Remote `Source`s: S3 through obstore (`_s3.py`), GCS through fsspec's gcsfs, HTTP(S) through
ranged GETs (`_http.py`).

Clients are configured by each ecosystem's standard environment, so a user's set-up just works:
`AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_PROFILE`, ... for S3; `STORAGE_EMULATOR_HOST` and application default credentials for GCS.
HTTP uses the standard library: a `Range` GET per read, and the answer's `Content-Range` is
checked, so a server that ignores ranges is refused instead of sending a whole file.

Every request has a total deadline (`TREETOOL_REMOTE_TIMEOUT`, seconds, default 30, the CLI's
`--timeout`: an S3/GCS call, the client's own retries included, or one HTTP request from
connect to the last byte of its body, or a tensorstore read of an orbax array per try), and
transient failures (no answer in time, connection resets, 5xx; never a 4xx) are retried a
bounded number of times (`TREETOOL_REMOTE_RETRIES`, default 3, `--retries`) while the tries
so far took less than the timeout: a server that accepts and never answers, or sends a byte a
second, costs at most about twice the timeout. Failures become one `LoadError` line naming
the URL (its user info and query values hidden, as in every line treetool prints).
Reads bigger than `_CHUNK` are split into chunks fetched in parallel.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

from treetool._errors import LoadError
from treetool._source import Source, check_stop, on_session, register_scheme, source_for
from treetool.io._sources._blocks import BlockReader

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["FsspecSource", "RemoteSource", "SizedByFirstGet"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_CHUNK = 8 << 20
_FIRST = 64 << 10  # the first read of a file: headers (safetensors, npy, msgpack) fit in it
_WORKERS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_fs_cache: dict[Any, Any] = {}  # protocol or (s3, bucket, settings...) -> client


def _timeout() -> float:
    try:
        return max(0.01, float(os.environ.get("TREETOOL_REMOTE_TIMEOUT", "30")))
    except ValueError:
        return 30.0


def _deadline() -> float:
    """The most one S3/GCS call may take, the client's own retries included: the timeout.

    A call that gets no answer in that time counts as one failed try; with the bounded
    retries, a read that never gets an answer fails after `TREETOOL_REMOTE_TIMEOUT` x
    `TREETOOL_REMOTE_RETRIES` seconds, plus the pauses between tries (at most 1 s each).
    """
    return _timeout()


def _retries() -> int:
    try:
        return max(1, int(os.environ.get("TREETOOL_REMOTE_RETRIES", "3")))
    except ValueError:
        return 3


def _executor() -> ThreadPoolExecutor:
    """The pool that fetches the chunks of one big read (its tasks submit nothing)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor  # (and logging: only when used)

            _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="treetool-remote")
        return _pool


_progress: Callable[[int], None] | None = None


def set_progress(hook: Callable[[int], None] | None) -> None:
    """Call `hook(nbytes)` as remote bytes arrive (0 when a read starts); None stops it."""
    global _progress
    _progress = hook


def forget_listings() -> None:
    """Drop the clients' cached listings (objects may have changed since the last read)."""
    for fs in _fs_cache.values():
        if hasattr(fs, "invalidate_cache"):  # fsspec's (obstore caches no listing)
            fs.invalidate_cache()
    _walks.clear()


#: prefix URL -> {relative key: size} of every object under it (see `FsspecSource.walk`)
_walks: dict[str, dict[str, int]] = {}


def listed(url: str) -> tuple[dict[str, int], str] | None:
    """The listing made (by `FsspecSource.walk`) of a prefix holding `url`, and the key of
    `url` relative to that prefix ("" for the prefix itself); None if none was made."""
    url = url.rstrip("/")
    for prefix, found in tuple(_walks.items()):  # a snapshot: another read may add one
        if url == prefix:
            return found, ""
        if url.startswith(prefix + "/"):
            return found, url[len(prefix) + 1 :]
    return None


#: how many prefixes' listings are kept
_WALKS_KEPT = 64
_walks_lock = threading.Lock()


def keep_walk(url: str, found: dict[str, int]) -> None:
    """Keep the listing of the prefix `url` (the oldest dropped past `_WALKS_KEPT`; two reads
    at once may list from two threads)."""
    with _walks_lock:
        _walks[url] = found
        while len(_walks) > _WALKS_KEPT:
            del _walks[next(iter(_walks))]


#: the most objects one listing may hold (a hostile bucket cannot make it unbounded)
MAX_LISTED = 1_000_000


class _Transient(Exception):
    """A failure worth retrying (timeout, reset connection, server error)."""


class RemoteSource(Source):
    """Shared by the remote sources: retries, parallel chunked reads, block-cached files."""

    remote = True
    #: seconds the last request took (the first GET's included): a `BlockReader` made after
    #: the size was known reads ahead from its first jump when requests are slow
    latency = 0.0

    def __init__(self, url: str) -> None:
        self.name = url
        self._size: int | None = None
        self._head = b""  # the first bytes read from offset 0: detection and reading share them

    # subclasses: one ranged read, and the size
    def _get(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def _stat(self) -> int:
        raise NotImplementedError

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        """`fn()`, tried again on a transient failure (5xx, a dropped connection, no answer
        in time) at most `TREETOOL_REMOTE_RETRIES` times in all, and no new try once the
        tries so far took `TREETOOL_REMOTE_TIMEOUT` (so a read fails within about twice the
        timeout); a 4xx or any other failure is never tried again."""
        tries = _retries()
        budget = time.monotonic() + _timeout()
        for i in range(tries):
            try:
                return fn()
            except _Transient as e:
                pause = min(0.05 * 2**i, 1.0)
                if i + 1 == tries or time.monotonic() + pause >= budget:
                    done = f"{i + 1} {'try' if i == 0 else 'tries'}"
                    raise LoadError(f"{self.name}: {what} failed after {done}: {e}") from None
                time.sleep(pause)
        raise AssertionError("unreachable")

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self._call("stat", self._stat)
        return self._size

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        if offset + n <= len(self._head):
            return self._head[offset : offset + n]
        if not self._head and offset + n <= _FIRST:
            # small reads near the start (headers, sniffing) share one first block
            self._head = self._first_block()
            if offset + n <= len(self._head):
                return self._head[offset : offset + n]
        return self._fetch(offset, n)

    def _first_block(self) -> bytes:
        """The first `_FIRST` bytes (or the whole file, if smaller)."""
        return self._fetch(0, min(_FIRST, self.size))

    def _fetch(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        check_stop(self.name)
        if _progress is not None:
            _progress(0)
        if n <= _CHUNK:
            t0 = time.perf_counter()
            data = self._call(
                f"read of bytes {offset}-{offset + n - 1}", lambda: self._get(offset, n)
            )
            self.latency = time.perf_counter() - t0
        else:
            buf = bytearray(n)
            starts = range(offset, offset + n, _CHUNK)

            def one(start: int) -> int:
                m = min(_CHUNK, offset + n - start)
                got = self._call(
                    f"read of bytes {start}-{start + m - 1}", lambda: self._get(start, m)
                )
                buf[start - offset : start - offset + len(got)] = got
                return len(got)

            got = sum(_executor().map(one, starts))
            data = bytes(buf) if got == n else bytes(buf[:got])
        if _progress is not None:
            _progress(len(data))
        return self._exactly(data, n, offset)

    def _exactly(self, data: bytes, n: int, offset: int) -> bytes:
        """`data`, the answer to a range of `n` bytes at `offset`: more or fewer is one line."""
        if len(data) > n:
            raise LoadError(f"{self.name}: the server sent more than the {n} bytes asked for")
        if len(data) != n:
            raise LoadError(
                f"{self.name}: truncated range: expected {n} bytes at offset {offset}, "
                f"the server sent {len(data)}"
            )
        return data

    def open(self) -> IO[bytes]:
        return cast(IO[bytes], BlockReader(self))  # a RawIOBase, typed as a file

    def map_requests(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        todo = list(items)
        if len(todo) <= 1:
            return [fn(x) for x in todo]
        return list(_executor().map(fn, todo))  # in parallel on the read pool


class SizedByFirstGet(RemoteSource):
    """A remote source whose first ranged GET (of the first `_FIRST` bytes) also says the
    object's size: `size` costs that GET, never a separate HEAD, and the block it brings is
    kept for the reads near the start (a safetensors shard's header costs one request)."""

    def _first_get(self) -> tuple[int, bytes]:
        """(the object's size, its first `min(_FIRST, size)` bytes) in one ranged GET."""
        raise NotImplementedError

    @property
    def size(self) -> int:
        if self._size is None:
            self._head = self._first_block()  # sets the size
        return self._size  # type: ignore[return-value]

    def _first_block(self) -> bytes:
        if self._size is not None:
            return super()._first_block()
        if _progress is not None:
            _progress(0)
        t0 = time.perf_counter()
        size, body = self._first_get()
        self.latency = time.perf_counter() - t0
        self._size = size
        body = self._exactly(body, min(_FIRST, size), 0)
        if _progress is not None:
            _progress(len(body))
        return body


# --- S3 and GCS through fsspec --------------------------------------------------------------


def _quiet_client_logs() -> None:
    """The clients log their retries and tracebacks; treetool reports one line instead."""
    import logging

    for name in ("fsspec", "gcsfs", "google"):
        log = logging.getLogger(name)
        if not log.handlers:
            log.addHandler(logging.NullHandler())
            log.propagate = False


def _filesystem(protocol: str) -> Any:
    fs = _fs_cache.get(protocol)
    if fs is not None:
        return fs
    _quiet_client_logs()
    t = _timeout()
    try:
        from gcsfs.core import GCSFileSystem  # the plain client: no bucket-layout probes

        fs = GCSFileSystem(token=_gcs_token(), requests_timeout=t, skip_instance_cache=True)
    except ImportError as e:
        raise LoadError(
            f"reading {protocol}:// needs the optional clients: pip install 'treetool[remote]' ({e.name} is missing)"
        ) from None
    _fs_cache[protocol] = fs
    return fs


def _gcs_token() -> str:
    """How gcsfs authenticates, decided without probing the network.

    The emulator needs none; application default credentials when they are configured (a key
    file, `gcloud auth application-default login`) or on a Google Cloud VM (its metadata
    server); otherwise anonymous (public buckets read, private ones answer 401/403, reported
    as one line). gcsfs's own chain probes the metadata server: 16 s off Google Cloud.
    """
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return "anon"
    config = os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud")
    if os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.isfile(
        os.path.join(config, "application_default_credentials.json")
    ):
        return "google_default"
    try:
        with open("/sys/class/dmi/id/product_name") as fh:
            if "Google" in fh.read():
                return "google_default"
    except OSError:
        pass
    return "anon"


def _split(url: str) -> tuple[str, str]:
    _scheme, rest = url.split("://", 1)
    return "gs", rest


class FsspecSource(RemoteSource):
    """An object in GCS (`gs://bucket/key`), read through fsspec's gcsfs."""

    def __init__(self, url: str, fs: Any = None) -> None:
        super().__init__(url.rstrip("/") if url.count("/") > 3 else url)
        self._protocol, self._path = _split(self.name)
        self._fs = fs

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = _filesystem(self._protocol)
        return self._fs

    def _wrap(self, fn: Callable[[], _T]) -> _T:
        """Run a client call, turning its failures into one line (or `_Transient`)."""
        try:
            return fn()
        except FileNotFoundError:
            bucket = self._path.split("/", 1)[0]
            raise LoadError(
                f"{self.name}: no such object (bucket {bucket!r} or its key does not exist)"
            ) from None
        except PermissionError as e:
            raise LoadError(f"{self.name}: access denied (403): {_first_line(e)}") from None
        except (TimeoutError, ConnectionError) as e:
            if type(e).__name__ == "FSTimeoutError":  # the whole call, client retries included
                raise _Transient(f"no answer within {_deadline():g} s") from None
            raise _Transient(_first_line(e) or type(e).__name__) from None
        except LoadError:
            raise
        except Exception as e:
            raise _classify(self.name, e) from None

    def _stat(self) -> int:
        info = self._wrap(lambda: self.fs.info(self._path, timeout=_deadline()))
        if info.get("type") == "directory":
            raise LoadError(f"{self.name}: a prefix (directory), not an object")
        return int(info["size"])

    def _get(self, offset: int, n: int) -> bytes:
        return self._wrap(
            lambda: self.fs.cat_file(self._path, start=offset, end=offset + n, timeout=_deadline())
        )

    def read_all(self) -> bytes:
        """The whole object in one request (small files: an index)."""
        return self._call(
            "read", lambda: self._wrap(lambda: self.fs.cat_file(self._path, timeout=_deadline()))
        )

    def join(self, name: str) -> Source:
        base = self.name if self._size is None and self.is_dir() else self.name.rsplit("/", 1)[0]
        return source_for(f"{base}/{name}")  # shared with the rest of the read

    def list_parent(self) -> None:
        """List this object's prefix once: the client caches the sizes of its neighbours."""
        parent = self._path.rsplit("/", 1)[0]
        try:
            self._wrap(lambda: self.fs.ls(parent, detail=True, timeout=_deadline()))
        except LoadError:
            pass

    def list(self) -> list[str]:
        try:
            entries = self._wrap(lambda: self.fs.ls(self._path, detail=False, timeout=_deadline()))
        except LoadError:
            return []
        return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def walk(self) -> dict[str, int]:
        """`{relative key: size}` of every object under this prefix, listed once (flat,
        kept until the next read starts)."""
        known = _walks.get(self.name)
        if known is not None:
            return known
        try:
            entries = self._call(
                "listing",
                lambda: self._wrap(
                    lambda: self.fs.find(self._path, detail=True, timeout=_deadline())
                ),
            )
        except LoadError as e:
            if "no such object" in str(e):
                entries = {}
            else:
                raise
        if len(entries) > MAX_LISTED:
            raise LoadError(f"{self.name}: more than {MAX_LISTED} objects under this prefix")
        lead = self._path.rstrip("/") + "/"
        out = {
            k[len(lead) :]: int(v.get("size") or 0)
            for k, v in entries.items()
            if k.startswith(lead) and v.get("type") != "directory"
        }
        keep_walk(self.name, out)
        return out

    def is_dir(self) -> bool:
        try:
            return bool(self._wrap(lambda: self.fs.isdir(self._path, timeout=_deadline())))
        except LoadError:
            return False

    def exists(self) -> bool:
        try:
            return bool(self._wrap(lambda: self.fs.exists(self._path, timeout=_deadline())))
        except LoadError:
            return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else ""


def _classify(url: str, e: Exception) -> Exception:
    """A client's exception as a `LoadError` line, or `_Transient` for what deserves a retry."""
    name = type(e).__name__
    text = _first_line(e)
    if name in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"):
        return LoadError(
            f"{url}: no credentials found (S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
            "AWS_PROFILE; GCS: application default credentials)"
        )
    if "Forbidden" in text or "AccessDenied" in text or "403" in text:
        return LoadError(f"{url}: access denied (403): {text}")
    if "NoSuchBucket" in text or "NoSuchKey" in text:
        return LoadError(f"{url}: no such object ({text})")
    if (
        isinstance(e, (TimeoutError, ConnectionError))
        or "Timeout" in name
        or "timeout" in text.lower()
        or "Connect" in name
        or "ServerDisconnected" in name
    ):
        return _Transient(text or name)
    return LoadError(f"{url}: {name}: {text}" if text else f"{url}: {name}")


on_session(forget_listings)  # listings cached by the clients are fresh for each read
register_scheme("gs", FsspecSource)
register_scheme("gcs", FsspecSource)

"""Where a checkpoint's bytes live: the `Source` base class, local files and the scheme registry.

Readers ask a `Source` for its size, ranged reads, a seekable file object, a sibling (`join`)
and a listing; they never call `open()` or `os.path` themselves, so each format is written once
for local files and for `s3://`, `gs://` and `http(s)://` objects.

A URL's scheme picks its `Source` class from a registry (`register_scheme`). The remote
sources register themselves when their module is imported, and `SCHEME_MODULES` names that
module for each scheme, so `source_for(url)` imports it (and its client) only when a URL of
that scheme is first read. This module sits below the leaf types: a URL-backed `LazyArray`
(made by a reader, unpickled, or built by hand) opens its bytes here, whether or not
`treetool.io` was ever imported.

Example:
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with open(p, "wb") as fh:
    ...     _ = fh.write(b"0123456789")
    >>> src = source_for(p)
    >>> src.size, src.read(2, 3), src.join("y.bin").name == os.path.join(os.path.dirname(p), "y.bin")
    (10, b'234', True)
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

from treetool._errors import LoadError

__all__ = [
    "SCHEME_MODULES",
    "LocalSource",
    "Source",
    "check_stop",
    "is_url",
    "on_session",
    "register_scheme",
    "session",
    "source_for",
    "stop_event",
    "stop_on",
]

_T = TypeVar("_T")
_R = TypeVar("_R")

#: scheme -> the module that registers its `Source` class when imported (`register_scheme`);
#: `source_for` imports it the first time a URL of that scheme is read
SCHEME_MODULES: dict[str, str] = {
    "s3": "treetool.io._sources._s3",
    "gs": "treetool.io._sources._remote",
    "gcs": "treetool.io._sources._remote",
    "http": "treetool.io._sources._http",
    "https": "treetool.io._sources._http",
}
_SCHEMES = tuple(f"{scheme}://" for scheme in SCHEME_MODULES)
#: scheme -> the `Source` class (or factory) its module registered
_REGISTRY: dict[str, Callable[[str], Source]] = {}
#: `read_many` reads ranges at most this far apart as one request (the gap is dropped) ...
_MANY_GAP = 64 << 10
#: ... up to this size
_MANY_MAX = 8 << 20


def is_url(target: str) -> bool:
    """Whether `target` names a remote object (`s3://`, `gs://`, `http(s)://`).

    Example:
        >>> is_url("s3://bucket/model.safetensors"), is_url("/tmp/model.safetensors")
        (True, False)
    """
    return isinstance(target, str) and target.startswith(_SCHEMES)


def register_scheme(scheme: str, factory: Callable[[str], Source]) -> None:
    """Read URLs `scheme://...` through `factory(url)` (a `Source` subclass).

    The remote source modules call it when imported; `SCHEME_MODULES` says which module to
    import for a scheme, so that nothing imports a client before a URL of its scheme is read.

    Example:
        >>> class Memory(LocalSource):
        ...     pass
        >>> register_scheme("mem", lambda url: Memory(url[len("mem://"):]))
        >>> type(source_for("mem:///tmp/x")).__name__, is_url("mem:///tmp/x")
        ('Memory', True)
        >>> unregister_scheme("mem")
    """
    global _SCHEMES
    _REGISTRY[scheme] = factory
    if f"{scheme}://" not in _SCHEMES:
        _SCHEMES = (*_SCHEMES, f"{scheme}://")


def unregister_scheme(scheme: str) -> None:
    """Forget a scheme registered by `register_scheme` (not one of `SCHEME_MODULES`)."""
    global _SCHEMES
    _REGISTRY.pop(scheme, None)
    if scheme not in SCHEME_MODULES:
        _SCHEMES = tuple(s for s in _SCHEMES if s != f"{scheme}://")


def _remote_source(url: str) -> Source:
    """A new `Source` for `url`, from the class its scheme registered (its module imported
    on first use)."""
    scheme = url.partition("://")[0]
    factory = _REGISTRY.get(scheme)
    if factory is None:
        module = SCHEME_MODULES.get(scheme)
        if module is None:
            raise LoadError(f"{url}: no source reads {scheme}:// URLs")
        importlib.import_module(module)  # it registers its scheme(s)
        factory = _REGISTRY.get(scheme)
        if factory is None:
            raise LoadError(f"{url}: {module} registered no source for {scheme}:// URLs")
    return factory(url)


class Source:
    """Bytes of one file, local or remote: size, ranged reads, a file object, siblings.

    Attributes:
        name: how the file is shown (the local path or the URL).
        remote: whether reads cross the network (readers then avoid memory maps).
    """

    name: str
    remote: bool = False

    @property
    def size(self) -> int:
        """The file's size in bytes (`LoadError` when it does not exist)."""
        raise NotImplementedError

    def read(self, offset: int, n: int) -> bytes:
        """Exactly `n` bytes at `offset` (`LoadError` naming the range when fewer exist)."""
        raise NotImplementedError

    def open(self) -> IO[bytes]:
        """A seekable binary file object over the bytes (remote ones read ahead in blocks)."""
        raise NotImplementedError

    def read_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Exactly the bytes of each `(offset, n)` range, in order (`LoadError` as `read`).

        Ranges a few KiB apart are read as one request (at most 8 MiB, or one range's size),
        the gaps dropped; remotely, the requests run in parallel on the read pool. A client
        with a native multi-range call may override this.

        Example:
            >>> import os, tempfile
            >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
            >>> with open(p, "wb") as fh:
            ...     _ = fh.write(b"0123456789")
            >>> source_for(p).read_many([(0, 2), (5, 3), (9, 1)])
            [b'01', b'567', b'9']
        """
        merged: list[tuple[int, int, list[int]]] = []  # (start, end, indices of the ranges)
        for i, (off, n) in enumerate(ranges):
            if merged:
                start, end, members = merged[-1]
                if end <= off <= end + _MANY_GAP and off + n - start <= max(_MANY_MAX, n):
                    merged[-1] = (start, max(end, off + n), [*members, i])
                    continue
            merged.append((off, off + n, [i]))
        blobs = self.map_requests(lambda m: self.read(m[0], m[1] - m[0]), merged)
        out: list[bytes] = [b""] * len(ranges)
        for (start, _, members), blob in zip(merged, blobs):
            if len(members) == 1:
                out[members[0]] = blob
                continue
            view = memoryview(blob)
            for i in members:
                off, n = ranges[i]
                out[i] = bytes(view[off - start : off - start + n])
        return out

    def map_requests(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        """`[fn(x) for x in items]`: requests one after the other; a remote source runs them
        in parallel on its read pool."""
        return [fn(x) for x in items]

    def join(self, name: str) -> Source:
        """The file `name` next to (or under, for a directory) this one."""
        raise NotImplementedError

    def list(self) -> list[str]:
        """Names of the entries under this directory or prefix (empty when there are none)."""
        raise NotImplementedError

    def is_dir(self) -> bool:
        """Whether this names a directory (a prefix with entries, remotely)."""
        raise NotImplementedError

    def exists(self) -> bool:
        """Whether a file or directory of that name exists."""
        raise NotImplementedError

    def buffer(self) -> Any:
        """The bytes as an indexable buffer (`buf[i]`, `buf[a:b]`, `len(buf)`): a memory map
        locally, a block-cached reader remotely. The caller closes it."""
        return self.open()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class LocalSource(Source):
    """A file on the local disk."""

    def __init__(self, path: str) -> None:
        self.name = path

    @property
    def size(self) -> int:
        try:
            return os.path.getsize(self.name)
        except FileNotFoundError:
            raise LoadError(f"{self.name}: no such file or directory") from None
        except OSError as e:
            raise LoadError(f"{self.name}: {e.strerror or e}") from None

    def read(self, offset: int, n: int) -> bytes:
        check_stop(self.name)
        with open(self.name, "rb") as fh:
            fh.seek(offset)
            data = fh.read(n)
        if len(data) != n:
            raise LoadError(
                f"{self.name}: truncated: expected {n} bytes at offset {offset}, found {len(data)}"
            )
        return data

    def open(self) -> IO[bytes]:
        check_stop(self.name)
        return open(self.name, "rb")

    def join(self, name: str) -> Source:
        base = self.name if os.path.isdir(self.name) else os.path.dirname(self.name)
        return LocalSource(os.path.join(base, name))

    def list(self) -> list[str]:
        try:
            return sorted(os.listdir(self.name))
        except OSError:
            return []

    def is_dir(self) -> bool:
        return os.path.isdir(self.name)

    def exists(self) -> bool:
        return os.path.exists(self.name)

    def buffer(self) -> Any:
        import mmap

        check_stop(self.name)
        with open(self.name, "rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def source_for(target: str | os.PathLike | Source, *, reuse: bool = False) -> Source:
    """The `Source` of a local path or a URL (`s3://`, `gs://`, `http(s)://`).

    Remote sources are shared for the same URL while a read is in progress (so that detection
    and reading cost one set of requests); the URL's scheme picks the class
    (`register_scheme`), whose module and client are imported only here. `reuse=True`
    (a lazy leaf reading its bytes later) also takes one of the last sources made for that URL,
    whose size and first block are known.
    """
    if isinstance(target, Source):
        return target
    target = os.fspath(target)
    if is_url(target):
        shared = _session.get()
        if shared is not None and target in shared:
            return shared[target]
        if reuse and target in _recent:
            return _recent[target]
        src = _remote_source(target)
        if shared is not None:
            shared[target] = src
        with _recent_lock:  # two reads at once (a diff's sides) make sources from two threads
            _recent[target] = src
            while len(_recent) > 64:
                del _recent[next(iter(_recent))]
        return src
    return LocalSource(target)


_recent: dict[str, Source] = {}  # the last remote sources made, oldest first
_recent_lock = threading.Lock()


_session: contextvars.ContextVar[dict[str, Source] | None] = contextvars.ContextVar(
    "treetool_sources", default=None
)


_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "treetool_stop", default=None
)


@contextlib.contextmanager
def stop_on(event: threading.Event) -> Iterator[None]:
    """Reads made in this context (this thread) fail with one `LoadError` line once `event`
    is set: a read running beside another that failed, or that was interrupted, stops at its
    next request (remote), its next open or ranged read of a local file, or its pickle walk's
    next batch of items (`stop_event`), instead of reading on for nothing.

    Example:
        >>> import threading
        >>> with stop_on(threading.Event()):
        ...     pass
    """
    token = _stop.set(event)
    try:
        yield
    finally:
        _stop.reset(token)


def stop_event() -> threading.Event | None:
    """This context's stop event (`stop_on`), or None: a long walk over a memory map takes
    it once and checks `is_set()` now and then (`check_stop` raises the line)."""
    return _stop.get()


def check_stop(name: str) -> None:
    """Raise the one line of a stopped read if this context's stop event is set."""
    event = _stop.get()
    if event is not None and event.is_set():
        raise LoadError(f"{name}: read stopped (the other side of the diff failed)")


_SESSION_HOOKS: list[Callable[[], None]] = []


def on_session(hook: Callable[[], None]) -> None:
    """Call `hook()` when each outermost `session` starts (the remote sources drop the
    listings their clients cached: objects may have changed since the last read)."""
    if hook not in _SESSION_HOOKS:
        _SESSION_HOOKS.append(hook)


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Share remote sources (their size and first block) by URL until the block ends."""
    if _session.get() is not None:
        yield
        return
    token = _session.set({})
    for hook in _SESSION_HOOKS:
        hook()  # e.g. listings cached by the remote clients are fresh for each read
    try:
        yield
    finally:
        _session.reset(token)

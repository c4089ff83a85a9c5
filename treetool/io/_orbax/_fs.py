"""Where an orbax checkpoint's files live: a local directory, or a prefix in S3 or GCS.

The orbax reader asks this module (never `os.path`) whether a file or directory exists, what
a directory holds, a file's size and bytes, and the tensorstore kvstore of a directory:

- locally: `os.path`, symlinks checked to stay inside the checkpoint, tensorstore's `file`
  kvstore;
- `s3://bucket/prefix` and `gs://bucket/prefix`: one flat listing of the prefix (through the
  `Source` clients, kept for the read) answers every question about files and directories;
  small files are read in one request each; arrays are read by tensorstore's own `s3` and
  `gcs` kvstores, configured from the standard environment (`AWS_ENDPOINT_URL` /
  `AWS_ENDPOINT_URL_S3`, `AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`...;
  `STORAGE_EMULATOR_HOST`, which sets tensorstore's `TENSORSTORE_GCS_HTTP_URL` when that is
  unset, and application default credentials).

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "_METADATA"), "w") as fh:
    ...     _ = fh.write("{}")
    >>> isfile(join(d, "_METADATA")), isdir(d), listdir(d), read_bytes(join(d, "_METADATA"))
    (True, True, ['_METADATA'], b'{}')
"""

from __future__ import annotations

import os
from typing import Any

from treetool._errors import LoadError
from treetool._source import is_url, source_for

#: the largest metadata file read from object storage (a `_METADATA` of a million arrays
#: is ~200 MB; a bigger one is refused before any byte of it is read)
MAX_REMOTE_FILE = 1 << 30

__all__ = [
    "MAX_REMOTE_FILE",
    "abspath",
    "getsize",
    "isdir",
    "isfile",
    "islink",
    "join",
    "kvstore",
    "lexists",
    "listdir",
    "read_bytes",
    "read_ranges",
    "result",
    "sizes_under",
]


def join(parent: str, *names: str) -> str:
    """`parent/name/...` (a URL stays a URL)."""
    if is_url(parent):
        return "/".join([parent.rstrip("/"), *names])
    return os.path.join(parent, *names)


def _walk(url: str) -> dict[str, int]:
    """{relative key: size} of the objects under the prefix `url` (listed once per read)."""
    src: Any = source_for(url.rstrip("/"))
    walk = getattr(src, "walk", None)
    if walk is None:
        raise LoadError(
            f"{url}: orbax checkpoints are read from local directories, s3:// and gs:// "
            "prefixes (HTTP has no listing of a directory)"
        )
    return walk()


def _lookup(url: str, *, parent: bool) -> tuple[dict[str, int], str]:
    """The listing holding `url` and its key in it; listed now (`url`'s parent, or `url`
    itself) when no listing made in this read holds it."""
    from treetool.io._sources._remote import listed

    url = url.rstrip("/")
    hit = listed(url)
    if hit is None:
        top = url.rpartition("/")[0] if parent else url
        if top.count("/") < 3:  # s3://bucket: the bucket itself is the prefix
            top = url
        _walk(top)
        hit = listed(url)
    return hit if hit is not None else ({}, "")


def isfile(path: str) -> bool:
    """Whether `path` is a file (an object, remotely)."""
    if not is_url(path):
        return os.path.isfile(path)
    found, key = _lookup(path, parent=True)
    return key in found


def isdir(path: str) -> bool:
    """Whether `path` is a directory (a prefix with objects under it, remotely)."""
    if not is_url(path):
        return os.path.isdir(path)
    found, key = _lookup(path, parent=False)
    if not key:
        return bool(found)
    lead = key + "/"
    return any(k.startswith(lead) for k in found)


def lexists(path: str) -> bool:
    """Whether a file, directory or link of that name exists."""
    if not is_url(path):
        return os.path.lexists(path)
    return isfile(path) or isdir(path)


def islink(path: str) -> bool:
    """Whether `path` is a symbolic link (never, remotely)."""
    return not is_url(path) and os.path.islink(path)


def listdir(path: str) -> list[str]:
    """The names directly under `path` ([] when it is not a directory)."""
    if not is_url(path):
        try:
            return os.listdir(path)
        except OSError:
            return []
    return sorted({k.split("/", 1)[0] for k in sizes_under(path)})


def getsize(path: str) -> int:
    """The size in bytes of the file `path`."""
    if not is_url(path):
        return os.path.getsize(path)
    found, key = _lookup(path, parent=True)
    size = found.get(key)
    if size is None:
        raise LoadError(f"{path}: no such object")
    return size


def read_bytes(path: str) -> bytes:
    """The bytes of the file `path` (one request, remotely)."""
    if not is_url(path):
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as e:
            raise LoadError(f"{path}: {e.strerror or e}") from None
    size = getsize(path)  # from the listing: no request
    if size > MAX_REMOTE_FILE:
        raise LoadError(
            f"{path}: a metadata file of {size} bytes, more than {MAX_REMOTE_FILE >> 20} MiB"
        )
    src: Any = source_for(path)
    return src.read_all()


def read_ranges(ranges: list[tuple[str, int, int]]) -> list[bytes]:
    """Exactly the bytes of each `(path, offset, length)`, in order: each local file opened
    once, remote ranges read in parallel (one request each).

    Example:
        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "x")
        >>> with open(p, "wb") as fh:
        ...     _ = fh.write(b"0123456789")
        >>> read_ranges([(p, 0, 2), (p, 7, 3)])
        [b'01', b'789']
    """
    if any(is_url(p) for p, _, _ in ranges):
        # the sources are made here (this thread's read session), their requests in parallel
        srcs: dict[str, Any] = {p: source_for(p) for p, _, _ in ranges}
        if len(ranges) == 1:
            return [_read_range(srcs, *ranges[0])]
        from treetool.io._sources._blocks import prefetcher

        return list(prefetcher().map(lambda r: _read_range(srcs, *r), ranges))
    out: list[bytes] = [b""] * len(ranges)
    by_file: dict[str, list[int]] = {}
    for i, (path, _, _) in enumerate(ranges):
        by_file.setdefault(path, []).append(i)
    for path, members in by_file.items():
        try:
            with open(path, "rb") as fh:
                for i in members:
                    _, offset, n = ranges[i]
                    fh.seek(offset)
                    out[i] = _exact(fh.read(n), path, offset, n)
        except OSError as e:
            raise LoadError(f"{path}: {e.strerror or e}") from None
    return out


def _read_range(srcs: dict[str, Any], path: str, offset: int, n: int) -> bytes:
    return _exact(srcs[path].read(offset, n), path, offset, n)


def _exact(data: bytes, path: str, offset: int, n: int) -> bytes:
    if len(data) != n:
        raise LoadError(f"{path}: {n} bytes at offset {offset} expected, {len(data)} there")
    return data


def sizes_under(path: str) -> dict[str, int]:
    """{relative key: size} of every object under the prefix `path` (remote only)."""
    found, key = _lookup(path, parent=False)
    if not key:
        return found
    lead = key + "/"
    return {k[len(lead) :]: v for k, v in found.items() if k.startswith(lead)}


def abspath(path: str) -> str:
    """The absolute form of a local path; a URL unchanged."""
    return path if is_url(path) else os.path.abspath(path)


def kvstore(directory: str) -> dict[str, Any]:
    """The tensorstore kvstore spec of `directory`, as JSON (never a URL to decode).

    Example:
        >>> kvstore("/ckpt/1/default")["driver"], kvstore("s3://b/run/1/default")["path"]
        ('file', 'run/1/default/')
    """
    if not is_url(directory):
        return {"driver": "file", "path": os.path.abspath(directory).rstrip(os.sep) + os.sep}
    scheme, rest = directory.split("://", 1)
    bucket, _, key = rest.partition("/")
    path = key.strip("/") + "/" if key.strip("/") else ""
    if scheme == "s3":
        spec: dict[str, Any] = {"driver": "s3", "bucket": bucket, "path": path}
        env = os.environ
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        if endpoint:
            spec["endpoint"] = endpoint
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            spec["aws_region"] = region
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            # keys in the environment: no probe of profile files (which logs to stderr)
            spec["aws_credentials"] = {"type": "environment"}
        return spec
    if scheme in ("gs", "gcs"):
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator and not os.environ.get("TENSORSTORE_GCS_HTTP_URL"):
            # tensorstore's own setting for another GCS endpoint (it has no spec member)
            url = emulator if "://" in emulator else f"http://{emulator}"
            os.environ["TENSORSTORE_GCS_HTTP_URL"] = url
        return {"driver": "gcs", "bucket": bucket, "path": path}
    raise LoadError(f"{directory}: orbax arrays are read from local directories, s3:// and gs://")


def result(future: Any, where: str) -> Any:
    """A tensorstore future's result; a remote one waits at most the remote time limit
    (`TREETOOL_REMOTE_TIMEOUT` per try, times `TREETOOL_REMOTE_RETRIES`), then fails in one line.
    """
    if not is_url(where):
        return future.result()
    from treetool.io._sources._remote import _retries, _timeout

    limit = _timeout() * _retries()
    try:
        return future.result(timeout=limit)
    except TimeoutError:
        future.cancel()
        raise LoadError(
            f"{where}: no answer within {limit:g} s (TREETOOL_REMOTE_TIMEOUT per try, "
            "TREETOOL_REMOTE_RETRIES tries)"
        ) from None

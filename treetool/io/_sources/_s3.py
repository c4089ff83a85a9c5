"""`s3://bucket/key` objects through obstore (Rust's `object_store`): ranged reads, sizes and
listings with no Python HTTP stack on the path (importing it takes milliseconds, a request
well under one).

Configured from the standard AWS environment: the endpoint from `AWS_ENDPOINT_URL_S3` or
`AWS_ENDPOINT_URL` (plain `http://` allowed only when the endpoint says so), the region from
`AWS_REGION` / `AWS_DEFAULT_REGION`, keys from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`
(/ `AWS_SESSION_TOKEN`). Without keys in the environment, boto3's credential chain (a
`~/.aws` profile, `AWS_PROFILE`, SSO, an instance or container role) provides them through
`obstore.auth.boto3` (boto3 is imported then only); `AWS_SKIP_SIGNATURE=true` reads public
buckets anonymously. Each request gets `TREETOOL_REMOTE_TIMEOUT` seconds and the client does
not retry: `RemoteSource` retries transient failures `TREETOOL_REMOTE_RETRIES` times in all.

Example (no request is sent until a read):
    >>> src = S3Source("s3://bucket/run/model.safetensors")
    >>> src.name, src.remote
    ('s3://bucket/run/model.safetensors', True)
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from treetool._errors import LoadError
from treetool._source import Source, on_session, register_scheme, source_for
from treetool.io._sources._pool import Future
from treetool.io._sources._remote import (
    _FIRST,
    MAX_LISTED,
    SizedByFirstGet,
    _fs_cache,
    _timeout,
    _Transient,
    _walks,
    keep_walk,
    listed,
)

__all__ = ["S3Source"]

_T = TypeVar("_T")
_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")
_TRUE = ("1", "true", "yes", "on")

#: prefix URL -> its listing, started beside the first GET of a key that may name a prefix
#: (dropped when each read starts, as the listings are)
_pending: dict[str, Future] = {}
_pending_lock = threading.Lock()


def _may_be_prefix(key: str) -> bool:
    """Whether `key` may name a prefix (an orbax checkpoint, a run, a step): a last segment
    with no `.` (`run/1200`, `ckpt/default`), where files have an extension (`model.pkl`)."""
    last = key.rstrip("/").rpartition("/")[2]
    return bool(last) and "." not in last


def _store(bucket: str, url: str) -> Any:
    """The obstore `S3Store` of `bucket`, made once per process (and environment); `url`
    names the object in the line of an error."""
    env = os.environ
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or ""
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    anon = env.get("AWS_SKIP_SIGNATURE", "").lower() in _TRUE
    keys = bool(env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
    key = ("s3", bucket, endpoint, region, anon, keys, _timeout())
    store = _fs_cache.get(key)
    if store is not None:
        return store
    if endpoint:
        _check_endpoint(endpoint, url)
    try:
        from obstore.store import S3Store
    except ImportError as e:
        raise LoadError(
            f"reading s3:// needs the optional clients: pip install 'treetool[remote]' ({e.name} is missing)"
        ) from None
    from datetime import timedelta  # (obstore's store imports it anyway)

    t = timedelta(seconds=_timeout())
    config: dict[str, Any] = {}
    if endpoint:
        config["endpoint"] = endpoint
    if region:
        config["region"] = region
    if anon:
        config["skip_signature"] = True
    provider = None
    if not keys and not anon:
        provider = _boto3_credentials(url)
        if not region and provider.config.get("region"):
            config["region"] = provider.config["region"]
    store = S3Store(
        bucket,
        config=config,  # type: ignore[arg-type]
        client_options={
            "allow_http": endpoint.startswith("http://"),
            "timeout": t,
            "connect_timeout": t,
        },
        retry_config={"max_retries": 0, "retry_timeout": t},
        credential_provider=provider,
    )
    _fs_cache[key] = store
    return store


#: S3 bucket names (legacy ones included: capitals and '_' were once allowed)
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")


def _check_endpoint(endpoint: str, url: str) -> None:
    """Refuse an endpoint the client cannot use (object_store panics on some, printing a
    Rust backtrace): an `http(s)://host[:port]` URL with a valid host and port."""
    import ipaddress
    import urllib.parse

    name = "AWS_ENDPOINT_URL_S3" if os.environ.get("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
    bad = LoadError(f"{url}: {name}: expected an http(s)://host[:port] URL, found {endpoint!r:.80}")
    try:
        u = urllib.parse.urlsplit(endpoint)
        _ = u.port  # ValueError when out of range
    except ValueError:
        raise bad from None
    netloc_host = u.netloc.rpartition("@")[2]
    host = netloc_host.rsplit(":", 1)[0] if not netloc_host.endswith("]") else netloc_host
    if u.scheme not in ("http", "https") or not u.hostname or not _HOST.fullmatch(host):
        raise bad
    if u.query or u.fragment or any(c.isspace() or not c.isprintable() for c in endpoint):
        raise bad
    if host.replace(".", "").isdigit() or host.startswith("["):
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            raise bad from None


def _boto3_credentials(url: str) -> Any:
    """boto3's credential chain (profile, SSO, instance role) for obstore; one line when it
    finds none (before any request)."""
    no_creds = LoadError(
        f"{url}: no credentials found (S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
        "AWS_PROFILE or a role; AWS_SKIP_SIGNATURE=true for public buckets; GCS: "
        "application default credentials)"
    )
    try:
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError as e:
        raise LoadError(
            f"{url}: no AWS keys in the environment, and reading a profile or role "
            f"needs boto3 ({e.name} is missing): pip install boto3"
        ) from None
    try:
        return Boto3CredentialProvider()
    except ValueError:  # "Received None from session.get_credentials"
        raise no_creds from None
    except Exception as e:  # botocore's own: a broken profile, an SSO session expired
        raise LoadError(f"{url}: credentials: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


class S3Source(SizedByFirstGet):
    """An object in S3 (`s3://bucket/key`), read through obstore.

    The first read of an object is one ranged GET of its first 64 KiB that also says its
    size (no HEAD): a safetensors shard's header costs one request. A key with no extension
    (`run/1200`: maybe a prefix, an orbax checkpoint) is listed (`walk`) beside that GET, in
    flight together, unless a listing of this read already holds it: when the GET finds no
    object, the listing that tells what the prefix holds is already under way.
    """

    #: a walk's predicted blocks are read ahead whatever a request takes: obstore's requests
    #: run with the GIL released, so reading ahead pays even on loopback (`ls` of a pickle
    #: of 128 arrays: 207-215 ms, was 256-280 ms when only requests of 4 ms+ read ahead)
    ahead_latency = 0.0

    def __init__(self, url: str) -> None:
        super().__init__(url.rstrip("/") if url.count("/") > 3 else url)
        self._bucket, _, self._key = self.name[len("s3://") :].partition("/")
        self._s: Any = None

    @property
    def _st(self) -> Any:
        if self._s is None:
            if not _BUCKET.fullmatch(self._bucket):
                raise LoadError(
                    f"{self.name}: expected s3://BUCKET/KEY with a bucket name of letters, "
                    f"digits, '.', '-' or '_', found {self._bucket!r:.80}"
                )
            self._s = _store(self._bucket, self.name)
        return self._s

    def _wrap(self, fn: Callable[[], _T]) -> _T:
        """Run a client call, turning its failures into one line (or `_Transient`)."""
        try:
            return fn()
        except LoadError:
            raise
        except FileNotFoundError as e:
            code = _CODE.search(str(e))
            what = f" ({code.group(1)})" if code and code.group(1) == "NoSuchBucket" else ""
            raise LoadError(
                f"{self.name}: no such object (bucket {self._bucket!r} or its key does not "
                f"exist){what}"
            ) from None
        except Exception as e:
            raise _classify(self.name, e) from None
        except BaseException as e:  # a Rust panic in the client (pyo3's PanicException)
            if not type(e).__module__.startswith("pyo3"):
                raise
            raise LoadError(f"{self.name}: the S3 client failed: {_first_line(e)}") from None

    def prepare_first_get(self) -> bool:
        """Import the client on this thread (`_sources/_early.py` then sends the first GET on
        another, and for a key that may name a prefix the listing beside it, both in this
        read's session); whether the GET may be sent early: not for a bucket, nor when the
        client is missing or the credential chain finds nothing (the read's own first GET
        then says why)."""
        if not self._key.strip("/"):
            return False
        try:
            import obstore
            import obstore.store  # noqa: F401
        except ImportError:
            return False  # the read's own first GET says what is missing
        env = os.environ
        if not (env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")) and (
            env.get("AWS_SKIP_SIGNATURE", "").lower() not in _TRUE
        ):
            # boto3's credential chain: imported and asked here, on this thread
            try:
                _ = self._st
            except LoadError:
                return False
        # otherwise the store is made on the GET's thread: obstore builds its client
        # (~6 ms) with the GIL released, beside the imports that run here meanwhile
        return True

    def _first_get(self) -> tuple[int, bytes]:
        """One ranged GET that also gives the size; for a key that may name a prefix (no
        extension), the listing under it is asked for at the same time (an orbax
        checkpoint's first GET finds no object: its listing is then one round trip nearer)."""
        if not self._key.strip("/"):
            raise LoadError(f"{self.name}: a prefix (directory), not an object")  # a bucket
        import obstore

        if _may_be_prefix(self._key) and listed(self.name) is None:
            # (under a prefix listed in this read, the listing already says what it is)
            _ = self._st  # a bad bucket name is this thread's line
            self._list_beside()

        def get() -> tuple[int, bytes]:
            res = obstore.get(self._st, self._key, options={"range": (0, _FIRST)})
            return int(res.meta["size"]), bytes(res.bytes())

        try:
            return self._call(f"read of bytes 0-{_FIRST - 1}", lambda: self._wrap(get))
        except LoadError as e:
            if "InvalidRange" not in str(e):
                raise
            return self._stat(), b""  # an empty object has no byte 0

    def _stat(self) -> int:
        import obstore

        return int(self._wrap(lambda: obstore.head(self._st, self._key))["size"])

    def _get(self, offset: int, n: int) -> bytes:
        import obstore

        return bytes(
            self._wrap(lambda: obstore.get_range(self._st, self._key, start=offset, length=n))
        )

    def read_all(self) -> bytes:
        """The whole object in one request (small files: an index, `_METADATA`)."""
        import obstore

        if self._size is not None and self._size <= len(self._head):
            return self._head[: self._size]
        return self._call(
            "read", lambda: self._wrap(lambda: bytes(obstore.get(self._st, self._key).bytes()))
        )

    def join(self, name: str) -> Source:
        base = self.name if self._size is None and self.is_dir() else self.name.rsplit("/", 1)[0]
        return source_for(f"{base}/{name}")  # shared with the rest of the read

    def _prefix(self) -> str | None:
        key = self._key.strip("/")
        return key + "/" if key else None

    def list(self) -> list[str]:
        import obstore

        try:
            found = self._wrap(lambda: obstore.list_with_delimiter(self._st, self._prefix()))
        except LoadError:
            return []
        names = [p.rstrip("/") for p in found["common_prefixes"]]
        names += [m["path"] for m in found["objects"]]
        return sorted(n.rsplit("/", 1)[-1] for n in names)

    def walk(self) -> dict[str, int]:
        """`{relative key: size}` of every object under this prefix, listed once (flat,
        1,000 keys per request) and kept until the next read starts."""
        known = _walks.get(self.name)
        if known is not None:
            return known
        with _pending_lock:
            early = _pending.get(self.name)
        if early is not None:
            return early.result()  # the listing started beside the first GET
        return self._list_now()

    def _list_beside(self) -> None:
        """Start this prefix's listing (`walk`) in a thread of its own, in this read's session,
        unless it is known or under way."""
        with _pending_lock:
            if self.name in _pending or _walks.get(self.name) is not None:
                return
            fut: Future = Future()
            _pending[self.name] = fut
        ctx = contextvars.copy_context()

        def run() -> None:
            try:
                fut.set_result(ctx.run(self._list_now))
            except BaseException as e:  # handed to whoever waits on it (walk)
                fut.set_exception(e)

        threading.Thread(target=run, name="treetool-s3-list", daemon=True).start()

    def _list_now(self) -> dict[str, int]:
        """List this prefix now (flat), keep and return the listing."""
        import obstore

        prefix = self._prefix()
        lead = prefix or ""

        def listing() -> dict[str, int]:
            out: dict[str, int] = {}
            for batch in obstore.list(self._st, prefix, chunk_size=1000):
                for meta in batch:
                    path = meta["path"]
                    if path.startswith(lead):
                        out[path[len(lead) :]] = int(meta["size"])
                if len(out) > MAX_LISTED:
                    raise LoadError(
                        f"{self.name}: more than {MAX_LISTED} objects under this prefix"
                    )
            return out

        try:
            out = self._call("listing", lambda: self._wrap(listing))
        except LoadError as e:
            if "no such object" not in str(e) and "NoSuchBucket" not in str(e):
                raise
            out = {}
        keep_walk(self.name, out)
        return out

    def is_dir(self) -> bool:
        import obstore

        def first() -> bool:
            for batch in obstore.list(self._st, self._prefix(), chunk_size=1):
                return bool(batch)
            return False

        try:
            return self._wrap(first)
        except LoadError:
            return False

    def exists(self) -> bool:
        try:
            _ = self.size
        except LoadError:
            return self.is_dir()
        return True


def _classify(url: str, e: Exception) -> Exception:
    """An obstore exception as a `LoadError` line, or `_Transient` for what deserves a retry.

    obstore's messages carry the HTTP status, the S3 error code (`<Code>...</Code>`) and a
    debug dump of the Rust error (`kind: Timeout`, `ConnectionRefused`): the line says which.
    """
    text = str(e)
    first = text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__
    code_m = _CODE.search(text)
    code = code_m.group(1) if code_m else ""
    from obstore.exceptions import (
        InvalidPathError,
        PermissionDeniedError,
        UnauthenticatedError,
    )

    if isinstance(e, InvalidPathError) or first.startswith("Could not parse path"):
        return LoadError(
            f"{url}: a key the S3 client (obstore) cannot address (an empty, '.' or '..' "
            "segment, or a control character)"
        )
    if code in ("NoSuchBucket", "NoSuchKey"):
        return LoadError(f"{url}: no such object ({code})")
    if "non-partial response when range requested" in text:
        return LoadError(
            f"{url}: the server does not support range requests (HTTP 200); refusing to "
            "download the whole file"
        )
    if code == "InvalidRange" or "416 Range Not Satisfiable" in text:
        return LoadError(f"{url}: range not satisfiable (InvalidRange)")
    if isinstance(e, (PermissionDeniedError, UnauthenticatedError)) or "403 Forbidden" in text:
        return LoadError(f"{url}: access denied (403)" + (f": {code}" if code else ""))
    if "401 Unauthorized" in text:
        return LoadError(f"{url}: access denied (401)" + (f": {code}" if code else ""))
    if code in ("PermanentRedirect", "AuthorizationHeaderMalformed") or "301 Moved" in text:
        return LoadError(
            f"{url}: the bucket is in another region than the one configured: set AWS_REGION"
        )
    if "kind: Timeout" in text or "TimedOut" in text:
        return _Transient(f"no answer within {_timeout():g} s")
    if "ConnectionRefused" in text:
        return _Transient("connection refused")
    if '"dns error"' in text:
        return _Transient("cannot resolve the server's name (dns error)")
    if "kind: Connect" in text:
        return _Transient("cannot connect to the server")
    if re.search(r"status code: 5\d\d", text) or "error sending request" in text:
        return _Transient(first)
    if "credential" in text.lower():
        return LoadError(f"{url}: credentials: {first}")
    return LoadError(f"{url}: {first}")


register_scheme("s3", S3Source)
on_session(_pending.clear)  # a listing from an earlier read is not reused

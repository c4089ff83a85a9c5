"""A remote file's first GET sent before the reader's modules are imported
(`treetool/io/_sources/_early.py`), on the real local HTTP and S3 servers.

The GET is in the server's log before the source is asked for anything; the source's first
block is then its answer (one request in all), an error is replayed as the same line (still
one request), and a read through `treetool.io.read` sends the same requests as before. The
remote read path imports neither `concurrent.futures` nor `logging`, and `import treetool.io`
imports neither detection nor the tree model (they are imported while the GET is in flight).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

import treetool as tt
from conftest import s3_env
from treetool._errors import LoadError
from treetool._source import session, source_for
from treetool.io._sources import _early
from treetool.io._sources._pool import CancelledError, Future, Pool

pytestmark = pytest.mark.slow


def _until(predicate: Any, what: str) -> None:
    """Wait (at most 30 s) until `predicate()`; a failure names `what`."""
    end = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.002)


def _local(files: dict, name: str) -> bytes:
    with open(os.path.join(files["root"], name), "rb") as fh:
        return fh.read()


def test_http_first_get_is_sent_before_the_source_is_asked(http: Any, files: dict) -> None:
    data = _local(files, "ckpt.pkl")
    with session():
        src = source_for(f"{http.url}/ckpt.pkl")
        assert _early.start(src) is True
        _until(lambda: http.log.count == 1, "the first GET reached the server")
        assert [(r.method, r.range) for r in http.log.requests] == [("GET", "bytes=0-65535")]
        assert src.size == len(data)
        assert src.read(0, 100) == data[:100]
        assert src.read(len(data) - 10, 10) == data[-10:]  # within the first block
        assert http.log.count == 1
        assert "_first_block" not in vars(src)  # taken once: later calls are the source's own
        assert _early.start(src) is False  # its size is known: nothing to send


def test_switch_interval_is_never_changed_even_when_the_read_is_interrupted(http: Any) -> None:
    """Issue 39 point 8: the early GET leaves the interpreter as it found it, while in flight
    and after a read abandoned by an exception."""
    before = sys.getswitchinterval()
    started: list[Any] = []

    def interrupted_read() -> None:
        with session():
            src = source_for(f"{http.url}/ckpt.pkl")
            started.append(_early.start(src))
            started.append(sys.getswitchinterval())  # (in flight)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_read()
    assert started == [True, before]
    assert sys.getswitchinterval() == before
    _until(lambda: http.log.count == 1, "the abandoned GET reached the server")


def test_http_missing_file_is_one_line_after_one_request(http: Any) -> None:
    url = f"{http.url}/no_such.pkl"
    with session():
        src = source_for(url)
        assert _early.start(src) is True
        _until(lambda: http.log.count == 1, "the first GET reached the server")
        with pytest.raises(LoadError) as err:
            _ = src.size
        assert str(err.value) == f"{url}: no such file (HTTP 404)"
        assert http.log.count == 1
        with pytest.raises(LoadError):  # asked again: the source's own GET, as before
            _ = src.size
        assert http.log.count == 2


def test_http_directory_url_sends_nothing_early(http: Any) -> None:
    with session():
        assert _early.start(source_for(f"{http.url}/run/")) is False
    assert http.log.count == 0


def test_read_sends_the_same_requests_as_before(http: Any, files: dict) -> None:
    """`treetool.io.read(url)`: the early GET is the read's first block, not one more."""
    loaded = tt.io.read(f"{http.url}/model.safetensors")
    assert loaded.format == "safetensors"
    assert [r.range for r in http.log.requests] == ["bytes=0-65535"]
    got = {str(p): leaf.shape for p, leaf in tt.leaves_with_path(loaded.tree)}
    assert got["['lm_head.weight']"] == (16, 64)


def test_s3_first_get_and_its_store_on_the_get_thread(s3: Any, files: dict) -> None:
    from treetool.io._sources import _remote

    data = _local(files, "model.safetensors")
    with session():
        src = source_for("s3://ckpts/run/model.safetensors")
        assert _early.start(src) is True
        _until(lambda: s3.log.count == 1, "the first GET reached the server")
        assert [(r.method, r.range) for r in s3.log.requests] == [("GET", "bytes=0-65535")]
        assert any(k[0] == "s3" for k in _remote._fs_cache)  # made by the GET's thread
        assert src.size == len(data)
        assert src.read(0, 64) == data[:64]
        assert s3.log.count == 1


def test_s3_prefix_gets_its_listing_beside_the_early_get(
    s3: Any, s3_orbax: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An orbax run (a key with no extension): the early GET finds no object and the listing
    sent beside it says what the prefix holds. A read sends the same requests with the early
    GET as without it, and reads the same tree."""

    def requests() -> list[tuple[str, str, str]]:
        return sorted((r.method, r.path, str(r.range)) for r in s3.log.requests)

    with session():
        src = source_for(s3_orbax)
        assert _early.start(src) is True
        _until(lambda: s3.log.count == 2, "the first GET and the listing reached the server")
        first = sorted((r.method, r.range is not None) for r in s3.log.requests)
        assert first == [("GET", False), ("GET", True)]  # the listing, the ranged GET
    s3.log.clear()
    early = tt.io.read(s3_orbax)
    with_early = requests()
    s3.log.clear()
    monkeypatch.setattr(_early, "start", lambda src: False)
    plain = tt.io.read(s3_orbax)
    assert requests() == with_early
    assert [str(p) for p, _ in tt.leaves_with_path(early.tree)] == [
        str(p) for p, _ in tt.leaves_with_path(plain.tree)
    ]
    assert len(with_early) >= 3


def test_s3_bucket_sends_nothing_early(s3: Any) -> None:
    with session():
        assert _early.start(source_for("s3://ckpts/")) is False
    assert s3.log.count == 0


def test_s3_bad_bucket_name_is_the_same_line(s3: Any) -> None:
    url = "s3://Bad!Bucket/model.pkl"
    with session():
        src = source_for(url)
        _early.start(src)
        with pytest.raises(LoadError) as early:
            _ = src.size
    with session(), pytest.raises(LoadError) as plain:
        _ = source_for(url).size
    assert str(early.value) == str(plain.value)
    assert "expected s3://BUCKET/KEY" in str(plain.value)
    assert s3.log.count == 0


_MODULES = """
import sys, treetool.io
tree = treetool.io.read(sys.argv[1]).tree
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("where", ["http", "s3"])
def test_remote_read_imports_no_concurrent_futures(
    where: str, http: Any, s3_server: Any, files: dict
) -> None:
    """`concurrent.futures` imports `logging` (~5-9 ms before the first request): the read
    of a pickle and of a sharded set needs neither; nor, over HTTP, `http.client` and its
    `email.parser` (20-30 ms: treetool speaks HTTP/1.1 itself)."""
    env = {**os.environ, **s3_env(s3_server)}
    base = http.url if where == "http" else "s3://ckpts/run"
    for name in ("ckpt.pkl", "model.safetensors.index.json"):
        out = subprocess.run(
            [sys.executable, "-c", _MODULES, f"{base}/{name}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        modules = set(out.stdout.split())
        assert "treetool.io._sources._early" in modules
        assert not {"concurrent.futures", "logging"} & modules, name
        if where == "http":  # treetool's own HTTP/1.1 client (_wire.py), not the stdlib's
            assert "treetool.io._sources._wire" in modules
            assert not {"http.client", "email.parser"} & modules, name


def test_pool_future_cancel_and_errors() -> None:
    f: Future[int] = Future()
    assert f.cancel() is True
    with pytest.raises(CancelledError):
        f.result()
    pool = Pool(2)
    bad = pool.submit(int, "x")
    with pytest.raises(ValueError, match="invalid literal"):
        bad.result(timeout=30)
    assert bad.done() and not bad.cancel()
    with pytest.raises(TimeoutError):
        Future().result(timeout=0.001)

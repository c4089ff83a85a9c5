"""Value diffs of remote checkpoints: read ahead across leaves, each byte once, bounded memory.

Two pickles (and two safetensors files) that differ in a few leaves are written by the real
libraries, served by real local servers (the ranged HTTP server, moto's S3) and diffed: the
answer must be exactly the local diff's, the servers' logs must show each data byte fetched
once, a server that drops connections mid-diff gives one line naming the leaf (no hang, no
thread left), and the read-ahead window never holds more than its bound (counted by
`ReadAhead.held`/`peak`, not timed).
"""

from __future__ import annotations

import http.server
import itertools
import os
import pickle
import re
import sys
import threading
from typing import Any, ClassVar

import numpy as np
import pytest
from storage_servers import BUCKET, HttpServer

import treetool as tt
import treetool._diff._compare as compare_mod
import treetool._leaves._read_ahead as read_ahead_mod
from treetool._errors import LoadError
from treetool._leaves._lazy_array import LazyArray
from treetool._leaves._read_ahead import ReadAhead, is_remote
from treetool.io._sources._remote import _FIRST

_N = 4096  # float32 elements of each small array: 16 KiB


def _trees() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two checkpoints of 8 layers that differ in a few leaves, in every way a value can."""
    rng = np.random.default_rng(0)
    a: dict[str, Any] = {}
    for i in range(8):
        a[f"layer_{i}"] = {"w": rng.standard_normal(_N).astype(np.float32), "step": i}
    a["big"] = rng.standard_normal((40, 300)).astype(np.float32)  # 47 KiB: several parts
    a["half"] = np.arange(_N, dtype=np.float16)
    a["ints"] = np.arange(_N, dtype=np.int64)
    a["nan"] = np.full(_N, np.nan, np.float32)  # NaN equals NaN at the same place
    b = pickle.loads(pickle.dumps(a))
    b["layer_3"]["w"][100:110] += 1.0
    b["big"][25, 7] = -5.0
    b["ints"][-1] = 7
    b["half"][0] = 2.0
    b["layer_5"]["step"] = 50
    return a, b


def _write(root: str, a: Any, b: Any) -> tuple[str, str]:
    pa, pb = os.path.join(root, "ckpt_1.pkl"), os.path.join(root, "ckpt_2.pkl")
    for path, tree in ((pa, a), (pb, b)):
        with open(path, "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
    return pa, pb


def _changes(d: Any) -> list[tuple[str, str, int | None]]:
    return [(c.path, c.kind, c.detail.get("count")) for c in d.changes]


_EXPECTED = [  # in jax's order: dict keys sorted
    ("['big']", "value", 1),
    ("['half']", "value", 1),
    ("['ints']", "value", 1),
    ("['layer_3']['w']", "value", 10),
    ("['layer_5']['step']", "value", 1),
]


@pytest.fixture
def pickles(tmp_path: Any) -> tuple[str, str, HttpServer]:
    a, b = _trees()
    pa, pb = _write(str(tmp_path), a, b)
    server = HttpServer(str(tmp_path))
    yield pa, pb, server
    server.stop()


@pytest.fixture
def small_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests of 16 KiB: arrays in several parts, small ones sharing a request."""
    monkeypatch.setattr(read_ahead_mod, "READ_REQUEST", 16 << 10)
    monkeypatch.setattr(read_ahead_mod, "READ_WINDOW", 48 << 10)


def test_remote_value_diff_equals_local_diff(pickles: Any, small_requests: None) -> None:
    pa, pb, server = pickles
    ua, ub = f"{server.url}/ckpt_1.pkl", f"{server.url}/ckpt_2.pkl"
    ra, rb = tt.load(ua), tt.load(ub)
    assert is_remote(ra["big"]) and is_remote(rb["layer_3"]["w"])  # the planned path runs
    la, lb = tt.load(pa), tt.load(pb)
    assert isinstance(la["big"], LazyArray) and not is_remote(la["big"])
    local = tt.diff(la, lb)
    remote = tt.diff(ra, rb)
    assert _changes(local) == _EXPECTED
    assert remote.to_dict() == local.to_dict()  # paths, kinds, first elements, counts, stats
    big = remote.changes[0]
    assert np.float32(big.before) == _trees()[0]["big"][25, 7]
    assert (big.after, big.detail["first_index"]) == (-5.0, [25, 7])
    # one side remote, the other a local file or in memory: the same answer
    assert tt.diff(ra, lb).to_dict() == local.to_dict()
    assert tt.diff(_trees()[0], rb).to_dict() == tt.diff(_trees()[0], lb).to_dict()
    # tolerances apply as locally
    assert tt.diff(ra, rb, atol=2.0).to_dict() == tt.diff(la, lb, atol=2.0).to_dict()
    assert not tt.diff(ra, tt.load(ua))  # equal files: nothing


def test_s3_safetensors_diff_equals_local_and_reads_each_byte_once(s3: Any, tmp_path: Any) -> None:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    ta = {
        f"model.layers.{i}.weight": rng.standard_normal((64, 64)).astype(np.float32)
        for i in range(6)
    }
    tb = {k: v.copy() for k, v in ta.items()}
    tb["model.layers.4.weight"][3, 5] = 9.0
    client = s3.client()
    data = 0
    for name, tensors in (("a.safetensors", ta), ("b.safetensors", tb)):
        save_file(tensors, str(tmp_path / name))
        client.upload_file(str(tmp_path / name), BUCKET, f"rdiff/{name}")
        data += sum(t.nbytes for t in tensors.values())
    ra = tt.load(f"s3://{BUCKET}/rdiff/a.safetensors")
    rb = tt.load(f"s3://{BUCKET}/rdiff/b.safetensors")
    s3.log.clear()
    remote = tt.diff(ra, rb)
    gets = [r for r in s3.log.requests if r.method == "GET"]
    assert len(gets) == 2  # 96 KiB of data per file: one request each (8 MiB requests)
    assert sum(r.sent for r in gets) == data  # both files' data, once, and nothing else
    local = tt.diff(
        tt.load(str(tmp_path / "a.safetensors")), tt.load(str(tmp_path / "b.safetensors"))
    )
    assert len(local.changes) == 1 and local.changes[0].detail["first_index"] == [3, 5]
    assert remote.to_dict() == local.to_dict()


_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _spans(log: Any, path: str) -> list[tuple[int, int]]:
    out = []
    for r in log.requests:
        m = _RANGE.fullmatch(r.range or "")
        if r.method == "GET" and r.path == path and m:
            out.append((int(m.group(1)), int(m.group(1)) + r.sent))
    return sorted(out)


def test_diff_fetches_each_payload_byte_once(pickles: Any, small_requests: None) -> None:
    server = pickles[2]
    ra, rb = tt.load(f"{server.url}/ckpt_1.pkl"), tt.load(f"{server.url}/ckpt_2.pkl")
    server.log.clear()
    tt.diff(ra, rb)
    for name, tree in (("ckpt_1.pkl", ra), ("ckpt_2.pkl", rb)):
        spans = _spans(server.log, "/" + name)
        payloads = sorted(
            (x.offset, x.offset + x.nbytes)
            for _, x in tt.leaves_with_path(tree)
            if isinstance(x, LazyArray)
        )
        assert len(payloads) == 12
        # nothing twice: the requests are disjoint
        assert all(s1[1] <= s2[0] for s1, s2 in itertools.pairwise(spans))
        # every payload byte fetched, within requests that hold payloads and the few
        # pickle opcodes between neighbours (never another part of the file); a payload in
        # the file's first block, read at load time, may come from that block instead
        covered: list[list[int]] = []  # the spans, neighbours that touch joined
        for s, e in spans:
            if covered and covered[-1][1] == s:
                covered[-1][1] = e
            else:
                covered.append([s, e])
        for lo, hi in payloads:
            assert hi <= _FIRST or any(s <= lo and hi <= e for s, e in covered), (lo, hi)
        needed = sum(hi - lo for lo, hi in payloads if hi > _FIRST)
        gaps = sum(max(0, p2[0] - p1[1]) for p1, p2 in itertools.pairwise(payloads))
        fetched = sum(e - s for s, e in spans)
        assert needed <= fetched <= sum(hi - lo for lo, hi in payloads) + gaps
        assert payloads[0][0] <= spans[0][0] and spans[-1][1] == payloads[-1][1]


def test_leaf_truncated_after_loading_is_one_line_naming_it(
    pickles: Any, small_requests: None
) -> None:
    _, pb, server = pickles
    ra, rb = tt.load(f"{server.url}/ckpt_1.pkl"), tt.load(f"{server.url}/ckpt_2.pkl")
    nan = rb["nan"]  # the last payload of the file, compared last (keys sorted)
    with open(pb, "r+b") as fh:  # the object changes on the server after it was read
        fh.truncate(nan.offset + 1000)
    with pytest.raises(LoadError) as info:
        tt.diff(ra, rb)
    assert str(info.value) == (
        f"{server.url}/ckpt_2.pkl: ['nan']: truncated range: expected {nan.nbytes} bytes at "
        f"offset {nan.offset}, the server sent 1000"
    )


class _Recording(ReadAhead):
    """A `ReadAhead` that keeps what its counters said (instrumentation, not a stand-in)."""

    made: ClassVar[list[_Recording]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent_at_first_take: int | None = None
        self.held_after_take: list[int] = []
        _Recording.made.append(self)

    def take(self, ticket: int) -> bytes:
        out = super().take(ticket)
        if self.sent_at_first_take is None:
            self.sent_at_first_take = self._sent
        self.held_after_take.append(self.held)
        return out


def test_read_ahead_window_never_exceeds_its_bound(
    pickles: Any, small_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = pickles[2]
    ra, rb = tt.load(f"{server.url}/ckpt_1.pkl"), tt.load(f"{server.url}/ckpt_2.pkl")
    _Recording.made.clear()
    monkeypatch.setattr(compare_mod, "ReadAhead", _Recording)
    remote = tt.diff(ra, rb)
    assert _changes(remote) == _EXPECTED
    (r,) = _Recording.made
    assert r.window == 48 << 10 and r.request == 16 << 10
    assert r.peak <= r.window  # the bound
    assert r.peak > r.request  # and it did read ahead: several requests held at once
    assert max(r.held_after_take) <= r.window
    # before the first pair was compared, requests of later leaves were already sent
    assert r.sent_at_first_take is not None and r.sent_at_first_take >= 3
    assert r.held == 0 and r._sent == len(r._reqs)  # every request sent once, all taken


class _DropHandler(http.server.BaseHTTPRequestHandler):
    """Ranged GETs of files under `root`; one of `drop_file` whose range starts at one of
    `drop_at` gets its connection closed without an answer (a server dying mid-diff)."""

    protocol_version = "HTTP/1.1"
    root = ""
    drop_file = "ckpt_2.pkl"
    drop_at: frozenset[int] = frozenset()
    dropped = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = os.path.join(self.root, self.path.lstrip("/"))
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        assert m is not None
        start, stop = int(m.group(1)), min(int(m.group(2)), size - 1)
        if self.path.endswith(self.drop_file) and start in self.drop_at:
            type(self).dropped += 1
            self.close_connection = True
            return
        with open(path, "rb") as fh:
            fh.seek(start)
            body = fh.read(stop - start + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{stop}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def dropping(tmp_path: Any) -> Any:
    """(url, handler class, the second file read locally) of a server that drops requests."""
    a, b = _trees()
    _write(str(tmp_path), a, b)
    handler = type("Drop", (_DropHandler,), {"root": str(tmp_path)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield (
        f"http://127.0.0.1:{server.server_address[1]}",
        handler,
        tt.load(str(tmp_path / "ckpt_2.pkl")),
    )
    server.shutdown()
    server.server_close()


def test_dropped_connection_mid_diff_is_one_line_naming_the_leaf(
    dropping: Any, small_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler, local_b = dropping
    handler.drop_at = frozenset([local_b["layer_3"]["w"].offset])  # that leaf's request
    monkeypatch.setenv("TREETOOL_REMOTE_RETRIES", "2")
    ra, rb = tt.load(f"{url}/ckpt_1.pkl"), tt.load(f"{url}/ckpt_2.pkl")
    assert handler.dropped == 0  # loading never asked for it
    before = set(threading.enumerate())
    with pytest.raises(LoadError) as info:
        tt.diff(ra, rb)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{url}/ckpt_2.pkl: ['layer_3']['w']: read of bytes ")
    assert "failed after 2 tries" in msg
    assert handler.dropped == 2  # that request, tried twice
    left = [
        t
        for t in set(threading.enumerate()) - before
        if "process_request" not in t.name  # the server's own connection threads
    ]
    assert left == []  # the read-ahead's threads ended with the diff
    names = [t.name for t in threading.enumerate()]
    assert not [n for n in names if n.startswith("treetool-readahead-diff")]


def test_cli_dropped_connection_is_one_line_exit_2(dropping: Any, tmp_path: Any) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))
    import harness  # tests/hostile is not a package: on the path just above

    url, handler, local_b = dropping
    # 8 MiB requests: one carries every array of the file, from the first leaf's bytes on
    handler.drop_at = frozenset([local_b["layer_0"]["w"].offset])
    run = harness.run_cli(
        "diff",
        f"{url}/ckpt_1.pkl",
        f"{url}/ckpt_2.pkl",
        cwd=tmp_path,
        env={"TREETOOL_REMOTE_RETRIES": "1"},
    )
    harness.assert_contained(run, rc=2)
    assert run.stderr.startswith(
        f"treetool: error: {url}/ckpt_2.pkl: ['layer_0']['w']: read of bytes "
    ), run
    assert handler.dropped == 1

"""The benchmark's shaped link (`storage_servers.Link`: a round trip per request, a rate per
connection and one for all of them, or one rate shared by all) keeps every answer whole, and a
remote diff over it reads the two sides' structures at once (their requests in flight
together)."""

from __future__ import annotations

import os
import pickle
import threading
import urllib.request
from typing import Any

import numpy as np
import pytest
from storage_servers import BUCKET, HttpServer, Link, S3Server

from conftest import cli as _cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("link"))
    a = {f"layer_{i}": {"w": np.full(50_000, i, np.float32), "step": i} for i in range(8)}
    b = pickle.loads(pickle.dumps(a))
    b["layer_5"]["w"][123] = -1.0
    for name, tree in (("a.pkl", a), ("b.pkl", b)):
        with open(os.path.join(root, name), "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
    return root


def _bytes(root: str, name: str) -> bytes:
    with open(os.path.join(root, name), "rb") as fh:
        return fh.read()


def _get(url: str, rng: str | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"Range": rng} if rng else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def _waits(link_args: dict[str, Any], connections: int) -> list[float]:
    """The wait of each of `connections` server threads taking 1 MB at once (a clock that
    does not move: every wait is the debt the link has run up)."""
    waits: list[float] = []
    link = Link(rtt=0, burst=0, clock=lambda: 0.0, sleep=waits.append, **link_args)
    lock, done = threading.Lock(), threading.Barrier(connections)

    def one() -> None:
        with lock:  # one after the other, each on its own thread (connection)
            link.take(1_000_000)
        done.wait()  # no thread ends (and gives its id to the next) before all have taken

    threads = [threading.Thread(target=one) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return waits


def test_the_link_shapes_each_connection_and_all_of_them_together() -> None:
    # 1 MB/s per connection, 3 MB/s in all: three connections go at their own rate, the
    # fourth waits for the shared one; one pipe shared by all: each waits for all before it
    assert _waits({"rate": 1e6, "total": 3e6}, 4) == pytest.approx([1.0, 1.0, 1.0, 4 / 3])
    assert _waits({"rate": 1e6}, 3) == pytest.approx([1.0, 1.0, 1.0])
    assert _waits({"rate": 1e6, "per_connection": False}, 3) == pytest.approx([1.0, 2.0, 3.0])


def test_http_answers_over_a_shaped_link_are_whole(files: str) -> None:
    server = HttpServer(files, link=Link(rtt=0.005, rate=50e6, burst=4096))
    try:
        data = _bytes(files, "a.pkl")
        assert _get(f"{server.url}/a.pkl") == data
        assert _get(f"{server.url}/a.pkl", "bytes=70000-270004") == data[70000:270005]
        assert [r.sent for r in server.log.requests] == [len(data), 200005]
    finally:
        server.stop()


def test_s3_answers_over_a_shaped_link_are_whole(files: str) -> None:
    server = S3Server(fast_ranges=True)
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        client.upload_file(os.path.join(files, "a.pkl"), BUCKET, "l/a.pkl")
        server.link = Link(rtt=0.005, rate=50e6, burst=4096)  # the uploads were not shaped
        data = _bytes(files, "a.pkl")
        got = client.get_object(Bucket=BUCKET, Key="l/a.pkl", Range="bytes=100-150099")
        assert got["Body"].read() == data[100:150100]
        assert client.get_object(Bucket=BUCKET, Key="l/a.pkl")["Body"].read() == data
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix="l/")["Contents"]
        assert [(o["Key"], o["Size"]) for o in listed] == [("l/a.pkl", len(data))]
    finally:
        server.stop()


def test_a_remote_diff_reads_both_structures_at_once(files: str, tmp_path: Any) -> None:
    server = HttpServer(files, link=Link(rtt=0.02, rate=100e6))
    try:
        out = _cli("diff", f"{server.url}/a.pkl", f"{server.url}/b.pkl", cwd=str(tmp_path))
        local = _cli(
            "diff", os.path.join(files, "a.pkl"), os.path.join(files, "b.pkl"), cwd=str(tmp_path)
        )
        assert out.returncode == local.returncode == 1, out.stderr
        assert out.stdout.replace(server.url + "/", "") == local.stdout.replace(files + "/", "")
        reqs = server.log.requests
        a = [r for r in reqs if r.path.endswith("/a.pkl")]
        b = [r for r in reqs if r.path.endswith("/b.pkl")]
        assert a and b
        # the first request of each side arrived before the other side's first was answered
        # (each answer waits its 20 ms round trip): the two reads started together
        assert a[0].at < b[0].done and b[0].at < a[0].done  # type: ignore[operator]
    finally:
        server.stop()


def _most_in_flight(reqs: list[Any]) -> int:
    """The most requests the server held at once (arrived, answer not yet started)."""
    events = sorted([(r.at, 1) for r in reqs] + [(r.done, -1) for r in reqs])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_a_remote_value_diff_reads_values_on_several_connections_at_once(tmp_path: Any) -> None:
    # a store serves each connection at its own rate: the diff's values are read by requests
    # of at most READ_REQUEST bytes, READ_WORKERS of them in flight together
    from treetool._leaves import _read_ahead as _read_ahead

    root = tmp_path / "files"
    root.mkdir()
    a = {f"layer_{i}": np.full(750_000, i, np.float32) for i in range(6)}  # 3 MB each
    b = {**a, "layer_4": a["layer_4"] + 1}
    for name, tree in (("a.pkl", a), ("b.pkl", b)):
        with open(root / name, "wb") as fh:
            pickle.dump(tree, fh, protocol=4)
    server = HttpServer(str(root), link=Link(rtt=0.05, rate=1e9))
    try:
        out = _cli("diff", f"{server.url}/a.pkl", f"{server.url}/b.pkl", cwd=str(tmp_path))
        assert out.returncode == 1, out.stderr
        assert "layer_4" in out.stdout and "layer_3" not in out.stdout
        values = [r for r in server.log.requests if r.sent >= 1 << 20]
        assert sorted(r.sent for r in values) == [3_000_000] * 12  # each array, once
        assert _read_ahead.READ_REQUEST == 4 << 20 and _read_ahead.READ_WORKERS == 8
        assert _most_in_flight(values) >= 6
    finally:
        server.stop()

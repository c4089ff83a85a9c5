"""The seeking pickle walk over ranged reads, counted on the real local S3 server: each block
the walk needs is read once, guesses a few bytes off (keys and memo indices growing) still
land, and what is read past the last array stays bounded."""

from __future__ import annotations

import pickle
import re
from typing import Any

import numpy as np
import pytest
from storage_servers import BUCKET

import treetool as tt

_ARRAYS = 300  # keys cross layer_9/layer_10 and layer_99/layer_100, memo indices cross 255
_FLOATS = 6_000  # 24 KB payloads: each array is a jump past a 16 KiB block


def _ranges(log: Any) -> list[tuple[int, int]]:
    out = []
    for r in log.requests:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", r.range or "")
        assert r.method == "GET" and m, (r.method, r.range)
        out.append((int(m.group(1)), int(m.group(2)) + 1))
    return sorted(out)


def test_pickle_walk_reads_each_block_once(s3: Any) -> None:
    from treetool.io._sources._blocks import _AHEAD_JUMPS

    tree = {f"layer_{i}": {"w": np.full(_FLOATS, i, np.float32), "step": i} for i in range(_ARRAYS)}
    raw = pickle.dumps(tree, protocol=4)
    s3.client().put_object(Bucket=BUCKET, Key="walk/ckpt.pkl", Body=raw)
    ends = []  # where each array's payload ends: where the walk lands after a jump
    for i in range(_ARRAYS):
        at = raw.index(np.full(_FLOATS, i, np.float32).tobytes(), ends[-1] if ends else 0)
        ends.append(at + _FLOATS * 4)
    s3.log.clear()
    loaded = tt.load(f"s3://{BUCKET}/walk/ckpt.pkl")
    got = tt.leaves_with_path(loaded)
    arrays = [(str(p), leaf.shape, str(leaf.dtype)) for p, leaf in got if hasattr(leaf, "shape")]
    assert sorted(arrays) == sorted(
        (f"['layer_{i}']['w']", (_FLOATS,), "float32") for i in range(_ARRAYS)
    )
    ranges = _ranges(s3.log)
    # the first GET (64 KiB: the header and the first arrays) and one block per jump after it
    assert ranges[0] == (0, 65536)
    landings = [e for e in ends if e >= 65536]
    for e in landings:  # every landing was read, by exactly one request
        assert sum(a <= e < b for a, b in ranges) == 1, (
            e,
            [r for r in ranges if r[0] - 40000 < e < r[1] + 40000],
            ends[:25],
        )
    # no request holds no landing, except the guesses past the last array
    useless = [(a, b) for a, b in ranges[1:] if not any(a <= e < b for e in landings)]
    assert all(a > ends[-1] for a, _ in useless)
    assert len(useless) <= _AHEAD_JUMPS  # (none here: the file ends past the last landing)
    assert len(ranges) == 1 + len(landings) + len(useless)
    assert s3.log.bytes_sent <= 65536 + (len(landings) + _AHEAD_JUMPS) * 16384


def _chain(log: Any) -> list[int]:
    """How many requests each round trip of a read held, in order: a request waited for
    another when it arrived after that one's answer was sent (the server's log times), and
    its round trip is one past the latest it waited for. `[1, 9, ...]`: the first GET alone,
    then 9 requests that waited only for it, ..."""
    reqs = sorted(log.requests, key=lambda r: r.at)
    level: list[int] = []
    for i, r in enumerate(reqs):
        waited = [level[j] for j in range(i) if (reqs[j].done or r.at + 1) <= r.at]
        level.append(1 + max(waited, default=0))
    return [level.count(k) for k in range(1, max(level) + 1)]


def _pickle_of(sizes: list[int], key: Any) -> tuple[bytes, list[int]]:
    """A protocol-4 pickle of float32 arrays of `sizes` under growing keys, and where each
    array's payload ends (where the walk lands after skipping it)."""
    # no zeros: a payload of zeros would be found a byte early (its length's high bytes)
    tree = {key(i): {"w": np.full(n, i + 1, np.float32), "step": i} for i, n in enumerate(sizes)}
    raw = pickle.dumps(tree, protocol=4)
    ends: list[int] = []
    for i, n in enumerate(sizes):
        at = raw.index(np.full(n, i + 1, np.float32).tobytes(), ends[-1] if ends else 0)
        ends.append(at + n * 4)
    return raw, ends


def test_walk_at_50ms_waits_for_few_round_trips(tmp_path: Any) -> None:
    """Over a server that answers each request 50 ms late (a network's round trip), the walk
    of a checkpoint of 48 arrays of one shape pays two sequential round trips before reading
    ahead (the first GET, then the first jump, whose skip is guessed to repeat: 32 guesses go
    with it), then the guesses that land open up to 4 more each, the other 15 at once: the
    129 requests of a 1 GB pickle of 128 arrays took 10 round trips one after the other, this
    one takes 3 (at most 4 on a slow machine). Each landing is read by one request, nothing
    for nothing."""
    from storage_servers import HttpServer

    floats = (1 << 20) // 4 + 64  # payloads just past 1 MiB: each jump is one request
    raw, ends = _pickle_of([floats] * 48, lambda i: f"layer_{i}")
    (tmp_path / "ckpt.pkl").write_bytes(raw)
    server = HttpServer(str(tmp_path), latency=0.05)
    try:
        tree = tt.load(f"{server.url}/ckpt.pkl")
        arrays = [leaf.shape for _, leaf in tt.leaves_with_path(tree) if hasattr(leaf, "shape")]
        assert arrays == [(floats,)] * 48
        chain = _chain(server.log)
        ranges = _ranges(server.log)
    finally:
        server.stop()
    # the first GET; the first jump and its guesses (all 32 when the machine keeps up: each
    # arrives before the first jump's answer; see the next test for what is asked for)
    assert chain[0] == 1 and chain[1] >= 9, chain
    assert len(chain) <= 5, chain
    assert sum(chain) == len(ranges) == 1 + 48  # the first GET, one block per landing
    assert ranges[0] == (0, 65536)
    for e in ends:  # every landing was read by exactly one request
        assert sum(a <= e < b for a, b in ranges) == 1, (
            e,
            [r for r in ranges if r[0] - 40000 < e < r[1] + 40000],
            [x for x in ends if abs(x - e) < 80000],
        )


def test_first_jump_reads_the_next_32_landings_ahead(tmp_path: Any) -> None:
    """The first jump past a payload of 1 MiB or more, on a slow link, asks at once for the
    blocks where the next `_SPECULATE` (32) jumps land if the payload size repeats, each
    from about `_SLACK` bytes before its landing; the guesses that land open 4 more each
    (`issued` <= 4 x `guessed` + 32): 10 of them reach the file's last landing."""
    from storage_servers import HttpServer

    from treetool._source import source_for
    from treetool.io._sources._blocks import _SLACK, _SPECULATE

    floats = (1 << 20) // 4 + 64
    raw, ends = _pickle_of([floats] * 48, lambda i: f"layer_{i}")
    (tmp_path / "ckpt.pkl").write_bytes(raw)
    server = HttpServer(str(tmp_path), latency=0.01)
    try:
        reader: Any = source_for(f"{server.url}/ckpt.pkl").open()
        reader.read(100)  # the first GET (64 KiB), as a walk starts
        reader.seek(ends[0])  # the walk skips the first payload
        assert reader.read(4) == raw[ends[0] : ends[0] + 4]
        assert reader.issued == _SPECULATE == 32
        starts = sorted(reader._guesses)
        # each of the next 32 landings is in one guessed block, which starts about `_SLACK`
        # bytes before it (a record's keys grow by a byte now and then)
        assert len(starts) == 32
        for s, e in zip(starts, ends[1:33], strict=True):
            assert 0 < e - s <= 2 * _SLACK, (s, e)
        for k in range(1, 11):  # the guesses land: past 8 of them, 4 more each, further on
            reader.seek(ends[k])
            assert reader.read(4) == raw[ends[k] : ends[k] + 4]
        assert reader.guessed == 10
        assert reader.issued == 47  # every landing to the end of the file (48 - the first)
        reader.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("choices", "count"),
    [
        ([5_000, 6_000, 9_000, 14_000], 200),  # 20-56 KB payloads
        ([300_000, 330_000, 450_000], 14),  # 1.2-1.8 MB: the first skip is guessed to repeat
    ],
)
def test_irregular_walk_reads_each_block_once_and_wastes_few_guesses(
    s3: Any, choices: list[int], count: int
) -> None:
    """A pickle whose arrays vary in size (the skips repeat now and then, by chance) and whose
    keys grow: guesses are made when two skips match (or, for payloads past 1 MiB, at the
    first jump) and mostly miss; each landing is still read by one request, and the guesses
    read for nothing stay within their budget: at most `_AHEAD_JUMPS` + 3 per guess that
    landed, `_SPECULATE` + 3 per guess that landed once the first jump was guessed to repeat
    (the S3 client reads ahead on loopback too)."""
    from treetool.io._sources._blocks import _AHEAD_JUMPS, _SPECULATE

    rng = np.random.default_rng(7)
    sizes = [int(n) for n in rng.choice(choices, size=count)]
    raw, ends = _pickle_of(sizes, lambda i: "k" * (1 + i // 20) + str(i))
    s3.client().put_object(Bucket=BUCKET, Key="walk/irregular.pkl", Body=raw)
    s3.log.clear()
    tree = tt.load(f"s3://{BUCKET}/walk/irregular.pkl")
    got = {str(p): leaf.shape for p, leaf in tt.leaves_with_path(tree) if hasattr(leaf, "shape")}
    assert got == {f"['{'k' * (1 + i // 20)}{i}']['w']": (n,) for i, n in enumerate(sizes)}
    ranges = _ranges(s3.log)
    landings = [e for e in ends if e >= 65536]
    for e in landings:
        assert sum(a <= e < b for a, b in ranges) == 1, (
            e,
            [r for r in ranges if r[0] - 40000 < e < r[1] + 40000],
            [x for x in ends if abs(x - e) < 80000],
        )
    # the walk's own reads start at a landing; a guess starts `_SLACK` before its prediction
    guesses = [(a, b) for a, b in ranges[1:] if a not in landings]
    landed = [(a, b) for a, b in guesses if any(a <= e < b for e in landings)]
    wasted = len(guesses) - len(landed)
    first = _SPECULATE if min(choices) * 4 >= 1 << 20 else _AHEAD_JUMPS
    assert wasted <= first + 3 * len(landed), (wasted, len(landed))
    assert len(ranges) - 1 - len(landed) - wasted == len(landings) - len(landed)
    assert s3.log.bytes_sent <= 65536 + (len(landings) + wasted) * 16384
    assert all(0 <= a < b <= a + 16384 for a, b in ranges[1:])  # blocks, no big read

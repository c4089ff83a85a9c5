"""The seeking pickle walk over ranged reads, counted on the real local S3 server: each block
the walk needs is read once, guesses a few bytes off (keys and memo indices growing) still
land, and what is read past the last array stays bounded."""

from __future__ import annotations

import pickle
import re
from typing import Any

import numpy as np
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
    from treetool.io._source import _AHEAD_WALK

    tree = {f"layer_{i}": {"w": np.full(_FLOATS, i, np.float32), "step": i} for i in range(_ARRAYS)}
    raw = pickle.dumps(tree, protocol=4)
    s3.client().put_object(Bucket=BUCKET, Key="walk/ckpt.pkl", Body=raw)
    ends = []  # where each array's payload ends: where the walk lands after a jump
    for i in range(_ARRAYS):
        at = raw.index(np.full(_FLOATS, i, np.float32).tobytes(), ends[-1] if ends else 0)
        ends.append(at + _FLOATS * 4)
    s3.log.clear()
    loaded = tt.load(f"s3://{BUCKET}/walk/ckpt.pkl")
    got = tt.leaves_with_paths(loaded)
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
    assert len(useless) <= _AHEAD_WALK
    assert len(ranges) == 1 + len(landings) + len(useless)
    assert s3.log.bytes_sent <= 65536 + (len(landings) + _AHEAD_WALK) * 16384

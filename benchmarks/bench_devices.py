"""Benchmark of `tt.placement` on a big sharded tree, against a bare loop over jax's API.

Tree: 1e5 leaves (f32[8,8]) in 10,000 blocks of 10, over a 2x4 mesh of 8 CPU devices, with
five shardings: P('data', 'model'), P(None, 'model'), P('data'), P() and one device.

Anchor: `jax.tree_util.tree_leaves(tree)`, then for every leaf `x.sharding` and
`x.addressable_shards`, summing each shard's bytes per device (from `shard.index`, without
touching the data). This is the least a user must write to get bytes per device, and it gives
neither paths, nor replication, nor mesh axes. A second anchor row reads `shard.data.nbytes`
(the obvious way) on a second, fresh tree. Both loops run with the garbage collector paused,
as `placement` does. Arrays cache their shards after the first `addressable_shards`, so each
anchor runs on arrays that have never been asked; a last row shows the anchor again, warm.

    python benchmarks/bench_devices.py           # 1e5 leaves
    python benchmarks/bench_devices.py --quick   # 1e4 leaves
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import _rows

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

import treetool as tt

P = PartitionSpec
PER_BLOCK = 10


def make_tree(n: int) -> dict:
    """n sharded leaves; each is a fresh jax.Array (buffers shared, so creation is cheap)."""
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    shardings = [
        NamedSharding(mesh, P("data", "model")),
        NamedSharding(mesh, P(None, "model")),
        NamedSharding(mesh, P("data")),
        NamedSharding(mesh, P()),
        SingleDeviceSharding(jax.devices()[3]),
    ]
    host = np.ones((8, 8), np.float32)
    parts = []
    for s in shardings:
        base = jax.device_put(host, s)
        parts.append([sh.data for sh in base.addressable_shards])

    def leaf(i: int) -> jax.Array:
        k = i % len(shardings)
        return jax.make_array_from_single_device_arrays((8, 8), shardings[k], parts[k])

    blocks = n // PER_BLOCK
    return {
        "blocks": [
            {f"w{j}": leaf(b * PER_BLOCK + j) for j in range(PER_BLOCK)} for b in range(blocks)
        ]
    }


def anchor_index(tree: dict) -> dict:
    """Bytes per device from `x.sharding` and `x.addressable_shards` (shard indices)."""
    per_device: dict = {}
    for x in jax.tree_util.tree_leaves(tree):
        _ = x.sharding
        itemsize = x.dtype.itemsize
        for sh in x.addressable_shards:
            n = itemsize
            for sl, dim in zip(sh.index, x.shape):
                a, b, _ = sl.indices(dim)
                n *= b - a
            per_device[sh.device] = per_device.get(sh.device, 0) + n
    return per_device


def anchor_data(tree: dict) -> dict:
    """Bytes per device from `shard.data.nbytes`."""
    per_device: dict = {}
    for x in jax.tree_util.tree_leaves(tree):
        _ = x.sharding
        for sh in x.addressable_shards:
            per_device[sh.device] = per_device.get(sh.device, 0) + sh.data.nbytes
    return per_device


def _timed(fn, *args):
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        out = fn(*args)
        return time.perf_counter() - t, out
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1e4 leaves instead of 1e5")
    ap.add_argument("--leaves", type=int, default=None)
    _rows.add_argument(ap)
    args = ap.parse_args()
    n = args.leaves or (10_000 if args.quick else 100_000)

    t = time.perf_counter()
    tree_a = make_tree(n)
    tree_b = make_tree(n)
    build = time.perf_counter() - t

    t_ours, p = _timed(tt.placement, tree_a)
    t_index, want = _timed(anchor_index, tree_a)
    t_data, want_data = _timed(anchor_data, tree_b)
    t_warm, _ = _timed(anchor_index, tree_a)
    got = {d: u.bytes for d, u in p.per_device.items()}
    if got != want or got != {d: want_data[d] for d in got}:
        raise SystemExit(f"bytes per device differ: ours {got}, jax {want}")
    assert len(p.leaves) == n

    print(f"placement of {n:,} sharded leaves on 8 CPU devices (trees built in {build:.1f} s)")
    print(f"{'':44} {'time (s)':>9} {'ours/anchor':>12}")
    rows = [
        ("anchor: x.sharding + addressable_shards", t_index),
        ("anchor: ... + shard.data.nbytes", t_data),
        ("anchor, shards already cached (warm)", t_warm),
    ]
    print(f"{'ours: tt.placement(tree)':44} {t_ours:9.3f} {'':>12}")
    for name, secs in rows:
        print(f"{name:44} {secs:9.3f} {t_ours / secs:12.2f}")
    ratio = t_ours / t_index
    print(
        f"ratio vs the anchor: {ratio:.2f} (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})"
    )
    _rows.row(
        f"placement: {n:,} sharded leaves, 8 CPU devices",
        "x.sharding + addressable_shards loop",
        t_index,
        t_ours,
        ("ratio<=", 1.5),
        note=f"anchor with shard.data.nbytes {t_data:.3f} s; warm anchor {t_warm:.3f} s",
    )
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()

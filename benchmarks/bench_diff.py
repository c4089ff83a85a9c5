"""treetool.diff against its anchors, in one run, printing one table of times and ratios.

1. structure: two 1e6-leaf trees of the same structure (distinct leaf objects), values=False,
   vs `jax.tree_util.tree_flatten_with_path` of both trees (target ratio <= 3);
2. values: 1 GB of float32 per side spread over 100 leaves, vs `np.array_equal` over the same
   bytes as one buffer (target ratio <= 2), and the peak extra memory of the diff (tracemalloc,
   target < 10% of the data);
3. many small jax arrays: two 1e5-leaf trees, values=True, vs
   `tree_map(np.array_equal)` (target <= 1.5x), `eqx.tree_equal` and
   `chex.assert_trees_all_close` (if chex is installed).

    python benchmarks/bench_diff.py [--quick] [--value-mb 1024]

--quick uses 1e5 / 256 MB / 1e4; anchors that take seconds are run once, the rest best of 3.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import _rows
import equinox as eqx
import jax
import numpy as np

import treetool as tt


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def model_like(n_leaves: int, make: Callable[[int], Any]) -> dict:
    """{"layer_i": {"block_j": {"w": leaf, "b": leaf}}}: about n_leaves leaves, 4 levels."""
    per_layer = 100
    layers = max(1, n_leaves // (2 * per_layer))
    k = 0
    tree: dict = {}
    for i in range(layers):
        blocks = {}
        for j in range(per_layer):
            blocks[f"block_{j}"] = {"w": make(k), "b": make(k + 1)}
            k += 2
        tree[f"layer_{i}"] = blocks
    return tree


def bench_structure(n: int, rows: list) -> None:
    a = model_like(n, lambda k: np.zeros(2, np.float32))
    b = model_like(n, lambda k: np.zeros(2, np.float32))
    leaves = len(jax.tree_util.tree_leaves(a))

    def anchor() -> None:
        jax.tree_util.tree_flatten_with_path(a)
        jax.tree_util.tree_flatten_with_path(b)

    t_anchor = best(anchor, 3)
    gc.disable()
    try:
        t_nogc = best(anchor, 3)
    finally:
        gc.enable()
    t_ours = best(lambda: tt.diff(a, b, values=False), 3)
    assert not tt.diff(a, b, values=False)
    case = f"structure, {leaves:,} leaves, values=False"
    rows.append((case, "flatten_with_path x2", t_anchor, t_ours, 3.0))
    rows.append((case, "  the same, GC paused", t_nogc, t_ours, None))
    # the same trees with one leaf's shape changed deep inside: the structure still matches
    b["layer_0"]["block_7"]["w"] = np.zeros(3, np.float32)
    t_one = best(lambda: tt.diff(a, b, values=False), 1)
    assert [c.path for c in tt.diff(a, b, values=False)] == ["['layer_0']['block_7']['w']"]
    rows.append(("  same, one shape changed", "flatten_with_path x2", t_anchor, t_one, 3.0))
    # one extra key: treedefs differ, so the full walk runs
    b["layer_0"]["extra"] = {"w": np.zeros(1, np.float32)}
    t_walk = best(lambda: tt.diff(a, b, values=False), 1)
    rows.append(
        ("  same, one key added (full walk)", "flatten_with_path x2", t_anchor, t_walk, None)
    )


def bench_values(mb: int, rows: list) -> float:
    n = mb * (1 << 20) // 4
    rng = np.random.default_rng(0)
    big_a = rng.random(n, dtype=np.float32)
    big_b = big_a.copy()
    pieces = 100
    a = {f"w{i}": x for i, x in enumerate(np.array_split(big_a, pieces))}
    b = {f"w{i}": x for i, x in enumerate(np.array_split(big_b, pieces))}
    t_anchor = best(lambda: np.array_equal(big_a, big_b), 3)
    t_ours = best(lambda: tt.diff(a, b), 3)
    assert not tt.diff(a, b)
    gbps = big_a.nbytes / t_anchor / 1e9
    rows.append(
        (
            f"values, {mb} MB f32 in {pieces} leaves",
            f"np.array_equal ({gbps:.1f} GB/s)",
            t_anchor,
            t_ours,
            2.0,
        )
    )
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    tt.diff(a, b)
    big_b[n // 2] += 1.0  # one difference in the middle leaf: the stats path runs on one chunk
    d = tt.diff(a, b)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert [(c.kind, c.detail["count"]) for c in d] == [("value", 1)]
    return peak / big_a.nbytes


def bench_small_jax(n: int, rows: list, slow_anchors: bool) -> None:
    host = model_like(n, lambda k: np.full(4, k, np.float32))
    a = jax.device_put(host)
    b = jax.device_put(host)
    leaves = len(jax.tree_util.tree_leaves(a))
    # warm up the conversions once
    jax.tree_util.tree_map(np.array_equal, a, b)
    t_anchor = best(lambda: jax.tree_util.tree_map(np.array_equal, a, b), 3)
    t_ours = best(lambda: tt.diff(a, b), 3)
    assert not tt.diff(a, b)
    label = f"values, {leaves:,} small jax arrays"
    rows.append((label, "tree_map(np.array_equal)", t_anchor, t_ours, 1.5))
    if not slow_anchors:
        return
    t_eqx = best(lambda: eqx.tree_equal(a, b), 1)
    rows.append((label, "eqx.tree_equal", t_eqx, t_ours, None))
    try:
        import chex
    except ImportError:
        rows.append((label, "chex (not installed)", float("nan"), t_ours, None))
        return
    t_chex = best(lambda: chex.assert_trees_all_close(a, b), 1)
    rows.append((label, "chex.assert_trees_all_close", t_chex, t_ours, None))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    p.add_argument("--value-mb", type=int, default=None, help="MB of float32 per side")
    _rows.add_argument(p)
    args = p.parse_args()
    n_struct = 100_000 if args.quick else 1_000_000
    mb = args.value_mb or (256 if args.quick else 1024)
    n_small = 10_000 if args.quick else 100_000

    rows: list = []
    bench_small_jax(n_small, rows, slow_anchors=True)
    extra = bench_values(mb, rows)
    bench_structure(n_struct, rows)

    w = max(len(r[0]) for r in rows)
    wa = max(len(r[1]) for r in rows)
    print(f"{'case':<{w}}  {'anchor':<{wa}}  {'anchor s':>9}  {'ours s':>8}  {'ratio':>6}  target")
    for case, anchor, ta, to, target in rows:
        ratio = to / ta if ta == ta and ta > 0 else float("nan")
        tgt = f"<= {target:g}" if target else ""
        print(f"{case:<{w}}  {anchor:<{wa}}  {ta:9.3f}  {to:8.3f}  {ratio:6.2f}  {tgt}")
        _rows.row(
            f"diff: {case.strip()}",
            anchor.strip(),
            ta if ta == ta else None,
            to,
            ("ratio<=", target) if target else None,
        )
    print(f"peak extra memory of the value diff: {extra:.2%} of the data (target < 10%)")
    _rows.row(
        f"diff: peak extra memory of the value diff, share of the data ({mb} MB per side)",
        None,
        None,
        None,
        ("mb<", mb * 2 * 0.10),
        peak_mb=extra * mb * 2,
        note=f"{extra:.2%} of the data (target < 10%)",
    )
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()

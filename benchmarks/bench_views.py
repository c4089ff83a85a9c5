"""treetool.leaves_with_path + str(path) of every leaf vs jax's flatten_with_path + keystr.

One run prints one table: for each tree (dicts: wide, deep, transformer-shaped; an equinox
model; an optax adam state of a transformer-shaped dict) and size (1e4, 1e5, 1e6 leaves), the
anchor (`jax.tree_util.tree_flatten_with_path` and `keystr` of every path: the same work, the
paths and their text), ours (paths *and* their strings), and the ratio (target <= 1.0). The
time of jax's flatten_with_path alone (no strings) is shown beside it. Then view() + render
at depth 2 of the 1e6-leaf tree (target < 0.2 s) and `treetool --help` wall time (target <
0.3 s).

    python benchmarks/bench_views.py [--quick] [--rows-json FILE]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _rows
import jax
import numpy as np
from rich.console import Console

import treetool as tt
from treetool._tree._rich import TreeView


def wide(n: int) -> dict:
    return {f"k{i}": np.float32(i) for i in range(n)}


def deep(n: int) -> dict:
    # 10 levels of nesting, branching to reach n leaves
    per = max(2, round(n ** (1 / 4)))

    def build(level: int, budget: int):
        if level == 4 or budget <= 1:
            return {f"leaf{i}": np.float32(i) for i in range(max(budget, 1))}
        return {"a": {"b": {f"n{i}": build(level + 1, budget // per) for i in range(per)}}}

    return build(0, n)


def transformer(n: int) -> dict:
    per_layer = 16
    layers = max(1, n // per_layer)
    x = np.zeros((), np.float32)
    names = ["q", "k", "v", "o"]
    return {
        "params": {
            f"layer_{i}": {
                "attn": {f"{m}_proj": {"kernel": x, "bias": x} for m in names},
                "mlp": {"fc1": {"kernel": x, "bias": x}, "fc2": {"kernel": x, "bias": x}},
                "ln1": {"scale": x, "bias": x},
                "ln2": {"scale": x, "bias": x},
            }
            for i in range(layers)
        }
    }


def eqx_stack(n: int):
    import equinox as eqx

    class Block(eqx.Module):
        w1: object
        b1: object
        w2: object
        b2: object

    x = np.zeros((), np.float32)
    return [Block(x, x, x, x) for _ in range(max(1, n // 4))]


def optax_adam(n: int):
    """The state of `optax.chain(clip, adam)` for a transformer-shaped dict of n/2 leaves
    (mu and nu hold the params' structure; numpy leaves, as `init` would give jax arrays)."""
    import optax

    params = transformer(n // 2)
    count = np.zeros((), np.int32)
    adam = optax.ScaleByAdamState(count=count, mu=params, nu=params)
    return (optax.EmptyState(), adam)


def best(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(f, g, repeat: int) -> tuple[float, float]:
    """Best times of `f` and `g`, run alternately so that a noisy moment hits both alike."""
    tf, tg = [], []
    for _ in range(repeat):
        for fn, times in ((f, tf), (g, tg)):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(tf), min(tg)


def ours(tree) -> None:
    for p, _ in tt.leaves_with_path(tree):
        str(p)


def anchor(tree) -> None:
    keystr = jax.tree_util.keystr
    for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keystr(p)


def anchor_flatten(tree) -> None:
    jax.tree_util.tree_flatten_with_path(tree)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1e4 and 1e5 only")
    _rows.add_argument(ap)
    args = ap.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    print(
        f"{'tree':<12}{'leaves':>10}{'fwp (s)':>10}{'fwp+keystr (s)':>16}{'treetool (s)':>14}"
        f"{'ratio':>8}"
    )
    for name, make in [
        ("wide dict", wide),
        ("deep dict", deep),
        ("transformer", transformer),
        ("eqx stack", eqx_stack),
        ("optax adam", optax_adam),
    ]:
        for n in sizes:
            tree = make(n)
            leaves = len(jax.tree_util.tree_leaves(tree))
            repeat = {10_000: 21, 100_000: 7}.get(n, 3)
            a, o = paired(lambda t=tree: anchor(t), lambda t=tree: ours(t), repeat)
            f = best(lambda t=tree: anchor_flatten(t), repeat)
            print(f"{name:<12}{leaves:>10,}{f:>10.3f}{a:>16.3f}{o:>14.3f}{o / a:>8.2f}")
            _rows.row(
                f"paths of every leaf: {name}, {leaves:,} leaves",
                "jax flatten_with_path + keystr",
                a,
                o,
                ("ratio<=", 1.0),
                note=f"flatten_with_path alone {f:.3f} s",
            )
            del tree
    big = transformer(1_000_000)
    console = Console(file=io.StringIO(), width=120, color_system=None)
    t = best(lambda: console.print(TreeView(tt.view(big), depth=2)), 3)
    print(f"\nview() + render depth 2 of a 1e6-leaf transformer dict: {t:.3f} s (target < 0.2 s)")
    _rows.row("view() + render depth 2, 1e6-leaf dict", None, None, t, ("s<", 0.2))
    exe = str(Path(sys.executable).with_name("treetool"))
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], capture_output=True, check=True)
        runs.append(time.perf_counter() - t0)
    print(
        f"treetool --help wall time: min {min(runs):.3f} s, median {statistics.median(runs):.3f} s (target < 0.3 s)"
    )
    _rows.row("`treetool --help` wall time", None, None, min(runs), ("s<", 0.3))
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()

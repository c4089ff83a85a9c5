"""Benchmark of the safe load of cloudpickled equinox checkpoints, which hold functions.

Tree: `{"model": eqx MLP, "opt": optax adamw state, "step"}` saved with cloudpickle; the MLP
holds `jax.nn.relu` (a custom_jvp around a jit function) and a lambda. Each depth adds layers
(and optimizer moments), so the file grows while the functions stay.

Anchor: `cloudpickle.load` of the same file (the trusted load, which runs the file's code and
rebuilds the real functions). treetool's safe load never runs code; its functions become one
`OpaqueFunction` leaf each (the pass that finds them runs only when a file has functions).
The leaf count is checked against jax's on the live object (before this pass: 343 leaves
where jax has 22 at depth 2).

    python benchmarks/bench_functions.py           # depths 2, 64, 512
    python benchmarks/bench_functions.py --quick   # depths 2, 64
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time

import _rows

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import cloudpickle
import equinox as eqx
import jax
import optax

import treetool as tt


def make(depth: int) -> dict:
    m = eqx.nn.MLP(3, 2, 4, depth, key=jax.random.key(0))
    return {"model": m, "opt": optax.adamw(1e-3).init(eqx.filter(m, eqx.is_array)), "step": 3}


def best(fn, repeat: int = 5) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    _rows.add_argument(ap)
    args = ap.parse_args()
    depths = [2, 64] if args.quick else [2, 64, 512]
    print(f"{'depth':>6} {'leaves':>7} {'jax':>5} {'safe ms':>9} {'trusted ms':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as d:
        for depth in depths:
            live = make(depth)
            path = os.path.join(d, f"mlp{depth}.pkl")
            with open(path, "wb") as fh:
                cloudpickle.dump(live, fh, protocol=5)
            safe = best(lambda p=path: tt.load(p))
            trusted = best(lambda p=path: pickle.load(open(p, "rb")))  # noqa: SIM115
            n = len(tt.leaves_with_path(tt.load(path)))
            want = len(jax.tree_util.tree_leaves(live))
            assert n == want, (n, want)
            print(
                f"{depth:>6} {n:>7} {want:>5} {safe * 1e3:>9.1f} {trusted * 1e3:>11.1f} "
                f"{safe / trusted:>6.2f}"
            )
            _rows.row(
                f"safe load of a cloudpickled eqx checkpoint, depth {depth}, {n} leaves",
                "cloudpickle.load (trusted)",
                trusted,
                safe,
            )
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()

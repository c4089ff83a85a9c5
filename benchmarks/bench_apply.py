"""Benchmark of `plan.apply()` eager (the default) against `plan.apply(lazy=True)`.

Source: a safetensors file with torch `nn.Linear` names and `(out, in)` layouts (a stack of
square layers, float32); target: the equinox model of the same shapes (`eqx.nn.Linear`
layers, jax arrays). Figures, each beside its anchor in the same run (best of `--repeat`):

- `apply()`: every leaf read from the file and made a jax array, against `apply(lazy=True)`
  (leaves that stay in the file, nothing read): what eager costs up front;
- to the first output: `apply()` then one forward call, against `apply(lazy=True)` then the
  same call (an `eqx.nn.Linear` computes `weight @ x`, which a lazy leaf accepts by reading
  itself): what the user waits for either way. Lazy leaves cannot go further: `jax.jit`, a
  conv, an embedding lookup under `vmap` or `lax.scan` refuse them, which is why eager is the
  default;
- the eager model under `jax.jit` (compile and first call), for scale.

    python benchmarks/bench_apply.py            # 16 layers of 2048 x 2048 (256 MiB)
    python benchmarks/bench_apply.py --quick    # 4 layers of 512 x 512
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import numpy as np
from safetensors.numpy import save_file

import treetool as tt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _rows


class Stack(eqx.Module):
    layers: tuple[eqx.nn.Linear, ...]

    def __init__(self, n: int, width: int, key: jax.Array) -> None:
        keys = jax.random.split(key, n)
        self.layers = tuple(eqx.nn.Linear(width, width, key=k) for k in keys)

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = jax.nn.tanh(layer(x))
        return x


def best(fn: object, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        out = jax.block_until_ready(out) if isinstance(out, jax.Array) else out
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    _rows.add_argument(ap)
    args = ap.parse_args()
    n, width = (4, 512) if args.quick else (16, 2048)
    rng = np.random.default_rng(0)
    sd = {}
    for i in range(n):
        sd[f"{i}.weight"] = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(
            np.float32
        )
        sd[f"{i}.bias"] = rng.standard_normal(width).astype(np.float32)
    mib = sum(v.nbytes for v in sd.values()) / 2**20
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        save_file(sd, path)
        del sd
        target = Stack(n, width, jax.random.key(0))
        plan = tt.port(path, target)
        assert plan.complete, plan.problems()
        x = np.ones(width, np.float32)
        t_lazy, _ = best(lambda: plan.apply(lazy=True), args.repeat)
        t_eager, model = best(lambda: plan.apply(), args.repeat)
        t_lazy_first, _ = best(lambda: plan.apply(lazy=True)(x), args.repeat)
        t_eager_first, _ = best(lambda: plan.apply()(x), args.repeat)
        t0 = time.perf_counter()
        jax.block_until_ready(eqx.filter_jit(model)(x))
        t_jit = time.perf_counter() - t0
    name = f"{n} x Linear({width}, {width}), {mib:.0f} MiB f32"
    print(f"{name}")
    print(f"  apply(lazy=True)           {t_lazy * 1e3:9.1f} ms  (nothing read)")
    print(f"  apply() (eager)            {t_eager * 1e3:9.1f} ms  ({mib / t_eager:.0f} MiB/s)")
    print(f"  ratio eager / lazy         {t_eager / t_lazy:9.1f} x")
    print(f"  lazy apply + first call    {t_lazy_first * 1e3:9.1f} ms")
    print(f"  eager apply + first call   {t_eager_first * 1e3:9.1f} ms")
    print(f"  ratio (to first output)    {t_eager_first / t_lazy_first:9.2f} x")
    print(f"  eager model, filter_jit first call (compile) {t_jit * 1e3:.0f} ms")
    _rows.row(f"plan.apply() eager vs lazy=True: {name}", "apply(lazy=True)", t_lazy, t_eager,
              note=f"{mib / t_eager:.0f} MiB/s read into jax arrays")  # fmt: skip
    _rows.row(f"apply + first call, eager vs lazy: {name}", "lazy apply + first call",
              t_lazy_first, t_eager_first, ("ratio<=", 1.5),
              note="lazy leaves cannot be jitted, convolved or scanned")  # fmt: skip
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()

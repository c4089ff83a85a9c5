"""Per-call dispatch overhead of `tt.autojit` vs `equinox.filter_jit` vs plain `jax.jit`.

The call: an equinox model of 100 array leaves (plus its activation functions, which are
static), a tiny input, a function whose compiled work is negligible, so the time per call is
the wrapper's dispatch. Each wrapper is compiled first; then the best of several rounds of
many calls is taken. The overhead of a wrapper is its time per call minus plain jax.jit's on
the same arrays (partitioned by hand, which is what both wrappers automate). Target:
tt.autojit's overhead <= 0.5x equinox.filter_jit's.

    python benchmarks/bench_transforms.py [--calls N] [--rounds R] [--quick] [--rows-json FILE]
"""

from __future__ import annotations

import argparse
import time

import _rows
import equinox as eqx
import jax
import jax.numpy as jnp

import treetool as tt


def make_model() -> eqx.Module:
    # 50 layers x (weight, bias) = 100 array leaves
    return eqx.nn.MLP(4, 4, 4, 49, key=jax.random.key(0))


def per_call(cases, calls: int, rounds: int) -> dict[str, float]:
    """Best time per call of each case; rounds interleave the cases, so noise hits all alike."""
    best = {name: float("inf") for name, _, _ in cases}
    for _ in range(rounds):
        for name, fn, args in cases:
            t0 = time.perf_counter()
            for _ in range(calls):
                out = fn(*args)
            jax.block_until_ready(out)
            best[name] = min(best[name], (time.perf_counter() - t0) / calls)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="500 calls x 3 rounds")
    _rows.add_argument(ap)
    a = ap.parse_args()
    if a.quick:
        a.calls, a.rounds = 500, 3

    model = make_model()
    n_arrays = len(jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)))
    x = jnp.ones(4)

    def f(model, x, mode):
        y = model.layers[0].bias + x
        return y * 2 if mode == "double" else y

    params, static = eqx.partition(model, eqx.is_array)

    def g(params, x):
        return f(eqx.combine(params, static), x, "double")

    ours = tt.autojit(f)
    theirs = eqx.filter_jit(f)
    plain = jax.jit(g)
    cases = [
        ("jax.jit (arrays only, by hand)", plain, (params, x)),
        ("equinox.filter_jit", theirs, (model, x, "double")),
        ("treetool.autojit", ours, (model, x, "double")),
    ]
    for _, fn, args in cases:  # compile, and check they agree
        jax.block_until_ready(fn(*args))
    assert jnp.array_equal(ours(model, x, "double"), theirs(model, x, "double"))

    print(f"model: {n_arrays} array leaves; {a.calls} calls per round, best of {a.rounds}")
    print(f"{'wrapper':<34}{'us/call':>10}")
    times = per_call(cases, a.calls, a.rounds)
    for name, _, _ in cases:
        print(f"{name:<34}{times[name] * 1e6:>10.1f}")
    base = times["jax.jit (arrays only, by hand)"]
    ours_t, eqx_t = times["treetool.autojit"], times["equinox.filter_jit"]
    print(
        f"\noverhead over plain jax.jit: autojit {(ours_t - base) * 1e6:.1f} us, "
        f"filter_jit {(eqx_t - base) * 1e6:.1f} us -> ratio {(ours_t - base) / (eqx_t - base):.2f}"
        " (target <= 0.5)"
    )
    print(
        f"whole call: autojit / filter_jit = {ours_t / eqx_t:.2f}, autojit / jax.jit = {ours_t / base:.2f}"
    )
    print(f"cache: {ours.cache_info()}")
    _rows.row(
        f"autojit cached call: overhead over jax.jit ({n_arrays} arrays)",
        "equinox.filter_jit's overhead",
        eqx_t - base,
        ours_t - base,
        ("ratio<=", 0.5),
        note=f"jax.jit {base * 1e6:.1f} us/call; whole call autojit/filter_jit {ours_t / eqx_t:.2f}",
    )
    _rows.dump(a.rows_json)


if __name__ == "__main__":
    main()

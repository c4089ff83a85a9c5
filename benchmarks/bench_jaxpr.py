"""Building a JaxprView vs printing the same jaxpr (`str(jaxpr)`), on a ~10,000-equation jaxpr.

The jaxpr is the value-and-gradient of an unrolled 68-layer MLP (two layer norms, a gelu and a silu sublayer, residual),
traced once. The anchor is `str(closed_jaxpr)`, jax's own text of it; "view" is
`JaxprView(closed_jaxpr)`: the walk that names every variable, builds the equation tree with
its sub-jaxprs, the uses/producers index and the input paths. The other rows are what a
viewer does next: counts, `to_dict()` (the JSON the notebook renders), and the rich text.

    python benchmarks/bench_jaxpr.py [--quick] [--layers N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import io
import time

import _rows
import jax
import jax.numpy as jnp
from rich.console import Console

from treetool._jaxpr._view import JaxprView


def _norm(h, scale, bias):
    mu = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean((h - mu) ** 2, axis=-1, keepdims=True)
    return (h - mu) * jax.lax.rsqrt(var + 1e-5) * scale + bias


def _mlp_loss(params, x):
    for p in params:
        h = _norm(x, p["scale"], p["shift"])
        h = jax.nn.gelu(h @ p["w1"] + p["b1"])
        h = jax.nn.silu(h @ p["w2"] + p["b2"])
        x = x + _norm(h, p["scale2"], p["shift2"])
    return jnp.mean(x**2)


_VECTORS = ("b2", "scale", "shift", "scale2", "shift2")


def build(layers: int, width: int = 16) -> tuple[jax.extend.core.ClosedJaxpr, int]:
    """The closed jaxpr of value_and_grad of an unrolled `layers`-layer MLP, and its size."""
    params = [
        {
            "w1": jax.ShapeDtypeStruct((width, 4 * width), jnp.float32),
            "b1": jax.ShapeDtypeStruct((4 * width,), jnp.float32),
            "w2": jax.ShapeDtypeStruct((4 * width, width), jnp.float32),
            **{k: jax.ShapeDtypeStruct((width,), jnp.float32) for k in _VECTORS},
        }
        for _ in range(layers)
    ]
    x = jax.ShapeDtypeStruct((8, width), jnp.float32)
    closed = jax.make_jaxpr(jax.value_and_grad(_mlp_loss))(params, x)
    return closed, len(JaxprView(closed).equations)


def best(fn, repeat: int) -> float:
    """The best wall time of `repeat` calls (GC collected before each)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 layers instead of 68")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    _rows.add_argument(ap)
    a = ap.parse_args()
    layers = a.layers or (10 if a.quick else 68)
    closed, n_eqns = build(layers)

    anchor = best(lambda: str(closed), a.repeat)
    view_t = best(lambda: JaxprView(closed), a.repeat)
    view = JaxprView(closed)
    counts_t = best(lambda: view.counts(), a.repeat)
    dict_t = best(lambda: view.to_dict(source=False), a.repeat)
    dict_src_t = best(lambda: JaxprView(closed).to_dict(source=True), max(1, a.repeat // 2))

    def rich_text() -> str:
        c = Console(width=160, color_system=None, file=io.StringIO())
        c.print(view.render(width=None, cost=False, source=False))
        return c.file.getvalue()

    rich_t = best(rich_text, max(1, a.repeat // 2))

    print(f"jaxpr: value_and_grad of a {layers}-layer MLP, {n_eqns:,} equations (recursive)")
    print(f"{'what':<44}{'anchor str(jaxpr) s':>20}{'treetool s':>12}{'ratio':>8}")
    rows = [
        ("JaxprView(closed_jaxpr)  [target <= 1]", view_t),
        ("view.counts()", counts_t),
        ("view.to_dict(source=False)", dict_t),
        ("JaxprView + to_dict(source=True)", dict_src_t),
        ("rich text of every equation", rich_t),
    ]
    for name, t in rows:
        print(f"{name:<44}{anchor:>20.4f}{t:>12.4f}{t / anchor:>8.2f}")
        _rows.row(
            f"jaxpr ({n_eqns:,} equations): {name.split('  [')[0]}",
            "str(closed_jaxpr)",
            anchor,
            t,
            ("ratio<=", 1.0) if "target" in name else None,
        )
    _rows.dump(a.rows_json)


if __name__ == "__main__":
    main()

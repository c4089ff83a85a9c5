"""Model surgery on an equinox MLP and a flax linen params dict, with the diff of every step.

Widen a hidden layer (function-preserving: the new units start at zero), add a LoRA-style
adapter to every Linear, re-initialise all biases, drop the last layer, and freeze everything
but the adapters. Every step returns a new tree; the diffs show exactly what each one changed.

Run: python examples/surgery.py
"""

from __future__ import annotations

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import treetool as tt

# Shapes come from jax.eval_shape and values from numpy: no XLA compile just to build the models.
KEY = jax.ShapeDtypeStruct((2,), jnp.uint32)
RNG = np.random.default_rng(0)


def materialise(abstract: object) -> object:
    """Random numpy values for every ShapeDtypeStruct of an abstract model."""
    return jax.tree_util.tree_map(
        lambda s: (
            (RNG.normal(size=s.shape) * 0.5).astype(s.dtype)
            if isinstance(s, jax.ShapeDtypeStruct)
            else s
        ),
        abstract,
    )


def step(title: str, before: object, after: object) -> None:
    print(f"\n## {title}")
    print(tt.diff(before, after))


class LoRALinear(eqx.Module):
    """A frozen Linear plus a trainable low-rank update `b @ a` (zero at the start)."""

    base: eqx.nn.Linear
    lora_a: jax.Array
    lora_b: jax.Array

    def __init__(self, base: eqx.nn.Linear, rank: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.base = base
        self.lora_a = (rng.normal(size=(rank, base.in_features)) * 0.01).astype(np.float32)
        self.lora_b = np.zeros((base.out_features, rank), np.float32)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.base(x) + self.lora_b @ (self.lora_a @ x)


def widened(lin: eqx.nn.Linear, *, out: int | None = None, inp: int | None = None) -> eqx.nn.Linear:
    """`lin` with more outputs and/or inputs; the new rows and columns are zero."""
    out, inp = out or lin.out_features, inp or lin.in_features
    fresh = eqx.filter_eval_shape(eqx.nn.Linear, inp, out, key=KEY)
    weight = np.pad(lin.weight, ((0, out - lin.out_features), (0, inp - lin.in_features)))
    bias = np.pad(lin.bias, (0, out - lin.out_features))
    return tt.tree_at(["weight", "bias"], fresh, (weight, bias))


def equinox_mlp() -> None:
    print("# equinox MLP")
    model = materialise(eqx.filter_eval_shape(eqx.nn.MLP, 3, 2, 4, 2, key=KEY))
    forward = eqx.filter_jit(lambda m, x: m(x))
    x = np.arange(3.0, dtype=np.float32)
    y0 = forward(model, x)

    # 1. Widen the first hidden layer from 4 to 8 units. Selections check shapes by default...
    try:
        tt.select(model, "layers[0]").set(widened(model.layers[0], out=8))
    except tt.SelectionError as e:
        print(f"refused: {e}")
    # ...so a deliberate change of shape says so (tt.tree_at, like eqx.tree_at, never checks).
    wide = tt.tree_at(
        lambda m: (m.layers[0], m.layers[1]),
        model,
        (widened(model.layers[0], out=8), widened(model.layers[1], inp=8)),
    )
    step("widen layers[0] to 8 units", model, wide)

    # 2. A LoRA adapter around every Linear: a change of structure, allowed and shown in the diff.
    lora = tt.select(wide, eqx.nn.Linear).apply(lambda lin: LoRALinear(lin, 2, seed=1))
    step("LoRA adapter on every Linear", wide, lora)
    print(f"same function: max |y - y0| = {float(jnp.abs(forward(lora, x) - y0).max()):.1e}")

    # 3. Re-initialise all biases.
    reset = tt.select(lora, "**.bias").apply(np.zeros_like)
    step("re-initialise every bias", lora, reset)

    # 4. Drop the last layer (the MLP now returns its last hidden features).
    headless = tt.delete(reset, "layers[-1]")
    step("drop the last layer", reset, headless)

    # 5. Freeze everything but the adapters.
    trainable, frozen = tt.partition(headless, "**.lora_*")
    n_train = sum(x.size for x in jax.tree_util.tree_leaves(trainable))
    n_all = sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(headless, eqx.is_array)))
    print(f"\n## freeze all but the adapters\ntrainable {n_train} of {n_all} parameters:")
    print("\n".join(f"  {p}" for p, _ in tt.leaves_with_path(trainable)))
    assert eqx.tree_equal(tt.combine(trainable, frozen), headless)


class Net(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = nn.Dense(4)(x)
        return nn.Dense(2)(nn.relu(hidden))


def flax_params() -> None:
    print("\n# flax linen params")
    params = materialise(jax.eval_shape(Net().init, KEY, jax.ShapeDtypeStruct((1, 3), jnp.float32)))

    # 1. Widen Dense_0 from 4 to 8 features, by path.
    d0, d1 = params["params"]["Dense_0"], params["params"]["Dense_1"]
    wide = tt.tree_at(
        ["params.Dense_0.kernel", "params.Dense_0.bias", "params.Dense_1.kernel"],
        params,
        (
            np.pad(d0["kernel"], ((0, 0), (0, 4))),
            np.pad(d0["bias"], (0, 4)),
            np.pad(d1["kernel"], ((0, 4), (0, 0))),
        ),
    )
    step("widen Dense_0 to 8 features", params, wide)

    # 2. An adapter in every Dense: new dict keys.
    lora = wide
    for path, dense in tt.select(wide, "params.Dense_*"):
        n_in, n_out = dense["kernel"].shape
        lora = tt.insert(lora, f"{path}['lora_a']", np.full((n_in, 2), 0.01, np.float32))
        lora = tt.insert(lora, f"{path}['lora_b']", np.zeros((2, n_out), np.float32))
    step("adapters in every Dense", wide, lora)

    # 3. Re-initialise all biases (to 0.1); 4. drop the last layer and name the first one.
    reset = tt.select(lora, "**.bias").apply(lambda b: np.full_like(b, 0.1))
    step("re-initialise every bias", lora, reset)
    encoder = tt.rename(tt.delete(reset, "params.Dense_1"), "params.Dense_0", "encoder")
    step("drop Dense_1, rename Dense_0 to encoder", reset, encoder)

    # 5. Freeze everything but the adapters.
    trainable, frozen = tt.partition(encoder, "**.lora_*")
    print("\n## freeze all but the adapters")
    print("trainable:", [str(p) for p, _ in tt.leaves_with_path(trainable)])
    print("frozen:   ", [str(p) for p, _ in tt.leaves_with_path(frozen)])


if __name__ == "__main__":
    equinox_mlp()
    flax_params()

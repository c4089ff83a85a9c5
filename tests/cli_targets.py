"""Objects that the CLI tests name as `cli_targets:NAME` (run with tests/ as the cwd)."""

from __future__ import annotations

import numpy as np


def small():
    return {
        "params": {
            "dense": {
                "kernel": np.arange(6, dtype=np.float32).reshape(2, 3),
                "bias": np.zeros(3, np.float32),
            },
        },
        "step": 7,
        "name": "tiny",
    }


def mlp():
    import equinox as eqx
    import jax

    return eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))


def broken():
    raise RuntimeError("the factory failed\nwith a second line")


TABLE = {"w": np.ones((2, 2), np.float16)}


def jaxpr_view():
    import jax.numpy as jnp

    import treetool as tt

    def loss(params, x):
        return jnp.sum(jnp.tanh(x @ params["w"]) + params["b"])

    return tt.jaxpr(loss, {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}, jnp.ones((4, 3)))


def mlp_loss(model, x, y):
    """A loss over an equinox MLP, for `treetool inspect cli_targets:mlp_loss --args ...`."""
    import jax
    import jax.numpy as jnp

    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def scaled(x, factor):
    return x * factor

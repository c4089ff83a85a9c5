"""One fixed corpus of real trees, built once per test session and shared by the tests.

Every tree here is made by the real library (equinox, optax, flax linen and nnx, jax), small
enough to keep the suite fast.
"""

from __future__ import annotations

import collections
import functools
from typing import Any, NamedTuple

import numpy as np


class Point(NamedTuple):
    x: Any
    y: Any


@functools.cache
def corpus() -> dict[str, Any]:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    key = jax.random.key(0)
    mlp = eqx.nn.MLP(3, 2, 4, 2, key=key)
    mha = eqx.nn.MultiheadAttention(2, 4, key=key)
    adamw = optax.adamw(1e-3).init(eqx.filter(mlp, eqx.is_array))
    return {
        "mlp": mlp,
        "mha": mha,
        "adamw": adamw,
        "linen": _linen_params(),
        "nnx_state": _nnx_state(),
        "namedtuple": Point(np.arange(3.0), Point(1, None)),
        "ordered": collections.OrderedDict([("z", np.ones(2)), ("a", [1.0, (2.0,)])]),
        "defaultdict": collections.defaultdict(list, {"b": [np.zeros(1)], "a": []}),
        "nones": {"a": None, "b": [None, 1.0], "c": (None,)},
        "empties": {"l": [], "t": (), "d": {}, "x": [[], {}]},
        "keys": {"typed": jax.random.split(key, 3), "legacy": jax.random.PRNGKey(1)},
        "mixed": {"s": "relu", "i": 3, "f": 0.5, "arr": jnp.ones((2, 2), jnp.bfloat16)},
        "int_keys": {0: np.ones(1), 1: {"w": np.zeros(2)}},
    }


def _linen_params() -> Any:
    import flax.linen as nn
    import jax

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(4)(x)
            x = nn.LayerNorm()(x)
            return nn.Dense(2)(x)

    return Net().init(jax.random.key(0), np.ones((1, 3), np.float32))


def _nnx_state() -> Any:
    from flax import nnx

    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    return nnx.state(model)

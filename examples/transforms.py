"""Batch axes, autojit and key trees on a small equinox model and a dict of problem data.

python examples/transforms.py
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

import treetool as tt

BATCH = 8

# Per-example data next to configuration: strings, numbers, and a table that happens to have
# BATCH rows but is shared by every example.
problem = {
    "x": jnp.linspace(0, 1, BATCH * 3).reshape(BATCH, 3),
    "y": jnp.arange(BATCH, dtype=jnp.float32),
    "cfg": {"loss": "l2", "steps": 3, "table": jnp.ones((BATCH, 3))},
}

axes, report = tt.batch_axes(problem, BATCH, explain=True)
print("## batch_axes")
print(axes)
print(report)
print(tt.batch_axes(problem, BATCH, exclude="cfg.table"))


def loss(p):
    err = p["x"] @ p["cfg"]["table"].mean(axis=0) - p["y"]
    return err**2 if p["cfg"]["loss"] == "l2" else jnp.abs(err)


per_example = tt.auto_vmap(loss, BATCH, exclude="**.table")(problem)
print("per-example loss:", per_example.shape, per_example.dtype)


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float
    act: str


@tt.autojit
def forward(model, x, cfg: Config):
    y = jax.vmap(model)(x) * cfg.scale
    return jax.nn.relu(y) if cfg.act == "relu" else jnp.tanh(y)


model = eqx.nn.MLP(3, 2, 16, 2, key=jax.random.key(0))
for cfg in [Config(1.0, "relu"), Config(1.0, "relu"), Config(1.0, "tanh")]:
    forward(model, problem["x"], cfg)
forward(model, problem["x"][:4], Config(1.0, "tanh"))
print("\n## autojit")
info = forward.cache_info()
print(f"hits {info.hits}, compiles {info.misses}")
for reason in info.reasons:
    print("  compiled:", reason)

print("\n## split_keys")
keys = tt.split_keys(jax.random.key(42), model)
for path, k in tt.leaves_with_path(keys):
    print(f"{path!s:<22} {tt.leaf_info(k).label}")

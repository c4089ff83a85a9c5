"""A first look inside a model: paths, one leaf, a layer-level view, a summary, a custom node.

Run: python examples/inspect_model.py (it builds an optax state: `pip install 'treetool[demo]'`)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import rich

import treetool as tt

model = eqx.nn.MLP(in_size=8, out_size=2, width_size=16, depth=2, key=jax.random.key(0))
opt_state = optax.adamw(1e-3).init(eqx.filter(model, eqx.is_array))

# 1. The tree, with shapes, params and bytes per node.
rich.print(tt.render({"model": model, "opt_state": opt_state}, depth=3))

# 2. Every leaf's path is jax's keystr, and pastes back into get().
for path, leaf in tt.leaves_with_path(model)[:4]:
    print(f"{path!s:<20} {tt.leaf_info(leaf).label}")
print(tt.get(model, "layers[2].weight").shape, tt.get(opt_state, "[0].mu.layers.0.bias").shape)

# 3. A layer-level view: every Linear is one leaf.
layers = tt.to_flat_dict(model, is_leaf=lambda x: isinstance(x, eqx.nn.Linear))
print([k for k, v in layers.items() if isinstance(v, eqx.nn.Linear)])

# 4. Where the parameters are (an optimizer state holds two copies of the model).
rich.print(tt.summary({"model": model, "opt_state": opt_state}, depth=1))

# 5. A registered custom node: key paths, static fields, works with jit.


@tt.pytree_node
class Adapter:
    down: jax.Array
    up: jax.Array
    rank: int = tt.static(default=4)


adapter = Adapter(jnp.zeros((16, 4)), jnp.zeros((4, 16)))
print([str(p) for p, _ in tt.leaves_with_path(adapter)], jax.jit(lambda a: a.rank * 1.0)(adapter))

# 6. A mistyped path says where it stops and what was meant.
try:
    tt.get(model, "layers[1].wieght")
except KeyError as e:
    print(e)

"""Importable `module:attr` targets for the `treetool diff` CLI tests (real equinox models).

Keys are fixed, so every process builds exactly the same weights.
"""

from __future__ import annotations

import equinox as eqx
import jax


def mlp() -> eqx.nn.MLP:
    """A small MLP: 2 -> 8 -> 8 -> 3."""
    return eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0))


def mlp_perturbed() -> eqx.nn.MLP:
    """The same MLP with one bias element moved by 1e-3."""
    m = mlp()
    return eqx.tree_at(lambda t: t.layers[2].bias, m, m.layers[2].bias.at[1].add(1e-3))


def mlp_wide() -> eqx.nn.MLP:
    """The same MLP with its middle layer replaced by a wider one."""
    m = mlp()
    return eqx.tree_at(lambda t: t.layers[1], m, eqx.nn.Linear(8, 16, key=jax.random.key(1)))

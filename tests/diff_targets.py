"""Importable `module:attr` targets for the `treetool diff` CLI tests (real equinox models).

Keys are fixed, so every process builds exactly the same weights. jax and equinox are
imported inside the functions, so that a misspelt target fails fast.
"""

from __future__ import annotations

from typing import Any


def mlp() -> Any:
    """A small equinox MLP: 2 -> 8 -> 8 -> 3."""
    import equinox as eqx
    import jax

    return eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0))


def mlp_perturbed() -> Any:
    """The same MLP with one bias element moved by 1e-3."""
    import equinox as eqx

    m = mlp()
    return eqx.tree_at(lambda t: t.layers[2].bias, m, m.layers[2].bias.at[1].add(1e-3))


def mlp_wide() -> Any:
    """The same MLP with its middle layer replaced by a wider one."""
    import equinox as eqx
    import jax

    m = mlp()
    return eqx.tree_at(lambda t: t.layers[1], m, eqx.nn.Linear(8, 16, key=jax.random.key(1)))

"""Pytree techniques for jax's transformations: batch axes for `vmap`, `autojit`, key trees.

`import treetool.transforms as ttx` (the four names are also at `tt.*`):

- `batch_axes`: the `in_axes` tree for `jax.vmap`: which leaves carry the batch, and why;
- `auto_vmap`: `jax.vmap` with those axes found on each call;
- `autojit`: `jax.jit` of any function of pytrees: arrays traced, every other leaf static;
- `split_keys`: one independent PRNG key per array leaf, in the tree's structure.

Example:
    >>> import jax, numpy as np
    >>> import treetool.transforms as ttx
    >>> data = {"x": np.zeros((8, 3)), "y": np.zeros(8), "cfg": {"lr": 0.1}}
    >>> ttx.batch_axes(data, 8)
    {'cfg': None, 'x': 0, 'y': 0}
    >>> keys = ttx.split_keys(jax.random.key(0), data)
    >>> keys["cfg"], jax.dtypes.issubdtype(keys["x"].dtype, jax.dtypes.prng_key)
    ({'lr': None}, True)
    >>> ttx.autojit(lambda d, scale: d["x"].sum() * scale)(data, 2.0).item()
    0.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treetool._public import lazy_names

if TYPE_CHECKING:
    # Generated from `_LAZY` (below) by `python tests/project/test_typecheck.py`: the
    # names loaded on first use, imported for type checkers and editors only.
    from treetool._transforms._autojit import autojit as autojit
    from treetool._transforms._axes import auto_vmap as auto_vmap
    from treetool._transforms._axes import batch_axes as batch_axes
    from treetool._transforms._axes import split_keys as split_keys

#: name -> the module it is imported from, on first use; the block above is generated from it
_LAZY: dict[str, str] = {
    "auto_vmap": "treetool._transforms._axes",
    "autojit": "treetool._transforms._autojit",
    "batch_axes": "treetool._transforms._axes",
    "split_keys": "treetool._transforms._axes",
}

__all__ = sorted(_LAZY)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)

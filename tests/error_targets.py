"""A tree with broken nodes, named `error_targets:TREE` by the CLI tests (tests/ is the cwd).

`Broken` is a real jax-registered pytree node whose flatten raises; `BadShape` is a leaf whose
`.shape` property raises, so its facts fail.
"""

from __future__ import annotations

import jax
import numpy as np


class Broken:
    """A registered pytree node whose flatten raises."""

    def __repr__(self) -> str:
        return "Broken()"


def _flatten(_):
    raise RuntimeError("flatten exploded")


jax.tree_util.register_pytree_with_keys(Broken, _flatten, lambda aux, kids: Broken())


class BadShape:
    """A leaf whose facts fail: reading `.shape` raises."""

    dtype = np.dtype("float32")

    @property
    def shape(self):
        raise ValueError("no shape today")

    def __repr__(self) -> str:
        return "BadShape()"


def tree() -> dict:
    return {"ok": np.ones(3), "bad": Broken(), "deep": {"x": [1, Broken()]}, "odd": BadShape()}


def fixed() -> dict:
    return {"ok": np.ones(3), "bad": np.zeros(2), "deep": {"x": [1, 2]}, "odd": np.ones(1)}


TREE = tree()
FIXED = fixed()

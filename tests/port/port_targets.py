"""`module:attr` targets and checks for `treetool port` in a subprocess (tests/port is the cwd)."""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import port_models as pm

#: where the test put the torch reference (inputs and outputs, saved by torch's side)
REF = os.environ.get("PORT_REF", "")


def eqx_mlp() -> Any:
    import equinox as eqx

    return eqx.nn.MLP(3, 2, 5, 1, key=jax.random.key(0))


def eqx_layer() -> Any:
    return pm.EqxLayer(jax.random.key(0))


def gpt2_variables() -> Any:
    ids = np.zeros((1, pm.T), np.int32)
    return pm.LinenGPT2().init(jax.random.key(0), ids)


def square_mlp() -> Any:
    """Three square Dense layers (flax linen names): names cannot tell which is which."""
    return {"params": {f"Dense_{i}": {"kernel": np.zeros((4, 4), np.float32),
                                      "bias": np.zeros(4, np.float32)} for i in range(3)}}  # fmt: skip


def check_layer(ported: Any) -> tuple[Any, Any]:
    """The ported equinox layer on the recorded inputs, and torch's recorded outputs."""
    ref = np.load(REF)
    return ported(ref["ids"]), ref["out"]


def check_gpt2(ported: Any) -> tuple[Any, Any]:
    ref = np.load(REF)
    return pm.LinenGPT2().apply(ported, ref["ids"]), ref["out"]

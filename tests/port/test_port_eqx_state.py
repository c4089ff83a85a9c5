"""BatchNorm running statistics into an equinox `State`: `tt.port(source, (model, state))`
fills both, and the ported model in inference mode computes torch's outputs in eval mode."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import port_models as pm
import pytest

import treetool as tt
from treetool._port import PortError

pytestmark = pytest.mark.slow  # builds real torch and JAX models and runs them

TOL = 1e-4


class _EqxCNN(eqx.Module):
    conv1: eqx.nn.Conv2d
    bn1: eqx.nn.BatchNorm
    conv2: eqx.nn.Conv2d
    bn2: eqx.nn.BatchNorm
    head: eqx.nn.Linear

    def __init__(self, mode: str, key: jax.Array) -> None:
        k = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(3, 8, 3, padding=1, key=k[0])
        self.bn1 = eqx.nn.BatchNorm(8, "batch", eps=1e-5, inference=True, mode=mode)
        self.conv2 = eqx.nn.Conv2d(8, 16, 3, padding=1, key=k[1])
        self.bn2 = eqx.nn.BatchNorm(16, "batch", eps=1e-5, inference=True, mode=mode)
        self.head = eqx.nn.Linear(16, 10, key=k[2])

    def __call__(self, x: jax.Array, state: eqx.nn.State) -> tuple[jax.Array, eqx.nn.State]:
        x, state = self.bn1(self.conv1(x), state)
        x, state = self.bn2(self.conv2(jax.nn.relu(x)), state)
        return self.head(jax.nn.relu(x).mean(axis=(1, 2))), state


@pytest.mark.parametrize("mode", ["ema", "batch"])
def test_cnn_with_batchnorm_into_equinox_model_and_state(mode: str) -> None:
    m = pm.torch_cnn()
    model, state = eqx.nn.make_with_state(_EqxCNN)(mode, jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), (model, state))
    assert plan.complete and not plan.ambiguous
    rows = [(r.target, r.sources) for r in plan.rows]
    stats = [(t, s) for t, s in rows if t.startswith("[1]")]
    assert [s for _, s in stats] == [
        ("1.running_mean",), ("1.running_var",), ("4.running_mean",), ("4.running_var",),
    ]  # fmt: skip
    assert ("[0].bn2.weight", ("4.weight",)) in rows
    ported_model, ported_state = plan.apply(lazy=False)
    assert type(ported_state) is eqx.nn.State
    mean, var = ported_state.get(model.bn1.ema_state_index or model.bn1.batch_state_index)
    np.testing.assert_array_equal(np.asarray(mean), m.state_dict()["1.running_mean"].numpy())
    np.testing.assert_array_equal(np.asarray(var), m.state_dict()["1.running_var"].numpy())
    x = np.random.RandomState(3).randn(2, 3, 8, 8).astype(np.float32)
    out = np.stack([np.asarray(ported_model(jnp.asarray(xi), ported_state)[0]) for xi in x])
    assert pm.max_err(out, pm.torch_out(m, x)) <= TOL
    # the original state is untouched: its statistics are still the initial zeros
    mean0, _ = state.get(model.bn1.ema_state_index or model.bn1.batch_state_index)
    assert not np.asarray(mean0).any()


def test_model_without_its_state_leaves_the_running_statistics_unmatched() -> None:
    m = pm.torch_cnn()
    model, _ = eqx.nn.make_with_state(_EqxCNN)("ema", jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), model)
    assert not plan.complete
    assert plan.unmatched_target == [".bn1.bias", ".bn1.weight", ".bn2.bias", ".bn2.weight"]
    assert {"1.running_mean", "4.running_var"} <= set(plan.unmatched_source)
    assert plan.problems()[0] == (
        "the target's equinox BatchNorm keeps its running statistics in an eqx.nn.State, not "
        "in the module: port into (model, state) from eqx.nn.make_with_state"
    )
    with pytest.raises(PortError, match=r"incomplete plan \(the target's equinox BatchNorm"):
        plan.apply()

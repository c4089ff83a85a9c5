"""Transposed convolutions: a torch `ConvTranspose2d` (after a `Conv2d`) ported into flax linen
and equinox computes torch's outputs (max abs error <= 1e-4, float32), and back to torch."""

from __future__ import annotations

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import port_models as pm
import pytest
import torch

import treetool as tt

pytestmark = pytest.mark.slow  # builds real torch and JAX models and runs them

TOL = 1e-4


def _torch_model(out_channels: int = 5) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(4, out_channels, 2, stride=2),
    ).eval()  # fmt: skip


class _Linen(nn.Module):
    out_channels: int = 5

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(4, (3, 3), padding=1)(x))
        # kernel 2, stride 2, no padding: the output size torch, flax and equinox agree on
        return nn.ConvTranspose(self.out_channels, (2, 2), strides=(2, 2), padding="VALID")(x)


def _eqx_model(out_channels: int = 5) -> eqx.nn.Sequential:
    k0, k1 = jax.random.split(jax.random.key(0))
    return eqx.nn.Sequential([
        eqx.nn.Conv2d(3, 4, 3, padding=1, key=k0), eqx.nn.Lambda(jax.nn.relu),
        eqx.nn.ConvTranspose2d(4, out_channels, 2, stride=2, key=k1),
    ])  # fmt: skip


def _x() -> np.ndarray:
    return np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32)


def _linen_out(variables: object, x: np.ndarray, out_channels: int = 5) -> np.ndarray:
    out = _Linen(out_channels).apply(variables, x.transpose(0, 2, 3, 1))
    return np.asarray(out).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("out_channels", [5, 4])  # 4: a square kernel, decided by convention
def test_conv_transpose_into_flax_linen(out_channels: int) -> None:
    m, x = _torch_model(out_channels), _x()
    variables = _Linen(out_channels).init(jax.random.key(0), x.transpose(0, 2, 3, 1))
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert plan.complete and not plan.ambiguous
    rows = {r.target: r for r in plan.rows}
    ct = rows["['params']['ConvTranspose_0']['kernel']"]
    assert (ct.sources, ct.steps) == (("2.weight",), ("perm(2,3,0,1)", "flip(0,1)"))
    assert (ct.source_shape, ct.target_shape) == ((4, out_channels, 2, 2), (2, 2, 4, out_channels))
    assert rows["['params']['Conv_0']['kernel']"].steps == ("perm(2,3,1,0)",)
    ref = pm.torch_out(m, x)
    assert pm.max_err(_linen_out(plan.apply(), x, out_channels), ref) <= TOL
    # the flip is needed: the same permutation without it computes something else
    line = next(ln for ln in plan.rules.splitlines() if "flip(0,1)" in ln)
    unflipped = tt.port(
        pm.state_dict_numpy(m), variables, rules=line.replace(" flip(0,1)", "") + "\n"
    )
    assert pm.max_err(_linen_out(unflipped.apply(), x, out_channels), ref) > 1e-2


def test_conv_transpose_into_equinox() -> None:
    m, x = _torch_model(), _x()
    target = _eqx_model()
    plan = tt.port(pm.state_dict_numpy(m), target)
    assert plan.complete and not plan.ambiguous
    assert [(r.target, r.sources, r.steps) for r in plan.rows] == [
        (".layers[0].weight", ("0.weight",), ()),
        (".layers[0].bias", ("0.bias",), ("reshape(4,1,1)",)),
        (".layers[2].weight", ("2.weight",), ("perm(1,0,2,3)", "flip(2,3)")),
        (".layers[2].bias", ("2.bias",), ("reshape(5,1,1)",)),
    ]
    ported = plan.apply(lazy=False)
    out = np.stack([np.asarray(ported(jnp.asarray(xi))) for xi in x])
    assert pm.max_err(out, pm.torch_out(m, x)) <= TOL


def test_conv_transpose_from_flax_back_to_torch_loads_strictly() -> None:
    m, x = _torch_model(), _x()
    variables = _Linen().init(jax.random.key(1), x.transpose(0, 2, 3, 1))
    back = tt.port(variables, pm.state_dict_numpy(m))
    assert back.complete
    row = {r.target: r for r in back.rows}["['2.weight']"]
    assert row.steps == ("flip(0,1)", "perm(2,3,0,1)")
    sd = {k: torch.from_numpy(np.array(v)) for k, v in back.apply(lazy=False).items()}
    fresh = _torch_model()
    fresh.load_state_dict(sd, strict=True)
    assert pm.max_err(_linen_out(variables, x), pm.torch_out(fresh, x)) <= TOL


def test_flax_transpose_kernel_true_falls_back_to_the_shape() -> None:
    """`transpose_kernel=True` keeps `(*k, O, I)` unflipped: the flipped layout does not fit
    the shape (I != O), so the only permutation that fits is chosen, and it is right."""

    class Linen(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.relu(nn.Conv(4, (3, 3), padding=1)(x))
            return nn.ConvTranspose(
                5, (2, 2), strides=(2, 2), padding="VALID", transpose_kernel=True
            )(x)

    m, x = _torch_model(), _x()
    variables = Linen().init(jax.random.key(0), x.transpose(0, 2, 3, 1))
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert plan.complete
    ct = {r.target: r for r in plan.rows}["['params']['ConvTranspose_0']['kernel']"]
    assert (ct.steps, ct.how) == (("perm(2,3,1,0)",), "shape")
    out = Linen().apply(plan.apply(), x.transpose(0, 2, 3, 1))
    assert pm.max_err(np.asarray(out).transpose(0, 3, 1, 2), pm.torch_out(m, x)) <= TOL

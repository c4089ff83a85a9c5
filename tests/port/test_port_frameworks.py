"""`tt.port` from real torch models into real equinox, flax linen and flax nnx models: the
ported JAX model computes torch's outputs (max abs error <= 1e-4, float32)."""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import port_models as pm
import pytest
from flax import nnx
from safetensors.torch import save_file

import treetool as tt

pytestmark = pytest.mark.slow  # each builds real torch and JAX models and runs them

TOL = 1e-4


def _snapshot(tree: object) -> list[tuple[str, np.ndarray]]:
    return [(str(p), np.array(x)) for p, x in tt.leaves_with_path(tree) if hasattr(x, "shape")]


def _unchanged(before: list[tuple[str, np.ndarray]], tree: object) -> bool:
    after = _snapshot(tree)
    return [p for p, _ in before] == [p for p, _ in after] and all(
        np.array_equal(a, b) for (_, a), (_, b) in zip(before, after)
    )


def test_mlp_sequential_into_equinox_mlp_from_a_safetensors_file(tmp_path: object) -> None:
    m = pm.torch_mlp()
    path = os.path.join(str(tmp_path), "mlp.safetensors")
    save_file(m.state_dict(), path)
    target = eqx.nn.MLP(3, 2, 5, 2, key=jax.random.key(0))
    # two hidden layers of widths 5 and 4 are not what eqx.nn.MLP makes: give it torch's widths
    target = eqx.tree_at(
        lambda t: (t.layers[1], t.layers[2]),
        target,
        (eqx.nn.Linear(5, 4, key=jax.random.key(1)), eqx.nn.Linear(4, 2, key=jax.random.key(2))),
    )
    before = _snapshot(target)
    plan = tt.port(path, target)
    assert plan.complete
    assert [(r.target, r.sources, r.steps) for r in plan.rows] == [
        (".layers[0].weight", ("0.weight",), ()),
        (".layers[0].bias", ("0.bias",), ()),
        (".layers[1].weight", ("2.weight",), ()),
        (".layers[1].bias", ("2.bias",), ()),
        (".layers[2].weight", ("4.weight",), ()),
        (".layers[2].bias", ("4.bias",), ()),
    ]
    ported = plan.apply()
    # eagerly by default: jax arrays where the target had jax arrays
    assert type(ported.layers[0].weight) is type(target.layers[0].weight)
    # lazy=True opts in to the file's arrays, read when the model uses them
    assert type(plan.apply(lazy=True).layers[0].weight).__name__ == "LazyArray"
    x = np.random.RandomState(0).randn(3).astype(np.float32)
    assert pm.max_err(ported(x), pm.torch_out(m, x)) <= TOL
    assert _unchanged(before, target)


def test_a_torch_save_file_read_without_torch_ports_like_its_state_dict(tmp_path: object) -> None:
    """The PyTorch reader and the port together: `torch.save(state_dict)` -> `tt.port`."""
    import torch

    m = pm.torch_mlp()
    path = os.path.join(str(tmp_path), "mlp.pt")
    torch.save(m.state_dict(), path)
    target = eqx.nn.MLP(3, 2, 5, 2, key=jax.random.key(0))
    target = eqx.tree_at(
        lambda t: (t.layers[1], t.layers[2]),
        target,
        (eqx.nn.Linear(5, 4, key=jax.random.key(1)), eqx.nn.Linear(4, 2, key=jax.random.key(2))),
    )
    plan = tt.port(path, target)
    assert plan.complete
    assert [r.sources for r in plan.rows] == [
        ("0.weight",),
        ("0.bias",),
        ("2.weight",),
        ("2.bias",),
        ("4.weight",),
        ("4.bias",),
    ]
    x = np.random.RandomState(0).randn(3).astype(np.float32)
    assert pm.max_err(plan.apply(lazy=False)(x), pm.torch_out(m, x)) <= TOL


def test_mlp_sequential_into_flax_linen_dense_layers() -> None:
    m = pm.torch_mlp()
    x = np.random.RandomState(1).randn(6, 3).astype(np.float32)
    variables = pm.LinenMLP().init(jax.random.key(0), x)
    before = _snapshot(variables)
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert plan.complete
    kernel = next(r for r in plan.rows if r.target == "['params']['Dense_0']['kernel']")
    assert (kernel.sources, kernel.steps, kernel.source_shape, kernel.target_shape) == (
        ("0.weight",), ("T",), (5, 3), (3, 5),
    )  # fmt: skip
    out = pm.LinenMLP().apply(plan.apply(), x)
    assert pm.max_err(out, pm.torch_out(m, x)) <= TOL
    assert _unchanged(before, variables)


def test_cnn_with_batchnorm_into_flax_linen_batch_stats() -> None:
    m = pm.torch_cnn()
    sd = pm.state_dict_numpy(m)
    x = np.random.RandomState(2).randn(2, 3, 8, 8).astype(np.float32)
    variables = pm.LinenCNN().init(jax.random.key(0), x.transpose(0, 2, 3, 1))
    plan = tt.port(sd, variables)
    assert plan.complete
    by_target = {r.target: r for r in plan.rows}
    assert by_target["['batch_stats']['BatchNorm_1']['var']"].sources == ("4.running_var",)
    assert by_target["['params']['BatchNorm_0']['scale']"].sources == ("1.weight",)
    conv = by_target["['params']['Conv_1']['kernel']"]
    assert (conv.sources, conv.steps) == (("3.weight",), ("perm(2,3,1,0)",))
    assert plan.dropped == {
        "1.num_batches_tracked": "BatchNorm's step counter (no JAX model keeps one)",
        "4.num_batches_tracked": "BatchNorm's step counter (no JAX model keeps one)",
    }
    ported = plan.apply()
    assert set(ported) == {"params", "batch_stats"}
    out = pm.LinenCNN().apply(ported, x.transpose(0, 2, 3, 1))
    assert pm.max_err(out, pm.torch_out(m, x)) <= TOL
    # the running statistics really came across (not the initial zeros and ones)
    assert not np.allclose(np.asarray(ported["batch_stats"]["BatchNorm_0"]["mean"]), 0)


def test_cnn_with_batchnorm_into_flax_nnx_module() -> None:
    m = pm.torch_cnn()
    x = np.random.RandomState(3).randn(2, 3, 8, 8).astype(np.float32)
    target = pm.NnxCNN(nnx.Rngs(0))
    before = _snapshot(target)
    plan = tt.port(pm.state_dict_numpy(m), target)
    assert plan.complete
    assert {r.target: r.sources[0] for r in plan.rows}[".bn2.mean.value"] == "4.running_mean"
    ported = plan.apply(lazy=False)
    assert type(ported) is pm.NnxCNN and ported is not target
    assert pm.max_err(ported(jnp.asarray(x.transpose(0, 2, 3, 1))), pm.torch_out(m, x)) <= TOL
    assert _unchanged(before, target)
    # an nnx.State target gives a State that nnx.merge takes
    graphdef, state = nnx.split(target)
    merged = nnx.merge(graphdef, tt.port(pm.state_dict_numpy(m), state).apply(lazy=False))
    assert pm.max_err(merged(jnp.asarray(x.transpose(0, 2, 3, 1))), pm.torch_out(m, x)) <= TOL


def test_first_dense_after_a_conv_flatten_is_ambiguous_until_a_rule_says_how() -> None:
    import flax.linen as nn
    import torch

    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 5 * 5, 6),
    ).eval()  # fmt: skip

    class Flax(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.relu(nn.Conv(4, (3, 3), padding=1)(x))
            return nn.Dense(6)(x.reshape(x.shape[0], -1))  # flattens (H, W, C)

    x = np.random.RandomState(5).randn(2, 3, 5, 5).astype(np.float32)
    variables = Flax().init(jax.random.key(0), x.transpose(0, 2, 3, 1))
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert not plan.complete
    [amb] = plan.ambiguous
    assert amb.targets == ("['params']['Dense_0']['kernel']",)
    assert amb.candidates == (
        "3.weight : T   (the JAX model flattens (C, H, W), as torch)",
        "3.weight : reshape(6,4,5,5) perm(0,2,3,1) reshape(6,100) T   (it flattens (H, W, C), "
        "channel-last)",
    )
    chosen = next(
        line[2:]
        for line in plan.rules.splitlines()
        if line.startswith("# \"['params']['Dense_0']['kernel']\"") and "perm(0,2,3,1)" in line
    )
    resolved = tt.port(pm.state_dict_numpy(m), variables, rules=chosen + "\n")
    assert resolved.complete
    out = Flax().apply(resolved.apply(), x.transpose(0, 2, 3, 1))
    assert pm.max_err(out, pm.torch_out(m, x)) <= TOL


def test_mlp_sequential_into_haiku_params() -> None:
    import haiku as hk

    m = pm.torch_mlp()
    net = hk.without_apply_rng(hk.transform(lambda x: hk.nets.MLP([5, 4, 2])(x)))
    x = np.random.RandomState(6).randn(3, 3).astype(np.float32)
    params = net.init(jax.random.key(0), x)
    plan = tt.port(pm.state_dict_numpy(m), params)
    assert plan.complete
    w = {r.target: r for r in plan.rows}["['mlp/~/linear_1']['w']"]
    assert (w.sources, w.steps) == (("2.weight",), ("T",))
    assert pm.max_err(net.apply(plan.apply(lazy=False), x), pm.torch_out(m, x)) <= TOL

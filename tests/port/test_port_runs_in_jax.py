"""What `plan.apply()` and `tt.load(path, like=model)` return runs in jax (issue 38, point 1).

Every source here is a file torch wrote (`torch.save(state_dict)`), so its entries are lazy
leaves of the file: the case that used to reach jax as `LazyArray`s and fail in a conv
(`conv_general_dilated`), an embedding lookup under `vmap` and a scan over stacked layers.
Each ported model, for each framework (equinox, flax linen, flax nnx, haiku) and layer kind
(conv, attention, embedding, norm, scan-stacked), is called, and run under `jit`, `vmap`,
`grad` and `lax.scan`, and matches torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import port_models as pm
import pytest
import torch

import treetool as tt
from treetool._leaves._lazy_array import LazyArray

TOL = 1e-5


def _pt(tmp_path: Any, m: torch.nn.Module, name: str = "m.pt") -> str:
    path = os.path.join(str(tmp_path), name)
    torch.save(m.state_dict(), path)
    return path


def _kinds(tree: Any) -> set[str]:
    return {type(x).__name__ for x in jax.tree_util.tree_leaves(tree) if hasattr(x, "shape")}


def _runs(
    f: Callable[[Any, Any], Any], params: Any, xs: np.ndarray, ref: np.ndarray, *, eqx_: bool
) -> None:
    """`f(params, x)` called, jitted, vmapped over `xs`, scanned over `xs`, differentiated:
    each output matches torch's `ref` (one row per x) and every gradient is finite."""
    jit, grad = (eqx.filter_jit, eqx.filter_grad) if eqx_ else (jax.jit, jax.grad)
    assert pm.max_err(f(params, xs[0]), ref[0]) <= TOL  # called as it is (op by op)
    assert pm.max_err(jit(f)(params, xs[0]), ref[0]) <= TOL
    # vmap and grad traced the same way as called, compiled once (op by op costs seconds)
    assert pm.max_err(jit(jax.vmap(f, in_axes=(None, 0)))(params, xs), ref) <= TOL
    scanned = jax.lax.scan(lambda c, x: (c, f(params, x)), 0, xs)[1]
    assert pm.max_err(scanned, ref) <= TOL
    g = jit(grad(lambda p, x: jnp.sum(f(p, x) ** 2)))(params, xs[0])
    flat = [x for x in jax.tree_util.tree_leaves(g) if eqx.is_inexact_array(x)]
    assert flat and all(bool(jnp.all(jnp.isfinite(x))) for x in flat)
    assert any(bool(jnp.any(x != 0)) for x in flat)


# --- equinox ------------------------------------------------------------------------------


def _torch_conv() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 5),
    ).eval()  # fmt: skip


class EqxConv(eqx.Module):
    convs: tuple[eqx.nn.Conv2d, eqx.nn.Conv2d]
    head: eqx.nn.Linear

    def __init__(self, key: Any) -> None:
        k = jax.random.split(key, 3)
        self.convs = (
            eqx.nn.Conv2d(3, 8, 3, padding=1, key=k[0]),
            eqx.nn.Conv2d(8, 4, 3, padding=1, key=k[1]),
        )
        self.head = eqx.nn.Linear(4, 5, key=k[2])

    def __call__(self, x: Any) -> Any:
        for conv in self.convs:
            x = jax.nn.relu(conv(x))
        return self.head(x.mean(axis=(1, 2)))


def _images(n: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed).randn(n, 3, 6, 6).astype(np.float32)


def test_equinox_conv_from_a_torch_file_runs_under_every_transform(tmp_path: Any) -> None:
    m = _torch_conv()
    plan = tt.port(_pt(tmp_path, m), EqxConv(jax.random.key(0)))
    assert plan.complete
    # the source entries are the file's lazy arrays; apply() reads them into jax arrays
    assert all(isinstance(plan._source.arrays[s], LazyArray) for r in plan.rows for s in r.sources)
    ported = plan.apply()
    assert _kinds(ported) == {"ArrayImpl"}
    assert (
        ported.convs[0].weight.shape == (8, 3, 3, 3) and ported.convs[0].weight.dtype == "float32"
    )
    xs = _images()
    _runs(lambda model, x: model(x), ported, xs, pm.torch_out(m, xs), eqx_=True)
    # lazy=True opts in to the file's arrays (for inspection), as before
    assert isinstance(plan.apply(lazy=True).convs[0].weight, LazyArray)


def test_equinox_embedding_attention_and_norms_run_under_every_transform(tmp_path: Any) -> None:
    m = pm.torch_layer()
    plan = tt.port(_pt(tmp_path, m), pm.EqxLayer(jax.random.key(0)))
    assert plan.complete
    ported = plan.apply()
    assert _kinds(ported) == {"ArrayImpl"}
    ids = np.random.RandomState(1).randint(0, pm.V, (3, pm.T))
    ref = pm.torch_out(m, ids)
    # the embedding lookup under vmap is the case that met a LazyArray before
    _runs(lambda model, x: model(x), ported, ids, ref, eqx_=True)


def test_equinox_scan_stacked_blocks_run_under_every_transform(tmp_path: Any) -> None:
    m = pm.torch_stack()
    plan = tt.port(_pt(tmp_path, m), pm.EqxScan(jax.random.key(0)))
    assert plan.complete
    ported = plan.apply()
    assert ported.layers.lin1.weight.shape == (pm.N_BLOCKS, 2 * pm.E, pm.E)
    assert type(ported.layers.lin1.weight).__name__ == "ArrayImpl"
    xs = np.random.RandomState(2).randn(3, pm.E).astype(np.float32)
    _runs(lambda model, x: model(x), ported, xs, pm.torch_out(m, xs), eqx_=True)


def test_load_like_a_model_gives_jax_arrays_that_run(tmp_path: Any) -> None:
    m = _torch_conv()
    ported = tt.port(_pt(tmp_path, m), EqxConv(jax.random.key(0))).apply()
    path = os.path.join(str(tmp_path), "m.eqx")
    eqx.tree_serialise_leaves(path, ported)
    skeleton = EqxConv(jax.random.key(7))
    loaded = tt.load(path, like=skeleton)
    assert type(loaded) is EqxConv and _kinds(loaded) == {"ArrayImpl"}
    assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(skeleton)
    assert all(
        bool(jnp.array_equal(a, b))
        for a, b in zip(jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(ported))
    )
    xs = _images(seed=1)
    _runs(lambda model, x: model(x), loaded, xs, pm.torch_out(m, xs), eqx_=True)
    # the scan-stacked model: `eqx.partition(is_array)` used to find no arrays to scan over
    stack = pm.EqxScan(jax.random.key(0))
    s = pm.torch_stack()
    spath = os.path.join(str(tmp_path), "stack.eqx")
    eqx.tree_serialise_leaves(spath, tt.port(_pt(tmp_path, s, "s.pt"), stack).apply())
    x = np.random.RandomState(3).randn(pm.E).astype(np.float32)
    assert pm.max_err(eqx.filter_jit(tt.load(spath, like=stack))(x), pm.torch_out(s, x)) <= TOL
    # lazy=True keeps the leaves in the file; without like= the records stay lazy
    assert isinstance(tt.load(path, like=skeleton, lazy=True).head.weight, LazyArray)
    assert all(isinstance(r, LazyArray) for r in tt.load(path))
    # lazy=False without like=: numpy arrays, as before
    assert {type(r).__name__ for r in tt.load(path, lazy=False)} == {"ndarray"}


def test_load_like_a_numpy_skeleton_gives_numpy(tmp_path: Any) -> None:
    tree = [np.arange(6, dtype=np.float32).reshape(2, 3), jnp.ones(4, jnp.int32)]
    path = os.path.join(str(tmp_path), "t.eqx")
    eqx.tree_serialise_leaves(path, tree)
    like = [np.zeros((2, 3), np.float32), jnp.zeros(4, jnp.int32)]
    out = tt.load(path, like=like)
    assert [type(x).__name__ for x in out] == ["ndarray", "ArrayImpl"]
    assert [(x.shape, str(x.dtype)) for x in out] == [((2, 3), "float32"), ((4,), "int32")]
    assert np.array_equal(out[0], tree[0]) and bool(jnp.all(out[1] == 1))


# --- flax linen, flax nnx, haiku ----------------------------------------------------------


def test_flax_linen_conv_batchnorm_and_attention_run_under_every_transform(tmp_path: Any) -> None:
    m = pm.torch_cnn()
    xs = np.random.RandomState(4).randn(3, 3, 8, 8).astype(np.float32)
    nhwc = xs.transpose(0, 2, 3, 1)
    variables = pm.LinenCNN().init(jax.random.key(0), nhwc[:1])
    ported = tt.port(_pt(tmp_path, m), variables).apply()
    assert _kinds(ported) == {"ArrayImpl"}
    ref = pm.torch_out(m, xs)
    _runs(lambda v, x: pm.LinenCNN().apply(v, x[None])[0], ported, nhwc, ref, eqx_=False)

    layer = pm.torch_layer()
    ids = np.random.RandomState(5).randint(0, pm.V, (3, pm.T))
    lvars = pm.LinenLayer().init(jax.random.key(0), ids[:1])
    lported = tt.port(_pt(tmp_path, layer, "layer.pt"), lvars).apply()
    assert _kinds(lported) == {"ArrayImpl"}
    ref = pm.torch_out(layer, ids)
    f = lambda v, x: pm.LinenLayer().apply(v, x[None])[0]  # noqa: E731
    # called and under jit(vmap) (the embedding lookup); grad and scan as for the CNN cost
    # a minute more of compiling on 2 cores
    assert pm.max_err(f(lported, ids[0]), ref[0]) <= TOL
    assert pm.max_err(jax.jit(jax.vmap(f, in_axes=(None, 0)))(lported, ids), ref) <= TOL


def test_flax_nnx_module_and_state_run_under_every_transform(tmp_path: Any) -> None:
    from flax import nnx

    m = pm.torch_cnn()
    path = _pt(tmp_path, m)
    xs = np.random.RandomState(6).randn(3, 3, 8, 8).astype(np.float32)
    nhwc = xs.transpose(0, 2, 3, 1)
    ref = pm.torch_out(m, xs)
    target = pm.NnxCNN(nnx.Rngs(0))
    ported = tt.port(path, target).apply()
    assert (
        type(ported) is pm.NnxCNN and type(ported.conv1.kernel.get_value()).__name__ == "ArrayImpl"
    )
    assert pm.max_err(nnx.jit(lambda mod, x: mod(x))(ported, nhwc), ref) <= TOL
    graphdef, state = nnx.split(target)
    pstate = tt.port(path, state).apply()
    assert _kinds(pstate) == {"ArrayImpl"}
    f = lambda s, x: nnx.merge(graphdef, s)(x[None])[0]  # noqa: E731
    _runs(f, pstate, nhwc, ref, eqx_=False)


def test_haiku_conv_params_run_under_every_transform(tmp_path: Any) -> None:
    import haiku as hk

    def forward(x: Any) -> Any:
        x = jax.nn.relu(hk.Conv2D(8, 3)(x))
        x = jax.nn.relu(hk.Conv2D(4, 3)(x))
        return hk.Linear(5)(x.mean(axis=(1, 2)))

    net = hk.without_apply_rng(hk.transform(forward))
    m = _torch_conv()
    xs = _images(seed=2)
    nhwc = xs.transpose(0, 2, 3, 1)
    params = net.init(jax.random.key(0), nhwc[:1])
    plan = tt.port(_pt(tmp_path, m), params)
    assert plan.complete
    conv = {r.target: r for r in plan.rows}["['conv2_d']['w']"]
    assert (conv.sources, conv.steps) == (("0.weight",), ("perm(2,3,1,0)",))
    ported = plan.apply()
    assert _kinds(ported) == {"ArrayImpl"}
    ref = pm.torch_out(m, xs)
    _runs(lambda p, x: net.apply(p, x[None])[0], ported, nhwc, ref, eqx_=False)


@pytest.mark.parametrize("kind", ["numpy", "shape struct"])
def test_apply_gives_the_target_leaves_kind_of_array(kind: str) -> None:
    sd = {"0.weight": np.ones((4, 3), np.float32), "0.bias": np.arange(4, dtype=np.float32)}
    if kind == "numpy":
        leaf, want = (lambda s: np.zeros(s, np.float32)), "ndarray"
    else:
        leaf, want = (lambda s: jax.ShapeDtypeStruct(s, jnp.float32)), "ArrayImpl"
    target = {"params": {"Dense_0": {"kernel": leaf((3, 4)), "bias": leaf((4,))}}}
    out = tt.port(sd, target).apply()["params"]["Dense_0"]
    assert (type(out["kernel"]).__name__, type(out["bias"]).__name__) == (want, want)
    assert out["kernel"].shape == (3, 4) and np.array_equal(np.asarray(out["bias"]), sd["0.bias"])


@pytest.mark.parametrize("ext", ["safetensors", "npz", "eqx"])
def test_load_like_is_eager_for_every_format_tt_save_writes(tmp_path: Any, ext: str) -> None:
    model = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))
    path = os.path.join(str(tmp_path), f"m.{ext}")
    tt.save(model, path)
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    back = tt.load(path, like=eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(5)))
    assert type(back) is eqx.nn.MLP and _kinds(back) == {"ArrayImpl"}
    assert bool(jnp.array_equal(eqx.filter_jit(back)(x), model(x)))
    assert (
        pm.max_err(eqx.filter_vmap(back)(np.stack([x, -x])), jax.vmap(model)(np.stack([x, -x])))
        == 0
    )
    assert _kinds(tt.load(path, like=model, lazy=True)) == {"LazyArray"}

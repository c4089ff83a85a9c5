"""`tt.port` for attention models: torch nn.MultiheadAttention (fused in_proj) into equinox
and back from flax linen into a torch-layout safetensors file that torch loads strictly; a
ModuleList into one scan-stacked equinox layer; GPT-2 `Conv1D` `c_attn` into flax."""

from __future__ import annotations

import os

import jax
import numpy as np
import port_models as pm
import pytest
import torch
from safetensors.torch import load_file

import treetool as tt

pytestmark = pytest.mark.slow  # each builds real torch and JAX models and runs them

TOL = 1e-4
IDS = np.random.RandomState(0).randint(0, pm.V, (2, pm.T))


def test_multihead_attention_layernorm_embedding_into_equinox() -> None:
    m = pm.torch_layer()
    target = pm.EqxLayer(jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), target)
    assert plan.complete
    rows = {r.target: r for r in plan.rows}
    k = rows[".attn.key_proj.weight"]
    assert (k.sources, k.steps, k.source_shape, k.target_shape) == (
        ("attn.in_proj_weight",), ("split(0,1/3)",), (3 * pm.E, pm.E), (pm.E, pm.E),
    )  # fmt: skip
    assert rows[".attn.value_proj.bias"].steps == ("split(0,2/3)",)
    # a square (out, in) weight into equinox's (out, in): the convention, not the shape, decides
    assert (rows[".attn.output_proj.weight"].steps, rows[".attn.output_proj.weight"].how) == (
        (),
        "name+convention",
    )
    ported = plan.apply(lazy=False)
    for ids in IDS:
        assert pm.max_err(ported(ids), pm.torch_out(m, ids[None])[0]) <= TOL


def test_module_list_into_one_scan_stacked_equinox_layer() -> None:
    m = pm.torch_stack()
    target = pm.EqxScan(jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), target)
    assert plan.complete
    w = {r.target: r for r in plan.rows}[".layers.lin1.weight"]
    assert w.sources == tuple(f"layers.{i}.lin1.weight" for i in range(pm.N_BLOCKS))
    assert (w.source_shape, w.target_shape) == ((2 * pm.E, pm.E), (pm.N_BLOCKS, 2 * pm.E, pm.E))
    assert len(plan.rows) == 6  # one row per stacked leaf: decided once for all 4 blocks
    x = np.random.RandomState(4).randn(pm.E).astype(np.float32)
    assert pm.max_err(plan.apply(lazy=False)(x), pm.torch_out(m, x)) <= TOL


def test_gpt2_conv1d_c_attn_into_flax() -> None:
    m = pm.torch_gpt2()
    variables = pm.LinenGPT2().init(jax.random.key(0), IDS)
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert plan.complete
    rows = {r.target: r for r in plan.rows}
    # Conv1D keeps (in, out) like flax: split along the output axis, no transpose
    q = rows["['params']['h_1']['attn_query']['kernel']"]
    assert (q.sources, q.steps) == (("h.1.attn.c_attn.weight",), ("split(1,0/3)",))
    assert sorted(plan.dropped) == [
        "h.0.attn.bias", "h.0.attn.masked_bias", "h.1.attn.bias", "h.1.attn.masked_bias",
    ]  # fmt: skip
    out = pm.LinenGPT2().apply(plan.apply(), IDS)
    assert pm.max_err(out, pm.torch_out(m, IDS)) <= TOL


def test_flax_back_to_torch_layout_safetensors_loaded_strictly(tmp_path: object) -> None:
    # first torch -> flax linen (heads reshaped to (E, H, D) and (H, D, E))
    m = pm.torch_layer()
    variables = pm.LinenLayer().init(jax.random.key(0), IDS)
    plan = tt.port(pm.state_dict_numpy(m), variables)
    assert plan.complete
    assert {r.target: r.steps for r in plan.rows}["['params']['attn']['out']['kernel']"] == (
        "T",
        f"reshape({pm.H},{pm.E // pm.H},{pm.E})",
    )
    assert pm.max_err(pm.LinenLayer().apply(plan.apply(), IDS), pm.torch_out(m, IDS)) <= TOL
    # then a flax model's own weights back into torch's names and layout
    flax_vars = pm.LinenLayer().init(jax.random.key(7), IDS)
    fresh = pm.torch_layer(seed=3)
    back = tt.port(flax_vars, pm.state_dict_numpy(fresh))
    assert back.complete
    in_proj = [r for r in back.rows if r.target == "['attn.in_proj_weight']"]
    assert [(r.part, r.sources[0], r.steps) for r in in_proj] == [
        ((0, i, 3), f"params.attn.{n}.kernel", (f"reshape({pm.E},{pm.E})", "T"))
        for i, n in enumerate(("query", "key", "value"))
    ]
    path = os.path.join(str(tmp_path), "back.safetensors")
    back.write(path)
    fresh.load_state_dict(load_file(path), strict=True)
    flax_out = pm.LinenLayer().apply(flax_vars, IDS)
    assert pm.max_err(flax_out, pm.torch_out(fresh, IDS)) <= TOL
    # the file is the one torch writes: the same names, shapes and dtypes
    assert {k: (tuple(v.shape), v.dtype) for k, v in load_file(path).items()} == {
        k: (tuple(v.shape), v.dtype) for k, v in fresh.state_dict().items()
    }
    assert torch.equal(load_file(path)["emb.weight"], fresh.emb.weight.detach())

"""Port: torch PReLU weights matched to JAX `negative_slope`; an unmatched pair left gets a
commented candidate rule that completes the plan when uncommented."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

import treetool as tt


def _source() -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    m = torch.nn.ModuleDict({
        "conv1": torch.nn.Conv2d(3, 10, 3), "prelu1": torch.nn.PReLU(10),
        "prelu2": torch.nn.PReLU(16),
    })  # fmt: skip
    return {k: v.detach().numpy() for k, v in m.state_dict().items()}


def test_prelu_weight_matches_negative_slope() -> None:
    target = {"params": {
        "conv1": {"kernel": jnp.zeros((3, 3, 3, 10)), "bias": jnp.zeros(10)},
        "prelu1": {"negative_slope": jnp.zeros(10)},
        "prelu2": {"negative_slope": jnp.zeros(16)},
    }}  # fmt: skip
    plan = tt.port(_source(), target)
    assert plan.complete and plan.problems() == []
    rows = {r.target: (r.sources, r.steps) for r in plan.rows}
    assert rows["['params']['prelu1']['negative_slope']"] == (("prelu1.weight",), ())
    assert rows["['params']['prelu2']['negative_slope']"] == (("prelu2.weight",), ())


def test_unmatched_pair_gets_a_candidate_rule_that_works() -> None:
    target = {"params": {
        "conv1": {"kernel": jnp.zeros((3, 3, 3, 10)), "bias": jnp.zeros(10)},
        "prelu1": {"negative_slope": jnp.zeros(10)},
        "act": {"a": jnp.zeros((1, 1, 16))},  # no name in common, another shape
    }}  # fmt: skip
    src = _source()
    plan = tt.port(src, target)
    assert not plan.complete
    assert plan.unmatched_target == ["['params']['act']['a']"]
    assert plan.unmatched_source == ["prelu2.weight"]
    text = plan.rules
    cand = "\"['params']['act']['a']\" <- \"prelu2.weight\" : reshape(1,1,16)"
    assert f"# {cand}   # candidate: the shape fits" in text.splitlines()
    fixed = text.replace(f"# {cand}", cand)
    done = tt.port(src, target, rules=fixed)
    assert done.complete
    out = done.apply()
    np.testing.assert_array_equal(
        np.asarray(out["params"]["act"]["a"]), src["prelu2.weight"].reshape(1, 1, 16)
    )

"""The plan's verdicts and its rule file: ambiguity reported (never guessed), the rule file
written and read back gives the same plan, user edits applied and shown as edits, a wrong
edit caught by `plan.check`, bad rules and bad plans refused in one line."""

from __future__ import annotations

import itertools
import re

import jax
import numpy as np
import port_models as pm
import pytest
from hypothesis import given
from hypothesis import strategies as st

import treetool as tt
from treetool._port import PortError

F32 = np.float32


def _square_source() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(0)
    return {
        f"{n}.{r}": rng.randn(*((4, 4) if r == "weight" else (4,))).astype(F32)
        for n in ("inp", "hidden", "outp")
        for r in ("weight", "bias")
    }


def _square_target() -> dict[str, dict[str, dict[str, np.ndarray]]]:
    return {
        "params": {
            f"Dense_{i}": {"kernel": np.zeros((4, 4), F32), "bias": np.zeros(4, F32)}
            for i in range(3)
        }
    }


def test_square_layers_with_unrelated_names_are_ambiguous_never_guessed() -> None:
    plan = tt.port(_square_source(), _square_target())
    assert not plan.complete and plan.rows == []
    assert [a.targets for a in plan.ambiguous] == [
        (f"['params']['Dense_{i}']['bias']", f"['params']['Dense_{i}']['kernel']") for i in range(3)
    ]
    assert plan.ambiguous[0].candidates == (
        "{hidden.bias, hidden.weight}",
        "{inp.bias, inp.weight}",
        "{outp.bias, outp.weight}",
    )
    assert plan.unmatched_source == [] and plan.unmatched_target == []
    with pytest.raises(PortError, match=re.escape("cannot apply an incomplete plan (ambiguous: ")):
        plan.apply()
    # the rule file offers the candidates as commented-out lines
    assert "# \"['params']['Dense_1']['kernel']\" <- \"hidden.weight\" : T" in plan.rules


def test_an_ambiguity_resolved_by_uncommenting_rule_lines() -> None:
    plan = tt.port(_square_source(), _square_target())
    picks = {"Dense_0": "inp", "Dense_1": "hidden", "Dense_2": "outp"}
    lines = []
    for line in plan.rules.splitlines():
        for dense, src in picks.items():
            if line.startswith(f"# \"['params']['{dense}']") and f'"{src}.' in line:
                lines.append(line[2:])
    resolved = tt.port(_square_source(), _square_target(), rules="\n".join(lines) + "\n")
    assert resolved.complete
    assert {r.how for r in resolved.rows} == {"rule (edited)"}
    out = resolved.apply(lazy=False)
    assert np.array_equal(out["params"]["Dense_1"]["kernel"], _square_source()["hidden.weight"].T)


def test_rules_written_and_read_back_give_the_same_plan(tmp_path: object) -> None:
    m = pm.torch_layer()
    target = pm.EqxLayer(jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), target)
    again = tt.port(pm.state_dict_numpy(m), target, rules=plan.rules)
    assert again.to_dict() == plan.to_dict()
    assert again.rules == plan.rules
    # from a file too, and for the other direction (flax back to torch names and layout)
    path = tmp_path / "rules.txt"  # type: ignore[operator]
    path.write_text(plan.rules)
    assert tt.port(pm.state_dict_numpy(m), target, rules=path).to_dict() == plan.to_dict()
    ids = np.zeros((1, pm.T), np.int32)
    flax_vars = pm.LinenLayer().init(jax.random.key(0), ids)
    back = tt.port(flax_vars, pm.state_dict_numpy(m))
    assert back.complete
    assert tt.port(flax_vars, pm.state_dict_numpy(m), rules=back.rules).to_dict() == back.to_dict()


def test_a_wrong_edit_is_applied_shown_and_caught_by_check() -> None:
    m = pm.torch_layer()
    target = pm.EqxLayer(jax.random.key(0))
    plan = tt.port(pm.state_dict_numpy(m), target)
    ids = np.random.RandomState(0).randint(0, pm.V, (pm.T,))
    ref = pm.torch_out(m, ids[None])[0]
    good = plan.check(lambda model, x: model(x), [ids], ref)
    assert good.ok and good.max_abs_diff <= 1e-4 and good.outputs == 1
    line = '".attn.output_proj.weight" <- "attn.out_proj.weight" : identity   # name+convention'
    assert line in plan.rules
    edited = plan.rules.replace(line, '".attn.output_proj.weight" <- "attn.out_proj.weight" : T')
    wrong = tt.port(pm.state_dict_numpy(m), target, rules=edited)
    row = {r.target: r for r in wrong.rows}[".attn.output_proj.weight"]
    assert (row.steps, row.how) == (("T",), "rule (edited)")
    assert wrong.complete  # shapes cannot see it: a square matrix transposed still fits
    bad = wrong.check(lambda model, x: model(x), [ids], ref)
    assert not bad.ok and bad.max_abs_diff > 1e-2
    assert str(bad).startswith("check FAILED: max abs difference ")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('"nope" <- "inp.weight" : T', "rules: nope: the target has no leaf of that name"),
        (
            "\"['params']['Dense_0']['kernel']\" <- \"missing\" : T",
            "rules: ['params']['Dense_0']['kernel']: the source has no entry 'missing'",
        ),
        (
            "\"['params']['Dense_0']['kernel']\" <- \"inp.weight\" : rot90",
            "rules: line 1: unknown step 'rot90': expected T, perm(..), flip(..), split(axis,i/n), "
            "index(i), reshape(..) or cast(dtype)",
        ),
        (
            "\"['params']['Dense_0']['bias']\" <- \"inp.weight\" : identity",
            "rules: ['params']['Dense_0']['bias']: identity gives shape [4, 4] from "
            "'inp.weight' [4, 4], the target needs [4]",
        ),
        ("\"['params']\" <- x", 'rules: line 1: expected a quoted name ("layers.0.weight")'),
        (
            "# only a comment\nnope <- x",
            'rules: line 2: expected a quoted name ("layers.0.weight")',
        ),
    ],
)
def test_bad_rules_are_one_line_errors(line: str, message: str) -> None:
    with pytest.raises(PortError) as e:
        tt.port(_square_source(), _square_target(), rules=line + "\n")
    assert str(e.value) == message


def test_a_rule_file_that_does_not_exist() -> None:
    with pytest.raises(PortError, match=re.escape("nope.rules: no such rule file")):
        tt.port(_square_source(), _square_target(), rules="nope.rules")


def test_a_hostile_source_file_is_one_line_and_runs_nothing(tmp_path: object) -> None:
    import os
    import pickle

    bad = os.path.join(str(tmp_path), "cut.safetensors")
    tt.save({"w": np.ones((64, 64), F32)}, bad)
    with open(bad, "r+b") as fh:
        fh.truncate(os.path.getsize(bad) - 100)
    with pytest.raises(tt.LoadError) as e:
        tt.port(bad, _square_target())
    assert len(str(e.value).splitlines()) == 1 and "cut.safetensors" in str(e.value)

    marker = os.path.join(str(tmp_path), "ran")

    class Evil:
        def __reduce__(self) -> tuple[object, ...]:
            return (os.system, (f"touch {marker}",))

    evil = os.path.join(str(tmp_path), "evil.pkl")
    with open(evil, "wb") as fh:
        pickle.dump({"inp.weight": np.ones((4, 4), F32), "x": Evil()}, fh)
    plan = tt.port(evil, _square_target())
    assert not os.path.exists(marker)
    assert "inp.weight" in {s for a in plan.ambiguous for s in a.sources} | set(
        plan.unmatched_source
    )


def test_dtype_cast_only_when_asked() -> None:
    src = {"0.weight": np.ones((3, 2), np.float16)}
    target = {"dense": {"kernel": jax.ShapeDtypeStruct((2, 3), np.float32)}}
    plan = tt.port(src, target)
    assert plan.complete
    assert np.asarray(plan.apply()["dense"]["kernel"]).dtype == np.float16
    out = plan.apply(lazy=False, cast=True)["dense"]["kernel"]
    assert out.dtype == np.float32 and out.shape == (2, 3) and isinstance(out, jax.Array)


@given(
    widths=st.lists(st.integers(1, 6), min_size=2, max_size=5, unique=True),
    seed=st.integers(0, 2**16),
)
def test_torch_layout_to_flax_layout_and_back_is_exact(widths: list[int], seed: int) -> None:
    """Distinct widths: every layer is decided by its shape, and the round trip is exact."""
    rng = np.random.RandomState(seed)
    torch_sd = {}
    flax = {"params": {}}
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        torch_sd[f"{2 * i}.weight"] = rng.randn(b, a).astype(F32)
        torch_sd[f"{2 * i}.bias"] = rng.randn(b).astype(F32)
        flax["params"][f"Dense_{i}"] = {"kernel": np.zeros((a, b), F32), "bias": np.zeros(b, F32)}
    there = tt.port(torch_sd, flax)
    assert there.complete
    filled = there.apply(lazy=False)
    back = tt.port(filled, {k: np.zeros_like(v) for k, v in torch_sd.items()})
    assert back.complete
    again = back.apply(lazy=False)
    assert all(np.array_equal(again[k], torch_sd[k]) for k in torch_sd)


@pytest.mark.parametrize("ext", [".safetensors", ".npz", ".msgpack"])
def test_write_by_extension_reads_back_to_the_filled_values(tmp_path: object, ext: str) -> None:
    import os

    rng = np.random.RandomState(1)
    src = {
        "0.weight": rng.randn(4, 3).astype(F32),
        "0.bias": rng.randn(4).astype(F32),
        "attn.in_proj_weight": rng.randn(6, 2).astype(F32),
    }
    target = {
        "params": {
            "Dense_0": {"kernel": np.zeros((3, 4), F32), "bias": np.zeros(4, F32)},
            "attn": {n: {"kernel": np.zeros((2, 2), F32)} for n in ("query", "key", "value")},
        }
    }
    plan = tt.port(src, target)
    assert plan.complete
    path = os.path.join(str(tmp_path), "out" + ext)
    plan.write(path)
    if ext == ".msgpack":
        from flax import serialization

        with open(path, "rb") as fh:
            back = serialization.msgpack_restore(fh.read())
    else:
        back = tt.load(path)
    flat = {str(p): np.asarray(x) for p, x in tt.leaves_with_path(back)}
    want = {str(p): np.asarray(x) for p, x in tt.leaves_with_path(plan.apply(lazy=False))}
    assert flat.keys() == want.keys()
    assert all(np.array_equal(flat[k], want[k]) for k in want)
    assert np.array_equal(
        flat["['params']['attn']['key']['kernel']"], src["attn.in_proj_weight"][2:4].T
    )
    with pytest.raises(tt.SaveError, match=re.escape("cannot tell the format from the extension")):
        plan.write(os.path.join(str(tmp_path), "out.bin"))

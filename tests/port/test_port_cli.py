"""`treetool port` as a user runs it: real subprocesses, real files written by torch, real
equinox and flax targets from `module:attr`."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import port_models as pm
import pytest
from cli_runner import together
from safetensors.torch import save_file

import treetool as tt

pytestmark = pytest.mark.slow  # subprocesses that import torch, jax and the models

HERE = Path(__file__).parent


def _run(*args: str, ref: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PORT_REF": ref}
    return subprocess.run(
        [sys.executable, "-m", "treetool.cli", "port", *args],
        capture_output=True,
        text=True,
        cwd=HERE,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def layer_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("port_cli")
    m = pm.torch_layer()
    src = str(d / "layer.safetensors")
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, src)
    ids = np.random.RandomState(0).randint(0, pm.V, (pm.T,))
    ref = str(d / "ref.npz")
    np.savez(ref, ids=ids, out=pm.torch_out(m, ids[None])[0])
    return {"src": src, "ref": ref, "dir": str(d)}


@pytest.fixture(scope="module")
def layer_runs(layer_files: dict[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
    """The two independent runs on the layer file, side by side: the plan checked and written,
    and the plan as JSON."""
    write = functools.partial(
        _run,
        layer_files["src"],
        "port_targets:eqx_layer",
        "--check",
        "port_targets:check_layer",
        "--write",
        os.path.join(layer_files["dir"], "ported.eqx"),
        ref=layer_files["ref"],
    )
    as_json = functools.partial(_run, layer_files["src"], "port_targets:eqx_layer", "--json")
    return dict(zip(("write", "json"), together(write, as_json)))


def test_port_prints_the_plan_checks_it_and_writes_it(
    layer_files: dict[str, str], layer_runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    out = os.path.join(layer_files["dir"], "ported.eqx")
    r = layer_runs["write"]
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"port plan: 17 target leaves filled from {layer_files['src']}"
    row = next(ln for ln in lines if ln.startswith(".attn.key_proj.weight"))
    assert row.split() == [
        ".attn.key_proj.weight",
        "attn.in_proj_weight",
        "split(0,1/3)",
        "(48,",
        "16)",
        "->",
        "(16,",
        "16)",
        "name+convention",
    ]
    assert "complete: every target leaf filled once, every source entry used or dropped" in lines
    assert lines[-1].startswith("check ok: max abs difference ")
    assert r.stderr.strip() == f"treetool: wrote {out}"
    import equinox as eqx
    import jax

    back = eqx.tree_deserialise_leaves(out, pm.EqxLayer(jax.random.key(9)))
    ref = np.load(layer_files["ref"])
    assert pm.max_err(back(ref["ids"]), ref["out"]) <= 1e-4


def test_json_and_an_edited_rule_file_caught_by_check(
    layer_files: dict[str, str], layer_runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    r = layer_runs["json"]
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["complete"] is True and len(data["rows"]) == 17
    assert data["rows"][0] == {
        "target": ".emb.weight",
        "part": None,
        "sources": ["emb.weight"],
        "transform": [],
        "source_shape": [pm.V, pm.E],
        "target_shape": [pm.V, pm.E],
        "how": "name",
        "block": None,
    }
    line = '".attn.output_proj.weight" <- "attn.out_proj.weight" : identity'
    assert line in data["rules"]
    rules = os.path.join(layer_files["dir"], "edited.rules")
    with open(rules, "w") as fh:
        fh.write(data["rules"].replace(line, line.replace("identity", "T")))
    r = _run(
        layer_files["src"],
        "port_targets:eqx_layer",
        "--rules",
        rules,
        "--check",
        "port_targets:check_layer",
        ref=layer_files["ref"],
    )
    assert r.returncode == 1, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith(".attn.output_proj.weight"))
    assert row.split()[-2:] == ["rule", "(edited)"] and row.split()[2] == "T"
    assert r.stdout.splitlines()[-1].startswith("check FAILED: max abs difference ")


def test_ambiguous_plan_exits_1_and_lists_candidates(tmp_path: Path) -> None:
    src = str(tmp_path / "square.safetensors")
    rng = np.random.RandomState(0)
    tt.save(
        {f"{n}.weight": rng.randn(4, 4).astype(np.float32) for n in ("inp", "hidden", "outp")}
        | {f"{n}.bias": rng.randn(4).astype(np.float32) for n in ("inp", "hidden", "outp")},
        src,
    )
    r, w = together(
        functools.partial(_run, src, "port_targets:square_mlp"),
        functools.partial(
            _run, src, "port_targets:square_mlp", "--write", str(tmp_path / "out.safetensors")
        ),
    )
    assert r.returncode == 1, r.stderr
    assert "ambiguous: ['params']['Dense_0']['bias'], ['params']['Dense_0']['kernel']" in r.stdout
    assert "    {inp.bias, inp.weight}" in r.stdout
    assert r.stdout.splitlines()[-1] == "incomplete: 3 problem(s)"
    assert w.returncode == 2
    assert w.stderr.startswith("treetool: error: ") and len(w.stderr.splitlines()) == 1
    assert not (tmp_path / "out.safetensors").exists()


BAD_KINDS = ["truncated", "garbage", "hostile_names", "missing_rules"]


def _bad_input(d: Path, kind: str) -> list[str]:
    """The arguments of a run on a bad input of this kind, written into `d`."""
    path = str(d / "bad.safetensors")
    extra: list[str] = []
    if kind == "truncated":
        tt.save({"w": np.ones((64, 64), np.float32)}, path)
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) - 100)
    elif kind == "garbage":
        with open(path, "wb") as fh:
            fh.write(b"\xff" * 4096)
    else:
        tt.save({"a\x1b[2J\u202e.weight": np.ones((2, 3), np.float32)}, path)
        if kind == "missing_rules":
            extra = ["--rules", str(d / "nope.rules")]
    return [path, "port_targets:eqx_mlp", *extra]


@pytest.fixture(scope="module")
def bad_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """kind -> (its folder, its run): the four runs on bad input, side by side."""
    dirs = {kind: tmp_path_factory.mktemp(kind) for kind in BAD_KINDS}
    calls = [functools.partial(_run, *_bad_input(dirs[kind], kind)) for kind in BAD_KINDS]
    return {kind: (dirs[kind], r) for kind, r in zip(BAD_KINDS, together(*calls))}


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_hostile_and_bad_input_is_one_line_exit_2(
    bad_runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]], kind: str
) -> None:
    tmp_path, r = bad_runs[kind]
    if kind == "hostile_names":
        assert r.returncode == 1  # the entry is listed, escaped: no terminal control reaches stdout
        assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
        assert "a\\x1b[2J\\u202e.weight" in r.stdout
        return
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("treetool: error: "), r.stderr
    assert "Traceback" not in r.stderr
    if kind == "missing_rules":
        assert lines[0] == f"treetool: error: {tmp_path / 'nope.rules'}: no such rule file"
    else:
        assert "bad.safetensors" in lines[0]

"""`tt.save` saves what a user has and `tt.load` gives the same tree back (issue 38, 2 and 3).

Real equinox models (an MLP: a custom_jvp `relu` and a function leaf; a conv net with static
fields), written to safetensors, npz and `.eqx`; the names other libraries see
(`safetensors.numpy.load_file`, `np.load`) are the dotted ones; `like=` is never ignored.
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool as tt
from treetool import LoadError, OpaqueFunction, SaveError


def _paths(tree):
    return [
        (jax.tree_util.keystr(p), str(getattr(x, "dtype", type(x).__name__)))
        for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


@pytest.fixture(scope="module")
def mlp():
    return eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(0))


@pytest.fixture(scope="module")
def conv():
    k1, k2 = jax.random.split(jax.random.key(1))
    return [
        eqx.nn.Conv2d(3, 4, kernel_size=3, padding=1, key=k1),
        eqx.nn.Linear(4, 2, key=k2),
    ]


MLP_PATHS = [
    (".layers[0].weight", "float32"),
    (".layers[0].bias", "float32"),
    (".layers[1].weight", "float32"),
    (".layers[1].bias", "float32"),
    (".layers[2].weight", "float32"),
    (".layers[2].bias", "float32"),
    (".activation", "custom_jvp"),
    (".final_activation", "function"),
]
MLP_NAMES = [
    "layers.0.bias",
    "layers.0.weight",
    "layers.1.bias",
    "layers.1.weight",
    "layers.2.bias",
    "layers.2.weight",
]


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_mlp_round_trips_without_like(tmp_path, mlp, ext):
    f = tmp_path / f"m.{ext}"
    tt.save(mlp, f)
    back = tt.load(f)
    assert _paths(mlp) == MLP_PATHS
    assert [(p, d) for p, d in _paths(back)] == [
        *MLP_PATHS[:6],
        (".activation", "OpaqueFunction"),
        (".final_activation", "OpaqueFunction"),
    ]
    assert type(back).__name__ == "Opaque" and back.class_path == "equinox.nn._mlp.MLP"
    for (_, a), (_, b) in zip(tt.leaves_with_path(mlp)[:6], tt.leaves_with_path(back)[:6]):
        assert np.array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(b).dtype == np.float32
    act = back.activation
    assert isinstance(act, OpaqueFunction) and act.kind == "custom_jvp"
    assert act.label == "jax._src.nn.functions.relu"
    assert back.in_size == 3 and back.width_size == 4  # static fields kept
    # a diff against the live model it came from is clean
    assert not tt.diff(mlp, back), [c.summary for c in tt.diff(mlp, back)]


def test_safetensors_names_are_the_plain_ones(tmp_path, mlp):
    from safetensors.numpy import load_file

    f = tmp_path / "m.safetensors"
    tt.save(mlp, f)
    got = load_file(str(f))
    assert sorted(got) == MLP_NAMES
    assert np.array_equal(got["layers.1.weight"], np.asarray(mlp.layers[1].weight))


def test_npz_names_are_the_plain_ones(tmp_path, mlp):
    f = tmp_path / "m.npz"
    tt.save(mlp, f)
    with np.load(f) as z:
        assert sorted(z.files) == ["__treetool_tree__", *MLP_NAMES]
        assert np.array_equal(z["layers.2.bias"], np.asarray(mlp.layers[2].bias))
        assert z["__treetool_tree__"].dtype == np.uint8


@pytest.mark.parametrize("ext", ["safetensors", "npz", "eqx"])
def test_mlp_round_trips_with_like(tmp_path, mlp, ext):
    f = tmp_path / f"m.{ext}"
    tt.save(mlp, f)
    skeleton = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(7))
    back = tt.load(f, like=skeleton)
    assert type(back) is eqx.nn.MLP
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(mlp)
    assert _paths(back) == MLP_PATHS
    x = jnp.arange(3.0)
    assert np.allclose(np.asarray(back(x)), np.asarray(mlp(x)))
    assert not tt.diff(mlp, back)


def test_eqx_is_read_by_equinox(tmp_path, mlp):
    f = tmp_path / "m.eqx"
    tt.save(mlp, f)
    skeleton = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(7))
    back = eqx.tree_deserialise_leaves(f, skeleton)
    for a, b in zip(jax.tree_util.tree_leaves(mlp)[:6], jax.tree_util.tree_leaves(back)[:6]):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert tt.io.detect(f) == "equinox"
    # and what equinox writes, treetool reads into the skeleton
    g = tmp_path / "by_eqx.eqx"
    eqx.tree_serialise_leaves(g, mlp)
    assert f.read_bytes() == g.read_bytes()


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_conv_model_round_trips(tmp_path, conv, ext):
    f = tmp_path / f"c.{ext}"
    tt.save(conv, f)
    back = tt.load(f)
    assert _paths(back) == [
        ("[0].weight", "float32"),
        ("[0].bias", "float32"),
        ("[1].weight", "float32"),
        ("[1].bias", "float32"),
    ]
    assert np.asarray(back[0].weight).shape == (4, 3, 3, 3)
    assert back[0].kernel_size == [3, 3]  # a static tuple, recorded as plain values
    assert not tt.diff(conv, back)
    fitted = tt.load(f, like=conv)
    x = jnp.ones((3, 5, 5))
    y = jax.jit(lambda m, x: m[1](jnp.mean(m[0](x), axis=(1, 2))))
    assert np.allclose(np.asarray(y(fitted, x)), np.asarray(y(conv, x)), atol=1e-6)


def test_dotted_names_work_in_get_select_tree_at(tmp_path, mlp):
    f = tmp_path / "m.safetensors"
    tt.save(mlp, f)
    back = tt.load(f)
    want = np.asarray(mlp.layers[0].bias)
    assert np.array_equal(np.asarray(tt.get(back, "layers.0.bias")), want)
    assert np.array_equal(np.asarray(tt.get(back, ".layers[0].bias")), want)
    assert [str(p) for p in tt.select(back, "layers.*.bias").paths] == [
        ".layers[0].bias",
        ".layers[1].bias",
        ".layers[2].bias",
    ]
    new = tt.tree_at("layers.0.bias", back, np.zeros(4, np.float32))
    assert np.array_equal(np.asarray(tt.get(new, "layers.0.bias")), np.zeros(4))


def test_mixed_tree_keeps_containers_scalars_and_strings(tmp_path):
    import collections

    tree = {
        "params": collections.OrderedDict(b=np.arange(3, dtype=np.int16), a=jnp.ones(2)),
        "step": 12,
        "lr": 0.5,
        "done": False,
        "name": "run-1",
        "big": 1 << 70,
        "z": 1 + 2j,
        "opt": (None, [np.float64(2.5)]),
    }
    for ext in ("safetensors", "npz"):
        f = tmp_path / f"t.{ext}"
        tt.save(tree, f)
        back = tt.materialize(tt.load(f))
        assert type(back["params"]) is collections.OrderedDict
        assert list(back["params"]) == ["b", "a"]
        assert back["params"]["b"].dtype == np.int16
        assert back["params"]["b"].tolist() == [0, 1, 2]
        assert (back["step"], back["lr"], back["done"]) == (12, 0.5, False)
        assert type(back["step"]) is int and type(back["done"]) is bool
        assert back["name"] == "run-1" and back["big"] == 1 << 70 and back["z"] == 1 + 2j
        assert back["opt"][0] is None and np.asarray(back["opt"][1][0]).item() == 2.5
        assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(tree)


def test_like_mismatch_is_one_line_naming_paths(tmp_path, mlp):
    f = tmp_path / "m.safetensors"
    tt.save(mlp, f)
    other = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))  # one hidden layer fewer
    with pytest.raises(LoadError) as e:
        tt.load(f, like=other)
    msg = str(e.value)
    assert "\n" not in msg
    assert "does not fit `like`" in msg
    assert ".layers[2].weight" in msg  # in the file, no place in like
    assert ".layers[1].weight" in msg  # another shape
    wider = eqx.nn.MLP(3, 2, 5, 2, key=jax.random.key(0))
    with pytest.raises(
        LoadError, match=r"other shapes: \.layers\[0\]\.weight \(the file \[4, 3\], like \[5, 3\]\)"
    ):
        tt.load(f, like=wider)


def test_like_fills_from_a_foreign_safetensors_by_dotted_names(tmp_path, mlp):
    from safetensors.numpy import save_file

    f = tmp_path / "foreign.safetensors"
    flat = {
        f"layers.{i}.{k}": np.asarray(getattr(mlp.layers[i], k))
        for i in range(3)
        for k in ("weight", "bias")
    }
    save_file(flat, str(f))
    back = tt.load(f, like=mlp)
    assert type(back) is eqx.nn.MLP and not tt.diff(mlp, back)
    del flat["layers.2.bias"]
    save_file(flat, str(f))
    with pytest.raises(LoadError, match=r"missing in the file: \.layers\[2\]\.bias"):
        tt.load(f, like=mlp)


def test_every_failure_is_a_save_error(tmp_path, mlp):
    with pytest.raises(SaveError, match="cannot pickle"):
        tt.save(mlp, tmp_path / "m.pkl")
    assert os.listdir(tmp_path) == []  # nothing left behind
    with pytest.raises(SaveError, match="records numbers, strings"):
        tt.save({"x": object()}, tmp_path / "o.safetensors")
    with pytest.raises(SaveError, match="cannot tell the format"):
        tt.save(mlp, tmp_path / "m.bin")
    with pytest.raises(SaveError, match="typed PRNG key"):
        tt.save({"k": jax.random.key(0)}, tmp_path / "k.npz")
    assert os.listdir(tmp_path) == []


def test_overwrite(tmp_path):
    f = tmp_path / "w.safetensors"
    tt.save({"w": np.ones(2, np.float32)}, f)
    tt.save({"w": np.zeros(2, np.float32)}, f)  # the default replaces
    assert np.asarray(tt.load(f)["w"]).tolist() == [0, 0]
    with pytest.raises(SaveError, match="already exists; not replaced"):
        tt.save({"w": np.ones(3, np.float32)}, f, overwrite=False)
    assert np.asarray(tt.load(f)["w"]).tolist() == [0, 0]
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors"]


def test_loaded_tree_saves_again(tmp_path, mlp):
    f, g = tmp_path / "m.safetensors", tmp_path / "again.npz"
    tt.save(mlp, f)
    tt.save(tt.load(f), g)
    assert not tt.diff(mlp, tt.load(g))


def test_inspect_folds_the_structure_record(tmp_path, mlp, capsys):
    from treetool.cli import main

    f = tmp_path / "m.safetensors"
    tt.save(mlp, f)
    assert main(["inspect", "--no-tui", str(f)]) == 0
    out = capsys.readouterr().out
    assert "treetool structure record: 13 nodes" in out and '"version"' not in out
    assert max(len(line) for line in out.splitlines()) <= 100
    meta = tt.io.read(f).metadata
    assert meta["format"] == "treetool"
    assert meta["treetool_tree"].startswith("treetool structure record: 13 nodes, ")


@pytest.mark.slow
def test_diff_between_an_orbax_run_and_its_tt_save_is_clean(tmp_path, capsys):
    import optax
    import orbax.checkpoint as ocp

    from treetool.cli import main

    params = {"dense": {"kernel": jnp.ones((3, 2)), "bias": jnp.zeros(2)}, "scale": jnp.ones(())}
    opt = optax.adam(1e-3).init(params)
    # orbax without a target keeps dicts and lists only (optax's namedtuples become dicts)
    state = {"params": params, "mu": opt[0].mu, "step": jnp.asarray(10)}
    with ocp.CheckpointManager(tmp_path / "run") as mngr:
        mngr.save(10, args=ocp.args.StandardSave(state))
        mngr.wait_until_finished()
    tt.save(state, tmp_path / "step10.safetensors")
    a, b = tt.load(f"{tmp_path / 'run'}@10"), tt.load(tmp_path / "step10.safetensors")
    assert [str(p) for p, _ in tt.leaves_with_path(b)] == [
        "['mu']['dense']['bias']",
        "['mu']['dense']['kernel']",
        "['mu']['scale']",
        "['params']['dense']['bias']",
        "['params']['dense']['kernel']",
        "['params']['scale']",
        "['step']",
    ]
    assert not tt.diff(a, b), [(c.path, c.summary) for c in tt.diff(a, b)]
    assert not tt.diff(state, b)
    # the optimizer state itself, namedtuples and all, against the file written from it
    tt.save(opt, tmp_path / "opt.npz")
    back = tt.load(tmp_path / "opt.npz")
    assert [type(x).__name__ for x in back] == ["Opaque", "Opaque"]
    assert back[0].class_path == "optax._src.transform.ScaleByAdamState"
    assert not tt.diff(opt, back)
    assert jax.tree_util.tree_structure(tt.load(tmp_path / "opt.npz", like=opt)) == (
        jax.tree_util.tree_structure(opt)
    )
    assert main(["diff", f"{tmp_path / 'run'}@10", str(tmp_path / "step10.safetensors")]) == 0
    assert "no differences" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("{not json", "the treetool structure record is not valid JSON"),
        ('{"version": 2, "tree": ["n"]}', "has no version-1 tree"),
        ('{"version": 1, "tree": ["d", "dict", "w", ["a", "w"], "v", ["a", "w"]]}', "twice"),
        ('{"version": 1, "tree": ["d", "dict", "w", ["a", "nope"]]}', "a tensor the file lacks"),
        ('{"version": 1, "tree": ["d", "os.system", "w", ["a", "w"]]}', "an unknown dict type"),
        ('{"version": 1, "tree": ["l"]}', "does not name the tensors 'w'"),
        ('{"version": 1, "tree": ' + "[" * 5000 + "]" * 5000 + "}", "structure record"),
    ],
)
def test_a_forged_structure_record_is_one_line(tmp_path, record, message):
    from safetensors.numpy import save_file

    f = tmp_path / "forged.safetensors"
    save_file({"w": np.ones(2, np.float32)}, str(f), metadata={"treetool_tree": record})
    with pytest.raises(LoadError, match=message) as e:
        tt.load(f)
    assert "\n" not in str(e.value)


def test_a_forged_record_names_a_class_and_runs_nothing(tmp_path):
    from safetensors.numpy import save_file

    f = tmp_path / "forged.safetensors"
    rec = '{"version": 1, "tree": ["o", "os.system", {}, "a", "cmd", ["a", "w"]]}'
    save_file({"w": np.ones(2, np.float32)}, str(f), metadata={"treetool_tree": rec})
    back = tt.load(f)
    assert type(back).__name__ == "Opaque" and back.class_path == "os.system"
    assert [str(p) for p, _ in tt.leaves_with_path(back)] == [".cmd"]

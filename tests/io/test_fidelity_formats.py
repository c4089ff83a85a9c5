"""Format fidelity: files made in the test by the real libraries read back as what was saved.

For each format, `treetool ls --json` (a real subprocess, safe mode) lists exactly jax's leaves
of the live object the file was saved from (paths = keystr, shapes, dtypes), and
`treetool diff FILE module:attr` exits 0 against that object and 1, with exactly the edited
paths, after a `tt.tree_at` edit. Sniffing is checked with header lengths of every low byte.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import pickle
import struct
import subprocess

import numpy as np
import pytest
from cli_runner import together, treetool

import treetool as tt
import treetool.io as tio

LIVE = """
import numpy as np


def tree():
    return {
        "params": {
            "dense": {
                "kernel": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
                "bias": np.zeros(3, np.float32),
            },
            "embed": np.arange(4, dtype=np.int32),
        },
        "scale": np.full((2, 2), 0.5, np.float16),
    }


def tree_edited():
    import treetool as tt

    return tt.tree_at(lambda t: t["params"]["dense"]["bias"], tree(), np.ones(3, np.float32))


def mlp():
    import equinox as eqx
    import jax

    return eqx.nn.MLP(in_size=3, out_size=2, width_size=4, depth=2, key=jax.random.key(0))


def mlp_edited():
    import jax.numpy as jnp
    import treetool as tt

    return tt.tree_at(lambda m: m.layers[1].bias, mlp(), jnp.ones(4))


def mlp_wide():
    import equinox as eqx
    import jax

    return eqx.nn.MLP(in_size=3, out_size=2, width_size=8, depth=2, key=jax.random.key(0))


def step(k):
    t = tree()
    t["params"]["dense"]["kernel"] = t["params"]["dense"]["kernel"] * k
    return t


def step1():
    return step(1)


def step2():
    return step(2)


def step3():
    return step(3)


def composite():
    return {"meta": {"dims": [1, 2], "lr": 0.5, "name": "run"}, "state": tree()}


def composite_edited():
    import treetool as tt

    return tt.tree_at(lambda t: t["meta"]["lr"], composite(), 0.25)
"""


def cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return treetool(*args, cwd=cwd, columns=None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The live module and one file per format, all made by the real libraries."""
    d = tmp_path_factory.mktemp("fidelity")
    (d / "fidelity_live.py").write_text(LIVE)
    spec = importlib.util.spec_from_file_location("fidelity_live", d / "fidelity_live.py")
    live = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live)

    import equinox as eqx
    import flax.serialization
    import orbax.checkpoint as ocp

    t = live.tree()
    (d / "tree.pkl").write_bytes(pickle.dumps(t, protocol=5))
    tt.save(t, d / "tree.npz")
    tt.save(t, d / "tree.safetensors")
    (d / "tree.msgpack").write_bytes(flax.serialization.to_bytes(t))
    eqx.tree_serialise_leaves(d / "mlp.eqx", live.mlp())
    with ocp.CheckpointManager(d / "run") as mngr:
        for k in (1, 2, 3):
            mngr.save(k, args=ocp.args.StandardSave(live.step(k)))
        mngr.wait_until_finished()
    c = live.composite()
    with ocp.CheckpointManager(d / "comp", item_names=("state", "meta")) as mngr:
        mngr.save(
            7,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(c["state"]), meta=ocp.args.JsonSave(c["meta"])
            ),
        )
        mngr.wait_until_finished()
    return d, live


def _jax_leaves(obj):
    import jax

    out = []
    for path, x in jax.tree_util.tree_flatten_with_path(obj)[0]:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            out.append((jax.tree_util.keystr(path), list(x.shape), str(x.dtype)))
        else:
            out.append((jax.tree_util.keystr(path), None, None))
    return out


# (file, --like or None, live builder, edited builder, the edited paths)
CASES = [
    ("tree.pkl", None, "tree", "tree_edited", ["['params']['dense']['bias']"]),
    ("tree.npz", None, "tree", "tree_edited", ["['params']['dense']['bias']"]),
    ("tree.safetensors", None, "tree", "tree_edited", ["['params']['dense']['bias']"]),
    ("tree.msgpack", None, "tree", "tree_edited", ["['params']['dense']['bias']"]),
    ("mlp.eqx", "fidelity_live:mlp", "mlp", "mlp_edited", [".layers[1].bias"]),
    ("run", None, "step3", "step2", ["['params']['dense']['kernel']"]),
    ("run@1", None, "step1", "step3", ["['params']['dense']['kernel']"]),
    ("comp", None, "composite", "composite_edited", ["['meta']['lr']"]),
]


def _case_args(name: str, like: str | None, live_name: str, edited: str) -> list[tuple[str, ...]]:
    """A case's three independent runs: the listing, the diff against the object it was saved
    from, the diff against the edited object."""
    extra = ["--like", like] if like else []
    return [
        ("ls", name, "--json", *extra),
        ("diff", name, f"fidelity_live:{live_name}"),
        ("diff", name, f"fidelity_live:{edited}", "--json"),
    ]


#: the runs of the eqx tests below
EQX_RUNS = [("ls", "mlp.eqx"), ("diff", "mlp.eqx", "fidelity_live:mlp_wide", "--json")]


@pytest.fixture(scope="module")
def runs(request, corpus) -> dict[tuple[str, ...], subprocess.CompletedProcess]:
    """args -> its run, for the cases this session selected and the eqx runs: all started side
    by side (as many at once as there are cores) when the first of them asks."""
    d, _ = corpus
    ids = {
        item.callspec.id
        for item in request.session.items
        if item.path == request.path
        and getattr(item, "originalname", "") == "test_file_lists_and_diffs_as_the_live_object"
    }
    wanted = [
        args
        for case in CASES
        if any(i.startswith(f"{case[0]}-") for i in ids)
        for args in _case_args(*case[:4])
    ] + EQX_RUNS
    return dict(zip(wanted, together(*(functools.partial(cli, *a, cwd=d) for a in wanted))))


@pytest.mark.parametrize(("name", "like", "live_name", "edited", "paths"), CASES)
def test_file_lists_and_diffs_as_the_live_object(
    corpus, runs, name, like, live_name, edited, paths
):
    d, live = corpus
    r, same, changed = (
        runs[args] if args in runs else cli(*args, cwd=d)
        for args in _case_args(name, like, live_name, edited)
    )
    assert r.returncode == 0, r.stderr
    listing = json.loads(r.stdout)
    got = [
        (rec["path"], rec["shape"], rec["dtype"]) if rec["shape"] is not None else (rec["path"],)
        for rec in listing["leaves"]
    ]
    want = [
        (p, s, dt) if s is not None else (p,)
        for p, s, dt in _jax_leaves(getattr(live, live_name)())
    ]
    assert got == want

    # equal to the object it was saved from (for .eqx, the live side is the skeleton)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.strip() == "no differences"

    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert [c["path"] for c in json.loads(changed.stdout)["changes"]] == paths


def test_eqx_without_skeleton_says_why_paths_are_positional(runs):
    r = runs[EQX_RUNS[0]]
    assert r.returncode == 0
    assert [line.split("\t")[0] for line in r.stdout.splitlines()] == [f"[{i}]" for i in range(6)]
    assert "stores no structure" in r.stderr and "--like module:attr" in r.stderr


def test_eqx_against_a_model_of_another_width_shows_the_shapes(runs):
    r = runs[EQX_RUNS[1]]
    assert r.returncode == 1, r.stderr
    changes = {c["path"]: c["kind"] for c in json.loads(r.stdout)["changes"]}
    assert changes == {
        ".layers[0].weight": "shape",
        ".layers[0].bias": "shape",
        ".layers[1].weight": "shape",
        ".layers[1].bias": "shape",
        ".layers[2].weight": "shape",
        ".layers[2].bias": "value",
    }


def test_orbax_run_says_its_steps_and_diffs_two_of_them(corpus):
    d, _ = corpus
    runs = together(  # four independent runs, side by side
        functools.partial(cli, "ls", "run", "--json", cwd=d),
        functools.partial(cli, "diff", "run@1", "run@2", "--json", cwd=d),
        functools.partial(cli, "ls", "run", "--step", "2", "--json", cwd=d),
        functools.partial(cli, "ls", "run@9", cwd=d),
    )
    r = runs[0]
    listing = json.loads(r.stdout)
    assert (listing["step"], listing["steps"]) == (3, [1, 2, 3])
    assert "steps 1, 2, 3; showing step 3" in r.stderr
    r = runs[1]
    assert r.returncode == 1
    assert [c["path"] for c in json.loads(r.stdout)["changes"]] == ["['params']['dense']['kernel']"]
    r = runs[2]
    assert json.loads(r.stdout)["step"] == 2
    r = runs[3]
    assert r.returncode == 2
    assert r.stderr.strip() == "treetool: error: run: no step 9; its steps: 1, 2, 3"


# --- sniffing: header lengths of every low byte -----------------------------------------


def test_safetensors_every_header_length_low_byte(tmp_path):
    from safetensors.numpy import load_file, save_file

    w = np.arange(3, dtype=np.float32)
    entry = {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}
    for low in range(256):
        f = tmp_path / f"{low}.safetensors"
        if low % 8 == 0:  # the real library pads its header to 8 bytes: grow the metadata
            save_file({"w": w}, str(f), metadata={"p": ""})
            n0 = struct.unpack("<Q", f.read_bytes()[:8])[0]
            save_file({"w": w}, str(f), metadata={"p": "x" * (1024 + low - n0)})
            assert struct.unpack("<Q", f.read_bytes()[:8])[0] == 1024 + low
        else:  # other lengths are valid too (the library reads them): written by hand
            text = json.dumps({**entry, "__metadata__": {"p": ""}}, separators=(",", ":"))
            need = 1280 + low - len(text)
            text = text.replace('"p":""', '"p":"' + "x" * need + '"')
            f.write_bytes(struct.pack("<Q", len(text)) + text.encode() + w.tobytes())
            assert struct.unpack("<Q", f.read_bytes()[:8])[0] % 256 == low
            assert np.array_equal(load_file(str(f))["w"], w)
        assert tio.detect(f) == "safetensors", low
        assert np.array_equal(np.asarray(tio.load(f)["w"]), w)


def test_npy_every_header_length_low_byte(tmp_path):
    x = np.arange(4, dtype=np.int16)
    base = "{'descr': '<i2', 'fortran_order': False, 'shape': (4,), }"
    for low in range(256):
        hd = (base + " " * ((low - len(base) - 1) % 256 + 256) + "\n").encode("latin1")
        assert len(hd) % 256 == low
        f = tmp_path / f"{low}.npy"
        f.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hd)) + hd + x.tobytes())
        assert np.array_equal(np.load(f), x)
        assert tio.detect(f) == "npy"
        assert np.array_equal(np.asarray(tio.load(f)), x)


def test_msgpack_every_map_length_low_byte(tmp_path):
    import flax.serialization

    for n in range(256):  # fixmap (0x80-0x8f) then map16 with each low byte of its count
        state = {f"k{i}": np.full(1, i, np.int32) for i in range(n + 1)}
        f = tmp_path / f"{n}.msgpack"
        f.write_bytes(flax.serialization.to_bytes(state))
        assert tio.detect(f) == "msgpack", n
        out = tio.load(f)
        assert sorted(out) == sorted(state) and int(np.asarray(out[f"k{n}"])[0]) == n


def test_pickle_every_protocol_and_frame_length_low_byte(tmp_path):
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        for low in range(256) if proto >= 4 else range(4):
            obj = {"w": np.ones(2, np.float32), "s": "x" * (300 + low)}
            data = pickle.dumps(obj, protocol=proto)
            f = tmp_path / f"{proto}_{low}.pkl"
            f.write_bytes(data)
            assert tio.detect(f) == "pickle", (proto, low)
            out = tio.load(f)
            assert out["s"] == obj["s"] and np.array_equal(np.asarray(out["w"]), obj["w"])
        if proto >= 4:  # the FRAME length took every low byte
            lows = {
                pickle.dumps({"w": np.ones(2, np.float32), "s": "x" * (300 + i)}, protocol=proto)[3]
                for i in range(256)
            }
            assert len(lows) == 256


# --- loaded leaves in computations ---------------------------------------------------------


@pytest.fixture(scope="module")
def flax_model():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    model = nn.Sequential([nn.Dense(4), nn.relu, nn.Dense(2)])
    x = jnp.linspace(-1, 1, 6).reshape(2, 3)
    params = model.init(jax.random.key(0), x)
    return model, params, x


def _save_all(params, d):
    """`params` in every format that stores nested dicts (each by its own library)."""
    import flax.serialization
    import orbax.checkpoint as ocp

    paths = {}
    paths["pickle"] = d / "p.pkl"
    paths["pickle"].write_bytes(pickle.dumps(tt.materialize(_np(params))))
    paths["npz"] = d / "p.npz"
    tt.save(params, paths["npz"])
    paths["safetensors"] = d / "p.safetensors"
    tt.save(params, paths["safetensors"])
    paths["msgpack"] = d / "p.msgpack"
    paths["msgpack"].write_bytes(flax.serialization.to_bytes(params))
    paths["orbax"] = d / "p_orbax"
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(paths["orbax"], params)
    ckpt.wait_until_finished()
    return paths


def _np(tree):
    import jax

    return jax.tree_util.tree_map(np.asarray, tree)


def test_flax_apply_on_params_loaded_from_each_format(tmp_path, flax_model):
    import jax

    model, params, x = flax_model
    want = np.asarray(model.apply(params, x))
    for fmt, path in _save_all(params, tmp_path).items():
        eager = tt.load(path, lazy=False)
        assert np.allclose(np.asarray(model.apply(eager, x)), want), fmt
        lazy = tt.load(path)
        before = [(str(p), id(v), type(v)) for p, v in tt.leaves_with_path(lazy)]
        # flax converts params with jnp.asarray: lazy leaves read themselves
        assert np.allclose(np.asarray(model.apply(lazy, x)), want), fmt
        # jax.jit needs arrays: materialize gives them
        assert np.allclose(np.asarray(jax.jit(model.apply)(tt.materialize(lazy), x)), want), fmt
        # materialize leaves the lazily loaded tree as it was
        assert [(str(p), id(v), type(v)) for p, v in tt.leaves_with_path(lazy)] == before


def test_equinox_model_runs_on_leaves_loaded_from_each_format(tmp_path):
    import equinox as eqx
    import flax.serialization
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from safetensors.numpy import save_file

    model = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(1))
    x = jnp.linspace(-1, 1, 3)
    want = np.asarray(model(x))
    eqx.tree_serialise_leaves(tmp_path / "m.eqx", model)
    lazy = tt.load(tmp_path / "m.eqx", like=model, lazy=True)  # eager by default with like=
    assert type(lazy.layers[0].weight).__name__ == "LazyArray"
    # the lazy leaves read themselves in `weight @ x` and `+ bias`
    assert np.allclose(np.asarray(lazy(x)), want)

    # the other formats store the arrays under their key paths ('.layers[0].weight')
    params, static = eqx.partition(model, eqx.is_array)
    flat = {k: np.asarray(v) for k, v in tt.to_flat_dict(params).items() if v is not None}
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(flat))
    np.savez(tmp_path / "m.npz", **flat)
    save_file(flat, str(tmp_path / "m.safetensors"))
    (tmp_path / "m.msgpack").write_bytes(flax.serialization.to_bytes(flat))
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(tmp_path / "m_orbax", {"params": params})
    ckpt.wait_until_finished()
    for name in ("m.pkl", "m.npz", "m.safetensors", "m.msgpack", "m_orbax"):
        loaded = tt.load(tmp_path / name, lazy=False)
        if name == "m_orbax":  # orbax keeps the nesting: ['layers']['0']['weight']
            loaded = tt.to_flat_dict(loaded["params"])
        assert all(type(v) is np.ndarray for v in loaded.values())
        restored = tt.from_flat_dict(loaded, like=params)
        assert np.allclose(np.asarray(eqx.combine(restored, static)(x)), want), name


def test_lazy_array_in_numpy_and_jax_numpy(tmp_path):
    import jax.numpy as jnp

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    tt.save({"w": w}, tmp_path / "w.safetensors")
    lw = tt.load(tmp_path / "w.safetensors")["w"]
    assert np.array_equal(lw + 1, w + 1) and np.array_equal(2 * lw, 2 * w)
    assert np.array_equal(np.tanh(lw), np.tanh(w)) and np.array_equal(lw.T, w.T)
    got = jnp.ones(3) @ lw.T
    assert type(got).__module__.startswith("jax") and np.allclose(got, w.sum(1))
    assert np.array_equal(jnp.asarray(lw), w)
    assert lw == lw and lw != tt.load(tmp_path / "w.safetensors")["w"]  # identity, as before
    import jax

    # what jax says when a lazy leaf reaches jit: the fix is in the message
    with pytest.raises(TypeError, match=r"lazy=False or call treetool\.materialize\(tree\)"):
        jax.jit(lambda a: a * 2)(lw)
    assert np.array_equal(jax.jit(lambda a: a * 2)(tt.materialize({"w": lw})["w"]), 2 * w)


def test_orbax_values_are_read_in_chunks_of_rows(tmp_path):
    import orbax.checkpoint as ocp

    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(tmp_path / "c", {"x": x})
    ckpt.wait_until_finished()
    leaf = tt.load(tmp_path / "c")["x"]
    chunks = list(leaf.iter_chunks(128))  # 8 rows of 16 per read
    assert [c.shape for c in chunks] == [(128,)] * 8
    assert np.array_equal(np.concatenate(chunks), x.reshape(-1))
    y = x.copy()
    y[63, 15] = -1
    d = tt.diff({"x": leaf}, {"x": y})
    assert [(c.path, c.kind, c.detail["first_index"]) for c in d.changes] == [
        ("['x']", "value", [63, 15])
    ]


def test_orbax_run_with_prefixed_zero_padded_steps(tmp_path):
    import orbax.checkpoint as ocp

    opts = ocp.CheckpointManagerOptions(step_prefix="ckpt", step_format_fixed_length=6)
    with ocp.CheckpointManager(tmp_path / "run", options=opts) as mngr:
        for k in (10, 20):
            mngr.save(k, args=ocp.args.StandardSave({"w": np.full(2, k, np.float32)}))
        mngr.wait_until_finished()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["ckpt_000010", "ckpt_000020"]
    latest = tio.read(tmp_path / "run")
    assert (latest.step, latest.steps) == (20, [10, 20])
    assert np.asarray(latest.tree["w"]).tolist() == [20.0, 20.0]
    first = tio.read(f"{tmp_path / 'run'}@10")
    assert first.step == 10 and np.asarray(first.tree["w"]).tolist() == [10.0, 10.0]

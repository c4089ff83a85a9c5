"""A loaded checkpoint is the tree it was saved from: the corpus, against live jax.

Each case is built by a small module written into a tmp dir, saved by the real libraries
(cloudpickle for equinox, whose MLP holds functions plain pickle cannot save), then read back
by the `treetool` CLI as a real subprocess, in safe mode. `ls --json` must list exactly jax's
leaves of the live object (paths, shapes, dtypes incl. `key<impl>`, param totals), and
`diff FILE module:attr` must exit 0 against the object it was saved from and 1 with exactly the
edited paths after a `tt.tree_at` edit.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import pickle
import subprocess
import sys
import textwrap
import types

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_runner import together, treetool
from rich.console import Console

import treetool as tt
from treetool import OpaqueFunction
from treetool._diff._rich import diff_text

MODULE = "fidelity_corpus_mod"

SOURCE = textwrap.dedent(
    '''
    """Objects the fidelity corpus saves and diffs against (deterministic: same every call)."""
    import jax
    import jax.numpy as jnp


    def eqx_state():
        import equinox as eqx
        import optax

        m = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(0))
        return {"model": m, "opt": optax.adamw(1e-3).init(eqx.filter(m, eqx.is_array)), "step": 3}


    def linen_state():
        import flax.linen as nn
        import optax

        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)(nn.LayerNorm()(nn.Dense(4)(x)))

        params = Net().init(jax.random.key(1), jnp.ones((1, 3)))["params"]
        return {"step": 0, "params": params, "opt_state": optax.adam(1e-3).init(params)}


    def linen_train_state():
        import flax.linen as nn
        import optax
        from flax.training import train_state

        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)(nn.relu(nn.Dense(4)(x)))

        net = Net()
        params = net.init(jax.random.key(4), jnp.ones((1, 3)))["params"]
        return train_state.TrainState.create(apply_fn=net.apply, params=params, tx=optax.adamw(1e-3))


    def haiku_state():
        import haiku as hk

        def f(x):
            return hk.nets.MLP([4, 2])(hk.BatchNorm(True, True, 0.9)(x, is_training=True))

        p, s = hk.transform_with_state(f).init(jax.random.key(2), jnp.ones((2, 3)))
        return {"params": p, "state": s}


    def nnx_state():
        from flax import nnx

        class Net(nnx.Module):
            def __init__(self, rngs):
                self.lin = nnx.Linear(3, 4, rngs=rngs)
                self.bn = nnx.BatchNorm(4, rngs=rngs)
                self.out = nnx.Linear(4, 2, rngs=rngs)

        return nnx.state(Net(nnx.Rngs(3)))


    def keys():
        out = {}
        for impl in ("threefry2x32", "rbg", "unsafe_rbg"):
            k = jax.random.key(7, impl=impl)
            out[impl] = {
                "one": k,
                "four": jax.random.split(k, 4),
                "grid": jax.random.split(k, (2, 3)),
            }
        return out


    def corpus():
        import importlib.util

        out = {"eqx_state": eqx_state(), "linen_state": linen_state()}
        out["linen_train_state"] = linen_train_state()
        out["nnx_state"], out["keys"] = nnx_state(), keys()
        if importlib.util.find_spec("haiku") is not None:
            out["haiku_state"] = haiku_state()
        return out


    def plain():  # what plain pickle can save (no functions held as leaves or static fields)
        return {k: v for k, v in corpus().items() if k not in ("eqx_state", "linen_train_state")}
    '''
)

HAS_HAIKU = importlib.util.find_spec("haiku") is not None
CLOUD = ("eqx_state", "linen_train_state")  # hold functions: cloudpickle only
BUILDERS = ["eqx_state", "linen_state", "linen_train_state", "nnx_state", "keys"] + (
    ["haiku_state"] if HAS_HAIKU else []
)


@pytest.fixture(scope="module")
def mod_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    (d / f"{MODULE}.py").write_text(SOURCE)
    return d


@pytest.fixture(scope="module")
def mod(mod_dir):
    spec = importlib.util.spec_from_file_location(MODULE, mod_dir / f"{MODULE}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return treetool(*args, cwd=cwd, env={"PYTHONPATH": str(cwd)}, columns=None)


def save(tree, path, pickler: str, protocol: int) -> None:
    dump = cloudpickle.dumps if pickler == "cloudpickle" else pickle.dumps
    path.write_bytes(dump(tree, protocol=protocol))


def jax_listing(tree) -> list[tuple[str, list | None, str | None]]:
    out = []
    for p, x in jax.tree_util.tree_leaves_with_path(tree):
        has = hasattr(x, "shape") and hasattr(x, "dtype")
        out.append(
            (
                jax.tree_util.keystr(p),
                [int(s) for s in x.shape] if has else None,
                str(x.dtype) if has else None,
            )
        )
    return out


def jax_params(tree) -> int:
    return sum(
        int(np.size(x))
        for x in jax.tree_util.tree_leaves(tree)
        if hasattr(x, "dtype") and not jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
    )


def edit(live):
    """`tt.tree_at` edits in every case of the corpus: the new tree and the exact paths."""
    edits = {}
    for case in live:
        arrays = [
            (f"['{case}']" + jax.tree_util.keystr(p), x)
            for p, x in jax.tree_util.tree_leaves_with_path(live[case])
            if hasattr(x, "dtype") and not jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
        ]
        if arrays:
            first, x = arrays[0]
            edits[first] = jnp.asarray(x) + 1
            last, y = arrays[-1]
            edits[last] = jnp.asarray(y) * 2 + 1
    edits["['eqx_state']['model'].final_activation"] = jax.nn.gelu
    edits["['keys']['rbg']['four']"] = jax.random.split(jax.random.key(8, impl="rbg"), 4)
    edits["['keys']['threefry2x32']['one']"] = jax.random.key(9)
    new = live
    for path, value in edits.items():
        new = tt.tree_at(path, new, replace=value)
    return new, sorted(edits)


@pytest.fixture(scope="module")
def corpus(mod, mod_dir):
    """The corpus saved three ways, listed and diffed by the CLI once for all tests."""
    live = mod.corpus()
    files = {
        "all-p4": (live, "cloudpickle", 4, "corpus"),
        "eqx-p5": (live["eqx_state"], "cloudpickle", 5, "eqx_state"),
        "plain-p5": ({k: v for k, v in live.items() if k not in CLOUD}, "pickle", 5, "plain"),
    }
    calls = []
    for name, (tree, pickler, protocol, attr) in files.items():
        save(tree, mod_dir / f"{name}.pkl", pickler, protocol)
        calls.append(functools.partial(cli, "ls", "--json", f"{name}.pkl", cwd=mod_dir))
        calls.append(functools.partial(cli, "diff", f"{name}.pkl", f"{MODULE}:{attr}", cwd=mod_dir))
    runs = together(*calls)  # the six CLI runs are independent: on every core at once
    return {name: (files[name][0], *runs[2 * i : 2 * i + 2]) for i, name in enumerate(files)}


@pytest.fixture(scope="module")
def later_runs(corpus, mod, mod_dir) -> dict[str, subprocess.CompletedProcess]:
    """The CLI runs of the tests below on files saved from edits of the corpus (the edits are
    made and saved here, in this process): independent runs, on every core at once."""
    edited, _ = edit(corpus["all-p4"][0])
    save(edited, mod_dir / "edited.pkl", "cloudpickle", 4)
    changed = tt.tree_at("['model'].activation", mod.eqx_state(), replace=jax.nn.gelu)
    save(changed, mod_dir / "eqx-fn-gelu.pkl", "cloudpickle", 5)
    calls = {
        "edited": ("diff", "--json", "edited.pkl", f"{MODULE}:corpus"),
        "eqx-ls": ("ls", "eqx-p5.pkl"),
        "eqx-trusted": ("diff", "--trust", "eqx-p5.pkl", f"{MODULE}:eqx_state"),
        "gelu": ("diff", "eqx-fn-gelu.pkl", "eqx-p5.pkl"),
    }
    runs = together(*(functools.partial(cli, *args, cwd=mod_dir) for args in calls.values()))
    return dict(zip(calls, runs))


@pytest.mark.parametrize("name", ["all-p4", "eqx-p5", "plain-p5"])
def test_safe_load_lists_jax_leaves_and_diffs_equal(corpus, name):
    live, ls, d = corpus[name]
    assert ls.returncode == 0, ls.stderr
    listing = json.loads(ls.stdout)
    got = [(rec["path"], rec["shape"], rec["dtype"]) for rec in listing["leaves"]]
    assert got == jax_listing(live)
    assert listing["totals"]["leaves"] == len(jax.tree_util.tree_leaves(live))
    assert listing["totals"]["params"] == jax_params(live)
    # nothing of a function's internals, no writer's file paths, no memory addresses
    assert "__wrapped__" not in ls.stdout and "site-packages" not in ls.stdout
    assert "0x" not in ls.stdout
    assert (d.returncode, d.stdout.strip()) == (0, "no differences"), d.stdout + d.stderr


def test_corpus_has_every_case_and_key_impl(corpus):
    live = corpus["all-p4"][0]
    assert sorted(live) == sorted(BUILDERS)
    dtypes = {rec["dtype"] for rec in json.loads(corpus["all-p4"][1].stdout)["leaves"]}
    assert {"key<fry>", "key<rbg>", "key<urbg>", "float32"} <= dtypes
    if not HAS_HAIKU:
        pytest.skip("dm-haiku is not installed: the haiku case was left out")


def test_diff_after_tree_at_names_exactly_the_edited_paths(corpus, later_runs):
    live = corpus["all-p4"][0]
    edited, paths = edit(live)  # the same edit as the one saved to edited.pkl
    d = later_runs["edited"]
    assert d.returncode == 1, d.stderr
    changes = json.loads(d.stdout)["changes"]
    assert sorted(c["path"] for c in changes) == paths
    assert {c["kind"] for c in changes} == {"value"}
    (fn,) = [c for c in changes if c["path"].endswith(".final_activation")]
    assert (fn["before"], fn["after"]) == (
        "jax._src.nn.functions.gelu",
        "<lambda> in equinox.nn._mlp",
    )
    assert "0x" not in d.stdout
    assert not tt.diff(live, corpus["all-p4"][0]).changes  # the live input was not mutated
    assert tt.diff(live, edited).changes  # and the edit made a new tree


def test_eqx_functions_are_one_leaf_named_by_qualname(corpus, mod_dir, later_runs):
    live, ls, _ = corpus["eqx-p5"]
    f = mod_dir / "eqx-p5.pkl"
    tree = tt.load(str(f))
    act, final = tree["model"].activation, tree["model"].final_activation
    assert type(act) is OpaqueFunction and type(final) is OpaqueFunction
    assert (act.label, act.kind) == ("jax._src.nn.functions.relu", "custom_jvp")
    assert (final.label, final.kind) == ("<lambda> in equinox.nn._mlp", "function")
    assert final.code is not None  # the file holds the lambda's code: its digest is kept
    assert len(tt.leaves_with_path(tree)) == len(jax.tree_util.tree_leaves(live)) == 22
    fns = [r for r in json.loads(ls.stdout)["leaves"] if r["type"] == "OpaqueFunction"]
    assert [r["path"] for r in fns] == ["['model'].activation", "['model'].final_activation"]

    r = later_runs["eqx-ls"]
    assert [line for line in r.stdout.splitlines() if "activation" in line] == [
        "['model'].activation\t-\t<custom_jvp jax._src.nn.functions.relu>",
        "['model'].final_activation\t-\t<function <lambda> in equinox.nn._mlp>",
    ]
    # the one-line note still says what was not executed, without the functions' internals
    assert "cloudpickle.cloudpickle._make_function" in r.stderr
    assert "inspect.Signature" not in r.stderr

    # the trusted load (the real objects) against the live object, and two trusted loads
    d = later_runs["eqx-trusted"]
    assert (d.returncode, d.stdout.strip()) == (0, "no differences"), d.stdout
    assert not tt.diff(tt.load(str(f), trust=True), tt.load(str(f), trust=True)).changes


def test_function_diffs_name_functions_never_addresses(corpus, mod, mod_dir, later_runs):
    g = mod_dir / "eqx-fn-gelu.pkl"  # the eqx state with gelu for its activation
    d = later_runs["gelu"]
    assert d.returncode == 1
    flat = " ".join(d.stdout.replace("│", " ").split())  # the rows wrap at 80 columns
    assert ".activation value jax._src.nn.functions.gelu → jax._src.nn.functions.relu" in flat
    f = str(mod_dir / "eqx-p5.pkl")
    trusted = tt.diff(tt.load(str(g), trust=True), tt.load(f, trust=True))
    assert [(c.path, c.before, c.after) for c in trusted.changes] == [
        ("['model'].activation", "jax._src.nn.functions.gelu", "jax._src.nn.functions.relu")
    ]
    assert "0x" not in diff_text(trusted) and "0x" not in d.stdout

    # same name, other code: the code digest tells them apart where both sides have code
    a = {"f": lambda x: x + 1}
    b = {"f": lambda x: x + 2}
    (c,) = tt.diff(a, b).changes
    label = f"{a['f'].__qualname__} in {__name__}"  # a local lambda: `f.<locals>.<lambda> in mod`
    assert (c.kind, c.before, c.after) == ("value", label, label)
    assert c.detail == {"callable": True, "code_changed": True}
    assert "same name, different code" in diff_text(tt.diff(a, b))
    assert not tt.diff({"f": jax.nn.relu}, {"f": jax.nn.relu}).changes
    # a static field that holds a function: two loads of it are not a change either
    assert not tt.diff(tt.load(f, trust=True)["model"], mod.eqx_state()["model"]).changes


def test_hostile_function_names_are_escaped(tmp_path):
    def f(x):
        return x

    code = f.__code__.replace(co_name="evil\x1b[2J", co_qualname="evil\x1b[2J\u202e")
    evil = types.FunctionType(code, {"__name__": "mod\x07"}, "evil")
    p = tmp_path / "evil.pkl"
    p.write_bytes(cloudpickle.dumps({"f": evil}))
    r = cli("ls", "--json", p.name, cwd=tmp_path)
    assert r.returncode == 0
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout and "\x07" not in r.stdout
    fn = tt.load(str(p))["f"]
    assert fn.qualname == "evil\\x1b[2J\\u202e" and fn.module == "mod\\x07"


def test_typed_keys_load_as_keys_of_their_impl(corpus, mod_dir):
    live = corpus["plain-p5"][0]["keys"]
    f = mod_dir / "plain-p5.pkl"
    tree = tt.load(str(f))["keys"]
    for impl, tag in (("threefry2x32", "fry"), ("rbg", "rbg"), ("unsafe_rbg", "urbg")):
        for name, shape in (("one", ()), ("four", (4,)), ("grid", (2, 3))):
            k, want = tree[impl][name], live[impl][name]
            assert (k.shape, str(k.dtype), k.impl) == (shape, f"key<{tag}>", impl)
            assert str(k.dtype) == str(want.dtype)
            info = tt.leaf_info(k)
            assert info.is_key and info.params == 0 and info.nbytes == want.nbytes
            assert info.label == f"key<{tag}>[{','.join(map(str, shape))}]"
            assert np.array_equal(k.key_data(), jax.random.key_data(want))
            assert bool((k.to_jax() == want).all())
    # one leaf per key array, like jax
    assert len(tt.leaves_with_path(tree)) == len(jax.tree_util.tree_leaves(live)) == 9
    totals = tt.summary(tree).to_dict()["totals"]
    assert totals["params"] == 0
    assert totals["bytes"] == sum(x.nbytes for x in jax.tree_util.tree_leaves(live))
    # a key whose data differs is a value change; a loaded key equals its live key
    other = dict(live, rbg=dict(live["rbg"], one=jax.random.key(1, impl="rbg")))
    (c,) = tt.diff(tree, other).changes
    assert (c.path, c.kind) == ("['rbg']['one']", "value")
    # reading the keys does not import jax
    code = (
        "import sys, treetool as tt; t = tt.load(sys.argv[1]); "
        "print(t['keys']['rbg']['four'], 'jax' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(f)], capture_output=True, text=True, timeout=60
    )
    assert r.stdout.split() == ["KeyArray(key<rbg>[4])", "False"], r.stderr


def test_uint32_pairs_are_params_not_keys(tmp_path):
    edges = np.arange(2000, dtype=np.uint32).reshape(1000, 2)
    tree = {"edges": edges, "legacy_key": np.asarray(jax.random.PRNGKey(0))}
    info = tt.leaf_info(edges)
    assert (info.is_key, info.params, info.label) == (False, 2000, "u32[1000,2]")
    assert not tt.is_key(edges) and not tt.leaf_info(jnp.asarray(edges)).is_key
    assert tt.summary(tree).to_dict()["totals"]["params"] == 2002
    p = tmp_path / "edges.pkl"
    p.write_bytes(pickle.dumps(tree))
    r = cli("summary", "--json", p.name, cwd=tmp_path)
    rows = {row["path"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows["['edges']"]["params"] == 2000 and rows["['legacy_key']"]["params"] == 2
    r = cli("ls", "--json", p.name, cwd=tmp_path)
    listing = json.loads(r.stdout)
    assert listing["totals"]["params"] == 2002
    assert [rec["dtype"] for rec in listing["leaves"]] == ["uint32", "uint32"]
    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(tt.render(tree))
    text = console.file.getvalue()
    assert "[key]" not in text and "2,000 params" in text, text
    # a legacy raw key still seeds split_keys (a hint from its shape, not a key type)
    keys = tt.split_keys(jax.random.PRNGKey(0), {"w": np.zeros(3)})
    assert keys["w"].dtype == jnp.uint32 and keys["w"].shape == (2,)

"""batch_axes / auto_vmap, autojit and split_keys on real jax, equinox and numpy trees."""

from __future__ import annotations

import dataclasses
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
from treetool._errors import TreetoolError

B = 4


def problem():
    """Per-example data next to configuration of every kind."""
    return {
        "x": jnp.arange(B * 3, dtype=jnp.float32).reshape(B, 3),
        "y": jnp.arange(B, dtype=jnp.float32),
        "cfg": {
            "name": "ridge",
            "steps": 3,
            "lr": 0.5,
            "proj": jnp.ones((3, 2)),
            "bias": np.full(2, 0.25, np.float32),
        },
    }


def solve(p):
    """One example's loss (uses the configuration, including its strings and ints)."""
    z = p["x"] @ p["cfg"]["proj"] + p["cfg"]["bias"]
    scale = 2.0 if p["cfg"]["name"] == "ridge" else 1.0
    return scale * p["cfg"]["lr"] * jnp.sum(z) * p["cfg"]["steps"] - p["y"]


# --- batch_axes -------------------------------------------------------------------------------


def test_batch_axes_on_data_and_configuration():
    assert tt.batch_axes(problem(), B) == {"cfg": None, "x": 0, "y": 0}


def test_batch_axes_keeps_structure_where_entries_differ():
    p = problem()
    p["cfg"]["table"] = jnp.zeros((B, 2))  # configuration that happens to have B rows
    axes = tt.batch_axes(p, B)
    assert axes == {
        "cfg": {"bias": None, "lr": None, "name": None, "proj": None, "steps": None, "table": 0},
        "x": 0,
        "y": 0,
    }
    assert tt.batch_axes(p, B, exclude="cfg.table") == {"cfg": None, "x": 0, "y": 0}
    assert tt.batch_axes(p, B, exclude=["['cfg']"]) == {"cfg": None, "x": 0, "y": 0}
    assert tt.batch_axes(p, B, exclude="**.table") == {"cfg": None, "x": 0, "y": 0}


def test_batch_axes_explain_reports_every_decision_and_the_ambiguity():
    p = problem()
    p["cfg"]["table"] = jnp.zeros((B, 2))
    axes, report = tt.batch_axes(p, B, explain=True)
    assert axes["cfg"]["table"] == 0
    assert report.batched == ["['cfg']['table']", "['x']", "['y']"]
    assert report.unbatched == [
        ("['cfg']['bias']", "f32[2]: size 2 on axis 0"),
        ("['cfg']['proj']", "f32[3,2]: size 3 on axis 0"),
    ]
    assert report.static == ["['cfg']['lr']", "['cfg']['name']", "['cfg']['steps']"]
    assert report.ambiguous == [
        (
            "['cfg']['table']",
            "batched, but in ['cfg'] 2 other array(s) are not batched and 3 leaf(s) are static",
        )
    ]
    text = str(report)
    assert text.splitlines()[0] == (
        "batch size 4 on axis 0: 3 batched, 2 not batched, 0 excluded, 3 static"
    )
    assert "  ? ['cfg']['table']  batched, but in ['cfg'] 2 other array(s) are not batched" in text
    _, report = tt.batch_axes(p, B, exclude="cfg.table", explain=True)
    assert report.excluded == [("['cfg']['table']", "cfg.table")]
    assert report.ambiguous == []


def test_batch_axes_flags_square_arrays_and_other_axes():
    axes, report = tt.batch_axes({"k": np.zeros((3, B, B))}, B, axis=1, explain=True)
    assert axes == {"k": 1}
    assert report.ambiguous == [("['k']", "f64[3,4,4]: size 4 on more than one axis")]
    assert tt.batch_axes({"k": np.zeros((3, B))}, B, axis=-1) == {"k": -1}
    # data next to a number: both arrays are batched, nothing looks like configuration
    _, report = tt.batch_axes({"x": np.zeros((B, 2)), "y": np.zeros(B), "lr": 0.1}, B, explain=True)
    assert report.ambiguous == []
    # a lone batched table among static entries does
    _, report = tt.batch_axes({"cfg": {"t": np.zeros((B, 2)), "name": "a"}}, B, explain=True)
    assert report.ambiguous == [("['cfg']['t']", "batched, but in ['cfg'] 1 leaf(s) are static")]


def test_batch_axes_on_an_equinox_module_is_a_valid_in_axes():
    mlp = eqx.nn.MLP(2, 2, B, 1, key=jax.random.key(0))  # layers[0].weight is f32[4,2]
    axes = tt.batch_axes(mlp, B)
    assert axes.layers[0].weight == 0 and axes.layers[0].bias == 0
    assert axes.layers[1].weight is None and axes.layers[1].bias is None
    assert axes.activation is None


def test_batch_axes_rejects_a_bad_batch_size():
    with pytest.raises(TypeError, match=r"batch_size must be a non-negative int, got 2\.5"):
        tt.batch_axes({}, 2.5)


def test_batch_axes_exclude_that_matches_nothing_names_the_nearest_path():
    p = problem()
    with pytest.raises(
        tt.PathError,
        match=re.escape(
            "batch_axes: exclude pattern 'cfg.prog' matches no path; did you mean \"['cfg']['proj']\"?"
        ),
    ):
        tt.batch_axes(p, B, exclude="cfg.prog")
    with pytest.raises(
        tt.PathError,
        match=re.escape("auto_vmap(solve): exclude pattern 'args[1]' matches no path"),
    ):
        tt.auto_vmap(solve, B, exclude="args[1]")(p)


def test_batch_axes_explain_names_config_like_paths_and_overridden_leaves():
    data = {"x": np.zeros((B, 2)), "hparams": {"a": np.zeros(B), "b": np.zeros((B, 3))}}
    axes, report = tt.batch_axes(data, B, explain=True)
    assert axes == {"hparams": 0, "x": 0}
    assert report.ambiguous == [
        ("['hparams']['a']", "batched, but its path names 'hparams'"),
        ("['hparams']['b']", "batched, but its path names 'hparams'"),
    ]
    axes, report = tt.batch_axes(data, B, exclude="hparams", explain=True)
    assert axes == {"hparams": None, "x": 0}
    assert report.excluded == [("['hparams']['a']", "hparams"), ("['hparams']['b']", "hparams")]
    assert report.overridden == ["['hparams']['a']", "['hparams']['b']"]
    assert report.ambiguous == []
    assert "  excluded  ['hparams']['a']  (matches 'hparams'; has the batch size)" in str(report)


def test_batch_axes_result_goes_straight_into_jax_vmap():
    data = {"x": jnp.ones((B, 3)), "w": jnp.arange(6.0).reshape(3, 2), "t": jnp.arange(B * 1.0)}
    axes = tt.batch_axes(data, B)
    assert axes == {"t": 0, "w": None, "x": 0}
    ours = jax.vmap(lambda d: d["x"] @ d["w"] * d["t"], in_axes=(axes,))(data)
    by_hand = jax.vmap(lambda x, t: x @ data["w"] * t, in_axes=(0, 0))(data["x"], data["t"])
    assert ours.shape == (B, 2)
    np.testing.assert_array_equal(ours, by_hand)


leaf_dims = st.lists(st.integers(0, 5), min_size=0, max_size=3)
trees = st.recursive(
    st.one_of(
        leaf_dims.map(lambda s: np.zeros(s, np.float32)),
        st.sampled_from(["cfg", 3, 0.5, None]),
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.sampled_from("abcde"), kids, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(trees, st.integers(0, 5))
def test_batch_axes_is_a_prefix_tree_with_the_right_axis_per_leaf(tree, b):
    axes = tt.batch_axes(tree, b)
    # axes is a prefix of tree (tree_map raises otherwise); broadcast, each leaf gets its axis
    got: list = []
    jax.tree_util.tree_map(
        lambda ax, sub: got.extend([ax] * len(jax.tree_util.tree_leaves(sub))),
        axes,
        tree,
        is_leaf=lambda x: x is None,
    )
    leaves = jax.tree_util.tree_leaves(tree)
    want = [0 if isinstance(x, np.ndarray) and x.ndim and x.shape[0] == b else None for x in leaves]
    assert got == want


# --- auto_vmap --------------------------------------------------------------------------------


def test_auto_vmap_equals_a_hand_written_vmap():
    p = problem()
    ours = tt.auto_vmap(solve, B)(p)

    def by_hand(x, y):  # configuration closed over: vmap cannot take strings
        return solve({"x": x, "y": y, "cfg": p["cfg"]})

    theirs = jax.vmap(by_hand, in_axes=(0, 0))(p["x"], p["y"])
    assert ours.shape == (B,)
    np.testing.assert_array_equal(ours, theirs)


def test_auto_vmap_maps_kwargs_and_honours_exclude():
    def f(x, *, table, scale):
        return x.sum() + table.sum() * scale

    x, table = jnp.ones((B, 2)), jnp.arange(B * 2.0).reshape(B, 2)
    mapped = tt.auto_vmap(f, B)(x, table=table, scale=2.0)
    np.testing.assert_allclose(mapped, 2.0 + table.sum(axis=1) * 2.0)
    whole = tt.auto_vmap(f, B, exclude="kwargs.table")(x, table=table, scale=2.0)
    np.testing.assert_allclose(whole, np.full(B, 2.0 + float(table.sum()) * 2.0))


def test_auto_vmap_says_when_nothing_has_the_batch_size():
    with pytest.raises(
        TreetoolError, match=r"auto_vmap\(solve\): no argument has size 7 on axis 0"
    ):
        tt.auto_vmap(solve, 7)(problem())


# --- autojit ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float
    act: str


@pytest.fixture(scope="module")
def mlp():
    return eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))


def _forward(traces: list):
    def forward(model, x, flag, cfg):
        traces.append((flag, cfg))  # runs once per trace (compile)
        y = jax.vmap(model)(x) * cfg.scale
        y = jax.nn.relu(y) if cfg.act == "relu" else jnp.tanh(y)
        return y.sum() if flag == "sum" else y.mean()

    return forward


def test_autojit_compiles_once_per_static_value_and_agrees_with_filter_jit(mlp):
    traces: list = []
    eqx_traces: list = []
    ours, theirs = tt.autojit(_forward(traces)), eqx.filter_jit(_forward(eqx_traces))
    x = jnp.linspace(-1, 1, 15, dtype=jnp.float32).reshape(5, 3)
    calls = [
        ("sum", Config(2.0, "relu")),
        ("sum", Config(2.0, "relu")),
        ("mean", Config(2.0, "relu")),
        ("mean", Config(2.0, "tanh")),
        ("sum", Config(2.0, "relu")),
        ("mean", Config(2.0, "tanh")),
    ]
    for flag, cfg in calls:
        np.testing.assert_array_equal(ours(mlp, x, flag, cfg), theirs(mlp, x, flag, cfg))
    assert traces == [
        ("sum", Config(2.0, "relu")),
        ("mean", Config(2.0, "relu")),
        ("mean", Config(2.0, "tanh")),
    ]
    assert traces == eqx_traces
    info = ours.cache_info()
    assert (info.hits, info.misses, info.entries) == (3, 3, 3)
    assert info.reasons == [
        "first call",
        "static value at args[2] changed: 'sum' -> 'mean'",
        "static value at args[3] changed: Config(scale=2.0, act='relu') -> Config(scale=2.0, act='tanh')",
    ]


def test_autojit_reports_shape_and_structure_changes(mlp):
    f = tt.autojit(lambda m, x: jax.vmap(m)(x))
    f(mlp, jnp.ones((5, 3)))
    f(mlp, jnp.ones((7, 3)))
    f(mlp, jnp.ones((7, 3), jnp.float16))
    bigger = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.key(1))
    f(bigger, jnp.ones((7, 3)))
    assert f.cache_info().reasons == [
        "first call",
        "shape of args[1] changed: f32[5,3] -> f32[7,3]",
        "dtype of args[1] changed: f32[7,3] -> f16[7,3]",
        "static field depth of args[0] changed: 1 -> 2",
    ]
    assert f.cache_info().misses == 4 and f.cache_info().hits == 0


def test_autojit_static_and_traced_roles_and_outputs():
    @tt.autojit
    def f(x, label):
        return {"value": x * 2, "label": label, "n": 3}

    out = f(np.arange(3.0), "a")  # numpy is traced by default
    assert out["label"] == "a" and out["n"] == 3
    np.testing.assert_array_equal(out["value"], [0.0, 2.0, 4.0])
    assert isinstance(out["value"], jax.Array)
    f(np.arange(3.0), np.ones(2))  # the label position is now traced
    assert f.cache_info().reasons[-1] == "args[1] is now traced"

    g = tt.autojit(lambda x: x, trace_numpy=False)
    assert isinstance(g(jnp.ones(2)), jax.Array)


def test_autojit_unhashable_static_leaf_names_path_and_type():
    f = tt.autojit(lambda x, opts: x)

    class Opts:
        __hash__ = None

    with pytest.raises(
        TreetoolError, match=r"static leaf at kwargs\['opts'\]\['extra'\] is an unhashable Opts"
    ):
        f(jnp.ones(2), opts={"extra": Opts()})


def test_autojit_on_methods_and_with_jit_arguments():
    class Scaler(eqx.Module):
        w: jax.Array
        mode: str = eqx.field(static=True)

        @tt.autojit
        def __call__(self, x):
            return self.w * x if self.mode == "mul" else self.w + x

    s = Scaler(jnp.full(2, 3.0), "mul")
    np.testing.assert_array_equal(s(jnp.ones(2)), [3.0, 3.0])
    np.testing.assert_array_equal(Scaler(jnp.full(2, 3.0), "add")(jnp.ones(2)), [4.0, 4.0])
    info = Scaler.__call__.cache_info()
    assert info.reasons == ["first call", "static field mode of args[0] changed: 'mul' -> 'add'"]
    assert info.misses == 2

    @tt.autojit(donate_argnums=())
    def h(x):
        return x + 1

    np.testing.assert_array_equal(h(jnp.zeros(2)), [1.0, 1.0])
    with pytest.raises(
        TypeError, match="autojit decides what is static; do not pass static_argnums"
    ):
        tt.autojit(lambda x: x, static_argnums=0)


def test_autojit_static_outputs_follow_the_shape_of_each_call():
    ours = tt.autojit(lambda x, tag: (x * 2, x.shape, tag))
    theirs = eqx.filter_jit(lambda x, tag: (x * 2, x.shape, tag))
    for n in (2, 3, 2):
        a, b = ours(jnp.ones(n), "t"), theirs(jnp.ones(n), "t")
        assert a[1:] == b[1:] == ((n,), "t")
        np.testing.assert_array_equal(a[0], b[0])
    assert ours.cache_info()[:3] == (1, 2, 1)


def test_autojit_a_failing_trace_leaves_no_entry():
    calls: list = []

    @tt.autojit
    def f(x, n):
        calls.append(n)
        if len(calls) == 1:
            raise ValueError("first trace fails")
        return x * n

    with pytest.raises(ValueError, match="first trace fails"):
        f(jnp.ones(2), 2)
    assert f.cache_info() == (0, 0, 0, [])
    np.testing.assert_array_equal(f(jnp.ones(2), 2), [2.0, 2.0])
    assert f.cache_info() == (0, 1, 1, ["first call"])


def test_autojit_names_every_changed_static_and_structure_changes():
    f = tt.autojit(lambda x, a, b, *, flag="x": x)
    f(jnp.ones(1), 1, 2)
    f(jnp.ones(1), 3, 4)
    f(jnp.ones(1), 3, 4, flag="y")
    f(jnp.ones(1), 3, 4, flag="z")
    g = tt.autojit(lambda t: t["a"])
    g({"a": jnp.ones(1)})
    g({"a": jnp.ones(1), "b": jnp.ones(1)})
    g({"a": jnp.ones(1), "b": (jnp.ones(1),)})
    assert f.cache_info().reasons == [
        "first call",
        "static value at args[1] changed: 1 -> 3 (and 1 more: args[2])",
        "argument structure changed (3 leaves -> 4 leaves): kwargs['flag'] added",
        "static value at kwargs['flag'] changed: 'y' -> 'z'",
    ]
    assert g.cache_info().reasons == [
        "first call",
        "argument structure changed (1 leaf -> 2 leaves): args[0]['b'] added",
        "argument structure changed: args[0]['b'] is now tuple[1]",
    ]


def test_autojit_donates_the_arrays_of_the_named_arguments():
    @tt.autojit(donate_argnums=1)
    def f(a, b, c):
        return b["u"] * 2 + c

    a, b, c = jnp.ones(2), {"u": jnp.ones(2), "tag": "x"}, jnp.ones(2)
    np.testing.assert_array_equal(f(a, b, c), [3.0, 3.0])
    assert (a.is_deleted(), b["u"].is_deleted(), c.is_deleted()) == (False, True, False)

    @tt.autojit(donate_argnames="c")
    def g(a, *, c):
        return a + c

    a, c = jnp.ones(2), jnp.ones(2)
    g(a, c=c)
    assert (a.is_deleted(), c.is_deleted()) == (False, True)


def test_autojit_jit_arguments_that_do_not_fit_flattened_arguments_are_refused():
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    f = tt.autojit(lambda x, n: x * n, in_shardings=one, out_shardings=one)
    np.testing.assert_array_equal(f(jnp.ones(2), 3), [3.0, 3.0])
    with pytest.raises(
        TypeError,
        match=re.escape(
            "autojit: in_shardings must be one jax.sharding.Sharding for every array "
            "(the arguments are flattened), got tuple"
        ),
    ):
        tt.autojit(lambda x: x, in_shardings=(one,))
    g = tt.autojit(lambda x: x, trace_numpy=False)
    with pytest.raises(
        TreetoolError,
        match=re.escape(
            "autojit(<lambda>): the static leaf at args[0] is an unhashable ndarray; "
            "pass it as a jax array, or use trace_numpy=True"
        ),
    ):
        g(np.ones(2))


def test_autojit_on_a_plain_class_method_and_with_empty_parentheses():
    class Counter:
        def __init__(self, k):
            self.k = k

        @tt.autojit()
        def add(self, x):
            return x + self.k

    one, two = Counter(1), Counter(2)
    np.testing.assert_array_equal(one.add(jnp.zeros(2)), [1.0, 1.0])
    np.testing.assert_array_equal(two.add(jnp.zeros(2)), [2.0, 2.0])
    np.testing.assert_array_equal(one.add(jnp.zeros(2)), [1.0, 1.0])
    info = one.add.cache_info()  # a plain object is a static leaf: one compile per instance
    assert (info.hits, info.misses) == (1, 2)
    assert info.reasons[1].startswith("static value at args[0] changed: <")
    assert Counter.add is Counter.__dict__["add"]


# --- split_keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [jax.random.key, jax.random.PRNGKey], ids=["typed", "legacy"])
def test_split_keys_gives_distinct_keys_with_the_same_structure(make, mlp):
    tree = {"model": mlp, "opt": (np.zeros(3), 0.1), "name": "x"}
    keys = tt.split_keys(make(0), tree)
    flat = [k for k in jax.tree_util.tree_leaves(keys)]
    n_arrays = sum(1 for x in jax.tree_util.tree_leaves(tree) if tt.leaf_info(x).params)
    assert len(flat) == n_arrays == 5
    data = [
        tuple(np.asarray(jax.random.key_data(k) if make is jax.random.key else k).ravel())
        for k in flat
    ]
    assert len(set(data)) == len(data)  # all distinct
    if make is jax.random.key:
        assert all(tt.is_key(k) for k in flat)
        assert all(
            jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) and k.shape == () for k in flat
        )
    else:
        assert all(k.dtype == jnp.uint32 and k.shape == (2,) for k in flat)
    # the same structure: None where the tree has non-array leaves
    assert jax.tree_util.tree_structure(keys, is_leaf=lambda x: x is None) == (
        jax.tree_util.tree_structure(
            jax.tree_util.tree_map(lambda _: 0, tree), is_leaf=lambda x: x is None
        )
    )
    assert keys["name"] is None and keys["opt"][1] is None and keys["model"].activation is None
    # independent of the input: a different seed gives different keys
    other = tt.split_keys(make(1), tree)
    a = np.asarray(
        jax.random.key_data(keys["opt"][0]) if make is jax.random.key else keys["opt"][0]
    )
    b = np.asarray(
        jax.random.key_data(other["opt"][0]) if make is jax.random.key else other["opt"][0]
    )
    assert not np.array_equal(a, b)


def test_split_keys_rejects_what_is_not_one_key():
    with pytest.raises(TypeError, match=r"key must be one PRNG key .* got f32\[3\]"):
        tt.split_keys(jnp.zeros(3), {"a": np.zeros(2)})
    with pytest.raises(TypeError, match="got int"):
        tt.split_keys(0, {"a": np.zeros(2)})


@settings(max_examples=25)
@given(trees, st.sampled_from(["typed", "legacy"]))
def test_split_keys_property_one_distinct_key_per_array_leaf(tree, kind):
    key = jax.random.key(3) if kind == "typed" else jax.random.PRNGKey(3)
    keys = tt.split_keys(key, tree)
    none_leaf = {"is_leaf": lambda x: x is None}
    flat_tree = jax.tree_util.tree_leaves(tree, **none_leaf)
    flat_keys = jax.tree_util.tree_leaves(keys, **none_leaf)
    assert jax.tree_util.tree_structure(keys, **none_leaf) == jax.tree_util.tree_structure(
        jax.tree_util.tree_map(lambda _: 0, tree), **none_leaf
    )
    assert len(flat_keys) == len(flat_tree)
    raw = []
    for leaf, k in zip(flat_tree, flat_keys, strict=True):
        if not isinstance(leaf, np.ndarray):
            assert k is None
            continue
        data = np.asarray(jax.random.key_data(k) if kind == "typed" else k)
        assert data.shape == (2,) and data.dtype == np.uint32
        raw.append(tuple(data))
    assert len(set(raw)) == len(raw)

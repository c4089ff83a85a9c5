"""tt.diff on real surgery (equinox, flax, optax), values, shardings, and the rendering."""

from __future__ import annotations

import copy
import io
import json
import os
import tempfile
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from rich.console import Console

import treetool as tt
import treetool._diff._compare as compare_mod
from treetool._leaves._arrays import LazyArray


def _kinds(d: tt.TreeDiff) -> list[tuple[str, str]]:
    return [(c.path, c.kind) for c in d.changes]


def _text(renderable, width: int = 100) -> str:
    c = Console(file=io.StringIO(), width=width, color_system=None)
    c.print(renderable)
    return c.file.getvalue()


@pytest.fixture(scope="module")
def mlp():
    return eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0))


# --- acceptance: real surgery on an equinox MLP ---------------------------------------------


def test_identical_and_copied_trees_have_no_changes(mlp):
    assert not tt.diff(mlp, mlp)
    twin = jax.tree_util.tree_map(lambda x: x.copy() if eqx.is_array(x) else x, mlp)
    d = tt.diff(mlp, twin)
    assert not d and d.changes == [] and repr(d) == "TreeDiff(equal)"


def test_a_wider_layer_is_that_layer_its_static_fields_and_its_leaf_shapes(mlp):
    wide = eqx.tree_at(lambda m: m.layers[1], mlp, eqx.nn.Linear(8, 16, key=jax.random.key(1)))
    d = tt.diff(mlp, wide)
    assert _kinds(d) == [
        (".layers[1]", "static"),
        (".layers[1].weight", "shape"),
        (".layers[1].bias", "shape"),
    ]
    static, weight, bias = d.changes
    assert (static.before, static.after) == ({"out_features": 8}, {"out_features": 16})
    assert static.detail["fields"] == ["out_features"]
    assert (weight.before, weight.after) == ((8, 8), (16, 8))
    assert (bias.before, bias.after) == ((8,), (16,))
    assert weight.detail["labels"] == ["f32[8,8]", "f32[16,8]"]


def test_a_leaf_cast_to_bfloat16_is_one_dtype_change(mlp):
    cast = eqx.tree_at(lambda m: m.layers[0].weight, mlp, mlp.layers[0].weight.astype(jnp.bfloat16))
    d = tt.diff(mlp, cast)
    assert _kinds(d) == [(".layers[0].weight", "dtype")]
    assert (d.changes[0].before, d.changes[0].after) == ("float32", "bfloat16")


def test_one_element_perturbed_by_1e_3_is_a_value_change_with_its_index(mlp):
    bumped = eqx.tree_at(lambda m: m.layers[1].weight, mlp, mlp.layers[1].weight.at[3, 5].add(1e-3))
    d = tt.diff(mlp, bumped)
    assert _kinds(d) == [(".layers[1].weight", "value")]
    c = d.changes[0]
    assert c.detail["count"] == 1
    assert c.detail["size"] == 64
    assert c.detail["first_index"] == [3, 5]
    assert c.detail["max_abs"] == pytest.approx(1e-3, rel=1e-3)
    assert c.before == pytest.approx(float(mlp.layers[1].weight[3, 5]))
    assert c.after == pytest.approx(float(mlp.layers[1].weight[3, 5]) + 1e-3, abs=1e-6)
    assert not tt.diff(mlp, bumped, atol=2e-3)
    assert tt.diff(mlp, bumped, atol=1e-4)
    assert not tt.diff(mlp, bumped, values=False)


def test_an_appended_layer_is_added_at_exactly_its_path(mlp):
    extra = eqx.nn.Linear(3, 3, key=jax.random.key(2))
    longer = eqx.tree_at(lambda m: m.layers, mlp, (*mlp.layers, extra))
    d = tt.diff(mlp, longer)
    assert _kinds(d) == [(".layers[3]", "added")]
    c = d.changes[0]
    assert (c.before, c.after) == (None, "Linear")
    assert c.detail == {
        "node_kind": "custom",
        "leaves": 2,
        "params": 12,
        "bytes": 48,
        "lengths": [3, 4],
        "containers": ["tuple", "tuple"],
    }
    assert [(ch.path, ch.kind) for ch in tt.diff(longer, mlp)] == [(".layers[3]", "removed")]


def test_a_layer_inserted_in_the_middle_is_one_added_not_every_later_layer(mlp):
    new = eqx.nn.Linear(8, 8, key=jax.random.key(5))
    longer = eqx.tree_at(lambda m: m.layers, mlp, (mlp.layers[0], new, *mlp.layers[1:]))
    assert _kinds(tt.diff(mlp, longer)) == [(".layers[1]", "added")]
    assert _kinds(tt.diff(longer, mlp)) == [(".layers[1]", "removed")]


def test_an_element_edited_after_an_insertion_reports_its_old_path():
    a = [np.zeros(2), np.ones(3), np.full(4, 2.0)]
    b = [np.zeros(2), np.arange(5.0), np.ones(3), np.full(4, 3.0)]
    d = tt.diff(a, b)
    assert _kinds(d) == [("[1]", "added"), ("[3]", "value")]
    assert d.changes[1].detail["path_before"] == "[2]"


def test_a_changed_static_field_is_static_at_the_module(mlp):
    edited = copy.copy(mlp)
    object.__setattr__(edited, "width_size", 9)
    d = tt.diff(mlp, edited)
    assert _kinds(d) == [("", "static")]
    assert (d.changes[0].before, d.changes[0].after) == ({"width_size": 8}, {"width_size": 9})


def test_a_different_module_type_is_one_node_type_change(mlp):
    lin = eqx.nn.Linear(2, 3, key=jax.random.key(0))
    d = tt.diff({"m": mlp}, {"m": lin})
    assert _kinds(d) == [("['m']", "node_type")]
    assert (d.changes[0].before, d.changes[0].after) == ("MLP", "Linear")


# --- flax and optax -------------------------------------------------------------------------


def test_a_renamed_flax_params_key_is_removed_plus_added_and_moved():
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(nn.Dense(4)(x))

    params = Net().init(jax.random.key(0), jnp.ones((1, 3)))
    inner = dict(params["params"])
    renamed = {"params": {"encoder": inner["Dense_0"], "Dense_1": inner["Dense_1"]}}
    d = tt.diff(params, renamed)
    assert _kinds(d) == [
        ("['params']['Dense_0']", "removed"),
        ("['params']['encoder']", "added"),
    ]
    removed, added = d.changes
    assert removed.detail["moved_to"] == "['params']['encoder']"
    assert added.detail["moved_from"] == "['params']['Dense_0']"
    assert (removed.before, added.after) == ("dict[2]", "dict[2]")


def test_an_optax_state_for_more_params_adds_them_in_each_moment():
    params = {"w": jnp.ones(3)}
    s1 = optax.adam(1e-3).init(params)
    s2 = optax.adam(1e-3).init({**params, "b": jnp.zeros(2)})
    d = tt.diff(s1, s2)
    assert _kinds(d) == [("[0].mu['b']", "added"), ("[0].nu['b']", "added")]
    assert all(c.after == "f32[2]" for c in d.changes)


def test_an_optax_state_of_another_chain_names_the_node_types():
    params = {"w": jnp.ones(3)}
    s1 = optax.adam(1e-3).init(params)
    s2 = optax.chain(optax.clip(1.0), optax.adam(1e-3)).init(params)
    d = tt.diff(s1, s2)
    assert _kinds(d) == [("[0]", "node_type"), ("[1]", "node_type")]
    assert [(c.before, c.after) for c in d.changes] == [
        ("ScaleByAdamState", "EmptyState"),
        ("EmptyState", "tuple[2]"),
    ]


# --- values ---------------------------------------------------------------------------------


def test_nan_equals_nan_at_the_same_place_only():
    a = np.array([1.0, np.nan, 3.0])
    assert not tt.diff({"x": a}, {"x": a.copy()})
    d = tt.diff({"x": a}, {"x": np.array([np.nan, 2.0, 3.0])})
    c = d.changes[0]
    assert (c.kind, c.detail["count"], c.detail["first_index"]) == ("value", 2, [0])
    assert c.detail["max_abs"] is None  # no finite difference to measure


def test_tolerances_are_symmetric_and_scale_with_the_larger_magnitude():
    a, b = np.array([100.0, 1.0]), np.array([101.0, 1.0])
    assert tt.diff(a, b, rtol=0.001)
    assert not tt.diff(a, b, rtol=0.01)
    assert not tt.diff(b, a, rtol=0.01)
    assert not tt.diff(a, b, atol=1.0)
    with pytest.raises(ValueError, match="rtol and atol must be >= 0"):
        tt.diff(a, b, atol=-1.0)


def test_integer_bool_and_scalar_leaves():
    d = tt.diff(
        {"i": np.arange(4), "m": np.array([True, False]), "s": 3, "f": "relu"},
        {"i": np.array([0, 1, 7, 3]), "m": np.array([True, True]), "s": 4, "f": "gelu"},
    )
    assert _kinds(d) == [
        ("['f']", "value"),
        ("['i']", "value"),
        ("['m']", "value"),
        ("['s']", "value"),
    ]
    f, i, m, s = d.changes
    assert (f.before, f.after) == ("relu", "gelu")
    assert (s.before, s.after, s.detail) == (3, 4, {"count": 1, "size": 1, "first_index": []})
    assert (i.detail["first_index"], i.detail["max_abs"], i.before, i.after) == ([2], 5.0, 2, 7)
    assert (m.before, m.after) == (False, True)
    assert not tt.diff({"s": 3, "f": "relu"}, {"s": 4, "f": "gelu"}, values=False)


def test_a_python_scalar_against_an_array_is_a_node_type_change():
    d = tt.diff({"lr": 0.1}, {"lr": np.float32(0.1)})
    assert _kinds(d) == [("['lr']", "node_type")]
    assert (d.changes[0].before, d.changes[0].after) == ("float", "f32[]")


def test_numpy_and_jax_arrays_with_equal_contents_are_equal():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert not tt.diff({"w": x}, {"w": jnp.asarray(x)})


def test_typed_prng_keys_compare_by_their_key_data():
    k = jax.random.split(jax.random.key(0), 3)
    assert not tt.diff(k, jax.random.split(jax.random.key(0), 3))
    d = tt.diff(k, jax.random.split(jax.random.key(1), 3))
    assert d.changes[0].kind == "value"


def test_big_and_file_backed_leaves_are_compared_chunk_by_chunk(monkeypatch):
    monkeypatch.setattr(compare_mod, "_CHUNK_BYTES", 4096)  # 1024 float32 per chunk
    a = np.random.default_rng(0).random((600, 50)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "a.bin")
        with open(path, "wb") as f:
            f.write(b"HEAD" + a.tobytes())
        lazy = LazyArray(a.shape, "float32", path, offset=4)
        assert not tt.diff({"x": lazy}, {"x": a.copy()})
        b = a.copy()
        b[400, 7] = np.nan
        b[599, 49] += 2.0
        b[500, 0] -= 0.5
        c = tt.diff({"x": lazy}, {"x": b}).changes[0]
        assert (c.kind, c.detail["count"], c.detail["first_index"]) == ("value", 3, [400, 7])
        assert c.detail["max_abs"] == pytest.approx(2.0, rel=1e-6)
        # a non-contiguous view on one side is read through the same chunking
        c2 = tt.diff({"x": np.asfortranarray(b)[:, :]}, {"x": lazy}).changes[0]
        assert c2.detail["first_index"] == [400, 7]
        assert tt.diff({"x": lazy}, {"x": a[:, :10]}).changes[0].kind == "shape"


# --- shardings (8 CPU devices from conftest) ------------------------------------------------


def test_a_resharded_array_is_a_sharding_change():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    assert len(jax.devices()) == 8
    mesh = Mesh(np.array(jax.devices()), ("x",))
    x = jnp.arange(16.0)
    split = jax.device_put(x, NamedSharding(mesh, P("x")))
    replicated = jax.device_put(x, NamedSharding(mesh, P()))
    d = tt.diff({"w": replicated}, {"w": split})
    assert _kinds(d) == [("['w']", "sharding")]
    assert (d.changes[0].before, d.changes[0].after) == (
        "NamedSharding(x=8; P())",
        "NamedSharding(x=8; P('x'))",
    )
    moved = tt.diff({"w": x}, {"w": jax.device_put(x, jax.devices()[1])}).changes[0]
    assert (moved.kind, moved.before, moved.after) == ("sharding", "cpu:0", "cpu:1")
    assert not tt.diff({"w": split}, {"w": jax.device_put(x, NamedSharding(mesh, P("x")))})
    # a value change outranks the sharding, which is still mentioned
    v = tt.diff({"w": replicated}, {"w": split.at[3].set(7.0)}).changes[0]
    assert v.kind == "value" and v.detail["sharding"] == [
        "NamedSharding(x=8; P())",
        "NamedSharding(x=8; P('x'))",
    ]


# --- other structures -----------------------------------------------------------------------


def test_list_to_tuple_is_node_type_and_the_children_are_still_compared():
    d = tt.diff({"c": [np.zeros(2), 1]}, {"c": (np.zeros(3), 1)})
    assert _kinds(d) == [("['c']", "node_type"), ("['c'][0]", "shape")]
    assert d.changes[0].detail["before_desc"] == "a list of 2 children"


def test_none_and_empty_containers():
    d = tt.diff({"a": None, "b": [], "c": {}}, {"a": np.zeros(1), "b": [], "c": {"k": 1}})
    assert _kinds(d) == [("['a']", "node_type"), ("['c']['k']", "added")]


def test_a_tree_10000_levels_deep_is_walked_without_recursion():
    a, b = 1.0, 2.0
    for _ in range(10_000):
        a, b = [a], [b]
    d = tt.diff(a, b)
    assert _kinds(d) == [("[0]" * 10_000, "value")]


def test_is_leaf_compares_whole_modules_as_leaves(mlp):
    other = eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(9))
    d = tt.diff(mlp, other, is_leaf=lambda x: isinstance(x, eqx.nn.Linear))
    assert [c.path for c in d.changes] == [".layers[0]", ".layers[1]", ".layers[2]"]


def test_getitem_and_to_dict_is_json(mlp):
    wide = eqx.tree_at(lambda m: m.layers[1], mlp, eqx.nn.Linear(8, 16, key=jax.random.key(1)))
    d = tt.diff(mlp, wide)
    assert d["layers[1].bias"].kind == "shape"
    with pytest.raises(KeyError):
        d[".layers[0]"]
    data = json.loads(json.dumps(d.to_dict()))
    assert data["equal"] is False
    assert data["counts"] == {"added": 0, "removed": 0, "changed": 3}
    assert data["kinds"] == {"static": 1, "shape": 2}
    assert data["changes"][1] == {
        "path": ".layers[1].weight",
        "kind": "shape",
        "before": [8, 8],
        "after": [16, 8],
        "detail": {"labels": ["f32[8,8]", "f32[16,8]"]},
    }


# --- rendering ------------------------------------------------------------------------------


def test_rendering_groups_changes_under_their_parents(mlp):
    wide = eqx.tree_at(lambda m: m.layers[1], mlp, eqx.nn.Linear(8, 16, key=jax.random.key(1)))
    extra = eqx.nn.Linear(3, 3, key=jax.random.key(2))
    both = eqx.tree_at(lambda m: m.layers, wide, (*wide.layers, extra))
    d = tt.diff(mlp, both)
    assert _text(tt.render(d)) == textwrap.dedent(
        """\
        4 changes  +1 added  ~3 changed (1 static, 2 shape)
        MLP
        ├── .layers  tuple[4]
        │   ├── ~ [1]  static  out_features: 8 → 16
        │   │   ├── ~ .weight  shape  f32[8,8] → f32[16,8]
        │   │   └── ~ .bias  shape  f32[8] → f32[16]
        │   ├── + [3]  Linear · 2 leaves · 12 params
        │   └── · 2 unchanged
        └── · 2 unchanged
        """
    )
    assert str(d) == _text(d).rstrip("\n")


def test_rendering_of_values_removals_and_equal_trees():
    a = {"x": np.array([1.0, 2.0, 3.0]), "old": np.zeros(2), "deep": {"k": {"v": 1}}}
    b = {"x": np.array([1.0, 2.5, 3.0]), "deep": {"k": {"v": 2}}}
    assert _text(tt.diff(a, b)) == textwrap.dedent(
        """\
        3 changes  -1 removed  ~2 changed (2 value)
        dict[2]
        ├── ~ ['deep']['k']['v']  value  1 → 2
        ├── - ['old']  f64[2]
        └── ~ ['x']  value  1 of 3 elements differ · max abs 0.5 · max rel 0.2 · first at [1]: 2.0 → 2.5
        """
    )
    assert _text(tt.diff(a, a)) == "no differences\n"


def test_progress_reports_every_byte_of_one_side(monkeypatch):
    from treetool._diff._tree_diff import diff_with_progress

    monkeypatch.setattr(compare_mod, "_CHUNK_BYTES", 4096)
    a = {"big": np.zeros(10_000, np.float32), "small": np.ones(3), "n": 1}
    seen: list[int] = []
    d = diff_with_progress(a, copy.deepcopy(a), progress=seen.append)
    assert not d
    assert sum(seen) == 40_000 + 24
    assert len(seen) == 10 + 1  # ten chunks of the big leaf, one call for the small one


def test_rendering_a_removal_that_shifts_a_sequence_and_a_row_limit():
    from treetool._diff._rich import DiffView

    a = {"layers": [np.zeros(2), np.ones(3), np.full(4, 2.0)]}
    b = {"layers": [np.zeros(2), np.full(4, 3.0)]}
    assert _text(tt.diff(a, b), width=120) == textwrap.dedent(
        """\
        2 changes  -1 removed  ~1 changed (1 value)
        dict[1]
        └── ['layers']  list[2]
            ├── - [1]  f64[3]
            ├── ~ [1]  value  4 of 4 elements differ · max abs 1 · max rel 0.333 · first at [0]: 2.0 → 3.0 (was ['layers'][2])
            └── · 1 unchanged
        """
    )
    many = tt.diff({f"k{i}": i for i in range(30)}, {f"k{i}": -i for i in range(1, 31)})
    assert _text(DiffView(many, limit=2)) == textwrap.dedent(
        """\
        31 changes  +1 added  -1 removed  ~29 changed (29 value)
        dict[30]
        ├── - ['k0']  int
        ├── ~ ['k1']  value  1 → -1
        └── … 29 more changes
        """
    )


@pytest.mark.parametrize("n", [3, 300])
def test_changed_leaves_in_an_unchanged_structure_get_their_exact_paths(n):
    a = {"x": [np.zeros(1) for _ in range(n)], "y": (None, np.zeros(2)), "z": {"k": 1}}
    b = {"x": [np.full(1, float(i)) for i in range(n)], "y": (None, np.ones(2)), "z": {"k": 1}}
    expected = [f"['x'][{i}]" for i in range(1, n)] + ["['y'][1]"]
    assert [c.path for c in tt.diff(a, b)] == expected
    assert [str(tt.Path(c.keys)) for c in tt.diff(a, b)] == expected

"""`Opaque`: a pytree node for treetool's model and for jax, registered whenever jax arrives."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treetool as tt
from treetool import LoadError, SaveError, TreetoolError
from treetool.io import GlobalRef, Opaque


def test_generic_layout_uses_state_names_then_args_and_items():
    o = Opaque("mylib.Thing", args=(1, 2), state={"w": np.ones(2), "b": None})
    o.dictitems["extra"] = 3.0
    assert [str(p) for p, _ in tt.leaves_with_path(o)] == [".w", "[0]", "[1]", "['extra']"]
    node = tt.view({"t": o}).children[0]
    assert node.type_name == "Thing" and node.node_kind == "custom"


def test_jax_agrees_with_treetool_model():
    import jax

    o = Opaque(
        "mylib.Block", state={"w": np.ones((2, 3)), "inner": Opaque("mylib.Leafy", (np.zeros(1),))}
    )
    jax_paths = [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path({"b": o})[0]
    ]
    assert (
        jax_paths
        == [str(p) for p, _ in tt.leaves_with_path({"b": o})]
        == ["['b'].w", "['b'].inner[0]"]
    )
    leaves, treedef = jax.tree_util.tree_flatten(o)
    back = jax.tree_util.tree_unflatten(treedef, [x + 1 for x in leaves])
    assert isinstance(back, Opaque) and back.class_path == "mylib.Block"
    assert np.array_equal(back.w, np.full((2, 3), 2.0)) and np.array_equal(o.w, np.ones((2, 3)))


def test_known_dataclass_static_fields_are_not_children():
    # equinox marks static fields; they stay in the aux data, as in jax. The layout is lent
    # by the class only because the program imported equinox: a file never imports it
    import equinox  # noqa: F401

    o = Opaque(
        "equinox.nn._linear.Linear",
        state={
            "weight": np.ones((2, 2)),
            "bias": None,
            "in_features": 2,
            "out_features": 2,
            "use_bias": False,
        },
    )
    assert [str(p) for p, _ in tt.leaves_with_path(o)] == [".weight"]


def test_global_ref_is_a_leaf():
    g = GlobalRef("os", "system")
    assert tt.leaves_with_path({"f": g}) == [(tt.Path.parse("['f']"), g)]
    assert g.class_name == "system" and g.class_path == "os.system"


@pytest.mark.slow
def test_registered_when_jax_is_imported_later(tmp_path):
    import pickle

    import equinox as eqx
    import jax

    f = tmp_path / "m.pkl"
    f.write_bytes(pickle.dumps(eqx.nn.Linear(2, 3, key=jax.random.key(0))))
    code = (
        "import sys, treetool as tt\n"
        f"m = tt.load({str(f)!r})\n"
        "assert 'jax' not in sys.modules and 'equinox' not in sys.modules\n"
        "import jax, equinox\n"
        "print([jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(m)[0]])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "['.weight', '.bias']"


def test_save_refuses_opaque_in_a_pickle_and_records_it_elsewhere(tmp_path):
    tree = {"layer": Opaque("mylib.Layer", state={"w": np.ones(2)})}
    with pytest.raises(
        SaveError, match=r"cannot save \['layer'\]: it is an opaque mylib.Layer object"
    ):
        tt.save(tree, tmp_path / "x.pkl")
    for name in ("x.safetensors", "x.npz"):  # the structure record names the class, inertly
        tt.save(tree, tmp_path / name)
        back = tt.load(tmp_path / name)["layer"]
        assert isinstance(back, Opaque) and back.class_path == "mylib.Layer"
        assert np.asarray(back.w).tolist() == [1.0, 1.0]


def test_save_unknown_extension(tmp_path):
    with pytest.raises(SaveError, match=r"cannot tell the format from the extension '\.bin'"):
        tt.save({"w": np.ones(1)}, tmp_path / "x.bin")


def test_save_failures_are_save_errors_not_load_errors(tmp_path):
    """`SaveError` is a sibling of `LoadError`: `except LoadError` around a save catches none."""
    assert issubclass(SaveError, TreetoolError) and not issubclass(SaveError, LoadError)
    assert not issubclass(LoadError, SaveError)
    cases = [
        ({"w": np.ones(1)}, "x.h5", "h5", r"x\.h5: cannot save as 'h5'; use 'safetensors'"),
        ({"o": object()}, "x.npz", None, r"x\.npz: \['o'\] is a object; tt.save writes arrays"),
        (
            {"t": np.array(["2024-01-01"], "datetime64[D]")},
            "x.safetensors",
            None,
            r"x\.safetensors: safetensors cannot store dtype datetime64\[D\] \(at t\)",
        ),
    ]
    for tree, name, fmt, message in cases:
        with pytest.raises(SaveError, match=message) as e:
            tt.save(tree, tmp_path / name, format=fmt)
        assert not isinstance(e.value, LoadError)
        assert "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # refused before anything was written


def test_save_pickle_reads_lazy_leaves(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(5))
    tree = {"a": tt.load(tmp_path / "a.npy"), "n": [1, None]}
    tt.save(tree, tmp_path / "out.pkl")
    back = tt.load(tmp_path / "out.pkl")
    assert (
        type(back["a"]) is np.ndarray
        and back["a"].tolist() == [0, 1, 2, 3, 4]
        and back["n"] == [1, None]
    )


def _opaques(kids):
    names = st.text("abcxyz_", min_size=1, max_size=4)

    def build(state, args, items, dictitems):
        o = Opaque("mylib.Node", args=tuple(args), state=state or None)
        o.listitems.extend(items)
        o.dictitems.update(dictitems)
        return o

    return st.builds(
        build,
        st.dictionaries(names, kids, max_size=3),
        st.lists(kids, max_size=2),
        st.lists(kids, max_size=2),
        st.dictionaries(st.integers(0, 5), kids, max_size=2),
    )


trees = st.recursive(
    st.none() | st.integers() | st.builds(np.ones, st.integers(0, 3)),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.text("ab", max_size=2), kids, max_size=3)
        | _opaques(kids)
    ),
    max_leaves=12,
)


@settings(max_examples=40)
@given(tree=trees)
def test_opaque_paths_agree_with_jax(tree):
    import jax

    want = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert [str(p) for p, _ in tt.leaves_with_path(tree)] == want
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    again = jax.tree_util.tree_unflatten(treedef, leaves)
    assert jax.tree_util.tree_structure(again) == treedef

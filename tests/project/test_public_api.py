"""The public API: namespaces with their own `__all__`, public `__module__`s, jax/equinox names."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pickle
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool as tt

NAMESPACES = ("treetool", "treetool.io", "treetool.sharding", "treetool.transforms")
#: tt.render and tt.show become plain functions of the `_display` package on another branch
#: (today `treetool.render` and `treetool.show` are modules of those names)


def _home(name: str) -> str:
    """The namespace a top-level name belongs to: the first that lists it, else treetool."""
    for ns in NAMESPACES[1:]:
        if name in importlib.import_module(ns).__all__:
            return ns
    return "treetool"


def _public_objects():
    for ns in NAMESPACES:
        module = importlib.import_module(ns)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield ns, name, obj


PUBLIC = list(_public_objects())


def test_every_namespace_has_a_sorted_all_and_an_example():
    for ns in NAMESPACES:
        module = importlib.import_module(ns)
        assert module.__all__ and len(set(module.__all__)) == len(module.__all__), ns
        assert ">>> " in (module.__doc__ or ""), ns
    assert tt.io.__name__ == "treetool.io"
    assert set(importlib.import_module("treetool.sharding").__all__) == {
        "placement",
        "Placement",
        "LeafPlacement",
        "DeviceUsage",
    }
    assert set(importlib.import_module("treetool.transforms").__all__) == {
        "batch_axes",
        "auto_vmap",
        "autojit",
        "split_keys",
    }


@pytest.mark.parametrize(("ns", "name", "obj"), PUBLIC, ids=[f"{n}.{m}" for n, m, _ in PUBLIC])
def test_module_is_the_public_path(ns, name, obj):
    want = _home(name) if ns == "treetool" else ns
    assert obj.__module__ == want, f"{ns}.{name}: __module__ {obj.__module__!r}"
    # and the object is found there: what pickle and the docs do with `__module__`
    assert getattr(importlib.import_module(obj.__module__), obj.__qualname__) is obj


def test_the_namespaces_names_are_also_at_the_top_level():
    for ns in NAMESPACES[1:]:
        module = importlib.import_module(ns)
        for name in module.__all__:
            if name in tt.__all__:
                assert getattr(tt, name) is getattr(module, name), name
    assert {"load", "save", "materialize", "Opaque", "placement", "autojit"} <= set(tt.__all__)


def test_reprs_tracebacks_and_pickles_name_the_public_path():
    assert repr(tt.Path) == "<class 'treetool.Path'>"
    assert repr(tt.Opaque) == "<class 'treetool.io.Opaque'>"
    assert tt.placement.__module__ == "treetool.sharding"
    assert tt.autojit.__module__ == "treetool.transforms"
    assert f"{type(tt.LoadError('x')).__module__}.LoadError" == "treetool.LoadError"
    # a pickle names treetool.Path, and reads back as an equal Path
    path = tt.Path.parse("['a'][0]")
    data = pickle.dumps(path)
    assert data.startswith(b"\x80\x04\x95") and b"\x8c\x08treetool\x94\x8c\x04Path\x94\x93" in data
    assert pickle.loads(data) == path
    # functions pickle by reference to their public path
    assert pickle.loads(pickle.dumps(tt.leaves_with_path)) is tt.leaves_with_path
    assert pickle.loads(pickle.dumps(tt.placement)) is tt.placement


def test_examples_of_a_moved_class_still_run_where_they_are_written():
    # doctest collects by `__module__`: set_module puts the object in its module's __test__
    import treetool._paths._path as home

    tests = doctest.DocTestFinder().find(home)
    names = {t.name for t in tests if t.examples}
    assert "treetool._paths._path.__test__.Path" in names
    # every public object with examples: found by doctest in the module that defines it
    for _, name, obj in PUBLIC:
        if ">>> " not in (obj.__doc__ or ""):
            continue
        homes = [
            m
            for m in list(sys.modules.values())
            if m is not None
            and m.__name__.startswith("treetool.")
            and obj in vars(m).get("__test__", {}).values()
        ]
        if not homes:  # defined in its public module itself (`treetool.io.load`)
            homes = [importlib.import_module(obj.__module__)]
            assert vars(homes[0])[name] is obj, name
            found = {t.name for t in doctest.DocTestFinder().find(homes[0]) if t.examples}
            assert f"{obj.__module__}.{name}" in found, name
            continue
        assert len(homes) == 1, name
        found = {t.name for t in doctest.DocTestFinder().find(homes[0]) if t.examples}
        assert f"{homes[0].__name__}.__test__.{obj.__qualname__}" in found, name
    # and the public module collects none of its lazy names (it never binds them); only its
    # own docstring and the errors it imports eagerly
    collected = {t.name for t in doctest.DocTestFinder().find(tt) if t.examples}
    assert "treetool" in collected
    assert all(n == "treetool" or issubclass(getattr(tt, n[9:]), Exception) for n in collected)


def test_leaves_with_path_is_jax_s_name_and_the_old_name_warns():
    tree = {"b": (1, 2), "a": None, "c": jnp.zeros(2)}
    new = tt.leaves_with_path(tree)
    ref = jax.tree_util.tree_leaves_with_path(tree)
    assert [str(p) for p, _ in new] == [jax.tree_util.keystr(p) for p, _ in ref]
    with pytest.warns(DeprecationWarning, match="use treetool.leaves_with_path") as caught:
        old = tt.leaves_with_paths(tree)
    assert [str(w.message) for w in caught] == [
        "treetool.leaves_with_paths is deprecated: use treetool.leaves_with_path"
    ]
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert [(p, x) for p, x in old][:2] == new[:2] and old[2][1] is new[2][1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tt.leaves_with_path(tree)  # the new name does not warn


def test_partition_takes_equinox_s_arguments_in_equinox_s_order():
    mlp = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0))
    ours = tt.partition(mlp, eqx.is_array, 0.0)  # replace, positionally, as eqx.partition
    theirs = eqx.partition(mlp, eqx.is_array, 0.0)
    for a, b in zip(ours, theirs):
        la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
        assert len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))
    assert jax.tree_util.tree_structure(ours[0]) == jax.tree_util.tree_structure(theirs[0])
    assert list(inspect.signature(tt.partition).parameters) == ["tree", "sel", "replace", "is_leaf"]
    # the keyword calls of the old order still work
    tree = {"a": {"x": 1.0}, "b": 2.0}
    sel, rest = tt.partition(tree, "a", is_leaf=None, replace=-1.0)
    assert sel == {"a": {"x": 1.0}, "b": -1.0} and rest == {"a": {"x": -1.0}, "b": 2.0}
    assert tree == {"a": {"x": 1.0}, "b": 2.0}  # not changed

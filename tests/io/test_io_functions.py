"""Functions in safely read pickles: one `OpaqueFunction` leaf each, wherever they sit."""

from __future__ import annotations

import functools
import json
import os
import pickle
import re

import cloudpickle
import jax
import numpy as np
import pytest

import treetool as tt
from treetool import OpaqueFunction
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle._functions import needs_collapse


@jax.custom_vjp
def clip_grad(x):
    return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (g,))


def load(tmp_path, obj, name="f.pkl", dumps=cloudpickle.dumps):
    p = tmp_path / name
    p.write_bytes(dumps(obj))
    return tt.load(str(p))


def test_functions_anywhere_become_one_leaf_each(tmp_path):
    def local(x):
        return x * 3

    shared = lambda x: x + 1  # noqa: E731
    tree = {
        "in_tuple": (shared, np.ones(2, np.float32)),
        "in_list": [shared, local],
        "partial": functools.partial(local, 2),
        "vjp": clip_grad,
        "code": local.__code__,
        "w": np.zeros(3, np.float32),
    }
    t = load(tmp_path, tree)
    a, b = t["in_tuple"][0], t["in_list"][0]
    assert type(a) is OpaqueFunction and a is b  # a shared function stays one object
    assert (
        a.label == f"test_functions_anywhere_become_one_leaf_each.<locals>.<lambda> in {__name__}"
    )
    assert type(t["in_tuple"]) is tuple and t["in_tuple"][1].shape == (2,)
    assert (t["partial"].kind, t["partial"].label) == (
        "partial",
        f"functools.partial(test_functions_anywhere_become_one_leaf_each.<locals>.local in "
        f"{__name__})",
    )
    assert (t["vjp"].kind, t["vjp"].label) == ("custom_vjp", f"{__name__}.clip_grad")
    assert (t["code"].kind, t["code"].module) == ("code", None)
    assert t["code"].qualname.endswith("<locals>.local")
    paths = [str(p) for p, _ in tt.leaves_with_path(t)]
    assert paths == [str(p) for p, _ in tt.leaves_with_path(tree)]
    assert paths == [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(t)]
    # compared with the live tree: the same functions (by name and code), the same arrays
    assert not tt.diff(t, tree).changes


def test_a_function_at_the_root_and_code_identity(tmp_path):
    f = load(tmp_path, lambda x: x - 1)
    assert type(f) is OpaqueFunction and f.kind == "function" and f.code
    other = lambda x: x - 2  # noqa: E731
    (c,) = tt.diff({"f": f}, {"f": other}).changes
    assert (c.kind, c.detail["code_changed"]) == ("value", True)
    assert not tt.diff({"f": f}, {"f": f}, values=True).changes
    # only names are compared when values are not
    assert not tt.diff({"f": f}, {"f": other}, values=False).changes


def test_by_reference_globals_compare_by_qualified_name(tmp_path):
    t = load(tmp_path, {"join": os.path.join}, dumps=pickle.dumps)
    assert type(t["join"]) is GlobalRef
    assert not tt.diff(t, {"join": os.path.join}).changes
    (c,) = tt.diff(t, {"join": os.path.split}).changes
    assert (c.kind, c.before, c.after) == ("value", "posixpath.join", "posixpath.split")


def test_classes_are_not_functions_and_forged_makers_stay_opaque(tmp_path):
    # a `_make_function` call with no code object in it: recorded, never collapsed or run
    forged = (
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00"
        b"\x8c\x17cloudpickle.cloudpickle\x8c\x0e_make_function\x93K\x01K\x02\x86R."
    )
    p = tmp_path / "forged.pkl"
    p.write_bytes(forged)
    t = tt.load(str(p))
    assert type(t) is Opaque and t.args == (1, 2)
    assert needs_collapse(["cloudpickle.cloudpickle._make_function"])
    assert not needs_collapse(["equinox.nn._linear.Linear", "collections.Counter"])


def test_saving_loaded_keys_and_functions(tmp_path):
    key = jax.random.split(jax.random.key(3, impl="rbg"), 4)
    t = load(tmp_path, {"k": key, "f": lambda x: x}, dumps=cloudpickle.dumps)
    with pytest.raises(
        tt.SaveError, match=re.escape("['k'] is a typed PRNG key array (key<rbg>[4])")
    ):
        tt.save({"k": t["k"]}, str(tmp_path / "k.npz"))
    with pytest.raises(
        tt.SaveError, match=re.escape("cannot save ['f']: it is the function test_saving")
    ):
        tt.save(t, str(tmp_path / "all.pkl"))
    tt.save({"k": t["k"]}, str(tmp_path / "k.pkl"))  # as the live jax key
    again = tt.load(str(tmp_path / "k.pkl"))["k"]
    assert str(again.dtype) == "key<rbg>" and again.shape == (4,)
    assert np.array_equal(again.key_data(), jax.random.key_data(key))


def test_get_on_a_loaded_key_shows_its_key_data(tmp_path):
    from treetool._tree._leaf_report import leaf_report

    key = jax.random.split(jax.random.key(4), 3)
    t = load(tmp_path, {"k": key}, dumps=pickle.dumps)
    d = leaf_report(tt.Path.parse("['k']"), t["k"]).to_dict()
    assert (d["dtype"], d["shape"], d["is_key"], d["stats"]) == ("key<fry>", [3], True, None)
    assert d["values"] == np.asarray(jax.random.key_data(key)).tolist()


def double(x):
    return x * 2


def test_jit_functions_are_named_by_the_function_they_wrap(tmp_path):
    import jax.numpy as jnp

    tree = {"jit": jax.jit(double), "tanh": jnp.tanh, "gelu": jax.nn.gelu}
    t = load(tmp_path, tree)
    assert (t["jit"].kind, t["jit"].label) == ("PjitFunction", f"{__name__}.double")
    assert t["tanh"].label == "jax._src.numpy.ufuncs.tanh"  # jnp.tanh's own module is renamed
    assert not tt.diff(t, tree).changes
    (c,) = tt.diff(t, dict(tree, jit=jax.jit(abs))).changes
    assert (c.path, c.before, c.after) == (
        "['jit']",
        f"{__name__}.double",
        "builtins.abs",
    )


def test_static_fields_show_no_memory_address():
    class Thing:  # an object whose repr carries its address
        pass

    class Block:
        def __init__(self, w, how):
            self.w, self.how = w, how

    tt.register_node(Block, data_fields=["w"], static_fields=["how"])
    d = tt.diff(Block(np.ones(2), Thing()), Block(np.ones(2), Thing()))
    (c,) = d.changes
    assert c.kind == "static" and "0x" not in str(c.before) + str(c.after)
    assert "0x" not in json.dumps(d.to_dict())
    same = tt.diff(Block(np.ones(2), lambda x: x), Block(np.ones(2), lambda x: x))
    assert not same.changes  # one lambda, two objects: the same function


def test_functions_inside_object_arrays(tmp_path):
    import treetool.io as tio

    arr = np.empty((2, 2), dtype=object, order="F")
    arr[:] = [[lambda x: x, 1], [os.path.join, "s"]]
    p = tmp_path / "obj.pkl"
    p.write_bytes(cloudpickle.dumps({"a": arr}))
    r = tio.read(str(p))
    a = r.tree["a"]
    assert type(a[0, 0]) is OpaqueFunction and a[0, 1] == 1 and a[1, 1] == "s"
    assert type(a[1, 0]) is GlobalRef and r.blocked == [
        "cloudpickle.cloudpickle._make_function",
        "posixpath.join",
    ]


def test_fortran_ordered_object_arrays_keep_their_layout(tmp_path):
    arr = np.empty((2, 3), dtype=object, order="F")
    arr[:] = [[1, "a", None], [2.5, "b", (1, 2)]]
    t = load(tmp_path, {"a": arr}, dumps=pickle.dumps)
    assert t["a"].shape == (2, 3) and t["a"].tolist() == arr.tolist()

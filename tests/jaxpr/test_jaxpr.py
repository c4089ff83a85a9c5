"""Jaxpr views: input/output paths, nested sub-jaxprs, uses, counts, cost, rendering, JSON."""

from __future__ import annotations

import io
import json
import re
import textwrap
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax
from jax.sharding import PartitionSpec
from rich.console import Console

import treetool as tt
from treetool._jaxpr._json import to_dict
from treetool._jaxpr._rich import JaxprTree
from treetool._jaxpr._view import Call, JaxprView


def _text(renderable: Any, width: int = 100) -> str:
    c = Console(width=width, color_system=None, file=io.StringIO())
    c.print(renderable)
    return "".join(line.rstrip() + "\n" for line in c.file.getvalue().splitlines())


class Out(NamedTuple):
    out: Any


# --- an equinox MLP loss ---------------------------------------------------------------------


def _loss(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


@pytest.fixture(scope="module")
def mlp():
    model = eqx.nn.MLP(2, 1, 4, 2, key=jax.random.key(0))
    x, y = jnp.ones((5, 2)), jnp.zeros((5, 1))
    return model, x, y


@pytest.fixture(scope="module")
def loss_view(mlp):
    return tt.jaxpr(_loss, *mlp)


@pytest.fixture(scope="module")
def grad_view(mlp):
    return tt.jaxpr(eqx.filter_value_and_grad(_loss), *mlp)


MLP_INPUTS = [
    (".args[0].layers[0].weight", "f32[4,2]"),
    (".args[0].layers[0].bias", "f32[4]"),
    (".args[0].layers[1].weight", "f32[4,4]"),
    (".args[0].layers[1].bias", "f32[4]"),
    (".args[0].layers[2].weight", "f32[1,4]"),
    (".args[0].layers[2].bias", "f32[1]"),
    (".args[1]", "f32[5,2]"),
    (".args[2]", "f32[5,1]"),
]


def test_mlp_inputs_map_to_argument_paths(mlp, loss_view):
    v = loss_view
    assert [(str(p), v.type_of(x)) for p, x in v.inputs] == MLP_INPUTS
    assert [str(p) for p, _ in v.outputs] == [".out"]
    assert v.type_of(v.outputs[0][1]) == "f32[]"
    # every input var is exactly the jaxpr's invar, in order, with the leaf's shape and dtype
    assert [x for _, x in v.inputs] == list(v.closed_jaxpr.jaxpr.invars)
    for path, var in v.inputs:
        leaf = tt.get(v.call, path)
        assert var.aval.shape == leaf.shape
        assert var.aval.dtype == leaf.dtype
    # the non-array fields of the MLP are static, not inputs
    assert [str(p) for p, _ in v.static] == [".args[0].activation", ".args[0].final_activation"]
    assert v.name == "_loss"


def test_mlp_paths_match_jax_flatten(mlp, loss_view):
    model, x, y = mlp
    jax_paths = [
        ".args" + jax.tree_util.keystr(p)
        for p, leaf in jax.tree_util.tree_leaves_with_path((model, x, y))
        if isinstance(leaf, jax.Array)
    ]
    assert [str(p) for p, _ in loss_view.inputs] == jax_paths


def test_grad_outputs_map_to_result_paths(mlp, grad_view):
    v = grad_view
    assert [(str(p), v.type_of(x)) for p, x in v.outputs] == [
        (".out[0]", "f32[]"),
        (".out[1].layers[0].weight", "f32[4,2]"),
        (".out[1].layers[0].bias", "f32[4]"),
        (".out[1].layers[1].weight", "f32[4,4]"),
        (".out[1].layers[1].bias", "f32[4]"),
        (".out[1].layers[2].weight", "f32[1,4]"),
        (".out[1].layers[2].bias", "f32[1]"),
    ]
    result = eqx.filter_value_and_grad(_loss)(*mlp)
    for path, var in v.outputs:
        assert tt.get(Out(result), path).shape == var.aval.shape


def test_every_printed_path_parses_back(grad_view):
    for path, var in (*grad_view.inputs, *grad_view.outputs):
        assert tt.Path.parse(str(path)) == path
        assert grad_view.var(str(path)) is var
    for path, _ in grad_view.static:
        assert tt.Path.parse(str(path)) == path
    with pytest.raises(
        tt.PathError,
        match=re.escape(
            "'.args[0].activation' is static (custom_jvp, not an array): it is baked into the "
            "trace and no variable holds it"
        ),
    ):
        grad_view.var(".args[0].activation")


def test_uses_of_each_weight_are_the_equations_that_read_it(loss_view):
    v = loss_view
    uses = {str(p): [(e.id, e.primitive) for e in v.uses(p)] for p, _ in v.inputs}
    assert uses == {
        ".args[0].layers[0].weight": [("0", "dot_general")],
        ".args[0].layers[0].bias": [("2", "broadcast_in_dim")],
        ".args[0].layers[1].weight": [("5", "dot_general")],
        ".args[0].layers[1].bias": [("7", "broadcast_in_dim")],
        ".args[0].layers[2].weight": [("10", "dot_general")],
        ".args[0].layers[2].bias": [("12", "broadcast_in_dim")],
        ".args[1]": [("0", "dot_general")],
        ".args[2]": [("14", "sub")],
    }
    # cross-check against every equation of every jaxpr in the tree
    for path, var in v.inputs:
        readers = [e for e in v.equations if any(x is var for x in e.eqn.invars)]
        assert v.uses(path) == readers


def test_uses_in_the_gradient(grad_view):
    v = grad_view
    got = {str(p): [(e.id, e.primitive) for e in v.uses(p)] for p, _ in v.inputs}
    # forward matmul, plus the backward matmul that carries the gradient to the layer below
    assert got[".args[0].layers[0].weight"] == [("0", "dot_general")]
    assert got[".args[0].layers[1].weight"] == [("8", "dot_general"), ("41", "dot_general")]
    assert got[".args[0].layers[2].weight"] == [("16", "dot_general"), ("33", "dot_general")]
    assert got[".args[1]"] == [("0", "dot_general"), ("49", "dot_general")]
    w = v.var(".args[0].layers[1].weight")
    assert v.uses(w) == v.uses("c") == v.uses(".args[0].layers[1].weight")
    assert v.producer(".out[1].layers[0].weight").primitive == "dot_general"
    assert v.producer(".args[1]") is None


def test_primitive_counts_of_the_mlp_loss(loss_view):
    # by hand: 3 Linear layers = dot_general, transpose, broadcast_in_dim, add each; 2 relus =
    # custom_jvp_call holding jit holding max; then sub, integer_pow, reduce_sum, div
    assert dict(loss_view.counts()) == {
        "dot_general": 3,
        "transpose": 3,
        "broadcast_in_dim": 3,
        "add": 3,
        "custom_jvp_call": 2,
        "jit": 2,
        "max": 2,
        "sub": 1,
        "integer_pow": 1,
        "reduce_sum": 1,
        "div": 1,
    }
    assert sum(loss_view.counts(recursive=False).values()) == 18
    assert len(loss_view) == 22


# --- nested jaxprs ---------------------------------------------------------------------------


@jax.custom_vjp
def _cv(x):
    return jnp.sin(x)


def _cv_fwd(x):
    return jnp.sin(x), jnp.cos(x)


def _cv_bwd(r, g):
    return (g * r,)


_cv.defvjp(_cv_fwd, _cv_bwd)


def _nested(x, w):
    def body(c, xi):
        return c + xi * w, c

    c, ys = lax.scan(body, jnp.float32(0), x)
    y = lax.cond(c > 0, lambda a: a * 2, lambda a: a - 1, c)
    z = lax.while_loop(lambda v: v < 10, lambda v: v + w, y)
    z = _cv(z)
    z = jax.checkpoint(lambda a: jnp.sin(a) * 2)(z)
    z = jax.nn.relu(z)
    z = jax.jit(lambda a: a + 1)(z)
    z = jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((), jnp.float32), z)
    return z, ys


@pytest.fixture(scope="module")
def nested_view():
    return tt.jaxpr(_nested, jnp.ones(3), jnp.float32(2))


def _shape(view: JaxprView, scope) -> list:
    out = []
    for e in scope.equations:
        kids = {c.label: _shape(view, c) for c in e.children}
        out.append((e.primitive, kids) if kids else e.primitive)
    return out


def test_each_sub_jaxpr_is_a_child(nested_view):
    assert _shape(nested_view, nested_view.top) == [
        ("scan", {"jaxpr": ["mul", "add"]}),
        "gt",
        "convert_element_type",
        ("cond", {"branches[0]": ["sub"], "branches[1]": ["mul"]}),
        ("while", {"cond_jaxpr": ["lt"], "body_jaxpr": ["add"]}),
        ("custom_vjp_call", {"call_jaxpr": ["sin"]}),
        ("remat2", {"jaxpr": ["sin", "mul"]}),
        ("custom_jvp_call", {"call_jaxpr": [("jit", {"jaxpr": ["max"]})]}),
        ("jit", {"jaxpr": ["add"]}),
        "pure_callback",
    ]
    ids = [e.id for e in nested_view.equations]
    assert ids[:4] == ["0", "0/jaxpr/0", "0/jaxpr/1", "1"]
    assert "7/call_jaxpr/0/jaxpr/0" in ids
    assert nested_view.equation("4/body_jaxpr/0").primitive == "add"


def test_nested_counts_equal_a_hand_count(nested_view):
    # top: 10 equations; scan body 2; cond branches 1+1; while cond+body 1+1; custom_vjp 1;
    # checkpoint 2; custom_jvp 1 (jit) + 1 (max); jit 1
    assert dict(nested_view.counts()) == {
        "add": 3,
        "mul": 3,
        "convert_element_type": 1,
        "jit": 2,
        "sin": 2,
        "scan": 1,
        "gt": 1,
        "cond": 1,
        "sub": 1,
        "while": 1,
        "lt": 1,
        "custom_vjp_call": 1,
        "remat2": 1,
        "custom_jvp_call": 1,
        "max": 1,
        "pure_callback": 1,
    }
    assert len(nested_view.equations) == 22
    assert nested_view.top.num_equations() == 22


def test_params_callback_and_source(nested_view):
    v = nested_view
    scan = v.equation("0")
    # jax 0.11 replaced scan's num_consts/num_carry with ft_in/ft_out; the rest is stable
    stable = {"reverse": "False", "length": "3", "unroll": "1"}
    assert stable.items() <= scan.shown_params.items()
    assert {"num_consts", "num_carry"} <= scan.shown_params.keys() or "ft_in" in scan.shown_params
    cv = next(e for e in v.equations if e.primitive == "custom_vjp_call")
    assert cv.shown_params == {"fwd": "_cv_fwd", "num_consts": "0", "bwd": "_cv_bwd"}
    cb = v.equations[-1]
    assert cb.primitive == "pure_callback"
    assert re.fullmatch(r"_nested\.<locals>\.<lambda> \(.*test_jaxpr\.py:\d+\)", cb.callback)
    line = _nested.__code__.co_firstlineno + 4
    assert scan.location == f"test_jaxpr.py:{line} (_nested)"
    assert re.fullmatch(rf".*/tests/jaxpr/test_jaxpr\.py:{line}:\d+ \(_nested\)", scan.source)


def test_deep_uses_follow_the_weight_into_sub_jaxprs(nested_view):
    v = nested_view
    assert [(e.id, e.primitive) for e in v.uses(".args[1]")] == [("0", "scan"), ("4", "while")]
    assert [(e.id, e.primitive) for e in v.uses(".args[1]", deep=True)] == [
        ("0", "scan"),
        ("0/jaxpr/0", "mul"),
        ("4", "while"),
        ("4/body_jaxpr/0", "add"),
    ]
    body = v.equation("4").children[1]
    assert str(v.path_of(body.invars[0], body)) == ".args[1]"
    assert v.path_of(body.invars[1], body) is None  # the carry comes from the cond, not an input


def test_shard_map_body_is_a_child():
    mesh = jax.make_mesh((8,), ("x",))
    f = jax.shard_map(
        lambda a: a * 2, mesh=mesh, in_specs=PartitionSpec("x"), out_specs=PartitionSpec("x")
    )
    x = jax.device_put(jnp.ones(16), jax.sharding.NamedSharding(mesh, PartitionSpec("x")))
    v = tt.jaxpr(f, x)
    assert _shape(v, v.top) == [("shard_map", {"jaxpr": ["pvary", "mul"]})]
    inner = v.equations[0].children[0]
    assert v.type_of(inner.invars[0]) == "f32[2]"
    assert [(e.id, e.primitive) for e in v.uses(".args[0]", deep=True)] == [
        ("0", "shard_map"),
        ("0/jaxpr/1", "mul"),
    ]


# --- inputs and outputs of every kind ----------------------------------------------------------


def test_kwargs_numpy_and_abstract_inputs():
    def f(x, *, params, n):
        return {"y": x @ params["w"] * n, "n": n, "const": np.float32(1)}

    v = tt.jaxpr(
        f,
        jax.ShapeDtypeStruct((2, 3), jnp.bfloat16),
        params={"w": np.ones((3, 4), np.float32)},
        n=5,
    )
    assert [(str(p), v.type_of(x)) for p, x in v.inputs] == [
        (".args[0]", "bf16[2,3]"),
        (".kwargs['params']['w']", "f32[3,4]"),
    ]
    assert [(str(p), x) for p, x in v.static] == [(".kwargs['n']", 5)]
    assert [(str(p), v.type_of(x)) for p, x in v.outputs] == [
        (".out['const']", "f32[]"),
        (".out['y']", "f32[2,4]"),
    ]
    assert tt.get(v.call, ".kwargs['params']['w']").shape == (3, 4)
    assert isinstance(v.call, Call)


def test_existing_jaxpr_gets_positional_paths():
    closed = jax.make_jaxpr(lambda a, b: (a + b, a))(jnp.ones(2), jnp.ones(2))
    for obj in (closed, closed.jaxpr):
        v = tt.jaxpr(obj)
        assert [str(p) for p, _ in v.inputs] == [".invars[0]", ".invars[1]"]
        assert [str(p) for p, _ in v.outputs] == [".outvars[0]", ".outvars[1]"]
        assert v.call is None and v.name == ""
        assert [e.primitive for e in v.uses(".invars[1]")] == ["add"]
    assert tt.jaxpr(closed).cost.flops == 2.0


def test_consts_are_listed_with_shapes():
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = tt.jaxpr(lambda i: jnp.asarray(table)[i], jnp.int32(1))
    consts = [(v.type_of(c), None if val is None else np.shape(val)) for c, val in v.consts]
    assert consts == [("f32[3,4]", (3, 4))]
    assert "consts\n  a  f32[3,4]" in _text(v.render(cost=False, source=False))


@given(
    st.recursive(
        st.sampled_from([(2,), (1, 3), ()]),
        lambda kids: st.one_of(
            st.lists(kids, max_size=3),
            st.dictionaries(st.sampled_from("abc"), kids, max_size=3),
        ),
        max_leaves=6,
    )
)
@settings(max_examples=25)
def test_input_paths_are_the_leaf_paths_of_the_call(shapes):
    tree = jax.tree_util.tree_map(
        lambda s: jnp.zeros(s, jnp.float32), shapes, is_leaf=lambda x: isinstance(x, tuple)
    )

    def f(t, scale):
        return [jnp.sum(leaf) * scale for leaf in jax.tree_util.tree_leaves(t)]

    v = tt.jaxpr(f, tree, scale=jnp.float32(2))
    expected = [(p, leaf) for p, leaf in tt.leaves_with_path(Call((tree,), {"scale": 0}))]
    assert [str(p) for p, _ in v.inputs] == [str(p) for p, _ in expected]
    assert [x.aval.shape for _, x in v.inputs[:-1]] == [leaf.shape for _, leaf in expected[:-1]]
    assert [str(p) for p, _ in v.outputs] == [f".out[{i}]" for i in range(len(v.outputs))]
    for p, _ in v.inputs:
        assert tt.Path.parse(str(p)) == p


# --- lookups, search and errors ------------------------------------------------------------------


def test_search_by_primitive_and_by_path(grad_view):
    v = grad_view
    assert [e.id for e in v.search("dot_general")] == [e.id for e in v.search("dot_*")]
    assert len(v.search("dot_general")) == 8
    assert [e.id for e in v.search(".args[0].layers[2].weight")] == ["16", "33"]
    assert [e.id for e in v.search("**.layers[0].*")] == ["0", "2"]
    assert [str(p) for p, _ in v.find("**.bias")][:2] == [
        ".args[0].layers[0].bias",
        ".args[0].layers[1].bias",
    ]
    assert v.search("nothing_like_this") == []


def test_lookup_errors_name_the_nearest(loss_view):
    with pytest.raises(
        tt.PathError,
        match=re.escape(
            "no input, output or variable '.args[0].layers[0].wieght' in this jaxpr; "
            "did you mean .args[0].layers[0].weight"
        ),
    ):
        loss_view.var(".args[0].layers[0].wieght")
    with pytest.raises(tt.TreetoolError, match=re.escape("no equation '99' (ids look like")):
        loss_view.equation("99")
    with pytest.raises(
        TypeError, match=re.escape("treetool.jaxpr expects a function or a jaxpr, got int")
    ):
        tt.jaxpr(42)
    with pytest.raises(TypeError, match=re.escape("treetool.jaxpr(jaxpr) takes no arguments")):
        tt.jaxpr(loss_view.closed_jaxpr, 1)
    with pytest.raises(TypeError, match="JaxprView expects a jax ClosedJaxpr or Jaxpr, got str"):
        JaxprView("x")


def test_cost_analysis_counts_matmul_flops():
    v = tt.jaxpr(lambda a, b: a @ b, jnp.ones((4, 8)), jnp.ones((8, 16)))
    assert v.cost.flops == 2 * 4 * 8 * 16
    assert v.cost.bytes_accessed == 4 * (4 * 8 + 8 * 16 + 4 * 16)
    assert v.cost_error is None


# --- rendering and JSON ----------------------------------------------------------------------------


def test_render_folds_by_depth():
    v = tt.jaxpr(
        lambda p: lax.scan(lambda c, x: (c + jnp.sin(x), c), 0.0, p["xs"]), {"xs": jnp.ones(3)}
    )
    # scan's params differ between jax versions: compare them apart from the rest
    depth1 = _text(v.render(depth=1, cost=False, source=False), width=240)
    params = re.search(r"scan\[(.*?)\] 0\.0", depth1).group(1)
    assert params.startswith("reverse=False length=3 ") and params.endswith(" unroll=1")
    depth1 = depth1.replace(params, "…")
    assert depth1 == textwrap.dedent(
        """\
        jaxpr <lambda>: 1 input → 2 outputs, 4 equations
        inputs
          a  f32[3]  .args[0]['xs']
        outputs
          b  f32[]  .out[0]
          c  f32[3]  .out[1]
        equations
        └── b:f32[] c:f32[3] = scan[…] 0.0 a  ← .args[0]['xs']
            └── jaxpr: 3 equations: add, convert_element_type, sin
        totals  4 equations: add, convert_element_type, scan, sin
        """
    )
    depth2 = _text(v.render(depth=2, cost=False, source=False), width=120)
    assert "    └── jaxpr (d:f32[] e:f32[]) → (h d)  3 equations\n" in depth2
    assert "        ├── f:f32[] = sin e  ← .args[0]['xs']\n" in depth2


def test_render_width_folds_long_jaxprs():
    def f(x):
        for _ in range(30):
            x = jnp.sin(x) + 1.0
        return x

    v = tt.jaxpr(f, jnp.ones(2))
    text = _text(v.render(width=4, cost=False, source=False))
    assert "└── … 56 more equations: add ×28, sin ×28\n" in text
    assert text.count(" = ") == 4
    assert "(XLA: 60 FLOPs" in _text(v.render(width=4))


def test_tt_render_and_rich_protocol(loss_view):
    from treetool._jaxpr._rich import JaxprTree

    shallow = tt.render(loss_view, depth=1)
    assert isinstance(shallow, JaxprTree) and shallow.depth == 1
    assert repr(loss_view) == "<JaxprView _loss: 8 inputs, 1 output, 22 equations>"
    text = _text(loss_view, width=200)
    assert text.startswith("jaxpr _loss: 8 inputs → 1 output, 22 equations\n")
    assert "  a  f32[4,2]  .args[0].layers[0].weight\n" in text
    assert (
        "= dot_general[dimension_numbers=(((1,), (1,)), ((), ())) preferred_element_type=float32]"
        " a g  ← .args[0].layers[0].weight, .args[1]  _linear.py:" in text
    )
    assert "static (baked into the trace)\n  .args[0].activation  <custom_jvp relu>\n" in text


def test_to_dict_is_json_and_mirrors_the_tree(nested_view):
    d = nested_view.to_dict(cost=True)
    json.dumps(d)
    assert d["num_equations"] == 22 and d["counts"]["add"] == 3
    assert d["inputs"] == [
        {"var": "a", "type": "f32[3]", "path": ".args[0]"},
        {"var": "b", "type": "f32[]", "path": ".args[1]"},
    ]
    eqns = d["jaxpr"]["equations"]
    assert [e["primitive"] for e in eqns][:4] == ["scan", "gt", "convert_element_type", "cond"]
    cond = eqns[3]
    assert [c["label"] for c in cond["children"]] == ["branches[0]", "branches[1]"]
    assert [c["id"] for c in cond["children"]] == ["3/branches[0]", "3/branches[1]"]
    body = eqns[4]["children"][1]
    assert body["invars"][0] == {
        "var": body["invars"][0]["var"],
        "type": "f32[]",
        "path": ".args[1]",
    }
    assert eqns[0]["invars"][1] == {"var": "0.0", "type": "f32[]", "literal": True}
    assert d["cost"]["flops"] is not None
    line = _nested.__code__.co_firstlineno + 4
    assert eqns[0]["location"] == f"test_jaxpr.py:{line} (_nested)"
    assert eqns[0]["source"].endswith(f"tests/jaxpr/test_jaxpr.py:{line}:12 (_nested)")
    assert to_dict(nested_view, source=False)["jaxpr"]["equations"][0].get("source") is None


def test_jaxpr_tree_class_is_what_render_returns(loss_view):
    assert isinstance(loss_view.render(), JaxprTree)


# --- properties against jax's own sub-jaxpr walk ---------------------------------------------

_WRAPPERS = {
    "jit": lambda f: jax.jit(f),
    "checkpoint": lambda f: jax.checkpoint(f),
    "cond": lambda f: lambda a, b: lax.cond(jnp.sum(a) > 0, f, lambda a, b: a - b, a, b),
    "scan": lambda f: lambda a, b: lax.scan(lambda c, _: (f(c, b), None), a, None, length=2)[0],
}
_OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "sin": lambda a, b: jnp.sin(a),
    "max": lambda a, b: jnp.maximum(a, b),
}


def _program(steps):
    def f(inputs):
        vals = list(inputs)
        for op, wraps, i, j in steps:
            g = _OPS[op]
            for w in wraps:
                g = _WRAPPERS[w](g)
            vals.append(g(vals[i % len(vals)], vals[j % len(vals)]))
        return vals[-1]

    return f


def _jax_count(jaxpr) -> int:
    from jax.extend.core import subjaxprs

    return len(jaxpr.eqns) + sum(_jax_count(s) for s in subjaxprs(jaxpr))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(_OPS)),
            st.lists(st.sampled_from(sorted(_WRAPPERS)), max_size=2),
            st.integers(0, 10),
            st.integers(0, 10),
        ),
        min_size=1,
        max_size=5,
    )
)
@settings(max_examples=20)
def test_counts_and_uses_agree_with_jax(steps):
    v = tt.jaxpr(_program(steps), [jnp.ones(2), jnp.full(2, 2.0), jnp.full(2, 3.0)])
    assert len(v.equations) == _jax_count(v.jaxpr) == sum(v.counts().values())
    assert [str(p) for p, _ in v.inputs] == [".args[0][0]", ".args[0][1]", ".args[0][2]"]
    ids = [e.id for e in v.equations]
    assert len(set(ids)) == len(ids)
    for e in v.equations:
        assert v.equation(e.id) is e
    for scope in v.scopes():
        for var in (*scope.invars, *(o for e in scope.equations for o in e.outputs)):
            readers = [e for e in scope.equations if any(x is var for x in e.eqn.invars)]
            assert v.uses(var, scope=scope) == readers
            deep = v.uses(var, scope=scope, deep=True)
            assert readers == [e for e in deep if e.scope is scope]
            assert all(e.order >= min((r.order for r in readers), default=0) for e in deep)

"""The parts of a jaxpr tree: `Scope` (one jaxpr, the top one or a sub-jaxpr) and `Equation`.

`JaxprView` (in `treetool._jaxpr._view`) builds them in one walk; renderers, the JSON export and the
TUI read them. Also here: how a variable's type and an equation's params and source location
read as text, and treetool's variable names (`a`, `b`, …, `ba`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from treetool._leaves._arrays import short_dtype
from treetool._paths._path import GetAttrKey, Path

__all__ = ["Call", "Cost", "Equation", "Scope", "aval_text", "short_location"]

_OUT = GetAttrKey("out")
_INVARS = GetAttrKey("invars")
_OUTVARS = GetAttrKey("outvars")
#: params never shown on an equation's line (sharding plumbing, thunks); kept in `.params`
_QUIET = frozenset(
    {
        "in_shardings",
        "out_shardings",
        "in_layouts",
        "out_layouts",
        "donated_invars",
        "ctx_mesh",
        "compiler_options_kvs",
        "keep_unused",
        "inline",
        "out_trees",
        "symbolic_zeros",
        "callback",
        "result_avals",
    }
)
#: params holding functions, shown under the short name jax prints them with
_FN_PARAMS = {"fwd_jaxpr_thunk": "fwd", "jvp_jaxpr_fun": "jvp", "jvp_jaxpr_thunk": "jvp"}
_SOURCE = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::\d+)? \((?P<fn>.*)\)$")


class Call(NamedTuple):
    """The arguments of a traced call; input paths are paths into it (`.args[0].w`).

    Example:
        >>> import jax
        >>> [jax.tree_util.keystr(p) for p, _ in
        ...  jax.tree_util.tree_flatten_with_path(Call((1.0,), {"y": 2.0}))[0]]
        ['.args[0]', ".kwargs['y']"]
    """

    args: tuple
    kwargs: dict


@dataclass(frozen=True)
class Cost:
    """XLA's cost analysis of the lowered computation (summed over its HLO).

    Attributes:
        flops: floating-point operations.
        bytes_accessed: bytes read and written by the operations.
        transcendentals: exp, log, sin… counted separately by XLA.
        raw: every figure XLA reported.

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> tt.jaxpr(lambda a, b: a @ b, jnp.ones((2, 3)), jnp.ones((3, 4))).cost.flops
        48.0
    """

    flops: float | None
    bytes_accessed: float | None
    transcendentals: float | None
    raw: dict[str, float] = field(default_factory=dict, repr=False)


_NAMES: list[str] = []


def _name(i: int) -> str:
    """jax's variable names: a…z, ba…bz, ca… (cached)."""
    while len(_NAMES) <= i:
        k, s = len(_NAMES), ""
        while True:
            k, r = divmod(k, 26)
            s = chr(97 + r) + s
            if k == 0:
                break
        _NAMES.append(s)
    return _NAMES[i]


#: dtype -> `f32`: numpy computes `dtype.name` anew on every access, which is slow
_DTYPES: dict[Any, str] = {}


def aval_text(aval: Any) -> str:
    """`f32[4,2]` for an array type, jax's own text for anything else (tokens, refs).

    Example:
        >>> import jax.numpy as jnp, jax
        >>> aval_text(jax.make_jaxpr(lambda x: x)(jnp.ones((4, 2))).jaxpr.invars[0].aval)
        'f32[4,2]'
    """
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return str(aval)
    short = _DTYPES.get(dtype)
    if short is None:
        short = _DTYPES[dtype] = short_dtype(dtype)
    return f"{short}[{','.join(map(str, shape))}]"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = str(value)
    except Exception as e:  # a param whose str fails must not break the view
        text = f"<{type(value).__name__}: str failed: {e}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _param_text(value: Any) -> str:
    """A param as short text; functions (and jax's wrapped functions) by their name."""
    info = getattr(value, "debug_info", None)
    src = getattr(info, "func_src_info", None)
    if isinstance(src, str) and src:
        return src.split(" at ", 1)[0]
    if callable(value) and not isinstance(value, type):
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if name:
            return name
    return _short(value, 1000)


def _jaxpr_types() -> tuple[type[Any], type[Any]]:
    from jax.extend.core import ClosedJaxpr, Jaxpr

    return ClosedJaxpr, Jaxpr


def _sub_jaxprs(params: dict[str, Any], closed: type, open_: type) -> list[tuple[str, Any]]:
    """(label, jaxpr) for every jaxpr held in an equation's params, in param order."""
    out = []
    for k, v in params.items():
        if isinstance(v, (closed, open_)):
            out.append((k, v))
        elif isinstance(v, (tuple, list)) and v and isinstance(v[0], (closed, open_)):
            out.extend((f"{k}[{i}]", s) for i, s in enumerate(v) if isinstance(s, (closed, open_)))
    return out


def _operand_map(eqn: Any, label: str, n_binders: int) -> list[int] | None:
    """For each invar of a sub-jaxpr, the index of the equation operand it is bound to."""
    n = len(eqn.invars)
    name = eqn.primitive.name
    if name == "while":
        cn, bn = eqn.params.get("cond_nconsts", 0), eqn.params.get("body_nconsts", 0)
        carry = list(range(cn + bn, n))
        if label == "cond_jaxpr":
            m = list(range(cn)) + carry
        elif label == "body_jaxpr":
            m = list(range(cn, cn + bn)) + carry
        else:
            return None
        return m if len(m) == n_binders else None
    if name == "cond" and n_binders == n - 1:
        return list(range(1, n))
    if n_binders == n:
        return list(range(n))
    return None


class Scope:
    """One jaxpr in the tree: the top-level one, or a sub-jaxpr of an equation.

    Attributes:
        label: `""` for the top level, else the param that holds it (`jaxpr`, `branches[1]`,
            `body_jaxpr`).
        parent: the equation that holds it (None at the top).
        equations: its equations, in order.
        invars, outvars, constvars: jax's binders and results.
        consts: the values of `constvars` (None where the jaxpr was given open).

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> from jax import lax
        >>> v = tt.jaxpr(lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x), jnp.float32(1))
        >>> [(s.label, [e.primitive for e in s.equations]) for s in v.equation("2").children]
        [('branches[0]', ['cos']), ('branches[1]', ['sin'])]
    """

    __slots__ = (
        "_origin",
        "_producers",
        "_readers",
        "consts",
        "constvars",
        "depth",
        "equations",
        "id",
        "invars",
        "jaxpr",
        "label",
        "operand_map",
        "outvars",
        "parent",
    )

    def __init__(self, jaxpr: Any, consts: list[Any] | None, label: str, parent: Equation | None):
        self.jaxpr = jaxpr
        self.consts = consts
        self.label = label
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.scope.depth + 1
        self.id: str = "" if parent is None else f"{parent.id}/{label}"
        self.invars = jaxpr.invars
        self.outvars = jaxpr.outvars
        self.constvars = jaxpr.constvars
        self.equations: list[Equation] = []
        self.operand_map: list[int] | None = None
        self._readers: dict[Any, list[Equation]] = {}
        self._producers: dict[Any, Equation] = {}
        self._origin: dict[Any, Path] = {}

    def __repr__(self) -> str:
        where = f" of {self.parent.primitive} {self.parent.id}" if self.parent else ""
        return f"Scope({self.label or 'top'}{where}, {len(self.equations)} equations)"

    def readers(self, var: Any) -> list[Equation]:
        """The equations of this jaxpr that take `var` as an operand."""
        return list(self._readers.get(var, ()))

    def producer(self, var: Any) -> Equation | None:
        """The equation of this jaxpr that outputs `var` (None for binders and consts)."""
        return self._producers.get(var)

    def counts(self) -> Counter[str]:
        """Equations by primitive in this jaxpr and every jaxpr nested in it."""
        c: Counter[str] = Counter()
        stack = [self]
        while stack:
            s = stack.pop()
            for e in s.equations:
                c[e.primitive] += 1
                stack.extend(e.children)
        return c

    def num_equations(self) -> int:
        """Equations in this jaxpr and every jaxpr nested in it."""
        return sum(self.counts().values())


class Equation:
    """One equation of a jaxpr, with its nested jaxprs as `children`.

    Attributes:
        id: its address: `3` at the top level, `3/jaxpr/0`, `5/branches[1]/2` inside.
        index: its position in its jaxpr.
        order: its position in a pre-order walk of the whole tree.
        scope: the jaxpr it belongs to.
        eqn: jax's `JaxprEqn`.
        children: the sub-jaxprs it holds (pjit, scan, cond branches, while cond/body, …).

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> eq = tt.jaxpr(lambda x: jnp.sum(x, axis=0), jnp.ones((2, 3))).equations[0]
        >>> eq.primitive, eq.shown_params, [str(x.aval) for x in eq.outputs]
        ('reduce_sum', {'axes': '(0,)'}, ['float32[3]'])
    """

    __slots__ = ("children", "eqn", "id", "index", "order", "scope")

    def __init__(self, eqn: Any, scope: Scope, index: int, order: int) -> None:
        self.eqn = eqn
        self.scope = scope
        self.index = index
        self.order = order
        self.id = f"{scope.id}/{index}" if scope.id else str(index)
        self.children: list[Scope] = []

    def __repr__(self) -> str:
        return f"Equation({self.id}: {self.primitive})"

    @property
    def primitive(self) -> str:
        """The primitive's name: `dot_general`, `scan`, `jit`."""
        return self.eqn.primitive.name

    @property
    def inputs(self) -> list[Any]:
        """The operands: jax Vars and Literals."""
        return list(self.eqn.invars)

    @property
    def outputs(self) -> list[Any]:
        """The results: jax Vars (DropVar for unused ones)."""
        return list(self.eqn.outvars)

    @property
    def params(self) -> dict[str, str]:
        """Every param except the sub-jaxprs (which are `children`), as short text."""
        closed, open_ = _jaxpr_types()
        skip = {label.split("[")[0] for label, _ in _sub_jaxprs(self.eqn.params, closed, open_)}
        return {k: _param_text(v) for k, v in self.eqn.params.items() if k not in skip}

    @property
    def shown_params(self) -> dict[str, str]:
        """The params worth a place on the equation's line (no sharding plumbing, no thunks)."""
        out = {}
        for k, v in self.params.items():
            if k in _QUIET or v == "None":
                continue
            k = _FN_PARAMS.get(k, k)
            out[k] = v if len(v) <= 60 else v[:59] + "…"
        return out

    @property
    def callback(self) -> str | None:
        """For `pure_callback`/`io_callback`: the Python function it calls, with its file:line."""
        cb = self.eqn.params.get("callback")
        if cb is None:
            return None
        fn = getattr(cb, "callback_func", cb)
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        code = getattr(fn, "__code__", None)
        if code is not None:
            return f"{name} ({code.co_filename}:{code.co_firstlineno})"
        return name

    @property
    def source(self) -> str | None:
        """Where the user's code made this equation: `path/to/file.py:12:8 (fn)`, if known."""
        from jax.extend.source_info_util import summarize

        try:
            text = summarize(self.eqn.source_info)
        except Exception:  # source info is best effort: jax may not have it for every eqn
            return None
        return None if not text or text.startswith("unknown") else text

    @property
    def location(self) -> str | None:
        """`file.py:12 (fn)`: `source` with the directory dropped."""
        return short_location(self.source)


def short_location(source: str | None) -> str | None:
    """`/a/b/model.py:12:8 (loss)` -> `model.py:12 (loss)`.

    Example:
        >>> short_location("/home/me/model.py:12:8 (loss)")
        'model.py:12 (loss)'
    """
    if source is None:
        return None
    m = _SOURCE.match(source)
    if m is None:
        return source
    return f"{m['file'].rsplit('/', 1)[-1]}:{m['line']} ({m['fn']})"

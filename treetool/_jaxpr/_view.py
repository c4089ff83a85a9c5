"""Jaxprs as trees: equations with nested sub-jaxprs, tied back to the pytrees that went in.

`jaxpr(fn, *args, **kwargs)` traces `fn` with `jax.make_jaxpr` and keeps the structure of the
arguments and of the result, so that every input variable has the path of the argument leaf it
came from and every output variable the path of the result leaf it became.

Paths are treetool `Path`s rooted at a record of the call: inputs start with `.args[i]` or
`.kwargs['name']` (`.args[0].layers[0].weight`), outputs with `.out` (`.out`, `.out[0]`,
`.out['loss']`). Every path prints as jax's keystr and parses back with `Path.parse`; the
inputs are exactly the paths of `Call(args, kwargs)` (a NamedTuple) as jax flattens it, so
`tt.get(view.call, path)` returns the argument leaf.

Only array leaves (jax and numpy arrays, numpy scalars, `jax.ShapeDtypeStruct`) become
inputs, as with `eqx.filter_make_jaxpr`; any other leaf (a Python number, a function, a string)
is static: baked into the trace and listed in `view.static`. A jaxpr given directly (a
`ClosedJaxpr` or a `Jaxpr`) has positional paths: `.invars[i]` and `.outvars[i]`.

Variable names (`a`, `b`, …, `ba`) are treetool's, given in the order of a walk like jax's
printer; the types are jax's. Only public jax APIs are used (`jax.make_jaxpr`,
`jax.extend.core`, `jax.extend.source_info_util`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from treetool._errors import TreetoolError
from treetool._jaxpr._scope import (
    _INVARS,
    _OUT,
    _OUTVARS,
    Scope,
    _jaxpr_types,
    _name,
    _operand_map,
    _short,
    _sub_jaxprs,
    aval_text,
)
from treetool._jaxpr._scope import Call as Call
from treetool._jaxpr._scope import Cost as Cost
from treetool._jaxpr._scope import Equation as Equation
from treetool._jaxpr._scope import short_location as short_location
from treetool._jaxpr._uses import Lookups
from treetool._lowering._drawn import RichDrawn
from treetool._paths._path import Path, SequenceKey
from treetool._public import set_module
from treetool._tree._model import no_gc
from treetool._typetests import is_drop_var

__all__ = ["Call", "Cost", "Equation", "JaxprView", "Scope", "jaxpr", "short_location"]


@set_module("treetool")
class JaxprView(RichDrawn, Lookups):
    """A jaxpr as a browsable tree, tied back to the pytrees that went in and came out.

    Build it with `treetool.jaxpr(fn, *args, **kwargs)` or `JaxprView(closed_jaxpr)`.

    Attributes:
        closed_jaxpr: the traced jaxpr (a `ClosedJaxpr`; a `Jaxpr` given directly is kept
            as it is in `jaxpr`).
        name: the traced function's name (`""` for a jaxpr given directly).
        inputs: `[(Path, Var)]`, one per input variable (`.args[0].layers[0].weight`).
        outputs: `[(Path, Var or Literal)]`, one per output (`.out`, `.out[1]`).
        static: `[(Path, value)]`: argument leaves that were not arrays, baked into the trace.
        call: the `Call(args, kwargs)` the paths of `inputs` point into (None for a jaxpr).
        top: the top-level `Scope`; `equations`: every `Equation`, in pre-order.

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> v = tt.jaxpr(lambda p, x: jnp.tanh(x @ p["w"]), {"w": jnp.ones((3, 2))}, jnp.ones(3))
        >>> [(str(p), v.type_of(x)) for p, x in v.inputs]
        [(".args[0]['w']", 'f32[3,2]'), ('.args[1]', 'f32[3]')]
        >>> [e.primitive for e in v.uses(".args[0]['w']")]
        ['dot_general']
        >>> dict(v.counts())
        {'dot_general': 1, 'tanh': 1}
    """

    def __init__(
        self,
        jaxpr: Any,
        *,
        in_paths: list[Path] | None = None,
        out_paths: list[Path] | None = None,
        name: str = "",
        static: list[tuple[Path, Any]] | None = None,
        call: Call | None = None,
    ) -> None:
        closed_t, open_t = _jaxpr_types()
        if isinstance(jaxpr, closed_t):
            self.closed_jaxpr = jaxpr
            self.jaxpr = jaxpr.jaxpr
            consts: list[Any] | None = list(jaxpr.consts)
        elif isinstance(jaxpr, open_t):
            self.closed_jaxpr = closed_t(jaxpr, []) if not jaxpr.constvars else None
            self.jaxpr = jaxpr
            consts = None
        else:
            raise TypeError(
                f"JaxprView expects a jax ClosedJaxpr or Jaxpr, got {type(jaxpr).__name__}; "
                "use treetool.jaxpr(fn, *args) to trace a function"
            )
        with no_gc():
            self._setup(in_paths, out_paths, name, static, call)
            self.top = self._build(self.jaxpr, consts, [p for p, _ in self.inputs])

    def _setup(
        self,
        in_paths: list[Path] | None,
        out_paths: list[Path] | None,
        name: str,
        static: list[tuple[Path, Any]] | None,
        call: Call | None,
    ) -> None:
        j = self.jaxpr
        if in_paths is None:
            in_paths = [Path._make((_INVARS, SequenceKey(i))) for i in range(len(j.invars))]
        if out_paths is None:
            out_paths = [Path._make((_OUTVARS, SequenceKey(i))) for i in range(len(j.outvars))]
        if len(in_paths) != len(j.invars) or len(out_paths) != len(j.outvars):
            raise TreetoolError(
                f"JaxprView: {len(in_paths)} input paths and {len(out_paths)} output paths for "
                f"a jaxpr with {len(j.invars)} inputs and {len(j.outvars)} outputs"
            )
        self.name = name
        self.call = call
        self.static = list(static or [])
        self.inputs: list[tuple[Path, Any]] = list(zip(in_paths, j.invars))
        self.outputs: list[tuple[Path, Any]] = list(zip(out_paths, j.outvars))
        self._names: dict[Any, str] = {}
        self._home: dict[Any, Scope] = {}
        self._by_id: dict[str, Equation] = {}
        self._cost: Cost | bool | None = False
        self._cost_error: str | None = None
        self.equations: list[Equation] = []

    # --- building ------------------------------------------------------------------------
    def _build(self, j: Any, consts: list[Any] | None, in_paths: list[Path]) -> Scope:
        from jax.extend.core import DropVar as drop

        closed_t, open_t = _jaxpr_types()
        names = self._names
        home = self._home
        equations = self.equations
        by_id = self._by_id
        top = Scope(j, consts, "", None)
        top._origin.update(zip(j.invars, in_paths))
        # (scope, next equation index): an explicit stack keeps deep nesting off the C stack
        stack: list[tuple[Scope, int]] = [(top, 0)]
        while stack:
            scope, i = stack.pop()
            if i == 0:
                self._bind(scope)
            eqns = scope.jaxpr.eqns
            readers = scope._readers
            producers = scope._producers
            se = scope.equations
            while i < len(eqns):
                e = eqns[i]
                eq = Equation(e, scope, i, len(equations))
                equations.append(eq)
                se.append(eq)
                by_id[eq.id] = eq
                for v in e.invars:
                    if not hasattr(v, "val"):
                        r = readers.get(v)
                        if r is None:
                            readers[v] = [eq]
                        elif r[-1] is not eq:
                            r.append(eq)
                for v in e.outvars:
                    if v.__class__ is drop:
                        continue
                    producers[v] = eq
                    if v not in names:
                        names[v] = _name(len(names))
                        home[v] = scope
                i += 1
                subs = _sub_jaxprs(e.params, closed_t, open_t) if e.params else ()
                if subs:
                    stack.append((scope, i))
                    for label, sub in reversed(subs):
                        if isinstance(sub, closed_t):
                            child = Scope(sub.jaxpr, list(sub.consts), label, eq)
                        else:
                            child = Scope(sub, None, label, eq)
                        omap = _operand_map(e, label, len(child.invars))
                        child.operand_map = omap
                        if omap is not None:
                            origin = scope._origin
                            for b, k in zip(child.invars, omap):
                                x = e.invars[k]
                                p = None if hasattr(x, "val") else origin.get(x)
                                if p is not None:
                                    child._origin[b] = p
                        stack.append((child, 0))
                    eq.children = [s for s, _ in stack[len(stack) - len(subs) :]][::-1]
                    break
        return top

    def _bind(self, scope: Scope) -> None:
        names, home = self._names, self._home
        for v in (*scope.constvars, *scope.invars):
            if v not in names:
                names[v] = _name(len(names))
                home[v] = scope

    # --- names and types -----------------------------------------------------------------
    def name_of(self, atom: Any) -> str:
        """The variable's name in this view (`a`, `ba`), or a literal's value (`2.0`).

        Example:
            >>> import jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda x: x * 2.0, jnp.ones(3))
            >>> [v.name_of(x) for x in v.equations[0].inputs]
            ['a', '2.0']
        """
        if hasattr(atom, "val"):
            val = atom.val
            try:
                return _short(val.item() if getattr(val, "shape", None) == () else val, 30)
            except Exception:
                return _short(val, 30)
        name = self._names.get(atom)
        if name is None:
            if is_drop_var(atom):
                return "_"
            name = self._names[atom] = _name(len(self._names))
        return name

    @staticmethod
    def type_of(atom: Any) -> str:
        """`f32[4,2]`: the type of a variable or literal."""
        return aval_text(atom.aval)

    # --- totals --------------------------------------------------------------------------
    def counts(self, *, recursive: bool = True) -> Counter[str]:
        """Equations by primitive, most common first; `recursive` counts nested jaxprs too.

        Each equation is counted once as written: a scan body counts once, not `length` times.

        Example:
            >>> import jax, jax.numpy as jnp, treetool as tt
            >>> v = tt.jaxpr(lambda x: jax.jit(lambda a: a + a * 2.0)(x) + 1.0, jnp.ones(2))
            >>> dict(v.counts()), dict(v.counts(recursive=False))
            ({'add': 2, 'jit': 1, 'mul': 1}, {'jit': 1, 'add': 1})
        """
        eqns = self.equations if recursive else self.top.equations
        return Counter(dict(Counter(e.primitive for e in eqns).most_common()))

    @property
    def consts(self) -> list[tuple[Any, Any]]:
        """`[(Var, value)]` of the top-level consts (value None for an open jaxpr)."""
        vals = self.top.consts
        return [(v, None if vals is None else vals[i]) for i, v in enumerate(self.top.constvars)]

    def scopes(self) -> Iterator[Scope]:
        """Every jaxpr of the tree in pre-order, the top-level one first."""
        stack = [self.top]
        while stack:
            s = stack.pop()
            yield s
            for e in reversed(s.equations):
                stack.extend(reversed(e.children))

    @property
    def cost(self) -> Cost | None:
        """FLOPs and bytes from XLA's cost analysis of the lowered jaxpr (None if unavailable).

        Computed on first use (a lowering, no compile) and cached; `cost_error` says why it is
        None.
        """
        if self._cost is False:
            self._cost = self._compute_cost()
        return self._cost  # type: ignore[return-value]

    @property
    def cached_cost(self) -> Cost | None:
        """`cost` if it has been computed already, else None (never lowers anything)."""
        return self._cost if isinstance(self._cost, Cost) else None

    @property
    def cost_error(self) -> str | None:
        """Why `cost` is None, or None."""
        _ = self.cost
        return self._cost_error

    def _compute_cost(self) -> Cost | None:
        if self.closed_jaxpr is None:
            self._cost_error = "an open jaxpr with constvars has no const values to lower"
            return None
        import jax
        from jax.extend.core import jaxpr_as_fun

        try:
            specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in self.jaxpr.invars]
            lowered = jax.jit(jaxpr_as_fun(self.closed_jaxpr)).lower(*specs)
            raw = lowered.cost_analysis()
            if not _first(raw):  # GPU backends analyse only compiled programs
                raw = lowered.compile().cost_analysis()
        except Exception as e:  # lowering can fail for effects or backends; cost is optional
            self._cost_error = f"{type(e).__name__}: {_short(e, 200)}"
            return None
        raw = _first(raw)
        if not raw:
            self._cost_error = "XLA reported no cost analysis for this backend"
            return None
        raw = {k: float(v) for k, v in raw.items()}
        return Cost(raw.get("flops"), raw.get("bytes accessed"), raw.get("transcendentals"), raw)

    # --- output --------------------------------------------------------------------------
    def render(
        self, *, depth: int = 3, width: int | None = 200, cost: bool = True, source: bool = True
    ) -> Any:
        """A rich renderable: inputs, outputs, consts, the equation tree folded below `depth`
        levels of nesting and `width` equations per jaxpr, and the totals (with XLA's FLOPs
        and bytes when `cost`); `source` adds each equation's file:line."""
        return self.__treetool_lower__("rich", depth=depth, width=width, cost=cost, source=source)

    def __treetool_lower__(
        self, medium: str, *, depth: int = 3, cost: bool = True, source: bool = True, **options: Any
    ) -> Any:
        """Its own lowerings: `_jaxpr/_rich.py` (rich, text) and `_jaxpr/_html.py`.

        `width` (equations per jaxpr; None: all) defaults to 200 in rich and text, 20 in HTML."""
        if medium == "html":
            from treetool._jaxpr._html import jaxpr_html

            return jaxpr_html(self, depth=depth, width=options.get("width", 20))
        from treetool._jaxpr._rich import JaxprTree

        tree = JaxprTree(
            self, depth=depth, width=options.get("width", 200), cost=cost, source=source
        )
        if medium == "text":
            from treetool._lowering._plain import to_text

            return to_text(tree)
        return tree

    def to_dict(self, *, source: bool = True, cost: bool = False) -> dict[str, Any]:
        """The whole view as JSON-able data (see `treetool._jaxpr._json.to_dict`)."""
        from treetool._jaxpr._json import to_dict

        return to_dict(self, source=source, cost=cost)

    def __len__(self) -> int:
        return len(self.equations)

    def __repr__(self) -> str:
        name = f" {self.name}" if self.name else ""
        parts = [
            f"{n} {word}{'s' if n != 1 else ''}"
            for n, word in (
                (len(self.inputs), "input"),
                (len(self.outputs), "output"),
                (len(self.equations), "equation"),
            )
        ]
        return f"<JaxprView{name}: {', '.join(parts)}>"


def _is_array(x: Any) -> bool:
    import jax
    import numpy as np

    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


@set_module("treetool")
def jaxpr(fn: Callable[..., Any] | Any, *args: Any, **kwargs: Any) -> JaxprView:
    """Trace `fn(*args, **kwargs)` into a `JaxprView`; a ClosedJaxpr or Jaxpr is wrapped as is.

    Array leaves of the arguments become inputs, with paths `.args[i]…` / `.kwargs['k']…`;
    other leaves (functions, Python numbers) are static. The result's array leaves become
    outputs, with paths `.out…`.

    Example:
        >>> import jax.numpy as jnp, treetool as tt
        >>> v = tt.jaxpr(lambda x, *, scale: {"y": x * scale}, jnp.ones(2), scale=jnp.float32(3))
        >>> [str(p) for p, _ in v.inputs], [str(p) for p, _ in v.outputs]
        (['.args[0]', ".kwargs['scale']"], [".out['y']"])
    """
    closed_t, open_t = _jaxpr_types()
    if isinstance(fn, (closed_t, open_t)):
        if args or kwargs:
            raise TypeError("treetool.jaxpr(jaxpr) takes no arguments: the jaxpr is already traced")
        return JaxprView(fn)
    if not callable(fn):
        raise TypeError(f"treetool.jaxpr expects a function or a jaxpr, got {type(fn).__name__}")
    import jax

    call = Call(tuple(args), dict(kwargs))
    flat, treedef = jax.tree_util.tree_flatten_with_path(call)
    leaves = [leaf for _, leaf in flat]
    dyn = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    dyn_set = set(dyn)
    in_paths = [Path.from_jax(flat[i][0]) for i in dyn]
    static = [(Path.from_jax(p), leaf) for i, (p, leaf) in enumerate(flat) if i not in dyn_set]
    result: dict[str, Any] = {}

    def traced(*values: Any) -> list[Any]:
        filled = list(leaves)
        for i, x in zip(dyn, values):
            filled[i] = x
        c = jax.tree_util.tree_unflatten(treedef, filled)
        out = fn(*c.args, **c.kwargs)
        oflat, _ = jax.tree_util.tree_flatten_with_path(out)
        arrays = [(p, x) for p, x in oflat if isinstance(x, (jax.Array, _np_types()))]
        result["paths"] = [Path._make((_OUT, *Path.from_jax(p).keys)) for p, _ in arrays]
        return [x for _, x in arrays]

    closed = jax.make_jaxpr(traced)(*[leaves[i] for i in dyn])
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    name = name.rsplit("<locals>.", 1)[-1]
    return JaxprView(
        closed,
        in_paths=in_paths,
        out_paths=result["paths"],
        name=name,
        static=static,
        call=call,
    )


def _np_types() -> tuple[type, ...]:
    """The numpy types that count as arrays among a function's results."""
    import numpy as np

    return (np.ndarray, np.generic)


def _first(raw: Any) -> Any:
    """XLA's cost analysis is a dict, or (older jax) a list with one dict per program."""
    if isinstance(raw, (list, tuple)):
        return raw[0] if raw else None
    return raw

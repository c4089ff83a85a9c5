"""Unexecuted functions in a safely read pickle become one `OpaqueFunction` leaf each.

cloudpickle saves a lambda or a local function by value (`_make_function(code, globals, ...)`),
and `jax.nn.relu` (a `custom_jvp` around a `PjitFunction`) by its state. The safe reader
records all that as `Opaque` nodes, which would open into bytecode, closures, caches and the
writer's file paths. After the read, `collapse_functions` replaces every such node by an
`OpaqueFunction` named by its qualified name, at the path where jax has the function leaf.
Nothing of the file is called or imported; the pass runs only when the read met one of the
function makers (`needs_collapse`), so files of arrays pay nothing.
"""

from __future__ import annotations

import collections
from typing import Any

from treetool._leaves._callables import OpaqueFunction, code_key, printable_name
from treetool._leaves._dtypes import loaded_numpy
from treetool.io._opaque import GlobalRef, Opaque

__all__ = ["collapse_functions", "needs_collapse"]

_CLOUDPICKLE = ("cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast", "cloudpickle")

#: class paths of the calls that make a function, and the kind of function they make
_MAKERS: dict[str, str] = {
    **{f"{m}._make_function": "function" for m in _CLOUDPICKLE},
    "types.FunctionType": "function",
    "types.LambdaType": "function",
    "types.CodeType": "code",
    "functools.partial": "partial",
    "jax._src.custom_derivatives.custom_jvp": "custom_jvp",
    "jax._src.custom_derivatives.custom_vjp": "custom_vjp",
}
_BUILTIN_TYPE = frozenset(f"{m}._builtin_type" for m in _CLOUDPICKLE)
_BUILTIN_KINDS = {"FunctionType": "function", "LambdaType": "function", "CodeType": "code"}
_MAX_NESTING = 8  # functions wrapping functions (custom_jvp -> jit -> function)


def _is_pjit(class_path: str) -> bool:
    return class_path.endswith(".PjitFunction") and class_path.startswith(("jaxlib.", "jax."))


def needs_collapse(blocked: list[str]) -> bool:
    """Whether a read's blocked class paths include a maker of functions."""
    return any(cp in _MAKERS or cp in _BUILTIN_TYPE or _is_pjit(cp) for cp in blocked)


def _kind(o: Opaque) -> str | None:
    cp = o.class_path
    kind = _MAKERS.get(cp)
    if kind is not None:
        return kind
    if _is_pjit(cp):
        return "PjitFunction"
    src = o.source
    if (
        src is not None
        and src.class_path in _BUILTIN_TYPE
        and len(src.args) == 1
        and type(src.args[0]) is str
    ):
        return _BUILTIN_KINDS.get(src.args[0])
    return None


def _code_info(code: Any) -> tuple[str, str | None] | None:
    """`(qualname, code digest)` of a pickled code object (CodeType's constructor arguments)."""
    if type(code) is not Opaque or _kind(code) != "code":
        return None
    args = code.args
    if len(args) < 16:
        return None
    # Python 3.11+: (..., filename, name, qualname, firstlineno, ...); before: no qualname
    qual = printable_name(args[12]) if len(args) >= 18 else None
    qual = qual or printable_name(args[11])
    if qual is None:
        return None
    return qual, code_key(args[6], args[8], args[7])


def _identity(x: Any, depth: int = 0) -> tuple[str | None, str, str | None] | None:
    """`(module, qualname, code digest)` of a function the file made, or None."""
    if depth > _MAX_NESTING:
        return None
    if type(x) is OpaqueFunction:
        return x.module, x.qualname, x.code
    if type(x) is GlobalRef:
        return printable_name(x.module), printable_name(x.name) or "?", None
    if type(x) is not Opaque:
        return None
    kind = _kind(x)
    if kind == "function":
        args = x.args
        info = _code_info(args[0]) if args else None
        if info is None:
            return None
        g = args[1] if len(args) > 1 else None
        module = printable_name(g.get("__name__")) if isinstance(g, dict) else None
        return module, info[0], info[1]
    if kind == "code":
        info = _code_info(x)
        return None if info is None else (None, info[0], info[1])
    if kind in ("custom_jvp", "custom_vjp"):
        st = x.fields
        inner = None
        for attr in ("__wrapped__", "fun"):
            inner = _identity(st.get(attr), depth + 1)
            if inner is not None:
                break
        qual = printable_name(st.get("__qualname__")) or printable_name(st.get("__name__"))
        module = printable_name(st.get("__module__"))
        if qual is None:
            return inner
        return module, qual, inner[2] if inner is not None else None
    if kind == "PjitFunction":
        st = x.fields
        inner = _identity(st.get("fun"), depth + 1)
        if inner is not None:
            return inner
        name = printable_name(st.get("function_name"))
        return None if name is None else (None, name, None)
    if kind == "partial":
        st = x.state
        func = x.args[0] if x.args else (st[0] if isinstance(st, tuple) and st else None)
        inner = _identity(func, depth + 1)
        if inner is None:
            return None
        inner_fn = OpaqueFunction(inner[0], inner[1], "function", inner[2])
        return "functools", f"partial({inner_fn.label})", inner[2]
    return None


def as_function(o: Opaque) -> OpaqueFunction | None:
    """The `OpaqueFunction` an Opaque stands for, or None if it is not a function."""
    kind = _kind(o)
    if kind is None:
        return None
    ident = _identity(o)
    if ident is None:
        return None
    return OpaqueFunction(ident[0], ident[1], kind, ident[2])


_MUTABLE = (dict, list, collections.OrderedDict, collections.defaultdict)
_IMMUTABLE = (tuple, set, frozenset)
_WALKED = frozenset((*_MUTABLE, *_IMMUTABLE, Opaque))


class _NoArray:
    """Stands for numpy's array type while numpy is not imported (no value has this type)."""


def _ndarray() -> type:
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    return np.ndarray if np is not None else _NoArray


def _kids(obj: Any) -> list[Any]:
    t = type(obj)
    if t is _ndarray():  # an object array (others are never pushed)
        return obj.reshape(-1).tolist()
    if t is Opaque:
        return [obj.args, obj.state, obj.listitems, obj.dictitems, obj.kwargs, obj.source]
    if t in (dict, collections.OrderedDict, collections.defaultdict):
        return list(obj.values())
    return list(obj)


def collapse_functions(tree: Any) -> tuple[Any, list[str]]:
    """Replace every function-making `Opaque` by an `OpaqueFunction` leaf.

    Returns the new tree (dicts, lists and Opaque nodes are updated in place; tuples and sets
    that held a function are rebuilt) and the sorted class paths of what was not executed.
    Each object is visited once, however often the tree shares it; the tree was checked to be
    acyclic and bounded by the reader.
    """
    repl: dict[int, Any] = {}  # id -> replacement, for objects that changed
    done: set[int] = set()
    blocked: set[str] = set()
    stack: list[tuple[Any, bool]] = [(tree, False)]
    pop, push = stack.pop, stack.append
    ndarray = _ndarray()
    while stack:
        obj, leaving = pop()
        oid = id(obj)
        if leaving:
            new = _rebuild(obj, repl)
            if new is not obj:
                repl[oid] = new
            done.add(oid)
            continue
        if oid in done:
            continue
        t = type(obj)
        if t is GlobalRef:
            if not obj.tag:
                blocked.add(obj.class_path)
            done.add(oid)
            continue
        if t is Opaque:
            fn = as_function(obj)
            if fn is not None:
                blocked.add(obj.class_path if obj.source is None else obj.source.class_path)
                repl[oid] = fn
                done.add(oid)
                continue
            if obj.source is None:
                blocked.add(obj.class_path)
        elif t not in _WALKED and not (t is ndarray and obj.dtype.hasobject):
            done.add(oid)
            continue
        push((obj, True))
        for c in _kids(obj):
            tc = type(c)
            if tc in _WALKED or tc is GlobalRef or (tc is ndarray and c.dtype.hasobject):
                push((c, False))
    return repl.get(id(tree), tree), sorted(blocked)


def _swap(x: Any, repl: dict[int, Any]) -> Any:
    return repl.get(id(x), x)


def _rebuild(obj: Any, repl: dict[int, Any]) -> Any:
    t = type(obj)
    if t is Opaque:
        obj.args = _swap(obj.args, repl)
        obj.state = _swap(obj.state, repl)
        return obj
    if t in (dict, collections.OrderedDict, collections.defaultdict):
        for k, v in obj.items():
            if id(v) in repl:
                obj[k] = repl[id(v)]
        return obj
    if t is _ndarray():
        for i, v in enumerate(obj.flat):  # .flat writes through, whatever the layout
            if id(v) in repl:
                obj.flat[i] = repl[id(v)]
        return obj
    if t is list:
        for i, v in enumerate(obj):
            if id(v) in repl:
                obj[i] = repl[id(v)]
        return obj
    if any(id(v) in repl for v in obj):  # tuple, set, frozenset
        return t(_swap(v, repl) for v in obj)
    return obj

"""`autojit`: jit any function of pytrees; arrays are traced, every other leaf is static.

One `jax.jit` function is kept per (argument structure, static leaf values); jax's own cache
handles new shapes under it. Each call costs one C++ flatten, one pass that splits the leaves,
and one dict lookup, so dispatch is cheaper than `equinox.filter_jit`'s. Every compile is
recorded with its reason: the first call, a static value that changed (by path), a shape or
dtype that changed (by path), or a different structure.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from treetool._errors import TreetoolError
from treetool._public import set_module

__all__ = ["AutoJit", "CacheInfo", "autojit"]


class CacheInfo(NamedTuple):
    """Calls served from the cache (`hits`), compiles (`misses`) and why each compile happened."""

    hits: int
    misses: int
    entries: int
    reasons: list[str]


class _Dyn:
    """Marks a traced position in a cache key (one shared instance, hashed by identity)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<traced>"


_DYN = _Dyn()


class _Plan:
    """Which leaves of one argument structure are traced: interned per (structure, mask), so
    a plan (hashed by identity) stands for its structure in cache keys."""

    __slots__ = ("mask", "take_dyn", "take_static", "treedef")

    def __init__(self, treedef: Any, mask: tuple[bool, ...]) -> None:
        self.treedef = treedef
        self.mask = mask
        self.take_dyn = _getter([i for i, d in enumerate(mask) if d])
        self.take_static = _getter([i for i, d in enumerate(mask) if not d])


def _getter(idx: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """`itemgetter` that always returns a tuple (also for zero or one index)."""
    if not idx:
        return lambda _: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda leaves: (leaves[i],)
    return itemgetter(*idx)


@dataclass
class _Entry:
    """One jitted function: for one structure, one traced/static split and one set of statics."""

    jitted: Any
    treedef: Any
    plan: _Plan
    statics: tuple[Any, ...]
    traces: list[tuple[Any, ...]] = field(default_factory=list)  # avals of each trace

    @property
    def key(self) -> list[Any]:
        """Every leaf position: `_DYN` where traced, else the static value."""
        it = iter(self.statics)
        return [_DYN if d else next(it) for d in self.plan.mask]


class _OutMeta:
    """How to rebuild one trace's output: its structure, its static leaves, which are traced.

    Compared by identity. jax keeps it in the output structure of the trace that made it, so
    each compiled shape returns its own static outputs (`x.shape`, a string, a flag).
    """

    __slots__ = ("all_dyn", "is_dyn", "statics", "treedef")

    def __init__(self, treedef: Any, statics: list[Any], is_dyn: tuple[bool, ...]) -> None:
        self.treedef = treedef
        self.statics = statics
        self.is_dyn = is_dyn
        self.all_dyn = all(is_dyn)


class _Out:
    """The traced function's result: the array outputs as children, the rest in `_OutMeta`."""

    __slots__ = ("dyn", "meta")

    def __init__(self, meta: _OutMeta, dyn: Any) -> None:
        self.meta = meta
        self.dyn = dyn


_out_registered = False


def _register_out() -> None:
    global _out_registered
    if not _out_registered:
        import jax

        jax.tree_util.register_pytree_node(
            _Out, lambda o: (o.dyn, o.meta), lambda meta, dyn: _Out(meta, dyn)
        )
        _out_registered = True


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list, set, frozenset)) else (x,)


class AutoJit:
    """A function jitted by `autojit`; call it like the function. See `autojit`.

    Example:
        >>> import jax.numpy as jnp
        >>> f = autojit(lambda x, label: (x + 1, label))
        >>> f(jnp.zeros(2), "ok")
        (Array([1., 1.], dtype=float32), 'ok')
        >>> f
        <autojit <lambda>: 1 compiled, 0 hits>
    """

    def __init__(self, fn: Callable[..., Any], trace_numpy: bool, jit_kwargs: dict[str, Any]):
        for bad in ("static_argnums", "static_argnames"):
            if bad in jit_kwargs:
                raise TypeError(f"autojit decides what is static; do not pass {bad}")
        import jax
        import numpy as np

        for name in ("in_shardings", "out_shardings"):
            value = jit_kwargs.get(name)
            if value is not None and not isinstance(value, jax.sharding.Sharding):
                raise TypeError(
                    f"autojit: {name} must be one jax.sharding.Sharding for every array "
                    f"(the arguments are flattened), got {type(value).__name__}; place the "
                    "arguments with jax.device_put instead"
                )
        _register_out()
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.trace_numpy = trace_numpy
        self.jit_kwargs = dict(jit_kwargs)
        self._donate_nums = _as_tuple(self.jit_kwargs.pop("donate_argnums", None))
        self._donate_names = _as_tuple(self.jit_kwargs.pop("donate_argnames", None))
        self._traced_types: tuple[type, ...] = (
            (jax.Array, np.ndarray, np.generic) if trace_numpy else (jax.Array,)
        )
        self._flatten = jax.tree_util.tree_flatten
        self._cache: dict[Any, _Entry] = {}
        self._plans: dict[Any, _Plan] = {}  # structure -> the split seen last
        self._dyn_types: set[type] = set()  # concrete types seen to be traced ...
        self._static_types: set[type] = set()  # ... and seen to be static
        self._interned: dict[Any, _Plan] = {}  # (structure, mask) -> plan
        self._hits = 0
        self._reasons: list[str] = []
        self._last: _Entry | None = None

    # --- calling --------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = self._flatten((args, kwargs))
        plan = self._plans.get(treedef)
        if plan is not None:
            dyn = plan.take_dyn(leaves)
            statics = plan.take_static(leaves)
            # the split holds if every leaf's type is one already seen in its role
            if not (
                self._dyn_types.issuperset(map(type, dyn))
                and self._static_types.issuperset(map(type, statics))
            ):
                plan = None  # new types, or the same structure with another split
        if plan is None:
            plan = self._plan(treedef, leaves)
            dyn = plan.take_dyn(leaves)
            statics = plan.take_static(leaves)
        key = (plan, statics)
        try:
            entry = self._cache.get(key)
        except TypeError:
            raise self._unhashable(args, kwargs) from None
        if entry is None:
            entry = self._new_entry(key, args, kwargs)
        n = len(entry.traces)
        try:
            out = entry.jitted(*dyn)
        except BaseException:
            del entry.traces[n:]  # a trace that failed compiled nothing
            if not entry.traces:
                self._cache.pop(key, None)
            raise
        if len(entry.traces) == n:
            self._hits += 1
        else:
            self._reasons.append(self._why(entry, args, kwargs))
        self._last = entry
        meta = out.meta
        if meta.all_dyn:
            return meta.treedef.unflatten(out.dyn)
        it = iter(out.dyn)
        return meta.treedef.unflatten(
            [next(it) if d else s for s, d in zip(meta.statics, meta.is_dyn)]
        )

    def _plan(self, treedef: Any, leaves: list[Any]) -> _Plan:
        traced = self._traced_types
        mask = tuple(isinstance(x, traced) for x in leaves)
        for x, d in zip(leaves, mask):
            (self._dyn_types if d else self._static_types).add(type(x))
        plan = self._interned.get((treedef, mask))
        if plan is None:
            plan = self._interned[(treedef, mask)] = _Plan(treedef, mask)
        self._plans[treedef] = plan
        return plan

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self, instance)  # `obj.method.cache_info()` works too

    def cache_info(self) -> CacheInfo:
        """Hits, misses (compiles), cached entries, and the reason for each compile, in order.

        Example:
            >>> import jax.numpy as jnp
            >>> f = autojit(lambda x, n: x * n)
            >>> _ = f(jnp.ones(2), 2); _ = f(jnp.ones(2), 2); _ = f(jnp.ones(2), 3)
            >>> f.cache_info()
            CacheInfo(hits=1, misses=2, entries=2, reasons=['first call', 'static value at args[1] changed: 2 -> 3'])
        """
        return CacheInfo(self._hits, len(self._reasons), len(self._cache), list(self._reasons))

    def clear_cache(self) -> None:
        """Forget every compiled function and the statistics.

        Example:
            >>> import jax.numpy as jnp
            >>> f = autojit(lambda x: x + 1)
            >>> _ = f(jnp.ones(2)); f.clear_cache(); _ = f(jnp.ones(2))
            >>> f.cache_info()
            CacheInfo(hits=0, misses=1, entries=1, reasons=['first call'])
        """
        self._cache.clear()
        self._hits = 0
        self._reasons.clear()
        self._last = None

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"<autojit {name}: {len(self._cache)} compiled, {self._hits} hits>"

    # --- the traced function ----------------------------------------------------------------

    def _new_entry(self, key: tuple[_Plan, tuple[Any, ...]], args: Any, kwargs: Any) -> _Entry:
        import jax

        plan, statics = key
        treedef = plan.treedef
        fn = self.fn
        out_types = (jax.Array, *self._traced_types)
        mask = plan.mask
        entry = _Entry(None, treedef, plan, statics)

        def inner(*dyn: Any) -> _Out:
            entry.traces.append(tuple((tuple(x.shape), str(x.dtype)) for x in dyn))
            d, s = iter(dyn), iter(statics)
            full = [next(d) if m else next(s) for m in mask]
            a, kw = jax.tree_util.tree_unflatten(treedef, full)
            out_leaves, out_def = jax.tree_util.tree_flatten(fn(*a, **kw))
            is_dyn = tuple(isinstance(x, out_types) for x in out_leaves)
            out_static = [None if d else x for x, d in zip(out_leaves, is_dyn)]
            traced = [x for x, d in zip(out_leaves, is_dyn) if d]
            return _Out(_OutMeta(out_def, out_static, is_dyn), traced)

        jit_kwargs = self.jit_kwargs
        if self._donate_nums or self._donate_names:
            jit_kwargs = {**jit_kwargs, "donate_argnums": self._donated(mask, args, kwargs)}
        entry.jitted = jax.jit(inner, **jit_kwargs)
        self._cache[key] = entry
        return entry

    def _donated(self, mask: tuple[bool, ...], args: Any, kwargs: Any) -> tuple[int, ...]:
        """Positions, among the traced leaves, of the leaves of the donated arguments."""
        import jax

        nums = {i % len(args) for i in self._donate_nums} if args else set()
        owners: list[bool] = []  # per leaf of (args, kwargs): is its argument donated?
        for i, a in enumerate(args):
            owners += [i in nums] * len(jax.tree_util.tree_leaves(a))
        for name in sorted(kwargs):  # jax flattens a dict in sorted key order
            n = len(jax.tree_util.tree_leaves(kwargs[name]))
            owners += [name in self._donate_names] * n
        dyn_owners = [o for o, m in zip(owners, mask, strict=True) if m]
        return tuple(j for j, o in enumerate(dyn_owners) if o)

    # --- explanations (only on a compile or an error: never on the fast path) ----------------

    def _why(self, entry: _Entry, args: Any, kwargs: Any) -> str:
        if len(entry.traces) > 1:
            return _shape_change(
                entry.traces[-2], entry.traces[-1], self._paths(args, kwargs, entry)
            )
        others = [e for e in self._cache.values() if e is not entry]
        if not others:
            return "first call"
        prev = self._last if self._last is not None and self._last is not entry else others[-1]
        if prev.treedef != entry.treedef:
            return _structure_change(prev, entry)
        changes = []
        for path, old, new in zip(self._all_paths(args, kwargs), prev.key, entry.key):
            if old is new:
                continue
            if old is _DYN or new is _DYN:
                now = "traced" if new is _DYN else f"static ({_short(new)})"
                changes.append((path, f"{path} is now {now}"))
            elif not _same(old, new):
                changes.append(
                    (path, f"static value at {path} changed: {_short(old)} -> {_short(new)}")
                )
        if not changes:
            return "static values changed"
        text = changes[0][1]
        if len(changes) > 1:
            more = [p for p, _ in changes[1:]]
            shown = ", ".join(more[:3]) + (", …" if len(more) > 3 else "")
            text += f" (and {len(more)} more: {shown})"
        return text

    def _all_paths(self, args: Any, kwargs: Any) -> list[str]:
        import jax

        flat, _ = jax.tree_util.tree_flatten_with_path((args, kwargs))
        return [_call_text(jp) for jp, _ in flat]

    def _paths(self, args: Any, kwargs: Any, entry: _Entry) -> list[str]:
        """Paths of the traced leaves, in the order `inner` receives them."""
        return [p for p, k in zip(self._all_paths(args, kwargs), entry.key) if k is _DYN]

    def _unhashable(self, args: Any, kwargs: Any) -> TreetoolError:
        import jax

        flat, _ = jax.tree_util.tree_flatten_with_path((args, kwargs))
        for jp, x in flat:
            if isinstance(x, self._traced_types):
                continue
            try:
                hash(x)
            except TypeError:
                hint = (
                    "; pass it as a jax array, or use trace_numpy=True"
                    if not self.trace_numpy and type(x).__module__ == "numpy"
                    else "; make it hashable (a tuple, a frozen dataclass) or pass it as an array"
                )
                return TreetoolError(
                    f"autojit({getattr(self.fn, '__name__', 'fn')}): the static leaf at "
                    f"{_call_text(jp)} is an unhashable {type(x).__name__}{hint}"
                )
        return TreetoolError(f"autojit: the argument structure of {self.fn!r} is unhashable")


@set_module("treetool.transforms")
def autojit(
    fn: Callable[..., Any] | None = None, *, trace_numpy: bool = True, **jit_kwargs: Any
) -> Any:
    """`jax.jit` for functions of any pytrees: array leaves are traced, all others are static.

    Arguments are flattened (args and kwargs alike); jax arrays, and numpy arrays unless
    `trace_numpy=False`, are traced; every other leaf (strings, numbers, functions, config
    dataclasses) is static and must be hashable. One compiled function is kept per structure and
    static values; jax's own cache handles new shapes under it. Outputs may hold non-array
    leaves (strings, shapes): each compiled shape returns those of its own trace, as
    `equinox.filter_jit` does. `f.cache_info()` gives hits, misses and the reason of each
    compile. Works as `@autojit`, as `@autojit(**jit_kwargs)` and on methods (`self` is an
    argument like the others: an `eqx.Module` is traced, a plain object is a static leaf).

    `jit_kwargs` go to `jax.jit`. `donate_argnums` and `donate_argnames` name the arguments
    (counting `self`), and donate every array inside them; `in_shardings` and
    `out_shardings` may be one `Sharding` for all arrays; `static_argnums` and
    `static_argnames` are refused (autojit decides what is static).

    Example:
        >>> import jax.numpy as jnp
        >>> @autojit
        ... def scale(x, how):
        ...     return x * 2 if how == "double" else x
        >>> scale(jnp.arange(3.0), "double").tolist(), scale(jnp.arange(3.0), "same").tolist()
        ([0.0, 2.0, 4.0], [0.0, 1.0, 2.0])
        >>> scale.cache_info().reasons
        ['first call', "static value at args[1] changed: 'double' -> 'same'"]
    """
    if fn is None:
        return lambda f: AutoJit(f, trace_numpy, jit_kwargs)
    return AutoJit(fn, trace_numpy, jit_kwargs)


def _call_text(jp: tuple) -> str:
    """A leaf of `(args, kwargs)` named `args[0].w` or `kwargs['x']`."""
    import jax

    head = "args" if jp[0].idx == 0 else "kwargs"
    return head + jax.tree_util.keystr(tuple(jp[1:]))


def _short(x: Any, limit: int = 60) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an == that raises or returns an array: not the same
        return False


def _label(aval: tuple[tuple[int, ...], str]) -> str:
    from treetool._leaves._arrays import short_dtype

    shape, dtype = aval
    return f"{short_dtype(dtype)}[{','.join(map(str, shape))}]"


def _shape_change(old: tuple[Any, ...], new: tuple[Any, ...], paths: list[str]) -> str:
    for path, a, b in zip(paths, old, new):
        if a != b:
            what = "shape" if a[0] != b[0] else "dtype"
            return f"{what} of {path} changed: {_label(a)} -> {_label(b)}"
    return "jax retraced (weak types or shardings changed)"


def _structure_change(prev: _Entry, entry: _Entry) -> str:
    """The first structural difference between two calls, by path (static fields included)."""
    from treetool._diff._tree_diff import diff

    n_old, n_new = prev.treedef.num_leaves, entry.treedef.num_leaves
    count = f" ({_leaves(n_old)} -> {_leaves(n_new)})" if n_old != n_new else ""
    try:  # placeholders for the leaves: only the structure and the static data are compared
        old = prev.treedef.unflatten([0] * n_old)
        new = entry.treedef.unflatten([0] * n_new)
        changes = diff(old, new, values=False).changes
    except Exception:  # custom nodes that cannot be rebuilt from placeholders
        changes = []
    if not changes:
        return f"argument structure changed{count}"
    c = changes[0]
    where = _call_path_text(c.path)
    if c.kind == "static":
        field_names = ", ".join(c.detail.get("fields", [])) if isinstance(c.detail, dict) else ""
        before, after = c.before, c.after
        if isinstance(before, dict) and isinstance(after, dict) and len(before) == 1:
            (name,) = before
            before, after = before[name], after.get(name)
        return f"static field {field_names} of {where} changed: {_short(before)} -> {_short(after)}"
    if c.kind in ("added", "removed"):
        return f"argument structure changed{count}: {where} {c.kind}"
    after = c.after if isinstance(c.after, str) else _short(c.after)
    if after == "int":  # a leaf (the placeholders above are ints)
        after = "a leaf"
    return f"argument structure changed{count}: {where} is now {after}"


def _leaves(n: int) -> str:
    return f"{n} leaf" if n == 1 else f"{n} leaves"


def _call_path_text(path: str) -> str:
    """`[0][1].w` (a path in `(args, kwargs)`) as `args[1].w`; `[1]['k']` as `kwargs['k']`."""
    if path.startswith("[0]"):
        return "args" + path[3:]
    if path.startswith("[1]"):
        return "kwargs" + path[3:]
    return path or "the arguments"

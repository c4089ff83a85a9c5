"""Replaying a `where` function on a recording proxy, to learn the paths it picks.

`eqx.tree_at` finds the nodes a `where` function returns by flattening the whole tree twice
and comparing object identities, which costs seconds on big models. Most `where` functions
only walk the structure: `lambda m: m.layers[-1].weight`, `lambda m: [l.bias for l in
m.layers]`. Run on a proxy that records attribute and index steps, they tell the exact paths
of the nodes they pick, at the cost of the steps themselves.

The replay gives up (raises `Fallback`, and the caller uses the general method) as soon as
the function does anything the proxy cannot answer exactly as the real tree would: touching a
leaf, calling a method, comparing nodes, reading a static field, returning anything but nodes.
A static look at the function's code also sends functions that call other functions (which
could look at proxies in ways a proxy cannot see, such as `type(x)` or jax flattening) to the
general method before they run.
"""

from __future__ import annotations

import builtins
import dis
import operator
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, cast

from treetool._paths._path import DictKey, GetAttrKey, Key, Path, SequenceKey
from treetool._surgery._edit import Level, Levels, open_level
from treetool._tree._model import CUSTOM, DICT, LEAF, LIST, NAMEDTUPLE, NONE, TUPLE, IsLeaf

__all__ = ["Fallback", "record"]


class Fallback(Exception):
    """The replay cannot answer this exactly; use the general method."""


_SAFE_BUILTINS = frozenset(
    id(getattr(builtins, n))
    for n in (
        "isinstance",
        "len",
        "range",
        "enumerate",
        "zip",
        "reversed",
        "tuple",
        "list",
        "hasattr",
        "getattr",
        "slice",
        "min",
        "max",
        "abs",
        "int",
    )
)
_SAFE_METHODS = frozenset({"items", "values", "keys"})  # of dict nodes, on the proxy
_LIST_METHODS = frozenset({"append", "extend"})  # building the result list
_BUILTIN_IDS = frozenset(id(v) for v in vars(builtins).values())
_METHOD_ATTR = sys.version_info >= (3, 12)


def _names(code: types.CodeType) -> tuple[frozenset[str], bool]:
    """(global names loaded, whether the code does something never allowed) of code objects."""
    hit = _code_cache.get(code)
    if hit is not None:
        return hit
    globs: set[str] = set()
    bad = False
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            op = ins.opname
            if op in ("LOAD_GLOBAL", "LOAD_NAME"):
                globs.add(ins.argval)
            elif op == "LOAD_METHOD" or (_METHOD_ATTR and op == "LOAD_ATTR" and (ins.arg or 0) & 1):
                if ins.argval not in _SAFE_METHODS and ins.argval not in _LIST_METHODS:
                    bad = True
            elif op in ("IMPORT_NAME", "IMPORT_FROM", "STORE_GLOBAL", "STORE_ATTR"):
                bad = True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    out = (frozenset(globs), bad)
    if len(_code_cache) > 4096:
        _code_cache.clear()
    _code_cache[code] = out
    return out


_code_cache: dict[types.CodeType, tuple[frozenset[str], bool]] = {}


def _value_ok(v: Any, depth: int = 0) -> bool:
    """Whether a value a `where` function can reach by name is safe to let it use.

    Functions are not (they could look at a proxy in ways it cannot see); nor are containers
    of functions, four levels deep.
    """
    if id(v) in _SAFE_BUILTINS or isinstance(v, types.ModuleType):
        return True
    if type(v) in (list, tuple, set, frozenset, dict):
        if depth >= 4:
            return False
        items = list(v.values()) if type(v) is dict else v
        return len(items) <= 10_000 and all(_value_ok(x, depth + 1) for x in items)
    if not callable(v):
        return True
    # classes (for isinstance), but not the builtins that would see through the proxy (type, id…)
    return isinstance(v, type) and id(v) not in _BUILTIN_IDS


def replayable(where: Callable[..., Any]) -> bool:
    """Whether `where` may be replayed on a proxy (it only walks and picks, as far as we see)."""
    if isinstance(where, (operator.attrgetter, operator.itemgetter)):
        return True
    if type(where) is not types.FunctionType:
        return False
    code = where.__code__
    names, bad = _names(code)
    if bad:
        return False
    g = where.__globals__
    bi = g.get("__builtins__", builtins)
    bi = bi if isinstance(bi, dict) else vars(bi)
    for n in names:
        if n in g:
            v = g[n]
        elif n in bi:
            v = bi[n]
        else:
            return False
        if not _value_ok(v):
            return False
    for cell in where.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell: a name bound later
            return False
        if not _value_ok(v):
            return False
    extra = list(where.__defaults__ or ()) + list((where.__kwdefaults__ or {}).values())
    return all(_value_ok(v) for v in extra)


class _Ctx:
    __slots__ = ("is_leaf", "levels", "none_is_leaf")

    def __init__(self, is_leaf: IsLeaf, levels: Levels) -> None:
        self.is_leaf = is_leaf
        self.levels = levels
        self.none_is_leaf = bool(is_leaf is not None and is_leaf(None))


class Rec:
    """A stand-in for a node of the tree that remembers how it was reached."""

    __slots__ = ("_tt_ctx", "_tt_key", "_tt_kids", "_tt_level", "_tt_obj", "_tt_parent")

    def __init__(self, obj: Any, parent: Rec | None, key: Key | None, ctx: _Ctx) -> None:
        self._tt_obj = obj
        self._tt_parent = parent
        self._tt_key = key
        self._tt_ctx = ctx
        self._tt_kids: dict[Any, Rec] = {}
        self._tt_level: Level | None = None

    def _tt_path(self) -> Path:
        keys = []
        r: Rec | None = self
        while r is not None and r._tt_key is not None:
            keys.append(r._tt_key)
            r = r._tt_parent
        return Path._make(tuple(reversed(keys)))

    # --- the structure ------------------------------------------------------------------
    def _lv(self) -> Level:
        lv = self._tt_level
        if lv is None:
            lv = self._tt_level = open_level(
                self._tt_obj, self._tt_ctx.is_leaf, self._tt_ctx.levels
            )
        if lv.kind in (LEAF, NONE):
            raise Fallback
        return lv

    def _new(self, tag: Any, key: Key, obj: Any) -> Any:
        if obj is None and not self._tt_ctx.none_is_leaf:
            # The real None: `x is None` must work, and a None cannot be picked by identity
            # anyway (equinox's rules apply, through the general method).
            return None
        r = self._tt_kids[tag] = Rec(obj, self, key, self._tt_ctx)
        return r

    def _all(self) -> list[Any]:
        """Every child, in jax's order."""
        lv = self._lv()
        kids = self._tt_kids
        out = []
        for k, c in zip(lv.keys, lv.kids):
            tag = _tag(lv.kind, k)
            r = kids.get(tag)
            out.append(r if r is not None else self._new(tag, k, c))
        return out

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise Fallback
        lv = self._lv()
        kind = lv.kind
        if kind in (NAMEDTUPLE, CUSTOM):
            tag = name if kind == NAMEDTUPLE else (".", name)
            r = self._tt_kids.get(tag)
            if r is not None:
                return r
            key = GetAttrKey(name)
            i = lv.index(key)
            if i is None:
                raise Fallback
            child = lv.kids[i]
            if kind == CUSTOM and getattr(self._tt_obj, name, _MISSING) is not child:
                raise Fallback
            return self._new(tag, key, child)
        if kind == DICT and name in _SAFE_METHODS:
            return getattr(self, "_tt_" + name)
        raise Fallback

    def _tt_items(self) -> list[tuple[Any, Any]]:
        return [(cast(DictKey, k).key, r) for k, r in zip(self._lv().keys, self._all())]

    def _tt_values(self) -> list[Any]:
        return self._all()

    def _tt_keys(self) -> list[Any]:
        return [cast(DictKey, k).key for k in self._lv().keys]

    def __getitem__(self, item: Any) -> Any:
        lv = self._lv()
        obj, kind = self._tt_obj, lv.kind
        if type(item) is Rec:
            raise Fallback
        if kind == DICT:
            try:
                r = self._tt_kids.get(item)
                if r is not None:
                    return r
                child = obj.get(item, _MISSING)
            except TypeError:  # unhashable
                raise Fallback from None
            if child is _MISSING:
                raise Fallback
            return self._new(item, DictKey(item), child)
        if kind in (LIST, TUPLE, NAMEDTUPLE):
            n = len(obj)
            if isinstance(item, slice):
                picked = [self._seq_kid(lv, i) for i in range(*item.indices(n))]
                return picked if kind == LIST else tuple(picked)
            i = operator.index(item)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise Fallback
            return self._seq_kid(lv, i)
        if kind == CUSTOM:
            tag = ("[", item)
            r = self._tt_kids.get(tag)
            if r is not None:
                return r
            for key in (DictKey(item), SequenceKey(item) if type(item) is int else None):
                j = None if key is None else lv.index(key)
                if key is not None and j is not None:
                    child = lv.kids[j]
                    try:
                        real = obj[item]
                    except Exception:
                        raise Fallback from None
                    if real is not child:
                        raise Fallback
                    return self._new(tag, key, child)
        raise Fallback

    def _seq_kid(self, lv: Level, i: int) -> Any:
        if lv.kind == NAMEDTUPLE:
            key = lv.keys[i]
            tag = key.name  # type: ignore[attr-defined]
            r = self._tt_kids.get(tag)
            return r if r is not None else self._new(tag, key, lv.kids[i])
        r = self._tt_kids.get(i)
        return r if r is not None else self._new(i, SequenceKey(i), self._tt_obj[i])

    def __iter__(self) -> Iterator[Any]:
        lv = self._lv()
        if lv.kind in (LIST, TUPLE, NAMEDTUPLE):
            return iter(self._all())
        if lv.kind == DICT:
            return iter([cast(DictKey, k).key for k in lv.keys])
        raise Fallback

    def __len__(self) -> int:
        lv = self._lv()
        if lv.kind in (LIST, TUPLE, NAMEDTUPLE, DICT):
            return len(lv.keys)
        raise Fallback

    def __bool__(self) -> bool:
        return self.__len__() > 0

    def __contains__(self, item: Any) -> bool:
        lv = self._lv()
        if lv.kind == DICT and not isinstance(item, Rec):
            try:
                return item in self._tt_obj
            except TypeError:
                raise Fallback from None
        raise Fallback

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(node, eqx.nn.Linear) sees the real class
        lv = self._tt_level or open_level(self._tt_obj, self._tt_ctx.is_leaf, self._tt_ctx.levels)
        if lv.kind == LEAF:
            raise Fallback
        return type(self._tt_obj)

    def __repr__(self) -> str:
        return f"<node at {str(self._tt_path()) or 'the root'}>"

    def _no(self, *args: Any, **kwargs: Any) -> Any:
        raise Fallback

    __setitem__ = __delitem__ = __call__ = _no
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _no
    __index__ = __array__ = __jax_array__ = __format__ = __reduce__ = __reduce_ex__ = _no


_MISSING = object()


def _tag(kind: str, key: Key) -> Any:
    """The cache tag of a child, as the accessors above write it."""
    if kind == DICT:
        return key.key  # type: ignore[attr-defined]
    if kind in (LIST, TUPLE):
        return key.idx  # type: ignore[attr-defined]
    if kind == NAMEDTUPLE:
        return key.name  # type: ignore[attr-defined]
    if type(key) is GetAttrKey:
        return (".", key.name)
    if type(key) is DictKey:
        return ("[", key.key)
    if type(key) is SequenceKey:
        return ("[", key.idx)
    return ("?", key)


def _all_of_a_tuple(out: tuple) -> bool:
    """Whether `out` holds every child of one tuple node, in order (what `tuple(node)` gives)."""
    parent = out[0]._tt_parent if out else None
    if parent is None or type(parent._tt_obj) is not tuple or len(parent._tt_obj) != len(out):
        return False
    return all(r._tt_parent is parent and r._tt_key == SequenceKey(i) for i, r in enumerate(out))


_guarded = False


def _refuse_flatten(rec: Rec) -> Any:
    raise Fallback


def _refuse_unflatten(aux: Any, kids: Any) -> Rec:
    raise Fallback


def _guard_jax() -> None:
    """Make jax refuse to flatten a proxy: jax tree functions called by `where` (say through a
    local alias of `jax.tree_util.tree_leaves`) would otherwise see each proxy as a leaf."""
    global _guarded
    if _guarded or "jax" not in sys.modules:
        return
    import jax

    jax.tree_util.register_pytree_node(Rec, _refuse_flatten, _refuse_unflatten)
    _guarded = True


def record(where: Callable[[Any], Any], tree: Any, is_leaf: IsLeaf, levels: Levels) -> Any:
    """Run `where` on a proxy of `tree`: a Path, or a list of Paths when it returns a sequence.

    Raises:
        Fallback: the replay cannot be trusted to pick what `where` picks on the real tree.
    """
    if not replayable(where):
        raise Fallback
    _guard_jax()
    ctx = _Ctx(is_leaf, levels)
    root = Rec(tree, None, None, ctx)
    try:
        out = where(root)
    except Exception:
        raise Fallback from None
    if type(out) is Rec:
        return out._tt_path()
    if type(out) in (list, tuple) and all(type(x) is Rec for x in out):
        if type(out) is tuple and _all_of_a_tuple(out):
            # `tuple(m.layers)` of a tuple node is that very node in equinox, but so looks
            # `(m.layers[0], m.layers[1])`, a new tuple: only identities can tell them apart
            raise Fallback
        return [x._tt_path() for x in out]
    raise Fallback

"""The node-type table: how to open any object one level, the way jax does.

Every walk, view, edit and renderer asks this module what an object's children are. Each type
is looked at once and gets a `Rule` (cached per type): builtin containers (dict, list, tuple,
None, OrderedDict, defaultdict), namedtuples (plain, or registered with jax with a rule of their
own), treetool's own node types (`register_flattener`, `tt.pytree_node`/`tt.register_node`
classes), equinox modules (read by field), and every other type through jax's public one-level
flatten. Hot loops may inline the builtin dict/list/tuple/None cases and nothing else.

Loaded files need no jax: without jax imported nothing can have been registered with it, so
builtins, namedtuples and treetool's own nodes are opened here and everything else is a leaf.
"""

from __future__ import annotations

import collections
import enum
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from treetool._leaves._arrays import is_array
from treetool._paths._path import DictKey, GetAttrKey, Key, SequenceKey, from_jax_key
from treetool._typetests import is_getattr_key

__all__ = [
    "LEAF_TYPES",
    "RULES",
    "UNSORTABLE",
    "NodeKind",
    "no_gc",
    "Rule",
    "children",
    "jax_children",
    "node_data",
    "register_flattener",
    "rule_for",
    "sorted_keys",
    "unsortable",
]

IsLeaf = Callable[[Any], bool] | None

#: `(keys, children, step texts, key maker)`: a node's children as the fast walk wants them;
#: the key maker turns a raw key into a Key (None when the keys already are Keys)
Raw = tuple[list[Any], list[Any], list[str], Any]


class NodeKind(enum.StrEnum):
    """What a position in a pytree is. The values are the strings JSON output and the TUI show.

    Example:
        >>> NodeKind.DICT == "dict", NodeKind("leaf") is NodeKind.LEAF
        (True, True)
    """

    DICT = "dict"
    LIST = "list"
    TUPLE = "tuple"
    NAMEDTUPLE = "namedtuple"
    NONE = "none"
    CUSTOM = "custom"
    LEAF = "leaf"


DICT = NodeKind.DICT
LIST = NodeKind.LIST
TUPLE = NodeKind.TUPLE
NAMEDTUPLE = NodeKind.NAMEDTUPLE
NONE = NodeKind.NONE
CUSTOM = NodeKind.CUSTOM
LEAF = NodeKind.LEAF

#: exact types seen to be leaves whatever is registered (arrays, numbers, strings): walks test
#: a whole container's children against it at C speed
LEAF_TYPES: set[type] = set()

_SCALARS = (str, bytes, int, float, complex)
#: leaf types jax cannot have a rule for (its own leaves), so it is not asked about them
_EXACT_LEAVES = frozenset({*_SCALARS, bool})

#: the most types the table remembers (a hostile file can define classes without end)
_MAX_TYPES = 10_000


# --- rules --------------------------------------------------------------------------------


class Rule:
    """How the objects of one type open one level. `kind` is the kind of every object of the
    type, except for rules that ask jax per object (`per_object`), where it is CUSTOM or LEAF.

    Example:
        >>> r = rule_for((1, 2))
        >>> r.kind, r.pairs((1, 2))
        (<NodeKind.TUPLE: 'tuple'>, [(SequenceKey(idx=0), 1), (SequenceKey(idx=1), 2)])
    """

    __slots__ = ("kind",)
    per_object = False

    def __init__(self, kind: NodeKind) -> None:
        self.kind = kind

    def pairs(self, obj: Any) -> list[tuple[Key, Any]] | None:
        """`[(key, child), ...]` in jax's order, or None for a leaf."""
        raw = self.raw(obj)
        if raw is None:
            return None
        keys, kids, _, make = raw
        if make is None:
            return list(zip(keys, kids))
        return [(make(k), c) for k, c in zip(keys, kids)]

    def raw(self, obj: Any) -> Raw | None:
        """The children as the fast walk takes them (see `Raw`), or None for a leaf."""
        return None


class _Leaf(Rule):
    __slots__ = ()


class _Dict(Rule):
    """dict and defaultdict (keys sorted, as jax sorts them), OrderedDict (insertion order)."""

    __slots__ = ("ordered",)

    def __init__(self, ordered: bool) -> None:
        super().__init__(DICT)
        self.ordered = ordered

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        keys = list(obj) if self.ordered else sorted_keys(obj)
        return [(DictKey(k), obj[k]) for k in keys]

    def raw(self, obj: Any) -> Raw:
        keys = list(obj) if self.ordered else sorted_keys(obj)
        return keys, [obj[k] for k in keys], [f"[{k!r}]" for k in keys], DictKey


class _Sequence(Rule):
    __slots__ = ()

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        return [(SequenceKey(i), c) for i, c in enumerate(obj)]

    def raw(self, obj: Any) -> Raw:
        n = len(obj)
        return list(range(n)), list(obj), [f"[{i}]" for i in range(n)], SequenceKey


class _Empty(Rule):
    """None: a node without children."""

    __slots__ = ()

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        return []

    def raw(self, obj: Any) -> Raw:
        return [], [], [], None


class _Fields(Rule):
    """Children read by attribute name, in a fixed order, with `.name` keys."""

    __slots__ = ("keys", "names", "steps")

    def __init__(self, kind: NodeKind, names: tuple[str, ...]) -> None:
        super().__init__(kind)
        self.names = names
        self.keys = [GetAttrKey(n) for n in names]
        self.steps = [f".{n}" for n in names]

    def _kids(self, obj: Any) -> list[Any]:
        return [getattr(obj, n) for n in self.names]

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        return list(zip(self.keys, self._kids(obj)))

    def raw(self, obj: Any) -> Raw:
        return self.keys, self._kids(obj), self.steps, None


class _NamedTuple(_Fields):
    """A namedtuple class jax has no rule of its own for: children by position, `.field` keys."""

    __slots__ = ()

    def _kids(self, obj: Any) -> list[Any]:
        return list(obj)


class _Module(_Fields):
    """An equinox Module: each dynamic field is `obj.__dict__[name]`, in order (a dict lookup
    each, instead of equinox's flatten through jax); a field left unset asks equinox."""

    __slots__ = ()

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        keys, kids, _, make = self.raw(obj)
        if make is None:
            return list(zip(keys, kids))
        return [(make(k), c) for k, c in zip(keys, kids)]

    def raw(self, obj: Any) -> Raw:
        try:
            kids = list(map(object.__getattribute__(obj, "__dict__").__getitem__, self.names))
        except KeyError:  # a field left unset: equinox's own flatten says what there is
            return _JAX.raw(obj) or ([], [], [], None)
        return self.keys, kids, self.steps, None


class _Flattener(Rule):
    """A node type treetool defines itself (`register_flattener`): its own rule, no jax."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], list[tuple[Key, Any]]]) -> None:
        super().__init__(CUSTOM)
        self.fn = fn

    def pairs(self, obj: Any) -> list[tuple[Key, Any]]:
        return self.fn(obj)

    def raw(self, obj: Any) -> Raw:
        pairs = self.fn(obj)
        keys = [k for k, _ in pairs]
        return keys, [c for _, c in pairs], list(map(str, keys)), None


class _Jax(Rule):
    """Any other type: asked of jax's one-level flatten per object (a type may be registered
    after its first instance was seen, so a leaf answer is not remembered)."""

    __slots__ = ()
    per_object = True

    def raw(self, obj: Any) -> Raw | None:
        pairs = jax_children(obj)
        if pairs is None:
            return None
        keys = [k for k, _ in pairs]
        return keys, [c for _, c in pairs], list(map(str, keys)), from_jax_key


_LEAF = _Leaf(LEAF)
_JAX = _Jax(CUSTOM)
_SORTED = _Dict(ordered=False)

#: type -> its rule: the one per-type cache every consumer shares (a hot loop may look a type
#: up here; a type not in it goes through `rule_for`)
RULES: dict[type, Rule] = {
    dict: _SORTED,
    collections.defaultdict: _SORTED,
    collections.OrderedDict: _Dict(ordered=True),
    list: _Sequence(LIST),
    tuple: _Sequence(TUPLE),
    type(None): _Empty(NONE),
}

#: namedtuple classes seen before jax was imported (jax may yet get a rule for them)
_NO_JAX_YET: dict[type, Rule] = {}


def sorted_keys(d: dict) -> list[Any]:
    """The keys of a dict in jax's order (sorted); keys that cannot be sorted raise, as in jax.

    Example:
        >>> sorted_keys({"b": 1, "a": 2})
        ['a', 'b']
    """
    try:
        return sorted(d)
    except TypeError as e:
        raise unsortable(e) from None


def unsortable(e: TypeError) -> ValueError:
    """The error of a dict whose keys cannot be sorted (jax refuses such a dict too).

    Example:
        >>> unsortable(TypeError("'<' not supported"))
        ValueError("the keys of this dict cannot be sorted, and jax sorts them: '<' not supported")
    """
    return ValueError(f"{UNSORTABLE}, and jax sorts them: {e}")


#: what every error of a dict with unsortable keys says (`NodeError` makes it a `ValueError`)
UNSORTABLE = "the keys of this dict cannot be sorted"


def rule_for(obj: Any) -> Rule:
    """The rule that opens objects of `type(obj)`, learnt from `obj` the first time.

    Example:
        >>> rule_for({"a": 1}).kind, rule_for(3.0).kind
        (<NodeKind.DICT: 'dict'>, <NodeKind.LEAF: 'leaf'>)
    """
    t = type(obj)
    r = RULES.get(t)
    if r is None:
        r = _learn(t, obj)
    return r


def _learn(t: type, obj: Any) -> Rule:
    jax_loaded = "jax" in sys.modules
    fn = _FLATTENERS.get(t)
    if fn is not None:
        return _remember(t, _Flattener(fn))
    nodes = sys.modules.get("treetool._tree._nodes")
    info = None if nodes is None else nodes._BY_CLASS.get(t)
    if info is not None:  # `tt.pytree_node`/`tt.register_node`: its data fields, by name
        return _remember(t, _Fields(CUSTOM, info.data_fields))
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        if not jax_loaded:
            r = _NO_JAX_YET.get(t)
            if r is None:
                r = _NamedTuple(NAMEDTUPLE, tuple(t._fields))
                if len(_NO_JAX_YET) < _MAX_TYPES:
                    _NO_JAX_YET[t] = r
            return r
        return _remember(t, _namedtuple_rule(t, obj))
    if is_array(obj) or isinstance(obj, _SCALARS):
        # a subclass may be registered with jax (`register_static`: a node without children)
        if jax_loaded and t not in _EXACT_LEAVES and _one_level()(obj) is not None:
            return _remember(t, _JAX)
        LEAF_TYPES.add(t)
        return _remember(t, _LEAF)
    eqx = sys.modules.get("equinox")
    if eqx is not None and issubclass(t, eqx.Module):
        return _remember(t, _module_rule(obj))
    return _remember(t, _JAX)


def _remember(t: type, r: Rule) -> Rule:
    if len(RULES) < _MAX_TYPES:
        RULES[t] = r
    return r


def _namedtuple_rule(t: type, obj: Any) -> Rule:
    """A plain namedtuple, or one jax has a rule of its own for (then jax opens it).

    jax's one-level flatten of a plain namedtuple gives the class as aux data and the tuple's
    items (with every key naming the first field, so its keys are not used); a class
    registered with its own flatten gives whatever that rule gives.
    """
    fields = tuple(t._fields)  # type: ignore[attr-defined]
    got = _one_level()(obj)
    if got is not None:
        kids, aux = got
        if aux is t and len(kids) == len(obj) and all(c is x for (_, c), x in zip(kids, obj)):
            return _NamedTuple(NAMEDTUPLE, fields)
        return _JAX
    return _NamedTuple(NAMEDTUPLE, fields)


def _module_rule(obj: Any) -> Rule:
    """An equinox Module class: the fields its jax flatten yields, read from `__dict__`.

    Learnt from jax's own flatten of the first instance seen and checked against it; a class
    whose flatten does not read its `__dict__` that way is asked of jax per object.
    """
    kids = jax_children(obj) or []
    d = object.__getattribute__(obj, "__dict__")
    names = tuple(getattr(k, "name", None) for k, _ in kids)
    if all(
        is_getattr_key(k) and type(n) is str and d.get(n, d) is c for (k, c), n in zip(kids, names)
    ):
        return _Module(CUSTOM, names)  # type: ignore[arg-type]
    return _JAX


# --- treetool's own node types ------------------------------------------------------------

# type -> function(obj) -> list of (Key, child); for node types treetool defines itself (Opaque).
_FLATTENERS: dict[type, Callable[[Any], list[tuple[Key, Any]]]] = {}


def register_flattener(cls: type, fn: Callable[[Any], list[tuple[Key, Any]]]) -> None:
    """Teach the table how to open `cls` without jax (used for treetool's own node types).

    The rule must agree with the jax registration of the same class.
    """
    _FLATTENERS[cls] = fn
    LEAF_TYPES.discard(cls)
    RULES[cls] = _Flattener(fn)


# --- one level ----------------------------------------------------------------------------


def children(obj: Any, is_leaf: IsLeaf = None) -> tuple[NodeKind, list[tuple[Key, Any]]]:
    """One level of a pytree: `(kind, [(key, child), ...])`; kind is LEAF for a leaf.

    Raises what the node's flatten raises (a dict whose keys cannot be sorted: ValueError,
    as in jax); the views turn that into an error entry or a `NodeError` at its path.

    Example:
        >>> kind, kids = children({"b": 1, "a": [2]})
        >>> kind == "dict", kids
        (True, [(DictKey(key='a'), [2]), (DictKey(key='b'), 1)])
        >>> children(3.0)[0] == "leaf"
        True
    """
    if is_leaf is not None and is_leaf(obj):
        return LEAF, []
    t = type(obj)
    if t is dict:
        return DICT, [(DictKey(k), obj[k]) for k in sorted_keys(obj)]
    if t is list:
        return LIST, [(SequenceKey(i), c) for i, c in enumerate(obj)]
    if t is tuple:
        return TUPLE, [(SequenceKey(i), c) for i, c in enumerate(obj)]
    r = RULES.get(t)
    if r is None:
        r = _learn(t, obj)
    pairs = r.pairs(obj)
    if pairs is None:
        return LEAF, []
    return r.kind, pairs


def jax_children(obj: Any) -> list[tuple[Any, Any]] | None:
    """One level of a node registered with jax, with jax's own key entries; None for a leaf.

    Not for plain namedtuples (jax's one-level flatten names every field after the first).
    Without jax imported nothing can have been registered with it: everything is a leaf.
    """
    if "jax" not in sys.modules:
        return None
    r = _one_level()(obj)
    return None if r is None else list(r[0])


_ONE_LEVEL: list[Callable[[Any], Any]] = []


def _one_level() -> Callable[[Any], Any]:
    """jax's public one-level flatten with keys: `(pairs, aux)`, or None for a leaf."""
    if not _ONE_LEVEL:
        from jax.tree_util import default_registry

        _ONE_LEVEL.append(default_registry.flatten_one_level_with_keys)
    return _ONE_LEVEL[0]


def node_data(obj: Any) -> tuple[type, Any] | None:
    """`(type, aux data)` of a custom node as jax sees it (static fields), or None."""
    if "jax" not in sys.modules:
        return None
    import jax

    td = jax.tree_util.tree_structure(obj, is_leaf=lambda x: x is not obj)
    return td.node_data()  # type: ignore[attr-defined]


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around a bulk walk (4-5x faster on big trees)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

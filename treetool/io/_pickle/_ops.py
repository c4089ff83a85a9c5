"""What the safe unpickler does besides running opcodes: the allow-list and its imitations.

`ALLOWED` maps the (module, name) of every global the reader honours to a tag;
`_pickle_imitations.IMITATIONS` maps the tag to treetool's own code for it (the reader never
looks a name up and calls it). Also the helpers of
the opcodes that fill containers, the parsers of protocol 0 text arguments, and `walk_check`,
the one pass over a freshly read tree.
"""

from __future__ import annotations

import codecs
import collections
import itertools
from typing import Any

from treetool._errors import LoadError
from treetool._leaves._dtypes import loaded_numpy
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._numpy_rebuild import _short
from treetool.io._safety._budget import MAX_DEPTH, MAX_KEY_DEPTH, Budget
from treetool.io._safety._hash_guard import UNCHOSEN_HASH, HashGuard

__all__ = [
    "ALLOWED",
    "BUILTIN_TYPES",
    "MAX_DEPTH",
    "KeyCheck",
    "PendingKey",
    "walk_check",
]

_Global = GlobalRef  # a global named by the file, with the tag of its imitation ("" if blocked)

_NP = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")

# (module, name) -> tag of the imitation treetool runs for it
ALLOWED: dict[tuple[str, str], str] = {
    **{(m, "_reconstruct"): "np_reconstruct" for m in _NP},
    **{(m, "scalar"): "np_scalar" for m in _NP},
    **{(m, "_frombuffer"): "np_frombuffer" for m in _NUMERIC},
    ("numpy", "dtype"): "np_dtype",
    ("numpy", "ndarray"): "np_ndarray",
    ("jax._src.array", "_reconstruct_array"): "jax_array",
    ("jax._src.prng", "PRNGKeyArray"): "prng_key",
    ("jax._src.random.prng", "PRNGKeyArray"): "prng_key",
    ("_codecs", "encode"): "codecs_encode",
    ("collections", "OrderedDict"): "ordereddict",
    ("collections", "defaultdict"): "defaultdict",
    ("copyreg", "_reconstructor"): "reconstructor",
    ("copy_reg", "_reconstructor"): "reconstructor",
}
for _b in ("builtins", "__builtin__"):
    for _n in (
        "set",
        "frozenset",
        "complex",
        "bytearray",
        "bytes",
        "list",
        "dict",
        "tuple",
        "object",
    ):
        ALLOWED[(_b, _n)] = _n
BUILTIN_TYPES = {"list": list, "dict": dict, "set": set, "tuple": tuple, "frozenset": frozenset}


class PendingKey:
    """A typed PRNG key array waiting for its BUILD state."""

    __slots__ = ()


_CONTAINERS = frozenset(
    (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.defaultdict)
)
_INNER = _CONTAINERS | {Opaque, GlobalRef}  # what walk_check looks inside (or at)


class WalkResult:
    """What `walk_check` found: the blocked class paths and the tree's expanded size.

    `expanded` counts leaves and edges as every view walks them, a shared subtree at every
    reference.
    """

    __slots__ = ("blocked", "expanded")

    def __init__(self, blocked: list[str], expanded: int) -> None:
        self.blocked = blocked
        self.expanded = expanded


_PLAIN_KEYS = frozenset((str, int))
_NOT_LEAVES: set[type] = set(_INNER)  # a container holding none of these holds only leaves
#: what the reader notes when the memo (or DUP) hands it out again: walk_check remembers
#: the sizes of these only
SHAREABLE: set[type] = set(_INNER - {GlobalRef})
# both hold numpy's ndarray once numpy is imported (`_numpy_rebuild.numpy`): before that, no
# array exists
nr.ARRAY_SETS.extend((SHAREABLE, _NOT_LEAVES))
if nr._NUMPY:
    for _s in nr.ARRAY_SETS:
        _s.add(nr._NUMPY[0].ndarray)


def _kids(obj: Any, t: type) -> Any:
    if t is Opaque:
        return (obj.args, obj.state, obj.listitems, obj.dictitems, obj.kwargs, obj.source)
    if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
        if _PLAIN_KEYS.issuperset(map(type, obj)):
            return obj.values()
        return (*obj, *obj.values())  # keys are walked like values
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    if np is not None and t is np.ndarray:
        return obj.reshape(-1).tolist()
    return obj


def _flat_tuple_keys(d: dict, not_leaves: set[type] | frozenset[type]) -> bool:
    types = set(map(type, d))
    return (
        len(types) == 1
        and tuple in types
        and not_leaves.isdisjoint(map(type, itertools.chain.from_iterable(d)))
    )


def _dicts_of_leaves(
    kids: Any, plain_keys: frozenset[type], not_leaves: Any, shared: set[int] | None
) -> bool:
    """Whether every item of `kids` (a dict's values, a list: iterable again) is a dict with
    plain keys whose values are leaves, none of them handed out twice (`shared`; None: any may
    be): the per-child test of `walk_check`, made for all of them at once in C loops."""
    return (
        {dict}.issuperset(map(type, kids))
        and plain_keys.issuperset(map(type, itertools.chain.from_iterable(kids)))
        and not_leaves.isdisjoint(map(type, itertools.chain.from_iterable(map(dict.values, kids))))
        and (shared is None or shared.isdisjoint(map(id, kids)))
    )


def walk_check(
    tree: Any, budget: Budget, shared: set[int] | None = None, object_arrays: bool = True
) -> WalkResult:
    """Check a freshly loaded tree against the budget; collect the globals that were not run.

    One iterative pass over the containers (values, and dict keys that are containers or
    globals): no cycles, at most `budget.max_depth` levels, and at most `budget.max_expanded`
    leaves and edges in the tree as every view walks it, a container shared through the memo
    counted at each of its references. `shared` holds the ids of the containers the reader
    handed out more than once: only those can be met again (or be on a cycle), and their
    size and height are remembered, so each is walked once (None: any container may be).
    `object_arrays=False` says the reader made no numpy array of dtype object: then arrays are
    leaves, and a container of arrays is not walked item by item. Raises `LoadError` naming
    the first limit exceeded.

    Example:
        >>> from treetool.io._safety._budget import Budget
        >>> shared = [[0] * 1000]
        >>> tree = {"a": shared, "b": shared, "f": GlobalRef("os", "system")}
        >>> r = walk_check(tree, Budget("f", 0))
        >>> r.blocked, r.expanded
        (['os.system'], 2005)
    """
    blocked: set[str] = set()
    sizes: dict[int, tuple[int, int]] = {}  # id of a shared container -> (size, height)
    max_depth, max_expanded = budget.max_depth, budget.max_expanded
    on_path: set[int] = set()  # shared containers being walked
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    ndarray = np.ndarray if np is not None else _NoArray
    inner, not_leaves, plain_keys = _INNER, _NOT_LEAVES if object_arrays else _INNER, _PLAIN_KEYS
    exit_mark = _EXIT
    every = shared is None

    t = type(tree)
    if t is GlobalRef:
        return WalkResult([] if tree.tag else [tree.class_path], 0)
    if t not in inner and not (t is ndarray and tree.dtype.hasobject):
        return WalkResult([], 0)
    walked = 0  # leaves and edges so far, shared containers counted at every reference
    deep = 0  # the deepest level met below the innermost shared container being walked
    stack: list[Any] = [(tree, 0)]
    push, pop = stack.append, stack.pop
    while stack:
        item = pop()
        if item is exit_mark:  # a shared container is done
            oid, start, depth, outer_deep = pop()
            on_path.discard(oid)
            sizes[oid] = (walked - start, deep - depth + 1)
            if outer_deep > deep:
                deep = outer_deep
            continue
        obj, depth = item
        oid = id(obj)
        if every or oid in shared:  # type: ignore[operator]
            done = sizes.get(oid)
            if done is not None:
                walked += done[0]
                if walked > max_expanded:
                    raise budget.exceeded("expanded")
                if depth + done[1] - 1 > deep:
                    deep = depth + done[1] - 1
                    if deep >= max_depth:
                        raise budget.exceeded("depth")
                continue
            if oid in on_path:
                raise LoadError(f"{budget.path}: cyclic reference: an object contains itself")
            on_path.add(oid)
            push((oid, walked, depth, deep))
            push(exit_mark)
            deep = depth
        if depth >= max_depth:
            raise budget.exceeded("depth")
        if depth > deep:
            deep = depth
        t = type(obj)
        if t is dict:
            if plain_keys.issuperset(map(type, obj)):
                kids = obj.values()
            elif _flat_tuple_keys(obj, not_leaves):  # e.g. {(i, j): ...}: counted here
                walked += sum(map(len, obj))
                if depth + 1 >= max_depth:
                    raise budget.exceeded("depth")
                kids = obj.values()
            else:
                kids = _kids(obj, t)
        elif t is list or t is tuple:
            kids = obj
        else:
            if t is Opaque and obj.source is None:
                blocked.add(obj.class_path)
            kids = _kids(obj, t)
        # one edge per child: len() of a container; the non-empty slots of an Opaque, the
        # elements of an object array
        special = t is Opaque or t is ndarray
        if not special:
            walked += len(obj)
            if not not_leaves.isdisjoint(map(type, kids)):
                d = depth + 1
                if (t is dict or t is list) and _dicts_of_leaves(
                    kids, plain_keys, not_leaves, shared
                ):
                    # every child a dict of leaves met once (the layers of a nested
                    # checkpoint): counted here in one step, as the loop below counts each
                    walked += sum(map(len, kids))
                    if d > deep:
                        if d >= max_depth:
                            raise budget.exceeded("depth")
                        deep = d
                    kids = ()
                for c in kids:
                    tc = type(c)
                    if tc in inner:
                        if tc is GlobalRef:
                            if not c.tag:
                                blocked.add(c.class_path)
                        elif (
                            tc is tuple
                            and not_leaves.isdisjoint(map(type, c))
                            and (every or id(c) not in shared)  # type: ignore[operator]
                        ):
                            # a tuple of leaves met once (a dict key, a pair): counted here
                            walked += len(c)
                            if d > deep:
                                if d >= max_depth:
                                    raise budget.exceeded("depth")
                                deep = d
                        elif (
                            tc is dict
                            and plain_keys.issuperset(map(type, c))
                            and not_leaves.isdisjoint(map(type, c.values()))
                            and (every or id(c) not in shared)  # type: ignore[operator]
                        ):
                            # a dict of leaves met once (a layer of a nested checkpoint):
                            # counted here, as a walk of it would count it
                            walked += len(c)
                            if d > deep:
                                if d >= max_depth:
                                    raise budget.exceeded("depth")
                                deep = d
                        else:
                            push((c, d))
                    elif tc is ndarray and c.dtype.hasobject:
                        push((c, d))
        else:
            d = depth + 1
            for c in kids:
                if c is None:
                    continue
                walked += 1
                tc = type(c)
                if tc in inner:
                    if tc is GlobalRef:
                        if not c.tag:
                            blocked.add(c.class_path)
                    else:
                        push((c, d))
                elif tc is ndarray and c.dtype.hasobject:
                    push((c, d))
        if walked > max_expanded:
            raise budget.exceeded("expanded")
    return WalkResult(sorted(blocked), walked)


class KeyCheck:
    """Checks a dict key or set item before it is hashed: CPython hashes tuples recursively in C
    (a million-deep tuple crashes it) and a tuple's hash is recomputed at every insertion.

    A tuple or frozenset key may be at most `MAX_KEY_DEPTH` deep; the size of each tuple key
    (its items, through shared references) is charged to the budget's expanded size at every
    insertion, a frozenset's once (it caches its hash). Sizes are computed once per object.
    """

    __slots__ = ("budget", "hashes", "known")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.known: dict[int, tuple[Any, int]] = {}  # id -> (the object, kept alive; size)
        self.hashes = HashGuard(budget)  # colliding hashes (`_hash_guard`)

    def keys(self, keys: Any, at: int, fail: Any) -> None:
        """Check every key of `keys` (an iterable) that is a tuple or a frozenset, and that
        no more than `SAME_HASH` distinct keys share a hash (`HashGuard`)."""
        if type(keys) is not list and type(keys) is not tuple:
            keys = list(keys)
        types = set(map(type, keys))
        if tuple in types:
            tuples = keys if len(types) == 1 else [k for k in keys if type(k) is tuple]
            if _NESTABLE.isdisjoint(map(type, itertools.chain.from_iterable(tuples))):
                # flat tuples (the common case) cost their length; nothing is remembered
                self.budget.charge_expanded(
                    sum(map(len, tuples)), f"hashing tuple keys, at byte {at}"
                )
            else:
                for k in tuples:
                    self.one(k, at, fail)
        if frozenset in types:
            for k in keys:
                if type(k) is frozenset:
                    self.one(k, at, fail)
        if not UNCHOSEN_HASH.issuperset(types):  # (after the depth checks: hashing recurses)
            self.hashes.check(keys, types, at, fail)

    def one(self, key: Any, at: int, fail: Any) -> None:
        known = self.known.get(id(key))
        if known is None:
            size = self._size(key, at, fail)
            self.known[id(key)] = (key, size)
            charge = size
        else:
            charge = known[1] if type(key) is tuple else 0
        if charge:
            self.budget.charge_expanded(charge, f"hashing tuple keys, at byte {at}")

    def _size(self, key: Any, at: int, fail: Any) -> int:
        # iterative post-order, depth-limited; each distinct tuple/frozenset is sized once
        known = self.known
        limit = self.budget.max_expanded
        stack: list[Any] = [(key, 1)]
        exit_mark = _EXIT
        while stack:
            item = stack.pop()
            if item is exit_mark:
                obj = stack.pop()
                size = len(obj)
                for c in obj:
                    tc = type(c)
                    if tc is tuple or tc is frozenset:
                        size += known[id(c)][1]
                if size > limit:
                    raise self.budget.exceeded("expanded", f"a dict key, at byte {at}")
                known[id(obj)] = (obj, size)
                continue
            obj, depth = item
            if id(obj) in known:
                continue
            if depth > MAX_KEY_DEPTH:
                raise fail(f"dict key or set item nested deeper than {MAX_KEY_DEPTH} levels", at)
            stack.append(obj)
            stack.append(exit_mark)
            for c in obj:
                tc = type(c)
                if (tc is tuple or tc is frozenset) and id(c) not in known:
                    stack.append((c, depth + 1))
        return known[id(key)][1]


_EXIT = object()


class _NoArray:
    """Stands for numpy's array type while numpy is not imported (no value has this type)."""


_NESTABLE = frozenset((tuple, frozenset))


def _utf8(b: bytes, at: int, fail: Any) -> str:
    try:
        return b.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise fail("bad UTF-8 string", at) from None


def _ascii(b: bytes, at: int, fail: Any) -> str:
    try:
        return b.decode("ascii")
    except UnicodeDecodeError:
        raise fail("bad GLOBAL name", at) from None


def _ascii_or_bytes(b: bytes) -> Any:
    try:
        return b.decode("ascii")
    except UnicodeDecodeError:
        return b


def _text_number(op: int, line: bytes, at: int, fail: Any) -> Any:
    try:
        if op == 0x49:
            if line == b"00":
                return False
            if line == b"01":
                return True
            return int(line)
        if op == 0x4C:
            return int(line[:-1] if line.endswith(b"L") else line)
        return float(line)
    except ValueError:
        raise fail(f"bad number {line[:20]!r}", at) from None


def _text_string(line: bytes, at: int, fail: Any) -> Any:
    if len(line) >= 2 and line[0] == line[-1] and line[:1] in (b"'", b'"'):
        try:
            raw = codecs.escape_decode(line[1:-1])[0]
        except ValueError:
            raise fail("bad STRING escape", at) from None
        return _ascii_or_bytes(raw)
    raise fail("STRING is not quoted", at)


def _setitems(target: Any, items: list, at: int, fail: Any, keycheck: KeyCheck) -> None:
    if len(items) % 2:
        raise fail("odd number of items for SETITEMS", at)
    t = type(target)
    if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
        dest = target
    elif t is Opaque:
        dest = target.dictitems
    else:
        raise fail(f"SETITEM on a {t.__name__}", at)
    keycheck.keys(items[::2], at, fail)
    try:
        for i in range(0, len(items), 2):
            dest[items[i]] = items[i + 1]
    except TypeError:
        raise fail(f"unhashable dict key {_short(items[i])}", at) from None


def _appends(target: Any, items: list, at: int, fail: Any) -> None:
    t = type(target)
    if t is list:
        target.extend(items)
    elif t is Opaque:
        target.listitems.extend(items)
    else:
        raise fail(f"APPEND on a {t.__name__}", at)


def _dynamic_class_path(cls: Opaque) -> str:
    # cloudpickle's class skeletons name the class in their arguments
    if (
        cls.class_path.endswith("_make_skeleton_class")
        and len(cls.args) >= 2
        and isinstance(cls.args[1], str)
    ):
        return f"<dynamic>.{cls.args[1]}"
    return f"{cls.class_path}()"


def _prng_key(state: Any) -> Any:
    """A typed PRNG key array becomes a `KeyArray` (`key<fry>[4]`, its data `uint32[4, 2]`)."""
    if isinstance(state, dict):
        impl = state.get("_impl")
        if type(impl) is Opaque and impl.class_path.endswith("prng.PRNGImpl"):
            key = nr.key_array(state.get("_base_array"), impl.args)
            if key is not None:
                return key
    return Opaque("jax._src.prng.PRNGKeyArray", (), None, state)

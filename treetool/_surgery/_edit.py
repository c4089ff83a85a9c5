"""Copy-on-write edits of pytrees: only the spine from the root to each edited node is rebuilt.

Every other subtree of the result is the very object of the input, so an edit costs time in
proportion to the depth of the edited nodes and the width of the nodes on their spines, never
to the size of the tree, and the input is never mutated.

Builtin containers are copied with their own constructors (dict order, `OrderedDict` and
`defaultdict` types are kept). Custom nodes (equinox modules, flax structs, registered
dataclasses) are opened one level with jax and rebuilt with `tree_unflatten`, the way jax
itself rebuilds them (without calling `__init__`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any, cast

from treetool._errors import PathError, SelectionError
from treetool._paths._path import DictKey, GetAttrKey, Key, Path, SequenceKey
from treetool._tree._model import (
    CUSTOM,
    DICT,
    LEAF,
    LIST,
    NAMEDTUPLE,
    NONE,
    TUPLE,
    IsLeaf,
    NodeError,
    no_gc,
)
from treetool._tree._node_table import NodeKind, rule_for, sorted_keys
from treetool._tree._views import resolve
from treetool._typetests import is_eqx_module

__all__ = ["Edit", "Level", "Levels", "apply_edits", "kind_phrase", "locate", "open_level"]


class Level:
    """One opened node: its kind, child keys and children.

    Keys and children of builtin containers are listed only when asked for: following one
    key down a list of 10,000 layers is a single index.
    """

    __slots__ = ("_index", "_keys", "_kids", "kind", "obj")

    def __init__(
        self,
        obj: Any,
        kind: NodeKind,
        keys: list[Key] | None = None,
        kids: list[Any] | None = None,
    ) -> None:
        self.obj = obj
        self.kind = kind
        self._keys = keys
        self._kids = kids
        self._index: dict[Key, int] | None = None

    @property
    def keys(self) -> list[Key]:
        """The child keys, in jax's order."""
        if self._keys is None:
            self._list()
        return self._keys  # type: ignore[return-value]

    @property
    def kids(self) -> list[Any]:
        """The children, in jax's order."""
        if self._kids is None:
            self._list()
        return self._kids  # type: ignore[return-value]

    def _list(self) -> None:
        obj, kind = self.obj, self.kind
        if kind == DICT:
            ks = _dict_order(obj)
            self._keys = [DictKey(k) for k in ks]
            self._kids = [obj[k] for k in ks]
        elif kind in (LIST, TUPLE):
            self._keys = [SequenceKey(i) for i in range(len(obj))]
            self._kids = list(obj)
        else:
            self._keys, self._kids = [], []

    def index(self, key: Key) -> int | None:
        """Position of `key` among the children, or None."""
        if self.kind in (LIST, TUPLE):
            ok = type(key) is SequenceKey and 0 <= key.idx < len(self.obj)
            return key.idx if ok else None  # type: ignore[attr-defined]
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys)}
        return self._index.get(key)

    def child(self, key: Key) -> Any:
        """The child under the exact key `key` (KeyError if there is none)."""
        obj, kind = self.obj, self.kind
        if kind == DICT and type(key) is DictKey:
            return obj[key.key]
        if kind in (LIST, TUPLE) and type(key) is SequenceKey and 0 <= key.idx < len(obj):
            return obj[key.idx]
        i = self.index(key)
        if i is None:
            raise KeyError(key)
        return self.kids[i]

    def has(self, key: Key) -> bool:
        """Whether `key` is exactly one of the child keys."""
        obj, kind = self.obj, self.kind
        if kind == DICT:
            return type(key) is DictKey and _has_key(obj, key.key)
        if kind in (LIST, TUPLE):
            return type(key) is SequenceKey and 0 <= key.idx < len(obj)
        return self.index(key) is not None

    def order(self, keys: Iterable[Key]) -> list[Key]:
        """`keys` (children of this node) sorted in jax's order."""
        keys = list(keys)
        if len(keys) < 2:
            return keys
        if self.kind in (LIST, TUPLE):
            return sorted(keys, key=lambda k: k.idx)  # type: ignore[attr-defined]
        if self.kind == DICT and type(self.obj) is not collections.OrderedDict:
            try:
                return sorted(keys, key=lambda k: k.key)  # type: ignore[attr-defined]
            except TypeError:
                sorted_keys(self.obj)  # all of them cannot be sorted either: raise as jax does
        return sorted(keys, key=lambda k: self.index(k))  # type: ignore[arg-type,return-value]

    def rebuild(
        self,
        updates: dict[Key, Any],
        deletes: Iterable[Key] = (),
        inserts: list[tuple[Key, Any]] | None = None,
        renames: dict[Key, Any] | None = None,
    ) -> Any:
        """A new node of the same type with some children replaced, removed, added or renamed.

        Sequence indices in `deletes` and `inserts` refer to the original positions; an insert
        at `i` goes before the original element `i` (at `len` it appends).
        """
        kind, obj = self.kind, self.obj
        deletes = set(deletes)
        if kind == DICT:
            return _rebuild_dict(obj, updates, deletes, inserts or [], renames or {})
        if kind in (LIST, TUPLE):
            out = _rebuild_seq(obj, updates, deletes, inserts or [])
            return out if kind == LIST else tuple(out)
        if deletes or inserts or renames:
            raise SelectionError(f"{kind_phrase(obj, kind)} has a fixed set of children")
        kids = list(self.kids)
        for k, v in updates.items():
            kids[self.index(k)] = v  # type: ignore[index]
        if kind == NAMEDTUPLE:
            return type(obj)(*kids)
        import jax

        # rebuilt the way jax rebuilds it: its treedef one level deep, with the new children
        treedef = jax.tree_util.tree_structure(obj, is_leaf=lambda x: x is not obj)
        return jax.tree_util.tree_unflatten(treedef, kids)


def _dict_order(d: dict) -> list[Any]:
    if type(d) is collections.OrderedDict:
        return list(d)
    return sorted_keys(d)  # keys that cannot be sorted raise, as in jax


def _has_key(d: dict, k: Any) -> bool:
    try:
        return k in d
    except TypeError:
        return False


def _rebuild_dict(
    obj: dict,
    updates: dict[Key, Any],
    deletes: set[Key],
    inserts: list[tuple[Key, Any]],
    renames: dict[Key, Any],
) -> dict:
    items: Iterable[tuple[Any, Any]] = obj.items()
    if renames:
        items = [(renames.get(DictKey(k), k), v) for k, v in items]
        updates = {(DictKey(renames[k]) if k in renames else k): v for k, v in updates.items()}
    t = type(obj)
    new: dict[Any, Any]
    if not renames:
        new = obj.copy()  # keeps the type (and a defaultdict's factory)
    elif t is collections.defaultdict and isinstance(obj, collections.defaultdict):
        new = collections.defaultdict(obj.default_factory, items)
    elif t is collections.OrderedDict:
        new = collections.OrderedDict(items)
    else:
        new = dict(items)
    for k, v in updates.items():  # the keys of a dict's edits are DictKeys
        new[cast(DictKey, k).key] = v
    for k in deletes:
        del new[cast(DictKey, k).key]
    for k, v in inserts:
        new[cast(DictKey, k).key] = v
    return new


def _rebuild_seq(
    obj: list | tuple,
    updates: dict[Key, Any],
    deletes: set[Key],
    inserts: list[tuple[Key, Any]],
) -> list:
    if not deletes and not inserts:
        out = list(obj)
        for k, v in updates.items():  # the keys of a sequence's edits are SequenceKeys
            out[cast(SequenceKey, k).idx] = v
        return out
    at: dict[int, list[Any]] = {}
    for k, v in inserts:
        at.setdefault(cast(SequenceKey, k).idx, []).append(v)
    gone = {cast(SequenceKey, k).idx for k in deletes}
    new = {cast(SequenceKey, k).idx: v for k, v in updates.items()}
    out = []
    for i, x in enumerate(obj):
        out.extend(at.get(i, ()))
        if i not in gone:
            out.append(new.get(i, x))
    out.extend(at.get(len(obj), ()))
    return out


def kind_phrase(obj: Any, kind: NodeKind) -> str:
    """`a Linear (an equinox Module)`, `a Point (a namedtuple)`…, for error messages."""
    name = type(obj).__name__
    if kind == NAMEDTUPLE:
        return f"{name} (a namedtuple)"
    if kind == CUSTOM:
        mod = type(obj).__module__.split(".")[0]
        if is_eqx_module(obj):
            return f"{name} (an equinox Module)"
        if mod in ("flax", "optax", "jax"):
            return f"{name} (a {mod} pytree node)"
        return f"{name} (a registered pytree node)"
    return name


Levels = dict[int, Level]


def open_level(obj: Any, is_leaf: IsLeaf, levels: Levels | None = None) -> Level:
    """Open `obj` one level, as jax would; memoised in `levels` (keyed by object id)."""
    if levels is not None:
        lv = levels.get(id(obj))
        if lv is not None and lv.obj is obj:
            return lv
    lv = _open(obj, is_leaf)
    if levels is not None:
        levels[id(obj)] = lv
    return lv


def _open(obj: Any, is_leaf: IsLeaf) -> Level:
    """One level of `obj` as the node table opens it (builtin containers list it lazily)."""
    if is_leaf is not None and is_leaf(obj):
        return Level(obj, LEAF, [], [])
    t = type(obj)
    if t is dict or t is collections.defaultdict or t is collections.OrderedDict:
        return Level(obj, DICT)
    if t is list:
        return Level(obj, LIST)
    if t is tuple:
        return Level(obj, TUPLE)
    if obj is None:
        return Level(obj, NONE, [], [])
    rule = rule_for(obj)
    pairs = rule.pairs(obj)
    if pairs is None:
        return Level(obj, LEAF, [], [])
    return Level(obj, rule.kind, [k for k, _ in pairs], [c for _, c in pairs])


def locate(tree: Any, path: str | Path, is_leaf: IsLeaf, levels: Levels) -> tuple[Path, Any]:
    """The exact path `path` names in `tree`, and the node there.

    Exact keys and the common loose steps (`layers.0`, `params.Dense_0`, `layers[-1]`) are
    followed directly, one index per step; anything else goes through `resolve`, which also
    writes the error messages.
    """
    query = Path.parse(path)
    if query.is_pattern:
        raise PathError(f"{str(query)!r} is a glob, not a single path")
    obj = tree
    keys: list[Key] = []
    for q in query:
        lv = _opened(obj, is_leaf, levels, keys)
        k = _step(lv, q)
        if k is None:
            exact = resolve(tree, query, is_leaf)
            return exact, _follow(tree, exact, is_leaf, levels)
        keys.append(k)
        obj = lv.child(k)
    return (query if keys == list(query.keys) else Path._make(tuple(keys))), obj


def _opened(obj: Any, is_leaf: IsLeaf, levels: Levels, keys: Any) -> Level:
    """`open_level`, where a node whose flatten raises is a `NodeError` naming its path."""
    try:
        return open_level(obj, is_leaf, levels)
    except Exception as e:
        raise NodeError(str(Path._make(tuple(keys))), f"{type(e).__name__}: {e}") from e


def _step(lv: Level, q: Key) -> Key | None:
    if lv.has(q):
        return q
    kind, tq = lv.kind, type(q)
    if kind in (LIST, TUPLE):
        if tq is SequenceKey:
            i = q.idx  # type: ignore[attr-defined]
        else:
            try:
                i = int(q.text)
            except ValueError:
                return None
        n = len(lv.obj)
        if -n <= i < 0:
            i += n
        return SequenceKey(i) if 0 <= i < n else None
    if kind == DICT and tq is GetAttrKey:
        name = q.name  # type: ignore[attr-defined]
        if name.lstrip("-").isdigit() and str(int(name)) == name and lv.has(DictKey(int(name))):
            return DictKey(int(name))
        if lv.has(DictKey(name)):
            return DictKey(name)
    return None


def _follow(tree: Any, path: Path, is_leaf: IsLeaf, levels: Levels) -> Any:
    obj = tree
    for k in path:
        obj = open_level(obj, is_leaf, levels).child(k)
    return obj


# --- many edits at once -------------------------------------------------------------------

#: edit operations
SET, FN, DELETE, INSERT, RENAME = "set", "fn", "delete", "insert", "rename"


class Edit:
    """One edit at an exact path: set a value, apply a function, delete, insert or rename."""

    __slots__ = ("arg", "op", "path")

    def __init__(self, path: Path, op: str, arg: Any = None) -> None:
        self.path = path
        self.op = op
        self.arg = arg

    def __repr__(self) -> str:
        return f"Edit({str(self.path)!r}, {self.op})"


_NO_LIST: list = []  # shared empty defaults, never mutated (see _build_trie)
_NO_DICT: dict = {}


class _Trie:
    __slots__ = ("deletes", "edit", "inserts", "kids", "new", "renames")

    def __init__(self) -> None:
        self.kids: dict[Key, _Trie] = {}
        self.edit: Edit | None = None
        self.new: Any = None  # the rebuilt node (set by _apply)
        # structural edits of this node's children (rare: allocated on first use)
        self.deletes: list[Key] = _NO_LIST
        self.inserts: list[tuple[Key, Any]] = _NO_LIST
        self.renames: dict[Key, Any] = _NO_DICT

    def busy(self) -> bool:
        return bool(self.kids or self.deletes or self.inserts or self.renames)


class OverlapError(SelectionError):
    """Two edits where one is inside the other (raised before anything is changed)."""

    def __init__(self, outer: Path, inner: Path) -> None:
        self.outer, self.inner = outer, inner
        super().__init__(
            f"overlapping edits: {str(inner) or '<root>'} is inside {str(outer) or '<root>'}, "
            "which is edited as a whole; edit one or the other"
        )


def _build_trie(edits: list[Edit]) -> _Trie:
    root = _Trie()
    for e in edits:
        keys = e.path.keys
        structural = e.op in (DELETE, INSERT, RENAME)
        if structural and not keys:
            raise SelectionError(f"cannot {e.op} the root of the tree")
        node = root
        walk = keys[:-1] if structural else keys
        for i, k in enumerate(walk):
            if node.edit is not None:
                raise OverlapError(node.edit.path, e.path)
            if k in node.deletes:
                raise OverlapError(Path._make(keys[: i + 1]), e.path)
            nxt = node.kids.get(k)
            if nxt is None:
                nxt = node.kids[k] = _Trie()
            node = nxt
        if node.edit is not None and (structural or node.edit.path != e.path):
            raise OverlapError(node.edit.path, e.path)
        if e.op in (SET, FN):
            if node.busy():
                raise OverlapError(e.path, _first_inner(node, e.path))
            node.edit = e  # a later edit of the same path wins, as in equinox
        elif e.op == DELETE:
            last = keys[-1]
            if last in node.kids:
                raise OverlapError(e.path, e.path + next(iter(node.kids)))
            if node.deletes is _NO_LIST:
                node.deletes = []
            node.deletes.append(last)
        elif e.op == INSERT:
            if node.inserts is _NO_LIST:
                node.inserts = []
            node.inserts.append((keys[-1], e.arg))
        else:
            if node.renames is _NO_DICT:
                node.renames = {}
            node.renames[keys[-1]] = e.arg
    return root


def _first_inner(node: _Trie, base: Path) -> Path:
    for k, child in node.kids.items():
        return base + k if child.edit else _first_inner(child, base + k)
    k = (node.deletes or [k for k, _ in node.inserts] or list(node.renames))[0]
    return base + k


def apply_edits(
    tree: Any,
    edits: list[Edit],
    is_leaf: IsLeaf = None,
    levels: Levels | None = None,
    on_replace: Callable[[Path, Any, Any], None] | None = None,
) -> Any:
    """Apply edits at exact paths (see `locate`) and return the new tree.

    Functions (`FN` edits) are called in jax's leaf order, once per path. `on_replace(path,
    old, new)` is called for every replaced node (shape checks use it). The input is not
    mutated; subtrees off the edited spines are shared with it.
    """
    if not edits:
        return tree
    levels = {} if levels is None else levels
    with no_gc():
        return _apply(tree, _build_trie(edits), is_leaf, levels, on_replace)


def _apply(
    tree: Any,
    trie: _Trie,
    is_leaf: IsLeaf,
    levels: Levels,
    on_replace: Callable[[Path, Any, Any], None] | None,
) -> Any:
    # Pre-order pass (jax order): open the spine, compute replacements; then rebuild bottom-up.
    # Paths travel as tuples of keys; a Path is made only for on_replace and error messages.
    order: list[tuple[_Trie, Level]] = []
    stack: list[tuple[_Trie, Any, tuple[Key, ...]]] = [(trie, tree, ())]
    pop, push = stack.pop, stack.append
    while stack:
        node, obj, keys = pop()
        e = node.edit
        if e is not None:
            new = e.arg if e.op == SET else e.arg(obj)
            if on_replace is not None:
                on_replace(Path._make(keys), obj, new)
            node.new = new
            continue
        lv = _opened(obj, is_leaf, levels, keys)
        if node.deletes or node.renames or node.inserts:
            _check_keys(lv, node, Path._make(keys))
        order.append((node, lv))
        kids = node.kids
        try:
            ordered = lv.order(kids) if len(kids) > 1 else list(kids)
        except ValueError as e:  # dict keys that cannot be sorted, as jax says
            raise NodeError(str(Path._make(keys)), f"{type(e).__name__}: {e}") from None
        for k in reversed(ordered):
            try:
                child = lv.child(k)
            except (KeyError, IndexError, TypeError):
                raise PathError(f"no path {str(Path._make((*keys, k)))!r} in the tree") from None
            push((kids[k], child, (*keys, k)))
    for node, lv in reversed(order):
        updates = {k: c.new for k, c in node.kids.items()}
        node.new = lv.rebuild(updates, node.deletes, node.inserts, node.renames)
    return trie.new


def _check_keys(lv: Level, node: _Trie, path: Path) -> None:
    for k in (*node.kids, *node.deletes, *node.renames):
        if not lv.has(k):
            raise PathError(f"no path {str(path + k)!r} in the tree")
    if lv.kind in (LEAF, NONE) and node.inserts:
        raise SelectionError(
            f"cannot insert into {str(path) or 'the root'}: it is a {type(lv.obj).__name__}, "
            "not a container"
        )

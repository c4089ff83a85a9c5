"""Structural and value diff of two pytrees, aligned by path, and explanations of mismatches.

`diff(a, b)` walks both trees at once, one level at a time with jax's rules (`_model.children`),
and reports every difference, one `Change` per path, the most significant kind first: added,
removed, node_type, static, shape, dtype, value, sharding. A subtree that exists on one side
only is one change at its topmost path. Sequences whose lengths differ are aligned like difflib
(`_align`), so a layer inserted in the middle is one `added`.

When jax is imported and both trees have the same treedef (the common case of comparing a
model with its updated self), the structure is settled by two C++ flattens and only the leaves
are compared.
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from treetool._diff._align import align, signature, type_key
from treetool._diff._compare import LeafComparer, no_address
from treetool._diff._nodes import _SEQUENCES, _describe, _node_label, _static_change, dict_like
from treetool._errors import TreetoolError
from treetool._lowering._drawn import RichDrawn
from treetool._paths._path import Key, Path
from treetool._public import set_module
from treetool._tree._model import CUSTOM, LEAF, IsLeaf, aggregate, children, no_gc

__all__ = ["KINDS", "Change", "TreeDiff", "diff"]

#: kinds of change, most significant first
KINDS = ("error", "added", "removed", "node_type", "static", "shape", "dtype", "value", "sharding")

# dicts whose children come in sorted key order (an OrderedDict keeps insertion order)
_SORTED_DICTS = (dict, defaultdict)
_MOVE_CHECKS = 1000


@set_module("treetool")
@dataclass(frozen=True)
class Change:
    """One difference between two trees, at one path.

    `path` is the keystr path (in `b`; for a `removed` change, in `a`). `before`/`after` are
    what each side has, by kind: labels (`f32[3]`, `Linear`) for added/removed/node_type,
    `{field: value}` for static, shape tuples, dtype names, the first differing elements for
    value, sharding descriptions for sharding. `detail` is a dict of facts (JSON-friendly).

    Example:
        >>> import numpy as np, treetool as tt
        >>> tt.diff({"w": np.zeros(3)}, {"w": np.zeros(4)}).changes[0]
        Change(path="['w']", kind='shape', before=(3,), after=(4,), detail={...})
    """

    path: str
    kind: str
    before: Any
    after: Any
    detail: dict[str, Any] = field(default_factory=dict)
    #: the path as key entries (used by renderers to group changes under their parents)
    keys: tuple[Key, ...] = field(default=(), repr=False, compare=False, kw_only=True)

    @property
    def sign(self) -> str:
        """`+` added, `-` removed, `~` changed."""
        return "+" if self.kind == "added" else "-" if self.kind == "removed" else "~"

    @property
    def summary(self) -> str:
        """What changed, in words: `f32[8,8] → f32[16,8]`, `3 of 64 elements differ …`."""
        from treetool._diff._rich import change_text

        return change_text(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: path, kind, before, after, detail."""
        return {
            "path": self.path,
            "kind": self.kind,
            "before": _jsonable(self.before),
            "after": _jsonable(self.after),
            "detail": _jsonable(self.detail),
        }


@set_module("treetool")
class TreeDiff(RichDrawn):
    """Every difference between two trees; true when there is any.

    Rich-renderable (code-review style), and `to_dict()` gives JSON. Holds references to the
    two trees (no copies) so that renderers can show what is unchanged around a change.

    Example:
        >>> import treetool as tt
        >>> d = tt.diff({"a": 1.0, "b": [1, 2]}, {"a": 2.0, "b": [1, 2, 3]})
        >>> bool(d), [(c.path, c.kind) for c in d.changes]
        (True, [("['a']", 'value'), ("['b'][2]", 'added')])
        >>> d.counts
        {'added': 1, 'removed': 0, 'changed': 1}
    """

    def __init__(
        self,
        changes: list[Change],
        a: Any = None,
        b: Any = None,
        *,
        is_leaf: IsLeaf = None,
        rtol: float = 0.0,
        atol: float = 0.0,
        values: bool = True,
        strict_types: bool = False,
    ) -> None:
        self.changes = changes
        self.a = a
        self.b = b
        self.is_leaf = is_leaf
        self.rtol = rtol
        self.atol = atol
        self.values = values
        self.strict_types = strict_types

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def __iter__(self) -> Iterator[Change]:
        return iter(self.changes)

    def __getitem__(self, path: str | Path) -> Change:
        """The change at `path` (keystr text or a Path); `PathError` (a KeyError) if that path
        did not change."""
        text = str(Path.parse(path)) if not isinstance(path, Path) else str(path)
        for c in self.changes:
            if c.path == text:
                return c
        from treetool._errors import PathError

        raise PathError(f"{text or '<root>'} did not change ({len(self.changes)} paths did)")

    @property
    def by_kind(self) -> dict[str, int]:
        """How many changes of each kind, in significance order (kinds with none omitted)."""
        n = Counter(c.kind for c in self.changes)
        return {k: n[k] for k in KINDS if n[k]}

    @property
    def counts(self) -> dict[str, int]:
        """`{'added': n, 'removed': n, 'changed': n}`."""
        n = Counter(c.sign for c in self.changes)
        return {"added": n["+"], "removed": n["-"], "changed": n["~"]}

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: `{"equal", "counts", "kinds", "options", "changes": [...]}`."""
        return {
            "equal": not self.changes,
            "counts": self.counts,
            "kinds": self.by_kind,
            "options": {
                "rtol": self.rtol,
                "atol": self.atol,
                "values": self.values,
                "strict_types": self.strict_types,
            },
            "changes": [c.to_dict() for c in self.changes],
        }

    def __repr__(self) -> str:
        if not self.changes:
            return "TreeDiff(equal)"
        kinds = ", ".join(f"{n} {k}" for k, n in self.by_kind.items())
        n = len(self.changes)
        return f"TreeDiff({n} change{'s' if n != 1 else ''}: {kinds})"

    def __str__(self) -> str:
        return str(self.__treetool_lower__("text"))

    def __treetool_lower__(self, medium: str, **options: Any) -> Any:
        """Its own lowerings: `_diff/_rich.py` (rich, text) and `_diff/_html.py`."""
        if medium == "html":
            from treetool._diff._html import diff_html

            return diff_html(self)
        from treetool._diff._rich import DiffView, diff_text

        return diff_text(self) if medium == "text" else DiffView(self)


@set_module("treetool")
def diff(
    a: Any,
    b: Any,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    is_leaf: IsLeaf = None,
    values: bool = True,
    strict_types: bool = False,
) -> TreeDiff:
    """Every difference between two pytrees, aligned by path.

    Args:
        a, b: any two pytrees (models, optimizer states, loaded checkpoints); their structures
            may differ.
        rtol, atol: values are equal when `|a - b| <= atol + rtol * max(|a|, |b|)`; NaN equals
            NaN at the same place.
        is_leaf: treat the nodes it returns True for as leaves, on both sides.
        values: False compares only structure, shapes and dtypes (no array data is read).
        strict_types: also report a change of container type between two dict-like nodes
            (`dict`, `OrderedDict`, torch's state-dict `OrderedDict`, flax `FrozenDict`); by
            default (False) those compare by their keys and values only, so a `.pt` state dict
            and its safetensors conversion are equal when their tensors are.

    Returns:
        A `TreeDiff`: true when anything differs; `.changes` lists one `Change` per path.

    Example:
        >>> import numpy as np, treetool as tt
        >>> a = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
        >>> b = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float16), "c": 1}
        >>> for c in tt.diff(a, b):
        ...     print(c.sign, c.path, c.kind, c.summary)
        ~ ['b'] dtype f32[3] → f16[3]
        + ['c'] added int
    """
    return diff_with_progress(
        a, b, rtol=rtol, atol=atol, is_leaf=is_leaf, values=values, strict_types=strict_types
    )


def diff_with_progress(
    a: Any,
    b: Any,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    is_leaf: IsLeaf = None,
    values: bool = True,
    progress: Callable[[int], None] | None = None,
    strict_types: bool = False,
) -> TreeDiff:
    """`diff`, calling `progress(nbytes)` as array data is compared (the CLI's progress bar)."""
    cmp = LeafComparer(rtol=rtol, atol=atol, values=values, progress=progress)
    with no_gc():
        walker = _Walker(is_leaf, cmp, strict_types)
        cmp.pending = []  # remote values are compared after the walk, their bytes read ahead
        walker.run(a, b)
        walker.settle()
        walker.detect_moves()
    return TreeDiff(
        walker.changes,
        a,
        b,
        is_leaf=is_leaf,
        rtol=rtol,
        atol=atol,
        values=values,
        strict_types=strict_types,
    )


# Subtrees this close to the root are first tried as wholes: when both sides have the same jax
# treedef, two C++ flattens settle their structure and only their leaves are compared.
_TREEDEF_DEPTH = 2


def _same_treedef_leaf_changes(
    a: Any, b: Any, is_leaf: IsLeaf, cmp: LeafComparer
) -> list[tuple[tuple[Key, ...], tuple]] | None:
    """`[(relative keys, change)]` when `a` and `b` have the same treedef; None otherwise."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    tu = jax.tree_util
    try:
        la, ta = tu.tree_flatten(a, is_leaf)
        lb, tb = tu.tree_flatten(b, is_leaf)
        if not bool(ta == tb):
            return None
    except Exception:  # an unhashable or ambiguous aux data: the walk decides
        return None
    found = []
    compare = cmp.compare
    put_off = len(cmp.pending) if cmp.pending is not None else 0
    try:
        for i, x in enumerate(la):
            y = lb[i]
            if x is not y:
                r = compare(x, y)
                if r is not None:
                    found.append((i, r))
    except TreetoolError:
        raise  # the file cannot be read as asked: an error of the input, not a difference
    except Exception:  # a leaf whose facts fail (a deleted array): the walk reports it
        if cmp.pending is not None:
            del cmp.pending[put_off:]  # the walk puts them off again
        return None
    if not found:
        return []
    if len(found) > _DESCENTS:
        paths = tu.tree_flatten_with_path(b, is_leaf)[0]
        return [(Path.from_jax(paths[i][0]).keys, r) for i, r in found]
    return [(_leaf_keys(b, tb, i, is_leaf), r) for i, r in found]


# Up to this many changed leaves, each path is found by descending the treedef (O(depth x
# width) each) instead of flattening the whole tree once more with paths.
_DESCENTS = 200


def _leaf_keys(tree: Any, treedef: Any, index: int, is_leaf: IsLeaf) -> tuple[Key, ...]:
    """The keys of the `index`-th leaf, found by counting leaves in the child treedefs."""
    keys: list[Key] = []
    obj, td = tree, treedef
    while True:
        kind, kids = children(obj, is_leaf)
        if kind == LEAF:
            return tuple(keys)
        for (k, c), sub in zip(kids, td.children()):
            n = sub.num_leaves
            if index < n:
                keys.append(k)
                obj, td = c, sub
                break
            index -= n
        else:
            raise IndexError(f"leaf {index} is past the end of the tree")


class _Walker:
    """The iterative walk over two trees; collects changes in tree order."""

    def __init__(self, is_leaf: IsLeaf, cmp: LeafComparer, strict_types: bool = False) -> None:
        self.is_leaf = is_leaf
        self.cmp = cmp
        self.strict_types = strict_types
        self.changes: list[Change] = []
        self.added: list[tuple[Change, Any]] = []
        self.removed: list[tuple[Change, Any]] = []

    def emit(self, ka: tuple, kb: tuple, kind: str, before: Any, after: Any, detail: dict) -> None:
        keys = ka if kind == "removed" else kb
        path = str(Path._make(keys))
        if kind not in ("added", "removed") and ka != kb:
            detail["path_before"] = str(Path._make(ka))
        self.changes.append(Change(path, kind, before, after, detail, keys=keys))

    def run(self, a: Any, b: Any) -> None:
        is_leaf, compare = self.is_leaf, self.cmp.compare
        # items: (a, b, a's keys, b's keys, None) for a pair to compare, or
        # (obj, kind, a's keys, b's keys, lengths) for a subtree that one side only has
        stack: list[tuple[Any, Any, tuple, tuple, Any]] = [(a, b, (), (), None)]
        pop, push = stack.pop, stack.append
        while stack:
            a, b, ka, kb, one_side = pop()
            if one_side is not None:
                self._one_side(ka, kb, b, a, one_side)
                continue
            if a is b:
                continue
            try:  # a node whose flatten raises: an "error" change at its path, never a crash
                kind_a, kids_a = children(a, is_leaf)
                err_a = None
            except Exception as e:
                err_a = f"{type(e).__name__}: {e}"
            try:
                kind_b, kids_b = children(b, is_leaf)
                err_b = None
            except Exception as e:
                err_b = f"{type(e).__name__}: {e}"
            if err_a is not None or err_b is not None:
                self.emit(ka, kb, "error", err_a, err_b, {})
                continue
            if kind_a == LEAF and kind_b == LEAF:
                try:
                    r = compare(a, b)
                except TreetoolError:
                    raise  # a file that cannot be read as asked (a refused size claim): one line
                except Exception as e:  # a leaf whose facts fail (a deleted array)
                    self.emit(ka, kb, "error", f"{type(e).__name__}: {e}", None, {"leaf": True})
                    continue
                if r is not None:
                    self.emit(ka, kb, *r)
                continue
            if len(kb) <= _TREEDEF_DEPTH and kind_a != LEAF and kind_b != LEAF:
                found = _same_treedef_leaf_changes(a, b, is_leaf, self.cmp)
                if found is not None:
                    for rel, r in found:
                        self.emit((*ka, *rel), (*kb, *rel), *r)
                    continue
            # two dict-like nodes of different types (OrderedDict, dict) compare by content
            retyped = type_key(a) != type_key(b) and (
                self.strict_types
                or not (dict_like(a, kind_a, kids_a) and dict_like(b, kind_b, kids_b))
            )
            if kind_a == LEAF or kind_b == LEAF or retyped:
                self.emit(ka, kb, "node_type", _node_label(a, kind_a, kids_a),
                          _node_label(b, kind_b, kids_b),
                          {"before_kind": kind_a, "after_kind": kind_b,
                           "before_type": type_key(a), "after_type": type_key(b),
                           "before_desc": _describe(a, kind_a, kids_a),
                           "after_desc": _describe(b, kind_b, kids_b)})  # fmt: skip
                if kind_a == LEAF or kind_b == LEAF or not _share_keys(kids_a, kids_b):
                    continue
            elif kind_a == CUSTOM:
                st = _static_change(a, b, kids_a)
                if st is not None:
                    self.emit(ka, kb, *st)
            if kind_a in _SEQUENCES and kind_b in _SEQUENCES:
                pairs = align([c for _, c in kids_a], [c for _, c in kids_b], is_leaf)
                lengths: tuple[Any, ...] = (
                    [len(kids_a), len(kids_b)],
                    [type(a).__name__, type(b).__name__],
                )
            else:
                pairs = _pair_keys(a, b, kids_a, kids_b)
                lengths = (None,)
            for i, j in reversed(pairs):
                if i is None:
                    assert j is not None  # a pair holds at least one side
                    k, c = kids_b[j]
                    push((c, "added", ka, (*kb, k), lengths))
                elif j is None:
                    k, c = kids_a[i]
                    push((c, "removed", (*ka, k), kb, lengths))
                else:
                    push(
                        (kids_a[i][1], kids_b[j][1], (*ka, kids_a[i][0]), (*kb, kids_b[j][0]), None)
                    )

    def settle(self) -> None:
        """Replace the "pending" changes (remote values put off by the comparer) by what
        their comparisons found, dropping the equal ones."""
        paths = {ch.before: ch.path for ch in self.changes if ch.kind == "pending"}
        found = self.cmp.settle(lambda job: paths.get(job, "?")) if paths else []
        self.cmp.pending = None
        out: list[Change] = []
        for ch in self.changes:
            r = found[ch.before] if ch.kind == "pending" else ()
            if r:
                ch = Change(ch.path, r[0], r[1], r[2], {**r[3], **ch.detail}, keys=ch.keys)
            if r is not None:
                out.append(ch)
        self.changes = out

    def _one_side(self, ka: tuple, kb: tuple, kind: str, obj: Any, seq: tuple) -> None:
        agg = aggregate(obj, self.is_leaf)
        kind_o, kids = children(obj, self.is_leaf)
        detail: dict[str, Any] = {
            "node_kind": kind_o,
            "leaves": agg.leaves,
            "params": agg.params,
            "bytes": agg.nbytes,
        }
        if seq[0] is not None:
            detail["lengths"], detail["containers"] = seq
        lbl = _node_label(obj, kind_o, kids)
        before, after = (None, lbl) if kind == "added" else (lbl, None)
        self.emit(ka, kb, kind, before, after, detail)
        (self.added if kind == "added" else self.removed).append((self.changes[-1], obj))

    def detect_moves(self) -> None:
        """Mark removed+added pairs that hold identical subtrees as moved (a renamed key)."""
        if not self.added or not self.removed:
            return
        pool: dict[tuple, list[tuple[Change, Any]]] = {}
        for ch, obj in self.added:
            pool.setdefault(signature(obj, self.is_leaf), []).append((ch, obj))
        budget = _MOVE_CHECKS
        for ch, obj in self.removed:
            cands = pool.get(signature(obj, self.is_leaf))
            if not cands:
                continue
            for n, (ch2, obj2) in enumerate(cands):
                budget -= 1
                if budget < 0:
                    return
                if self._same(obj, obj2):
                    ch.detail["moved_to"] = ch2.path
                    ch2.detail["moved_from"] = ch.path
                    del cands[n]
                    break

    def _same(self, a: Any, b: Any) -> bool:
        w = _Walker(self.is_leaf, self.cmp, self.strict_types)
        w.run(a, b)
        return not w.changes


def _pair_keys(a: Any, b: Any, kids_a: list, kids_b: list) -> list[tuple[int | None, int | None]]:
    """Pair children by key, in a merged order: a's keys, with b's extra keys interleaved."""
    n = len(kids_a)
    if n == len(kids_b) and (
        a.keys() == b.keys()
        if type(a) in _SORTED_DICTS and type(b) in _SORTED_DICTS
        else all(x[0] == y[0] for x, y in zip(kids_a, kids_b))
    ):
        return [(i, i) for i in range(n)]
    pos_a = {k: i for i, (k, _) in enumerate(kids_a)}
    pos_b = {k: j for j, (k, _) in enumerate(kids_b)}
    pairs: list[tuple[int | None, int | None]] = []
    nxt = 0
    for i, (k, _) in enumerate(kids_a):
        j = pos_b.get(k)
        if j is None:
            pairs.append((i, None))
            continue
        while nxt < j:
            if kids_b[nxt][0] not in pos_a:
                pairs.append((None, nxt))
            nxt += 1
        pairs.append((i, j))
        nxt = max(nxt, j + 1)
    pairs.extend((None, j) for j in range(nxt, len(kids_b)) if kids_b[j][0] not in pos_a)
    return pairs


def _share_keys(kids_a: list, kids_b: list) -> bool:
    keys = {str(k) for k, _ in kids_a}
    return any(str(k) in keys for k, _ in kids_b)


def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, Key):
        return str(x)
    item = getattr(x, "item", None)
    if callable(item) and getattr(x, "shape", None) == ():
        try:
            return _jsonable(item())
        except Exception:
            pass
    r = no_address(repr(x))
    return r if len(r) <= 200 else r[:199] + "…"

"""One totals pass: leaves, params, bytes, dtypes, devices, tied arrays once, error entries.

Every count of a whole tree comes from here: `Node.aggregates`, `tt.summary`'s totals row,
`ls/inspect --json` totals, the HTML header and the TUI's leaf index. Two ways in:

- `totals(tree)` walks the tree itself, once, without building paths (builtin containers are
  opened in place, other nodes through the Node model's `children`). A node whose flatten
  raises does not stop it: the walk is taken again with paths, and the node is an error entry
  `(path, message)`; nothing here raises for a broken tree.
- `Tally` is for a walk that does its own per-leaf work (the `--json` records, the TUI's
  columns, the summary's rows): it feeds each leaf, with the facts it already has, to
  `Tally.add`, each broken node to `Tally.error`, and takes the same `Aggregates` at the end.

An array is counted once however many paths hold it (same object: tied weights); `tied` counts
the extra paths. Different views of one buffer of a file (`LazyArray.view_of`: torch tensors
viewing one storage, a slice and its base, a transpose, an LSTM's flat weights) count the bytes
of the buffer they cover together, once (`treetool._tree._shared_views`), but they are not tied:
a tie is the same array (for torch: the same storage, offset, shape and strides, which the
reader makes one leaf object). Devices are bytes per place: each jax device holding a shard of the array
(its shard's bytes; a replicated array counts in full on each device), `"host"` for numpy
arrays and `"file"` for arrays still in a file; nothing is read from a file, and a deleted jax
array keeps its shape and dtype but has no device.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from treetool._leaves._arrays import LazyArray, LeafInfo, leaf_info
from treetool._leaves._dtypes import loaded_numpy
from treetool._tree._shared_views import views_once

__all__ = ["Aggregates", "Tally", "totals"]


@dataclass
class Aggregates:
    """Totals over a tree or subtree; an array at several paths (tied weights) is counted once.

    `dtypes` counts distinct arrays per dtype and `dtype_bytes` their bytes; `devices` is bytes
    per place (a jax `Device`, `"host"`, `"file"`: see `device_bytes` for names). `errors`
    counts the nodes that could not be opened and `error_entries` lists them as
    `(path, "Type: message")` (paths relative to the walked tree); their leaves are not
    counted. `complete` is False when a walk stopped at its leaf limit.

    Example:
        >>> import numpy as np
        >>> w = np.zeros((2, 3), np.float32)
        >>> agg = totals({"a": w, "b": w, "c": "relu"})
        >>> agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied, dict(agg.dtypes)
        (3, 1, 6, 24, 1, {'float32': 1})
        >>> agg.device_bytes
        {'host': 24}
    """

    leaves: int = 0
    arrays: int = 0
    params: int = 0
    nbytes: int = 0
    dtypes: collections.Counter = field(default_factory=collections.Counter)
    tied: int = 0
    complete: bool = True
    #: nodes that could not be opened (their flatten raised); not counted as leaves
    errors: int = 0
    dtype_bytes: collections.Counter = field(default_factory=collections.Counter)
    devices: collections.Counter = field(default_factory=collections.Counter)
    error_entries: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (`errors` only when some node could not be opened).

        Example:
            >>> Aggregates(leaves=1, arrays=1, params=3, nbytes=12).to_dict()["bytes"]
            12
        """
        d: dict[str, Any] = {
            "leaves": self.leaves,
            "arrays": self.arrays,
            "params": self.params,
            "bytes": self.nbytes,
            "dtypes": dict(self.dtypes),
            "tied": self.tied,
        }
        if self.errors:
            d["errors"] = self.errors
        return d

    @property
    def device_bytes(self) -> dict[str, int]:
        """Bytes per place by name: `{"cpu:0": …, "host": …, "file": …}`.

        Example:
            >>> Aggregates(devices=collections.Counter(file=8)).device_bytes
            {'file': 8}
        """
        return {
            d if isinstance(d, str) else f"{d.platform}:{d.id}": n for d, n in self.devices.items()
        }


class Tally:
    """Totals fed one leaf at a time by a walk that does its own per-leaf work.

    `add(x, info)` for every leaf (`info` is `leaf_info(x)`, which the caller has anyway),
    `error(path, message)` for every node that could not be opened, `finish()` for the totals.
    With `paths=True`, `add(x, info, path)` also keeps where each tied array appears
    (`tied_paths`). A walk that needs only leaves, arrays, params and bytes (the `--json`
    totals) feeds `add_sized` instead and takes `finish(breakdown=False)`: the same counts,
    with no pass over the distinct arrays for dtypes and devices.

    Example:
        >>> import numpy as np
        >>> from treetool._leaves._arrays import leaf_info
        >>> w = np.ones(4, np.float32)
        >>> t = Tally(paths=True)
        >>> for p, x in [("['a']", w), ("['b']", w), ("['c']", 1.0)]:
        ...     t.add(x, leaf_info(x), p)
        >>> t.error("['d']", "RuntimeError: boom")
        >>> agg = t.finish()
        >>> agg.leaves, agg.arrays, agg.params, agg.tied, agg.errors, t.tied_paths()
        (3, 1, 4, 1, 1, [(["['a']", "['b']"], 4)])
    """

    __slots__ = (
        "_arrays", "_first", "_jax", "_tie_params", "_ties", "_views", "agg", "leaves", "nbytes",
        "params", "tied",
    )  # fmt: skip

    def __init__(self, paths: bool = False) -> None:
        self.agg = Aggregates()
        self.leaves = self.tied = self.params = self.nbytes = 0
        #: id -> facts of every distinct array met
        self._arrays: dict[int, LeafInfo] = {}
        #: the jax arrays among them, with their facts (their devices are asked at the end)
        self._jax: list[tuple[Any, LeafInfo]] = []
        self._first: dict[int, Any] | None = {} if paths else None
        self._ties: dict[int, list[Any]] = {}
        #: the params of each tied array, as it was met (before views of its buffer merge)
        self._tie_params: dict[int, int] = {}
        self._views: list[Any] = []  # the lazy arrays among them that are views of a buffer

    def add(self, x: Any, info: LeafInfo, path: Any = None) -> None:
        """Count one leaf; an array already met (same object) counts as tied."""
        self.leaves += 1
        if info.shape is not None:
            i = id(x)
            if i in self._arrays:
                self.tied += 1
                if self._first is not None:
                    self._ties.setdefault(i, []).append(path)
                    self._tie_params.setdefault(i, self._arrays[i].params)
            else:
                self._arrays[i] = info
                if self._first is not None:
                    self._first[i] = path
                if info.kind == "jax":
                    self._jax.append((x, info))
                elif isinstance(x, LazyArray) and getattr(x, "view_of", None) is not None:
                    self._views.append(x)  # (a subclass made without __init__ has none)

    def add_sized(self, x: Any, info: LeafInfo) -> None:
        """`add`, summing params and bytes as it goes, for `finish(breakdown=False)`."""
        self.leaves += 1
        if info.shape is not None:
            i = id(x)
            if i in self._arrays:
                self.tied += 1
            else:
                self._arrays[i] = info
                self.params += info.params
                self.nbytes += info.nbytes
                if isinstance(x, LazyArray) and getattr(x, "view_of", None) is not None:
                    self._views.append(x)

    def error(self, path: Any, message: str) -> None:
        """Count a node that could not be opened, as an entry at its path."""
        self.agg.errors += 1
        self.agg.error_entries.append((str(path), message))

    def finish(self, complete: bool = True, breakdown: bool = True) -> Aggregates:
        """The totals of everything added; `breakdown=False` (after `add_sized`): without
        `dtypes`, `dtype_bytes` and `devices`."""
        if self._views:  # views of one buffer: its bytes once (not tied)
            views, self._views = self._views, []
            before = {id(x): self._arrays[id(x)] for x in views}
            views_once(self._arrays, views)
            for i, info in before.items():
                now = self._arrays.get(i)
                if now is not info:
                    self.params += (now.params if now else 0) - info.params
                    self.nbytes += (now.nbytes if now else 0) - info.nbytes
        agg = self.agg
        agg.leaves, agg.tied, agg.complete = self.leaves, self.tied, complete
        if breakdown:
            _sum_arrays(agg, self._arrays.values(), self._jax)
        else:
            agg.arrays, agg.params, agg.nbytes = len(self._arrays), self.params, self.nbytes
        return agg

    def tied_paths(self) -> list[tuple[list[str], int]]:
        """`(paths, params)` of each array met at more than one path (the same object), in
        order of first appearance (only with `paths=True`); views of one buffer are not."""
        if not self._ties or self._first is None:
            return []
        first, ties = self._first, self._ties
        return [
            ([str(first[i]), *map(str, ties[i])], self._tie_params[i]) for i in first if i in ties
        ]


def _sum_arrays(
    agg: Aggregates, infos: Collection[LeafInfo], jax_arrays: list[tuple[Any, LeafInfo]]
) -> None:
    """Params, bytes, dtypes and places of the distinct arrays (once each).

    Arrays of one type, shape and dtype usually share one `LeafInfo`: they are counted per
    shared object (a C-level count), not one by one.
    """
    counts = collections.Counter(map(id, infos))
    # every array its own LeafInfo (a walk without a facts cache): no need to pair them up
    pairs: Iterable[tuple[LeafInfo, int]] = (
        zip(infos, itertools.repeat(1))
        if len(counts) == len(infos)
        else ((info, counts[id(info)]) for info in dict(zip(map(id, infos), infos)).values())
    )
    params = nbytes = host = file = 0
    per_dtype: dict[str, list[int]] = {}
    for info, n in pairs:
        params += n * info.params
        size = n * info.nbytes
        nbytes += size
        dt = info.dtype or ""  # an array's dtype is never None
        d = per_dtype.get(dt)
        if d is None:
            per_dtype[dt] = [n, size]
        else:
            d[0] += n
            d[1] += size
        if info.device == "host":
            host += size
        elif info.device == "file":
            file += size
    for dtype, (n, size) in per_dtype.items():
        agg.dtypes[dtype] += n
        agg.dtype_bytes[dtype] += size
    places = agg.devices
    if host:
        places["host"] += host
    if file:
        places["file"] += file
    agg.arrays += len(infos)
    agg.params += params
    agg.nbytes += nbytes
    for x, info in jax_arrays:
        _add_devices(places, x, info)


def _add_devices(places: collections.Counter, x: Any, info: LeafInfo) -> None:
    """Each device holding a shard of the jax array `x`: the bytes of its shard."""
    try:
        if x.is_deleted():  # its buffers are freed: no device holds its bytes any more
            return
        sharding = x.sharding
        shard = sharding.shard_shape(tuple(x.shape))
        devices = sharding.device_set
    except Exception:  # a deleted or donated buffer, a tracer: no device holds it
        return
    per = info.nbytes if not info.params else info.nbytes * math.prod(shard) // info.params
    for d in devices:
        places[d] += per


_SEQUENCES = (list, tuple)
_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


class _Broken(Exception):
    """The fast walk met a node whose flatten raises: walk again, with paths."""


def totals(
    tree: Any,
    is_leaf: Any = None,
    limit: int | None = None,
    kids: list[tuple[Any, Any]] | None = None,
) -> Aggregates:
    """Leaves, params, bytes, dtypes, devices, tied arrays and error entries of `tree`, in one
    walk; it stops after `limit` leaves (`complete=False`).

    `kids` are `tree`'s `(key, child)` pairs when the caller already has them. With a `limit`,
    a builtin container wider than the leaves still allowed gives up at once. A cycle (a list
    that contains itself) is one leaf; a node whose flatten raises is an error entry at its
    path. Metadata only: no array data is read.

    Example:
        >>> import numpy as np
        >>> w = np.ones((4, 4), np.float32)
        >>> agg = totals({"enc": {"w": w}, "dec": {"w": w, "b": np.zeros(4, np.float16)}})
        >>> agg.leaves, agg.arrays, agg.params, agg.nbytes, agg.tied
        (3, 2, 20, 72, 1)
        >>> sorted(agg.dtype_bytes.items())
        [('float16', 8), ('float32', 64)]
    """
    try:
        return _fast(tree, is_leaf, limit, kids)
    except _Broken:
        return _careful(tree, is_leaf, limit)


#: the node table's LEAF, children and no_gc, bound on first use
_MODEL: tuple[Any, Any, Any] | None = None


def _fast(
    tree: Any, is_leaf: Any, limit: int | None, kids: list[tuple[Any, Any]] | None
) -> Aggregates:
    global _MODEL
    if _MODEL is None:
        from treetool._tree._node_table import LEAF, children, no_gc

        _MODEL = (LEAF, children, no_gc)
    LEAF, children, no_gc = _MODEL
    arrays: dict[int, LeafInfo] = {}
    jax_arrays: list[tuple[Any, LeafInfo]] = []
    facts: dict[tuple[Any, Any, Any], LeafInfo] = {}  # numpy/lazy leaf facts by type, shape, dtype
    np = loaded_numpy()  # no numpy imported: no numpy array exists
    ndarray = np.ndarray if np is not None else _Leave
    views: list[Any] = []  # lazy arrays that are views of a buffer of their file
    leaves = tied = 0
    cap = math.inf if limit is None else limit
    complete = True
    # the containers on the path to the current one, so that a cycle ends as a leaf
    open_ids: set[int] = set() if kids is None else {id(tree)}
    stack = [tree] if kids is None else [c for _, c in reversed(kids)]
    with no_gc():
        while stack:
            x = stack.pop()
            tx = type(x)
            if tx is _Leave:
                open_ids.discard(x.ident)
                continue
            if tx is ndarray or tx is LazyArray:
                # a LazyArray's dtype name: its numpy dtype is made only when needed
                key = (tx, x.shape, x.dtype if tx is ndarray else x._dtname)
                info = facts.get(key)
                if info is None:
                    info = facts[key] = leaf_info(x)
            else:
                info = None
            if info is None:
                if is_leaf is None or not is_leaf(x):
                    if tx in _SEQUENCES or tx in _DICTS:  # builtin containers, opened in place
                        if len(x) > cap - leaves:
                            complete = False
                            break
                        ident = id(x)
                        if ident not in open_ids:
                            open_ids.add(ident)
                            stack.append(_Leave(ident))
                            stack.extend(x.values() if tx in _DICTS else x)
                            continue
                        # the same object as an ancestor: a cycle, counted as one leaf below
                    elif x is None:
                        continue
                    else:
                        try:
                            kind, sub = children(x, is_leaf)
                        except Exception:
                            raise _Broken from None
                        if kind != LEAF:
                            ident = id(x)
                            if ident not in open_ids:
                                open_ids.add(ident)
                                stack.append(_Leave(ident))
                                stack.extend(c for _, c in sub)
                                continue
                try:
                    info = leaf_info(x)
                except Exception:  # a leaf whose facts fail: an error entry, found with paths
                    raise _Broken from None
            leaves += 1
            if leaves > cap:
                complete = False
                leaves -= 1
                break
            if info.shape is None:
                continue
            i = id(x)
            if i in arrays:
                tied += 1
                continue
            arrays[i] = info
            if info.kind == "jax":
                jax_arrays.append((x, info))
            elif isinstance(x, LazyArray) and getattr(x, "view_of", None) is not None:
                views.append(x)
    if views:  # views of one buffer: its bytes once (not tied)
        views_once(arrays, views)
    agg = Aggregates(leaves=leaves, tied=tied, complete=complete)
    if arrays:
        _sum_arrays(agg, arrays.values(), jax_arrays)
    return agg


def _careful(tree: Any, is_leaf: Any, limit: int | None) -> Aggregates:
    """The walk with paths, for a tree holding a node that cannot be opened: depth first in
    jax's order, by the node table, without recursion; a node whose flatten raises and a leaf
    whose facts fail are error entries at their path, a cycle is one leaf."""
    from treetool._tree._node_table import LEAF, children, no_gc

    tally = Tally()
    add, error = tally.add, tally.error
    complete = True
    open_ids: set[int] = set()  # the containers on the path to the current one, as in `_fast`
    stack: list[Any] = [("", tree)]
    with no_gc():
        while stack:
            item = stack.pop()
            if type(item) is _Leave:
                open_ids.discard(item.ident)
                continue
            text, x = item
            kids: list[tuple[Any, Any]]
            if id(x) in open_ids:  # a container holding itself: one leaf, as in the fast walk
                kind, kids = LEAF, []
            else:
                try:
                    kind, kids = children(x, is_leaf)
                except Exception as e:  # its flatten raises: an error entry at its path
                    error(text, f"{type(e).__name__}: {e}")
                    continue
            if kind != LEAF:
                open_ids.add(id(x))
                stack.append(_Leave(id(x)))
                stack.extend((text + str(k), c) for k, c in reversed(kids))
                continue
            if limit is not None and tally.leaves >= limit:
                complete = False
                break
            try:
                info = leaf_info(x)
            except Exception as e:  # a leaf whose facts fail: an error entry at its path
                error(text, f"{type(e).__name__}: {e}")
                continue
            add(x, info)
    return tally.finish(complete)


class _Leave:
    """A marker on the walk's stack: the walk leaves the container `ident` here."""

    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident

"""Snapshots of a tree while a reader builds it in another thread (`PartialWatch`).

A UI that reads a big file in a worker thread hands the reader a `PartialWatch`; it calls
`request()` whenever it wants to show progress (at most a few times a second) and `latest()`
to get the newest snapshot. The reader checks `_wanted()` at its safe points (the pickle reader:
after each batch of dict or list items and at each 64 KiB frame) and, when asked, builds a
snapshot in its own thread and hands it over whole with `_offer`: the root container with the
items read so far, where the containers still under construction are shallow copies and every
complete subtree is shared, never copied. The UI never sees an object the reader still
changes. Formats other than pickle read fast and ignore the watch.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["AsFinished", "PartialWatch"]


class PartialWatch:
    """Snapshots of a tree while a reader builds it in another thread.

    `request()` and `latest()` may be called from any thread; the reader calls `_wanted()` at
    its safe points and `_offer(tree, fraction)` with each snapshot it builds. A snapshot is
    `(tree so far, fraction of the file read)`; its leaves are complete (an array still waiting
    for its data is left out), and it passed the same checks as a finished tree (no cycles,
    depth and expanded size within the file's budget). Building snapshots takes at most
    `share` of the read's time (10%): a request made sooner is answered later in the read.
    A UI shows `as_finished(tree)`: what the finished tree will show for the part read.

    Example:
        >>> import pickle, tempfile, os, threading, numpy as np
        >>> from treetool.io import read
        >>> p = os.path.join(tempfile.mkdtemp(), "big.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({f"k{i}": np.full(1, i, np.float32) for i in range(5000)}, fh)
        >>> watch = PartialWatch()
        >>> watch.request()  # answered at the reader's first safe point
        >>> loaded = read(p, watch=watch)
        >>> tree, fraction = watch.latest()
        >>> 0 < len(tree) <= 5000, 0.0 < fraction <= 1.0
        (True, True)
    """

    __slots__ = ("_finished", "_latest", "_makers", "_scanned", "_want", "path", "share")

    def __init__(self, share: float = 0.1, path: str | None = None) -> None:
        self._want = False
        self._latest: tuple[Any, float] | None = None
        self._finished = AsFinished()
        #: the file being read, when known: `as_finished` has nothing to do for a file that
        #: names no function maker (most checkpoints), and then walks nothing
        self.path = path
        self._makers = path is None
        self._scanned = 0  # the bytes of the file looked at for a function maker's name
        #: the most of the read's time its snapshots may take (a request beyond it waits)
        self.share = share

    def request(self) -> None:
        """Ask for a snapshot at the reader's next safe point (any thread)."""
        self._want = True

    def latest(self) -> tuple[Any, float] | None:
        """The newest snapshot: (tree so far, fraction of the file read), or None (any thread)."""
        return self._latest

    def as_finished(self, tree: Any, fraction: float = 1.0) -> Any:
        """A snapshot as the finished tree will show it (functions as `OpaqueFunction`
        leaves, see `AsFinished`), without changing it; one thread at a time. `fraction` is
        the share of the file the snapshot was built from: with a `path`, only the bytes
        not looked at before are searched for a function maker's name (a snapshot made
        from bytes that name none holds no function, and is not walked)."""
        if not self._makers and self.path is not None:
            start = max(0, self._scanned - _LONGEST_NAME)
            self._makers, self._scanned = _names_a_maker(self.path, start, fraction)
        return self._finished(tree) if self._makers else tree

    def release(self) -> None:
        """Forget the newest snapshot (the whole tree has taken its place): the watch no
        longer keeps the tree read so far alive (any thread)."""
        self._latest = None
        self._finished = AsFinished()  # it remembers the last snapshot's big containers

    def _wanted(self) -> bool:
        return self._want

    def _decline(self) -> None:
        # the snapshot failed the checks a finished tree must pass: none is offered
        self._want = False

    def _offer(self, tree: Any, fraction: float) -> None:
        self._want = False
        self._latest = (tree, fraction)  # one reference assignment: the UI sees all or nothing


#: containers with at least this many children are remembered from one snapshot to the next
#: (a snapshot shares every complete subtree with the next one); smaller ones are walked again
_MEMO_MIN = 16


class AsFinished:
    """Snapshots shown as the finished tree will be: functions are `OpaqueFunction` leaves.

    At the end of a read, `collapse_functions` turns each function the file makes (an `Opaque`
    of a cloudpickled lambda, a `custom_jvp`…) into one `OpaqueFunction` leaf, writing into
    the containers that hold it. A snapshot is taken before that: it would show those
    functions as `Opaque` nodes (their bytecode, closures, file paths) until the whole tree
    arrives, and it shares its complete subtrees with the tree being read, so that final pass
    would write into containers the UI is showing. Calling an `AsFinished` on a snapshot gives
    what the finished tree shows for it, copy on write: each container holding a function (or
    holding one that does) is a copy with the function's leaf in place; the containers left
    shared hold no function and are never written to by the final pass. The snapshot itself
    is not changed. Containers of `_MEMO_MIN` children or more are remembered by identity, so
    the next snapshot walks only what is new.

    Example:
        >>> import cloudpickle, os, tempfile, numpy as np
        >>> from treetool.io import read
        >>> p = os.path.join(tempfile.mkdtemp(), "fns.pkl")
        >>> tree = {"act": lambda x: x + 1, **{f"k{i}": np.ones(1) for i in range(5000)}}
        >>> with open(p, "wb") as fh:
        ...     cloudpickle.dump(tree, fh)
        >>> class Every(PartialWatch):  # a snapshot at every safe point: keeps the last
        ...     __slots__ = ()
        ...     def _wanted(self) -> bool:
        ...         return True
        >>> watch = Every(share=1.0)
        >>> final = read(p, watch=watch).tree
        >>> snap, _ = watch.latest()
        >>> shown = AsFinished()(snap)
        >>> shown is not snap, shown["k0"] is snap["k0"]  # a copy of the root, leaves shared
        (True, True)
        >>> type(snap["act"]).__name__, type(shown["act"]).__name__, type(final["act"]).__name__
        ('Opaque', 'OpaqueFunction', 'OpaqueFunction')
        >>> shown["act"].qualname == final["act"].qualname
        True
    """

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        #: id -> (container, what it becomes): the big containers of the last snapshot
        self._memo: dict[int, tuple[Any, Any]] = {}

    def __call__(self, tree: Any) -> Any:
        """`tree` (a snapshot) as the finished tree shows it; `tree` itself is not changed."""
        import numpy as np

        from treetool.io._opaque import Opaque
        from treetool.io._pickle._functions import _WALKED, as_function

        memo, seen = self._memo, {}
        # id -> (the object, its replacement): a function's leaf, a rebuilt tuple, or a copy
        # of a container showing what the final pass will write into it
        new: dict[int, tuple[Any, Any]] = {}
        done: set[int] = set()
        stack: list[tuple[Any, bool]] = [(tree, False)]
        pop, push = stack.pop, stack.append
        while stack:
            obj, leaving = pop()
            oid = id(obj)
            if leaving:
                out = _rebuilt(obj, new)
                if out is not obj:
                    new[oid] = (obj, out)
                if _size(obj) >= _MEMO_MIN:
                    seen[oid] = (obj, out)
                done.add(oid)
                continue
            if oid in done:
                continue
            hit = memo.get(oid)
            if hit is not None and hit[0] is obj:  # complete, walked for an earlier snapshot
                seen[oid] = hit
                if hit[1] is not obj:
                    new[oid] = hit
                done.add(oid)
                continue
            t = type(obj)
            if t is Opaque:
                fn = as_function(obj)
                if fn is not None:
                    new[oid] = (obj, fn)
                    done.add(oid)
                    continue
            elif t not in _WALKED and not (t is np.ndarray and obj.dtype.hasobject):
                done.add(oid)
                continue
            push((obj, True))
            kids = _children(obj)
            kinds = set(map(type, kids))  # a wide container of leaves: no loop per child
            if kinds.isdisjoint(_WALKED) and (
                np.ndarray not in kinds or (len(kinds) == 1 and not any(map(_HAS_OBJECT, kids)))
            ):
                continue
            for c in kids:
                tc = type(c)
                if tc in _WALKED or (tc is np.ndarray and c.dtype.hasobject):
                    push((c, False))
        self._memo = seen
        got = new.get(id(tree))
        return tree if got is None else got[1]


_HAS_OBJECT = operator.attrgetter("dtype.hasobject")


def may_make_functions(path: str) -> bool:
    """Whether the pickle at `path` names a function maker (cloudpickle's `_make_function`,
    `functools.partial`, `custom_jvp`…): a global is named by its bytes in the file, so a
    file without any of those names cannot make a function. True when unsure.

    Example:
        >>> import os, pickle, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "w.pkl")
        >>> with open(p, "wb") as fh:
        ...     pickle.dump({"w": [1.0, 2.0]}, fh)
        >>> may_make_functions(p)
        False
    """
    return _names_a_maker(path, 0, 1.0)[0]


#: the names of the globals that make functions (their bytes are in a file that uses one)
_MAKER_NAMES = (
    b"_make_function",
    b"FunctionType",
    b"LambdaType",
    b"CodeType",
    b"partial",
    b"custom_jvp",
    b"custom_vjp",
    b"_builtin_type",
    b"PjitFunction",
)
_LONGEST_NAME = max(map(len, _MAKER_NAMES))


def _names_a_maker(path: str, start: int, fraction: float) -> tuple[bool, int]:
    """(whether bytes `start:` up to `fraction` of the file name a function maker, where
    the search stopped); (True, 0) when the file cannot be looked at."""
    import mmap

    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            end = min(len(mm), int(len(mm) * fraction) + 1)
            return any(mm.find(name, start, end) != -1 for name in _MAKER_NAMES), end
    except (OSError, ValueError):  # gone, empty, not mappable: walk the snapshots
        return True, 0


def _size(obj: Any) -> int:
    try:
        return len(obj)
    except TypeError:  # an Opaque
        return 0


def _children(obj: Any) -> list[Any]:
    import numpy as np

    from treetool.io._opaque import Opaque

    t = type(obj)
    if t is np.ndarray:
        return obj.reshape(-1).tolist()
    if t is Opaque:
        return [obj.args, obj.state, obj.listitems, obj.dictitems, obj.kwargs, obj.source]
    if isinstance(obj, dict):
        return list(obj.values())
    return list(obj)


def _rebuilt(obj: Any, new: dict[int, tuple[Any, Any]]) -> Any:
    """`obj` with its replaced children (see `AsFinished`): a copy, or `obj` unchanged."""
    import copy

    import numpy as np

    from treetool.io._opaque import Opaque

    if not new:  # nothing below was replaced (a file without functions: every container)
        return obj

    def swap(x: Any) -> Any:
        got = new.get(id(x))
        return x if got is None or got[0] is not x else got[1]

    t = type(obj)
    if t is Opaque:
        # the final pass swaps functions into `args` and `state`; the other parts of an
        # Opaque are containers it changes in place (shown here by their copies)
        attrs = {a: swap(getattr(obj, a)) for a in ("args", "state")}
        for a in ("listitems", "dictitems", "kwargs", "source"):
            x = getattr(obj, a)
            y = swap(x)
            if y is not x and type(y) is type(x):  # a copy, not a function's leaf
                attrs[a] = y
        if all(v is getattr(obj, a) for a, v in attrs.items()):
            return obj
        out = copy.copy(obj)
        for a, v in attrs.items():
            setattr(out, a, v)
        return out
    if isinstance(obj, dict):
        changed = [(k, swap(v)) for k, v in obj.items() if swap(v) is not v]
        if not changed:
            return obj
        out = obj.copy()  # keeps the type (OrderedDict, a defaultdict's factory)
        out.update(changed)
        return out
    if t is np.ndarray:
        flat = obj.reshape(-1).tolist()
        if all(swap(v) is v for v in flat):
            return obj
        out = obj.copy()
        for i, v in enumerate(flat):
            out.flat[i] = swap(v)
        return out
    items = list(obj)
    swapped = [swap(v) for v in items]
    if all(a is b for a, b in zip(items, swapped, strict=True)):
        return obj
    return swapped if t is list else t(swapped)

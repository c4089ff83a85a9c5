"""What a partial read of a damaged or oversized pickle keeps.

`_salvage`: after an error, the outermost object built so far, with the items waiting under
their MARK folded in. `_what_fits`: a tree past the expanded-size budget cut to its leading
part that fits (`_sizes` measures, `_prefix` cuts).
"""

from __future__ import annotations

import collections
import copy
import time
from typing import Any

from treetool._errors import LoadError
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._ops import KeyCheck, PendingKey, walk_check
from treetool.io._pickle._state import _State
from treetool.io._safety._budget import Budget

__all__ = ["SNAPSHOT_LEVELS", "_salvage", "_what_fits", "offer_snapshot", "snapshot"]


def _what_fits(tree: Any, budget: Budget) -> Any:
    """With `partial`, a tree past the expanded-size budget: the leading part of it that fits.

    Children are kept in order while their expanded size fits; the first one that does not is
    cut the same way, and the rest are left out. Only the containers along the cut are copied.
    """
    room = budget.max_expanded
    sizes: dict[int, int] = {}
    _sizes(tree, room, sizes, 0, budget.path)
    return _prefix(tree, room, sizes)[0]


def _sizes(x: Any, room: int, sizes: dict[int, int], depth: int, path: str) -> int:
    # the expanded size of x, or something > room where it does not fit (sizes memoised by id)
    known = sizes.get(id(x))
    if known is not None:
        return known
    t = type(x)
    if t in _CUT:
        total = len(x)
        if depth < 64:
            for c in x.values() if isinstance(x, dict) else x:
                total += _sizes(c, room, sizes, depth + 1, path)
                if total > room:
                    break
        else:
            total = room + 1
    elif t in (Opaque, set, frozenset) or nr.is_object_array(x):
        b = Budget(path, 0)
        b.max_expanded = room
        try:
            total = walk_check(x, b).expanded
        except LoadError:
            total = room + 1
    else:
        return 0
    sizes[id(x)] = total
    return total


def _prefix(x: Any, room: int, sizes: dict[int, int]) -> tuple[Any, int]:
    if sizes.get(id(x), 0) <= room:
        return x, sizes.get(id(x), 0)
    t = type(x)
    if t not in _CUT:
        return None, 0
    used = 0
    kept: list = []
    for item in x.items() if isinstance(x, dict) else x:
        c = item[1] if isinstance(x, dict) else item
        need = 1 + sizes.get(id(c), 0)
        if used + need <= room:
            kept.append(item)
            used += need
            continue
        if used + 1 < room and type(c) in _CUT:
            sub, n = _prefix(c, room - used - 1, sizes)
            kept.append((item[0], sub) if isinstance(x, dict) else sub)
            used += 1 + n
        break
    if t is list:
        return kept, used
    if t is tuple:
        return tuple(kept), used
    if t is collections.defaultdict:
        d: Any = collections.defaultdict(x.default_factory)
        d.update(kept)
        return d, used
    return t(kept), used


_CUT = (list, tuple, dict, collections.OrderedDict, collections.defaultdict)


def _incomplete(x: Any) -> bool:
    return type(x) in (nr.PendingArray, nr.PendingDtype, PendingKey) or (
        type(x) is GlobalRef and bool(x.tag)
    )


def _salvage(machine: _State) -> Any:
    """The outermost object built so far, with pending MARK items folded into it.

    Items waiting for SETITEMS/APPENDS are added to the dict or list below their MARK; values
    still under construction (an array waiting for its data) are left out, and so are keys
    that fail the key check.
    """
    stack, metastack = machine.stack, machine.metastack
    keycheck: KeyCheck = machine.keycheck

    def checked(msg: str, at: int) -> LoadError:
        return LoadError(msg)

    while metastack:
        items = stack
        cut = next((i for i, x in enumerate(items) if _incomplete(x)), len(items))
        items = items[:cut]
        stack = metastack.pop()
        if stack:
            top = stack[-1]
            if type(top) is dict:
                for i in range(0, len(items) - 1, 2):
                    try:
                        keycheck.keys((items[i],), 0, checked)
                        top[items[i]] = items[i + 1]
                    except (TypeError, LoadError):
                        break
            elif type(top) is list:
                top.extend(items)
    return stack[0] if stack and not _incomplete(stack[0]) else None


#: a snapshot copies at most this many levels of the containers under construction
SNAPSHOT_LEVELS = 4
_SNAP_KEYS = frozenset((str, int, float, bool, bytes, type(None)))  # hashed in O(len)
_MUTABLE = (dict, list, set, collections.OrderedDict, collections.defaultdict, Opaque)


def _copy(x: Any) -> Any:
    # a shallow copy of a container the reader may still change
    t = type(x)
    if t is list:
        return x.copy()
    if t is Opaque:
        c = copy.copy(x)
        c.listitems = list(x.listitems)
        c.dictitems = dict(x.dictitems)
        if type(x.state) is dict:
            c.state = dict(x.state)
        return c
    return x.copy()  # dict, set, OrderedDict, defaultdict (keeps its factory)


def snapshot(machine: _State) -> Any:
    """The tree built so far, without changing anything the reader holds (see `_partial`).

    Like `_salvage`, items waiting under a MARK are folded into the container below it; here
    each container that may still change (the last three items of the innermost of the first
    `SNAPSHOT_LEVELS` stack levels, the last item of the others) is a shallow copy, and
    everything else is shared. Dict
    keys other than strings, numbers, bytes and None stop the fold (they are hashed only by the
    reader, after its key check). Returns None when nothing is complete yet. Costs O(items so
    far of the containers copied): for a flat dict, a copy of the root dict.
    """
    levels = [*machine.metastack, machine.stack][:SNAPSHOT_LEVELS]
    pending: list = []
    for n, level in enumerate(reversed(levels)):
        cut = next((i for i, x in enumerate(level) if _incomplete(x)), len(level))
        items = level[:cut]
        # what the next opcodes may change: SETITEM/APPEND/BUILD reach the last three items
        # of the innermost level; a batch above fills the last item of the levels below
        for i in range(max(0, len(items) - (1 if n else 3)), len(items)):
            if isinstance(items[i], _MUTABLE):
                items[i] = _copy(items[i])
        if n and items:  # fold the level above into this level's last container
            top = items[-1]
            if isinstance(top, dict):
                for i in range(0, len(pending) - 1, 2):
                    if type(pending[i]) not in _SNAP_KEYS:
                        break
                    top[pending[i]] = pending[i + 1]
            elif type(top) is list:
                top.extend(pending)
        pending = items
    return pending[0] if pending else None


def offer_snapshot(machine: _State) -> None:
    """Hand the watch a snapshot of the tree so far (see `_partial`); at a safe point only.

    The snapshot passes `walk_check` like a finished tree; one that does not (a cycle, past
    the budget) is not offered, and the read goes on to fail or finish as without a watch.
    Snapshots take at most `watch.share` of the read's time (a snapshot of a flat dict of
    500,000 arrays costs about 0.15 s: the copy of the root dict and its check): a request
    made sooner is answered at a later safe point.
    """
    watch = machine.watch
    assert watch is not None
    now = time.perf_counter()
    if machine.snap_spent > watch.share * (now - machine.started):
        return  # snapshots took their share of the read so far: a later safe point
    try:
        tree = snapshot(machine)
        if tree is None:  # nothing complete yet: the next safe point tries again
            return
        walk_check(tree, machine.budget, machine.shared, machine.object_arrays)
    except (LoadError, TypeError, ValueError, RecursionError):
        watch._decline()
        return
    finally:
        machine.snap_spent += time.perf_counter() - now
    watch._offer(tree, machine.pos / machine.end)

"""Views of one buffer of a file counted once: the union of the bytes they cover.

A reader that makes several leaves over one buffer of its file (torch tensors viewing one
storage: a slice and its base, a transpose, columns) names the buffer on each leaf
(`LazyArray.view_of = (buffer, byte offset)`). `views_once` turns the distinct views of each
buffer into one entry of a totals pass, whose bytes are the union of what they cover.

Example:
    >>> from treetool._leaves._arrays import LazyArray, leaf_info
    >>> buf = object()  # names the buffer
    >>> a = LazyArray((4, 6), "float32", "f.pt", 0, view_of=(buf, 0))
    >>> b = LazyArray((2, 6), "float32", "f.pt", 48, view_of=(buf, 48))  # a[2:]
    >>> arrays = {id(a): leaf_info(a), id(b): leaf_info(b)}
    >>> views_once(arrays, [a, b]), [(i.params, i.nbytes) for i in arrays.values()]
    (1, [(24, 96)])
"""

from __future__ import annotations

import math
from typing import Any

from treetool._leaves._facts import LeafInfo

__all__ = ["views_once"]


#: a view is counted by its runs of contiguous elements up to this many, and a whole tree's
#: views up to `_TREE_RUNS` runs; past them, by their windows (a hostile file's many views cost
#: no more than this)
_MAX_RUNS = 1 << 12
_TREE_RUNS = 1 << 18


def views_once(arrays: dict[int, LeafInfo], views: list[Any], merged: Any = None) -> int:
    """Views of one buffer (`LazyArray.view_of`) as one array: the number of views merged.

    The rule: each buffer met through two or more different views counts the bytes of the
    union of the elements its views cover, once, under its first view's entry in `arrays`
    (its dtype, its place); params are those bytes over that view's itemsize. A view covers
    its elements exactly, as runs of contiguous elements, unless it has more than `_MAX_RUNS`
    runs: then its window (first element to last). A buffer met through one view counts that
    view's elements, as any array does. `merged(first_id, other_id)` is told of each merge.
    """
    groups: dict[int, list[Any]] = {}
    left = [_TREE_RUNS]
    for x in views:
        groups.setdefault(id(x.view_of[0]), []).append(x)
    extra = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        head = members[0]
        spans = sorted(span for x in members for span in _spans(x, left))
        nbytes = end = 0
        for a, b in spans:  # the union of the byte spans
            if b > end:
                nbytes += b - max(a, end)
                end = b
        info = arrays[id(head)]
        arrays[id(head)] = LeafInfo(
            info.kind, info.type_name, info.shape, info.dtype, nbytes,
            nbytes // head.itemsize if head.itemsize else 0, False, info.device,
        )  # fmt: skip
        for x in members[1:]:
            del arrays[id(x)]
            if merged is not None:
                merged(id(head), id(x))
        extra += len(members) - 1
    return extra


def _spans(x: Any, left: list[int]) -> list[tuple[int, int]]:
    """The byte spans `[a, b)` of its buffer that the view `x` covers (`left[0]`: the runs
    the walk may still spell out; past them, the window)."""
    at, size, item = x.view_of[1], x.size, x.itemsize
    strides = getattr(x, "strides", None)
    if not size:
        return []
    if strides is None:  # C or Fortran order: every element of its window
        return [(at, at + size * item)]
    dims = sorted((s, n) for n, s in zip(x.shape, strides) if n > 1 and s)
    run, k = 1, 0
    for s, n in dims:  # the inner dims that make one run of contiguous elements
        if s > run:
            break
        run, k = run + s * (n - 1), k + 1
    outer = dims[k:]
    runs = math.prod(n for _, n in outer)
    if runs > _MAX_RUNS or runs > left[0]:
        last = sum(s * (n - 1) for s, n in dims)
        return [(at, at + (last + 1) * item)]
    left[0] -= runs
    starts = [0]
    for s, n in outer:
        starts = [a + s * i for a in starts for i in range(n)]
    return [(at + a * item, at + (a + run) * item) for a in starts]

"""Aligning the children of two sequences, and structural signatures of subtrees.

When a list of layers gains or loses an element in the middle, comparing it position by
position reports every later element as changed. `align` matches elements like difflib does
(a longest common subsequence), first on full signatures (structure and small contents), then
on structure alone inside the gaps, and pairs what is left by position. The result is the same,
mirrored, when the two sides are swapped, so `diff(a, b)` and `diff(b, a)` agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from treetool._leaves._arrays import LazyArray, is_array
from treetool._tree._model import LEAF, IsLeaf, children
from treetool._typetests import is_opaque, is_shape_struct

__all__ = ["align", "lcs", "signature", "type_key"]

#: pairs (i, j): i indexes the first sequence, j the second; None where one side has nothing.
Pair = tuple[int | None, int | None]

# The DP table of the LCS grows as n*m; past this, only common prefix and suffix are matched.
_MAX_CELLS = 250_000
# Arrays up to this many bytes take part in signatures by content (hashed).
_MAX_HASH_BYTES = 1 << 20


def type_key(obj: Any) -> str:
    """`module.QualName` of the object's class; an `Opaque` placeholder answers its class path.

    A pickled `equinox.nn.Linear` loaded safely (an `Opaque`) has the type key of a live one.
    """
    cp = getattr(obj, "class_path", None) if is_opaque(obj) else None
    if isinstance(cp, str):
        return cp
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _leaf_signature(x: Any, content: bool) -> tuple:
    if is_array(x):
        shape = tuple(int(s) for s in x.shape)
        dtype = str(x.dtype)
        if not content:
            return ("A", shape, dtype)
        return ("A", shape, dtype, _content_hash(x))
    if not content:
        return ("O", type_key(x))
    try:
        h = hash(x)
    except TypeError:
        h = id(x)
    return ("O", type_key(x), h)


def _content_hash(x: Any) -> Any:
    """A digest of an array's bytes when it is small and in memory; None when unknown."""
    if isinstance(x, LazyArray) or is_shape_struct(x):
        return None
    nbytes = getattr(x, "nbytes", None)
    if nbytes is None or nbytes > _MAX_HASH_BYTES:
        return None
    try:
        arr = np.ascontiguousarray(np.asarray(x))
    except Exception:  # typed PRNG keys, deleted buffers: structure only
        return None
    if arr.dtype.kind == "O":
        return None
    # numpy's stubs give ndarray the buffer protocol (`__buffer__`) for Python >= 3.12 only
    data = arr.view(np.uint8).reshape(-1)
    return hashlib.blake2b(data, digest_size=16).digest()  # type: ignore[arg-type,unused-ignore]


def signature(
    obj: Any, is_leaf: IsLeaf = None, *, content: bool = True, limit: int = 4096
) -> tuple:
    """A hashable fingerprint of a subtree: node types, keys, shapes, dtypes (and contents).

    With `content=True`, small in-memory arrays and hashable leaves contribute their values, so
    equal signatures mean "very probably the same subtree". Past `limit` nodes the fingerprint
    stops, ending with a marker (two big subtrees then compare by their first `limit` nodes).
    """
    out: list = []
    stack = [obj]
    seen = 0
    while stack:
        x = stack.pop()
        seen += 1
        if seen > limit:
            out.append(("…", len(stack)))
            break
        kind, kids = children(x, is_leaf)
        if kind == LEAF:
            out.append(_leaf_signature(x, content))
            continue
        out.append((type_key(x), kind, tuple(str(k) for k, _ in kids)))
        stack.extend(c for _, c in reversed(kids))
    return tuple(out)


def _order_key(x: Any) -> str:
    return repr(x)


def lcs(xs: Sequence[Any], ys: Sequence[Any]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of `xs` and `ys` (elements compared by ==).

    Symmetric: `lcs(ys, xs)` is the same pairs mirrored. Common prefixes and suffixes are
    matched directly; the middle goes through the quadratic table only when it is small.

    Example:
        >>> lcs("abcd", "abxcd")
        [(0, 0), (1, 1), (2, 3), (3, 4)]
    """
    n, m = len(xs), len(ys)
    lo = 0
    while lo < n and lo < m and xs[lo] == ys[lo]:
        lo += 1
    hi_x, hi_y = n, m
    while hi_x > lo and hi_y > lo and xs[hi_x - 1] == ys[hi_y - 1]:
        hi_x -= 1
        hi_y -= 1
    pairs = [(i, i) for i in range(lo)]
    mx, my = hi_x - lo, hi_y - lo
    if mx and my and mx * my <= _MAX_CELLS:
        pairs.extend((lo + i, lo + j) for i, j in _lcs_table(xs[lo:hi_x], ys[lo:hi_y]))
    pairs.extend((hi_x + k, hi_y + k) for k in range(n - hi_x))
    return pairs


def _lcs_table(xs: Sequence[Any], ys: Sequence[Any]) -> list[tuple[int, int]]:
    n, m = len(xs), len(ys)
    # suffix table: L[i][j] = LCS length of xs[i:], ys[j:]
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, nxt, x = table[i], table[i + 1], xs[i]
        for j in range(m - 1, -1, -1):
            row[j] = nxt[j + 1] + 1 if x == ys[j] else max(nxt[j], row[j + 1])
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < n and j < m:
        if xs[i] == ys[j]:
            out.append((i, j))
            i += 1
            j += 1
            continue
        down, right = table[i + 1][j], table[i][j + 1]
        if down == right:
            # a tie: decide from the two elements themselves, so that swapping the sides
            # takes the mirrored decision
            kx, ky = (n - i, _order_key(xs[i])), (m - j, _order_key(ys[j]))
            skip_x = kx > ky
        else:
            skip_x = down > right
        if skip_x:
            i += 1
        else:
            j += 1
    return out


def align(
    xs: Sequence[Any],
    ys: Sequence[Any],
    is_leaf: IsLeaf = None,
    sig: Callable[..., tuple] = signature,
) -> list[Pair]:
    """Match the elements of two sequences of subtrees; unmatched ones pair with None.

    Sequences of equal length pair by position. Otherwise elements are matched on full
    signatures, then on structure inside each gap, then by position within what remains.

    Example:
        >>> align([1.0, 2.0, 3.0], [1.0, 9.0, 2.0, 3.0])
        [(0, 0), (None, 1), (1, 2), (2, 3)]
    """
    n, m = len(xs), len(ys)
    if n == m:
        return [(i, i) for i in range(n)]
    full_x = [sig(x, is_leaf, content=True) for x in xs]
    full_y = [sig(y, is_leaf, content=True) for y in ys]
    out: list[Pair] = []
    prev_i = prev_j = 0
    for i, j in [*lcs(full_x, full_y), (n, m)]:
        _fill_gap(xs, ys, prev_i, i, prev_j, j, is_leaf, sig, out)
        if i < n:
            out.append((i, j))
        prev_i, prev_j = i + 1, j + 1
    return out


def _fill_gap(
    xs: Sequence[Any],
    ys: Sequence[Any],
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    is_leaf: IsLeaf,
    sig: Callable[..., tuple],
    out: list[Pair],
) -> None:
    if i0 == i1 and j0 == j1:
        return
    if i0 == i1 or j0 == j1:
        _pair_by_position(i0, i1, j0, j1, out)
        return
    sx = [sig(xs[i], is_leaf, content=False) for i in range(i0, i1)]
    sy = [sig(ys[j], is_leaf, content=False) for j in range(j0, j1)]
    pi, pj = i0, j0
    for a, b in [*lcs(sx, sy), (i1 - i0, j1 - j0)]:
        _pair_by_position(pi, i0 + a, pj, j0 + b, out)
        if i0 + a < i1:
            out.append((i0 + a, j0 + b))
        pi, pj = i0 + a + 1, j0 + b + 1


def _pair_by_position(i0: int, i1: int, j0: int, j1: int, out: list[Pair]) -> None:
    k = min(i1 - i0, j1 - j0)
    out.extend((i0 + t, j0 + t) for t in range(k))
    out.extend((i, None) for i in range(i0 + k, i1))
    out.extend((None, j) for j in range(j0 + k, j1))

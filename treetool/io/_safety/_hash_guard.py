"""`HashGuard`: dict keys and set items whose hashes a file chose to collide.

CPython compares a new key with every key of its hash already in a dict or set, so n keys of
one hash cost n**2 / 2 comparisons: a few hundred KB of pickled ints that are multiples of
2**61 - 1 (every one hashes to 0) took minutes of CPU. Strings and bytes hash with a
per-process secret, and ints in (-(2**61 - 1), 2**61 - 1) other than -1 hash to themselves: a
file cannot choose their collisions. Every other key (big ints, floats, tuples, frozensets...)
is remembered by hash over the whole file, one entry per hash (a key repeated in many dicts
counts once), and more than `SAME_HASH` distinct keys of one hash are refused. Linear: each
key costs one hash and at most `SAME_HASH` comparisons.

Example:
    >>> from treetool.io._safety._budget import Budget
    >>> g = HashGuard(Budget("f.pkl", 100))
    >>> g.check([2**61 - 1, 2 * (2**61 - 1)], {int}, 0, None)  # two collide: fine
    >>> len(g.buckets)
    1
"""

from __future__ import annotations

import sys
from typing import Any

from treetool.io._safety._budget import Budget

__all__ = ["SAME_HASH", "UNCHOSEN_HASH", "HashGuard"]

#: key types whose hash a file cannot choose the collisions of (and that need no walk)
UNCHOSEN_HASH = frozenset((str, bytes))
_INTS = {int}
#: CPython's modulus of numeric hashes (2**61 - 1 on 64-bit builds)
_MODULUS = sys.hash_info.modulus
#: the most distinct keys of a file that may share one hash (real files: 1 or 2)
SAME_HASH = 64
_NOTHING = object()


class _Bucket(set):
    """The distinct keys seen with one hash (a set, told apart from a key that is a set)."""

    __slots__ = ()


class HashGuard:
    """The hashes of a file's keys so far, and the budget their hashing is charged to."""

    __slots__ = ("budget", "buckets")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        #: hash -> the one key seen with it, or a `_Bucket` of the distinct keys sharing it
        self.buckets: dict[int, Any] = {}

    def check(self, keys: Any, types: set[type], at: int, fail: Any) -> None:
        """Remember the keys of `keys` (a list or tuple of these `types`) whose hash a file can
        choose; raise `fail(message, at)` past `SAME_HASH` distinct keys of one hash."""
        if types == _INTS and min(keys) > -_MODULUS and max(keys) < _MODULUS and -1 not in keys:
            return  # ints that hash to themselves (the usual int keys): scanned in C
        self._collisions(keys, at, fail)

    def _collisions(self, keys: Any, at: int, fail: Any) -> None:
        """Refuse a file whose dict keys or set items share a hash by the dozen: CPython
        compares a new key with every key of its hash already there, so n colliding keys
        cost n**2 / 2 comparisons (a few hundred KB of ints that are multiples of 2**61 - 1
        take minutes). Strings and bytes hash with a per-process secret, and ints in
        [-(2**61) + 2, 2**61 - 1) other than -1 hash to themselves: a file cannot choose
        their collisions, so only other keys (big ints, floats, tuples, frozensets...) are
        remembered, one entry per hash, over the whole file (a key repeated in many dicts
        counts once)."""
        buckets = self.buckets
        hashed = 0
        for k in keys:
            t = type(k)
            if t is str or t is bytes or (t is int and -_MODULUS < k < _MODULUS and k != -1):
                continue
            hashed += 1
            try:
                h = hash(k)
            except TypeError:
                continue  # unhashable: the insertion names it
            seen = buckets.get(h, _NOTHING)
            if seen is _NOTHING:
                buckets[h] = k
            elif type(seen) is _Bucket:
                if k not in seen:  # compares with the (at most SAME_HASH) keys of the hash
                    if len(seen) >= SAME_HASH:
                        raise fail(
                            f"more than {SAME_HASH} distinct dict keys or set items share "
                            "one hash (a hash-collision bomb)",
                            at,
                        )
                    seen.add(k)
            elif not (type(seen) is t and seen == k):
                buckets[h] = _Bucket((seen, k))
        if hashed:  # the work of remembering them, in the budget's work units
            self.budget.charge_expanded(hashed, f"hashing dict keys, at byte {at}")

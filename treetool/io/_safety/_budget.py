"""What a file of N bytes may make a reader build: the one statement of the reader budgets.

Every reader of untrusted bytes makes a `Budget` from the file's size and charges it as it
builds. A budget is a floor (what any small real file may need) plus an allowance per byte of
the file, so that a real checkpoint always fits and a few hundred hostile bytes cannot make
gigabytes:

===========  ===========================================================  =====================
limit        counts                                                       allowed for N bytes
===========  ===========================================================  =====================
depth        nesting of containers (values and dict keys alike)           1,000 (keys: 100)
expanded     leaves and edges of the tree, a shared subtree counted at    100,000 + 8 N
             every reference (what every view walks); also the work of
             hashing tuple keys, counted the same way
alloc        bytes a reader allocates beyond what it reads: copies made   64 MiB + 16 N
             by reconstructors, memo slots skipped over by a PUT, what a
             deflated record inflates to, and `NODE_COST` (300) bytes
             for every list, dict or object a pickle makes, 64 for a
             tuple (what it and the node treetool builds for it cost)
===========  ===========================================================  =====================

Objects are charged as bytes, to the one allocation budget, not counted against a separate
limit: a pickle's container costs `NODE_COST` bytes (an empty list is 56 bytes, the tree node
and row made for it by a view some 250 more; a tuple, as often a dict key or a reconstructor's
arguments, its own 64), so a 5 MB pickle of 5 million empty lists is refused after some 500,000 of
them, while a checkpoint (arrays of kilobytes, a few containers each) is far inside. Scalars (numbers, strings) are not charged: each costs less than the bytes
that encode it are allowed. Exceeding a limit raises `BudgetError` (a `LoadError`) with one
line naming the file, what was exceeded and the limit; readers that salvage (`partial=True`)
keep what fits.

Example:
    >>> b = Budget("ckpt.pkl", 1000)
    >>> b.max_expanded
    108000
    >>> b.charge_alloc(10 * 2**20)
    >>> try:
    ...     b.charge_alloc(100 * 2**20)
    ... except LoadError as e:
    ...     print(e)
    ckpt.pkl: the reader would allocate more than 67,124,864 bytes for a 1,000-byte file (a budget of 64 MiB + 16 per file byte); `--partial` shows what fits
"""

from __future__ import annotations

from treetool._errors import LoadError

__all__ = ["MAX_DEPTH", "MAX_KEY_DEPTH", "NODE_COST", "Budget", "BudgetError", "alloc_allowance"]

#: deepest nesting of containers accepted in a loaded tree
MAX_DEPTH = 1000
#: deepest nesting of a tuple or frozenset used as a dict key or set item (keys are shown
#: through repr, which Python limits to about 1,000 levels in all)
MAX_KEY_DEPTH = 100

#: the bytes charged to the allocation budget for each container or object a pickle makes:
#: the object (56-232 bytes) and the tree node, path and row treetool builds for it (~250)
NODE_COST = 300
_EXPANDED_FLOOR, _EXPANDED_PER_BYTE = 100_000, 8
_ALLOC_FLOOR, _ALLOC_PER_BYTE = 64 * 2**20, 16

_HINT = "`--partial` shows what fits"


def alloc_allowance(size: int) -> int:
    """The allocation budget of a file of `size` bytes (64 MiB + 16 per byte).

    Example:
        >>> alloc_allowance(18 << 20) >> 20
        352
    """
    return _ALLOC_FLOOR + _ALLOC_PER_BYTE * size


class BudgetError(LoadError):
    """A budget was exceeded; `what` names it ("depth", "expanded", "alloc")."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


class Budget:
    """The limits for one file of `size` bytes, and what was charged against them so far.

    Example:
        >>> b = Budget("x.pkl", 10)
        >>> b.max_alloc, b.max_depth
        (67109024, 1000)
        >>> b.charge_alloc(200_000 * NODE_COST)
        >>> try:
        ...     b.charge_alloc(30_000 * NODE_COST, "containers made, at byte 9")
        ... except LoadError as e:
        ...     print(e)
        x.pkl: the reader would allocate more than 67,109,024 bytes for a 10-byte file (a budget of 64 MiB + 16 per file byte) (containers made, at byte 9); `--partial` shows what fits
    """

    __slots__ = (
        "alloc",
        "expanded",
        "max_alloc",
        "max_depth",
        "max_expanded",
        "path",
        "size",
    )

    def __init__(self, path: str, size: int, *, max_depth: int = MAX_DEPTH) -> None:
        self.path = path
        self.size = size
        self.max_depth = max_depth
        self.max_expanded = _EXPANDED_FLOOR + _EXPANDED_PER_BYTE * size
        self.max_alloc = alloc_allowance(size)
        self.alloc = 0
        self.expanded = 0

    def exceeded(self, what: str, why: str = "") -> BudgetError:
        """The error for the limit `what` ("depth", "expanded", "alloc").

        `why` says what was being built (shown in parentheses), `at` where in the file.
        """
        n = f"{self.size:,}-byte file"
        if what == "depth":
            msg = f"nested deeper than {self.max_depth} levels"
        elif what == "expanded":
            msg = (
                f"the tree expands to more than {self.max_expanded:,} leaves and edges through "
                f"shared references, for a {n} "
                f"(a budget of {_EXPANDED_FLOOR:,} + {_EXPANDED_PER_BYTE} per file byte)"
            )
        elif what == "alloc":
            msg = (
                f"the reader would allocate more than {self.max_alloc:,} bytes for a {n} "
                f"(a budget of 64 MiB + {_ALLOC_PER_BYTE} per file byte)"
            )
        else:
            raise ValueError(f"unknown budget {what!r}")
        if why:
            msg = f"{msg} ({why})"
        hint = "" if what == "depth" else f"; {_HINT}"
        return BudgetError(f"{self.path}: {msg}{hint}", what)

    def charge_alloc(self, nbytes: int, why: str = "") -> None:
        """Count `nbytes` allocated beyond what was read; raise once past the limit."""
        self.alloc += nbytes
        if self.alloc > self.max_alloc:
            raise self.exceeded("alloc", why)

    def charge_expanded(self, n: int, why: str = "") -> None:
        """Count `n` leaves and edges (or units of hashing work); raise once past the limit."""
        self.expanded += n
        if self.expanded > self.max_expanded:
            raise self.exceeded("expanded", why)

"""`HugeInt`: an integer from a file too long to be shown in digits.

Python refuses to turn an int of more than 4,300 digits into text (`ValueError`, its guard
against quadratic conversions), so such an int, which no real checkpoint holds, would break
every view that shows it. The readers hand out a `HugeInt` instead: it compares and hashes as
its value (`int(x)` gives the value back) and shows as `int (N digits)`.

Example:
    >>> x = HugeInt(10**5000)
    >>> x, str(x), x == 10**5000, int(x) == 10**5000
    (int (5001 digits), 'int (5001 digits)', True, True)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_INT_BYTES", "HugeInt"]

#: ints of more bytes than this (about 4,300 decimal digits, Python's limit) become `HugeInt`
MAX_INT_BYTES = 1700
#: digit counts are exact up to this many digits (a power of ten is computed), else estimated
_EXACT_DIGITS = 1_000_000


class HugeInt:
    """An int too long to show in digits: equal to and hashing as its value."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def digits(self) -> tuple[int, bool]:
        """(the number of decimal digits of the value, whether it is exact)."""
        v = abs(self.value)
        d = max(1, int(v.bit_length() * math.log10(2)))
        if d > _EXACT_DIGITS:
            return d, False
        return (d + 1 if v >= 10**d else d), True

    def __repr__(self) -> str:
        d, exact = self.digits()
        sign = "-" if self.value < 0 else ""
        return f"{sign}int ({d} digits)" if exact else f"{sign}int (about {d} digits)"

    __str__ = __repr__

    def __int__(self) -> int:
        return self.value

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, HugeInt):
            return self.value == other.value
        return bool(self.value == other) if isinstance(other, int) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

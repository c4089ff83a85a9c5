"""Number formatting shared by the core and every renderer: counts and byte sizes in words.

This module sits below both the core modules and the lowerings (it imports nothing of treetool),
so a core result's `repr` and a renderer's label say `4.8 KB` the same way.
"""

from __future__ import annotations

__all__ = ["fmt_bytes", "fmt_count", "fold"]


def fmt_count(n: int) -> str:
    """`1,234`, `12.3K`, `4.5M`, `1.2B`.

    Example:
        >>> fmt_count(999), fmt_count(12_345), fmt_count(4_500_000)
        ('999', '12.3K', '4.5M')
    """
    if n < 10_000:
        return f"{n:,}"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def fmt_bytes(n: int) -> str:
    """`520 B`, `4.8 KB`, `1.2 GB` (powers of 1000).

    Example:
        >>> fmt_bytes(520), fmt_bytes(4_800), fmt_bytes(2_000_000_000)
        ('520 B', '4.8 KB', '2.0 GB')
    """
    if n < 1000:
        return f"{n} B"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fold(text: str, width: int = 80, length: int | None = None) -> str:
    """`text` (one line, escaped) kept to about `width` characters: a longer one is cut and
    says how long it was, `length` (default: its own length; the raw value's, say, when
    `text` is its escaped form).

    Example:
        >>> fold("x" * 10_000, 24)
        'xxxxxxxx… (10,000 chars)'
        >>> fold("short")
        'short'
    """
    if len(text) <= width:
        return text
    tail = f"… ({len(text) if length is None else length:,} chars)"
    return text[: max(width - len(tail), 8)] + tail

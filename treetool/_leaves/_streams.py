"""The byte stream type that file-backed leaves read from.

A `LazyArray` reads its bytes from a local file, a ranged remote read, a decompressing zip
member or a stream over several byte ranges. Only the first two can seek; the others are
read from start to end (`LazyArray(..., seekable=False)`).

Example:
    >>> import io
    >>> def first_bytes(fh: ByteStream) -> bytes:
    ...     with fh:
    ...         return fh.read(2)
    >>> first_bytes(io.BytesIO(b"abc"))
    b'ab'
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ByteStream"]


class ByteStream(Protocol):
    """A binary stream: `read`, `seek` and `fileno` (which a one-way stream refuses), `close`."""

    def read(self, n: int = -1, /) -> bytes:
        """Up to `n` bytes (all that is left when `n` is negative)."""
        ...

    def seek(self, offset: int, whence: int = 0, /) -> int:
        """Move to `offset`; a one-way stream raises `io.UnsupportedOperation`."""
        ...

    def fileno(self) -> int:
        """The OS file descriptor; a stream that has none raises `io.UnsupportedOperation`."""
        ...

    def close(self) -> None:
        """Release the file or connection."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...

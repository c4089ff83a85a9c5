"""Limits every non-pickle reader applies to what a file claims: shapes, dtypes, counts, depth.

A file chooses its shapes, dtypes, names and nesting; each of them is checked here before any
arithmetic, allocation or recursion depends on it. Budgets grow with the file's size, so that
real checkpoints of any size load and a small file cannot claim a huge amount of work.

Example:
    >>> check_shape([2, 3], "w.safetensors: tensor 'w'")
    (2, 3)
    >>> check_shape([2**64 - 1] * 3, "w.safetensors: tensor 'w'")
    Traceback (most recent call last):
    ...
    treetool.LoadError: w.safetensors: tensor 'w': dimension 0 is 18446744073709551615, more than 2**48
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING, Any

from treetool._errors import LoadError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MAX_DEPTH",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "MAX_NDIM",
    "Budget",
    "check_dtype",
    "check_json_text",
    "check_shape",
    "check_zip_directory",
]

#: numpy's own limit on the number of dimensions
MAX_NDIM = 64
#: the largest single dimension (2**48 elements: 256 TiB of bytes)
MAX_DIM = 1 << 48
#: the largest element count of one array
MAX_ELEMENTS = 1 << 48
#: the deepest tree a reader builds (jax's own walks recurse once per level)
MAX_DEPTH = 1000


def check_shape(shape: Any, where: str) -> tuple[int, ...]:
    """A file's shape as a tuple of ints, or a `LoadError` naming what is wrong with it.

    At most `MAX_NDIM` dimensions, each an int in `[0, MAX_DIM]`, whose product is at most
    `MAX_ELEMENTS`; the product stops at a 0 and is never computed past the limit.
    """
    if type(shape) not in (list, tuple):
        raise LoadError(f"{where}: shape must be a list of ints, got {type(shape).__name__}")
    if len(shape) > MAX_NDIM:
        raise LoadError(f"{where}: {len(shape)} dimensions, more than {MAX_NDIM}")
    for i, d in enumerate(shape):
        if type(d) is not int:
            raise LoadError(f"{where}: dimension {i} is not an int ({type(d).__name__})")
        if d < 0:
            raise LoadError(f"{where}: dimension {i} is negative ({d})")
        if d > MAX_DIM:
            shown = str(d) if d.bit_length() < 200 else f"a {d.bit_length()}-bit number"
            raise LoadError(f"{where}: dimension {i} is {shown}, more than 2**48")
    if 0 in shape:
        return tuple(shape)
    n = 1
    for d in shape:
        n *= d
        if n > MAX_ELEMENTS:
            raise LoadError(f"{where}: shape {list(shape)} has more than 2**48 elements")
    return tuple(shape)


def check_dtype(dtype: np.dtype, where: str) -> np.dtype:
    """`dtype` if arrays of it can be read from raw bytes; object, structured, subarray and
    zero-sized dtypes are refused (their sizes do not follow from a shape)."""
    if dtype.hasobject:
        raise LoadError(f"{where}: object dtype {dtype} holds Python objects, not numbers")
    if dtype.subdtype is not None:
        raise LoadError(f"{where}: subarray dtype {dtype} is not supported")
    if dtype.itemsize == 0:
        raise LoadError(f"{where}: dtype {dtype} has no size")
    return dtype


class Budget:
    """A count that may not pass `limit`; `take(n)` raises one `LoadError` line when it does.

    Example:
        >>> b = Budget("f.msgpack", "containers", 2)
        >>> b.take(2)
        >>> b.take()
        Traceback (most recent call last):
        ...
        treetool.LoadError: f.msgpack: more than 2 containers for a file of this size (a decompression or nesting bomb?)
    """

    __slots__ = ("limit", "used", "what", "where")

    def __init__(self, where: str, what: str, limit: int) -> None:
        self.where, self.what, self.limit, self.used = where, what, limit, 0

    def take(self, n: int = 1) -> None:
        self.used += n
        if self.used > self.limit:
            raise LoadError(
                f"{self.where}: more than {self.limit} {self.what} for a file of this size "
                "(a decompression or nesting bomb?)"
            )


_KEEP_BRACKETS_QUOTES = bytes(range(256)).translate(None, b'[]{}"')
#: byte -> its step in depth: +1 for `[` and `{`, -1 for `]` and `}`
_STEPS = [1 if b in b"[{" else -1 for b in range(256)]


def check_json_text(
    raw: bytes, where: str, *, max_depth: int = 64, bytes_per_container: int = 12
) -> None:
    """Refuse JSON text nested deeper than `max_depth` or with more containers than its size
    warrants (one per `bytes_per_container` bytes, plus 1,000), before `json.loads` recurses
    or allocates (an empty object costs 64 bytes of memory for 2 bytes of text).

    Brackets inside strings are not counted. The text is filtered in C down to its brackets
    and quotes, the strings between quotes are dropped, and the depth is known from a few
    passes that drop innermost pairs (`_shallow`), or else is the largest running sum of
    +1/-1 steps (`accumulate`, in C). Costs about 15-25% of `json.loads` (an orbax
    `_METADATA` of 10,000 arrays, 1.8 MB: 3 ms); a numpy scan would cost less, but importing
    numpy takes 0.1 s, and listing a file does not import it.
    """
    whole = len(raw) <= _JSON_CHUNK
    # one chunk: its brackets and quotes, counted there (a few times shorter than the text)
    first = raw.translate(None, _KEEP_BRACKETS_QUOTES) if whole else raw
    opened = first.count(b"[") + first.count(b"{")
    if opened <= max_depth:
        return
    limit = 1000 + len(raw) // bytes_per_container
    text = raw
    if b"\\" in text:  # drop escaped backslashes, then escaped quotes: every quote left counts
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
        first = text.translate(None, _KEEP_BRACKETS_QUOTES) if whole else text
    count = depth = top = 0
    in_string = 0
    view = memoryview(text)
    for start in range(0, len(text), _JSON_CHUNK):  # a chunk at a time: memory stays small
        if whole:
            part = first
        else:
            part = bytes(view[start : start + _JSON_CHUNK]).translate(None, _KEEP_BRACKETS_QUOTES)
        # two quotes in a row are a string with no bracket in it (most strings): dropping
        # them changes no other character's side of a quote, so the count and depth stay
        part = part.replace(b'""', b"")
        # a bracket after an odd number of quotes (this chunk's and before) is in a string
        if b'"' in part:
            pieces = part.split(b'"')
            outside = b"".join(pieces[in_string::2])
            in_string ^= (len(pieces) - 1) & 1
        else:
            outside = b"" if in_string else part
        opens = outside.count(b"[") + outside.count(b"{")
        count += opens
        if count > limit:
            raise LoadError(
                f"{where}: more than {limit} JSON objects and arrays in {len(raw)} bytes "
                "(a nesting bomb?)"
            )
        if whole and _shallow(outside, max_depth):
            return
        if outside:
            top = max(top, max(accumulate(map(_STEPS.__getitem__, outside), initial=depth)))
            depth += 2 * opens - len(outside)
            if top > max_depth:
                raise LoadError(f"{where}: JSON nested more than {max_depth} levels deep")


#: bytes of JSON text measured at a time
_JSON_CHUNK = 4 << 20

#: `[` -> `{` and `]` -> `}`: for depth, only opening and closing counts
_OPEN_CLOSE = bytes.maketrans(b"[]", b"{}")


def _shallow(brackets: bytes, max_depth: int) -> bool:
    """Whether `brackets` (the text's brackets, strings dropped) is balanced and nested at
    most `max_depth` deep: each pass drops every innermost pair (`{}`, in C), so a balanced
    text of depth d is empty after d passes. False: not known (the exact scan decides)."""
    s = brackets.translate(_OPEN_CLOSE)
    for _ in range(max_depth):
        if not s:
            return True
        s = s.replace(b"{}", b"")
    return not s


#: a zip member takes at least ~100 bytes of headers: more members than one per 64 bytes of
#: file (plus 1,000) is a member bomb
ZIP_BYTES_PER_MEMBER = 64
#: a member's central directory record: 46 bytes and its name (and extra fields, comment);
#: more directory bytes than this per claimed member (plus 64 KiB) is a directory bomb
ZIP_DIRECTORY_BYTES_PER_MEMBER = 46 + 4096


def check_zip_directory(name: str, size: int, count: int, cd_size: int) -> None:
    """What a zip's end record claims (members, directory bytes), checked before the directory
    is read: every zip reader (npz, torch) calls this, locally and remotely.

    Example:
        >>> check_zip_directory("x.npz", 10_000, 3, 1_200_000_000)
        Traceback (most recent call last):
        treetool.LoadError: x.npz: the zip's central directory claims 1200000000 bytes for 3 members, more than 10000
    """
    Budget(name, "zip members", 1000 + size // ZIP_BYTES_PER_MEMBER).take(count)
    most = min(size, (1 << 16) + count * ZIP_DIRECTORY_BYTES_PER_MEMBER)
    if cd_size > most:
        raise LoadError(
            f"{name}: the zip's central directory claims {cd_size} bytes for {count} "
            f"members, more than {most}"
        )

"""Every leaf path of a `LeafIndex` in one byte buffer, searched with numpy (`find_rows`).

A text search of 1e6 paths is a few numpy passes over one buffer (numpy releases the GIL: a
TUI worker leaves the UI thread responsive), not a Python loop per path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["CHUNK", "SEP", "Cancelled", "Haystack", "build_haystack", "find_rows"]


class Cancelled(Exception):
    """The walk was stopped because its worker was cancelled."""


#: rows whose text is prepared (joined, translated, encoded) per call: each call is a few ms
#: of C work, so a search worker gives the GIL back to the UI thread between them
CHUNK = 1 << 16
#: what separates rows in a haystack (a path holding it gets U+FFFD in its place)
SEP = "\x00"


@dataclass
class Haystack:
    """Every leaf path in one byte buffer (`SEP` after each), in a search's form (dotted:
    `['a'][0]` -> `.a.0`; folded: lower case), with the offset where each row starts."""

    buf: np.ndarray
    starts: np.ndarray


def build_haystack(
    paths: list[str], dotted: bool, fold: bool, cancelled: Callable[[], bool] | None
) -> Haystack:
    parts: list[bytes] = []
    for start in range(0, len(paths), CHUNK):
        if cancelled is not None and cancelled():
            raise Cancelled
        chunk = paths[start : start + CHUNK]
        text = SEP.join(chunk)
        if text.count(SEP) != len(chunk) - 1:  # a path that holds the separator itself
            text = SEP.join(p.replace(SEP, "\ufffd") for p in chunk)
        if dotted:  # the same as str.translate(_DOTTED), at C speed
            text = text.replace("[", ".").replace("]", "").replace("'", "").replace('"', "")
        if fold:
            text = text.lower()
        parts.append(text.encode("utf-8", "surrogatepass") + SEP.encode())
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
    ends = np.flatnonzero(buf == 0)
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    return Haystack(buf, starts)


def find_rows(hay: Haystack, query: bytes, cancelled: Callable[[], bool] | None) -> np.ndarray:
    """Rows whose text holds `query`: the offsets of its first byte, narrowed byte by byte
    with numpy (which releases the GIL), then mapped to rows."""
    buf, m = hay.buf, len(query)
    if not m or m > len(buf):
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(buf[: len(buf) - m + 1] == query[0])
    for j in range(1, m):
        if not len(at):
            break
        if cancelled is not None and cancelled():
            raise Cancelled
        at = at[buf[at + j] == query[j]]
    rows = np.searchsorted(hay.starts, at, side="right") - 1
    if len(rows) < 2:
        return rows
    # offsets ascend, so rows do: a row found twice is next to itself (np.unique hashes: 2 s
    # for 1e6 rows)
    first = np.empty(len(rows), dtype=bool)
    first[0] = True
    np.not_equal(rows[1:], rows[:-1], out=first[1:])
    return rows[first]

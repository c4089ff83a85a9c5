"""A file to read progressively (`Reading`) and what the finished read gives (`Read`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NotReadYet", "Read", "Reading", "file_size", "plain_name"]


@dataclass
class Read:
    """What a finished read gives: the tree, the header note, the file's facts (its repr
    leaves the tree out: a whole checkpoint's arrays would take seconds to print)."""

    tree: Any = field(repr=False)
    note: str | None = None
    file_facts: dict[str, Any] | None = None


@dataclass
class Reading:
    """A file to read progressively (`ProgressiveRead`; the TUI reads it itself).

    Args:
        path: the file (its name and size show in the progress line).
        read: `read(watch)` reads the whole file and returns a `Read`; it raises on bad
            input (the TUI exits and `run` raises that error).
        watch: what `read` is given and the snapshots are asked of: a
            `treetool.io._partial.PartialWatch` (`request()`, `latest() -> (tree so far,
            fraction read) | None`, `as_finished(tree)`: the tree shown, `release()` once
            the whole tree has replaced the snapshots), or None (no snapshots: a progress
            line only).

    Example:
        >>> r = Reading("ckpt.pkl", lambda watch: Read({"w": 1.0}))
        >>> r.read(None).tree
        {'w': 1.0}
    """

    path: str
    read: Callable[[Any], Read]
    watch: Any = None
    #: the error that ended the read (set by `ProgressiveRead`; `treetool.tui.run` raises it)
    error: BaseException | None = field(default=None, repr=False)
    #: the finished read (set by `ProgressiveRead`)
    result: Read | None = field(default=None, repr=False)


class NotReadYet:
    """The root a front end shows before the first snapshot of a file being read."""

    def __repr__(self) -> str:
        return "not read yet"


def plain_name(path: str) -> str:
    r"""The file's base name without control characters (file-derived text).

    Example:
        >>> plain_name("/data/a\x1b]0;x\x07.pkl")
        'a\\x1b]0;x\\x07.pkl'
    """
    from treetool._progress import _plain_name

    return _plain_name(path)


def file_size(path: str) -> int:
    """The size of `path` in bytes, 0 when it cannot be known."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

"""Every exception treetool raises, under one base class."""

from __future__ import annotations

from treetool._public import set_module
from treetool._text import safe

__all__ = [
    "LoadError",
    "PathError",
    "SaveError",
    "SelectionError",
    "StatsError",
    "StructureMismatch",
    "TreetoolError",
    "UnsafeError",
]


@set_module("treetool")
class TreetoolError(Exception):
    """Base class of every error treetool raises on purpose.

    Messages often quote a file (keys, class names); `str()` shows them through the one
    sanitiser, so a traceback cannot send a file's escape sequences to the terminal. Line
    breaks are kept here (a structure mismatch puts the path on its own line); `LoadError`
    and `PathError` messages are single lines and escape them too.

    Example:
        >>> str(TreetoolError("evil.pkl: bad key 'x\\x1b[2J'"))
        "evil.pkl: bad key 'x\\\\x1b[2J'"
    """

    def __str__(self) -> str:
        return safe(super().__str__(), newlines=True)


@set_module("treetool")
class PathError(TreetoolError, KeyError):
    """A path that does not exist in a tree, or a path string that does not parse (also a
    child key a node does not have, a device name a placement does not hold, a callable
    `where` that fails to find its node).

    It is a `KeyError` so that `except KeyError` keeps working, but its message prints as
    plain text (a bare `KeyError` would print the repr of its message).
    """

    def __str__(self) -> str:
        return safe(str(self.args[0])) if self.args else ""  # one line, whatever the keys hold


@set_module("treetool")
class LoadError(TreetoolError):
    """A file that cannot be read: missing, truncated, corrupt, or of an unknown format.

    The message is one line: a newline a file put in a key is shown escaped, like every
    control character.
    """

    def __str__(self) -> str:
        return safe(Exception.__str__(self))


@set_module("treetool")
class SaveError(TreetoolError):
    """A tree that `tt.save` cannot write as asked: an opaque node or function loaded without
    running its code (pickle), a typed PRNG key, a leaf that is neither an array nor a number,
    string, None, function or class (safetensors/npz record those), a dtype the
    format cannot store, an unknown format. A sibling of `LoadError`, not a kind of it.

    The message is one line, naming the file and the path in the tree.

    Example:
        >>> import numpy as np, tempfile, os, treetool as tt
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> try:
        ...     tt.save({"lock": object()}, p)
        ... except tt.SaveError as e:
        ...     print(str(e).replace(p, "w.safetensors"))
        w.safetensors: ['lock'] is a object; tt.save writes arrays and records numbers, strings, None, functions and classes (replace it with tt.tree_at)
    """

    def __str__(self) -> str:
        return safe(Exception.__str__(self))


@set_module("treetool")
class UnsafeError(LoadError):
    """A file asks for something that treetool refuses to do without `trust=True`."""


@set_module("treetool")
class StructureMismatch(TreetoolError, ValueError):
    """Two trees whose structures do not line up where they must."""


@set_module("treetool")
class SelectionError(TreetoolError, ValueError):
    """An edit that cannot be applied to the selected nodes."""


@set_module("treetool")
class StatsError(TreetoolError, TypeError, RuntimeError):
    """`tt.stats` of something with no numbers to sum: a PRNG key array, a string or object
    array, a non-array, or a jax array whose buffer was deleted or donated.

    A `TypeError` (what it raised for keys and strings before) and a `RuntimeError` (what jax
    raises for a deleted array), so either `except` keeps working.

    Example:
        >>> import numpy as np, treetool as tt
        >>> try:
        ...     tt.stats(np.array(["a", "b"]))
        ... except tt.StatsError as e:
        ...     print(e)
        stats of a <U1 array are not defined
    """

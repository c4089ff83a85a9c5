"""Path key entries: one step of a path, mirroring jax's key entries, and the pattern steps.

Every key is a frozen, slotted class: immutable, hashable and equal by value, so keys and the
paths built of them can be dict keys and set members. The classes are written out rather than
made by `@dataclass`: nine dataclass decorations cost every `treetool` command more at start-up
than all the rest of this module. This module never imports jax (`to_jax` imports it when
called).

Example:
    >>> DictKey("params"), SequenceKey(0), GetAttrKey("weight")
    (DictKey(key='params'), SequenceKey(idx=0), GetAttrKey(name='weight'))
    >>> DictKey(1) == DictKey(1), DictKey(1) == DictKey(True)
    (True, False)
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "AnyIndex",
    "AnyKey",
    "DeepWildcard",
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "Key",
    "NameGlob",
    "RawKey",
    "SequenceKey",
    "from_jax_key",
    "key_matches",
]

# Equality is by exact type (a DictKey never equals a SequenceKey, `DictKey(1) != DictKey(True)`,
# and a jax key entry is not a treetool key): each class writes its `__eq__`/`__hash__`.

_set = object.__setattr__  # what `__init__` writes with: `Key.__setattr__` refuses every write


class Key:
    """One step of a path. Subclasses mirror jax's key entries.

    Immutable: every write raises AttributeError. `__match_args__` names the fields, which
    `repr`, pickling and copying use.
    """

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    #: True for the wildcard entries that only patterns contain.
    is_wildcard = False

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), tuple(getattr(self, n) for n in self.__match_args__)

    @property
    def text(self) -> str:
        """The bare name of the step, used to match dotted and fuzzy forms (`layers.0.weight`)."""
        raise NotImplementedError

    def to_jax(self) -> Any:
        """The equivalent jax key entry."""
        raise NotImplementedError(f"{self!r} has no jax equivalent: it is a pattern")


class DictKey(Key):
    """A mapping key: `['params']`, `[0]` for an int key.

    Example:
        >>> str(DictKey("params")), str(DictKey(0))
        ("['params']", '[0]')
    """

    __slots__ = ("key",)
    __match_args__ = ("key",)

    key: Any

    def __init__(self, key: Any) -> None:
        _set(self, "key", key)

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is DictKey and type(other.key) is type(self.key) and other.key == self.key
        )

    def __hash__(self) -> int:
        return hash(("dict", self.key))

    @property
    def text(self) -> str:
        """The key itself when it is a string, else its repr."""
        return self.key if isinstance(self.key, str) else repr(self.key)

    def to_jax(self) -> Any:
        """`jax.tree_util.DictKey(key)`."""
        from jax.tree_util import DictKey as JDictKey

        return JDictKey(self.key)


class SequenceKey(Key):
    """A position in a list or tuple: `[0]`.

    Example:
        >>> str(SequenceKey(3)), SequenceKey(3).text
        ('[3]', '3')
    """

    __slots__ = ("idx",)
    __match_args__ = ("idx",)

    idx: int

    def __init__(self, idx: int) -> None:
        _set(self, "idx", idx)

    def __str__(self) -> str:
        return f"[{self.idx}]"

    def __eq__(self, other: object) -> bool:
        return type(other) is SequenceKey and other.idx == self.idx

    def __hash__(self) -> int:
        return hash(("seq", self.idx))

    @property
    def text(self) -> str:
        """The index as text."""
        return str(self.idx)

    def to_jax(self) -> Any:
        """`jax.tree_util.SequenceKey(idx)`."""
        from jax.tree_util import SequenceKey as JSequenceKey

        return JSequenceKey(self.idx)


class GetAttrKey(Key):
    """An attribute or field: `.weight`.

    Example:
        >>> str(GetAttrKey("weight"))
        '.weight'
    """

    __slots__ = ("name",)
    __match_args__ = ("name",)

    name: str

    def __init__(self, name: str) -> None:
        _set(self, "name", name)

    def __str__(self) -> str:
        return f".{self.name}"

    def __eq__(self, other: object) -> bool:
        return type(other) is GetAttrKey and other.name == self.name

    def __hash__(self) -> int:
        return hash(("attr", self.name))

    @property
    def text(self) -> str:
        """The attribute name."""
        return self.name

    def to_jax(self) -> Any:
        """`jax.tree_util.GetAttrKey(name)`."""
        from jax.tree_util import GetAttrKey as JGetAttrKey

        return JGetAttrKey(self.name)


class FlattenedIndexKey(Key):
    """A child of a node registered without keys: `[<flat index 0>]`.

    Example:
        >>> str(FlattenedIndexKey(2))
        '[<flat index 2>]'
    """

    __slots__ = ("key",)
    __match_args__ = ("key",)

    key: int

    def __init__(self, key: int) -> None:
        _set(self, "key", key)

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"

    def __eq__(self, other: object) -> bool:
        return type(other) is FlattenedIndexKey and other.key == self.key

    def __hash__(self) -> int:
        return hash(("flat", self.key))

    @property
    def text(self) -> str:
        """The flat index as text."""
        return str(self.key)

    def to_jax(self) -> Any:
        """`jax.tree_util.FlattenedIndexKey(key)`."""
        from jax.tree_util import FlattenedIndexKey as JFlattenedIndexKey

        return JFlattenedIndexKey(self.key)


class RawKey(Key):
    """A key entry of a custom type that a library registered with jax; kept as it is.

    Example:
        >>> str(RawKey("<custom>"))
        '<custom>'
    """

    __slots__ = ("obj",)
    __match_args__ = ("obj",)

    obj: Any

    def __init__(self, obj: Any) -> None:
        _set(self, "obj", obj)

    def __str__(self) -> str:
        return str(self.obj)

    def __repr__(self) -> str:
        return f"RawKey({self.obj!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is RawKey and other.obj == self.obj

    def __hash__(self) -> int:
        return hash(("raw", str(self.obj)))

    @property
    def text(self) -> str:
        """The entry's text without its leading `.`/`[` and trailing `]`."""
        return str(self.obj).lstrip(".[").rstrip("]")

    def to_jax(self) -> Any:
        """The jax key entry it was made from."""
        return self.obj


class AnyKey(Key):
    """`*`: any one step.

    Example:
        >>> str(AnyKey())
        '.*'
    """

    __slots__ = ()

    is_wildcard = True

    def __str__(self) -> str:
        return ".*"

    def __eq__(self, other: object) -> bool:
        return type(other) is AnyKey

    def __hash__(self) -> int:
        return hash("*")


class AnyIndex(Key):
    """`[*]`: any bracketed step (a sequence index or a mapping key).

    Example:
        >>> str(AnyIndex())
        '[*]'
    """

    __slots__ = ()

    is_wildcard = True

    def __str__(self) -> str:
        return "[*]"

    def __eq__(self, other: object) -> bool:
        return type(other) is AnyIndex

    def __hash__(self) -> int:
        return hash("[*]")


class DeepWildcard(Key):
    """`**`: any number of steps, none included.

    Example:
        >>> str(DeepWildcard())
        '.**'
    """

    __slots__ = ()

    is_wildcard = True

    def __str__(self) -> str:
        return ".**"

    def __eq__(self, other: object) -> bool:
        return type(other) is DeepWildcard

    def __hash__(self) -> int:
        return hash("**")


class NameGlob(Key):
    """`.lin*`: a step whose name matches a shell-style pattern.

    Example:
        >>> NameGlob("lin*").matches(GetAttrKey("linear1"))
        True
    """

    __slots__ = ("pattern", "_regex")
    __match_args__ = ("pattern",)

    pattern: str
    _regex: re.Pattern[str]

    is_wildcard = True

    def __init__(self, pattern: str) -> None:
        _set(self, "pattern", pattern)
        _set(self, "_regex", re.compile(fnmatch.translate(pattern)))

    def __str__(self) -> str:
        return f".{self.pattern}"

    def __repr__(self) -> str:
        return f"NameGlob({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is NameGlob and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(("glob", self.pattern))

    def matches(self, key: Key) -> bool:
        """Whether `key`'s name matches the pattern."""
        return self._regex.match(key.text) is not None


_BRACKETED = (SequenceKey, DictKey, FlattenedIndexKey)


def key_matches(query: Key, key: Key) -> bool:
    """Whether the step `query` (possibly a wildcard or a loose name) matches the real `key`.

    Exact entries match exactly; otherwise names are compared loosely, so that `.bias` finds a
    `['bias']` dict entry and `.0` (the dotted form) finds `[0]`.

    Example:
        >>> key_matches(GetAttrKey("bias"), DictKey("bias")), key_matches(AnyIndex(), GetAttrKey("w"))
        (True, False)
    """
    if query == key:
        return True
    tq = type(query)
    if tq is AnyKey:
        return True
    if tq is AnyIndex:
        return isinstance(key, _BRACKETED)
    if isinstance(query, NameGlob):
        return query.matches(key)
    if tq is DeepWildcard:
        return True
    return query.text == key.text


def from_jax_key(k: Any) -> Key:
    """Convert one jax key entry (or one of ours) to a treetool Key.

    Example:
        >>> import jax
        >>> from_jax_key(jax.tree_util.SequenceKey(1))
        SequenceKey(idx=1)
    """
    if isinstance(k, Key):
        return k
    convert = _FROM_JAX.get(type(k))
    if convert is None:
        convert = _jax_key_converter(type(k))
    return convert(k)


#: key entry class -> its conversion; jax's classes are added the first time one is converted
_FROM_JAX: dict[type, Callable[[Any], Key]] = {}


def _jax_key_converter(t: type) -> Callable[[Any], Key]:
    """The conversion of key class `t`: by class against jax's key entries (jax is loaded
    whenever one exists), `RawKey` for any other class."""
    tu = sys.modules.get("jax.tree_util")
    if tu is not None:
        _FROM_JAX[tu.DictKey] = lambda k: DictKey(k.key)
        _FROM_JAX[tu.SequenceKey] = lambda k: SequenceKey(k.idx)
        _FROM_JAX[tu.GetAttrKey] = lambda k: GetAttrKey(k.name)
        _FROM_JAX[tu.FlattenedIndexKey] = lambda k: FlattenedIndexKey(k.key)
    return _FROM_JAX.setdefault(t, RawKey)

"""Paths into pytrees: the `Path` class, and the names of its parts re-exported in one place.

A path is a tuple of key entries (`_path_keys`: frozen dataclasses that mirror jax's), parsed
from text by `_path_parse` and matched against globs by `_path_match`. This module never imports
jax: the CLI and the file loaders use it before jax is needed.
`str(path)` is exactly `jax.tree_util.keystr(path.to_jax())`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from treetool._errors import PathError
from treetool._paths._keys import (
    AnyIndex,
    AnyKey,
    DeepWildcard,
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Key,
    NameGlob,
    RawKey,
    SequenceKey,
    from_jax_key,
    key_matches,
)
from treetool._paths._match import match_keys, start_states, step_states, suggest
from treetool._paths._parse import parse_keys
from treetool._public import set_module

__all__ = [
    "AnyIndex",
    "AnyKey",
    "DeepWildcard",
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "Key",
    "NameGlob",
    "Path",
    "PathError",
    "RawKey",
    "SequenceKey",
    "from_jax_key",
    "key_matches",
    "start_states",
    "step_states",
    "suggest",
]

#: What a walk leaves on a path whose keys are built on demand: (link, key maker), where a
#: link is (context, raw key) one level up, None above the root, and the maker turns a raw
#: key into a `Key` (None when the raw key is one already).
_Context = tuple[Any, Callable[[Any], Key] | None]


@set_module("treetool")
class Path(Sequence[Key]):
    """A path into a pytree: a sequence of key entries.

    `str(path)` is jax's `keystr`; two paths are equal when they print the same, so a path
    that went through its text form compares equal to the original.

    Example:
        >>> p = Path.parse("layers[0].weight")
        >>> str(p)
        '.layers[0].weight'
        >>> p[-1]
        GetAttrKey(name='weight')
        >>> str(p.parent)
        '.layers[0]'
    """

    __slots__ = ("_ctx", "_k", "_key", "_str")

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        keys = tuple(keys)
        for k in keys:
            if not isinstance(k, Key):
                raise TypeError(f"Path entries must be treetool keys, got {k!r}; use Path.from_jax")
        self._k: tuple[Key, ...] = keys  # unset on a walk's paths until asked for, see `_keys`
        self._ctx: _Context | None = None  # on a walk's paths: the parent's context, see `_keys`
        self._str: str | None = None

    _key: Any  # on a walk's paths: the raw last key, see `_keys`

    @classmethod
    def _make(cls, keys: tuple[Key, ...], text: str | None = None) -> Path:
        p = object.__new__(cls)
        p._k = keys
        p._ctx = None
        p._str = text
        return p

    @property
    def _keys(self) -> tuple[Key, ...]:
        try:
            return self._k
        except AttributeError:  # a path made by a walk: its keys are built when first asked
            pass
        # a walk left the raw last key and the parent's context: (link, key maker), where a
        # link is (context, raw key) one level up, None above the root
        out: list[Key] = []
        ctx = self._ctx
        if ctx is not None:
            raw = self._key
            while True:
                link, make = ctx
                out.append(raw if make is None else make(raw))
                if link is None:
                    break
                ctx, raw = link
            out.reverse()
        k = self._k = tuple(out)
        self._ctx = None
        return k

    # --- sequence protocol -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._keys)

    @overload
    def __getitem__(self, i: int) -> Key: ...
    @overload
    def __getitem__(self, i: slice) -> Path: ...
    def __getitem__(self, i: int | slice) -> Key | Path:
        if isinstance(i, slice):
            return Path._make(self._keys[i])
        return self._keys[i]

    def __add__(self, other: Path | Key | Iterable[Key]) -> Path:
        if isinstance(other, Key):
            return Path._make(
                (*self._keys, other), None if self._str is None else self._str + str(other)
            )
        other = other if isinstance(other, Path) else Path(other)
        return Path._make(self._keys + other._keys)

    def __str__(self) -> str:
        s = self._str
        if s is None:
            s = self._str = "".join(map(str, self._keys))
        return s

    def __repr__(self) -> str:
        return f"Path({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Path):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __lt__(self, other: Path) -> bool:
        return str(self) < str(other)

    def __bool__(self) -> bool:
        return len(self) > 0

    @property
    def keys(self) -> tuple[Key, ...]:
        """The key entries, as a tuple."""
        return self._keys

    @property
    def parent(self) -> Path:
        """The path without its last step (the root's parent is the root)."""
        return Path._make(self._keys[:-1])

    @property
    def is_pattern(self) -> bool:
        """True when the path holds wildcards (`*`, `**`, `[*]`, `.lin*`)."""
        return any(k.is_wildcard for k in self._keys)

    # --- conversions --------------------------------------------------------------------
    def to_jax(self) -> tuple[Any, ...]:
        """The same path as a tuple of jax key entries (imports jax)."""
        return tuple(k.to_jax() for k in self._keys)

    @classmethod
    def from_jax(cls, jax_path: Iterable[Any]) -> Path:
        """Convert a jax key path (a tuple of DictKey/SequenceKey/GetAttrKey/…) to a Path."""
        return cls._make(tuple(from_jax_key(k) for k in jax_path))

    @classmethod
    def parse(cls, text: str | Path) -> Path:
        """Parse keystr form (`['a'][0].w`), dotted form (`a.0.w`) or a glob (`**.bias`).

        Steps of the dotted form and names in globs match loosely when resolved against a tree:
        `.0` finds a list index or an int dict key, `.bias` finds an attribute or a str key.

        Raises:
            PathError: the text is not a path; the message shows where it stops making sense.
        """
        if isinstance(text, Path):
            return text
        if not isinstance(text, str):
            raise TypeError(f"expected a path string, got {type(text).__name__}")
        return cls._make(tuple(parse_keys(text)))

    def match(self, path: Path) -> bool:
        """Whether this path (a pattern or a loose path) matches the concrete `path`."""
        return match_keys(self._keys, path._keys)

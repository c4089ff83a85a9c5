"""Paths into pytrees: key entries that mirror jax's, parsing, formatting and glob matching.

This module never imports jax: the CLI and the file loaders use it before jax is needed.
`str(path)` is exactly `jax.tree_util.keystr(path.to_jax())`.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ._errors import PathError

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
    "RawKey",
    "SequenceKey",
    "suggest",
]


class Key:
    """One step of a path. Subclasses mirror jax's key entries."""

    __slots__ = ()

    #: True for the wildcard entries that only patterns contain.
    is_wildcard = False

    @property
    def text(self) -> str:
        """The bare name of the step, used to match dotted and fuzzy forms (`layers.0.weight`)."""
        raise NotImplementedError

    def to_jax(self) -> Any:
        """The equivalent jax key entry."""
        raise NotImplementedError(f"{self!r} has no jax equivalent: it is a pattern")


class DictKey(Key):
    """A mapping key: `['params']`, `[0]` for an int key."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        object.__setattr__(self, "key", key)

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def __repr__(self) -> str:
        return f"DictKey(key={self.key!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is DictKey and type(other.key) is type(self.key) and other.key == self.key
        )

    def __hash__(self) -> int:
        return hash(("dict", self.key))

    @property
    def text(self) -> str:
        return self.key if isinstance(self.key, str) else repr(self.key)

    def to_jax(self) -> Any:
        from jax.tree_util import DictKey as JDictKey

        return JDictKey(self.key)


class SequenceKey(Key):
    """A position in a list or tuple: `[0]`."""

    __slots__ = ("idx",)

    def __init__(self, idx: int) -> None:
        object.__setattr__(self, "idx", idx)

    def __str__(self) -> str:
        return f"[{self.idx}]"

    def __repr__(self) -> str:
        return f"SequenceKey(idx={self.idx!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is SequenceKey and other.idx == self.idx

    def __hash__(self) -> int:
        return hash(("seq", self.idx))

    @property
    def text(self) -> str:
        return str(self.idx)

    def to_jax(self) -> Any:
        from jax.tree_util import SequenceKey as JSequenceKey

        return JSequenceKey(self.idx)


class GetAttrKey(Key):
    """An attribute or field: `.weight`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        return f".{self.name}"

    def __repr__(self) -> str:
        return f"GetAttrKey(name={self.name!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is GetAttrKey and other.name == self.name

    def __hash__(self) -> int:
        return hash(("attr", self.name))

    @property
    def text(self) -> str:
        return self.name

    def to_jax(self) -> Any:
        from jax.tree_util import GetAttrKey as JGetAttrKey

        return JGetAttrKey(self.name)


class FlattenedIndexKey(Key):
    """A child of a node registered without keys: `[<flat index 0>]`."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        object.__setattr__(self, "key", key)

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"

    def __repr__(self) -> str:
        return f"FlattenedIndexKey(key={self.key!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is FlattenedIndexKey and other.key == self.key

    def __hash__(self) -> int:
        return hash(("flat", self.key))

    @property
    def text(self) -> str:
        return str(self.key)

    def to_jax(self) -> Any:
        from jax.tree_util import FlattenedIndexKey as JFlattenedIndexKey

        return JFlattenedIndexKey(self.key)


class RawKey(Key):
    """A key entry of a custom type that a library registered with jax; kept as it is."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        object.__setattr__(self, "obj", obj)

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
        return str(self.obj).lstrip(".[").rstrip("]")

    def to_jax(self) -> Any:
        return self.obj


class AnyKey(Key):
    """`*`: any one step."""

    __slots__ = ()
    is_wildcard = True

    def __str__(self) -> str:
        return ".*"

    def __repr__(self) -> str:
        return "AnyKey()"

    def __eq__(self, other: object) -> bool:
        return type(other) is AnyKey

    def __hash__(self) -> int:
        return hash("*")


class AnyIndex(Key):
    """`[*]`: any bracketed step (a sequence index or a mapping key)."""

    __slots__ = ()
    is_wildcard = True

    def __str__(self) -> str:
        return "[*]"

    def __repr__(self) -> str:
        return "AnyIndex()"

    def __eq__(self, other: object) -> bool:
        return type(other) is AnyIndex

    def __hash__(self) -> int:
        return hash("[*]")


class DeepWildcard(Key):
    """`**`: any number of steps, none included."""

    __slots__ = ()
    is_wildcard = True

    def __str__(self) -> str:
        return ".**"

    def __repr__(self) -> str:
        return "DeepWildcard()"

    def __eq__(self, other: object) -> bool:
        return type(other) is DeepWildcard

    def __hash__(self) -> int:
        return hash("**")


class NameGlob(Key):
    """`.lin*`: a step whose name matches a shell-style pattern."""

    __slots__ = ("pattern", "_regex")
    is_wildcard = True

    def __init__(self, pattern: str) -> None:
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "_regex", re.compile(fnmatch.translate(pattern)))

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
    """
    if query == key:
        return True
    tq = type(query)
    if tq is AnyKey:
        return True
    if tq is AnyIndex:
        return isinstance(key, _BRACKETED)
    if tq is NameGlob:
        return query.matches(key)  # type: ignore[attr-defined]
    if tq is DeepWildcard:
        return True
    return query.text == key.text


class Path(Sequence):
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
        self._ctx: tuple | None = None  # on a walk's paths: the parent's context, see `_keys`
        self._str: str | None = None

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
        out = []
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

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return Path._make(self._keys[i])
        return self._keys[i]

    def __add__(self, other: Path | Key | tuple) -> Path:
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
    def to_jax(self) -> tuple:
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
        return cls._make(tuple(_parse(text)))

    def match(self, path: Path) -> bool:
        """Whether this path (a pattern or a loose path) matches the concrete `path`."""
        return _match(self._keys, path._keys)


def from_jax_key(k: Any) -> Key:
    """Convert one jax key entry (or one of ours) to a treetool Key."""
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


# --- parsing ------------------------------------------------------------------------------

_NAME_END = re.compile(r"[.\[\]]")
_FLAT = re.compile(r"<flat index (\d+)>")


def _parse(text: str) -> list[Key]:
    keys: list[Key] = []
    s = text.strip()
    i, n = 0, len(s)
    if s in ("", "."):
        return keys
    while i < n:
        c = s[i]
        if c == "[":
            j = _bracket_end(s, i, text)
            keys.append(_bracket_key(s[i + 1 : j], text, i))
            i = j + 1
        else:
            if c == ".":
                i += 1
                if i >= n:
                    raise PathError(f"path {text!r} ends with '.': expected a name after it")
            elif i != 0:
                raise PathError(
                    f"path {text!r}: unexpected {c!r} at position {i}: expected '.name' or '[key]'"
                )
            m = _NAME_END.search(s, i)
            j = m.start() if m else n
            name = s[i:j]
            if not name:
                raise PathError(f"path {text!r}: empty name at position {i}")
            keys.append(_name_key(name))
            i = j
    return keys


def _name_key(name: str) -> Key:
    if name == "**":
        return DeepWildcard()
    if name == "*":
        return AnyKey()
    if any(ch in name for ch in "*?"):
        return NameGlob(name)
    return GetAttrKey(name)


def _bracket_end(s: str, i: int, text: str) -> int:
    """Index of the `]` that closes the `[` at i, skipping quoted strings."""
    j, n, quote = i + 1, len(s), None
    while j < n:
        ch = s[j]
        if quote:
            if ch == "\\":
                j += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "]":
            return j
        j += 1
    raise PathError(f"path {text!r}: '[' at position {i} is never closed")


def _bracket_key(inner: str, text: str, pos: int) -> Key:
    inner = inner.strip()
    if inner == "*":
        return AnyIndex()
    m = _FLAT.fullmatch(inner)
    if m:
        return FlattenedIndexKey(int(m.group(1)))
    try:
        value = ast.literal_eval(inner)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise PathError(
            f"path {text!r}: [{inner}] at position {pos} is not an index, a quoted key or [*]"
        ) from None
    if type(value) is int:
        return SequenceKey(value)
    return DictKey(value)


# --- matching -----------------------------------------------------------------------------


def _match(query: tuple[Key, ...], keys: tuple[Key, ...]) -> bool:
    """Glob matching with `**` (iterative dynamic programming over positions)."""
    states = start_states(query)
    for k in keys:
        states = step_states(query, states, k)
        if not states:
            return False
    return len(query) in states


def start_states(query: tuple[Key, ...]) -> frozenset[int]:
    """The positions of `query` reachable before any key is consumed (for tree walks)."""
    return frozenset(_closure({0}, query))


def step_states(query: tuple[Key, ...], states: frozenset[int], key: Key) -> frozenset[int]:
    """The positions of `query` reachable after consuming `key`; empty means no match below.

    A flat dotted dict key (`['encoder.layer.0.weight']`, as HF safetensors files name
    tensors) is matched whole, and also as its dotted steps, so `**.weight` and
    `encoder.layer.*.weight` find it.
    """
    if type(key) is DictKey and type(key.key) is str and "." in key.key:
        return _step_dotted(query, states, key)
    nxt: set[int] = set()  # the common case inline (a hot loop of `find`); as `_advance`
    for q in states:
        if q >= len(query):
            continue
        qk = query[q]
        if type(qk) is DeepWildcard:
            nxt.add(q)  # ** consumes this key and stays
        elif key_matches(qk, key):
            nxt.add(q + 1)
    return frozenset(_closure(nxt, query)) if nxt else frozenset()


def _advance(query: tuple[Key, ...], states: frozenset[int], key: Key) -> frozenset[int]:
    nxt: set[int] = set()
    for q in states:
        if q >= len(query):
            continue
        qk = query[q]
        if type(qk) is DeepWildcard:
            nxt.add(q)  # ** consumes this key and stays
        elif key_matches(qk, key):
            nxt.add(q + 1)
    return frozenset(_closure(nxt, query)) if nxt else frozenset()


def _step_dotted(query: tuple[Key, ...], states: frozenset[int], key: DictKey) -> frozenset[int]:
    """`key` consumed whole, or as its dotted parts one after the other."""
    whole = _advance(query, states, key)
    parts = states
    for part in key.key.split("."):
        if not parts:
            break
        parts = _advance(query, parts, DictKey(part))
    return whole | parts


def _closure(states: set[int], query: tuple[Key, ...]) -> set[int]:
    out = set(states)
    for q in sorted(states):
        while q < len(query) and type(query[q]) is DeepWildcard:
            q += 1
            out.add(q)
    return out


def suggest(wrong: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to `wrong` (difflib), best first."""
    return difflib.get_close_matches(wrong, list(candidates), n=n, cutoff=0.5)

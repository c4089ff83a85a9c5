"""Parsing path text: keystr form (`['a'][0].w`), dotted form (`a.0.w`) and globs (`**.bias`).

Used by `Path.parse`; never imports jax.

Example:
    >>> parse_keys("layers[0].w*")
    [GetAttrKey(name='layers'), SequenceKey(idx=0), NameGlob('w*')]
"""

from __future__ import annotations

import ast
import re

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
    SequenceKey,
)

__all__ = ["parse_keys"]

_NAME_END = re.compile(r"[.\[\]]")
_FLAT = re.compile(r"<flat index (\d+)>")


def parse_keys(text: str) -> list[Key]:
    """The key entries that `text` spells, in order.

    Raises:
        PathError: the text is not a path; the message shows where it stops making sense.
    """
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

"""Searching the leaves of a tree as the TUI's `/` and `treetool ls --search` do (`search`).

A glob (`*`, `?`) matches leaves at any depth, and the nodes it names that hold leaves (a
`None` field or an empty container holds none: never a match, so `**.bias` counts the biases
there are); text matches leaf paths as a substring of the `LeafIndex`'s haystack (smart case,
dotted form). `inspect --filter` keeps the same matches (`glob_matches`).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from treetool._tree._haystack import CHUNK, SEP, Cancelled, find_rows
from treetool._tree._leaf_index import LeafIndex
from treetool._tree._views import find
from treetool._tree._walk import iter_leaves_with_paths

__all__ = ["glob_matches", "glob_query", "is_glob", "match_paths", "search"]

_GLOB_CHARS = frozenset("*?")


def is_glob(query: str) -> bool:
    """Whether a search query is a glob (`**.bias`, `layers[*]`) rather than a substring."""
    return any(c in _GLOB_CHARS for c in query)


def glob_query(query: str) -> str:
    """A search glob as `find` takes it: one without a leading `**` matches at any depth.

    Example:
        >>> glob_query("layers[*].weight"), glob_query("[0].w*"), glob_query("**.bias")
        ('**.layers[*].weight', '**[0].w*', '**.bias')
    """
    q = query.strip()
    if q.startswith("**"):
        return q
    return "**" + q if q[:1] in ("[", ".") else "**." + q


def _holds_leaves(x: Any, is_leaf: Callable[[Any], bool] | None) -> bool:
    """Whether `x` is a leaf or a node with a leaf under it (not `None`, not `{}`)."""
    try:
        return next(iter(iter_leaves_with_paths(x, is_leaf)), None) is not None
    except Exception:  # a node whose flatten raises: matched, as `find` matches it
        return True


def _leaf_paths(x: Any, is_leaf: Callable[[Any], bool] | None) -> list[str]:
    """The leaf paths under `x`, relative to it; none for a node that fails to open (it is
    an error entry at its own path, matched as `find` matches it)."""
    try:
        return [str(p) for p, _ in iter_leaves_with_paths(x, is_leaf)]
    except Exception:
        return []


def glob_matches(
    tree: Any, pattern: str, is_leaf: Callable[[Any], bool] | None = None
) -> list[tuple[Any, Any]]:
    """`find(tree, pattern)` less the matches that hold no leaf (`None` fields, empty
    containers): what a search, `n`/`N`, `ls --search` and `inspect --filter` all count.

    Example:
        >>> t = {"a": {"bias": 1.0}, "b": {"bias": None}, "c": {"bias": {"x": 2.0}}}
        >>> [str(p) for p, _ in glob_matches(t, "**.bias")]
        ["['a']['bias']", "['c']['bias']"]
    """
    return [(p, x) for p, x in find(tree, pattern, is_leaf) if _holds_leaves(x, is_leaf)]


def _text_rows(query: str, index: LeafIndex, cancelled: Callable[[], bool] | None) -> np.ndarray:
    """Rows whose path contains `query`: smart case, dotted form unless it has brackets."""
    dotted = not any(c in query for c in "[]'\"")
    fold = query == query.lower()
    q = query.lower() if fold else query
    if SEP in q:
        return np.zeros(0, dtype=np.int64)
    hay = index.haystack(dotted, fold, cancelled)
    return find_rows(hay, q.encode("utf-8", "surrogatepass"), cancelled)


def _paths_of(
    paths: list[str], rows: np.ndarray, cancelled: Callable[[], bool] | None
) -> list[str]:
    out: list[str] = []
    for start in range(0, len(rows), CHUNK):
        if cancelled is not None and cancelled():
            raise Cancelled
        chunk = rows[start : start + CHUNK].tolist()
        if len(chunk) == 1:
            out.append(paths[chunk[0]])
        else:  # one C call per chunk, not a bytecode loop per row
            out.extend(itemgetter(*chunk)(paths))
    return out


def search(
    query: str,
    index: LeafIndex | None,
    tree: Any,
    is_leaf: Callable[[Any], bool] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[list[str], np.ndarray | None]:
    """A search: the matching paths, and the matching rows of `index` (for its filter).

    A glob (`*`, `?`) matches leaves and the nodes that hold leaves (`glob_matches`), at any
    depth unless it starts with `**`; its rows are the leaves matched or under a node
    matched (what the Leaves tab filters to and `ls --search` lists); text matches
    leaf paths as a substring, case-insensitive unless the query has an upper-case letter,
    and a query without brackets also matches the dotted form (`group9.p9999` finds
    `['group9']['p9999']`). `cancelled()` is polled as it goes (raises `Cancelled`).

    Example:
        >>> t = {"enc": {"w": 1.0, "b": 2.0}, "dec": {"w": 3.0}}
        >>> idx = LeafIndex.build(t)
        >>> search("w", idx, t)[0], search("enc.b", idx, t)[1].tolist()
        (["['dec']['w']", "['enc']['w']"], [1])
    """
    query = query.strip()
    if not query:
        return [], None
    if is_glob(query):
        pairs = [(p, x) for p, x in glob_matches(tree, glob_query(query), is_leaf) if p]
        found = [str(p) for p, _ in pairs]
        if index is None:
            return found, None
        if cancelled is not None and cancelled():
            raise Cancelled
        rows = index.rows_of(found)
        if len(rows) < len(found):  # nodes named: the Leaves filter and ls list their leaves
            under = [
                f"{at}{sub}" for at, (_, x) in zip(found, pairs) for sub in _leaf_paths(x, is_leaf)
            ]
            rows = np.union1d(rows, index.rows_of(under)).astype(np.int64)
        return found, rows
    if index is None:
        raise ValueError("a text search needs the leaf index")
    rows = _text_rows(query, index, cancelled)
    return _paths_of(index.paths, rows, cancelled), rows


def match_paths(
    query: str, index: LeafIndex | None, tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> list[str]:
    """Paths matching a search (see `search`).

    Example:
        >>> t = {"enc": {"w": 1.0, "b": 2.0}, "dec": {"w": 3.0}}
        >>> match_paths("*.w", None, t)
        ["['dec']['w']", "['enc']['w']"]
        >>> match_paths("ENC", LeafIndex.build(t), t), match_paths("enc']['b", LeafIndex.build(t), t)
        ([], ["['enc']['b']"])
    """
    return search(query, index, tree, is_leaf)[0]

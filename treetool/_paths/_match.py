"""Glob matching of paths: `*` one step, `**` any number of steps, `[*]`, `.lin*`.

The matcher is a set of positions in the query advanced one key at a time, so a tree walk can
carry the states down and prune a subtree as soon as they are empty. Never imports jax.

Example:
    >>> from treetool._paths._keys import GetAttrKey
    >>> q = (DeepWildcard(), GetAttrKey("bias"))
    >>> match_keys(q, (GetAttrKey("layers"), DictKey("mlp"), GetAttrKey("bias")))
    True
"""

from __future__ import annotations

from collections.abc import Iterable

from treetool._paths._keys import DeepWildcard, DictKey, Key, key_matches

__all__ = ["match_keys", "start_states", "step_states", "suggest"]


def match_keys(query: tuple[Key, ...], keys: tuple[Key, ...]) -> bool:
    """Whether the pattern `query` matches the concrete `keys` (dynamic programming over `**`)."""
    states = start_states(query)
    for k in keys:
        states = step_states(query, states, k)
        if not states:
            return False
    return len(query) in states


def start_states(query: tuple[Key, ...]) -> frozenset[int]:
    """The positions of `query` reachable before any key is consumed (for tree walks).

    Example:
        >>> sorted(start_states((DeepWildcard(), DictKey("w"))))
        [0, 1]
    """
    return frozenset(_closure({0}, query))


def step_states(query: tuple[Key, ...], states: frozenset[int], key: Key) -> frozenset[int]:
    """The positions of `query` reachable after consuming `key`; empty means no match below.

    A flat dotted dict key (`['encoder.layer.0.weight']`, as HF safetensors files name
    tensors) is matched whole, and also as its dotted steps, so `**.weight` and
    `encoder.layer.*.weight` find it.

    Example:
        >>> q = (DictKey("a"), DictKey("b"))
        >>> sorted(step_states(q, start_states(q), DictKey("a")))
        [1]
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
    """The candidates closest to `wrong` (difflib), best first.

    Example:
        >>> suggest("weigth", ["weight", "bias"])
        ['weight']
    """
    import difflib  # only for a wrong name's error line

    return difflib.get_close_matches(wrong, list(candidates), n=n, cutoff=0.5)

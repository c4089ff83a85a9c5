"""The walks behind the flat views: every leaf with its path, in jax's order.

Walks here are iterative (no recursion limit: 10,000 levels are fine), pause the garbage
collector, and build path strings incrementally, one prefix per inner node. The fast walk
inlines the builtin dict/list/tuple/None cases; every other object is opened by the node
table's rule for its type (`_node_table`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from treetool._errors import TreetoolError
from treetool._paths._path import DictKey, Path, SequenceKey
from treetool._tree._model import LEAF_TYPES, Cycle, IsLeaf, Node, NodeError, Unopened, no_gc
from treetool._tree._node_table import RULES, rule_for, unsortable

__all__ = ["CycleDiverged", "iter_leaves_with_paths", "leaf_text_chunks"]


def iter_leaves_with_paths(tree: Any, is_leaf: IsLeaf = None) -> Iterator[tuple[Path, Any]]:
    """Yield `(Path, leaf)` in jax's leaf order, iteratively, strings built per prefix."""
    for chunk in _walk(tree, is_leaf, False):
        yield from chunk


#: a path text longer than this sends the walk to `_walk_nodes` (a cycle, or a very deep tree)
_DEEP = 2048


#: chunks are handed out only while the path is shorter than this (nothing of a cycle leaks)
_SHALLOW = 256


class _Deep(Exception):
    """The fast walk went deeper than `_DEEP` characters of path: maybe a cycle."""


def _walk(
    tree: Any, is_leaf: IsLeaf, texts: bool, errors: bool = False
) -> Iterator[list[tuple[Any, Any]]]:
    """The leaves with their paths, in jax's order, in lists of a few thousand.

    The fast walk (`_walk_fast`) knows nothing of cycles; past `_DEEP` characters of path it
    hands over to `_walk_nodes`, which follows the Node model and yields a `Cycle` where a
    node is one of its own ancestors (a list that contains itself), so no walk loops.

    A node whose flatten raises stops the walk with a `NodeError` naming its path; with
    `errors`, the walk goes on through `_walk_nodes`, which yields an `Unopened` in its place.
    """
    done = 0
    last: Any = None
    try:
        for chunk in _walk_fast(tree, is_leaf, texts):
            done += len(chunk)
            last = chunk[-1][0]
            yield chunk
        return
    except _Deep:
        pass
    except NodeError:
        if not errors:
            raise
    skip = done
    for chunk in _walk_nodes(tree, is_leaf, texts, errors):
        if skip:
            if skip >= len(chunk):
                skip -= len(chunk)
                if not skip and str(chunk[-1][0]) != str(last):
                    raise _diverged(last)
                continue
            if str(chunk[skip - 1][0]) != str(last):
                raise _diverged(last)
            chunk = chunk[skip:]
            skip = 0
        yield chunk
    if skip:
        raise _diverged(last)


class CycleDiverged(TreetoolError):
    """A walk met a cycle after it had handed out leaves of it (a wide self-containing node);
    `treetool.view` and the TUI show such trees, with the cycle as one leaf."""


def _diverged(last: Any) -> TreetoolError:
    where = str(last)
    if len(where) > 80:
        where = where[:40] + "…" + where[-39:]
    return CycleDiverged(
        f"the tree refers back to itself (a cycle) after {where!r}, in a node with "
        "many leaves: open it with treetool.view(tree) or the TUI, which show the cycle"
    )


def _walk_nodes(
    tree: Any, is_leaf: IsLeaf, texts: bool, errors: bool = False
) -> Iterator[list[tuple[Any, Any]]]:
    """`_walk` through the Node model: slower, any depth, a `Cycle` for each cycle.

    A node that cannot be opened raises a `NodeError`, or with `errors` is an `Unopened`.

    Paths are built as the fast walk builds them: text per edge, keys only when asked.
    """
    new, cls = object.__new__, Path
    root = Node(tree, Path(), None, None, is_leaf)
    stack: list[tuple[Node, str, Any]] = [(root, "", None)]
    out: list[tuple[Any, Any]] = []
    with no_gc():
        while stack:
            n, text, link = stack.pop()
            if n.is_leaf:
                x = n.obj if n.cycle is None else Cycle(n.cycle.path)
                if n.error is not None:
                    if not errors:
                        raise NodeError(text, n.error)
                    x = Unopened(n.error)
                if texts:
                    out.append((text, x))
                else:
                    p = new(cls)
                    if link is not None:
                        p._ctx, p._key = link
                    else:
                        p._ctx = None
                    p._str = text
                    out.append((p, x))
                if len(out) >= 4096:
                    yield out
                    out = []
                continue
            ctx = (link, None)
            kids = n.children
            n._children = None  # what is walked is not kept
            stack.extend((c, text + str(c.key), (ctx, c.key)) for c in reversed(kids))
    if out:
        yield out


def _walk_fast(tree: Any, is_leaf: IsLeaf, texts: bool) -> Iterator[list[tuple[Any, Any]]]:
    """The walk of `_walk` for trees less than `_DEEP` characters of path deep.

    Iterative, so depth is unbounded. Each path's text is its parent's text plus one step,
    built once per edge; its keys are left as its raw last key and its parent's context
    `(parent link, key maker)`, and built only when asked for (`Path._keys`). Children
    of types already known to be leaves are emitted as they are met, without the stack.
    With `texts`, the paths are only their text (`keystr`), and no Path is made.

    The few lines that emit a leaf are written out where they are needed, on purpose: a
    function call per leaf would cost a fifth of the walk.
    """
    new, cls, leafy, rules = object.__new__, Path, LEAF_TYPES, RULES
    deep, shallow = _DEEP, _SHALLOW
    # the first child that is not a leaf is walked next, the later children wait on the stack
    stack: list[tuple[Any, str, Any]] = []
    pop, push = stack.pop, stack.append
    out: list[tuple[Any, Any]] = []
    append = out.append
    obj, text, link = tree, "", None
    while True:
        if len(text) > deep:
            raise _Deep
        if len(out) >= 4096 and len(text) < shallow:  # deep: maybe a cycle, wait and see
            yield out
            out = []
            append = out.append
        t = type(obj)
        if t in leafy or (is_leaf is not None and is_leaf(obj)):
            if texts:
                append((text, obj))
            else:
                p = new(cls)
                if link is not None:
                    p._ctx, p._key = link
                else:
                    p._ctx = None
                p._str = text
                append((p, obj))
        elif t is dict:
            ctx: tuple = (link, DictKey)
            if len(obj) == 1:  # a wrapper such as {"params": ...}: no sort, no loop
                ((k, v),) = obj.items()
                if type(v) not in leafy:
                    obj, text, link = v, f"{text}[{k!r}]", (ctx, k)
                    continue
                if texts:
                    append((f"{text}[{k!r}]", v))
                else:
                    p = new(cls)
                    p._ctx, p._key, p._str = ctx, k, f"{text}[{k!r}]"
                    append((p, v))
                if not stack:
                    break
                obj, text, link = pop()
                continue
            try:
                keys: Any = sorted(obj)
            except TypeError as e:  # jax cannot sort them either: a NodeError at its path
                bad = unsortable(e)
                raise NodeError(text, f"{type(bad).__name__}: {bad}") from None
            for i, k in enumerate(keys):
                v = obj[k]
                if type(v) not in leafy:
                    for k2 in reversed(keys[i + 1 :]):
                        push((obj[k2], f"{text}[{k2!r}]", (ctx, k2)))
                    obj, text, link = v, f"{text}[{k!r}]", (ctx, k)
                    break
                if texts:
                    append((f"{text}[{k!r}]", v))
                else:
                    p = new(cls)
                    p._ctx, p._key, p._str = ctx, k, f"{text}[{k!r}]"
                    append((p, v))
            else:
                if not stack:
                    break
                obj, text, link = pop()
            continue
        elif t is list or t is tuple:
            ctx = (link, SequenceKey)
            for i, v in enumerate(obj):
                if type(v) not in leafy:
                    for j in range(len(obj) - 1, i, -1):
                        push((obj[j], f"{text}[{j}]", (ctx, j)))
                    obj, text, link = v, f"{text}[{i}]", (ctx, i)
                    break
                if texts:
                    append((f"{text}[{i}]", v))
                else:
                    p = new(cls)
                    p._ctx, p._key, p._str = ctx, i, f"{text}[{i}]"
                    append((p, v))
            else:
                if not stack:
                    break
                obj, text, link = pop()
            continue
        elif obj is not None:
            # every other node: opened by the node table's rule for its type
            rule = rules.get(t)
            try:
                if rule is None:
                    rule = rule_for(obj)  # learnt from its first object (may ask its flatten)
                raw = rule.raw(obj)
            except Exception as e:  # its flatten raises: a NodeError naming its path
                raise NodeError(text, f"{type(e).__name__}: {e}") from e
            if raw is None:  # a leaf of a type that may yet be registered: not cached
                if texts:
                    append((text, obj))
                else:
                    p = new(cls)
                    if link is not None:
                        p._ctx, p._key = link
                    else:
                        p._ctx = None
                    p._str = text
                    append((p, obj))
                if not stack:
                    break
                obj, text, link = pop()
                continue
            keys, kids, steps, make = raw
            ctx = (link, make)
            for i, v in enumerate(kids):
                if type(v) not in leafy:
                    for j in range(len(kids) - 1, i, -1):
                        push((kids[j], text + steps[j], (ctx, keys[j])))
                    obj, text, link = v, text + steps[i], (ctx, keys[i])
                    break
                if texts:
                    append((text + steps[i], v))
                else:
                    p = new(cls)
                    p._ctx, p._key, p._str = ctx, keys[i], text + steps[i]
                    append((p, v))
            else:
                if not stack:
                    break
                obj, text, link = pop()
            continue
        if not stack:
            break
        obj, text, link = pop()
    if out:
        yield out


def leaf_text_chunks(
    tree: Any, is_leaf: IsLeaf = None, errors: bool = False
) -> Iterator[list[tuple[str, Any]]]:
    """`(keystr, leaf)` pairs in jax's order, in lists of a few thousand: the cheapest walk
    when only the text of each path is needed (no Path objects, no generator step per leaf).
    With `errors`, a node whose flatten raises is an `Unopened` at its path (else a
    `NodeError`)."""
    return _walk(tree, is_leaf, True, errors)

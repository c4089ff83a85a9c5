"""Flat views of pytrees: leaves with paths, flatten/unflatten, flat dicts, get, globs.

Walks here are iterative (no recursion limit: 10,000 levels are fine), pause the garbage
collector, and build path strings incrementally, one prefix per inner node.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._errors import PathError, StructureMismatch, TreetoolError
from ._model import (
    LEAF,
    LEAF_TYPES,
    Cycle,
    IsLeaf,
    Node,
    NodeError,
    Unopened,
    asks_jax,
    children,
    jax_children,
    module_fields,
    no_gc,
)
from ._paths import (
    DictKey,
    GetAttrKey,
    Key,
    Path,
    SequenceKey,
    from_jax_key,
    key_matches,
    start_states,
    step_states,
    suggest,
)

__all__ = [
    "find",
    "flatten",
    "from_flat_dict",
    "get",
    "leaf_text_chunks",
    "iter_leaves_with_paths",
    "leaves_with_paths",
    "nonfinite",
    "resolve",
    "to_flat_dict",
    "unflatten",
    "unopened_or_leaf",
]


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
    new, cls, leafy = object.__new__, Path, LEAF_TYPES
    attr = object.__getattribute__
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
            except TypeError:
                keys = list(obj)
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
            # other nodes: their keys, children, and the text of each step
            kids = None
            if asks_jax(t):
                fields = module_fields(t, obj)
                if fields is not None:  # an equinox module: its fields, read as equinox does
                    keys, steps = fields
                    try:
                        kids = list(map(attr(obj, "__dict__").__getitem__, keys))
                    except KeyError:  # a field left unset: equinox's own flatten says what
                        kids = None
                    else:
                        ctx = (link, GetAttrKey)
                if kids is None:
                    # a node registered with jax (flax struct, optax state, ...): jax's own
                    # keys, converted to ours only when a path is asked for its keys
                    try:
                        pairs = jax_children(obj)
                    except Exception as e:  # its flatten raises: a NodeError naming its path
                        raise NodeError(text, f"{type(e).__name__}: {e}") from e
                    if pairs is not None:
                        keys = [k for k, _ in pairs]
                        kids = [c for _, c in pairs]
                        steps = list(map(str, keys))
                        ctx = (link, from_jax_key)
            if kids is None:
                try:
                    kind, pairs = children(obj, is_leaf)
                except Exception as e:  # its flatten raises: a NodeError naming its path
                    raise NodeError(text, f"{type(e).__name__}: {e}") from e
                if kind == LEAF:  # a leaf of a type that may yet be registered: not cached
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
                keys = [k for k, _ in pairs]
                kids = [c for _, c in pairs]
                steps = list(map(str, keys))
                ctx = (link, None)
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


def leaves_with_paths(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[Path, Any]]:
    """Every leaf with its path, in jax's order; `str(path)` equals jax's `keystr`.

    One iterative walk (any depth), each path string built once per edge of the tree, key
    entries built only when a path is asked for them.

    A node whose flatten raises cannot give its leaves: this raises `NodeError` (a
    `TreetoolError`) naming its path; `render`, `summary` and `view` show it in place.

    Example:
        >>> [(str(p), x) for p, x in leaves_with_paths({"b": (1, 2), "a": None})]
        [("['b'][0]", 1), ("['b'][1]", 2)]
    """
    out: list[tuple[Path, Any]] = []
    with no_gc():
        for chunk in _walk(tree, is_leaf, False):
            out += chunk
    return out


def flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], Any]:
    """`(leaves, treedef)`, exactly as `jax.tree_util.tree_flatten`.

    Where jax's flatten raises in a node, this raises `NodeError` naming the node's path.

    Example:
        >>> leaves, treedef = flatten({"a": 1, "b": [2, 3]})
        >>> leaves
        [1, 2, 3]
        >>> unflatten(treedef, [10, 20, 30])
        {'a': 10, 'b': [20, 30]}
    """
    import jax

    try:
        return jax.tree_util.tree_flatten(tree, is_leaf=is_leaf)
    except TreetoolError:
        raise
    except Exception as e:
        raise _where_flatten_fails(tree, is_leaf, e) from e


def _where_flatten_fails(tree: Any, is_leaf: IsLeaf, e: Exception) -> NodeError:
    """The `NodeError` of the first node whose flatten raises (found by walking again)."""
    try:
        for _ in _walk(tree, is_leaf, True):
            pass
    except NodeError as found:
        return found
    return NodeError("", f"{type(e).__name__}: {e}")


def unflatten(treedef: Any, leaves: Any) -> Any:
    """Rebuild a tree from a treedef and its leaves (`jax.tree_util.tree_unflatten`)."""
    import jax

    leaves = list(leaves)
    if treedef.num_leaves != len(leaves):
        raise StructureMismatch(
            f"unflatten: the treedef has {treedef.num_leaves} leaves, but {len(leaves)} were given"
        )
    return jax.tree_util.tree_unflatten(treedef, leaves)


def to_flat_dict(tree: Any, is_leaf: IsLeaf = None) -> dict[str, Any]:
    """`{keystr path: leaf}` for every leaf.

    Example:
        >>> to_flat_dict({"params": {"w": 1.0, "b": 0.0}})
        {"['params']['b']": 0.0, "['params']['w']": 1.0}
    """
    with no_gc():
        return {str(p): x for p, x in iter_leaves_with_paths(tree, is_leaf)}


def from_flat_dict(flat: dict[Any, Any], like: Any, is_leaf: IsLeaf = None) -> Any:
    """Rebuild a tree shaped like `like` from a flat dict keyed by path strings or Paths.

    Keys may be in keystr form or any form `Path.parse` accepts (`params.w`).

    Raises:
        StructureMismatch: a path of `like` is missing from `flat`, or `flat` has extra keys.

    Example:
        >>> from_flat_dict({"['a']": 5, "['b'][0]": 6}, like={"a": 0, "b": [0]})
        {'a': 5, 'b': [6]}
    """
    import jax

    paths = [p for p, _ in iter_leaves_with_paths(like, is_leaf)]
    norm: dict[str, Any] = {}
    for k, v in flat.items():
        norm[str(k)] = v
    wanted = {str(p) for p in paths}
    extra = [k for k in norm if k not in wanted]
    if extra:
        # accept other spellings (dotted form) by resolving them against `like`
        for k in extra:
            try:
                real = str(resolve(like, k, is_leaf))
            except (PathError, TypeError):
                continue
            norm.setdefault(real, norm.pop(k))
        extra = [k for k in norm if k not in wanted]
    missing = [str(p) for p in paths if str(p) not in norm]
    if missing or extra:
        lines = ["from_flat_dict: the flat dict does not match the structure of `like`"]
        if missing:
            lines.append(f"  missing {len(missing)}: {', '.join(missing[:5])}")
        if extra:
            lines.append(f"  unexpected {len(extra)}: {', '.join(map(str, extra[:5]))}")
        raise StructureMismatch("\n".join(lines))
    treedef = jax.tree_util.tree_structure(like, is_leaf=is_leaf)
    return jax.tree_util.tree_unflatten(treedef, [norm[str(p)] for p in paths])


# --- get / resolve ------------------------------------------------------------------------


def _rank(query: Key, key: Key) -> int:
    """Lower is a better loose match: the issue's rule for `layers.0`."""
    if type(query) is type(key):
        return 0
    if type(key) is SequenceKey:
        return 1
    if type(key) is DictKey and not isinstance(key.key, str):
        return 2
    if type(key) is DictKey:
        return 3
    if type(key) is GetAttrKey:
        return 4
    return 5


def _step(obj: Any, q: Key, is_leaf: IsLeaf) -> tuple[Key, Any] | None:
    kind, kids = children(obj, is_leaf)
    if type(q) is SequenceKey and q.idx < 0 and kind in ("list", "tuple") and -q.idx <= len(kids):
        return kids[q.idx]  # `layers[-1]`: counted from the end, as in Python
    best = None
    for k, c in kids:
        if k == q:
            return k, c
        if key_matches(q, k) and (best is None or _rank(q, k) < _rank(q, best[0])):
            best = (k, c)
    return best


def resolve(tree: Any, path: str | Path, is_leaf: IsLeaf = None) -> Path:
    """The exact path in `tree` that `path` (keystr or dotted form) names.

    Example:
        >>> str(resolve({"layers": [{"w": 1}]}, "layers.0.w"))
        "['layers'][0]['w']"
    """
    return _resolve(tree, path, is_leaf)[0]


def get(tree: Any, path: str | Path, is_leaf: IsLeaf = None) -> Any:
    """The subtree at `path`: keystr form, dotted form (`layers.0.weight`) or a Path.

    Raises:
        PathError: (a KeyError) the path is not in the tree; the message names the deepest
            valid prefix, what it holds, and the closest existing paths.

    Example:
        >>> tree = {"params": {"Dense_0": {"kernel": 1.0}}}
        >>> get(tree, "['params']['Dense_0']['kernel']"), get(tree, "params.Dense_0.kernel")
        (1.0, 1.0)
    """
    return _resolve(tree, path, is_leaf)[1]


def _resolve(tree: Any, path: str | Path, is_leaf: IsLeaf) -> tuple[Path, Any]:
    query = Path.parse(path)
    if query.is_pattern:
        raise PathError(
            f"{str(query)!r} is a glob: use tt.select(tree, {str(path)!r}) to get every match"
        )
    obj, keys = tree, []
    qkeys = query.keys
    i = 0
    while i < len(qkeys):
        hit = _step(obj, qkeys[i], is_leaf)
        used = 1
        if hit is None:  # `encoder.layer.0.weight` naming the flat key of an HF file
            hit, used = _flat_step(obj, qkeys, i, is_leaf)
        if hit is None:
            raise PathError(_miss_message(tree, query, i, obj, Path(keys), is_leaf))
        keys.append(hit[0])
        obj = hit[1]
        i += used
    return Path(keys), obj


def _flat_step(obj: Any, qkeys: tuple, i: int, is_leaf: IsLeaf) -> tuple[Any, int]:
    """The dict entry whose string key is the dotted join of the most query steps from `i`."""
    kind, kids = children(obj, is_leaf)
    if kind != "dict" or len(qkeys) - i < 2:
        return None, 0
    flat = {k.key: (k, c) for k, c in kids if type(k) is DictKey and type(k.key) is str}
    if not flat:
        return None, 0
    texts = [q.text for q in qkeys[i:]]
    for j in range(len(texts), 1, -1):
        hit = flat.get(".".join(texts[:j]))
        if hit is not None:
            return hit, j
    return None, 0


def _miss_message(tree: Any, query: Path, i: int, obj: Any, prefix: Path, is_leaf: IsLeaf) -> str:
    kind, kids = children(obj, is_leaf)
    where = str(prefix) or "the root"
    missing = str(query[i])
    if kind == LEAF:
        has = f"{where} is a leaf ({type(obj).__name__}), it has no {missing}"
    elif not kids:
        has = f"{where} ({type(obj).__name__}) is empty"
    else:
        names = [str(k) for k, _ in kids]
        shown = ", ".join(names[:8]) + (f", … ({len(names)} in all)" if len(names) > 8 else "")
        flat = ".".join(k.text for k in query.keys[i:])
        if i + 1 < len(query) and any(type(k) is DictKey and "." in str(k.key) for k, _ in kids):
            missing += f" and no flat key {flat!r}"  # the file names its leaves `a.b.c`
        has = f"{where} has no {missing}; it has {shown}"
    close = []
    if kind != LEAF and kids:
        rest = Path._make(query.keys[i + 1 :])
        by_text = {k.text: k for k, _ in kids}
        for t in suggest(query[i].text, by_text):  # only paths that exist are suggested
            cand = prefix + by_text[t] + rest
            try:
                close.append(str(_resolve(tree, cand, is_leaf)[0]))
            except PathError:
                pass
    if not close:
        # compared in the dotted form (how flat names are typed), shown as the real paths
        dotted: dict[str, str] = {}
        for text, keys in _candidate_paths(tree, is_leaf):
            dotted.setdefault(".".join(keys), text)
        want = ".".join(k.text for k in query)
        close = [dotted[d] for d in suggest(want, dotted)]
    msg = f"no path {str(query)!r} in the tree: {has}"
    if close:
        msg += ". Did you mean " + " or ".join(repr(c) for c in close) + "?"
    return msg


def _candidate_paths(
    tree: Any, is_leaf: IsLeaf, limit: int = 20000
) -> list[tuple[str, tuple[str, ...]]]:
    """Real paths of the tree: `(keystr, the texts of its steps)`."""
    out: list[tuple[str, tuple[str, ...]]] = []
    stack: list[tuple[Any, str, tuple[str, ...]]] = [(tree, "", ())]
    while stack and len(out) < limit:
        x, text, steps = stack.pop()
        _, kids = children(x, is_leaf)
        for k, c in reversed(kids):
            t, s = text + str(k), (*steps, k.text)
            out.append((t, s))
            stack.append((c, t, s))
    return out


# --- globs --------------------------------------------------------------------------------


def find(
    tree: Any, pattern: str | Path, is_leaf: IsLeaf = None, leaves_only: bool = False
) -> list[tuple[Path, Any]]:
    """Every node (or leaf) whose path matches a glob, in depth-first (jax) order.

    `*` matches one step, `**` any number of steps, `[*]` any index; names match loosely
    (`.bias` finds `['bias']`). Subtrees that cannot match are not walked. A node whose
    flatten raises is matched as a leaf (the object itself, as `get` returns it).

    Example:
        >>> tree = {"layers": [{"w": 1, "b": 2}, {"w": 3, "b": 4}]}
        >>> [str(p) for p, _ in find(tree, "**.b")]
        ["['layers'][0]['b']", "['layers'][1]['b']"]
    """
    query = Path.parse(pattern).keys
    n = len(query)
    out: list[tuple[Path, Any]] = []
    # each entry also links the containers above it, (id, depth, link), to stop at a cycle
    stack: list[tuple[Any, tuple[Key, ...], frozenset[int], Any]] = [
        (tree, (), start_states(query), None)
    ]
    with no_gc():
        while stack:
            obj, keys, states, above = stack.pop()
            try:
                kind, kids = children(obj, is_leaf)
            except Exception:  # a node whose flatten raises: matched as a leaf, as `get` gives it
                kind, kids = LEAF, []
            if kind != LEAF and above is not None:
                d = len(keys)
                if d <= 64 or not d & (d - 1):  # deeper, at powers of 2: linear in depth
                    at = _ancestor(above, id(obj))
                    if at is not None:  # the same object as an ancestor: a leaf, a Cycle
                        obj, kind, kids = Cycle(Path._make(keys[:at])), LEAF, []
            if n in states and (not leaves_only or kind == LEAF):
                out.append((Path._make(keys), obj))
            link = (id(obj), len(keys), above)
            for k, c in reversed(kids):
                nxt = step_states(query, states, k)
                if nxt:
                    stack.append((c, (*keys, k), nxt, link))
    return out


def unopened_or_leaf(x: Any) -> Any:
    """`x`, or an `Unopened` with its error when `x` is a node whose flatten raises.

    Example:
        >>> unopened_or_leaf(3)
        3
    """
    if type(x) in LEAF_TYPES:
        return x
    try:
        children(x)
    except Exception as e:
        return Unopened(f"{type(e).__name__}: {e}")
    return x


def _ancestor(link: Any, ident: int) -> int | None:
    """The depth of the container `ident` among those linked above, or None."""
    while link is not None:
        if link[0] == ident:
            return link[1]
        link = link[2]
    return None


# --- numbers ------------------------------------------------------------------------------


def nonfinite(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[Path, int, int]]:
    """Every floating or complex array leaf holding NaN or Inf: `(path, nan_count, inf_count)`.

    Example:
        >>> import numpy as np
        >>> [(str(p), n, i) for p, n, i in nonfinite({"a": np.array([np.nan, np.inf, 1.0]), "b": np.ones(2)})]
        [("['a']", 1, 1)]
    """
    import numpy as np

    from ._arrays import _as_float, _chunks, is_array, is_key

    out = []
    for p, x in leaves_with_paths(tree, is_leaf):
        if not is_array(x) or is_key(x):
            continue
        kind = getattr(getattr(x, "dtype", None), "kind", "V")
        if kind in "iub":
            continue
        n_nan = n_inf = 0
        for raw in _values_of(p, x, _chunks):
            c = _as_float(raw)
            nan = int(np.count_nonzero(np.isnan(c)))
            n_nan += nan
            n_inf += int(c.size - np.count_nonzero(np.isfinite(c)) - nan)
        if n_nan or n_inf:
            out.append((p, n_nan, n_inf))
    return out


def _values_of(path: Path, x: Any, chunks: Any) -> Iterator[Any]:
    """`chunks(x)`; a leaf whose values cannot be read (a deleted jax array) is a `StatsError`
    naming its path, a damaged or vanished file its own `LoadError` or `OSError`."""
    from ._errors import StatsError

    try:
        yield from chunks(x)
    except (TreetoolError, OSError):
        raise
    except Exception as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise StatsError(f"{path}: cannot read its values: {type(e).__name__}: {text}") from e

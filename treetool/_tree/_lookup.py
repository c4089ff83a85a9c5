"""Finding nodes by path: `get`/`resolve` (one exact or loose path) and `find` (globs).

Each step opens one node through the node table (`children`); a node whose flatten raises on
the way to a path is a `NodeError` naming where it is.
"""

from __future__ import annotations

from typing import Any

from treetool._errors import PathError, TreetoolError
from treetool._paths._path import (
    DictKey,
    GetAttrKey,
    Key,
    Path,
    SequenceKey,
    key_matches,
    start_states,
    step_states,
    suggest,
)
from treetool._public import set_module
from treetool._tree._model import (
    LEAF,
    LEAF_TYPES,
    Cycle,
    IsLeaf,
    NodeError,
    Unopened,
    children,
    no_gc,
)
from treetool._tree._node_table import LIST, TUPLE

__all__ = ["find", "get", "resolve", "unopened_or_leaf"]


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
    if type(q) is SequenceKey and q.idx < 0 and kind in (LIST, TUPLE) and -q.idx <= len(kids):
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


@set_module("treetool")
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
    obj = tree
    keys: list[Key] = []
    qkeys = query.keys
    i = 0
    while i < len(qkeys):
        try:
            hit = _step(obj, qkeys[i], is_leaf)
        except TreetoolError:
            raise
        except Exception as e:  # the node on the way cannot be opened: say where
            raise NodeError(str(Path(keys)), f"{type(e).__name__}: {e}") from e
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
        try:
            _, kids = children(x, is_leaf)
        except Exception:  # a node that cannot be opened has no paths below it to suggest
            continue
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

"""Why `jax.tree_util.tree_map(f, a, b)` fails: every structural mismatch, by key path.

jax names the first mismatch it meets. `explain_mismatch` names all of them, each in the shape
of jax's own prefix errors: what kind of problem, the key path on its own line, then "At that
key path, a has …, but b has …". `explain()` appends that explanation to the structure errors
that jax raises inside it.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Literal

from treetool._errors import StructureMismatch
from treetool._public import set_module
from treetool._tree._model import IsLeaf

__all__ = ["explain", "explain_mismatch", "mismatches"]

_TITLES = {
    "removed": "{b} has nothing",
    "added": "{a} has nothing",
    "node_type": "different node types",
    "static": "different static (aux) data",
}


def mismatches(a: Any, b: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """The changes of `diff(a, b, values=False)` that make `tree_map(f, a, b)` fail.

    A leaf of `a` facing a subtree of `b` is fine for tree_map (f receives the subtree), so it
    is not a mismatch; shapes, dtypes and values never are.
    """
    from treetool._diff._tree_diff import diff

    out = []
    for c in diff(a, b, is_leaf=is_leaf, values=False).changes:
        breaks = c.kind in ("added", "removed", "static") or (
            c.kind == "node_type" and c.detail.get("before_kind") != "leaf"
        )
        if breaks:
            out.append(c)
    return out


@set_module("treetool")
def explain_mismatch(
    a: Any, b: Any, *, is_leaf: IsLeaf = None, names: tuple[str, str] = ("a", "b")
) -> str:
    """Why `jax.tree_util.tree_map(f, a, b)` fails: every mismatching key path, both sides.

    Args:
        a, b: the trees given to tree_map (`a` sets the structure; a leaf of `a` may face a
            whole subtree of `b`).
        is_leaf: as given to tree_map.
        names: what to call the two trees in the text.

    Example:
        >>> import treetool as tt
        >>> print(tt.explain_mismatch({"x": 1, "y": [1, 2]}, {"x": 1, "y": (1, 2)}))
        tree_map(f, a, b) fails: a and b differ in structure at 1 key path.
        <BLANKLINE>
        1. different node types at key path
             ['y']
           At that key path, a has a list of 2 children, but b has a tuple of 2 children.
    """
    na, nb = names
    found = mismatches(a, b, is_leaf)
    if not found:
        return f"{na} and {nb} have the same structure: tree_map(f, {na}, {nb}) can map over them."
    n = len(found)
    lines = [
        f"tree_map(f, {na}, {nb}) fails: {na} and {nb} differ in structure at {n} key "
        f"path{'s' if n > 1 else ''}."
    ]
    for i, c in enumerate(found, 1):
        title = _TITLES[c.kind].format(a=na, b=nb)
        lines.append("")
        lines.append(f"{i}. {title} at key path")
        lines.append(f"     {c.path or '<root>'}")
        has_a, has_b = _sides(c)
        lines.append(f"   At that key path, {na} has {has_a}, but {nb} has {has_b}.")
    return "\n".join(lines)


def _sides(c: Any) -> tuple[str, str]:
    d = c.detail
    if c.kind in ("added", "removed"):
        label = c.after if c.kind == "added" else c.before
        n = d.get("leaves", 0)
        if d.get("node_kind") == "leaf":
            what = f"a leaf {label}"
        else:
            what = f"a {label} subtree ({_count(n, 'leaf', 'leaves')})"
        lengths = d.get("lengths")
        if lengths:
            side = 1 if c.kind == "removed" else 0
            container = d.get("containers", ["sequence", "sequence"])[side]
            n = _count(lengths[side], "element", "elements")
            nothing = f"no such element (its {container} has {n})"
        else:
            nothing = "no such key"
        return (nothing, what) if c.kind == "added" else (what, nothing)
    if c.kind == "node_type":
        return d["before_desc"], d["after_desc"]
    # static
    name = d.get("type", "a node")
    if isinstance(c.before, dict):
        fa = ", ".join(f"{k}={v!r}" for k, v in c.before.items())
        fb = ", ".join(f"{k}={v!r}" for k, v in c.after.items())
        return f"{name} with {fa}", f"{name} with {fb}"
    return f"{name} with aux data {c.before}", f"{name} with aux data {c.after}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@set_module("treetool")
class explain(contextlib.ContextDecorator):
    """Append the full explanation to jax structure errors raised inside the block.

    When `jax.tree_util.tree_map` (or `jax.tree.map`, `tree_map_with_path`) fails on
    mismatched structures inside the block, the error is re-raised as `StructureMismatch`
    (a `ValueError`) whose message is jax's, followed by `explain_mismatch` of the trees.
    Other exceptions pass through unchanged. Also works as a decorator.

    Example:
        >>> import jax, treetool as tt
        >>> try:
        ...     with tt.explain():
        ...         jax.tree_util.tree_map(lambda x, y: x, {"a": 1}, {"a": 1, "b": 2})
        ... except ValueError as e:
        ...     print(str(e)[str(e).index("tree_map(f"):])
        tree_map(f, a, b) fails: a and b differ in structure at 1 key path.
        <BLANKLINE>
        1. a has nothing at key path
             ['b']
           At that key path, a has no such key, but b has a leaf int.
    """

    def __enter__(self) -> explain:
        return self

    def __exit__(
        self, exc_type: Any, exc: BaseException | None, tb: Any
    ) -> Literal[False]:  # never swallows: it returns False or raises the explained error
        if exc is None or not isinstance(exc, (ValueError, TypeError)):
            return False
        if isinstance(exc, StructureMismatch):
            return False
        operands = _tree_map_operands(tb)
        if operands is None:
            return False
        tree, rest, is_leaf = operands
        parts = []
        for i, r in enumerate(rest):
            names = ("a", "b") if len(rest) == 1 else ("tree", f"rest[{i}]")
            try:
                if not mismatches(tree, r, is_leaf):
                    continue
                parts.append(explain_mismatch(tree, r, is_leaf=is_leaf, names=names))
            except Exception:  # explaining must never hide the original error
                return False
        if not parts:
            return False
        msg = f"{exc}\n\n" + "\n\n".join(parts)
        raise StructureMismatch(msg) from exc


def _tree_map_operands(tb: types.TracebackType | None) -> tuple[Any, tuple, Any] | None:
    """`(tree, rest, is_leaf)` of the innermost jax tree_map frame in a traceback."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__", "").startswith("jax."):
            loc = frame.f_locals
            if "tree" in loc and "rest" in loc and isinstance(loc["rest"], tuple):
                found = (loc["tree"], loc["rest"], loc.get("is_leaf"))
        tb = tb.tb_next
    return found

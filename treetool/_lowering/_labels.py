"""The one set of node labels that every view shows (rich, TUI, HTML, CLI).

A label is data (`NodeLabel`), so each renderer styles it its own way while the words stay
the same everywhere: key, node type or `f32[128,784]`, params, bytes, and flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treetool._format import fmt_bytes as fmt_bytes
from treetool._format import fmt_count as fmt_count
from treetool._leaves._arrays import scalar_value, short_dtype
from treetool._text import safe
from treetool._typetests import is_opaque, is_opaque_function

if TYPE_CHECKING:  # the kit sits below the tree: it takes a Node and calls its methods
    from treetool._tree._model import Aggregates, Node

__all__ = [
    "Budget",
    "NodeLabel",
    "devices_text",
    "fmt_bytes",
    "fmt_count",
    "key_text",
    "label",
    "leaf_text",
    "signature",
]

DTYPE_STYLES = {
    "f": "cyan",
    "bf": "bright_cyan",
    "i": "magenta",
    "u": "bright_magenta",
    "c": "blue",
    "bool": "yellow",
    "key": "green",
}


def dtype_style(dtype: str | None) -> str:
    """The colour of a dtype badge (same in the terminal and in HTML)."""
    if not dtype:
        return "white"
    s = short_dtype(dtype)
    for prefix in ("bf", "key", "bool", "f", "i", "u", "c"):
        if s.startswith(prefix):
            return DTYPE_STYLES[prefix]
    return "white"


def key_text(node: Node) -> str:
    """The key of a node as it appears in its path (`.weight`, `['params']`, `[0]`)."""
    if node.key is not None:
        return safe(str(node.key))
    return safe(str(node.path))  # a subtree shown on its own is labelled with its full path


def _short_repr(x: Any, limit: int = 40) -> str:
    try:
        r = repr(x)
    except Exception as e:  # a broken __repr__ must not break the view
        r = f"<{type(x).__name__}: repr failed: {e}>"
    if callable(x) and hasattr(x, "__name__") and r.startswith("<"):
        r = f"<{type(x).__name__} {x.__name__}>"
    r = safe(r)  # a repr of file data: no control or bidi characters
    return r if len(r) <= limit else r[: limit - 1] + "…"


def leaf_text(node: Node) -> str:
    """`f32[128,784]` for arrays; a short value for scalars, strings and other objects."""
    info = node.info
    if info.shape is not None:
        text = info.label
        if info.shape == () and info.kind in ("array", "jax") and not info.is_key:
            try:
                text += f" {scalar_value(node.obj)!r}"
            except Exception:
                pass
        return text
    if info.kind == "none":
        return "None"
    return _short_repr(node.obj)


@dataclass
class Budget:
    """How many leaves a renderer may walk to compute aggregates (keeps huge trees instant)."""

    leaves: int = 10_000


@dataclass
class NodeLabel:
    """What a row shows about a node."""

    key: str
    type: str
    params: int | None = None
    nbytes: int | None = None
    dtype: str | None = None
    count: int | None = None
    flags: tuple[str, ...] = ()
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def stats_text(self) -> str:
        """`130 params · 520 B`, or '' when unknown or zero."""
        parts = []
        if self.params:
            parts.append(f"{fmt_count(self.params)} param{'s' if self.params != 1 else ''}")
        if self.nbytes:
            parts.append(fmt_bytes(self.nbytes))
        return " · ".join(parts)

    def plain(self) -> str:
        """The whole label as plain text: `.weight  f32[8,4]  32 params · 128 B  [lazy]`."""
        parts = [p for p in (self.key, self.type, self.stats_text) if p]
        if self.flags:
            parts.append(" ".join(f"[{f}]" for f in self.flags))
        if self.error:
            parts.append(f"⚠ {self.error}")
        return "  ".join(parts)


def _flags(node: Node) -> tuple[str, ...]:
    flags = []
    if is_opaque(node.obj) or is_opaque_function(node.obj):
        flags.append("not executed")
    info = node.info
    if info.kind == "lazy":
        flags.append("lazy")
    if info.is_key:
        flags.append("key")
    return tuple(flags)


def inner_type(node: Node, agg: Aggregates | None = None) -> str:
    """`dict`, `list[3]`, `MLP`, `adamw state (ScaleByAdamState)`…"""
    n = node.num_children
    kind = node.node_kind
    name = safe(node.type_name)
    if kind in ("dict", "list", "tuple"):
        return f"{name}[{n}]"
    if kind == "namedtuple":  # NodeKind.NAMEDTUPLE, a str enum
        return name
    if kind == "none":
        return "None"
    return name


def label(node: Node, budget: Budget | None = None) -> NodeLabel:
    """The label of a node; aggregates only while `budget` allows (None: always)."""
    try:
        if node.error is not None:
            return NodeLabel(key_text(node), safe(node.type_name), error=safe(node.error))
        if node.is_leaf:
            if node.cycle is not None:  # a cycle: the node is one of its own ancestors
                where = str(node.cycle.path) or "(root)"
                return NodeLabel(key_text(node), f"↻ same object as {where}")
            info = node.info
            return NodeLabel(
                key_text(node),
                leaf_text(node),
                params=info.params or None,
                nbytes=info.nbytes or None,
                dtype=info.dtype,
                flags=_flags(node),
            )
        try:
            agg = _aggregates(node, budget)
        except Exception:  # a broken descendant shows its own error; no totals here
            agg = None
        if agg is not None and agg.errors:  # the same: totals that leave a node out mislead
            agg = None
        dtype = None
        if agg is not None and len(agg.dtypes) == 1:
            dtype = next(iter(agg.dtypes))
        return NodeLabel(
            key_text(node),
            inner_type(node),
            params=agg.params if agg else None,
            nbytes=agg.nbytes if agg else None,
            dtype=dtype,
            count=node.num_children,
            flags=_flags(node),
        )
    except Exception as e:  # one broken node never breaks the view
        return NodeLabel(
            key_text(node),
            safe(node.type_name),
            error=safe(node.error or f"{type(e).__name__}: {e}"),
        )


def _aggregates(node: Node, budget: Budget | None) -> Aggregates | None:
    if budget is None:
        return node.aggregates
    if node._agg is not None:
        return node._agg
    if budget.leaves <= 0:
        return None
    agg = node.aggregates_within(budget.leaves)
    if agg is None:
        budget.leaves = 0
        return None
    budget.leaves -= agg.leaves
    return agg


def signature(node: Node, limit: int = 512, budget: Budget | None = None) -> tuple | None:
    """A structural fingerprint (types, keys, shapes, dtypes), or None past `limit` nodes.

    Siblings with equal signatures fold into one row (`[0..31] ×32 Block`). Nodes visited are
    taken from `budget` when one is given.
    """
    if budget is not None:
        limit = min(limit, budget.leaves)
    out: list = []
    stack = [node]
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        if seen > limit:
            if budget is not None:
                budget.leaves -= seen
            return None
        if n.is_leaf:
            info = n.info
            out.append(
                ("L", info.shape, info.dtype) if info.shape is not None else ("L", leaf_text(n))
            )
            continue
        out.append((n.type_name, n.node_kind, tuple(str(c.key) for c in n.children)))
        stack.extend(reversed(n.children))
    if budget is not None:
        budget.leaves -= seen
    return tuple(out)


def devices_text(devices: tuple[Any, ...] | list[Any]) -> str:
    """`cpu 0`, `cpu 0,4`, `cpu 0-7`: devices by platform with runs of ids folded.

    Example:
        >>> class D:
        ...     def __init__(self, i): self.id, self.platform = i, "cpu"
        >>> devices_text([D(0), D(1), D(2), D(3), D(6)])
        'cpu 0-3,6'
    """
    by_platform: dict[str, list[int]] = {}
    for d in devices:
        by_platform.setdefault(d.platform, []).append(d.id)
    parts = []
    for plat, ids in by_platform.items():
        ids = sorted(ids)
        runs: list[str] = []
        start = prev = ids[0]
        for i in [*ids[1:], None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            if prev - start >= 2:
                runs.append(f"{start}-{prev}")
            else:
                runs.extend(str(j) for j in range(start, prev + 1))
            if i is not None:
                start = prev = i
        parts.append(f"{plat} {','.join(runs)}")
    return " ".join(parts)

"""Rich rendering of a TreeDiff, like a code review: `+` added, `-` removed, `~` changed.

Changes are grouped under their common parents; a parent with untouched children ends with a
dim `· N unchanged` row, and chains of parents with nothing else in them fold into one row
(`.layers[1]`). A header counts the changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text
from rich.tree import Tree

from treetool._text import safe
from treetool._tree._model import LEAF, children

if TYPE_CHECKING:  # the result module imports this one, never the other way round
    pass

__all__ = ["DiffView", "change_text", "diff_text"]

SIGN_STYLES = {"+": "green", "-": "red", "~": "yellow"}


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def _val(x: Any) -> str:
    """An element value: floats with 6 significant digits, everything else as repr."""
    if isinstance(x, float):
        return repr(float(f"{x:.6g}"))
    return repr(x)


def change_text(c: Any) -> str:
    """What a change is, in words (no path, no sign): `f32[8,8] → f32[16,8]`.

    Example:
        >>> import numpy as np, treetool as tt
        >>> a, b = np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)
        >>> b[1, 0] = 1e-3
        >>> change_text(tt.diff(a, b).changes[0])
        '1 of 4 elements differ · max abs 0.001 · max rel 1 · first at [1, 0]: 0.0 → 0.001'
    """
    d = c.detail
    k = c.kind
    if k in ("added", "removed"):
        label = c.after if k == "added" else c.before
        parts = [str(label)]
        if d.get("leaves", 1) != 1 or (
            d.get("leaves") == 1 and "[" not in str(label) and d.get("params")
        ):
            parts.append(f"{d['leaves']} leaves" if d.get("leaves") != 1 else "1 leaf")
        if d.get("params") and "[" not in str(label):
            parts.append(f"{d['params']:,} params")
        if "moved_from" in d:
            parts.append(f"moved from {d['moved_from']}")
        if "moved_to" in d:
            parts.append(f"moved to {d['moved_to']}")
        text = " · ".join(parts)
    elif k == "static":
        if isinstance(c.before, dict):
            text = ", ".join(f"{f}: {c.before[f]!r} → {c.after[f]!r}" for f in c.before)
        else:
            text = f"{c.before} → {c.after}"
    elif k in ("shape", "dtype"):
        la, lb = d.get("labels", (c.before, c.after))
        text = f"{la} → {lb}"
    elif k == "value":
        if d.get("callable"):  # functions, by their labels (text from a file: no repr)
            text = f"{c.before} → {c.after}"
            if d.get("code_changed"):
                text += " · same name, different code"
        elif "max_abs" not in d:
            text = f"{_val(c.before)} → {_val(c.after)}"
        else:
            n, size = d["count"], d["size"]
            parts = [f"{n:,} of {size:,} element{'s' if size != 1 else ''} differ"]
            if d.get("max_abs") is not None:
                parts.append(f"max abs {_num(d['max_abs'])}")
                parts.append(f"max rel {_num(d['max_rel'])}")
            idx = d.get("first_index", [])
            where = f"first at [{', '.join(map(str, idx))}]: " if idx else ""
            parts.append(f"{where}{_val(c.before)} → {_val(c.after)}")
            text = " · ".join(parts)
            if "sharding" in d:
                text += f" · sharding {d['sharding'][0]} → {d['sharding'][1]}"
    elif k == "error":  # a node whose flatten raised, on one side or both
        if d.get("leaf"):  # comparing two leaves raised (a deleted array): on either side
            text = f"cannot compare these leaves · {safe(str(c.before))}"
        else:
            sides = [f"{w}: {safe(m)}" for w, m in (("before", c.before), ("after", c.after)) if m]
            text = "cannot open this node · " + " · ".join(sides)
    else:  # node_type, sharding
        text = f"{c.before} → {c.after}"
    if "path_before" in d:
        text += f" (was {d['path_before']})"
    return text


class _Group:
    """A node of the trie of changed paths."""

    __slots__ = ("change", "kids", "key", "keys", "in_b")

    def __init__(self, key: Any, keys: tuple) -> None:
        self.key = key
        self.keys = keys
        self.change: Any = None
        self.kids: dict[Any, _Group] = {}
        self.in_b = False


def group_changes(changes: list[Any], limit: int) -> tuple[_Group, list[Any]]:
    """The first `limit` changes as a tree of groups under their common parents."""
    root = _Group(None, ())
    shown = changes[:limit]
    for c in shown:
        g = root
        keys = tuple(c.keys)
        last = len(keys) - 1
        for i, k in enumerate(keys):
            # a removed child and a change in b may share a path (a sequence shifted)
            slot = ("-", k) if i == last and c.kind == "removed" else k
            nxt = g.kids.get(slot)
            if nxt is None:
                nxt = g.kids[slot] = _Group(k, keys[: i + 1])
            if c.kind != "removed":
                nxt.in_b = True
            g = nxt
        g.change = c
    return root, shown


def _header(diff: Any) -> Text:
    t = Text()
    if not diff.changes:
        t.append("no differences", style="bold green")
        return t
    n = len(diff.changes)
    t.append(f"{n} change{'s' if n != 1 else ''}", style="bold")
    counts = diff.counts
    for sign, name in (("+", "added"), ("-", "removed"), ("~", "changed")):
        if counts[name]:
            t.append("  ")
            t.append(f"{sign}{counts[name]} {name}", style=SIGN_STYLES[sign])
    changed = [(k, v) for k, v in diff.by_kind.items() if k not in ("added", "removed")]
    if changed:
        t.append(" (" + ", ".join(f"{v} {k}" for k, v in changed) + ")", style="dim")
    return t


class DiffView:
    """A rich renderable of a `TreeDiff`.

    Args:
        diff: the TreeDiff.
        limit: how many changes to show before `… N more changes`.

    Example:
        >>> import io, treetool as tt
        >>> from rich.console import Console
        >>> d = tt.diff({"a": [1, 2], "b": 1.0}, {"a": [1, 2, 3], "b": 1.5})
        >>> c = Console(file=io.StringIO(), width=70, color_system=None)
        >>> c.print(DiffView(d))
        >>> print(c.file.getvalue(), end="")
        2 changes  +1 added  ~1 changed (1 value)
        dict[2]
        ├── ['a']  list[3]
        │   ├── + [2]  int
        │   └── · 2 unchanged
        └── ~ ['b']  value  1.0 → 1.5
    """

    def __init__(self, diff: Any, *, limit: int = 1000) -> None:
        self.diff = diff
        self.limit = limit
        self._complete = True

    def _resolve(self, keys: tuple) -> Any:
        """The node of `b` at `keys` (None when b has none there)."""
        obj = self.diff.b
        for k in keys:
            _, kids = children(obj, self.diff.is_leaf)
            for kk, c in kids:
                if kk == k:
                    obj = c
                    break
            else:
                return _MISSING
        return obj

    def build(self) -> Group | Text:
        """The header and the tree of changes."""
        diff = self.diff
        root, shown = group_changes(diff.changes, self.limit)
        self._complete = len(shown) == len(diff.changes)
        head = _header(diff)
        if not diff.changes:
            return head
        tree = Tree(self._row(root, ""), guide_style="dim")
        self._add_children(root, tree)
        if len(diff.changes) > len(shown):
            more = len(diff.changes) - len(shown)
            tree.add(Text(f"… {more} more change{'s' if more != 1 else ''}", style="dim italic"))
        return Group(head, tree)

    def _add_children(self, g: _Group, rt: Tree) -> None:
        stack = [(g, rt)]
        while stack:
            g, rt = stack.pop()
            unchanged = self._unchanged(g)
            pending = []
            for kid in g.kids.values():
                key_text = str(kid.key)
                # fold chains of groups that hold nothing but one changed child
                while kid.change is None and len(kid.kids) == 1 and self._unchanged(kid) == 0:
                    kid = next(iter(kid.kids.values()))
                    key_text += str(kid.key)
                row = self._row(kid, key_text)
                branch = rt.add(row)
                pending.append((kid, branch))
            if unchanged:
                rt.add(Text(f"· {unchanged} unchanged", style="dim"))
            stack.extend(reversed(pending))

    def _unchanged(self, g: _Group) -> int:
        if not self._complete or not g.kids:
            return 0
        if g.change is not None and g.change.kind in ("added", "removed"):
            return 0
        obj = self._resolve(g.keys)
        if obj is _MISSING:
            return 0
        try:
            kind, kids = children(obj, self.diff.is_leaf)
        except Exception:
            return 0
        if kind == LEAF:
            return 0
        return max(len(kids) - sum(1 for k in g.kids.values() if k.in_b), 0)

    def _row(self, g: _Group, key_text: str) -> Text:
        t = Text()
        c = g.change
        if c is not None and not g.keys and c.kind != "node_type":
            t.append(safe(self._type_label(g)), style="bold magenta")
            t.append("  ")
        if c is not None:
            sign = c.sign
            t.append(f"{sign} ", style=f"bold {SIGN_STYLES[sign]}")
            if key_text:
                t.append(safe(key_text), style=f"bold {SIGN_STYLES[sign]}")
                t.append("  ")
            if c.kind not in ("added", "removed"):
                t.append(c.kind, style=SIGN_STYLES[sign])
                t.append("  ")
            t.append(safe(change_text(c)))  # file-derived keys and reprs, never markup
            return t
        if key_text:
            t.append(safe(key_text), style="bold")
            t.append("  ")
        t.append(safe(self._type_label(g)), style="dim" if key_text else "bold magenta")
        return t

    def _type_label(self, g: _Group) -> str:
        obj = self._resolve(g.keys)
        if obj is _MISSING:
            return ""
        from treetool._diff._nodes import _node_label

        try:
            kind, kids = children(obj, self.diff.is_leaf)
            return _node_label(obj, kind, kids)
        except Exception as e:  # one unreadable node never breaks the view
            return f"⚠ {type(e).__name__}"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.build()


_MISSING = object()


def diff_text(diff: Any, width: int | None = None) -> str:
    """The rendering as plain text (no colours), for `str(diff)` and logs.

    `width` defaults to `output_width()`: `COLUMNS`, the terminal's, or no wrapping.
    """
    from treetool._lowering._plain import to_text

    return to_text(DiffView(diff), width)

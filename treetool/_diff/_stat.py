"""A diff in summary: its changes counted by kind and by top-level path (`treetool diff --stat`,
as `git diff --stat` counts by file).

The top-level path of a change is the first key of its path (`['model']` of
`['model'].layers[0].weight`); a change of the root itself counts under the root (`""`, shown
as `<root>`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from treetool._diff._tree_diff import KINDS, TreeDiff
from treetool._paths._path import Path

__all__ = ["diff_stat", "stat_lines"]

#: the path column of `stat_lines` is at most this wide (longer paths push their row out)
_PATH_COLUMN = 48


def _top(change: Any) -> str:
    keys = change.keys or tuple(Path.parse(change.path)) if change.path else ()
    return str(Path(keys[:1])) if keys else ""


def _counts(changes: list[Any]) -> tuple[dict[str, int], dict[str, int]]:
    signs = Counter(c.sign for c in changes)
    kinds = Counter(c.kind for c in changes)
    return (
        {"added": signs["+"], "removed": signs["-"], "changed": signs["~"]},
        {k: kinds[k] for k in KINDS if kinds[k]},
    )


def diff_stat(d: TreeDiff) -> dict[str, Any]:
    """`diff --stat --json`: `diff --json`'s `equal`, `counts`, `kinds` and `options`, and
    `stat`, one row per top-level path that changed, in tree order: `{"path", "changes",
    "counts", "kinds"}` (no `changes` list: a summary).

    Example:
        >>> import treetool as tt
        >>> d = tt.diff({"a": [1, 2], "b": 1.0}, {"a": [1, 3, 4], "b": 1.5})
        >>> [(r["path"], r["changes"], r["kinds"]) for r in diff_stat(d)["stat"]]
        [("['a']", 2, {'added': 1, 'value': 1}), ("['b']", 1, {'value': 1})]
    """
    groups: dict[str, list[Any]] = {}
    for c in d.changes:
        groups.setdefault(_top(c), []).append(c)
    rows = []
    for path, changes in groups.items():
        counts, kinds = _counts(changes)
        rows.append({"path": path, "changes": len(changes), "counts": counts, "kinds": kinds})
    full = d.to_dict()
    return {k: full[k] for k in ("equal", "counts", "kinds", "options")} | {"stat": rows}


def _tally(counts: dict[str, int], kinds: dict[str, int]) -> str:
    """`+1 added  ~2 changed (1 shape, 1 value)`."""
    parts = [
        f"{sign}{counts[name]} {name}"
        for sign, name in (("+", "added"), ("-", "removed"), ("~", "changed"))
        if counts[name]
    ]
    changed = [f"{n} {k}" for k, n in kinds.items() if k not in ("added", "removed")]
    return "  ".join(parts) + (f" ({', '.join(changed)})" if changed else "")


def stat_lines(d: TreeDiff) -> list[str]:
    """`diff --stat`: a line per top-level path that changed (its path, how many changes,
    of which kinds), then the total, as the head of the full diff says it.

    Paths are the trees' own text: the caller escapes them (`treetool._text.safe`).

    Example:
        >>> import treetool as tt
        >>> d = tt.diff({"a": [1, 2], "b": 1.0}, {"a": [1, 3, 4], "b": 1.5})
        >>> print("\\n".join(stat_lines(d)))
        ['a']  2  +1 added  ~1 changed (1 value)
        ['b']  1  ~1 changed (1 value)
        3 changes  +1 added  ~2 changed (2 value)
        >>> stat_lines(tt.diff([1], [1]))
        ['no differences']
    """
    if not d.changes:
        return ["no differences"]
    rows = diff_stat(d)["stat"]
    names = [r["path"] or "<root>" for r in rows]
    width = min(max(map(len, names)), _PATH_COLUMN)
    digits = len(str(max(r["changes"] for r in rows)))
    lines = [
        f"{name:<{width}}  {r['changes']:>{digits}}  {_tally(r['counts'], r['kinds'])}"
        for name, r in zip(names, rows)
    ]
    n = len(d.changes)
    counts, kinds = _counts(d.changes)
    lines.append(f"{n} change{'s' if n != 1 else ''}  {_tally(counts, kinds)}")
    return lines
